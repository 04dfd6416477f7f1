#include "gaf/builder.h"

#include <random>

#include "gaf/op_registry.h"

namespace gaf {

GraphBuilder::GraphBuilder(Model& model, int64_t opset) : model_(model), opset_(opset) {
  model_.opsets[""] = opset;
}

Value* GraphBuilder::input(const std::string& name, DType dtype, Shape shape) {
  return graph().add_input(name, TensorType{dtype, std::move(shape)});
}

Value* GraphBuilder::constant(Tensor t, const std::string& name) {
  return graph().add_constant(graph().unique_name(name.empty() ? "const" : name), std::move(t));
}

Value* GraphBuilder::ints(const std::vector<int64_t>& v) {
  return constant(Tensor::from<int64_t>({int64_t(v.size())}, v));
}

Value* GraphBuilder::random_constant(const std::string& name, std::vector<int64_t> dims, float scale,
                                     uint64_t seed) {
  std::mt19937_64 rng(seed ^ std::hash<std::string>{}(name));
  std::uniform_real_distribution<float> dist(-scale, scale);
  Tensor t(DType::Float, std::move(dims));
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
  return constant(std::move(t), name);
}

std::vector<Value*> GraphBuilder::op_n(const std::string& op_type, const std::vector<Value*>& inputs,
                                       int num_outputs, std::map<std::string, Attribute> attrs,
                                       const std::string& name) {
  std::string base = name.empty() ? fmt::format("{}_{}", op_type, counter_++) : name;
  std::vector<std::string> outs;
  for (int i = 0; i < num_outputs; ++i)
    outs.push_back(graph().unique_name(num_outputs == 1 ? base + "_out" : fmt::format("{}_out{}", base, i)));
  Node* n = graph().add_node(op_type, inputs, outs, base);
  n->attrs = std::move(attrs);
  n->opset = int(opset_);
  return n->outputs();
}

Value* GraphBuilder::op(const std::string& op_type, const std::vector<Value*>& inputs,
                        std::map<std::string, Attribute> attrs, const std::string& name) {
  return op_n(op_type, inputs, 1, std::move(attrs), name)[0];
}

void GraphBuilder::finish() {
  graph().topo_sort();
  verify(graph());
  infer_types(model_);
}

}  // namespace gaf
