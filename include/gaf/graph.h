// The SSA graph IR. A Graph owns its Values and Nodes; Nodes are kept in topological order. A Value has a
// TensorType whose dims may be symbolic; constants (initializers) are Values that carry data. A fused node
// owns its body as a nested Graph; a control-flow node (If, Loop, Scan) holds its subgraphs as GraphAttr
// attributes.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "gaf/tensor.h"

namespace gaf {

// A dimension: a known size, or a named symbol ("batch"), or unknown (no value, no symbol).
class Dim {
 public:
  Dim() = default;
  Dim(int64_t v) : value_(v) {}  // NOLINT: implicit from a size
  explicit Dim(std::string symbol) : symbol_(std::move(symbol)) {}
  bool is_static() const { return value_ >= 0; }
  bool is_symbol() const { return value_ < 0 && !symbol_.empty(); }
  // Static, or a symbol other than a fresh one ONNX shape inference made up ("unk__<n>": it names no dim of the
  // model and says no more than an unknown dim).
  bool is_known() const { return is_static() || (is_symbol() && symbol_.rfind("unk__", 0) != 0); }
  int64_t value() const { return value_; }
  const std::string& symbol() const { return symbol_; }
  bool operator==(const Dim& o) const { return value_ == o.value_ && symbol_ == o.symbol_; }
  std::string to_string() const;

 private:
  int64_t value_ = -1;
  std::string symbol_;
};

using Shape = std::vector<Dim>;

// What a value holds: a tensor, or one of ONNX's non-tensor types over tensors. For a sequence or an
// optional, `dtype` is its tensors' element type and `shape` is nullopt (their shapes may differ from one to
// the next): no pass, kernel size or memory count treats such a value as a tensor.
enum class ValueKind : uint8_t {
  Tensor,
  Sequence,          // seq(tensor)
  Optional,          // optional(tensor)
  OptionalSequence,  // optional(seq(tensor))
};

struct TensorType {
  DType dtype = DType::Undefined;
  std::optional<Shape> shape;  // nullopt: rank unknown
  ValueKind kind = ValueKind::Tensor;

  bool is_tensor() const { return kind == ValueKind::Tensor; }
  bool has_static_shape() const;
  std::vector<int64_t> static_dims() const;  // requires has_static_shape()
  std::string to_string() const;             // "float[1,?,batch]", "seq(float)", "optional(seq(float))"
};

// An attribute kind the IR does not interpret (graphs, sparse tensors, type protos): kept as serialized
// AttributeProto bytes so import -> export round-trips it unchanged.
struct OpaqueAttr {
  std::string proto;
};
class Node;
class Graph;

// A subgraph attribute: If's branches, Loop's and Scan's body. Its inputs are the op's formal body inputs
// followed by its captures, one per implicit input of the node that holds it (Node::implicit_inputs), in the
// same order: the values of enclosing graphs the subgraph reads are inputs of the node, so every pass sees
// them as uses, and the subgraph reads them as inputs of its own. Export writes them back as outer-scope
// references.
struct GraphAttr {
  std::shared_ptr<Graph> graph;
};

using Attribute = std::variant<int64_t, float, std::string, Tensor, std::vector<int64_t>, std::vector<float>,
                               std::vector<std::string>, OpaqueAttr, GraphAttr>;

struct Use {
  Node* node;
  int index;
};

class Value {
 public:
  const std::string& name() const { return name_; }
  TensorType type;
  Node* producer() const { return producer_; }
  int producer_index() const { return producer_index_; }
  const std::vector<Use>& uses() const { return uses_; }
  bool is_constant() const { return constant_ != nullptr; }
  const Tensor& constant() const { return *constant_; }
  void set_constant(Tensor t);
  // A constant whose data another holder keeps (a kernel's packed copy) or nothing reads any more: its dtype and
  // dims stay, its data goes (Tensor::without_data). No effect on a value that is not a constant.
  void drop_constant_data();
  std::string doc_string;
  // An optional node output the model left unnamed (ONNX ""): the kernel may skip it; export writes "" again.
  bool absent_output = false;

 private:
  friend class Graph;
  friend class Node;
  std::string name_;
  Node* producer_ = nullptr;
  int producer_index_ = -1;
  std::vector<Use> uses_;
  std::shared_ptr<const Tensor> constant_;
  int output_slots_ = 0;  // entries of graphs' outputs holding it: is_graph_output skips the search when 0
};

class Node {
 public:
  std::string op_type;
  std::string domain;  // "" = ai.onnx
  std::string name;
  std::string doc_string;
  int opset = 0;  // opset version of the node's domain in its model
  std::map<std::string, Attribute> attrs;
  std::unique_ptr<Graph> body;  // fused node: the subgraph it computes
  // The last `implicit_inputs` inputs are values of this graph its subgraphs read (GraphAttr): not inputs of
  // the op as ONNX defines it, each subgraph's captures.
  int implicit_inputs = 0;

  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  int num_inputs() const { return int(inputs_.size()); }
  int num_outputs() const { return int(outputs_.size()); }
  // Optional inputs may be missing: input(i) is nullptr then (also past the end).
  Value* input(int i) const { return i < num_inputs() ? inputs_[i] : nullptr; }
  Value* output(int i) const { return outputs_[i]; }
  void set_input(int i, Value* v);
  void add_input(Value* v);
  Graph* graph() const { return graph_; }

