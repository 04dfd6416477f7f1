// LayerNormalization as exporters write it for opsets without the op (PyTorch at opset < 17):
//
//   m = ReduceMean(x, axes)          axes: the trailing axes [axis, rank), keepdims
//   d = Sub(x, m)
//   v = ReduceMean(Pow(d, 2) | Mul(d, d), axes)
//   y = d / Sqrt(v + eps)  |  d * Reciprocal(Sqrt(v + eps))
//   [y = y * gamma] [y = y + beta]   (gamma, beta constants varying over the normalised dims only)
//
// becomes one LayerNormalization(x, gamma, beta, axis, epsilon): the standard op from opset 17,
// gaf.LayerNormalization (same signature and semantics, CPU kernel in runtime/kernels/onnx/gaf_ops.cc) before.
// Anchored on the Sub. Every intermediate must be read only inside the pattern (d by the square and the
// normalising node); fp32 only, so eps is exact as the float attribute. Missing gamma becomes ones;
// gamma/beta of a broadcast shape are expanded to the normalised shape, which must be static.
#include "gaf/passes.h"
#include "passes/norm_match.h"

namespace gaf {

namespace {

// The node squaring `d`: Pow(d, 2) or Mul(d, d).
Node* square_of(const Graph& g, const Value* d) {
  for (const Use& u : d->uses()) {
    Node* n = u.node;
    if (rewrite::is_op(n, "Mul") && n->input(0) == d && n->input(1) == d) return n;
    if (rewrite::is_op(n, "Pow") && n->input(0) == d) {
      auto e = rewrite::scalar_operand(g, n->input(1), d);
      if (e && *e == 2.0) return n;
    }
  }
  return nullptr;
}

class LayerNormRecognition final : public rewrite::RulePass {
 public:
  std::string_view name() const override { return "layer-norm-recognition"; }

 private:
  bool rule(rewrite::Rewriter& rw, Node& sub) override {
    Graph& g = rw.graph();
    if (!rewrite::is_op(&sub, "Sub")) return false;
    Value* x = sub.input(0);
    Node* mean = rewrite::producer_op(sub.input(1), "ReduceMean");
    if (!mean || mean->input(0) != x || !rewrite::is_float(x) || rewrite::sole_user(g, sub.input(1)) != &sub)
      return false;
    auto axis = rewrite::trailing_axis(g, *mean, x);
    if (!axis) return miss(sub, "the mean {} does not reduce the trailing axes of '{}' with keepdims", mean->describe(),
                           x->name());
    Value* d = sub.output(0);
    Node* square = square_of(g, d);
    if (!square) return miss(sub, "the centred input '{}' is not squared (Pow(., 2) or Mul(d, d))", d->name());
    Node* var = rewrite::sole_user(g, square->output(0));
    if (!rewrite::is_op(var, "ReduceMean") || rewrite::trailing_axis(g, *var, x) != axis)
      return miss(sub, "the square '{}' is not averaged by one ReduceMean over the mean's axes",
                  square->output(0)->name());
    std::string why;
    auto tail = rewrite::match_norm_tail(g, d, var->output(0), true, &why);
    if (!tail) return miss(sub, "{}", why);
    if (!rewrite::used_only_by(g, d, {square, tail->normalize}))
      return miss(sub, "the centred input '{}' is also read outside the normalisation", d->name());
    if (!rewrite::fits_normalized(g, tail->gamma, x, *axis) || !rewrite::fits_normalized(g, tail->beta, x, *axis))
      return miss(sub, "the normalised dims of '{}' ({}) are not static, or the scale or shift varies across rows",
                  x->name(), x->type.to_string());

    std::vector<Value*> inputs{x, rewrite::normalized_param(rw, tail->gamma, x, *axis, 1.0f)};
    if (tail->beta) inputs.push_back(rewrite::normalized_param(rw, tail->beta, x, *axis, 0.0f));
    bool standard = sub.opset >= 17;
    Node* ln = rw.add_node("LayerNormalization", inputs, {tail->result}, standard ? "" : rewrite::kGafDomain,
                           standard ? sub.opset : 1);
    ln->attrs["axis"] = *axis;
    ln->attrs["epsilon"] = tail->epsilon;
    rw.replace(tail->result, ln->output(0));
    std::vector<Node*> pattern = tail->nodes;
    pattern.insert(pattern.end(), {var, square, &sub, mean});
    rw.erase_unused(pattern);
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_layer_norm_recognition() { return std::make_unique<LayerNormRecognition>(); }

}  // namespace gaf
