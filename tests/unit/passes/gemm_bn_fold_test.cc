#include "affine_test_util.h"
#include "pass_test_util.h"

namespace gaf {
namespace {

using testing::expect_same_outputs;

const char* kPass = "gemm-bn-fold";

// x[N, K] -> MatMul(W[K, M]) or Gemm(...) -> `tail` (the node under test, built by the caller).
struct LinearGraph {
  Model model;
  GraphBuilder b{model, 15};
  Value* x;
  Value* y = nullptr;
  explicit LinearGraph(const std::vector<int64_t>& xdims = {6, 10}) {
    x = b.input("x", DType::Float, Shape(xdims.begin(), xdims.end()));
  }
  Value* batch_norm(Value* in, int64_t m) { return testing::batch_norm(b, in, m); }
  testing::Rewritten finish(Value* out) {
    b.output(out);
    b.finish();
    std::vector<std::unique_ptr<Pass>> p;
    p.push_back(make_gemm_bn_fold());
    return testing::rewrite(model, std::move(p));
  }
};

TEST(GemmBnFold, MatMulBatchNormBecomesGemm) {
  LinearGraph l;
  Value* mm = l.b.op("MatMul", {l.x, l.b.random_constant("w", {10, 7}, 0.5f)});
  auto r = l.finish(l.batch_norm(mm, 7));
  EXPECT_EQ(r.count(kPass), 1);
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Gemm", 1}})) << r.dump();
  expect_same_outputs(r.before, r.after, 1e-5, 1e-5);
}

TEST(GemmBnFold, GemmWithTransposedWeightsBiasAlphaBetaAndAPerColumnScale) {
  for (const char* tail : {"bn", "mul"}) {
    LinearGraph l;
    Value* gemm = l.b.op("Gemm", {l.x, l.b.random_constant("w", {7, 10}, 0.5f), l.b.random_constant("c", {7}, 1.0f)},
                         {{"transB", int64_t(1)}, {"alpha", 0.75f}, {"beta", 1.5f}});
    Value* out = std::string(tail) == "bn" ? l.batch_norm(gemm, 7)
                                           : l.b.op("Mul", {gemm, l.b.random_constant("s", {1, 7}, 2.0f)});
    auto r = l.finish(out);
    EXPECT_EQ(r.count(kPass), 1) << tail;
    EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Gemm", 1}})) << r.dump();
    expect_same_outputs(r.before, r.after, 1e-5, 1e-5);
  }
}

TEST(GemmBnFold, DoesNotFire) {
  {  // the product is read elsewhere too
    LinearGraph l;
    Value* mm = l.b.op("MatMul", {l.x, l.b.random_constant("w", {10, 7}, 0.5f)});
    l.b.output(mm);
    auto r = l.finish(l.batch_norm(mm, 7));
    EXPECT_EQ(r.count(kPass), 0) << r.dump();
  }
  {  // a batched (3-D) product: BatchNormalization's axis 1 is not the feature axis
    LinearGraph l({2, 7, 10});
    Value* mm = l.b.op("MatMul", {l.x, l.b.random_constant("w", {10, 7}, 0.5f)});
    auto r = l.finish(l.batch_norm(mm, 7));
    EXPECT_EQ(r.count(kPass), 0) << r.dump();
  }
  {  // weights fed at run time
    LinearGraph l;
    Value* w = l.b.input("w", DType::Float, {10, 7});
    auto r = l.finish(l.batch_norm(l.b.op("MatMul", {l.x, w}), 7));
    EXPECT_EQ(r.count(kPass), 0) << r.dump();
  }
  {  // a scale per row, not per column
    LinearGraph l;
    Value* mm = l.b.op("MatMul", {l.x, l.b.random_constant("w", {10, 7}, 0.5f)});
    auto r = l.finish(l.b.op("Mul", {mm, l.b.random_constant("s", {6, 1}, 2.0f)}));
    EXPECT_EQ(r.count(kPass), 0) << r.dump();
  }
  {  // a Gemm bias that varies along the rows
    LinearGraph l;
    Value* gemm = l.b.op("Gemm", {l.x, l.b.random_constant("w", {10, 7}, 0.5f), l.b.random_constant("c", {6, 7}, 1.0f)});
    auto r = l.finish(l.batch_norm(gemm, 7));
    EXPECT_EQ(r.count(kPass), 0) << r.dump();
  }
}

}  // namespace
}  // namespace gaf
