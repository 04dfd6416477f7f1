// time_groups: the cost model's sign of each fused group's benefit against the measured one (bench --per-group).
#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gaf/session.h"
#include "gaf/tools.h"

namespace gaf::tools {

namespace {

// A profiled session of `g` on OpenMP's thread count: per-node time summed over the runs after the first.
struct Profiled {
  runtime::Session session;
  std::vector<double> first;  // node totals after the warm-up run
  int runs = 0;
  explicit Profiled(const Graph& g)
      : session(g, runtime::SessionOptions{.profile = true, .adapt_threads = false}) {}
  void run(const std::vector<Tensor>& inputs) {
    session.run(inputs);
    if (runs++ == 0)
      for (const auto& p : session.stats().nodes) first.push_back(p.total_s);
  }
  // Mean time per run (after the warm-up) by node display name.
  std::map<std::string, double> means(const Graph& g) const {
    const std::vector<Node*> nodes = g.nodes();  // the session's steps, in this order
    const auto& totals = session.stats().nodes;
    GAF_ASSERT(totals.size() == nodes.size() && first.size() == nodes.size(), "profile: one entry per node");
    std::map<std::string, double> t;
    for (size_t k = 0; k < nodes.size(); ++k)
      t[nodes[k]->display_name()] += (totals[k].total_s - first[k]) / std::max(1, runs - 1);
    return t;
  }
};

}  // namespace

std::vector<GroupTiming> time_groups(const Model& model, const FuseOptions& opts, const std::vector<Tensor>& inputs,
                                     int iterations) {
  FuseOptions o = opts;
  o.keep_planned = true;
  Model fused = copy_model(model);
  FuseResult r = fuse_model(fused, o);
  GAF_CHECK(r.planned, "fuse_model kept no planned graph");
  // Runs alternate between the two sessions so that the machine's load drifts over both alike.
  Profiled pu(*r.planned->graph), pf(*fused.graph);
  for (int i = 0; i <= std::max(1, iterations); ++i) pu.run(inputs), pf.run(inputs);
  const std::map<std::string, double> unfused = pu.means(*r.planned->graph), fused_t = pf.means(*fused.graph);
  std::vector<GroupTiming> out;
  for (const GroupSummary& g : r.groups) {
    GroupTiming t;
    t.name = g.name;
    t.scope = g.scope;
    t.ops = g.ops;
    t.modeled_unfused_s = g.modeled_unfused_s;
    t.modeled_fused_s = g.modeled_fused_s;
    t.timed = g.scope.empty() && fused_t.count(g.name);
    for (const std::string& n : g.nodes) {
      auto it = unfused.find(n);
      if (it == unfused.end()) t.timed = false;
      else t.measured_unfused_s += it->second;
    }
    if (t.timed) t.measured_fused_s = fused_t.at(g.name);
    out.push_back(std::move(t));
  }
  return out;
}

std::string group_timing_text(const std::vector<GroupTiming>& groups) {
  std::string out = fmt::format("{:<36} {:>4} {:>12} {:>12} {:>8} {:>12} {:>12} {:>8}\n", "group", "ops",
                                "model unfus", "model fused", "ratio", "meas unfus", "meas fused", "ratio");
  int timed = 0, agree = 0, noise = 0;
  std::vector<std::string> disagree;
  for (const GroupTiming& g : groups) {
    std::string name = g.name.size() > 36 ? g.name.substr(0, 33) + "..." : g.name;
    auto ratio = [](double u, double f) { return f > 0 ? fmt::format("{:.2f}x", u / f) : std::string("-"); };
    if (!g.timed) {
      out += fmt::format("{:<36} {:>4} {:>10.1f}us {:>10.1f}us {:>8}   not timed{}\n", name, g.ops.size(),
                         g.modeled_unfused_s * 1e6, g.modeled_fused_s * 1e6,
                         ratio(g.modeled_unfused_s, g.modeled_fused_s),
                         g.scope.empty() ? "" : " (in " + g.scope + ")");
      continue;
    }
    ++timed;
    const bool judged = !g.within_noise();
    noise += !judged;
    agree += judged && g.signs_agree();
    if (judged && !g.signs_agree()) disagree.push_back(g.name);
    out += fmt::format("{:<36} {:>4} {:>10.1f}us {:>10.1f}us {:>8} {:>10.1f}us {:>10.1f}us {:>8}{}\n", name,
                       g.ops.size(), g.modeled_unfused_s * 1e6, g.modeled_fused_s * 1e6,
                       ratio(g.modeled_unfused_s, g.modeled_fused_s), g.measured_unfused_s * 1e6,
                       g.measured_fused_s * 1e6, ratio(g.measured_unfused_s, g.measured_fused_s),
                       g.within_noise() ? "  within 5%" : g.signs_agree() ? "" : "  DISAGREES");
  }
  out += fmt::format("benefit signs (modeled vs measured): {} of {} timed groups agree, {} disagree, {} within 5%",
                     agree, timed, disagree.size(), noise);
  if (!disagree.empty()) out += fmt::format("; measured slower fused: {}", fmt::join(disagree, ", "));
  return out + "\n";
}

}  // namespace gaf::tools
