// Shape inference ONNX 1.12 gets wrong, mended in the schemas the registry here hands out (every other schema
// is ONNX's own):
//  - the convolutions' and pools' inference (convPoolShapeInference) indexes the strides, dilations and
//    pads by the weights' spatial rank without checking it against the input's: a Conv whose input has rank 2
//    (a ReduceMean with keepdims = 0 before it) crashed the process at import. A check in front of it fails
//    inference for the node instead (the runtime then reports the bad shapes, naming the node).
//  - STFT's reads onesided with a default of 0 (the op's is 1) and counts frames from the onesided bin count
//    rather than the frame length: a [1, 128, 1] signal framed by 16 every 8 came out [1, 15, 16, 2], not
//    [1, 15, 9, 2], and a kernel fused after it was built for the wrong shape. Ours replaces it.
//  - DFT past opset 17 falls back to the opset 17 schema, whose axis is an attribute defaulting to 1; from
//    opset 20 it is input 2, defaulting to -2. Ours follows opset 20 there.
#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>
#include <onnx/defs/tensor_proto_util.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>

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

// The value of integer scalar input i when inference knows it (a constant); nullopt when absent or unknown.
std::optional<int64_t> constant_int(onnx::InferenceContext& ctx, size_t i) {
  if (i >= ctx.getNumInputs() || !ctx.getInputType(i)) return std::nullopt;
  const onnx::TensorProto* t = ctx.getInputData(i);
  if (!t) return std::nullopt;
  std::vector<int64_t> v;
  if (t->data_type() == onnx::TensorProto::INT64)
    v = onnx::ParseData<int64_t>(t);
  else if (t->data_type() == onnx::TensorProto::INT32)
    for (int32_t x : onnx::ParseData<int32_t>(t)) v.push_back(x);
  return v.size() == 1 ? std::optional<int64_t>(v[0]) : std::nullopt;
}

// STFT: [batch, length, 1 | 2] -> [batch, frames, bins, 2], frames = (length - frame_length) / frame_step +
// 1, bins = frame_length / 2 + 1 when onesided (default 1) else frame_length; frame_length is input 3 or the
// window's (input 2) length. What is not known stays unknown; bad inputs are left to the runtime to report.
void stft_inference(onnx::InferenceContext& ctx) {
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  if (!onnx::hasInputShape(ctx, 0)) return;
  const onnx::TensorShapeProto& signal = onnx::getInputShape(ctx, 0);
  if (signal.dim_size() != 3) return;
  std::optional<int64_t> frame_length = constant_int(ctx, 3);
  if (!frame_length && onnx::hasInputShape(ctx, 2)) {
    const onnx::TensorShapeProto& window = onnx::getInputShape(ctx, 2);
    if (window.dim_size() == 1 && window.dim(0).has_dim_value()) frame_length = window.dim(0).dim_value();
  }
  const std::optional<int64_t> step = constant_int(ctx, 1);
  const bool onesided = onnx::getAttribute(ctx, "onesided", 1) != 0;
  onnx::TensorShapeProto out;
  *out.add_dim() = signal.dim(0);
  onnx::TensorShapeProto::Dimension* frames = out.add_dim();
  onnx::TensorShapeProto::Dimension* bins = out.add_dim();
  out.add_dim()->set_dim_value(2);
  if (frame_length && *frame_length >= 1) {
    bins->set_dim_value(onesided ? *frame_length / 2 + 1 : *frame_length);
    const auto& length = signal.dim(1);
    if (step && *step >= 1 && length.has_dim_value() && length.dim_value() >= *frame_length)
      frames->set_dim_value((length.dim_value() - *frame_length) / *step + 1);
  }
  onnx::updateOutputShape(ctx, 0, out);
}

// DFT from opset 20: the input's shape with a last dim of 2, and along the axis (input 2, default -2) the
// dft_length (input 1) when given, floor(n / 2) + 1 of it when onesided.
void dft20_inference(onnx::InferenceContext& ctx) {
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  if (!onnx::hasInputShape(ctx, 0)) return;
  onnx::TensorShapeProto out = onnx::getInputShape(ctx, 0);
  const int rank = out.dim_size();
  if (rank < 2) return;
  out.mutable_dim(rank - 1)->set_dim_value(2);
  const bool has_length = ctx.getNumInputs() > 1 && ctx.getInputType(1);
  const bool onesided = onnx::getAttribute(ctx, "onesided", 0) != 0;
  const bool has_axis = ctx.getNumInputs() > 2 && ctx.getInputType(2);
  const std::optional<int64_t> axis = has_axis ? constant_int(ctx, 2) : std::optional<int64_t>(-2);
  if (!axis) {  // any signal dim may change
    if (has_length || onesided)
      for (int d = 0; d < rank - 1; ++d) out.mutable_dim(d)->Clear();
    onnx::updateOutputShape(ctx, 0, out);
    return;
  }
  const int64_t a = *axis < 0 ? *axis + rank : *axis;
  if (a < 0 || a >= rank - 1) return;
  onnx::TensorShapeProto::Dimension* dim = out.mutable_dim(int(a));
  if (has_length) {
    const std::optional<int64_t> n = constant_int(ctx, 1);
    dim->Clear();
    if (n) dim->set_dim_value(*n);
  }
  if (onesided) {
    if (dim->has_dim_value())
      dim->set_dim_value(dim->dim_value() / 2 + 1);
    else
      dim->Clear();
  }
  onnx::updateOutputShape(ctx, 0, out);
}

// Which mended inference a schema gets, if any.
enum class Mend { None, WindowRanks, Stft, Dft20 };

Mend mend_of(const std::string& op, int max_version, const std::string& domain) {
  if (guarded(op, domain)) return Mend::WindowRanks;
  if (!domain.empty() && domain != "ai.onnx") return Mend::None;
  if (op == "STFT") return Mend::Stft;
  if (op == "DFT" && max_version >= 20) return Mend::Dft20;
  return Mend::None;
}

class GuardedRegistry final : public onnx::ISchemaRegistry {
 public:
  const onnx::OpSchema* GetSchema(const std::string& key, const int max_version,
                                  const std::string& domain) const override {
    const onnx::OpSchema* s = onnx::OpSchemaRegistry::Instance()->GetSchema(key, max_version, domain);
    const Mend mend = mend_of(key, max_version, domain);
    if (!s || mend == Mend::None || !s->has_type_and_shape_inference_function()) return s;
    std::lock_guard<std::mutex> lock(mutex_);
    std::unique_ptr<onnx::OpSchema>& copy = copies_[{s, mend}];
    if (!copy) {
      copy = std::make_unique<onnx::OpSchema>(*s);
      if (mend == Mend::Stft)
        copy->TypeAndShapeInferenceFunction(stft_inference);
      else if (mend == Mend::Dft20)
        copy->TypeAndShapeInferenceFunction(dft20_inference);
      else
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
  // One copy per schema and mend (DFT's opset 17 schema serves opset 20 too, mended).
  mutable std::map<std::pair<const onnx::OpSchema*, Mend>, std::unique_ptr<onnx::OpSchema>> copies_;
};

}  // namespace

const onnx::ISchemaRegistry* schema_registry() {
  register_gaf_schemas();
  static GuardedRegistry registry;
  return &registry;
}

}  // namespace gaf::onnx_io
