// Fusion planner.
//
// Every node starts as its own group. Candidate merges are producer->consumer group pairs, kept in a priority
// queue ordered by modeled benefit (forced pairs first, ties by position so plans are deterministic):
//
//     pop best (A, B) --stale?--> skip
//         | can_fuse(A, B)?      no --> log reason
//         | benefit > 0 or forced? no --> log NEGATIVE_BENEFIT
//         v
//     merge A+B -> new group G; re-evaluate every pair (producer group, G) and (G, consumer group)
//
// At opt level 3 a sibling pass then merges groups that read the same large value (horizontal fusion) and the
// vertical pass runs again, up to max_rounds. Groups stay convex (no path leaves and re-enters them) because every
// merge is checked for an outside path. At the end every producer->consumer edge gets a decision record: fused
// (with the benefit of the merge that joined it) or the reason the final groups cannot or should not merge.
#include <algorithm>
#include <queue>
#include <sstream>

#include "fusion/legality.h"

namespace gaf {

namespace {

using fusion_detail::GraphIndex;

class Planner {
 public:
  Planner(const Graph& g, const CostModel& cm, const FusionOptions& opts)
      : g_(g), cm_(cm), opts_(opts), index_(g) {
    index_.set_grouping(&group_of_, &groups_);
    for (const Node* n : g.nodes()) {
      Group gr;
      gr.id = next_id_++;
      gr.nodes = {n};
      gr.kind = op_kind(*n);
      gr.anchors = gr.kind == OpKind::Anchor ? 1 : 0;
      group_of_[n] = gr.id;
      groups_[gr.id] = gr;
    }
    for (const FusionRule& r : opts.rules.rules)
      if (r.action == FusionRule::Action::Force) forced_rules_.push_back(&r);
  }

  FusionPlan run() {
    FusionPlan plan;
    for (const Node* c : g_.nodes())
      for (const Value* v : c->inputs())
        if (v && v->producer() && !is_free_node(*v->producer())) ++plan.candidates;
    if (opts_.opt_level >= 2 && opts_.rules.enable_fusion) {
      for (int round = 0; round < opts_.rules.max_rounds; ++round) {
        bool changed = vertical();
        if (opts_.opt_level >= 3) changed |= horizontal();
        if (!changed) break;
      }
    }
    std::map<int, int> renumber;
    for (const Node* n : g_.nodes()) {
      int id = group_of_[n];
      if (renumber.count(id)) continue;
      Group gr = groups_[id];
      renumber[id] = int(plan.groups.size());
      gr.id = int(plan.groups.size());
      plan.groups.push_back(gr);
    }
    log_decisions(plan);
    return plan;
  }

 private:
  struct Candidate {
    double priority;
    int a, b;  // producer group, consumer group
    int pos;   // tie-break: earliest member position
    bool operator<(const Candidate& o) const {
      if (priority != o.priority) return priority < o.priority;
      return pos > o.pos;
    }
  };

  double group_time(const Group& gr) { return cm_.kernel_time(group_stats(gr.nodes, g_)); }

  Group merged(const Group& a, const Group& b) const {
    Group m;
    m.nodes = a.nodes;
    m.nodes.insert(m.nodes.end(), b.nodes.begin(), b.nodes.end());
    std::sort(m.nodes.begin(), m.nodes.end(),
              [&](const Node* x, const Node* y) { return index_.position(x) < index_.position(y); });
    m.kind = std::max(a.kind, b.kind);
    m.anchors = a.anchors + b.anchors;
    m.horizontal = a.horizontal || b.horizontal;
    return m;
  }

  bool forced(const Group& a, const Group& b) const {
    for (const FusionRule* r : forced_rules_)
      for (const Node* p : a.nodes)
        for (const Value* o : p->outputs())
          for (const Use& u : o->uses())
            if (std::count(b.nodes.begin(), b.nodes.end(), u.node) &&
                fusion_detail::edge_on_match(r->pattern, *p, *u.node, nullptr))
              return true;
    return false;
  }

  struct Eval {
    FusionDecision decision;
    double benefit = 0;
    bool forced = false;
  };
  Eval evaluate(int a_id, int b_id) {
    const Group& a = groups_.at(a_id);
    const Group& b = groups_.at(b_id);
    Eval e;
    e.decision = fusion_detail::can_fuse_indexed(a, b, index_, opts_, cm_.target());
    if (!e.decision.ok()) return e;
    e.benefit = group_time(a) + group_time(b) - group_time(merged(a, b));
    e.forced = forced(a, b);
    if (e.benefit <= 0 && !e.forced)
      e.decision = FusionDecision::no(Reason::NegativeBenefit,
                                      fmt::format("fusing costs {:.3g} us more than it saves", -e.benefit * 1e6));
    return e;
  }

  int merge(int a_id, int b_id, double benefit) {
    Group m = merged(groups_.at(a_id), groups_.at(b_id));
    m.id = next_id_++;
    for (const Node* x : groups_.at(a_id).nodes)
      for (const Node* y : groups_.at(b_id).nodes) merge_benefit_[{x, y}] = merge_benefit_[{y, x}] = benefit;
    groups_.erase(a_id);
    groups_.erase(b_id);
    for (const Node* n : m.nodes) group_of_[n] = m.id;
    groups_[m.id] = m;
    return m.id;
  }

