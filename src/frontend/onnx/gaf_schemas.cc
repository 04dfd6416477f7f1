// ONNX operator schemas for our own domain "gaf" (the ops the recognition passes produce where the model's opset
// lacks a standard one), so the ONNX checker and ONNX shape inference accept and type them like standard ops.
#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

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
  });
}

}  // namespace gaf::onnx_io
