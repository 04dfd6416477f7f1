#include "pass_test_util.h"

namespace gaf {
namespace {

using testing::expect_same_outputs;
using testing::header;
using testing::rewrite;

TEST(ConstantFolding, FoldsAConstantChain) {
  auto r = rewrite(header() + R"(g (float[2,3] x) => (float[2,3] y) {
      c = Constant <value = float[3] {1, 2, 3}> ()
      two = Constant <value = float {2}> ()
      d = Mul(c, two)
      e = Neg(d)
      y = Add(x, e) })",
                   make_constant_folding());
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Add", 1}})) << r.dump();
  EXPECT_EQ(r.count("constant-folding"), 2);
  const Value* e = r.after.graph->nodes()[0]->input(1);
  ASSERT_TRUE(e->is_constant());
  EXPECT_EQ(e->name(), "e");
  EXPECT_EQ(e->constant().get_double(2), -6.0);
  expect_same_outputs(r.before, r.after);
}

// The pass computes through the evaluator the driver installs, and folds only what it can evaluate.
TEST(ConstantFolding, FoldsWhatTheEvaluatorCanEvaluate) {
  struct NoNeg final : ConstantEvaluator {
    bool can_evaluate(const Node& n) const override { return n.op_type != "Neg" && runtime().can_evaluate(n); }
    std::vector<Tensor> evaluate(const Node& n, const std::vector<const Tensor*>& inputs) const override {
      return runtime().evaluate(n, inputs);
    }
    static const ConstantEvaluator& runtime() { return runtime::constant_evaluator(); }
  } no_neg;
  PassContext ctx;
  ctx.evaluator = &no_neg;
  std::vector<std::unique_ptr<Pass>> passes;
  passes.push_back(make_constant_folding());
  auto r = rewrite(testing::parse(header() + R"(g (float[2,3] x) => (float[2,3] y) {
      c = Constant <value = float[3] {1, 2, 3}> ()
      two = Constant <value = float {2}> ()
      d = Mul(c, two)
      e = Neg(d)
      y = Add(x, e) })"),
                   std::move(passes), ctx);
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Add", 1}, {"Neg", 1}})) << r.dump();
  EXPECT_EQ(r.count("constant-folding"), 1);
  expect_same_outputs(r.before, r.after);
}

TEST(ConstantFolding, LeavesNodesReadingNonConstants) {
  auto r = rewrite(header() + R"(g (float[2,3] x) => (float[2,3] y) {
      c = Constant <value = float[3] {1, 2, 3}> ()
      d = Mul(x, c)
      y = Relu(d) })",
                   make_constant_folding());
  EXPECT_EQ(r.count("constant-folding"), 0);
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Mul", 1}, {"Relu", 1}}));
}

TEST(ConstantFolding, LeavesRandomOpsAlone) {
  auto r = rewrite(header() + R"(g (float[2,3] x) => (float[2,3] y) {
      c = Constant <value = float[2,3] {1, 2, 3, 4, 5, 6}> ()
      n = RandomUniformLike <seed = 1.0> (c)
      y = Add(x, n) })",
                   make_constant_folding());
  EXPECT_EQ(r.count("constant-folding"), 0);
  EXPECT_EQ(r.ops().count("RandomUniformLike"), 1u);
}

TEST(ConstantFolding, CapsTheOutputSize) {
  auto at = [](int rows) {
    std::string n = std::to_string(rows);
    return header() + "g (float[1] x) => (float[" + n + ",1024] y) {" +  //
           " s = Constant <value = int64[2] {" + n + ", 1024}> ()" +
           " big = ConstantOfShape <value = float[1] {0.5}> (s) y = Add(x, big) }";
  };
  auto over = rewrite(at(2048), make_constant_folding());  // 2M elements: stays a node
  EXPECT_EQ(over.count("constant-folding"), 0) << over.dump();
  auto within = rewrite(at(1024), make_constant_folding());  // 1M elements: folded
  EXPECT_EQ(within.count("constant-folding"), 1) << within.dump();
  expect_same_outputs(within.before, within.after);
}

TEST(ConstantFolding, AFoldedGraphOutputKeepsItsName) {
  auto r = rewrite(header() + R"(g (float[3] x) => (float[3] y, float[3] k) {
      c = Constant <value = float[3] {1, 2, 3}> ()
      k = Abs(c)
      y = Add(x, k) })",
                   make_constant_folding());
  EXPECT_EQ(r.count("constant-folding"), 1);
  const Value* k = r.after.graph->outputs()[1];
  EXPECT_EQ(k->name(), "k");
  EXPECT_TRUE(k->is_constant());
  expect_same_outputs(r.before, r.after);
}

TEST(ConstantFolding, OverridableInitializersAreNotConstants) {
  // An initializer that is also a graph input may be fed at run time, so nothing reading it is folded.
  Model m;
  m.opsets[""] = 17;
  Graph& g = *m.graph;
  float v[2] = {1, 2};
  Value* c = g.add_constant("c", Tensor::from<float>({2}, v));
  g.mark_input(c);
  Value* x = g.add_input("x", TensorType{DType::Float, Shape{2}});
  Node* sq = g.add_node("Mul", {c, c}, {"sq"});
  Node* y = g.add_node("Add", {x, sq->output(0)}, {"y"});
  for (Node* n : {sq, y}) {
    n->opset = 17;
    n->output(0)->type = TensorType{DType::Float, Shape{2}};
  }
  g.add_output(y->output(0));
  std::vector<std::unique_ptr<Pass>> passes;
  passes.push_back(make_constant_folding());
  auto r = testing::rewrite(m, std::move(passes));
  EXPECT_EQ(r.count("constant-folding"), 0) << r.dump();
}

}  // namespace
}  // namespace gaf
