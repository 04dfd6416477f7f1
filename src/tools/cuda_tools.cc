// verify and bench with --device cuda: the CUDA backend against the CPU runtime, and against itself unfused.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "gaf/cuda.h"
#include "gaf/passes.h"
#include "gaf/session.h"
#include "gaf/tools.h"

namespace gaf::tools {

namespace {

// Fused for the GPU whatever backend the target file names: the CUDA backend's passes (no channels-last layout:
// cuDNN takes NCHW) and the groups its dialect prints.
Model fused_for_gpu(const Model& model, const FuseOptions& opts) {
  Model fused = copy_model(model);
  FuseOptions o = opts;
  o.target.backend = "cuda";
  o.fusion.backend = nullptr;
  fuse_model(fused, o);
  return fused;
}

}  // namespace

Model unfused_for_gpu(const Model& model) {
  Model m = copy_model(model);
  PassManager pm;
  pm.add_canonicalisation(false);
  pm.add(make_dead_code_elimination());
  PassContext ctx;
  ctx.evaluator = &runtime::constant_evaluator();
  pm.run(*m.graph, ctx);
  return m;
}

namespace {

cuda::Options cuda_options(const FuseOptions& opts) {
  cuda::Options o;
  o.tf32 = opts.fusion.rules.precision_mode == PrecisionMode::Tf32;
  return o;
}

// How far the device may be from the CPU's fp32 reference under each precision mode, relative to an output's
// largest magnitude (precision_tolerance): fp32 products and kernels agree to rounding (1e-5); TF32 rounds
// product operands to 10 mantissa bits; bf16_mixed / fp16_mixed store operands and values between kernels in 8 /
// 11 bits (fp32 accumulation).
std::pair<double, const char*> cuda_tolerance(PrecisionMode mode) {
  switch (mode) {
    case PrecisionMode::Tf32: return {precision_tolerance(mode), "tf32 products"};
    case PrecisionMode::Bf16Mixed:
      return {precision_tolerance(mode), "bf16_mixed: bfloat16 storage, fp32 accumulation"};
    case PrecisionMode::Fp16Mixed:
      return {precision_tolerance(mode), "fp16_mixed: float16 storage, fp32 accumulation"};
    default: return {1e-5, "fp32"};
  }
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::fabs(t.get_double(i)));
  return m;
}

double max_diff(const Tensor& a, const Tensor& b) {
  GAF_CHECK(a.dims() == b.dims() && a.dtype() == b.dtype(), "device and CPU outputs differ in shape or type");
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double d = std::fabs(a.get_double(i) - b.get_double(i));
    if (std::isnan(d)) d = std::isnan(a.get_double(i)) && std::isnan(b.get_double(i)) ? 0 : INFINITY;
    m = std::max(m, d);
  }
  return m;
}

// The step a mismatch starts at: the model fused for the GPU once more, every node output returned, run on the
// device and on the CPU runtime (the same fused graph) from the same inputs; the first value in node order whose
// difference passes the tolerance names its node and how the device ran it.
std::string first_differing_step(const Model& model, const FuseOptions& opts, const std::vector<Tensor>& inputs,
                                 double tol) {
  Model probe = fused_for_gpu(model, opts);
  Graph& g = *probe.graph;
  std::set<const Value*> outs(g.outputs().begin(), g.outputs().end());
  for (const Node* n : g.nodes())
    for (Value* v : n->outputs())
      if (!v->absent_output && outs.insert(v).second) g.add_output(v);
  cuda::Options co = cuda_options(opts);
  co.check_steps = true;
  cuda::Session gpu(g, co);
  runtime::Session cpu(g);
  std::vector<Tensor> got = gpu.run(inputs), want = cpu.run(inputs);
  for (const Node* n : g.nodes())
    for (const Value* v : n->outputs()) {
      auto it = std::find(g.outputs().begin(), g.outputs().end(), v);
      if (v->absent_output || it == g.outputs().end()) continue;
      const size_t o = size_t(it - g.outputs().begin());
      if (!got[o].defined() || got[o].dtype() != want[o].dtype() || got[o].dims() != want[o].dims()) continue;
      const double d = max_diff(got[o], want[o]), scale = max_abs(want[o]);
      if (d <= tol * std::max(scale, 1e-30)) continue;
      std::string step = "a view of its input";
      for (const cuda::Step& st : gpu.steps())
        if (st.node == n->describe()) step = st.how;
      return fmt::format("value '{}' of {} ({}): max |cuda - cpu| {:.3g}, scale {:.3g}; the values before it match",
                         v->name(), n->describe(), step, d, scale);
    }
  return "every intermediate value matches: the outputs differ only after them";
}

}  // namespace

