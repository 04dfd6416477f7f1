#include "gaf/builder.h"
#include "pass_test_util.h"

namespace gaf {
namespace {

using testing::expect_same_outputs;

const char* kPass = "constant-operand-fold";

// Constant folding first: Swin's mask reaches the Add through Unsqueezes.
testing::Rewritten fold(const Model& m) {
  std::vector<std::unique_ptr<Pass>> p;
  p.push_back(make_constant_folding());
  p.push_back(make_constant_operand_fold());
  return testing::rewrite(m, std::move(p));
}

// The constant operand of the only node of type `op`; fails the test when there is not exactly one such node.
std::vector<int64_t> constant_dims(const Graph& g, const std::string& op) {
  std::vector<int64_t> dims;
  int found = 0;
  for (const Node* n : g.nodes()) {
    if (n->op_type != op) continue;
    ++found;
    for (const Value* in : n->inputs())
      if (in && in->is_constant()) dims = in->constant().dims();
  }
  EXPECT_EQ(found, 1) << op;
  return dims;
}

// A 0 / -100 mask per window, as Swin builds for shifted windows ([windows, N, N]).
Tensor window_mask(int64_t windows, int64_t n) {
  std::vector<float> m(size_t(windows * n * n));
  for (size_t i = 0; i < m.size(); ++i) m[i] = (i * 7 + i / 5) % 3 == 0 ? -100.0f : 0.0f;
  return Tensor::from<float>({windows, n, n}, m);
}

// Swin's shifted-window attention scores: 2 images x 4 windows, 3 heads, 7 tokens. The relative position bias
// (when `bias`) is added to [8, 3, 7, 7], the mask to the 5-D view [2, 4, 3, 7, 7], then back and Softmax.
Model swin_scores(bool bias) {
  Model m;
  GraphBuilder b(m, 17);
  Value* s = b.input("s", DType::Float, {8, 3, 7, 7});
  if (bias) s = b.op("Add", {s, b.random_constant("bias", {1, 3, 7, 7}, 2.0f)});
  Value* v = b.op("Reshape", {s, b.ints({2, 4, 3, 7, 7})});
  Value* mask = b.constant(window_mask(4, 7), "mask");
  Value* mu = b.op("Unsqueeze", {b.op("Unsqueeze", {mask, b.ints({1})}), b.ints({0})});
  Value* back = b.op("Reshape", {b.op("Add", {v, mu}), b.ints({-1, 3, 7, 7})});
  b.output(b.op("Softmax", {back}, {{"axis", int64_t(-1)}}));
  b.finish();
  return m;
}

TEST(ConstantOperandFold, SwinMaskThroughItsViewAndTheBiasBecomeOneAdd) {
  for (bool bias : {false, true}) {
    auto r = fold(swin_scores(bias));
    EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Add", 1}, {"Softmax", 1}})) << r.dump();
    EXPECT_EQ(r.count(kPass), bias ? 2 : 1);
    // The mask alone does not vary over the heads: it stays [8, 1, 7, 7]; with the bias it varies over both.
    EXPECT_EQ(constant_dims(*r.after.graph, "Add"), (std::vector<int64_t>{8, bias ? 3 : 1, 7, 7}));
    expect_same_outputs(r.before, r.after, 1e-6, 1e-7);
  }
}

TEST(ConstantOperandFold, OperandOrderAndOpsKept) {
  // c - view and view / c: the constant keeps its side.
  for (const char* op : {"Sub", "Div"}) {
    Model m;
    GraphBuilder b(m, 17);
    Value* x = b.input("x", DType::Float, {6, 10});
    Value* v = b.op("Reshape", {x, b.ints({2, 3, 10})});
    Value* c = b.random_constant("c", {3, 1}, 1.0f);
    Value* y = std::string(op) == "Sub" ? b.op(op, {c, v}) : b.op(op, {v, b.op("Add", {c, b.scalar(3.0f)})});
    b.output(b.op("Relu", {b.op("Reshape", {y, b.ints({6, 10})})}));
    b.finish();
    auto r = fold(m);
    EXPECT_EQ(r.ops(), (std::map<std::string, int>{{op, 1}, {"Relu", 1}})) << op << "\n" << r.dump();
    for (const Node* n : r.after.graph->nodes())
      if (n->op_type == op) {
        EXPECT_EQ(n->input(0)->is_constant(), std::string(op) == "Sub") << r.dump();
      }
    EXPECT_EQ(constant_dims(*r.after.graph, op), (std::vector<int64_t>{6, 1}));  // [3, 1] over 2 x 3 rows
    expect_same_outputs(r.before, r.after, 0, 0);
  }
}

TEST(ConstantOperandFold, AddChainKeepsTheDimsThatWidenX) {
  // x [4, 1] + c1 [4, 5] + c2 [1, 5]: the sum's columns widen x, so they stay; x [4, 5] + [1, 5] + [1, 5]: [1, 5].
  for (int64_t xcols : {1, 5}) {
    Model m;
    GraphBuilder b(m, 17);
    Value* x = b.input("x", DType::Float, {4, xcols});
    Value* c1 = b.random_constant("c1", {xcols == 1 ? 4 : 1, 5}, 1.0f);
    Value* y = b.op("Add", {b.random_constant("c2", {1, 5}, 1.0f), b.op("Add", {x, c1})});
    b.output(b.op("Relu", {y}));
    b.finish();
    auto r = fold(m);
    EXPECT_EQ(r.count(kPass), 1) << r.dump();
    EXPECT_EQ(constant_dims(*r.after.graph, "Add"), (std::vector<int64_t>{xcols == 1 ? 4 : 1, 5}));
    expect_same_outputs(r.before, r.after, 1e-6, 1e-7);
  }
}

TEST(ConstantOperandFold, DoesNotFire) {
  auto build = [](int variant) {
    Model m;
    GraphBuilder b(m, 17);
    Value* x = b.input("x", DType::Float, {8, 3, 7, 7});
    Value* v = b.op("Reshape", {x, b.ints({2, 4, 3, 7, 7})});
    Value* c = variant == 3 ? b.input("mask", DType::Float, {1, 4, 1, 7, 7})  // not a constant
                            : b.random_constant("c", {1, 4, 1, 7, 7}, 1.0f);
    Value* sum = b.op(variant == 4 ? "Mul" : "Add", {v, c});
    std::vector<int64_t> back = variant == 0 ? std::vector<int64_t>{8, 21, 7} : std::vector<int64_t>{-1, 3, 7, 7};
    b.output(b.op("Relu", {b.op("Reshape", {sum, b.ints(back)})}));
    if (variant == 2) b.output(sum);  // the 5-D sum is read elsewhere
    if (variant == 4) {               // Mul(Mul(x, c1), c2) is not reassociated
      b.output(b.op("Mul", {b.op("Mul", {x, b.scalar(3.0f)}), b.scalar(1e-30f)}));
    }
    b.finish();
    return m;
  };
  // 0: read back in another shape; 2: the view's sum read elsewhere; 3: the operand is an input; 4: the
  // sandwich's op is a Mul (that one folds), a Mul chain (that one does not).
  for (int variant : {0, 2, 3}) {
    auto r = fold(build(variant));
    EXPECT_EQ(r.count(kPass), 0) << variant << "\n" << r.dump();
  }
  auto r = fold(build(4));
  EXPECT_EQ(r.count(kPass), 1) << r.dump();
  EXPECT_EQ(r.ops()["Mul"], 3) << r.dump();
  expect_same_outputs(r.before, r.after, 0, 0);
  // An Add chain whose inner constant is an input.
  Model m;
  GraphBuilder b(m, 17);
  Value* x = b.input("x", DType::Float, {4, 5});
  b.output(b.op("Relu", {b.op("Add", {b.op("Add", {x, b.input("c1", DType::Float, {1, 5})}), b.scalar(1.0f)})}));
  b.finish();
  EXPECT_EQ(fold(m).count(kPass), 0);
}

}  // namespace
}  // namespace gaf
