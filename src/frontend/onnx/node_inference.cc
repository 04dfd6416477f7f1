// One node through ONNX's own type-and-shape inference function, for the ops our shape inference has no rule for
// (Pad, Tile, Resize, Range, ScatterND, TopK, OneHot, the pools...): the node's input types and the contents of its
// small constant inputs go in, the output types come out. ONNX ran the same functions over the whole model at
// import, but before our folding turned computed pads, repeats and sizes into constants.
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <memory>
#include <unordered_map>

#include "frontend/onnx/gaf_schemas.h"
#include "gaf/onnx_io.h"

namespace gaf::onnx_io {

std::vector<std::optional<TensorType>> infer_node_types(const Node& n) {
  std::vector<std::optional<TensorType>> out(size_t(n.num_outputs()));
  register_gaf_schemas();
  const onnx::OpSchema* schema = schema_registry()->GetSchema(n.op_type, n.opset > 0 ? n.opset : 17, n.domain);
  if (!schema || !schema->has_type_and_shape_inference_function()) return out;

  onnx::NodeProto np;
  node_to_proto(n, np);
  // Constant inputs this small are shape-like operands (pads, repeats, axes, sizes, scales); larger ones are data
  // whose contents no inference rule reads.
  constexpr int64_t kMaxDataElements = 1024;
  std::vector<std::unique_ptr<onnx::TypeProto>> types;
  std::vector<std::unique_ptr<onnx::TensorProto>> data;
  std::unordered_map<std::string, onnx::TypeProto*> types_by_name;
  std::unordered_map<std::string, const onnx::TensorProto*> data_by_name;
  for (int i = 0; i < n.num_inputs(); ++i) {
    const Value* v = n.input(i);
    if (!v) continue;
    if (v->type.dtype != DType::Undefined || !v->type.is_tensor()) {
      types.push_back(std::make_unique<onnx::TypeProto>());
      type_to_proto(v->type, *types.back());
      types_by_name[v->name()] = types.back().get();
    }
    if (v->is_constant() && v->constant().numel() <= kMaxDataElements) {
      data.push_back(std::make_unique<onnx::TensorProto>());
      tensor_to_proto(v->constant(), *data.back());
      data.back()->set_name(v->name());
      data_by_name[v->name()] = data.back().get();
    }
  }
  onnx::shape_inference::InferenceContextImpl ctx(np, types_by_name, data_by_name, {});
  try {
    schema->GetTypeAndShapeInferenceFunction()(ctx);
  } catch (const std::exception&) {  // inconsistent or unsupported inputs: nothing is known (the runtime reports)
    return out;
  }
  for (int k = 0; k < n.num_outputs(); ++k) {
    const onnx::TypeProto* tp = ctx.getOutputType(size_t(k));
    if (tp && tp->value_case() != onnx::TypeProto::VALUE_NOT_SET && supported_type(*tp))
      out[size_t(k)] = type_from_proto(*tp);
  }
  return out;
}

}  // namespace gaf::onnx_io
