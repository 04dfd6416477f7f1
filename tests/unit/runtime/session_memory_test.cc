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

// New blocks from 64 KiB to 1 MiB are carved one after another from a 2 MB-aligned mapping with its pages in
// place (on a VM each 4 KB page of a heap block faulted in on first write); smaller ones come from the heap,
// outside that mapping.
TEST(SessionMemory, MidSizedBlocksAreCarvedFromOneMapping) {
  Model m = testing::parse(R"(
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[75000] x, float[4000] y) => (float[75000] a, float[75000] b, float[4000] c) {
      a = Relu(x)  b = Neg(x)  c = Relu(y)
    }
  )");
  runtime::Session session(*m.graph);
  Tensor x(DType::Float, {75000}), y(DType::Float, {4000});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = float(i % 13) - 6;
  for (int64_t i = 0; i < y.numel(); ++i) y.data<float>()[i] = float(i % 5) - 2;
  std::vector<Tensor> out = session.run({{"x", x}, {"y", y}});
  const auto a = reinterpret_cast<uintptr_t>(out[0].raw()), b = reinterpret_cast<uintptr_t>(out[1].raw());
  const auto c = reinterpret_cast<uintptr_t>(out[2].raw());
  constexpr uintptr_t kChunk = uintptr_t(2) << 20;
  EXPECT_EQ(std::max(a, b) - std::min(a, b), uintptr_t(327680)) << "back to back: 300,000 bytes' size class";
  EXPECT_EQ(a / kChunk, b / kChunk) << "in one 2 MB-aligned mapping";
  EXPECT_NE(c / kChunk, a / kChunk) << "a 16 KB block comes from the heap";
  EXPECT_EQ(out[0].data<float>()[7], 1.f);
  EXPECT_EQ(out[1].data<float>()[7], -1.f);
  EXPECT_EQ(out[2].data<float>()[4], 2.f);
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

// ---- memory sized before running ----------------------------------------------------------------

TEST(MemoryPlan, CountsWeightsAndTheLargestLiveSet) {
  Model m = testing::parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[n, 1024] x) => (float[n, 1024] y) <float[1] w = {0.5}, int64[2] shape = {-1, 1024}> {
        a = Relu(x)  b = Neg(a)  r = Reshape(b, shape)  c = Mul(r, w)  y = Exp(c)
      })");
  runtime::Session s(*m.graph);
  const runtime::MemoryPlan plan = s.memory_plan({{"n", 8}});
  EXPECT_EQ(plan.weights, size_t(4 + 2 * 8));  // w and the shape
  // a and b live together at Neg (32 KiB each); the Reshape's view of b holds b's storage, not more; then c
  // and y.
  EXPECT_EQ(plan.peak, size_t(2 * 8 * 1024 * 4));
  EXPECT_EQ(plan.largest, size_t(8 * 1024 * 4));
  EXPECT_EQ(s.memory_plan({}).peak, size_t(0));  // n not bound: nothing counted
  EXPECT_GT(s.memory_plan({}).unknown, 0);
}

TEST(MemoryPlan, ARunNeedingMoreThanMaxMemoryStopsBeforeAllocating) {
  Model m = testing::parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[n, 1024] x) => (float[n, 1024] y) { a = Relu(x)  y = Neg(a) })");
  runtime::SessionOptions opts;
  opts.max_memory = 1 << 20;  // 1 MiB: 64 rows fit (two 256 KiB tensors), 512 rows do not
  runtime::Session s(*m.graph, opts);
  EXPECT_NO_THROW(s.run({Tensor(DType::Float, {64, 1024})}));
  try {
    s.run({Tensor(DType::Float, {512, 1024})});
    FAIL() << "ran past --max-memory";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("needs 4.0 MiB to run with n=512"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'a' (float[n,1024]), 2.0 MiB"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--max-memory"), std::string::npos) << msg;
  }
  EXPECT_EQ(s.stats().peak_bytes, size_t(2 * 64 * 1024 * 4));  // the refused run allocated nothing
}

// A size the plan cannot know (ConstantOfShape of an input): the pool refuses the block before the kernel
// touches it, instead of an mmap that succeeds and a process killed for it later.
TEST(MemoryPlan, TheAllocatorRefusesWhatThePlanCouldNotSee) {
  Model m = testing::parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (int64[2] shape) => (float[a, b] y) { y = ConstantOfShape <value = float[1] {1.0}> (shape) })");
  auto shape = [](int64_t rows, int64_t cols) {
    const std::vector<int64_t> v = {rows, cols};
    return Tensor::from<int64_t>({2}, v);
  };
  const Tensor huge = shape(1 << 20, 1 << 20);  // 4 TiB of floats
  {
    runtime::Session s(*m.graph);  // default: what the machine has available
    try {
      s.run({huge});
      FAIL() << "allocated 4 TiB";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("out of memory: an output of 4.0 TiB"), std::string::npos)
          << e.what();
    }
  }
  runtime::SessionOptions opts;
  opts.max_memory = 64 << 20;
  runtime::Session s(*m.graph, opts);
  EXPECT_NO_THROW(s.run({shape(1024, 1024)}));  // 4 MiB
  try {
    s.run({shape(8192, 4096)});  // 128 MiB
    FAIL() << "ran past max_memory";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("ConstantOfShape"), std::string::npos) << msg;  // names the node
    EXPECT_NE(msg.find("--max-memory"), std::string::npos) << msg;
  }
}

TEST(MemoryPlan, SizesParseAndPrint) {
  EXPECT_EQ(runtime::parse_bytes("8G"), size_t(8) << 30);
  EXPECT_EQ(runtime::parse_bytes("512M"), size_t(512) << 20);
  EXPECT_EQ(runtime::parse_bytes("1.5GB"), size_t(3) << 29);
  EXPECT_EQ(runtime::parse_bytes("64k"), size_t(64) << 10);
  EXPECT_EQ(runtime::parse_bytes("2GiB"), size_t(2) << 30);
  EXPECT_EQ(runtime::parse_bytes("1000000"), size_t(1000000));
  for (const char* bad : {"", "G", "12Q", "-1G", "0", "1e30G"})
    EXPECT_EQ(runtime::parse_bytes(bad), std::nullopt) << bad;
  EXPECT_EQ(runtime::format_bytes(100), "100 bytes");
  EXPECT_EQ(runtime::format_bytes(size_t(3) << 29), "1.5 GiB");
}

}  // namespace
}  // namespace gaf
