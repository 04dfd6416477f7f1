// Applies a FusionPlan: each group of two or more nodes becomes one node of domain "gaf.fused" whose op type names
// its ops (MatMul_Add_Gelu_3) and whose body is the group's subgraph. Small constants (<= 16 elements) are copied
// into the body; everything else the group reads becomes an input of the fused node, in first-use order. Values
// the group produces and others read (or the graph returns) become its outputs, keeping their names.
#include <algorithm>

#include "fusion/group_util.h"

namespace gaf {

namespace {

std::string fused_name(const Group& gr, int index) {
  std::vector<std::string> ops;
  for (const Node* n : gr.nodes) ops.push_back(n->op_type);
  std::string name;
  size_t shown = ops.size() <= 4 ? ops.size() : 3;
  for (size_t i = 0; i < shown; ++i) name += (i ? "_" : "") + ops[i];
  if (shown < ops.size()) name += fmt::format("_x{}", ops.size());
  return fmt::format("{}_{}", name, index);
}

}  // namespace

std::vector<GroupSummary> apply_fusion(Graph& g, const FusionPlan& plan, const CostModel& cm,
                                       const std::string& name_prefix) {
  using namespace fusion_detail;
  std::vector<GroupSummary> summaries;
  int index = 0;
  for (const Group& gr : plan.groups) {
    if (gr.nodes.size() < 2) continue;
    std::set<const Node*> m(gr.nodes.begin(), gr.nodes.end());
    GroupSummary s;
    s.name = name_prefix + fused_name(gr, index++);
    double unfused_bytes = 0, unfused_time = 0;
    for (const Node* n : gr.nodes) {
      s.ops.push_back(n->op_type);
      s.nodes.push_back(n->display_name());
      KernelStats k = node_stats(*n);
      unfused_bytes += k.bytes;
      unfused_time += cm.kernel_time(k);
    }
    KernelStats fk = group_stats(gr.nodes, g);
    s.bytes_saved = unfused_bytes - fk.bytes;
    s.modeled_unfused_s = unfused_time;
    s.modeled_fused_s = cm.kernel_time(fk);
    s.benefit_s = unfused_time - s.modeled_fused_s;

    std::vector<const Value*> inputs, escaping;
    std::unique_ptr<Graph> body = group_body(gr.nodes, g, s.name, &inputs, &escaping);
    std::vector<Value*> outer_inputs;
    for (const Value* v : inputs) outer_inputs.push_back(const_cast<Value*>(v));

    // Outer node: fresh outputs that take over the escaping values' names and uses.
    Node* last = const_cast<Node*>(gr.nodes.back());
    std::vector<std::string> tmp_names;
    for (const Value* v : escaping) tmp_names.push_back(g.unique_name(v->name() + "__fused"));
    Node* fused = g.insert_node_before(last, s.name, outer_inputs, tmp_names, s.name);
    fused->domain = "gaf.fused";
    fused->opset = 1;
    fused->body = std::move(body);
    for (size_t i = 0; i < escaping.size(); ++i) {
      Value* old = const_cast<Value*>(escaping[i]);
      Value* neu = fused->output(int(i));
      neu->type = old->type;
      g.replace_all_uses(old, neu);
      std::string name = old->name();
      g.rename(old, g.unique_name(name + "__replaced"));
      g.rename(neu, name);
    }
    for (auto it = gr.nodes.rbegin(); it != gr.nodes.rend(); ++it) {
      Node* n = const_cast<Node*>(*it);
      g.remove_node(n);
    }
    summaries.push_back(std::move(s));
  }
  g.topo_sort();
  g.remove_dead_values();
  verify(g);
  return summaries;
}

}  // namespace gaf