CudaVerifyResult verify_cuda(const Model& model, const FuseOptions& opts, std::vector<Tensor> inputs) {
  if (inputs.empty()) inputs = random_inputs(*model.graph, 0);
  CudaVerifyResult r;
  const auto [tol, mode] = cuda_tolerance(opts.fusion.rules.precision_mode);
  r.tolerance = fmt::format("|cuda - cpu| <= {:g} x max|cpu| per output ({})", tol, mode);
  runtime::Session cpu(*model.graph);
  std::vector<Tensor> expected = cpu.run(inputs);
  Model fused = fused_for_gpu(model, opts);
  cuda::Options co = cuda_options(opts);
  co.check_steps = true;
  cuda::Session gpu(*fused.graph, co);
  r.device = gpu.device_name();
  for (const cuda::Step& s : gpu.steps()) r.plan.push_back(s.node + ": " + s.how);
  std::vector<Tensor> actual = gpu.run(inputs);
  for (size_t o = 0; o < actual.size(); ++o) {
    CudaVerifyResult::Output out;
    out.name = model.graph->outputs()[o]->name();
    out.max_abs = max_diff(actual[o], expected[o]);
    out.scale = max_abs(expected[o]);
    out.ok = out.max_abs <= tol * std::max(out.scale, 1e-30);
    r.ok &= out.ok;
    r.outputs.push_back(out);
  }
  if (!r.ok) r.culprit = first_differing_step(model, opts, inputs, tol);
  return r;
}

std::string CudaVerifyResult::text() const {
  std::string s = fmt::format("device: {}\nplan:\n", device);
  for (const std::string& p : plan) s += "  " + p + "\n";
  for (const Output& o : outputs)
    s += fmt::format("{} {}: max |cuda - cpu| {:.3g}, scale {:.3g} ({:.3g} of it)\n",
                     o.ok ? "ok      " : "MISMATCH", o.name, o.max_abs, o.scale,
                     o.scale > 0 ? o.max_abs / o.scale : o.max_abs);
  s += fmt::format("tolerance: {}\n{}\n", tolerance,
                   ok ? "verify: the CUDA backend matches the CPU"
                      : "verify: MISMATCH between the CUDA backend and the CPU");
  return s;
}

std::string CudaVerifyResult::json() const {
  nlohmann::json j;
  j["ok"] = ok;
  j["device"] = device;
  j["tolerance"] = tolerance;
  j["plan"] = plan;
  if (!culprit.empty()) j["culprit"] = culprit;
  for (const Output& o : outputs)
    j["outputs"].push_back({{"name", o.name}, {"max_abs", o.max_abs}, {"scale", o.scale}, {"ok", o.ok}});
  return j.dump(2);
}

