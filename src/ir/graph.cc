#include "gaf/graph.h"

#include <algorithm>
#include <set>

namespace gaf {

std::string Dim::to_string() const {
  if (is_static()) return std::to_string(value_);
  return symbol_.empty() ? "?" : symbol_;
}

bool TensorType::has_static_shape() const {
  if (!shape) return false;
  return std::all_of(shape->begin(), shape->end(), [](const Dim& d) { return d.is_static(); });
}

std::vector<int64_t> TensorType::static_dims() const {
  GAF_ASSERT(has_static_shape(), "static_dims on a non-static shape");
  std::vector<int64_t> dims;
  for (const Dim& d : *shape) dims.push_back(d.value());
  return dims;
}

std::string TensorType::to_string() const {
  switch (kind) {
    case ValueKind::Tensor:
      break;
    case ValueKind::Sequence:
      return fmt::format("seq({})", dtype_name(dtype));
    case ValueKind::Optional:
      return fmt::format("optional({})", dtype_name(dtype));
    case ValueKind::OptionalSequence:
      return fmt::format("optional(seq({}))", dtype_name(dtype));
  }
  std::string s{dtype_name(dtype)};
  if (!shape) return s + "[*]";
  s += "[";
  for (size_t i = 0; i < shape->size(); ++i) s += (i ? "," : "") + (*shape)[i].to_string();
  return s + "]";
}

void Value::set_constant(Tensor t) { constant_ = std::make_shared<const Tensor>(std::move(t)); }

void Value::drop_constant_data() {
  if (constant_) set_constant(Tensor::without_data(constant_->dtype(), constant_->dims()));
}

// ---- Node ----

void Node::set_input(int i, Value* v) {
  GAF_ASSERT(i >= 0 && i < num_inputs(), "set_input index out of range");
  Value* old = inputs_[i];
  if (old) {
    auto& u = old->uses_;
    auto it = std::find_if(u.begin(), u.end(), [&](const Use& x) { return x.node == this && x.index == i; });
    GAF_ASSERT(it != u.end(), "use list out of sync");
    u.erase(it);
  }
  inputs_[i] = v;
  if (v) v->uses_.push_back({this, i});
}

void Node::add_input(Value* v) {
  inputs_.push_back(nullptr);
  set_input(num_inputs() - 1, v);
}

std::string Node::display_name() const {
  return name.empty() && !outputs_.empty() ? outputs_[0]->name() : name;
}

bool Node::has_non_tensor_values() const {
  auto non_tensor = [](const Value* v) { return v && !v->type.is_tensor(); };
  return std::any_of(inputs_.begin(), inputs_.end(), non_tensor) ||
         std::any_of(outputs_.begin(), outputs_.end(), non_tensor);
}

std::string Node::describe() const {
  return fmt::format("node '{}' ({}{}{})", name.empty() ? (outputs_.empty() ? "?" : outputs_[0]->name()) : name,
                     domain.empty() ? "" : domain, domain.empty() ? "" : ".", op_type);
}

namespace {
template <class T>
const T* get_attr(const Node& n, const std::string& name) {
  auto it = n.attrs.find(name);
  if (it == n.attrs.end()) return nullptr;
  const T* v = std::get_if<T>(&it->second);
  GAF_CHECK(v, "{}: attribute '{}' has the wrong type", n.describe(), name);
  return v;
}
}  // namespace

int64_t Node::attr_int(const std::string& n, int64_t def) const {
  const int64_t* v = get_attr<int64_t>(*this, n);
  return v ? *v : def;
}
int64_t Node::attr_int(const std::string& n) const {
  const int64_t* v = get_attr<int64_t>(*this, n);
  GAF_CHECK(v, "{}: required attribute '{}' is missing", describe(), n);
  return *v;
}
float Node::attr_float(const std::string& n, float def) const {
  auto it = attrs.find(n);
  if (it == attrs.end()) return def;
  if (const int64_t* i = std::get_if<int64_t>(&it->second)) return float(*i);
  const float* v = get_attr<float>(*this, n);
  return *v;
}
std::string Node::attr_string(const std::string& n, const std::string& def) const {
  const std::string* v = get_attr<std::string>(*this, n);
  return v ? *v : def;
}
std::vector<int64_t> Node::attr_ints(const std::string& n, std::vector<int64_t> def) const {
  const auto* v = get_attr<std::vector<int64_t>>(*this, n);
  return v ? *v : def;
}
std::vector<float> Node::attr_floats(const std::string& n, std::vector<float> def) const {
  const auto* v = get_attr<std::vector<float>>(*this, n);
  return v ? *v : def;
}
const Tensor* Node::attr_tensor(const std::string& n) const { return get_attr<Tensor>(*this, n); }

const std::shared_ptr<Graph>& Node::subgraph(const std::string& n) const {
  const GraphAttr* g = get_attr<GraphAttr>(*this, n);
  GAF_CHECK(g && g->graph, "{}: required subgraph attribute '{}' is missing", describe(), n);
  return g->graph;
}

std::vector<std::pair<std::string, Graph*>> Node::subgraphs() const {
  std::vector<std::pair<std::string, Graph*>> out;
  for (const auto& [k, a] : attrs)
    if (const GraphAttr* g = std::get_if<GraphAttr>(&a); g && g->graph) out.emplace_back(k, g->graph.get());
  return out;
}

// ---- Graph ----

Value* Graph::add_value(const std::string& name, TensorType type) {
  GAF_CHECK(!name.empty(), "graph '{}': a value needs a name", this->name);
  GAF_CHECK(!by_name_.count(name), "graph '{}': value name '{}' is defined twice", this->name, name);
  auto v = std::make_unique<Value>();
  v->name_ = name;
  v->type = std::move(type);
  Value* p = v.get();
  values_.push_back(std::move(v));
  by_name_[name] = p;
  return p;
}

void Graph::rename(Value* v, const std::string& name) {
  if (v->name_ == name) return;
  GAF_CHECK(!by_name_.count(name), "graph '{}': value name '{}' is already taken", this->name, name);
  by_name_.erase(v->name_);
  v->name_ = name;
  by_name_[name] = v;
}

Value* Graph::add_constant(const std::string& name, Tensor data) {
  TensorType t{data.dtype(), Shape(data.dims().begin(), data.dims().end())};
  Value* v = add_value(name, std::move(t));
  v->set_constant(std::move(data));
  initializers_.push_back(v);
  return v;
}

Value* Graph::add_input(const std::string& name, TensorType type) {
  Value* v = add_value(name, std::move(type));
  inputs_.push_back(v);
  return v;
}

Node* Graph::make_node(const std::string& op_type, const std::vector<Value*>& inputs,
                       const std::vector<std::string>& output_names, const std::string& name) {
  auto n = std::make_unique<Node>();
  n->op_type = op_type;
  n->name = name;
  n->graph_ = this;
  for (Value* v : inputs) n->add_input(v);
  for (size_t i = 0; i < output_names.size(); ++i) {
    Value* o = add_value(output_names[i]);
    o->producer_ = n.get();
    o->producer_index_ = int(i);
    n->outputs_.push_back(o);
  }
  Node* p = n.get();
  nodes_.push_back(std::move(n));
  return p;
}

Node* Graph::add_node(const std::string& op_type, const std::vector<Value*>& inputs,
                      const std::vector<std::string>& output_names, const std::string& name) {
  return make_node(op_type, inputs, output_names, name);
}

Node* Graph::insert_node_before(Node* before, const std::string& op_type, const std::vector<Value*>& inputs,
                                const std::vector<std::string>& output_names, const std::string& name) {
  Node* n = make_node(op_type, inputs, output_names, name);
  auto owned = std::move(nodes_.back());
  nodes_.pop_back();
  auto it = std::find_if(nodes_.begin(), nodes_.end(), [&](const auto& x) { return x.get() == before; });
  GAF_ASSERT(it != nodes_.end(), "insert_node_before: anchor node not in graph");
  nodes_.insert(it, std::move(owned));
  return n;
}

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> out;
  out.reserve(nodes_.size());
  for (const auto& n : nodes_)
    if (!n->dead_) out.push_back(n.get());
  return out;
}

