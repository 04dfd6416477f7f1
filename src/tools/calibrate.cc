// graph-autofusion calibrate: this machine's numbers for the cost model, measured in under a minute.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "gaf/onnx_io.h"
#include "gaf/session.h"
#include "gaf/tools.h"

namespace gaf::tools {

namespace {

using Clock = std::chrono::steady_clock;

// Best of `reps` timings of f, in seconds (the best run is the machine's rate; the others carry noise).
template <class F>
double best_of(int reps, F&& f) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

// Copy bandwidth over all cores, counting bytes read and written (as the cost model counts traffic).
double copy_bandwidth(size_t bytes, int reps) {
  const size_t n = bytes / sizeof(float);
  std::vector<float> a(n, 1.0f), b(n, 0.0f);
  const double t = best_of(reps, [&] {
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < 64; ++c) {
      const size_t lo = n * size_t(c) / 64, hi = n * size_t(c + 1) / 64;
      std::memcpy(b.data() + lo, a.data() + lo, (hi - lo) * sizeof(float));
    }
  });
  return 2.0 * double(n * sizeof(float)) / t;
}

double time_model(const std::string& text, int reps, bool fuse, int64_t dim = 1) {
  Model m = onnx_io::parse_model_text(text);
  if (fuse) {
    FuseOptions opts;
    opts.fusion.opt_level = 2;
    fuse_model(m, opts);
  }
  runtime::Session s(*m.graph);
  const auto inputs = random_inputs(*m.graph, 1, dim);
  s.run(inputs);  // warm-up: kernels compiled, weights packed
  return best_of(reps, [&] { s.run(inputs); });
}

const char* kHeader = "<ir_version: 8, opset_import: [\"\" : 17]>\n";

}  // namespace

Target calibrate(bool quick, std::string* report) {
  Target t = Target::cpu_host();
  t.name = "calibrated";
  const int reps = quick ? 3 : 7;
  t.cores = int(std::max(1u, std::thread::hardware_concurrency()));
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  if (l2 > 0) t.onchip_bytes = double(l2);
  t.dram_bandwidth = copy_bandwidth(size_t(quick ? 64 : 256) << 20, reps);

  // GEMM rate: one square product through the runtime (oneDNN), weights constant.
  const int g = quick ? 512 : 1024;
  const std::string gemm =
      fmt::format("{}g (float[{},{}] a, float[{},{}] b) => (float[{},{}] y) {{ y = MatMul(a, b) }}", kHeader,
                  g, g, g, g, g, g);
  t.matrix_flops = 2.0 * double(g) * g * g / time_model(gemm, reps, false);

  // Dispatch cost: a chain of 64 tiny ops run op by op; each costs about one dispatch.
  std::string chain = std::string(kHeader) + "g (float[8] x) => (float[8] y) {\n  v0 = Relu(x)\n";
  for (int i = 1; i < 64; ++i) chain += fmt::format("  v{} = Neg(v{})\n", i, i - 1);
  chain += "  y = Relu(v63)\n}";
  t.launch_overhead_s = time_model(chain, reps, false) / 65;

  // Elementwise arithmetic: a fused chain of 32 multiply-adds on a cache-resident tensor, one generated
  // kernel.
  const int64_t n = 1 << 16;
  std::string ew = fmt::format(
      "{}g (float[{}] x) => (float[{}] y) {{\n  c = Constant <value = float {{1.0001}}> ()\n"
      "  a0 = Mul(x, c)\n",
      kHeader, n, n);
  for (int i = 1; i < 32; ++i) ew += fmt::format("  a{} = {}(a{}, c)\n", i, i % 2 ? "Add" : "Mul", i - 1);
  ew += "  y = Relu(a31)\n}";
  t.vector_flops = 33.0 * double(n) / time_model(ew, reps * 4, true);

  if (report)
    *report = fmt::format(
        "copy bandwidth      {:8.1f} GB/s   (read + write, {} threads)\n"
        "GEMM                {:8.1f} GFLOP/s ({}^3, fp32)\n"
        "elementwise         {:8.1f} GFLOP/s (a fused chain in cache)\n"
        "dispatch            {:8.2f} us per op\n"
        "L2 per core         {:8.0f} KiB\n",
        t.dram_bandwidth / 1e9, t.cores, t.matrix_flops / 1e9, g, t.vector_flops / 1e9,
        t.launch_overhead_s * 1e6, t.onchip_bytes / 1024);
  return t;
}

}  // namespace gaf::tools
