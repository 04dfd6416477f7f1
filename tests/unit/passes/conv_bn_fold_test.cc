#include "affine_test_util.h"
#include "pass_test_util.h"

namespace gaf {
namespace {

using testing::expect_same_outputs;

const char* kPass = "conv-bn-fold";

// x[1,C,8,8] -> Conv(W[M, C/group, 3, 3], B[M]) -> `tail` (the node under test, built by the caller).
struct ConvGraph {
  Model model;
  GraphBuilder b{model, 15};
  Value* x;
  Value* conv;
  ConvGraph(int64_t c, int64_t m, int64_t group, bool bias = true) {
    x = b.input("x", DType::Float, {1, c, 8, 8});
    std::vector<Value*> ins{x, b.random_constant("w", {m, c / group, 3, 3}, 0.5f)};
    if (bias) ins.push_back(b.random_constant("b", {m}, 0.5f));
    conv = b.op("Conv", ins, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"group", group}});
  }
  Value* positive(const std::string& name, std::vector<int64_t> dims) {
    return testing::positive_constant(b, name, std::move(dims));
  }
  Value* batch_norm(int64_t m) { return testing::batch_norm(b, conv, m); }
  testing::Rewritten finish(Value* out) {
    b.output(out);
    b.finish();
    std::vector<std::unique_ptr<Pass>> p;
    p.push_back(make_conv_bn_fold());
    return testing::rewrite(model, std::move(p));
  }
};

TEST(ConvBnFold, BatchNormFoldsIntoConv) {
  ConvGraph cg(3, 4, 1);
  auto r = cg.finish(cg.b.op("Relu", {cg.batch_norm(4)}));
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Conv", 1}, {"Relu", 1}})) << r.dump();
  EXPECT_EQ(r.count(kPass), 1);
  expect_same_outputs(r.before, r.after, 1e-4, 1e-5);
}

TEST(ConvBnFold, DepthwiseConvWithoutBiasAndBatchNormAsGraphOutput) {
  ConvGraph cg(4, 4, 4, false);
  auto r = cg.finish(cg.batch_norm(4));
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Conv", 1}})) << r.dump();
  EXPECT_EQ(r.after.graph->nodes()[0]->num_inputs(), 3);
  expect_same_outputs(r.before, r.after, 1e-4, 1e-5);
}

TEST(ConvBnFold, ConvReadElsewhereIsNotFolded) {
  ConvGraph cg(3, 4, 1);
  Value* bn = cg.batch_norm(4);
  auto r = cg.finish(cg.b.op("Add", {bn, cg.b.op("Relu", {cg.conv})}));
  EXPECT_EQ(r.count(kPass), 0) << r.dump();
  EXPECT_EQ(r.ops()["BatchNormalization"], 1);
}

TEST(ConvBnFold, NonConstantStatisticsAreNotFolded) {
  ConvGraph cg(3, 4, 1);
  Value* mean = cg.b.input("mean_in", DType::Float, {4});
  Value* bn = cg.b.op("BatchNormalization",
                      {cg.conv, cg.positive("s", {4}), cg.positive("t", {4}), mean, cg.positive("v", {4})});
  auto r = cg.finish(bn);
  EXPECT_EQ(r.count(kPass), 0) << r.dump();
}

TEST(ConvBnFold, PerChannelMulAndAddFold) {
  ConvGraph cg(3, 4, 1);
  Value* scaled = cg.b.op("Mul", {cg.positive("k", {4, 1, 1}), cg.conv});
  Value* shifted = cg.b.op("Add", {scaled, cg.b.random_constant("c", {1, 4, 1, 1}, 1.0f)});
  auto r = cg.finish(cg.b.op("Relu", {shifted}));
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Conv", 1}, {"Relu", 1}})) << r.dump();
  EXPECT_EQ(r.count(kPass), 2);
  expect_same_outputs(r.before, r.after, 1e-4, 1e-5);

  // A scalar multiplier is per-channel too.
  ConvGraph scalar(3, 4, 1);
  auto s = scalar.finish(scalar.b.op("Mul", {scalar.conv, scalar.b.scalar(0.25f)}));
  EXPECT_EQ(s.ops(), (std::map<std::string, int>{{"Conv", 1}})) << s.dump();
  expect_same_outputs(s.before, s.after, 1e-4, 1e-5);
}

TEST(ConvBnFold, SpatiallyVaryingOrRankRaisingOperandsAreNotFolded) {
  ConvGraph spatial(3, 4, 1);  // varies along W: not one value per channel
  auto r =
      spatial.finish(spatial.b.op("Mul", {spatial.conv, spatial.b.random_constant("k", {1, 1, 8}, 1.0f)}));
  EXPECT_EQ(r.count(kPass), 0) << r.dump();

  ConvGraph batch(3, 4, 1);  // [2, 4, 1, 1] broadcasts the batch dim from 1 to 2
  auto s = batch.finish(batch.b.op("Add", {batch.conv, batch.b.random_constant("c", {2, 4, 1, 1}, 1.0f)}));
  EXPECT_EQ(s.count(kPass), 0) << s.dump();
}

}  // namespace
}  // namespace gaf
