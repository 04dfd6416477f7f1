// An inference BatchNormalization that no Conv or Gemm absorbed (DenseNet's pre-activation BN -> ReLU -> Conv, a
// BN after a Concat) becomes one multiply-add per element with per-channel constants:
//
//   BatchNormalization(x, scale, bias, mean, var)  ->  x * s + t,   s = scale / sqrt(var + eps),
//                                                                   t = bias - mean * s   (shaped [1, C, 1, ...])
//
// The op itself divides by a square root per element (compute-bound where its memory traffic is small), and the
// constants have x's rank, so channels-last Transposes move through the Mul and Add (transpose-fold) instead of
// wrapping the normalisation. Opt level 2 and up, after conv-bn-fold and gemm-bn-fold (a BN they fold is gone),
// before layout-nhwc. s and t are computed in double and rounded once to x's type.
#include "gaf/passes.h"
#include "passes/rewrite_util.h"

namespace gaf {

namespace {

class BatchNormAffine final : public rewrite::RulePass {
 public:
  std::string_view name() const override { return "batch-norm-affine"; }

 private:
  bool rule(rewrite::Rewriter& rw, Node& bn) override {
    Graph& g = rw.graph();
    if (!rewrite::is_op(&bn, "BatchNormalization") || !bn.input(0)) return false;
    Value* x = bn.input(0);
    const int rank = rewrite::rank_of(x);
    if (rank < 2 || !x->type.shape || !(*x->type.shape)[1].is_static()) return false;
    const DType t = x->type.dtype;
    if (t != DType::Float && t != DType::Double) return false;
    const int64_t c = (*x->type.shape)[1].value();
    auto affine = rewrite::batch_norm_affine(g, bn, c);  // inference mode, constant parameters of C entries
    if (!affine) return false;
    std::vector<int64_t> dims(size_t(rank), 1);
    dims[1] = c;
    Tensor s(t, dims), sh(t, dims);
    for (int64_t i = 0; i < c; ++i) {
      s.set_double(i, affine->first[size_t(i)]);
      sh.set_double(i, affine->second[size_t(i)]);
    }
    Value* y = bn.output(0);
    const int opset = std::max(bn.opset, 7);
    Node* mul = rw.add_node("Mul", {x, rw.add_constant(y->name() + "__bn_scale", std::move(s))}, {y}, "", opset);
    Node* add = rw.add_node("Add", {mul->output(0), rw.add_constant(y->name() + "__bn_shift", std::move(sh))}, {y},
                            "", opset);
    rw.replace(y, add->output(0));
    rw.erase_unused({&bn});
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_batch_norm_affine() { return std::make_unique<BatchNormAffine>(); }

}  // namespace gaf
