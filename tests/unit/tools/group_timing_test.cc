// bench --per-group (tools::time_groups): each fused group's modeled time beside its measured one, unfused (the
// members of the graph the planner saw, one kernel each) and fused. What is asserted is the bookkeeping, never a
// timing: which groups are listed, that the modeled times are the planner's, that a measured time exists for
// every group of the main graph, and how the signs are judged.
#include <gtest/gtest.h>

#include "test_util.h"

namespace gaf {
namespace {

TEST(GroupTiming, ListsEachGroupWithModeledAndMeasuredTimes) {
  Model m = testing::parse(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[256,1000] x, float[256,1000] z) => (float[256,1000] y, float[256,1] s) {
  a = Add(x, z)  b = Relu(a)  y = Mul(b, z)
  axes = Constant <value = int64[1] {1}> ()
  e = Exp(z)  s = ReduceSum <keepdims = 1> (e, axes)
})");
  tools::FuseOptions opts;
  opts.fusion.opt_level = 2;  // two groups (level 3 would join the siblings reading z into one)
  Model fused = tools::copy_model(m);
  tools::FuseResult r = tools::fuse_model(fused, opts);
  const std::vector<tools::GroupTiming> groups = tools::time_groups(m, opts, tools::random_inputs(*m.graph, 1), 3);
  ASSERT_EQ(groups.size(), r.groups.size());
  ASSERT_GE(groups.size(), size_t(2));
  for (size_t i = 0; i < groups.size(); ++i) {
    const tools::GroupTiming& g = groups[i];
    SCOPED_TRACE(g.name);
    EXPECT_EQ(g.name, r.groups[i].name);
    EXPECT_EQ(g.ops, r.groups[i].ops);
    // The planner's times: their difference is the benefit the plan was made with.
    EXPECT_NEAR(g.modeled_benefit_s(), r.groups[i].benefit_s, 1e-12);
    EXPECT_GT(g.modeled_unfused_s, 0);
    EXPECT_GT(g.modeled_fused_s, 0);
    EXPECT_TRUE(g.timed);
    EXPECT_GT(g.measured_unfused_s, 0);
    EXPECT_GT(g.measured_fused_s, 0);
  }
  const std::string text = tools::group_timing_text(groups);
  for (const auto& g : groups) EXPECT_NE(text.find(g.name), std::string::npos) << text;
  EXPECT_NE(text.find(fmt::format("of {} timed groups agree", groups.size())), std::string::npos) << text;
}

// The judgement itself: a group measured slower fused than unfused where the model said faster disagrees and is
// named; within 5% no sign is judged; a group in a subgraph is listed as not timed.
TEST(GroupTiming, SignsAreJudgedOutsideTheNoiseBand) {
  tools::GroupTiming faster{"A", "", {"Add", "Relu"}, 2e-6, 1e-6, 4e-6, 2e-6, true};
  tools::GroupTiming slower{"B", "", {"Conv", "Add"}, 2e-6, 1e-6, 4e-6, 5e-6, true};
  tools::GroupTiming close{"C", "", {"Mul", "Exp"}, 2e-6, 1e-6, 4e-6, 4.1e-6, true};
  tools::GroupTiming inner{"D", "node 'l' (Loop) body", {"Tanh", "Mul"}, 2e-6, 1e-6, 0, 0, false};
  EXPECT_TRUE(faster.signs_agree());
  EXPECT_FALSE(faster.within_noise());
  EXPECT_FALSE(slower.signs_agree());
  EXPECT_FALSE(slower.within_noise());
  EXPECT_TRUE(close.within_noise());
  const std::string text = tools::group_timing_text({faster, slower, close, inner});
  EXPECT_NE(text.find("1 of 3 timed groups agree, 1 disagree, 1 within 5%; measured slower fused: B"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("DISAGREES"), std::string::npos) << text;
  EXPECT_NE(text.find("not timed (in node 'l' (Loop) body)"), std::string::npos) << text;
}

}  // namespace
}  // namespace gaf
