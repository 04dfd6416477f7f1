// A generation loop's memory stays flat: a decoder's past grows by one position per step, and the session's
// buffer pool must neither keep every size it ever handed out (it grew by megabytes per token) nor hand out
// fresh pages each step.
#include <gtest/gtest.h>

#include "gaf/session.h"
#include "test_util.h"

namespace gaf {
namespace {

// present = Concat(past, Relu(new) * 2) along the sequence axis, the shape of a KV-cache update.
constexpr const char* kCacheStep = R"(
  <ir_version: 8, opset_import: ["" : 17]>
  g (float[1, 8, T, 64] past, float[1, 8, 1, 64] step) => (float[1, 8, U, 64] present) {
    two = Constant <value = float {2.0}> ()
    r = Relu(step)
    s = Mul(r, two)
    present = Concat <axis = 2> (past, s)
  }
)";

TEST(SessionMemory, PoolStaysFlatOverAThousandGrowingSteps) {
  Model m = testing::parse(kCacheStep);
  runtime::Session session(*m.graph);
  Tensor past(DType::Float, {1, 8, 0, 64});
  Tensor step(DType::Float, {1, 8, 1, 64});
  for (int64_t i = 0; i < step.numel(); ++i) step.data<float>()[i] = float(i % 7) - 3;
  size_t most_held = 0;
  for (int t = 1; t <= 1000; ++t) {
    std::vector<Tensor> out = session.run({{"past", past}, {"step", step}});
    ASSERT_EQ(out[0].dims(), (std::vector<int64_t>{1, 8, t, 64}));
    past = out[0];
    size_t held = session.stats().pool_bytes;
    // What the pool may hold: the present it returns, the past it was given (the last step's present, alive
    // until this step's result replaced it) and the one before (kept through one idle run), each at most 1/8
    // over its size, plus the step's small intermediates. A pool that kept every size it saw grows with t
    // squared.
    size_t need = 3 * size_t(past.nbytes()) * 9 / 8 + 64 * 1024;
    ASSERT_LE(held, need) << "step " << t << ": the pool holds " << held << " bytes";
    most_held = std::max(most_held, held);
  }
  // The values are still right after a thousand reuses of the same blocks.
  const float* p = past.data<float>();
  const float* s = step.data<float>();
  EXPECT_EQ(p[999 * 64 + 5], 2 * std::max(0.f, s[5]));                        // head 0, last position
  EXPECT_EQ(p[(7 * 1000 + 500) * 64 + 9], 2 * std::max(0.f, s[7 * 64 + 9]));  // head 7, a middle one
  EXPECT_GT(most_held, size_t(past.nbytes()));
}

// A tensor a run returned keeps its block after the pool gives its idle blocks back.
TEST(SessionMemory, ReturnedTensorsOutliveTrimming) {
  Model m = testing::parse(kCacheStep);
  runtime::Session session(*m.graph);
  Tensor past(DType::Float, {1, 8, 300, 64});
  Tensor step(DType::Float, {1, 8, 1, 64});
  for (int64_t i = 0; i < past.numel(); ++i) past.data<float>()[i] = float(i);
  std::vector<Tensor> kept = session.run({{"past", past}, {"step", step}});
  Tensor small(DType::Float, {1, 8, 0, 64});
  for (int k = 0; k < 4; ++k) session.run({{"past", small}, {"step", step}});
  const float* p = kept[0].data<float>();
  EXPECT_EQ(p[0], 0.f);
  EXPECT_EQ(p[299 * 64 + 63], float(299 * 64 + 63));
}

}  // namespace
}  // namespace gaf
