// ONNX operator schemas for our own domain "gaf" (the ops the recognition passes produce where the model's opset
// lacks a standard one), so the ONNX checker and ONNX shape inference accept and type them like standard ops.
#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

#include <algorithm>
#include <mutex>

#include "frontend/onnx/gaf_schemas.h"

namespace gaf::onnx_io {

namespace {

const std::vector<std::string> kFloatTypes = {"tensor(float)", "tensor(float16)", "tensor(bfloat16)",
                                              "tensor(double)"};

onnx::OpSchema unary(const char* name, const char* doc) {
  onnx::OpSchema s;
  s.SetName(name)
      .SetDomain("gaf")
      .SinceVersion(1)
      .SetDoc(doc)
      .Input(0, "X", "input", "T")
      .Output(0, "Y", "output", "T")
      .TypeConstraint("T", kFloatTypes, "float tensors")
      .TypeAndShapeInferenceFunction(onnx::propagateShapeAndTypeFromFirstInput);
  return s;
}

onnx::OpSchema normalization(const char* name, bool with_bias) {
  onnx::OpSchema s;
  s.SetName(name)
      .SetDomain("gaf")
      .SinceVersion(1)
      .SetDoc("Normalisation over the trailing axes from 'axis' (standard LayerNormalization semantics).")
      .Attr("axis", "first normalised axis", onnx::AttributeProto::INT, int64_t(-1))
      .Attr("epsilon", "added to the variance", onnx::AttributeProto::FLOAT, 1e-5f)
      .Attr("stash_type", "accumulation type (ignored: fp32 or wider)", onnx::AttributeProto::INT, int64_t(1))
      .Input(0, "X", "input", "T")
      .Input(1, "Scale", "scale", "T", onnx::OpSchema::Optional);
  if (with_bias) s.Input(2, "B", "bias", "T", onnx::OpSchema::Optional);
  s.Output(0, "Y", "normalised", "T")
      .Output(1, "Mean", "row means", "U", onnx::OpSchema::Optional)
      .Output(2, "InvStdDev", "row inverse standard deviations", "U", onnx::OpSchema::Optional)
      .TypeConstraint("T", kFloatTypes, "float tensors")
      .TypeConstraint("U", {"tensor(float)"}, "statistics")
      .TypeAndShapeInferenceFunction(onnx::propagateShapeAndTypeFromFirstInput);
  return s;
}


// gaf.Attention: output = Transpose(Softmax(scale * Q Kᵀ + mask) V, out_perm) with Q, K, V read as
// Transpose(input, *_perm); batch dims broadcast like MatMul's (src/runtime/kernels/fast/attention.cc).
void infer_attention(onnx::InferenceContext& ctx) {
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  for (size_t i = 0; i < 3; ++i)
    if (!onnx::hasInputShape(ctx, i)) return;
  using Dims = std::vector<onnx::TensorShapeProto_Dimension>;
  auto logical = [&](size_t i, const char* attr) {
    const auto& shape = ctx.getInputType(i)->tensor_type().shape();
    std::vector<int64_t> perm;
    onnx::getRepeatedAttribute(ctx, attr, perm);
    Dims d;
    for (int k = 0; k < shape.dim_size(); ++k) {
      int64_t a = perm.empty() ? k : perm[size_t(k)];
      if (perm.size() && perm.size() != size_t(shape.dim_size())) fail_shape_inference(attr, " does not match the rank");
      if (a < 0 || a >= shape.dim_size()) fail_shape_inference(attr, " is not a permutation");
      d.push_back(shape.dim(int(a)));
    }
    if (d.size() < 2) fail_shape_inference("attention operands need rank 2 or more");
    return d;
  };
  Dims q = logical(0, "q_perm"), k = logical(1, "k_perm"), v = logical(2, "v_perm");
  std::vector<Dims> leads = {Dims(q.begin(), q.end() - 2), Dims(k.begin(), k.end() - 2), Dims(v.begin(), v.end() - 2)};
  size_t nb = 0;
  for (const auto& l : leads) nb = std::max(nb, l.size());
  Dims out(nb);
  for (size_t i = 0; i < nb; ++i) {  // right-aligned broadcast: a known dim other than 1 wins
    bool all_one = true;
    for (const auto& l : leads) {
      if (i + l.size() < nb) continue;
      const auto& d = l[i + l.size() - nb];
      if (d.has_dim_value() && d.dim_value() != 1) out[i] = d;
      if (!d.has_dim_value() || d.dim_value() != 1) all_one = false;
    }
    if (all_one) out[i].set_dim_value(1);
  }
  out.push_back(q[q.size() - 2]);
  out.push_back(v.back());
  std::vector<int64_t> out_perm;
  onnx::getRepeatedAttribute(ctx, "out_perm", out_perm);
  if (!out_perm.empty() && out_perm.size() != out.size()) fail_shape_inference("out_perm does not match the rank");
  auto* shape = ctx.getOutputType(0)->mutable_tensor_type()->mutable_shape();
  shape->clear_dim();
  for (size_t j = 0; j < out.size(); ++j) {
    int64_t a = out_perm.empty() ? int64_t(j) : out_perm[j];
    if (a < 0 || a >= int64_t(out.size())) fail_shape_inference("out_perm is not a permutation");
    *shape->add_dim() = out[size_t(a)];
  }
}

onnx::OpSchema attention() {
  onnx::OpSchema s;
  s.SetName("Attention")
      .SetDomain("gaf")
      .SinceVersion(1)
      .SetDoc("Softmax(scale * Q K^T + mask) V over the last two dims, Q/K/V read as Transpose(input, *_perm), "
              "the result written as Transpose(O, out_perm).")
      .Attr("scale", "multiplies the scores", onnx::AttributeProto::FLOAT, onnx::OPTIONAL_VALUE)
      .Attr("q_perm", "Q = Transpose(input 0, q_perm)", onnx::AttributeProto::INTS, onnx::OPTIONAL_VALUE)
      .Attr("k_perm", "K = Transpose(input 1, k_perm)", onnx::AttributeProto::INTS, onnx::OPTIONAL_VALUE)
      .Attr("v_perm", "V = Transpose(input 2, v_perm)", onnx::AttributeProto::INTS, onnx::OPTIONAL_VALUE)
      .Attr("out_perm", "output = Transpose(O, out_perm)", onnx::AttributeProto::INTS, onnx::OPTIONAL_VALUE)
      .Input(0, "Q", "queries [..., Lq, D] after q_perm", "T")
      .Input(1, "K", "keys [..., Lk, D] after k_perm", "T")
      .Input(2, "V", "values [..., Lk, Dv] after v_perm", "T")
      .Input(3, "mask", "added to the scores; broadcasts to [..., Lq, Lk]", "T", onnx::OpSchema::Optional)
      .Output(0, "Y", "attention output", "T")
      .TypeConstraint("T", {"tensor(float)"}, "float tensors")
      .TypeAndShapeInferenceFunction(infer_attention);
  return s;
}

// gaf.CompressedMatMul: A [..., K] x dequantise(W) -> [..., N], W [K, N] ([N, K] with trans_b) in bfloat16, or
// int8 with a float scale per output column (weight-compression pass).
void infer_compressed_matmul(onnx::InferenceContext& ctx) {
  ctx.getOutputType(0)->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  if (!onnx::hasInputShape(ctx, 0) || !onnx::hasInputShape(ctx, 1)) return;
  const auto& as = ctx.getInputType(0)->tensor_type().shape();
  const auto& ws = ctx.getInputType(1)->tensor_type().shape();
  if (ws.dim_size() != 2 || as.dim_size() < 1) fail_shape_inference("W must be a matrix and A at least 1-D");
  auto* out = ctx.getOutputType(0)->mutable_tensor_type()->mutable_shape();
  for (int i = 0; i + 1 < as.dim_size(); ++i) *out->add_dim() = as.dim(i);
  *out->add_dim() = ws.dim(onnx::getAttribute(ctx, "trans_b", 0) ? 0 : 1);
}

onnx::OpSchema compressed_matmul() {
  onnx::OpSchema s;
  s.SetName("CompressedMatMul")
      .SetDomain("gaf")
      .SinceVersion(1)
      .SetDoc("A x W' with W' = Cast(W, float) for bfloat16 W, scale[n] * W for int8 W (fp32 accumulation).")
      .Attr("trans_b", "W is stored [N, K]", onnx::AttributeProto::INT, int64_t(0))
      .Input(0, "A", "activations [..., K]", "T")
      .Input(1, "W", "constant weights [K, N] (or [N, K])", "TW")
      .Input(2, "scale", "int8 W: the scale of each output column [N] (or one)", "T", onnx::OpSchema::Optional)
      .Output(0, "Y", "[..., N]", "T")
      .TypeConstraint("T", {"tensor(float)"}, "float activations")
      .TypeConstraint("TW", {"tensor(bfloat16)", "tensor(int8)"}, "compressed weights")
      .TypeAndShapeInferenceFunction(infer_compressed_matmul);
  return s;
}

// gaf.Conv / gaf.MaxPool / gaf.AveragePool: the ONNX ops on channels-last activations [N, H, W, C] (attribute
// layout = "NHWC"; the layout-nhwc pass). Output [N, OH, OW, M] with ONNX's window arithmetic.
void infer_nhwc_window(onnx::InferenceContext& ctx, bool conv) {
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  if (!onnx::hasInputShape(ctx, 0)) return;
  const auto& xs = ctx.getInputType(0)->tensor_type().shape();
  const int rank = xs.dim_size();
  if (rank < 3) fail_shape_inference("input must be N x spatial... x C");
  const int r = rank - 2;
  std::vector<int64_t> k, strides, dil, pads;
  onnx::getRepeatedAttribute(ctx, "kernel_shape", k);
  const onnx::TensorShapeProto* ws = nullptr;
  if (conv) {
    if (!onnx::hasInputShape(ctx, 1)) return;
    ws = &ctx.getInputType(1)->tensor_type().shape();
    if (k.empty())
      for (int i = 2; i < ws->dim_size(); ++i) {
        if (!ws->dim(i).has_dim_value()) return;
        k.push_back(ws->dim(i).dim_value());
      }
  }
  if (int(k.size()) != r) fail_shape_inference("kernel_shape must have one entry per spatial dim");
  onnx::getRepeatedAttribute(ctx, "strides", strides);
  onnx::getRepeatedAttribute(ctx, "dilations", dil);
  onnx::getRepeatedAttribute(ctx, "pads", pads);
  strides.resize(size_t(r), 1), dil.resize(size_t(r), 1), pads.resize(size_t(2 * r), 0);
  std::string auto_pad = onnx::getAttribute(ctx, "auto_pad", std::string("NOTSET"));
  bool ceil_mode = onnx::getAttribute(ctx, "ceil_mode", int64_t(0)) != 0;
  auto* out = ctx.getOutputType(0)->mutable_tensor_type()->mutable_shape();
  out->clear_dim();
  *out->add_dim() = xs.dim(0);
  for (int i = 0; i < r; ++i) {
    auto* d = out->add_dim();
    const auto& in = xs.dim(1 + i);
    if (!in.has_dim_value()) continue;
    int64_t n = in.dim_value(), ext = (k[size_t(i)] - 1) * dil[size_t(i)] + 1, s = strides[size_t(i)];
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") d->set_dim_value((n + s - 1) / s);
    else if (auto_pad == "VALID") d->set_dim_value((n - ext) / s + 1);
    else {
      int64_t span = n + pads[size_t(i)] + pads[size_t(i + r)] - ext;
      d->set_dim_value((ceil_mode ? (span + s - 1) / s : span / s) + 1);
    }
  }
  if (conv) *out->add_dim() = ws->dim(0);
  else *out->add_dim() = xs.dim(rank - 1);
}

onnx::OpSchema nhwc(const char* name, bool conv) {
  onnx::OpSchema s;
  s.SetName(name)
      .SetDomain("gaf")
      .SinceVersion(1)
      .SetDoc("The ONNX op of this name on channels-last activations (layout = \"NHWC\").")
      .Attr("layout", "\"NHWC\"", onnx::AttributeProto::STRING, std::string("NHWC"))
      .Attr("kernel_shape", "window", onnx::AttributeProto::INTS, onnx::OPTIONAL_VALUE)
      .Attr("strides", "strides", onnx::AttributeProto::INTS, onnx::OPTIONAL_VALUE)
      .Attr("dilations", "dilations", onnx::AttributeProto::INTS, onnx::OPTIONAL_VALUE)
      .Attr("pads", "pads", onnx::AttributeProto::INTS, onnx::OPTIONAL_VALUE)
      .Attr("auto_pad", "auto_pad", onnx::AttributeProto::STRING, std::string("NOTSET"))
      .Input(0, "X", "channels-last input", "T")
      .Output(0, "Y", "channels-last output", "T")
      .TypeConstraint("T", {"tensor(float)"}, "float tensors");
  if (conv) {
    s.Attr("group", "groups", onnx::AttributeProto::INT, int64_t(1))
        .Attr("algorithm", "\"direct\" or \"winograd\" (3x3, stride 1; the conv-winograd pass)",
              onnx::AttributeProto::STRING, std::string("direct"))
        .Input(1, "W", "weights [M, C/group, kH, kW]", "T")
        .Input(2, "B", "bias", "T", onnx::OpSchema::Optional)
        .TypeAndShapeInferenceFunction([](onnx::InferenceContext& c) { infer_nhwc_window(c, true); });
  } else {
    s.Attr("ceil_mode", "ceil_mode", onnx::AttributeProto::INT, int64_t(0))
        .Attr("storage_order", "storage_order", onnx::AttributeProto::INT, int64_t(0))
        .Attr("count_include_pad", "count_include_pad", onnx::AttributeProto::INT, int64_t(0))
        .TypeAndShapeInferenceFunction([](onnx::InferenceContext& c) { infer_nhwc_window(c, false); });
  }
  return s;
}

// gaf.ExpandDepthwiseConv(X [N, H, W, C], W1 [E, C, 1, 1], B1, W2 [E, 1, K, K], B2) -> [N, OH, OW, E]: the
// depthwise convolution's window arithmetic (explicit pads, no dilation).
void infer_expand_depthwise(onnx::InferenceContext& ctx) {
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  if (!onnx::hasInputShape(ctx, 0) || !onnx::hasInputShape(ctx, 3)) return;
  const auto& xs = ctx.getInputType(0)->tensor_type().shape();
  const auto& ws = ctx.getInputType(3)->tensor_type().shape();
  if (xs.dim_size() != 4 || ws.dim_size() != 4) fail_shape_inference("X and W2 must have rank 4");
  std::vector<int64_t> strides, pads;
  onnx::getRepeatedAttribute(ctx, "strides", strides);
  onnx::getRepeatedAttribute(ctx, "pads", pads);
  if (strides.size() != 2 || pads.size() != 4) fail_shape_inference("strides needs 2 values and pads 4");
  auto* out = ctx.getOutputType(0)->mutable_tensor_type()->mutable_shape();
  out->clear_dim();
  *out->add_dim() = xs.dim(0);
  for (int i = 0; i < 2; ++i) {
    auto* d = out->add_dim();
    if (!xs.dim(1 + i).has_dim_value() || !ws.dim(2 + i).has_dim_value()) continue;
    const int64_t span = xs.dim(1 + i).dim_value() + pads[size_t(i)] + pads[size_t(i + 2)] - ws.dim(2 + i).dim_value();
    d->set_dim_value(span / strides[size_t(i)] + 1);
  }
  *out->add_dim() = ws.dim(0);
}

onnx::OpSchema expand_depthwise() {
  onnx::OpSchema s;
  s.SetName("ExpandDepthwiseConv")
      .SetDomain("gaf")
      .SinceVersion(1)
      .SetDoc("act2(clamp2(DepthwiseConv(act1(clamp1(Conv1x1(X, W1, B1))), W2, B2))) on channels-last activations.")
      .Attr("strides", "depthwise strides", onnx::AttributeProto::INTS)
      .Attr("pads", "depthwise pads [top, left, bottom, right]", onnx::AttributeProto::INTS)
      .Attr("min1", "clamp after the expansion", onnx::AttributeProto::FLOAT, onnx::OPTIONAL_VALUE)
      .Attr("max1", "clamp after the expansion", onnx::AttributeProto::FLOAT, onnx::OPTIONAL_VALUE)
      .Attr("min2", "clamp after the depthwise convolution", onnx::AttributeProto::FLOAT, onnx::OPTIONAL_VALUE)
      .Attr("max2", "clamp after the depthwise convolution", onnx::AttributeProto::FLOAT, onnx::OPTIONAL_VALUE)
      .Attr("activation1", "Silu or HardSwish after the expansion's clamp", onnx::AttributeProto::STRING,
            onnx::OPTIONAL_VALUE)
      .Attr("activation2", "Silu or HardSwish after the depthwise convolution's clamp", onnx::AttributeProto::STRING,
            onnx::OPTIONAL_VALUE)
      .Input(0, "X", "channels-last input [N, H, W, C]", "T")
      .Input(1, "W1", "expansion weights [E, C, 1, 1]", "T")
      .Input(2, "B1", "expansion bias [E]", "T")
      .Input(3, "W2", "depthwise weights [E, 1, K, K]", "T")
      .Input(4, "B2", "depthwise bias [E]", "T")
      .Output(0, "Y", "channels-last output [N, OH, OW, E]", "T")
      .TypeConstraint("T", {"tensor(float)"}, "float tensors")
      .TypeAndShapeInferenceFunction(infer_expand_depthwise);
  return s;
}

// gaf.ChannelShuffle<axis>(X_0 .. X_{G-1}) -> Y_0 .. Y_{K-1}: every Y_k is X_0's shape with G c / K along axis.
void infer_channel_shuffle(onnx::InferenceContext& ctx) {
  const size_t groups = ctx.getNumInputs(), parts = ctx.getNumOutputs();
  for (size_t k = 0; k < parts; ++k) onnx::propagateElemTypeFromInputToOutput(ctx, 0, k);
  if (!onnx::hasInputShape(ctx, 0)) return;
  const auto& xs = ctx.getInputType(0)->tensor_type().shape();
  const int rank = xs.dim_size();
  auto* attr = ctx.getAttribute("axis");
  int64_t axis = attr ? attr->i() : -1;
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) fail_shape_inference("axis is out of range");
  for (size_t k = 0; k < parts; ++k) {
    auto* out = ctx.getOutputType(k)->mutable_tensor_type()->mutable_shape();
    *out = xs;
    auto* d = out->mutable_dim(int(axis));
    if (!xs.dim(int(axis)).has_dim_value()) {
      d->Clear();
      continue;
    }
    const int64_t channels = xs.dim(int(axis)).dim_value() * int64_t(groups);
    if (channels % int64_t(parts) != 0) fail_shape_inference("the shuffled channels do not split into equal parts");
    d->set_dim_value(channels / int64_t(parts));
  }
}

onnx::OpSchema channel_shuffle() {
  onnx::OpSchema s;
  s.SetName("ChannelShuffle")
      .SetDomain("gaf")
      .SinceVersion(1)
      .SetDoc("S = Concat(X_0 .. X_{G-1}, axis) with its channels interleaved (S[.., i G + g, ..] = X_g[.., i, ..]), "
              "split into the outputs' equal parts along axis.")
      .Attr("axis", "the channel axis", onnx::AttributeProto::INT, int64_t(-1))
      .Input(0, "X", "the groups, of one shape", "T", onnx::OpSchema::Variadic)
      .Output(0, "Y", "equal parts of the shuffled channels", "T", onnx::OpSchema::Variadic)
      .TypeConstraint("T", onnx::OpSchema::all_tensor_types(), "any tensor type")
      .TypeAndShapeInferenceFunction(infer_channel_shuffle);
  return s;
}

// gaf.SqueezeExcitation(X, W1, B1, W2, B2) -> X's shape, or with gate_only the gates: X's shape with every
// spatial dimension 1.
void infer_squeeze_excitation(onnx::InferenceContext& ctx) {
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  if (!onnx::hasInputShape(ctx, 0)) return;
  const auto& xs = ctx.getInputType(0)->tensor_type().shape();
  const int rank = xs.dim_size();
  if (rank < 3) fail_shape_inference("X must have rank 3 or more");
  auto* out = ctx.getOutputType(0)->mutable_tensor_type()->mutable_shape();
  *out = xs;
  const auto* gate_only = ctx.getAttribute("gate_only");
  if (!gate_only || gate_only->i() == 0) return;
  const auto* layout = ctx.getAttribute("layout");
  const int channels = layout && layout->s() == "NHWC" ? rank - 1 : 1;
  for (int a = 1; a < rank; ++a)
    if (a != channels) out->mutable_dim(a)->set_dim_value(1);
}

onnx::OpSchema squeeze_excitation() {
  onnx::OpSchema s;
  s.SetName("SqueezeExcitation")
      .SetDomain("gaf")
      .SinceVersion(1)
      .SetDoc("X * Gate(Conv1x1(Act(Clip(Conv1x1(GlobalAveragePool(X), W1, B1), min, max)), W2, B2)), or the gates "
              "alone (gate_only).")
      .Attr("layout", "NCHW (channels second) or NHWC (channels last)", onnx::AttributeProto::STRING,
            std::string("NCHW"))
      .Attr("min", "clamp of the hidden layer (ReLU: 0)", onnx::AttributeProto::FLOAT, onnx::OPTIONAL_VALUE)
      .Attr("max", "clamp of the hidden layer", onnx::AttributeProto::FLOAT, onnx::OPTIONAL_VALUE)
      .Attr("activation", "Silu or HardSwish after the hidden layer's clamp", onnx::AttributeProto::STRING,
            onnx::OPTIONAL_VALUE)
      .Attr("gate", "Sigmoid or HardSigmoid", onnx::AttributeProto::STRING, std::string("Sigmoid"))
      .Attr("alpha", "HardSigmoid's alpha", onnx::AttributeProto::FLOAT, 0.2f)
      .Attr("beta", "HardSigmoid's beta", onnx::AttributeProto::FLOAT, 0.5f)
      .Attr("gate_only", "1: the output is the gates, not X scaled by them", onnx::AttributeProto::INT, int64_t(0))
      .Input(0, "X", "activations [N, C, spatial...] or [N, spatial..., C]", "T")
      .Input(1, "W1", "squeeze weights [R, C, 1...]", "T")
      .Input(2, "B1", "squeeze bias [R]", "T", onnx::OpSchema::Optional)
      .Input(3, "W2", "excitation weights [C, R, 1...]", "T")
      .Input(4, "B2", "excitation bias [C]", "T", onnx::OpSchema::Optional)
      .Output(0, "Y", "X scaled per channel, or the gates", "T")
      .TypeConstraint("T", {"tensor(float)"}, "float tensors")
      .TypeAndShapeInferenceFunction(infer_squeeze_excitation);
  return s;
}

}  // namespace

