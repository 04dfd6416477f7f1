#include "pass_test_util.h"

namespace gaf {
namespace {

using testing::expect_same_outputs;
using testing::header;
using testing::rewrite;

const char* kPass = "dead-code-elimination";

TEST(DeadCodeElimination, UnreadChainsAndTheirWeightsGo) {
  // d and e read only each other's chain; w feeds only the dead MatMul and goes with it.
  auto r = rewrite(header(13) + "g (float[4,8] x) => (float[4,8] y) <float[8,8] w = {" +
                       testing::test_values(64, 1, 10) + "}> { d = MatMul(x, w) e = Exp(d) y = Relu(x) }",
                   make_dead_code_elimination());
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Relu", 1}})) << r.dump();
  EXPECT_EQ(r.count(kPass), 2);
  EXPECT_TRUE(r.after.graph->initializers().empty());
  expect_same_outputs(r.before, r.after, 0, 0);
}

TEST(DeadCodeElimination, NodeWithOneLiveOutputStays) {
  // TopK's indices are unread but its values are returned: the node is live. A second graph output keeps its
  // producer too.
  auto r = rewrite(header(13) +
                       "g (float[4,8] x) => (float[4,3] y, float[4,8] z) {"
                       " k = Constant<value = int64[1] {3}>() y, i = TopK(x, k) z = Neg(x) }",
                   make_dead_code_elimination());
  EXPECT_EQ(r.count(kPass), 0) << r.dump();
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"TopK", 1}, {"Neg", 1}})) << r.dump();
  expect_same_outputs(r.before, r.after, 0, 0);
}

}  // namespace
}  // namespace gaf
