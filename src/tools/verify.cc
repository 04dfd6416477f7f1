// verify, bench and explain: thin tools over fuse_model and Session.
#include <fmt/ranges.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "gaf/onnx_io.h"
#include "gaf/tools.h"

namespace gaf::tools {

Model copy_model(const Model& m) {
  onnx_io::ImportOptions o;
  o.check = false;
  o.infer_shapes = false;
  Model copy = onnx_io::import_model(onnx_io::export_model(m), "", o);
  infer_fused_body_shapes(*copy.graph);
  return copy;
}

namespace {

// The unfused graph with every intermediate value also returned, so a run exposes all of them by name.
std::map<std::string, Tensor> run_exposing_all(const Model& m, const std::vector<Tensor>& inputs) {
  Model probe = copy_model(m);
  Graph& g = *probe.graph;
  std::set<const Value*> outs(g.outputs().begin(), g.outputs().end());
  for (const Node* n : g.nodes())
    for (Value* v : n->outputs())
      if (!v->absent_output && !outs.count(v)) {
        g.add_output(v);
        outs.insert(v);
      }
  runtime::Session s(g);
  auto values = s.run(inputs);
  std::map<std::string, Tensor> by_name;
  for (size_t i = 0; i < values.size(); ++i) by_name[g.outputs()[i]->name()] = values[i];
  return by_name;
}

// Runs one fused node alone on reference inputs; returns its outputs.
std::vector<Tensor> run_group_alone(const Node& fused, const std::map<std::string, Tensor>& ref,
                                    std::vector<std::string>& missing) {
  Graph g;
  std::vector<Value*> ins;
  std::map<std::string, Tensor> feeds;
  for (const Value* v : fused.inputs()) {
    if (v->is_constant()) {
      ins.push_back(g.find_value(v->name()) ? g.find_value(v->name()) : g.add_constant(v->name(), v->constant()));
      continue;
    }
    Value* in = g.find_value(v->name());
    if (!in) {
      in = g.add_input(v->name(), v->type);
      auto it = ref.find(v->name());
      if (it == ref.end()) {
        missing.push_back(v->name());
      } else if (it->second.dtype() != v->type.dtype && is_floating(it->second.dtype()) &&
                 is_floating(v->type.dtype)) {
        // The group reads a value the backend stores narrower (16-bit storage): the reference rounded to it.
        Tensor t(v->type.dtype, it->second.dims());
        for (int64_t i = 0; i < t.numel(); ++i) t.set_double(i, it->second.get_double(i));
        feeds[v->name()] = std::move(t);
      } else {
        feeds[v->name()] = it->second;
      }
    }
    ins.push_back(in);
  }
  std::vector<std::string> names;
  for (const Value* o : fused.outputs()) names.push_back(o->name());
  Node* n = g.add_node(fused.op_type, ins, names, fused.name);
  n->domain = fused.domain;
  n->body = fused.body->clone();
  for (Value* o : n->outputs()) g.add_output(o);
  if (!missing.empty()) return {};
  runtime::Session s(g);
  return s.run(feeds);
}

// Machine epsilon of a 16-bit float type, 0 for any other: the unfused ops round to it after each op.
double half_epsilon(DType t) { return t == DType::Float16 ? 0x1p-10 : t == DType::BFloat16 ? 0x1p-7 : 0.0; }

double largest_magnitude(const Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i)
    if (const double x = std::abs(t.get_double(i)); std::isfinite(x)) m = std::max(m, x);
  return m;
}

// A fused group's member names: what skip_nodes takes (a node's name, its first output's for an unnamed one).
std::vector<std::string> member_names(const Node& group) {
  std::vector<std::string> names;
  for (const Node* b : group.body->nodes())
    if (b->op_type != "Constant") names.push_back(b->display_name());
  return names;
}

// The edges inside a fused group as forbid patterns ("Conv -> Relu"), in the body's order, each once.
std::vector<std::string> edge_patterns(const Node& group) {
  std::vector<std::string> out;
  for (const Node* b : group.body->nodes())
    for (const Value* v : b->inputs())
      if (v && v->producer() && v->producer()->op_type != "Constant") {
        std::string p = fmt::format("{} -> {}", v->producer()->op_type, b->op_type);
        if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
      }
  return out;
}

}  // namespace

