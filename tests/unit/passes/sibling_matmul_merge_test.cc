#include "gaf/builder.h"
#include "pass_test_util.h"

namespace gaf {
namespace {

using testing::expect_same_outputs;

const char* kPass = "sibling-matmul-merge";

testing::Rewritten merge(Model& m) {
  std::vector<std::unique_ptr<Pass>> p;
  p.push_back(make_sibling_matmul_merge());
  return testing::rewrite(m, std::move(p));
}

// q, k, v projections of x[2,8,16]: MatMul by [16, n_i], each followed by a bias Add when `bias[i]`.
Model projections(std::vector<int64_t> widths, std::vector<bool> bias, int64_t opset = 17) {
  Model m;
  GraphBuilder b(m, opset);
  Value* x = b.input("x", DType::Float, {2, 8, 16});
  for (size_t i = 0; i < widths.size(); ++i) {
    std::string n = std::to_string(i);
    Value* y = b.op("MatMul", {x, b.random_constant("w" + n, {16, widths[i]}, 0.5f)});
    if (bias[i]) y = b.op("Add", {y, b.random_constant("b" + n, {widths[i]}, 0.5f)});
    b.output(b.op("Relu", {y}));
  }
  b.finish();
  return m;
}

TEST(SiblingMatMulMerge, ProjectionsWithBiasesBecomeOneMatMulAddSplit) {
  Model m = projections({8, 8, 4}, {true, true, true});
  auto r = merge(m);
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Add", 1}, {"MatMul", 1}, {"Relu", 3}, {"Split", 1}}))
      << r.dump();
  EXPECT_EQ(r.count(kPass), 1);
  expect_same_outputs(r.before, r.after);
}

TEST(SiblingMatMulMerge, BiasesMergeOnlyWhenEverySiblingHasOne) {
  Model m = projections({8, 4}, {true, false});
  auto r = merge(m);
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Add", 1}, {"MatMul", 1}, {"Relu", 2}, {"Split", 1}}))
      << r.dump();
  // The remaining Add reads a Split output: it was not merged.
  for (const Node* n : r.after.graph->nodes())
    if (n->op_type == "Add") {
      EXPECT_EQ(n->input(0)->producer()->op_type, "Split");
    }
  expect_same_outputs(r.before, r.after);
}

TEST(SiblingMatMulMerge, BeforeOpset13TheSplitSizesAreAnAttribute) {
  Model m = projections({8, 4}, {true, true}, 12);
  auto r = merge(m);
  EXPECT_EQ(r.count(kPass), 1) << r.dump();
  for (const Node* n : r.after.graph->nodes())
    if (n->op_type == "Split") {
      EXPECT_EQ(n->attr_ints("split"), (std::vector<int64_t>{8, 4}));
    }
  expect_same_outputs(r.before, r.after);
}

TEST(SiblingMatMulMerge, LoneOrNonConstantWeightsStay) {
  Model lone = projections({8}, {true});
  EXPECT_EQ(merge(lone).count(kPass), 0);

  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::Float, {8, 16});
  Value* w = b.input("w", DType::Float, {16, 8});
  b.output(b.op("MatMul", {x, w}));
  b.output(b.op("MatMul", {x, b.random_constant("w2", {16, 8}, 0.5f)}));
  b.output(b.op("MatMul", {b.random_constant("w3", {8, 8}, 0.5f), x}));  // x second: a different product
  b.finish();
  auto r = merge(m);
  EXPECT_EQ(r.count(kPass), 0) << r.dump();
}

}  // namespace
}  // namespace gaf

namespace gaf {
namespace {

// x[rows, 64] into three 64-wide projections: merging saves two launches and two reads of x but costs the
// Split's copy of the products, so it pays for a few rows and not for many (cpu-host figures).
TEST(SiblingMatMulMerge, MergesOnlyWhenTheTargetSaysItPays) {
  auto build = [](int64_t rows) {
    Model m;
    GraphBuilder b(m);
    Value* x = b.input("x", DType::Float, {rows, 64});
    for (int i = 0; i < 3; ++i) b.output(b.op("MatMul", {x, b.random_constant("w" + std::to_string(i), {64, 64}, 0.1f)}));
    b.finish();
    return m;
  };
  Model few = build(16), many = build(1024);
  auto r = merge(few);
  EXPECT_EQ(r.count(kPass), 1) << r.dump();
  expect_same_outputs(r.before, r.after);
  EXPECT_EQ(merge(many).count(kPass), 0);
  // A target whose launches cost a millisecond: then it pays.
  Target slow_launch = Target::cpu_host();
  slow_launch.launch_overhead_s = 1e-3;
  PassContext ctx;
  ctx.target = &slow_launch;
  std::vector<std::unique_ptr<Pass>> p;
  p.push_back(make_sibling_matmul_merge());
  EXPECT_EQ(testing::rewrite(many, std::move(p), ctx).count(kPass), 1);
}

}  // namespace
}  // namespace gaf
