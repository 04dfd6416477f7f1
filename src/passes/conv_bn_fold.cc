// Folds a per-output-channel affine map that follows a Conv into the Conv's constant weights and bias.
//
//   x -> Conv(W, B) -> BatchNormalization(scale, bias, mean, var)   ==>   x -> Conv(W', B')
//
// Every rule below is y' = y * s[m] + t[m] on output channel m (axis 1 of the Conv output), which the Conv
// computes directly with W'[m, ...] = W[m, ...] * s[m] and B'[m] = B[m] * s[m] + t[m] (B = 0 when absent).
// Conditions: W (and B) are constants, the Conv output is read only by the folded node, the affine operands
// are constants varying along the channel axis only (so the result shape does not change), inference-mode
// BatchNormalization. The arithmetic is done in double and rounded once to the weight type, so the folded
// Conv differs from the original by fp32 rounding only. A weight shared with other nodes is copied, never
// changed.
#include <cmath>

#include "gaf/passes.h"
#include "passes/rewrite_util.h"

namespace gaf {

namespace {

class ConvBnFold final : public rewrite::RulePass {
 public:
  std::string_view name() const override { return "conv-bn-fold"; }

 private:
  bool rule(rewrite::Rewriter& rw, Node& conv) override {
    Graph& g = rw.graph();
    if (!rewrite::is_op(&conv, "Conv")) return false;
    Value* y = conv.output(0);
    Node* next = rewrite::sole_user(g, y);
    if (!next || !next->domain.empty() || next->input(0) == nullptr) return false;
    const Tensor* w = rewrite::constant_of(g, conv.input(1));
    const Tensor* b = conv.input(2) ? rewrite::constant_of(g, conv.input(2)) : nullptr;
    if (!w || w->rank() < 3 || (conv.input(2) && !b)) return false;
    if (w->dtype() != DType::Float && w->dtype() != DType::Double) return false;
    int64_t m = w->dim(0);
    if (b && (b->rank() != 1 || b->numel() != m)) return false;

    std::optional<rewrite::Affine> affine;
    // Conv -> BatchNormalization(scale, bias, mean, var) -> Conv(W * s, (B - mean) * s + bias)
    if (next->op_type == "BatchNormalization" && next->input(0) == y) affine = rewrite::batch_norm_affine(g, *next, m);
    // Conv -> Mul c -> Conv(W * c, B * c);  Conv -> Add c -> Conv(W, B + c)
    else if (next->op_type == "Mul" || next->op_type == "Add")
      affine = rewrite::elementwise_affine(g, *next, y, w->rank(), m);
    if (!affine) return false;

    Tensor w2 = rewrite::scale_along(*w, affine->first, 0);
    Tensor b2 = rewrite::affine_bias(b, 1.0, *affine, w->dtype());
    conv.set_input(1, rw.add_constant(conv.input(1)->name() + "__folded", std::move(w2)));
    Value* bias =
        rw.add_constant((b ? conv.input(2)->name() : y->name() + "_bias") + "__folded", std::move(b2));
    if (conv.num_inputs() > 2)
      conv.set_input(2, bias);
    else
      conv.add_input(bias);
    rw.replace(next->output(0), y);
    rw.erase_unused({next});
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_conv_bn_fold() { return std::make_unique<ConvBnFold>(); }

}  // namespace gaf
