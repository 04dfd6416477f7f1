// profile_fusion: where the time goes, node by node, before and after fusion.
#include <algorithm>
#include <map>

#include "gaf/session.h"
#include "gaf/tools.h"

namespace gaf::tools {

namespace {

std::string table(const std::string& title, const Model& m, const std::vector<Tensor>& inputs, int iterations,
                  int top) {
  runtime::Session s(*m.graph, runtime::SessionOptions{.profile = true});
  s.run(inputs);  // warm-up (and generated kernels loaded)
  std::vector<runtime::NodeProfile> acc = s.stats().nodes;  // totals accumulate over runs: keep the difference
  for (auto& p : acc) p.total_s = -p.total_s;
  double wall = 0;
  for (int i = 0; i < iterations; ++i) {
    s.run(inputs);
    wall += s.stats().last_run_s;
  }
  const auto& nodes = s.stats().nodes;
  for (size_t k = 0; k < nodes.size() && k < acc.size(); ++k) acc[k].total_s += nodes[k].total_s;
  const double n = std::max(iterations, 1);
  double sum = 0;
  std::map<std::string, std::pair<double, int>> by_type;
  for (const auto& p : acc) {
    sum += p.total_s;
    auto& t = by_type[p.op_type];
    t.first += p.total_s, ++t.second;
  }
  std::string out = fmt::format("== {}: {} nodes, {:.3f} ms per run (nodes {:.3f} ms)\n", title, acc.size(),
                                wall / n * 1e3, sum / n * 1e3);
  std::vector<const runtime::NodeProfile*> order;
  for (const auto& p : acc) order.push_back(&p);
  if (top > 0)
    std::stable_sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->total_s > b->total_s; });
  out += fmt::format("  {:>9} {:>6}  {:<16} {}\n", "ms", "share", "op", "node");
  for (size_t i = 0; i < order.size() && (top <= 0 || int(i) < top); ++i)
    out += fmt::format("  {:>9.3f} {:>5.1f}%  {:<16} {}\n", order[i]->total_s / n * 1e3,
                       sum > 0 ? 100 * order[i]->total_s / sum : 0.0, order[i]->op_type, order[i]->name);
  std::vector<std::pair<std::string, std::pair<double, int>>> types(by_type.begin(), by_type.end());
  std::stable_sort(types.begin(), types.end(), [](auto& a, auto& b) { return a.second.first > b.second.first; });
  out += "  by op type:";
  for (const auto& [type, t] : types) out += fmt::format(" {} {:.3f} ms ({}),", type, t.first / n * 1e3, t.second);
  out.back() = '\n';
  return out;
}

}  // namespace

std::string profile_fusion(const Model& model, const FuseOptions& opts, const std::vector<Tensor>& inputs,
                           int iterations, int top) {
  Model fused = copy_model(model);
  fuse_model(fused, opts);
  return table("unfused", model, inputs, iterations, top) + table("fused", fused, inputs, iterations, top);
}

}  // namespace gaf::tools
