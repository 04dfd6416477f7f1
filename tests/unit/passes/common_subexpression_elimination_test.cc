#include "pass_test_util.h"

namespace gaf {
namespace {

using testing::expect_same_outputs;
using testing::header;
using testing::rewrite;

const char* kPass = "common-subexpression-elimination";

TEST(CommonSubexpressionElimination, MergesIdenticalNodes) {
  auto r = rewrite(header() + R"(g (float[4,8] x) => (float[4,8] y) {
      a = Relu(x) b = Relu(x) y = Add(a, b) })",
                   make_common_subexpression_elimination());
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Add", 1}, {"Relu", 1}})) << r.dump();
  EXPECT_EQ(r.count(kPass), 1);
  const Node* add = r.after.graph->nodes()[1];
  EXPECT_EQ(add->input(0), add->input(1));
  expect_same_outputs(r.before, r.after);
}

TEST(CommonSubexpressionElimination, DifferentAttributesOrInputsStayApart) {
  auto r = rewrite(header() + R"(g (float[4,8] x, float[4,8] z) => (float[4,8] y) {
      a = LeakyRelu <alpha = 0.1> (x) b = LeakyRelu <alpha = 0.2> (x) c = LeakyRelu <alpha = 0.1> (z)
      s = Sum(a, b, c) y = Relu(s) })",
                   make_common_subexpression_elimination());
  EXPECT_EQ(r.count(kPass), 0) << r.dump();
  EXPECT_EQ(r.ops()["LeakyRelu"], 3);
}

TEST(CommonSubexpressionElimination, MergesEqualConstantsAndThenTheirReaders) {
  // Exporters emit one Constant per literal: equal constants merge, which makes the two Muls identical.
  auto r = rewrite(header() + R"(g (float[4,8] x) => (float[4,8] y) {
      c1 = Constant <value = float {2}> () c2 = Constant <value = float {2}> ()
      a = Mul(x, c1) b = Mul(x, c2) y = Add(a, b) })",
                   make_common_subexpression_elimination());
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Add", 1}, {"Mul", 1}})) << r.dump();
  EXPECT_EQ(r.count(kPass), 2);
  EXPECT_EQ(r.after.graph->initializers().size(), 1u);
  expect_same_outputs(r.before, r.after);

  auto twin = rewrite(header() + R"(g (float[4,8] x) => (float[4,8] y) {
      c1 = Constant <value = float {2}> () c2 = Constant <value = float {3}> ()
      a = Mul(x, c1) b = Mul(x, c2) y = Add(a, b) })",
                      make_common_subexpression_elimination());
  EXPECT_EQ(twin.count(kPass), 0) << twin.dump();
  EXPECT_EQ(twin.ops()["Mul"], 2);
}

TEST(CommonSubexpressionElimination, RandomOpsAreNeverMerged) {
  auto r = rewrite(header() + R"(g (float[4,8] x) => (float[4,8] y) {
      a = RandomUniformLike <seed = 3.0> (x) b = RandomUniformLike <seed = 3.0> (x) y = Sub(a, b) })",
                   make_common_subexpression_elimination());
  EXPECT_EQ(r.count(kPass), 0);
  EXPECT_EQ(r.ops()["RandomUniformLike"], 2);
}

TEST(CommonSubexpressionElimination, TwoGraphOutputsKeepTheirNames) {
  auto r = rewrite(
      header() + R"(g (float[4,8] x) => (float[4,8] y1, float[4,8] y2) { y1 = Relu(x) y2 = Relu(x) })",
      make_common_subexpression_elimination());
  EXPECT_EQ(r.count(kPass), 0);
  EXPECT_EQ(r.ops()["Relu"], 2);

  // One graph output and one internal duplicate: the internal one goes.
  auto one = rewrite(header() + R"(g (float[4,8] x) => (float[4,8] y1, float[4,8] y2) {
      a = Relu(x) y1 = Relu(x) y2 = Neg(a) })",
                     make_common_subexpression_elimination());
  EXPECT_EQ(one.count(kPass), 1) << one.dump();
  EXPECT_EQ(one.ops()["Relu"], 1);
  expect_same_outputs(one.before, one.after);
}

}  // namespace
}  // namespace gaf
