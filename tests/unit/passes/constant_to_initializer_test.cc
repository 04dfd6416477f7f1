#include "pass_test_util.h"

namespace gaf {
namespace {

using testing::expect_same_outputs;
using testing::header;

const char* kPass = "constant-to-initializer";

// Only this pass (rewrite() runs it first anyway).
testing::Rewritten run(const std::string& text) { return testing::rewrite(testing::parse(text), {}); }

TEST(ConstantToInitializer, EveryValueFormBecomesAnInitializerUnderTheSameName) {
  auto r = run(header(13) +
               "g (float[3] x, int64[2] i) => (float[3] y, int64[2] j) {"
               " a = Constant<value = float[3] {1, 2, 3}>() b = Constant<value_float = 0.5>()"
               " c = Constant<value_floats = [1.0, -1.0, 2.0]>() d = Constant<value_int = 4>()"
               " e = Constant<value_ints = [5, 6]>()"
               " s = Add(x, a) t = Mul(s, b) y = Sub(t, c) u = Add(i, d) j = Mul(u, e) }");
  EXPECT_EQ(r.count(kPass), 5);
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Add", 2}, {"Mul", 2}, {"Sub", 1}})) << r.dump();
  // The readers see initializers named as the Constants' outputs were, with their shapes known.
  for (const char* name : {"a", "b", "c", "d", "e"}) {
    const Value* v = r.after.graph->find_value(name);
    ASSERT_NE(v, nullptr) << name;
    EXPECT_TRUE(v->is_constant()) << name;
    ASSERT_TRUE(v->type.shape.has_value()) << name;
  }
  EXPECT_EQ(r.after.graph->find_value("b")->type.shape->size(), 0u);  // value_float: a scalar
  EXPECT_EQ(r.after.graph->find_value("e")->constant().numel(), 2);
  expect_same_outputs(r.before, r.after, 0, 0);
}

TEST(ConstantToInitializer, ConstantReturnedAsGraphOutput) {
  auto r = run(header(13) +
               "g (float[2] x) => (float[2] y, float[2] c) {"
               " c = Constant<value = float[2] {1, 2}>() y = Add(x, c) }");
  EXPECT_EQ(r.count(kPass), 1);
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Add", 1}})) << r.dump();
  EXPECT_TRUE(r.after.graph->outputs()[1]->is_constant());
  expect_same_outputs(r.before, r.after, 0, 0);
}

TEST(ConstantToInitializer, DoesNotFire) {
  // value_string has no initializer form here (nor sparse_value): the node stays as it is.
  auto r = run(header(13) +
               "g (float[2] x) => (float[2] y, string s) {"
               " s = Constant<value_string = \"ab\">() y = Relu(x) }");
  EXPECT_EQ(r.count(kPass), 0) << r.dump();
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Constant", 1}, {"Relu", 1}})) << r.dump();
}

}  // namespace
}  // namespace gaf
