// Structural facts about node sets that legality and the planner share: membership, reachability and the values a
// group reads and writes. (Row signatures of reductions, which the cost model needs too: analysis/row_signature.h.)
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gaf/fusion.h"

namespace gaf::fusion_detail {

class GraphIndex {
 public:
  explicit GraphIndex(const Graph& g);
  int position(const Node* n) const { return pos_.at(n); }
  const Graph& graph() const { return g_; }
  // True when some path from a node in `from` to a node in `to` leaves from ∪ to (merging would make a cycle).
  // With the current grouping set, the path runs over groups: reaching one member of another group reaches
  // all of them, since that group will be one kernel.
  bool path_outside(const std::set<const Node*>& from, const std::set<const Node*>& to) const;
  // The planner's grouping (node -> group id, group id -> members), kept up to date by the planner.
  void set_grouping(const std::map<const Node*, int>* group_of, const std::map<int, Group>* groups) {
    group_of_ = group_of, groups_ = groups;
  }

 private:
  const Graph& g_;
  std::map<const Node*, int> pos_;
  const std::map<const Node*, int>* group_of_ = nullptr;
  const std::map<int, Group>* groups_ = nullptr;
};

std::set<const Node*> members(const Group& a, const Group& b);
// The nodes of m in graph order (deterministic iteration).
std::vector<const Node*> ordered(const std::set<const Node*>& m, const GraphIndex& index);
// Values read by the nodes (in order) from outside them, each once in first-use order, excluding absent inputs.
std::vector<const Value*> external_inputs(const std::vector<const Node*>& nodes);
// Values the nodes produce that others read or the graph returns, in node order.
std::vector<const Value*> escaping_outputs(const std::vector<const Node*>& nodes, const Graph& g);
// Small constants (<= 16 elements) are copied into a fused body instead of becoming inputs.
bool is_inlined_constant(const Value* v);
// The body of a fused node computing `nodes` (of graph g, in order): an input per external value read (in
// first-use order; small constants copied in instead), the nodes cloned, an output per escaping value. `inputs`
// and `outputs` receive the values of g the body's inputs and outputs stand for.
std::unique_ptr<Graph> group_body(const std::vector<const Node*>& nodes, const Graph& g, const std::string& name,
                                  std::vector<const Value*>* inputs, std::vector<const Value*>* outputs);

}  // namespace gaf::fusion_detail