CudaBenchResult bench_cuda(const Model& model, const FuseOptions& opts, const std::vector<Tensor>& given,
                           int iterations) {
  std::vector<Tensor> inputs = given.empty() ? random_inputs(*model.graph, 0) : given;
  CudaBenchResult r;
  r.iterations = iterations;
  const int warmup = std::max(5, iterations / 10);
  Model unfused = unfused_for_gpu(model);
  Model fused = fused_for_gpu(model, opts);
  cuda::Options o = cuda_options(opts);
  std::vector<Tensor> ref, got;
  {
    cuda::Session s(*unfused.graph, o);  // timed step by step; its graph only counts the kernels
    r.device = s.device_name();
    r.unfused_ms = s.median_ms(inputs, iterations, warmup, false);
    r.unfused_kernels = s.kernels_per_run();
    r.unfused_steps = s.steps().size();
    ref = s.run(inputs);
  }
  {
    cuda::Session s(*fused.graph, o);
    r.fused_ms = s.median_ms(inputs, iterations, warmup, false);
    r.fused_graph_ms = s.median_ms(inputs, iterations, warmup, true);
    r.fused_kernels = s.kernels_per_run();
    r.fused_steps = s.steps().size();
    r.generated = s.generated_kernels();
    r.arena_bytes = s.arena_bytes();
    r.capture_error = s.capture_error();
    for (const cuda::Step& st : s.steps()) r.plan.push_back(st.node + ": " + st.how);
    got = s.run(inputs);
  }
  for (size_t i = 0; i < got.size() && i < ref.size(); ++i) {
    double scale = max_abs(ref[i]);
    double d = max_diff(got[i], ref[i]);
    r.max_rel_err = std::max(r.max_rel_err, scale > 0 ? d / scale : d);
  }
  return r;
}

std::string profile_cuda(const Model& model, const FuseOptions& opts, const std::vector<Tensor>& given,
                         int iterations, int top) {
  std::vector<Tensor> inputs = given.empty() ? random_inputs(*model.graph, 0) : given;
  Model fused = fused_for_gpu(model, opts);
  cuda::Session s(*fused.graph, cuda_options(opts));
  const std::vector<double> ms = s.step_ms(inputs, std::max(iterations, 1));
  const std::vector<cuda::Step>& steps = s.steps();
  std::vector<size_t> order(steps.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (top > 0) {
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ms[a] > ms[b]; });
    order.resize(std::min(order.size(), size_t(top)));
  }
  double total = 0;
  std::map<std::string, double> by_kind;
  for (size_t i = 0; i < steps.size(); ++i) {
    total += ms[i];
    const std::string& how = steps[i].how;
    by_kind[how.substr(0, how.find_first_of(" (0123456789"))] += ms[i];
  }
  std::string out = fmt::format("{}: {} steps, {:.3f} ms step by step (medians of {} runs)\n",
                                s.device_name(), steps.size(), total, iterations);
  for (size_t i : order)
    out += fmt::format("  {:8.4f} ms  {:5.1f}%  {}: {}\n", ms[i], total > 0 ? 100 * ms[i] / total : 0.0,
                       steps[i].node, steps[i].how);
  out += "by kind:\n";
  for (const auto& [kind, t] : by_kind) out += fmt::format("  {:8.4f} ms  {}\n", t, kind);
  return out;
}

std::string CudaBenchResult::text() const {
  return fmt::format(
             "device: {}\nunfused            {:8.3f} ms  {} steps\nfused              {:8.3f} ms  {} steps "
             "({} generated "
             "kernels)\nfused, CUDA graph  {:8.3f} ms  {} kernels per run\nspeed-up: {:.2f}x fused, {:.2f}x "
             "fused in a "
             "CUDA graph (medians of {} runs; fused vs unfused max error {:.2g} of the output scale)\n",
             device, unfused_ms, unfused_steps, fused_ms, fused_steps, generated, fused_graph_ms,
             fused_kernels, fused_ms > 0 ? unfused_ms / fused_ms : 0,
             fused_graph_ms > 0 ? unfused_ms / fused_graph_ms : 0, iterations, max_rel_err) +
         (capture_error.empty() ? "" : "no CUDA graph: " + capture_error + "\n");
}

std::string CudaBenchResult::json() const {
  nlohmann::json j = {{"device", device},
                      {"unfused_ms", unfused_ms},
                      {"fused_ms", fused_ms},
                      {"fused_graph_ms", fused_graph_ms},
                      {"unfused_kernels", unfused_kernels},
                      {"fused_kernels", fused_kernels},
                      {"unfused_steps", unfused_steps},
                      {"fused_steps", fused_steps},
                      {"generated_kernels", generated},
                      {"arena_bytes", arena_bytes},
                      {"iterations", iterations},
                      {"max_rel_err", max_rel_err},
                      {"capture_error", capture_error},
                      {"plan", plan}};
  return j.dump(2);
}

}  // namespace gaf::tools
