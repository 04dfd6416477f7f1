#include "fusion/group_util.h"

#include <algorithm>

namespace gaf::fusion_detail {

GraphIndex::GraphIndex(const Graph& g) : g_(g) {
  int i = 0;
  for (const Node* n : g.nodes()) pos_[n] = i++;
}

bool GraphIndex::path_outside(const std::set<const Node*>& from, const std::set<const Node*>& to) const {
  int limit = -1;
  for (const Node* n : to) limit = std::max(limit, pos_.at(n));
  // Walk consumers starting at the nodes outside both sets that `from` feeds. A node of another group brings
  // its whole group along (contracted, the group is one node of the fused graph).
  std::vector<const Node*> stack;
  std::set<const Node*> seen;
  auto reach = [&](const Node* n) {
    if (!seen.insert(n).second) return;
    stack.push_back(n);
    if (!group_of_ || !groups_) return;
    auto g = group_of_->find(n);
    if (g == group_of_->end()) return;
    auto members = groups_->find(g->second);
    if (members == groups_->end()) return;
    for (const Node* m : members->second.nodes)
      if (!from.count(m) && !to.count(m) && seen.insert(m).second) stack.push_back(m);
  };
  for (const Node* n : from)
    for (const Value* o : n->outputs())
      for (const Use& u : o->uses())
        if (!from.count(u.node) && !to.count(u.node)) reach(u.node);
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (pos_.at(n) > limit) continue;  // topological order: cannot reach `to` any more
    for (const Value* o : n->outputs()) {
      for (const Use& u : o->uses()) {
        if (to.count(u.node)) return true;
        if (!from.count(u.node)) reach(u.node);
      }
    }
  }
  return false;
}

std::set<const Node*> members(const Group& a, const Group& b) {
  std::set<const Node*> m(a.nodes.begin(), a.nodes.end());
  m.insert(b.nodes.begin(), b.nodes.end());
  return m;
}

std::vector<const Node*> ordered(const std::set<const Node*>& m, const GraphIndex& index) {
  std::vector<const Node*> v(m.begin(), m.end());
  std::sort(v.begin(), v.end(), [&](const Node* a, const Node* b) { return index.position(a) < index.position(b); });
  return v;
}

std::vector<const Value*> external_inputs(const std::vector<const Node*>& nodes) {
  std::set<const Node*> m(nodes.begin(), nodes.end());
  std::vector<const Value*> out;
  std::set<const Value*> seen;
  for (const Node* n : nodes)
    for (const Value* v : n->inputs())
      if (v && (!v->producer() || !m.count(v->producer())) && seen.insert(v).second) out.push_back(v);
  return out;
}

std::vector<const Value*> escaping_outputs(const std::vector<const Node*>& nodes, const Graph& g) {
  std::set<const Node*> m(nodes.begin(), nodes.end());
  std::vector<const Value*> out;
  for (const Node* n : nodes)
    for (const Value* o : n->outputs()) {
      bool esc = g.is_graph_output(o);
      for (const Use& u : o->uses()) esc |= !m.count(u.node);
      if (esc) out.push_back(o);
    }
  return out;
}

std::unique_ptr<Graph> group_body(const std::vector<const Node*>& nodes, const Graph& g, const std::string& name,
                                  std::vector<const Value*>* inputs, std::vector<const Value*>* outputs) {
  auto body = std::make_unique<Graph>();
  body->name = name;
  std::map<const Value*, Value*> map;
  for (const Value* v : external_inputs(nodes)) {
    if (is_inlined_constant(v)) {
      map[v] = body->add_constant(v->name(), v->constant());
    } else {
      map[v] = body->add_input(v->name(), v->type);
      inputs->push_back(v);
    }
  }
  for (const Node* n : nodes) {
    std::vector<Value*> ins;
    for (const Value* v : n->inputs()) ins.push_back(v ? map.at(v) : nullptr);
    std::vector<std::string> outs;
    for (const Value* o : n->outputs()) outs.push_back(o->name());
    Node* c = body->add_node(n->op_type, ins, outs, n->name);
    c->domain = n->domain;
    c->opset = n->opset;
    c->attrs = n->attrs;
    c->doc_string = n->doc_string;
    for (int i = 0; i < n->num_outputs(); ++i) {
      c->output(i)->type = n->output(i)->type;
      c->output(i)->absent_output = n->output(i)->absent_output;
      map[n->output(i)] = c->output(i);
    }
  }
  for (const Value* v : escaping_outputs(nodes, g)) {
    body->add_output(map.at(v));
    outputs->push_back(v);
  }
  return body;
}

bool is_inlined_constant(const Value* v) {
  if (v->is_constant()) return v->constant().numel() <= 16;
  const Node* p = v->producer();
  return p && is_free_node(*p) && v->type.has_static_shape() && numel_of(v->type.static_dims()) <= 16;
}

}  // namespace gaf::fusion_detail
