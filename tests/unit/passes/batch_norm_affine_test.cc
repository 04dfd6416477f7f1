#include "affine_test_util.h"
#include "pass_test_util.h"

namespace gaf {
namespace {

using testing::expect_same_outputs;

const char* kPass = "batch-norm-affine";

testing::Rewritten run(Model& m) {
  std::vector<std::unique_ptr<Pass>> p;
  p.push_back(make_batch_norm_affine());
  return testing::rewrite(m, std::move(p));
}

TEST(BatchNormAffine, StandaloneBatchNormBecomesAMultiplyAdd) {
  // DenseNet's pre-activation: Concat -> BatchNorm -> Relu.
  Model m;
  GraphBuilder b(m, 15);
  Value* a = b.input("a", DType::Float, {2, 3, 5, 5});
  Value* c = b.input("c", DType::Float, {2, 4, 5, 5});
  b.output(b.op("Relu", {testing::batch_norm(b, b.op("Concat", {a, c}, {{"axis", int64_t(1)}}), 7)}));
  b.finish();
  auto r = run(m);
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Concat", 1}, {"Mul", 1}, {"Add", 1}, {"Relu", 1}})) << r.dump();
  EXPECT_EQ(r.count(kPass), 1);
  for (const Node* n : r.after.graph->nodes())
    if (n->op_type == "Mul" || n->op_type == "Add") {  // constants of x's rank, varying along the channels
      EXPECT_EQ(n->input(1)->constant().dims(), (std::vector<int64_t>{1, 7, 1, 1})) << n->describe();
    }
  expect_same_outputs(r.before, r.after, 1e-5, 1e-6);
}

TEST(BatchNormAffine, BatchNormWithParametersFedAtRunTimeStays) {
  for (bool fed_scale : {false, true}) {
    Model m;
    GraphBuilder b(m, 15);
    Value* x = b.input("x", DType::Float, {2, 3, 4});
    Value* mean = fed_scale ? b.random_constant("mean", {3}, 1.0f) : b.input("mean", DType::Float, {3});
    Value* scale = fed_scale ? b.input("scale", DType::Float, {3}) : b.random_constant("scale", {3}, 1.0f);
    Value* y = b.op("BatchNormalization",
                    {x, scale, b.random_constant("shift", {3}, 1.0f), mean, testing::positive_constant(b, "var", {3})});
    b.output(y);
    b.finish();
    auto r = run(m);
    EXPECT_EQ(r.count(kPass), 0) << r.dump();
    EXPECT_EQ(r.ops()["BatchNormalization"], 1);
  }
}

}  // namespace
}  // namespace gaf
