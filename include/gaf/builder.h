// A small IR builder for tests and the built-in demo models:
//   GraphBuilder b(model);
//   Value* x = b.input("x", DType::Float, {1, 128, 768});
//   Value* w = b.random_constant("w", {768, 768}, 0.02f);
//   b.output(b.op("Relu", {b.op("MatMul", {x, w})}));
//   b.finish();  // ONNX shape inference fills every value's type
// Part of the frontend (src/frontend/onnx/builder.cc): finish() types the graph with ONNX shape inference.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gaf/graph.h"

namespace gaf {

class GraphBuilder {
 public:
  explicit GraphBuilder(Model& model, int64_t opset = 17);

  Value* input(const std::string& name, DType dtype, Shape shape);
  Value* constant(Tensor t, const std::string& name = "");
  Value* scalar(float v) { return constant(Tensor::scalar<float>(v)); }
  Value* ints(const std::vector<int64_t>& v);  // 1-D int64 constant (shapes, axes)
  // Uniform in [-scale, scale], deterministic for a (seed, name) pair.
  Value* random_constant(const std::string& name, std::vector<int64_t> dims, float scale, uint64_t seed = 0);

  Value* op(const std::string& op_type, const std::vector<Value*>& inputs,
            std::map<std::string, Attribute> attrs = {}, const std::string& name = "");
  std::vector<Value*> op_n(const std::string& op_type, const std::vector<Value*>& inputs, int num_outputs,
                           std::map<std::string, Attribute> attrs = {}, const std::string& name = "");
  void output(Value* v) { graph().add_output(v); }

  // Sorts, verifies and runs ONNX shape inference so every value has a type.
  void finish();
  Graph& graph() { return *model_.graph; }

 private:
  Model& model_;
  int64_t opset_;
  int counter_ = 0;
};

// Fills value types by exporting to ONNX, running ONNX shape inference and reading the types back.
void infer_types(Model& model);

}  // namespace gaf