double precision_tolerance(PrecisionMode mode) {
  switch (mode) {
    case PrecisionMode::Tf32: return 1e-2;
    case PrecisionMode::Bf16Mixed: return 2e-2;
    case PrecisionMode::Fp16Mixed: return 1e-2;
    case PrecisionMode::Int8Weights: return 5e-2;
    case PrecisionMode::Fp32: return 0;
  }
  return 0;
}

VerifyResult verify_fusion(const Model& model, const FuseOptions& opts, std::vector<Tensor> inputs, double rtol,
                           double atol) {
  VerifyResult r;
  if (inputs.empty()) inputs = random_inputs(*model.graph, 0);
  Model fused = copy_model(model);
  const FuseResult fr = fuse_model(fused, opts);
  // Compressed weights (the CPU backend) and 16-bit storage (the CUDA backend's plan, low-precision-storage)
  // change the results by design: their mode's error bound, relative to each output's largest magnitude, on top
  // of rtol/atol. A float16/bfloat16 value differs by the roundings between the ops.
  const PrecisionMode mode = opts.fusion.rules.precision_mode;
  const auto stored = fr.rewrites.find("low-precision-storage");
  const bool narrow_storage = stored != fr.rewrites.end() && stored->second > 0;
  // On the CPU TF32 changes nothing, and fp16_mixed only what a 16-bit plan stores.
  const double mode_tol = mode == PrecisionMode::Tf32 || (mode == PrecisionMode::Fp16Mixed && !narrow_storage)
                              ? 0
                              : precision_tolerance(mode);
  const char* mode_what = mode == PrecisionMode::Int8Weights ? "int8_weights"
                          : narrow_storage ? (mode == PrecisionMode::Bf16Mixed ? "bf16_mixed storage"
                                                                               : "fp16_mixed storage")
                                           : "bf16_mixed weights";
  auto tolerance_for = [&](const Tensor& expected) {
    const double half = 4 * half_epsilon(expected.dtype());
    const double scaled = expected.dtype() == DType::Float ? mode_tol : half;
    const double m = scaled > 0 ? largest_magnitude(expected) : 0;
    return std::pair{std::max(rtol, half), std::max(atol, scaled * m)};
  };
  auto matches = [&](const Tensor& actual, const Tensor& expected) {
    const auto [rt, at] = tolerance_for(expected);
    return compare(actual, expected, rt, at);
  };
  r.tolerance = mode_tol == 0
                    ? fmt::format("rtol {:g}, atol {:g}", rtol, atol)
                    : fmt::format("rtol {:g}, atol {:g} or {:g}% of each output's largest magnitude ({})", rtol, atol,
                                  mode_tol * 100, mode_what);
  runtime::Session su(*model.graph), sf(*fused.graph);
  auto ou = su.run(inputs);
  auto of = sf.run(inputs);
  bool half_outputs = false;
  for (size_t i = 0; i < ou.size(); ++i) {
    half_outputs |= half_epsilon(ou[i].dtype()) > 0;
    Comparison c = matches(of[i], ou[i]);
    r.ok &= c.ok;
    r.outputs.push_back(fmt::format("{}: {} (max abs error {:.3g}, max rel error {:.3g}){}{}",
                                    model.graph->outputs()[i]->name(), c.ok ? "match" : "MISMATCH", c.max_abs_err,
                                    c.max_rel_err, c.ok ? "" : "; ", c.message));
  }
  if (half_outputs)
    r.tolerance +=
        "; float16/bfloat16 outputs: at least 4 epsilons of their type (float16 2^-8, bfloat16 2^-5), "
        "relative and of the output's largest magnitude: unfused, each op rounds to the type";
  if (r.ok) return r;

  // Bisect: each fused group alone on the unfused run's values of its inputs.
  auto ref = run_exposing_all(model, inputs);
  std::vector<const Node*> failed_alone, not_run_alone;
  for (const Node* n : fused.graph->nodes()) {
    if (!n->body) continue;
    const std::string group =
        fmt::format("{} ({} ops: {})", n->op_type, n->body->num_nodes(), fmt::join(member_names(*n), ", "));
    std::vector<std::string> outside;
    for (const Value* o : n->outputs())
      if (!ref.count(o->name())) outside.push_back(o->name());
    auto not_bisected = [&](const char* what, const std::vector<std::string>& names, const char* made_by) {
      r.unchecked.push_back(fmt::format("{}: {} ('{}') exist only in the fused graph ({} made them)", group,
                                        what, fmt::join(names, "', '"), made_by));
      not_run_alone.push_back(n);
    };
    if (outside.size() == size_t(n->num_outputs())) {
      not_bisected("not compared: its outputs", outside, "a rewrite");
      continue;
    }
    std::vector<std::string> missing;
    auto outs = run_group_alone(*n, ref, missing);
    if (!missing.empty()) {
      not_bisected("not run alone: its inputs", missing, "a rewrite or the channels-last layout");
      continue;
    }
    for (size_t k = 0; k < outs.size(); ++k) {
      auto it = ref.find(n->output(int(k))->name());
      if (it == ref.end()) continue;
      Comparison c = matches(outs[k], it->second);
      if (!c.ok) {
        r.culprits.push_back(fmt::format("{}: output '{}' {}", group, n->output(int(k))->name(), c.message));
        failed_alone.push_back(n);
        break;
      }
    }
  }

  // A rule that avoids the mismatch, each candidate checked by fusing with it and comparing every output:
  // first forbidding one edge of a responsible group (the rest of the model fuses as before), then skipping
  // the nodes of the responsible groups: those that failed alone, or when none did, those that could not be
  // run alone.
  const std::vector<const Node*>& suspects = failed_alone.empty() ? not_run_alone : failed_alone;
  auto avoids = [&](FuseOptions candidate) {
    Model again = copy_model(model);
    fuse_model(again, candidate);
    runtime::Session s(*again.graph);
    auto o = s.run(inputs);
    for (size_t i = 0; i < o.size(); ++i)
      if (!matches(o[i], ou[i]).ok) return false;
    return true;
  };
  constexpr size_t kMaxTries = 8;
  size_t tries = 0;
  for (const Node* n : suspects) {
    for (const std::string& pattern : edge_patterns(*n)) {
      if (tries++ == kMaxTries) break;
      FuseOptions candidate = opts;
      candidate.fusion.rules.rules.push_back(FusionRule{Pattern::parse(pattern), FusionRule::Action::Forbid,
                                                        "verify: fused, it differs from unfused"});
      if (!avoids(candidate)) continue;
      r.rule = fmt::format(R"({{"rules": [{{"pattern": "{}", "action": "forbid", "reason": "verify"}}]}})",
                           pattern);
      r.rule_effect = fmt::format("never fuses {} (in group {})", pattern, n->op_type);
      return r;
    }
  }
  // skip_nodes takes the model's own node names: members a rewrite made or renamed have none to give.
  std::set<std::string> named;
  for (const Node* n : model.graph->nodes())
    if (!n->name.empty()) named.insert(n->name);
  std::vector<std::string> skip;
  for (const Node* n : suspects)
    for (const std::string& name : member_names(*n))
      if (named.count(name) && std::find(skip.begin(), skip.end(), name) == skip.end()) skip.push_back(name);
  FuseOptions candidate = opts;
  candidate.fusion.rules.skip_nodes.insert(skip.begin(), skip.end());
  if (!skip.empty() && avoids(candidate)) {
    nlohmann::json j = {{"global", {{"skip_nodes", skip}}}};
    r.rule = j.dump();
    r.rule_effect = fmt::format("keeps the {} nodes of the suspect group(s) unfused", skip.size());
  }
  return r;
}

