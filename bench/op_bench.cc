// Every single-input elementwise op of the op table, run op by op over 16M fp32 elements, against a copy's rate
// measured in the same run: the runtime's kernel per op, so a scalar libm loop or a conversion left scalar shows
// as a rate far under the copy's (Sin was 2.6 GB/s, gaf.Gelu 3.2, against ~55).
//
//   gaf_op_bench [--iterations N] [--filter SUBSTR] [--elements N]
//
// Per op: median ms, GB/s (bytes read and written / median), the share of the copy rate; ops under a third of it
// are marked. Ops that need other inputs or attributes than one float tensor are listed as not run, with why.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>

#include "gaf/builder.h"
#include "gaf/op_registry.h"
#include "gaf/session.h"
#include "gaf/tools.h"

namespace {

using namespace gaf;

double median(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Read + write bytes per second of a parallel copy of `n` floats.
double copy_rate(int64_t n, int iterations) {
  std::vector<float> a(size_t(n), 1.0f), b(size_t(n), 0.0f);
  std::vector<double> t;
  for (int i = 0; i < iterations; ++i) {
    auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < 64; ++c) std::memcpy(b.data() + c * (n / 64), a.data() + c * (n / 64), n / 64 * 4);
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return 2.0 * double(n) * 4 / median(t);
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 10;
  int64_t n = int64_t(16) << 20;
  std::string filter;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--iterations" && i + 1 < argc) iterations = std::max(1, std::atoi(argv[++i]));
    else if (a == "--filter" && i + 1 < argc) filter = argv[++i];
    else if (a == "--elements" && i + 1 < argc) n = std::max<int64_t>(64, std::atoll(argv[++i]) / 64 * 64);
    else {
      std::cerr << "usage: gaf_op_bench [--iterations N] [--filter SUBSTR] [--elements N]\n";
      return 2;
    }
  }
  const double copy = copy_rate(n, 5);
  std::cout << fmt::format("copy (read+write, {} threads, measured now): {:.1f} GB/s; {} fp32 elements per op\n\n",
                           omp_get_max_threads(), copy / 1e9, n);
  std::cout << fmt::format("{:<28} {:>9} {:>8} {:>9}\n", "op", "ms", "GB/s", "% of copy");
  std::vector<std::string> slow, not_run;
  for (const auto& [key, info] : OpRegistry::instance().all()) {
    if (info.kind != OpKind::Elementwise || !info.scalar) continue;
    const std::string name = key.second.empty() ? key.first : key.second + "." + key.first;
    if (!filter.empty() && name.find(filter) == std::string::npos) continue;
    try {
      Model m;
      GraphBuilder b(m);
      Value* x = b.input("x", DType::Float, {n});
      Value* y = b.op(key.first, {x});
      y->producer()->domain = key.second;
      b.output(y);
      b.finish();
      runtime::SessionOptions options;
      options.adapt_threads = false;  // the copy's thread count throughout
      runtime::Session s(*m.graph, options);
      const std::vector<Tensor> in = tools::random_inputs(*m.graph, 1);
      // The output's element type as the run gives it (shape inference leaves ops newer than the ONNX library's
      // opset, such as Mish, untyped). The first run also takes the pages and one-time setup.
      const int64_t out_bytes = int64_t(dtype_size(s.run(in)[0].dtype())) * n;
      std::vector<double> t;
      for (int i = 0; i < iterations; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        s.run(in);
        t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      const double sec = median(t), rate = double(4 * n + out_bytes) / sec;
      if (rate > 10 * copy) {  // nothing moved: the output is the input (Identity, Dropout at inference)
        std::cout << fmt::format("{:<28} {:>9.3f} {:>8} {:>9}  the output aliases the input\n", name, sec * 1e3, "-",
                                 "-");
        continue;
      }
      const bool under = rate < copy / 3;
      if (under) slow.push_back(name);
      std::cout << fmt::format("{:<28} {:>9.2f} {:>8.1f} {:>8.0f}%{}\n", name, sec * 1e3, rate / 1e9,
                               100 * rate / copy, under ? "  under a third of the copy rate" : "");
    } catch (const std::exception& e) {
      std::string why = e.what();
      why = why.substr(0, why.find('\n'));
      not_run.push_back(fmt::format("{} ({})", name, why.substr(0, 100)));
    }
  }
  std::cout << fmt::format("\nunder a third of the copy rate: {}\n",
                           slow.empty() ? std::string("none") : fmt::format("{}", fmt::join(slow, ", ")));
  if (!not_run.empty())
    std::cout << fmt::format("not run (one float input is not enough): {}\n", fmt::join(not_run, "; "));
  return 0;
}
