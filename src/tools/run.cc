#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <random>
#include <set>

#include <fmt/ranges.h>

#include "gaf/onnx_io.h"
#include "gaf/tools.h"

namespace gaf::tools {

std::vector<Tensor> random_inputs(const Graph& g, uint64_t seed, int64_t dynamic_dim) {
  return random_inputs(g, seed, {}, dynamic_dim);
}

std::map<std::string, int64_t> parse_dim_sizes(const std::vector<std::string>& specs) {
  std::map<std::string, int64_t> out;
  for (const std::string& s : specs) {
    const size_t eq = s.find('=');
    int64_t size = -1;
    if (eq != std::string::npos && eq > 0 && eq + 1 < s.size()) {
      try {
        size_t used = 0;
        size = std::stoll(s.substr(eq + 1), &used);
        if (used != s.size() - eq - 1) size = -1;
      } catch (const std::exception&) {
        size = -1;
      }
    }
    GAF_CHECK(size >= 0, "--dim '{}': expected NAME=SIZE with a size >= 0, e.g. --dim seq=128", s);
    out[s.substr(0, eq)] = size;
  }
  return out;
}

std::vector<Tensor> random_inputs(const Graph& g, uint64_t seed, const std::map<std::string, int64_t>& sizes,
                                  int64_t other) {
  std::set<std::string> symbols;
  for (const Value* v : g.inputs())
    if (v->type.shape)
      for (const Dim& d : *v->type.shape)
        if (d.is_symbol()) symbols.insert(d.symbol());
  for (const auto& [name, size] : sizes)
    GAF_CHECK(symbols.count(name), "--dim {}={}: no input has a dimension named '{}' (the inputs' named dims: {})",
              name, size, name, symbols.empty() ? std::string("none") : fmt::format("{}", fmt::join(symbols, ", ")));
  std::mt19937_64 rng(seed);
  std::vector<Tensor> out;
  for (const Value* v : g.inputs()) {
    if (v->is_constant()) continue;
    GAF_CHECK(
        v->type.is_tensor(),
        "input '{}' is {}: random inputs are tensors; give its value (--input-pb or --inputs on the command "
        "line, inputs= in Python)",
        v->name(), v->type.to_string());
    GAF_CHECK(v->type.shape, "input '{}' has no known rank: give its data with --input-pb", v->name());
    GAF_CHECK(v->type.dtype != DType::String && v->type.dtype != DType::Undefined,
              "input '{}' is of type {}: random inputs are numbers; give its data with --input-pb", v->name(),
              v->type.dtype == DType::String ? "string" : "unknown element type");
    std::vector<int64_t> dims;
    for (const Dim& d : *v->type.shape) {
      auto it = d.is_symbol() ? sizes.find(d.symbol()) : sizes.end();
      dims.push_back(d.is_static() ? d.value() : it != sizes.end() ? it->second : other);
    }
    Tensor t(v->type.dtype, dims);
    visit_dtype(t.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* p = static_cast<T*>(t.raw());
      std::uniform_real_distribution<double> dist(-1.0, 1.0);
      for (int64_t i = 0; i < t.numel(); ++i) {
        if constexpr (std::is_same_v<T, bool>) p[i] = (rng() & 1) != 0;
        else if constexpr (std::is_integral_v<T>) p[i] = static_cast<T>(rng() % 8);
        else p[i] = from_double<T>(dist(rng));
      }
    });
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<Tensor> load_input_dir(const std::string& dir, const Graph* g) {
  std::vector<const Value*> fed;
  if (g)
    for (const Value* v : g->inputs())
      if (!v->is_constant()) fed.push_back(v);
  std::vector<Tensor> out;
  for (size_t i = 0;; ++i) {
    auto path = std::filesystem::path(dir) / fmt::format("input_{}.pb", i);
    if (!std::filesystem::exists(path)) break;
    out.push_back(i < fed.size() ? onnx_io::load_value(path.string(), fed[i]->type)
                                 : onnx_io::load_tensor(path.string()));
  }
  GAF_CHECK(!out.empty(), "no input_0.pb in '{}'", dir);
  return out;
}

std::vector<Tensor> time_runs(runtime::Session& s, const std::vector<Tensor>& inputs, int iterations,
                              Timing& timing) {
  std::vector<Tensor> outs = s.run(inputs);  // warm-up
  std::vector<double> times;
  for (int i = 0; i < iterations; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    outs = s.run(inputs);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  timing.iterations = iterations;
  if (!times.empty()) {
    std::sort(times.begin(), times.end());
    timing.min_s = times.front();
    timing.median_s = times[times.size() / 2];
  }
  return outs;
}

Comparison compare(const Tensor& actual, const Tensor& expected, double rtol, double atol) {
  Comparison c;
  if (!actual.is_dense() || !expected.is_dense()) {  // sequences item by item; empty optionals
    auto what = [](const Tensor& t) {
      return t.is_none()       ? std::string("an empty optional")
             : t.is_sequence() ? fmt::format("a sequence of {} tensors", t.items().size())
                               : std::string("a tensor");
    };
    if (actual.is_none() != expected.is_none() || actual.is_sequence() != expected.is_sequence() ||
        (actual.is_sequence() && actual.items().size() != expected.items().size())) {
      c.ok = false;
      c.message = fmt::format("got {}, expected {}", what(actual), what(expected));
      return c;
    }
    for (size_t i = 0; actual.is_sequence() && i < actual.items().size(); ++i) {
      Comparison item = compare(actual.items()[i], expected.items()[i], rtol, atol);
      c.max_abs_err = std::max(c.max_abs_err, item.max_abs_err);
      c.max_rel_err = std::max(c.max_rel_err, item.max_rel_err);
      if (!item.ok && c.ok) c.message = fmt::format("sequence item {}: {}", i, item.message);
      c.ok = c.ok && item.ok;
    }
    return c;
  }
  if (actual.dtype() != expected.dtype() || actual.dims() != expected.dims()) {
    c.ok = false;
    c.message = fmt::format("got {}{}, expected {}{}", dtype_name(actual.dtype()), dims_to_string(actual.dims()),
                            dtype_name(expected.dtype()), dims_to_string(expected.dims()));
    return c;
  }
  if (actual.dtype() == DType::String) {
    for (int64_t i = 0; i < actual.numel(); ++i) {
      if (actual.strings()[i] != expected.strings()[i]) {
        c.ok = false;
        c.message = fmt::format("element {}: got \"{}\", expected \"{}\"", i, actual.strings()[i],
                                expected.strings()[i]);
        return c;
      }
    }
    return c;
  }
  for (int64_t i = 0; i < actual.numel(); ++i) {
    double a = actual.get_double(i), e = expected.get_double(i);
    if (std::isnan(a) && std::isnan(e)) continue;
    if (std::isinf(e) && a == e) continue;
    double err = std::abs(a - e);
    c.max_abs_err = std::max(c.max_abs_err, err);
    if (e != 0) c.max_rel_err = std::max(c.max_rel_err, err / std::abs(e));
    if (!(err <= atol + rtol * std::abs(e))) {
      if (c.ok)
        c.message = fmt::format("element {}: got {}, expected {}{}", i, a, e,
                                std::isnan(a) != std::isnan(e) ? " (a NaN on one side only)" : "");
      c.ok = false;
    }
  }
  return c;
}

}  // namespace gaf::tools
