// MatMul(A, B) + constant bias -> Gemm(A, B, bias) when A and B are 2-D: one anchor kernel with the bias in
// its epilogue. With a batched (N-D) A the MatMul stays: Gemm is 2-D only, and the fusion planner attaches
// the Add to the MatMul as an epilogue instead. A Gemm without C (as transpose folding leaves it) takes the
// bias the same way.
//
// Conditions: the product is read only by the Add; the bias is a constant that broadcasts into [M, N] without
// changing the result's shape (Gemm's C is unidirectionally broadcast, from opset 7); floating-point types.
#include "gaf/passes.h"
#include "passes/rewrite_util.h"

namespace gaf {

namespace {

// Whether constant c broadcasts into a product of static-or-symbolic shape [M, N] leaving it [M, N].
bool bias_fits(const Tensor& c, const Value* product) {
  if (c.rank() > 2 || rewrite::rank_of(product) != 2) return false;
  const Shape& s = *product->type.shape;
  for (int i = 0; i < c.rank(); ++i) {
    int64_t d = c.dims()[c.rank() - 1 - i];
    const Dim& want = s[1 - i];
    if (d != 1 && !(want.is_static() && want.value() == d)) return false;
  }
  return true;
}

class MatMulAddToGemm final : public rewrite::RulePass {
 public:
  std::string_view name() const override { return "matmul-add-to-gemm"; }

 private:
  bool rule(rewrite::Rewriter& rw, Node& mm) override {
    Graph& g = rw.graph();
    bool gemm = rewrite::is_op(&mm, "Gemm") && !mm.input(2);
    if (!gemm && !rewrite::is_op(&mm, "MatMul")) return false;
    if (mm.opset < 7 || !is_floating(mm.output(0)->type.dtype)) return false;
    Value* y = mm.output(0);
    Node* add = rewrite::sole_user(g, y);
    if (!rewrite::is_op(add, "Add")) return false;
    Value* bias = rewrite::other_operand(add, y);
    const Tensor* c = rewrite::constant_of(g, bias);
    if (!c || c->dtype() != y->type.dtype || !bias_fits(*c, y)) return false;
    if (!gemm && (rewrite::rank_of(mm.input(0)) != 2 || rewrite::rank_of(mm.input(1)) != 2)) return false;

    if (gemm) {
      // Gemm(A, B) + c -> Gemm(A, B, c, beta = 1)
      if (mm.num_inputs() == 2)
        mm.add_input(bias);
      else
        mm.set_input(2, bias);
      mm.attrs["beta"] = 1.0f;
      rw.replace(add->output(0), y);
    } else {
      // MatMul(A, B) + c -> Gemm(A, B, c)
      Node* n = rw.add_node("Gemm", {mm.input(0), mm.input(1), bias}, {add->output(0)}, "", mm.opset);
      rw.replace(add->output(0), n->output(0));
    }
    rw.erase_unused({add, &mm});
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_matmul_add_to_gemm() { return std::make_unique<MatMulAddToGemm>(); }

}  // namespace gaf
