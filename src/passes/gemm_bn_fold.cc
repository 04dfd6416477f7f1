// Folds a per-column affine map that follows a 2-D MatMul or Gemm with constant weights into those weights and
// the bias (BatchNorm1d after a Linear layer, a per-feature scale):
//
//   MatMul(A, W) -> BatchNormalization(scale, bias, mean, var)   ==>   Gemm(A, W', C')
//   Gemm(A, B, C; alpha, beta) -> Mul(c)                          ==>   Gemm(A, B', C'; alpha, beta = 1)
//
// With y' = y * s[m] + t[m] on output column m (s, t as in conv-bn-fold): op(B)'[:, m] = op(B)[:, m] * s[m]
// and C'[m] = beta * C[m] * s[m] + t[m] (C = 0 when absent). A per-column Add is matmul-add-to-gemm's.
// Conditions: the product is 2-D [N, M] and read only by the folded node; B (and C, when present) constant, C a
// scalar or per column ([M] or [1, M]); the affine operands constant per column; inference BatchNormalization;
// float or double. The arithmetic is done in double and rounded once; a weight shared with other nodes is
// copied, never changed.
#include "gaf/passes.h"
#include "passes/rewrite_util.h"

namespace gaf {

namespace {

class GemmBnFold final : public rewrite::RulePass {
 public:
  std::string_view name() const override { return "gemm-bn-fold"; }

 private:
  bool rule(rewrite::Rewriter& rw, Node& mm) override {
    Graph& g = rw.graph();
    const bool gemm = rewrite::is_op(&mm, "Gemm");
    if ((!gemm && !rewrite::is_op(&mm, "MatMul")) || mm.opset < 7) return false;
    Value* y = mm.output(0);
    if (rewrite::rank_of(y) != 2 || rewrite::rank_of(mm.input(0)) != 2) return false;
    const Tensor* w = rewrite::constant_of(g, mm.input(1));
    if (!w || w->rank() != 2 || (w->dtype() != DType::Float && w->dtype() != DType::Double)) return false;
    const bool trans_b = gemm && mm.attr_int("transB", 0) != 0;
    const int64_t m = w->dim(trans_b ? 0 : 1);
    const Tensor* c = nullptr;
    if (gemm && mm.input(2)) {
      c = rewrite::constant_of(g, mm.input(2));
      if (!c || c->dtype() != w->dtype() || !rewrite::per_channel(*c, 2, m)) return false;
    }
    Node* next = rewrite::sole_user(g, y);
    if (!next || !next->domain.empty() || next->input(0) == nullptr) return false;

    std::optional<rewrite::Affine> affine;
    // MatMul -> BatchNormalization(scale, bias, mean, var) -> Gemm(A, W * s, (C - mean) * s + bias)
    if (next->op_type == "BatchNormalization" && next->input(0) == y) affine = rewrite::batch_norm_affine(g, *next, m);
    // MatMul -> Mul c -> Gemm(A, W * c, C * c)
    else if (next->op_type == "Mul")
      affine = rewrite::elementwise_affine(g, *next, y, 2, m);
    if (!affine) return false;

    const double beta = gemm ? mm.attr_float("beta", 1.0f) : 1.0;
    Tensor w2 = rewrite::scale_along(*w, affine->first, trans_b ? 0 : 1);  // op(B)'s columns
    Tensor c2 = rewrite::affine_bias(c, beta, *affine, w->dtype());
    Value* wv = rw.add_constant(mm.input(1)->name() + "__folded", std::move(w2));
    Value* cv = rw.add_constant((c ? mm.input(2)->name() : y->name() + "_bias") + "__folded", std::move(c2));
    Node* out = rw.add_node("Gemm", {mm.input(0), wv, cv}, {next->output(0)}, "", mm.opset);
    if (gemm) out->attrs = mm.attrs;
    out->attrs["beta"] = 1.0f;
    rw.replace(next->output(0), out->output(0));
    rw.erase_unused({next, &mm});
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_gemm_bn_fold() { return std::make_unique<GemmBnFold>(); }

}  // namespace gaf