void register_gaf_schemas() {
  static std::once_flag once;
  std::call_once(once, [] {
    onnx::OpSchemaRegistry::DomainToVersionRange::Instance().AddDomainToVersion("gaf", 1, 1);
    onnx::OpSchema gelu = unary("Gelu", "0.5 x (1 + erf(x / sqrt 2)), or the tanh approximation");
    gelu.Attr("approximate", "'none' or 'tanh'", onnx::AttributeProto::STRING, std::string("none"));
    onnx::RegisterSchema(gelu);
    onnx::RegisterSchema(unary("Silu", "x * sigmoid(x)"));
    onnx::RegisterSchema(unary("HardSwish", "x * max(0, min(1, x / 6 + 1/2))"));
    onnx::RegisterSchema(normalization("LayerNormalization", true));
    onnx::RegisterSchema(normalization("RMSNormalization", false));
    onnx::RegisterSchema(attention());
    onnx::RegisterSchema(compressed_matmul());
    onnx::RegisterSchema(nhwc("Conv", true));
    onnx::RegisterSchema(nhwc("MaxPool", false));
    onnx::RegisterSchema(nhwc("AveragePool", false));
    onnx::RegisterSchema(expand_depthwise());
    onnx::RegisterSchema(channel_shuffle());
    onnx::RegisterSchema(squeeze_excitation());
  });
}

}  // namespace gaf::onnx_io
