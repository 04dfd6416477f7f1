// RMSNorm as exporters write it (T5, LLaMA):
//
//   v = ReduceMean(Pow(x, 2) | Mul(x, x), axes)     axes: the trailing axes [axis, rank), keepdims
//   y = x / Sqrt(v + eps)  |  x * Reciprocal(Sqrt(v + eps))
//   [y = y * gamma]                                 (gamma constant over the normalised dims only)
//
// becomes gaf.RMSNormalization(x, gamma, axis, epsilon) (ONNX has no such op before opset 23; the signature
// is that of opset 23's RMSNormalization; CPU kernel in runtime/kernels/onnx/gaf_ops.cc). Anchored on the variance
// ReduceMean. The square and every tail intermediate must be read only inside the pattern; x may have other
// readers (the residual). fp32 only.
#include "gaf/passes.h"
#include "passes/norm_match.h"

namespace gaf {

namespace {

class RmsNormRecognition final : public rewrite::RulePass {
 public:
  std::string_view name() const override { return "rms-norm-recognition"; }

 private:
  bool rule(rewrite::Rewriter& rw, Node& var) override {
    Graph& g = rw.graph();
    if (!rewrite::is_op(&var, "ReduceMean")) return false;
    Node* square = var.input(0) ? var.input(0)->producer() : nullptr;
    if (!square || rewrite::sole_user(g, square->output(0)) != &var) return false;
    Value* x = square->input(0);
    bool squares = (rewrite::is_op(square, "Mul") && square->input(1) == x) ||
                   (rewrite::is_op(square, "Pow") && rewrite::scalar_operand(g, square->input(1), x) == 2.0);
    if (!squares || !rewrite::is_float(x)) return false;
    auto axis = rewrite::trailing_axis(g, var, x);
    if (!axis) return miss(var, "{} does not reduce the trailing axes of '{}' with keepdims", var.describe(), x->name());
    std::string why;
    auto tail = rewrite::match_norm_tail(g, x, var.output(0), false, &why);
    if (!tail) return miss(var, "{}", why);
    if (!rewrite::fits_normalized(g, tail->gamma, x, *axis))
      return miss(var, "the normalised dims of '{}' ({}) are not static, or the scale '{}' varies across rows",
                  x->name(), x->type.to_string(), tail->gamma ? tail->gamma->name() : "");

    std::vector<Value*> inputs{x};
    if (tail->gamma) inputs.push_back(rewrite::normalized_param(rw, tail->gamma, x, *axis, 1.0f));
    Node* rms = rw.add_node("RMSNormalization", inputs, {tail->result}, rewrite::kGafDomain, 1);
    rms->attrs["axis"] = *axis;
    rms->attrs["epsilon"] = tail->epsilon;
    rw.replace(tail->result, rms->output(0));
    std::vector<Node*> pattern = tail->nodes;
    pattern.insert(pattern.end(), {&var, square});
    rw.erase_unused(pattern);
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_rms_norm_recognition() { return std::make_unique<RmsNormRecognition>(); }

}  // namespace gaf