  void push_neighbours(int id, std::priority_queue<Candidate>& pq) {
    const Group& gr = groups_.at(id);
    std::set<int> producers, consumers;
    for (const Node* n : gr.nodes) {
      for (const Value* v : n->inputs())
        if (v && v->producer() && !is_free_node(*v->producer()) && group_of_[v->producer()] != id)
          producers.insert(group_of_[v->producer()]);
      for (const Value* o : n->outputs())
        for (const Use& u : o->uses())
          if (group_of_[u.node] != id) consumers.insert(group_of_[u.node]);
    }
    for (int p : producers) push(p, id, pq);
    for (int c : consumers) push(id, c, pq);
  }

  void push(int a, int b, std::priority_queue<Candidate>& pq) {
    Eval e = evaluate(a, b);
    if (!e.decision.ok()) return;
    int pos = std::min(index_.position(groups_.at(a).nodes.front()), index_.position(groups_.at(b).nodes.front()));
    pq.push({e.forced ? 1e30 + e.benefit : e.benefit, a, b, pos});
  }

  bool vertical() {
    std::priority_queue<Candidate> pq;
    std::set<std::pair<int, int>> seen;
    for (const Node* c : g_.nodes())
      for (const Value* v : c->inputs()) {
        if (!v || !v->producer() || is_free_node(*v->producer())) continue;
        int a = group_of_[v->producer()], b = group_of_[c];
        if (a != b && seen.insert({a, b}).second) push(a, b, pq);
      }
    bool changed = false;
    while (!pq.empty()) {
      Candidate c = pq.top();
      pq.pop();
      if (!groups_.count(c.a) || !groups_.count(c.b)) continue;  // stale: one side was merged away
      Eval e = evaluate(c.a, c.b);                              // re-check: neighbours may have changed
      if (!e.decision.ok()) continue;
      int id = merge(c.a, c.b, e.benefit);
      changed = true;
      push_neighbours(id, pq);
    }
    return changed;
  }

  // Sibling fusion: groups reading the same large non-constant value share one pass over it.
  bool horizontal() {
    bool changed = false;
    for (const Node* n : g_.nodes()) {
      for (const Value* v : n->outputs()) changed |= horizontal_on(v);
    }
    for (const Value* v : g_.inputs()) changed |= horizontal_on(v);
    return changed;
  }

  bool horizontal_on(const Value* v) {
    if (v->is_constant() || value_bytes(v) < 64 * 1024) return false;
    bool changed = false;
    std::vector<int> sibs;
    for (const Use& u : v->uses()) {
      int id = group_of_[u.node];
      if (std::find(sibs.begin(), sibs.end(), id) == sibs.end()) sibs.push_back(id);
    }
    for (size_t i = 0; i < sibs.size(); ++i) {
      for (size_t j = i + 1; j < sibs.size(); ++j) {
        if (!groups_.count(sibs[i]) || !groups_.count(sibs[j])) continue;
        const Group& a = groups_.at(sibs[i]);
        const Group& b = groups_.at(sibs[j]);
        if (a.anchors || b.anchors) continue;  // anchors read operands in their own blocked order
        Eval e = evaluate(sibs[i], sibs[j]);
        if (!e.decision.ok()) continue;
        int id = merge(sibs[i], sibs[j], e.benefit);
        groups_.at(id).horizontal = true;
        sibs[i] = id;
        sibs[j] = id;
        changed = true;
      }
    }
    return changed;
  }

  void log_decisions(FusionPlan& plan) {
    std::set<std::pair<const Node*, const Node*>> done;
    for (const Node* c : g_.nodes()) {
      for (const Value* v : c->inputs()) {
        if (!v || !v->producer() || is_free_node(*v->producer())) continue;
        const Node* p = v->producer();
        if (!done.insert({p, c}).second) continue;
        DecisionRecord r;
        r.producer = p->name.empty() ? v->name() : p->name;
        r.consumer = c->display_name();
        r.value = v->name();
        int a = group_of_[p], b = group_of_[c];
        if (a == b) {
          r.fused = true;
          r.reason = Reason::Fused;
          r.benefit_s = merge_benefit_[{p, c}];
        } else {
          Eval e = evaluate(a, b);
          r.benefit_s = e.benefit;
          r.reason = e.decision.ok() ? Reason::NegativeBenefit : e.decision.reason;
          r.detail = e.decision.ok() ? "not merged" : e.decision.detail;
        }
        plan.decisions.push_back(std::move(r));
      }
    }
  }

  const Graph& g_;
  const CostModel& cm_;
  const FusionOptions& opts_;
  GraphIndex index_;
  std::map<int, Group> groups_;
  std::map<const Node*, int> group_of_;
  std::map<std::pair<const Node*, const Node*>, double> merge_benefit_;
  std::vector<const FusionRule*> forced_rules_;
  int next_id_ = 0;
};

}  // namespace

FusionPlan plan_fusion(const Graph& g, const CostModel& cm, const FusionOptions& opts) {
  return Planner(g, cm, opts).run();
}

std::string FusionPlan::to_string() const {
  std::ostringstream os;
  for (const Group& gr : groups) {
    if (gr.nodes.size() < 2) continue;
    os << "group " << gr.id << " [" << op_kind_name(gr.kind) << (gr.horizontal ? ", horizontal" : "") << "]:";
    for (const Node* n : gr.nodes) os << " " << n->op_type << "(" << n->name << ")";
    os << "\n";
  }
  for (const DecisionRecord& d : decisions)
    os << (d.fused ? "  fused " : "  kept  ") << d.producer << " -> " << d.consumer << " [" << reason_name(d.reason)
       << "] benefit " << fmt::format("{:.3g}", d.benefit_s * 1e6) << " us" << (d.detail.empty() ? "" : ": ")
       << d.detail << "\n";
  return os.str();
}

}  // namespace gaf
