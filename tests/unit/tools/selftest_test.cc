// 2,000 random graphs, fused at opt level 3 with generated kernels, against the unfused runtime.
#include <gtest/gtest.h>

#include "gaf/tools.h"

namespace gaf {
namespace {

TEST(Selftest, RandomGraphsAgreeFusedAndUnfused) {
  tools::SelftestResult r = tools::selftest(2000, 20261129, 200);
  EXPECT_EQ(r.graphs, 2000);
  EXPECT_EQ(r.failed, 0);
  // The check must exercise fusion and generated code, not only the op-by-op fallback.
  EXPECT_GT(r.fused_groups, 1000u);
  EXPECT_GT(r.generated_kernels, r.fused_groups / 2);
  EXPECT_EQ(r.compile_errors, 0) << "generated code the compiler rejected: an emitter bug";
  for (const auto& f : r.failures) ADD_FAILURE() << f;
}

TEST(Selftest, GeneratorIsDeterministicAndParses) {
  EXPECT_EQ(tools::random_graph_text(5, 3, 8), tools::random_graph_text(5, 3, 8));
  EXPECT_NE(tools::random_graph_text(5, 3, 8), tools::random_graph_text(5, 4, 8));
}

}  // namespace
}  // namespace gaf