size_t Graph::num_nodes() const { return nodes_.size() - dead_nodes_; }

Value* Graph::find_value(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

std::string Graph::unique_name(const std::string& base) const {
  if (!by_name_.count(base)) return base;
  for (int i = 1;; ++i) {
    std::string n = fmt::format("{}_{}", base, i);
    if (!by_name_.count(n)) return n;
  }
}

void Graph::add_output(Value* v) {
  outputs_.push_back(v);
  ++v->output_slots_;
}

void Graph::set_output(int i, Value* v) {
  --outputs_[size_t(i)]->output_slots_;
  outputs_[size_t(i)] = v;
  ++v->output_slots_;
}

bool Graph::is_graph_output(const Value* v) const {
  // The count is over every graph holding v as an output; the search says whether this one does.
  return v && v->output_slots_ > 0 && std::find(outputs_.begin(), outputs_.end(), v) != outputs_.end();
}

void Graph::replace_all_uses(Value* from, Value* to) {
  std::vector<Use> uses = from->uses_;
  for (const Use& u : uses) u.node->set_input(u.index, to);
  for (size_t i = 0; i < outputs_.size(); ++i)
    if (outputs_[i] == from) set_output(int(i), to);
}

void Graph::remove_node(Node* n) {
  for (Value* o : n->outputs_)
    GAF_ASSERT(o->uses_.empty() && !is_graph_output(o), "remove_node: output still used");
  for (int i = 0; i < n->num_inputs(); ++i) n->set_input(i, nullptr);
  n->dead_ = true;
  for (Value* o : n->outputs_) o->producer_ = nullptr;
  // Dead nodes leave the order in batches: erasing each at once made a pass that removes k of n nodes O(k n)
  // (most of fusing a 40,000-node model). Compacting when half are dead keeps removal amortised O(1).
  if (++dead_nodes_ * 2 > nodes_.size()) compact();
}

void Graph::compact() {
  if (dead_nodes_ == 0) return;
  nodes_.erase(std::remove_if(nodes_.begin(), nodes_.end(), [](const auto& x) { return x->dead_; }), nodes_.end());
  dead_nodes_ = 0;
}

void Graph::remove_dead_values() {
  std::set<const Value*> keep(inputs_.begin(), inputs_.end());
  keep.insert(outputs_.begin(), outputs_.end());
  compact();
  for (const auto& n : nodes_)
    for (Value* o : n->outputs_) keep.insert(o);
  std::vector<Value*> inits;
  for (Value* v : initializers_)
    if (!v->uses_.empty() || keep.count(v)) inits.push_back(v);
  initializers_ = inits;
  keep.insert(inits.begin(), inits.end());
  for (const auto& n : nodes_)
    for (Value* i : n->inputs_)
      if (i) keep.insert(i);
  std::vector<std::unique_ptr<Value>> live;
  for (auto& v : values_) {
    if (keep.count(v.get())) {
      live.push_back(std::move(v));
    } else {
      by_name_.erase(v->name_);
    }
  }
  values_ = std::move(live);
}

void Graph::topo_sort() {
  // Kahn's algorithm, stable with respect to the current order.
  compact();
  std::map<const Node*, int> pending;
  std::map<const Node*, size_t> position;
  for (size_t i = 0; i < nodes_.size(); ++i) position[nodes_[i].get()] = i;
  for (const auto& n : nodes_) {
    int c = 0;
    for (Value* v : n->inputs_)
      if (v && v->producer_ && position.count(v->producer_)) ++c;
    pending[n.get()] = c;
  }
  std::set<std::pair<size_t, Node*>> ready;
  for (const auto& n : nodes_)
    if (pending[n.get()] == 0) ready.insert({position[n.get()], n.get()});
  std::vector<Node*> order;
  while (!ready.empty()) {
    Node* n = ready.begin()->second;
    ready.erase(ready.begin());
    order.push_back(n);
    for (Value* o : n->outputs_)
      for (const Use& u : o->uses_)
        if (--pending[u.node] == 0) ready.insert({position[u.node], u.node});
  }
  GAF_CHECK(order.size() == nodes_.size(), "graph '{}' has a cycle", name);
  std::map<Node*, std::unique_ptr<Node>> owned;
  for (auto& n : nodes_) owned[n.get()] = std::move(n);
  nodes_.clear();
  for (Node* n : order) nodes_.push_back(std::move(owned[n]));
}

std::unique_ptr<Graph> Graph::clone() const {
  auto g = std::make_unique<Graph>();
  g->name = name;
  g->doc_string = doc_string;
  std::map<const Value*, Value*> map;
  auto copy_value = [&](const Value* v) -> Value* {
    auto it = map.find(v);
    if (it != map.end()) return it->second;
    Value* c = g->add_value(v->name_, v->type);
    c->constant_ = v->constant_;
    c->doc_string = v->doc_string;
    map[v] = c;
    return c;
  };
  for (Value* v : inputs_) g->inputs_.push_back(copy_value(v));
  for (Value* v : initializers_) g->initializers_.push_back(copy_value(v));
  for (const auto& n : nodes_) {
    if (n->dead_) continue;
    std::vector<Value*> ins;
    for (Value* v : n->inputs_) ins.push_back(v ? copy_value(v) : nullptr);
    auto c = std::make_unique<Node>();
    c->op_type = n->op_type;
    c->domain = n->domain;
    c->name = n->name;
    c->doc_string = n->doc_string;
    c->opset = n->opset;
    c->attrs = n->attrs;
    for (auto& [k, a] : c->attrs)  // subgraphs are copied too: passes edit them in place
      if (GraphAttr* sub = std::get_if<GraphAttr>(&a); sub && sub->graph) sub->graph = sub->graph->clone();
    c->implicit_inputs = n->implicit_inputs;
    if (n->body) c->body = n->body->clone();
    c->graph_ = g.get();
    for (Value* v : ins) c->add_input(v);
    for (size_t i = 0; i < n->outputs_.size(); ++i) {
      Value* o = copy_value(n->outputs_[i]);
      o->producer_ = c.get();
      o->producer_index_ = int(i);
      c->outputs_.push_back(o);
    }
    g->nodes_.push_back(std::move(c));
  }
  for (Value* v : outputs_) g->add_output(copy_value(v));
  return g;
}

std::vector<Graph*> graph_and_subgraphs(Graph& g) {
  std::vector<Graph*> out{&g};
  for (size_t i = 0; i < out.size(); ++i)
    for (const Node* n : out[i]->nodes())
      for (const auto& [attr, sub] : n->subgraphs()) out.push_back(sub);
  return out;
}

std::vector<const Graph*> graph_and_subgraphs(const Graph& g) {
  std::vector<Graph*> all = graph_and_subgraphs(const_cast<Graph&>(g));
  return {all.begin(), all.end()};
}

// ---- verifier ----

void verify(const Graph& g) {
  std::set<const Value*> defined;
  for (const Value* v : g.inputs()) defined.insert(v);
  for (const Value* v : g.initializers()) {
    GAF_CHECK(v->is_constant(), "verify: initializer '{}' has no data", v->name());
    defined.insert(v);
  }
  for (const Node* n : g.nodes()) {
    GAF_CHECK(n->graph() == &g, "verify: {} belongs to another graph", n->describe());
    for (int i = 0; i < n->num_inputs(); ++i) {
      const Value* v = n->input(i);
      if (!v) continue;
      GAF_CHECK(defined.count(v) || v->is_constant(), "verify: {} reads '{}' before it is defined", n->describe(),
                v->name());
      const auto& u = v->uses();
      GAF_CHECK(std::any_of(u.begin(), u.end(), [&](const Use& x) { return x.node == n && x.index == i; }),
                "verify: use list of '{}' misses {}", v->name(), n->describe());
    }
    for (int i = 0; i < n->num_outputs(); ++i) {
      const Value* o = n->output(i);
      GAF_CHECK(!defined.count(o), "verify: '{}' is defined twice (SSA)", o->name());
      GAF_CHECK(o->producer() == n && o->producer_index() == i, "verify: producer of '{}' is wrong", o->name());
      defined.insert(o);
    }
    if (n->body) verify(*n->body);
    GAF_CHECK(n->implicit_inputs >= 0 && n->implicit_inputs <= n->num_inputs(),
              "verify: {} has {} implicit inputs of {}", n->describe(), n->implicit_inputs, n->num_inputs());
    for (const auto& [attr, sub] : n->subgraphs()) {
      GAF_CHECK(int(sub->inputs().size()) >= n->implicit_inputs,
                "verify: {}: subgraph '{}' has fewer inputs than the node's {} captures", n->describe(), attr,
                n->implicit_inputs);
      verify(*sub);
    }
  }
  for (const Value* v : g.outputs()) {
    GAF_CHECK(defined.count(v) || v->is_constant(), "verify: graph output '{}' is never defined", v->name());
  }
}

}  // namespace gaf