std::string VerifyResult::text() const {
  std::string s = tolerance.empty() ? "" : "tolerance: " + tolerance + "\n";
  for (const auto& o : outputs) s += o + "\n";
  for (const auto& c : culprits) s += "mismatch traced to fused group " + c + "\n";
  for (const auto& u : unchecked) s += "fused group " + u + "\n";
  if (!ok && culprits.empty() && unchecked.empty())
    s += "no fused group differs when run alone: the difference comes from a rewrite (try --opt-level 1, or "
         "skip_passes in a rules file)\n";
  if (!rule.empty())
    s += "a rules file that avoids it (checked: it " + rule_effect + ", and then outputs match):\n" + rule +
         "\n";
  else if (!ok)
    s += "no rule that splits or skips the groups above makes the outputs match\n";
  s += ok ? "verify: fused and unfused outputs match\n" : "verify: FAILED\n";
  return s;
}

BenchResult bench_fusion(const Model& model, const FuseOptions& opts, const std::vector<Tensor>& inputs,
                         int iterations, const runtime::SessionOptions& session) {
  BenchResult r;
  Model fused = copy_model(model);
  FuseResult fr = fuse_model(fused, opts);
  r.unfused_kernels = fr.before.kernels;
  r.fused_kernels = fr.after.kernels;
  runtime::Session su(*model.graph, session), sf(*fused.graph, session);
  r.generated = sf.generated_kernels();
  r.compile = sf.compile_stats();
  r.fallbacks = sf.codegen_fallbacks();
  auto ou = su.run(inputs);
  auto of = sf.run(inputs);
  for (size_t i = 0; i < ou.size(); ++i) {
    // Error relative to the output's scale: max |fused - unfused| / max |unfused|.
    Comparison c = compare(of[i], ou[i], 0, 0);
    double scale = 0;
    for (int64_t k = 0; k < ou[i].numel(); ++k) scale = std::max(scale, std::abs(ou[i].get_double(k)));
    r.max_rel_err = std::max(r.max_rel_err, scale > 0 ? c.max_abs_err / scale : c.max_abs_err);
  }
  std::vector<double> tu, tf;
  Progress progress("bench", iterations);
  for (int i = 0; i < iterations; ++i) {
    progress.step(i);
    for (int which = 0; which < 2; ++which) {
      runtime::Session& s = (i + which) % 2 ? sf : su;  // alternate which goes first
      auto t0 = std::chrono::steady_clock::now();
      s.run(inputs);
      double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      (&s == &su ? tu : tf).push_back(dt);
    }
  }
  progress.step(iterations);
  auto fill = [&](std::vector<double>& v, Timing& t) {
    std::sort(v.begin(), v.end());
    t.iterations = int(v.size());
    t.min_s = v.front();
    t.median_s = v[v.size() / 2];
  };
  if (iterations > 0) {
    fill(tu, r.unfused);
    fill(tf, r.fused);
  }
  return r;
}