  bool has_attr(const std::string& n) const { return attrs.count(n) > 0; }
  int64_t attr_int(const std::string& n, int64_t def) const;
  float attr_float(const std::string& n, float def) const;
  std::string attr_string(const std::string& n, const std::string& def) const;
  std::vector<int64_t> attr_ints(const std::string& n, std::vector<int64_t> def = {}) const;
  std::vector<float> attr_floats(const std::string& n, std::vector<float> def = {}) const;
  const Tensor* attr_tensor(const std::string& n) const;
  // The subgraph attribute `n` (shared: a kernel running it keeps it alive); throws naming the node when it
  // has none.
  const std::shared_ptr<Graph>& subgraph(const std::string& n) const;
  // Every subgraph attribute, by name (none for ops without subgraphs).
  std::vector<std::pair<std::string, Graph*>> subgraphs() const;
  int num_explicit_inputs() const { return num_inputs() - implicit_inputs; }
  // Required attribute: throws naming node and attribute when absent.
  int64_t attr_int(const std::string& n) const;

  std::string describe() const;  // "node 'name' (Op)" for messages
  // Whether an input or output is a sequence or an optional (ValueKind): such a node is never folded or
  // fused.
  bool has_non_tensor_values() const;
  // Its name, or its first output's when it has none (exporters often leave names empty); "" with neither.
  std::string display_name() const;

 private:
  friend class Graph;
  Graph* graph_ = nullptr;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  bool dead_ = false;
};

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  std::string name;
  std::string doc_string;

  // Creates a value owned by this graph. Names must be unique within the graph.
  Value* add_value(const std::string& name, TensorType type = {});
  Value* add_constant(const std::string& name, Tensor data);  // also appended to initializers()
  Value* add_input(const std::string& name, TensorType type);
  void rename(Value* v, const std::string& name);  // keeps names unique
  void mark_input(Value* v) { inputs_.push_back(v); }  // an existing value (e.g. an initializer) as input
  void add_output(Value* v);
  void set_output(int i, Value* v);
  // Appends a node; outputs are fresh values with the given names.
  Node* add_node(const std::string& op_type, const std::vector<Value*>& inputs,
                 const std::vector<std::string>& output_names, const std::string& name = "");
  // Same, inserted right before `before` in the node order.
  Node* insert_node_before(Node* before, const std::string& op_type, const std::vector<Value*>& inputs,
                           const std::vector<std::string>& output_names, const std::string& name = "");

  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  const std::vector<Value*>& initializers() const { return initializers_; }
  std::vector<Node*> nodes() const;  // live nodes, topological order
  size_t num_nodes() const;
  Value* find_value(const std::string& name) const;
  std::string unique_name(const std::string& base) const;

  void replace_all_uses(Value* from, Value* to);  // graph outputs too
  void remove_node(Node* n);                      // its outputs must be unused
  void remove_dead_values();                      // unused non-output values and initializers
  void topo_sort();                               // re-establish topological order after edits
  bool is_graph_output(const Value* v) const;

  // Deep copy (nodes, values, constants shared by reference).
  std::unique_ptr<Graph> clone() const;

  std::string to_string() const;  // readable text dump
  std::string to_dot() const;     // Graphviz; fused nodes as clusters

 private:
  Node* make_node(const std::string& op_type, const std::vector<Value*>& inputs,
                  const std::vector<std::string>& output_names, const std::string& name);
  void compact();                             // drops removed nodes from nodes_
  std::vector<std::unique_ptr<Node>> nodes_;  // in order; removed nodes (dead_) stay until the next compact()
  size_t dead_nodes_ = 0;
  std::vector<std::unique_ptr<Value>> values_;
  std::map<std::string, Value*> by_name_;
  std::vector<Value*> inputs_, outputs_, initializers_;
};

// g and the subgraphs (GraphAttr: If's branches, Loop's and Scan's body) of its nodes at any depth, g first.
// Fused bodies are not among them.
std::vector<Graph*> graph_and_subgraphs(Graph& g);
std::vector<const Graph*> graph_and_subgraphs(const Graph& g);

// Checks SSA form, topological order, use lists and type consistency. Throws gaf::Error describing the first
// problem found.
void verify(const Graph& g);

struct Model {
  Model() : graph(std::make_unique<Graph>()) {}
  std::unique_ptr<Graph> graph;
  int64_t ir_version = 8;
  std::map<std::string, int64_t> opsets{{"", 17}};
  std::string producer_name, producer_version, domain, doc_string;
  int64_t model_version = 0;
  std::vector<std::pair<std::string, std::string>> metadata;
  std::vector<std::string> functions;  // serialized FunctionProtos carried through unchanged
};

}  // namespace gaf
