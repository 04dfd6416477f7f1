// ONNX 1.12's convolution and pooling shape inference (convPoolShapeInference) indexes the strides, dilations and
// pads by the weights' spatial rank without checking it against the input's: a Conv whose input has rank 2 (a
// ReduceMean with keepdims = 0 before it) crashed the process at import. The registry here hands out those ops'
// schemas with a check in front of their inference function that fails inference for the node instead (the
// runtime then reports the bad shapes, naming the node); every other schema is ONNX's own.
#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "frontend/onnx/gaf_schemas.h"

namespace gaf::onnx_io {

namespace {

// The weights input of the convolutions (-1: the op has none; its window is the kernel_shape attribute).
int weights_input(const std::string& op) {
  if (op == "Conv" || op == "ConvTranspose" || op == "ConvInteger") return 1;
  if (op == "QLinearConv") return 3;
  return -1;
}

bool guarded(const std::string& op, const std::string& domain) {
  static const std::set<std::string> ops = {"Conv",    "ConvTranspose", "ConvInteger", "QLinearConv", "MaxPool",
                                            "AveragePool", "LpPool",    "MaxUnpool"};
  return (domain.empty() || domain == "ai.onnx") && ops.count(op);
}

// X is [N, C, spatial...]; W (when the op has one) and the window attributes have X's spatial rank.
void check_window_ranks(onnx::InferenceContext& ctx, const std::string& op) {
  if (!onnx::hasInputShape(ctx, 0)) return;
  const int rank = ctx.getInputType(0)->tensor_type().shape().dim_size();
  if (rank < 3) fail_shape_inference(op, ": X has rank ", rank, "; it must be [N, C, spatial...]");
  const int w = weights_input(op);
  if (w >= 0 && size_t(w) < ctx.getNumInputs() && onnx::hasInputShape(ctx, size_t(w))) {
    const int wr = ctx.getInputType(size_t(w))->tensor_type().shape().dim_size();
    if (wr != rank) fail_shape_inference(op, ": W has rank ", wr, " and X ", rank, "; they must be equal");
  }
  const size_t spatial = size_t(rank - 2);
  for (const char* name : {"kernel_shape", "strides", "dilations", "pads", "output_padding", "output_shape"}) {
    const onnx::AttributeProto* a = ctx.getAttribute(name);
    if (!a) continue;
    const size_t want = std::string(name) == "pads" ? 2 * spatial : spatial;
    if (size_t(a->ints_size()) != want)
      fail_shape_inference(op, ": ", name, " has ", a->ints_size(), " values for ", spatial, " spatial axes");
  }
}

class GuardedRegistry final : public onnx::ISchemaRegistry {
 public:
  const onnx::OpSchema* GetSchema(const std::string& key, const int max_version,
                                  const std::string& domain) const override {
    const onnx::OpSchema* s = onnx::OpSchemaRegistry::Instance()->GetSchema(key, max_version, domain);
    if (!s || !guarded(key, domain) || !s->has_type_and_shape_inference_function()) return s;
    std::lock_guard<std::mutex> lock(mutex_);
    std::unique_ptr<onnx::OpSchema>& copy = copies_[s];
    if (!copy) {
      copy = std::make_unique<onnx::OpSchema>(*s);
      copy->TypeAndShapeInferenceFunction(
          [inner = s->GetTypeAndShapeInferenceFunction(), op = key](onnx::InferenceContext& ctx) {
            check_window_ranks(ctx, op);
            inner(ctx);
          });
    }
    return copy.get();
  }

 private:
  mutable std::mutex mutex_;
  mutable std::map<const onnx::OpSchema*, std::unique_ptr<onnx::OpSchema>> copies_;
};

}  // namespace

const onnx::ISchemaRegistry* schema_registry() {
  register_gaf_schemas();
  static GuardedRegistry registry;
  return &registry;
}

}  // namespace gaf::onnx_io