std::string BenchResult::text() const {
  std::string s = fmt::format(
      "unfused: {} kernels, median {:.3f} ms (min {:.3f})\nfused:   {} kernels, median {:.3f} ms (min {:.3f}); "
      "{} generated kernels, {} fused groups run op by op\n"
      "speedup (unfused / fused, medians of {} interleaved runs): {:.2f}x; max difference relative to the output scale {:.2g}\n",
      unfused_kernels, unfused.median_s * 1e3, unfused.min_s * 1e3, fused_kernels, fused.median_s * 1e3,
      fused.min_s * 1e3, generated, fallbacks.size(), unfused.iterations, ratio(), max_rel_err);
  if (compile.units > 0) {
    const std::string from =
        compile.compiled == 0 ? "all from the kernel cache"
        : compile.compiled == compile.units
            ? "cold: none in the kernel cache"
            : fmt::format("{} compiled, the others from the kernel cache", compile.compiled);
    s += fmt::format("generated kernels built in {:.2f} s: {} translation unit(s), {}\n", compile.seconds,
                     compile.units, from);
  }
  for (const auto& [node, why] : fallbacks) s += "  op by op: " + node + ": " + why + "\n";
  return s;
}

std::string explain(const FuseResult& r, const std::string& node) {
  std::ostringstream os;
  for (const auto& d : r.decisions) {
    if (!node.empty() && d.producer != node && d.consumer != node && d.value != node) continue;
    os << fmt::format("{:<6} {} -> {} [{}] benefit {:.3g} us{}{}\n", d.fused ? "fused" : "kept", d.producer,
                      d.consumer, reason_name(d.reason), d.benefit_s * 1e6, d.detail.empty() ? "" : ": ", d.detail);
  }
  for (const auto& g : r.groups) {
    if (!node.empty() && std::find(g.nodes.begin(), g.nodes.end(), node) == g.nodes.end()) continue;
    os << fmt::format("group {}: {} ops, saves {:.2f} MB, {:.3g} us{}\n", g.name, g.ops.size(),
                      g.bytes_saved / 1e6, g.benefit_s * 1e6, g.scope.empty() ? "" : " (in " + g.scope + ")");
  }
  // Patterns a recognition pass began to match at a node and gave up on, with the check that failed.
  for (const NearMiss& m : r.near_misses) {
    if (!node.empty() && m.anchor.find("'" + node + "'") == std::string::npos && m.check.find("'" + node + "'") ==
                                                                                    std::string::npos)
      continue;
    os << fmt::format("near miss {} at {}: {}\n", m.pass, m.anchor, m.check);
  }
  return os.str();
}

}  // namespace gaf::tools
