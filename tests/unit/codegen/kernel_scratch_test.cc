// Generated kernels take their working memory from their caller (KernelScratch), never from malloc: a row
// kernel's staged rows (one slot per thread of the team), a reduction's result that later loops read back, a
// split reduction's partial states. A row the kernel returns is staged in the output itself and takes nothing;
// a take refused makes the kernel return at once.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <random>

#include "gaf/codegen.h"
#include "passes/pass_test_util.h"
#include "runtime/graph_kernels.h"

namespace gaf::codegen {
namespace {

using KernelFn = void (*)(const void* const*, void* const*, const int64_t*, const KernelScratch*);

// Records every take and hands out 64-byte aligned blocks, or refuses them all.
struct Lender {
  bool refuse = false;
  std::vector<size_t> taken;
  std::vector<std::unique_ptr<void, decltype(&std::free)>> held;

  static void* take(void* self, size_t bytes) {
    auto* l = static_cast<Lender*>(self);
    l->taken.push_back(bytes);
    if (l->refuse) return nullptr;
    l->held.emplace_back(std::aligned_alloc(64, (bytes + 63) / 64 * 64), &std::free);
    return l->held.back().get();
  }
  KernelScratch scratch() { return {&Lender::take, this}; }
};

// The one generated kernel of the model `body` (a graph over `x`, ONNX text) fused at level 2, compiled.
struct OneKernel {
  EmittedKernel kernel;
  std::shared_ptr<Library> lib;
  KernelFn fn = nullptr;
};

// The model `body` fused at level 2.
Model fused(const std::string& body) {
  Model m = testing::parse(testing::header() + body);
  tools::FuseOptions opts;
  opts.fusion.opt_level = 2;
  tools::fuse_model(m, opts);
  return m;
}

OneKernel build(const std::string& body) {
  Model m = fused(body);
  std::vector<EmittedKernel> kernels;
  for (const Node* n : m.graph->nodes()) {
    if (!n->body) continue;
    std::string why;
    auto k = emit_kernel(*n, fmt::format("gaf_scratch_test_{}", kernels.size()), {}, &why);
    EXPECT_TRUE(k) << why;
    if (k) kernels.push_back(std::move(*k));
  }
  OneKernel out;
  EXPECT_EQ(kernels.size(), 1u) << "the model should fuse into one generated kernel";
  if (kernels.size() != 1) return out;
  KernelUnits built = compile_kernels(kernels, {});
  EXPECT_TRUE(built.libraries.at(0)) << built.errors.at(0);
  if (!built.libraries.at(0)) return out;
  out.kernel = std::move(kernels[0]);
  out.lib = built.libraries[0];
  out.fn = reinterpret_cast<KernelFn>(out.lib->find(out.kernel.sig.symbol));
  EXPECT_TRUE(out.fn);
  return out;
}

std::vector<float> seeded(size_t n) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// Calls k on x (one input) into y (one output, filled with `fill` first).
void call(const OneKernel& k, const std::vector<float>& x, std::vector<float>& y, Lender& lender, float fill = 0.0f) {
  std::fill(y.begin(), y.end(), fill);
  const void* in[] = {x.data()};
  void* out[] = {y.data()};
  const KernelScratch s = lender.scratch();
  k.fn(in, out, nullptr, &s);
}

constexpr int64_t kRows = 64, kLen = 3000;

// q = x * x, e = exp(q), y = e / sum(e) + q over rows: q, e and e / sum(e) are staged rows no output holds.
const char* const kStagedRows = R"(
  g (float[64, 3000] x) => (float[64, 3000] y) {
    ax = Constant <value = int64[1] {-1}> ()
    q = Mul(x, x)  e = Exp(q)  s = ReduceSum(e, ax)  t = Div(e, s)  y = Add(t, q)
  })";

TEST(KernelScratch, StagedRowsComeFromTheCallerOneSlotPerThread) {
  OneKernel k = build(kStagedRows);
  ASSERT_TRUE(k.fn);
  ASSERT_EQ(k.kernel.source.find("malloc"), std::string::npos) << k.kernel.source;
  const std::vector<float> x = seeded(size_t(kRows * kLen));
  std::vector<float> y(x.size());
  Lender lender;
  call(k, x, y, lender);
  ASSERT_EQ(lender.taken.size(), 1u);
  EXPECT_EQ(lender.taken[0], sizeof(float) * size_t(kLen) * 3 * size_t(omp_get_max_threads()));
  for (int64_t r = 0; r < kRows; ++r) {
    double sum = 0;
    for (int64_t j = 0; j < kLen; ++j) sum += std::exp(double(x[size_t(r * kLen + j)]) * x[size_t(r * kLen + j)]);
    for (int64_t j = 0; j < kLen; ++j) {
      const double q = double(x[size_t(r * kLen + j)]) * x[size_t(r * kLen + j)];
      ASSERT_NEAR(y[size_t(r * kLen + j)], std::exp(q) / sum + q, 1e-5 * (1 + q)) << "row " << r << " element " << j;
    }
  }
}

// Twin: the only staged row is the output (the shifted row of a row max), staged in the output: nothing taken.
TEST(KernelScratch, ARowTheKernelReturnsIsStagedInTheOutput) {
  OneKernel k = build(R"(
    g (float[64, 3000] x) => (float[64, 3000] y) {
      m = ReduceMax <axes = [-1]> (x)
      y = Sub(x, m)
    })");
  ASSERT_TRUE(k.fn);
  EXPECT_NE(k.kernel.source.find("float* buf0 = out0 + r * L;"), std::string::npos) << k.kernel.source;
  const std::vector<float> x = seeded(size_t(kRows * kLen));
  std::vector<float> y(x.size());
  Lender lender;
  call(k, x, y, lender);
  EXPECT_TRUE(lender.taken.empty());
  for (int64_t r = 0; r < kRows; ++r) {
    float m = -INFINITY;
    for (int64_t j = 0; j < kLen; ++j) m = std::max(m, x[size_t(r * kLen + j)]);
    for (int64_t j = 0; j < kLen; ++j) ASSERT_EQ(y[size_t(r * kLen + j)], x[size_t(r * kLen + j)] - m);
  }
}

TEST(KernelScratch, ARefusedTakeReturnsWithoutWriting) {
  OneKernel k = build(kStagedRows);
  ASSERT_TRUE(k.fn);
  const std::vector<float> x = seeded(size_t(kRows * kLen));
  std::vector<float> y(x.size());
  Lender lender;
  lender.refuse = true;
  call(k, x, y, lender, 42.0f);
  EXPECT_EQ(lender.taken.size(), 1u);
  EXPECT_EQ(std::count(y.begin(), y.end(), 42.0f), std::ptrdiff_t(y.size()));
}

// A sum over a few long rows splits each row over the threads: the partial states are taken, one per chunk.
TEST(KernelScratch, ASplitReductionTakesItsPartialStates) {
  OneKernel k = build(R"(
    g (float[4, 262144] x) => (float[4, 1] y) {
      ax = Constant <value = int64[1] {-1}> ()
      q = Mul(x, x)  y = ReduceSum(q, ax)
    })");
  ASSERT_TRUE(k.fn);
  const std::vector<float> x = seeded(4 * 262144);
  std::vector<float> y(4);
  Lender lender;
  call(k, x, y, lender);
  ASSERT_EQ(lender.taken.size(), 1u);
  EXPECT_EQ(lender.taken[0] % (4 * sizeof(double)), 0u) << "chunks x 4 outputs of double";
  EXPECT_GT(lender.taken[0], 4 * sizeof(double)) << "more than one chunk";
  for (int r = 0; r < 4; ++r) {
    double sum = 0;
    for (int64_t j = 0; j < 262144; ++j) sum += double(x[size_t(r * 262144 + j)]) * x[size_t(r * 262144 + j)];
    EXPECT_NEAR(y[size_t(r)], sum, 1e-6 * sum);
  }
}

// A column sum whose output is one row of 1100 (one block wide): its reduced axis splits into 8 chunks of whole
// rows, the last ones uneven (1003 rows), each chunk's 1100 partial sums a state taken from the caller. The
// chunk count comes from the shape alone, so one thread and two give the same bits.
TEST(KernelScratch, AWideColumnSumSplitsItsReducedAxisIntoChunksOfWholeRows) {
  constexpr int64_t kR = 1003, kC = 1100;
  OneKernel k = build(R"(
    g (float[1003, 1100] x) => (float[1, 1100] y) {
      ax = Constant <value = int64[1] {0}> ()
      a = Abs(x)  y = ReduceSum(a, ax)
    })");
  ASSERT_TRUE(k.fn);
  const std::vector<float> x = seeded(size_t(kR * kC));
  std::vector<float> y(static_cast<size_t>(kC)), y1(static_cast<size_t>(kC));
  Lender lender;
  call(k, x, y, lender);
  ASSERT_EQ(lender.taken.size(), 1u);
  EXPECT_EQ(lender.taken[0], 8 * size_t(kC) * sizeof(double)) << "8 chunks of the 1100 sums";
  for (int64_t c = 0; c < kC; ++c) {
    double sum = 0;
    for (int64_t r = 0; r < kR; ++r) sum += std::abs(double(x[size_t(r * kC + c)]));
    ASSERT_NEAR(y[size_t(c)], sum, 1e-6 * sum) << "column " << c;
  }
  {
    testing::OneThread restore;  // puts the count back after
    Lender one;
    call(k, x, y1, one);
  }
  EXPECT_EQ(y1, y);
}

// Twin: eight output rows of 1100 are eight blocks, enough items without a split: nothing taken.
TEST(KernelScratch, ColumnSumsOverEightRowsOfOutputsDoNotSplit) {
  constexpr int64_t kB = 8, kR = 500, kC = 1100;
  OneKernel k = build(R"(
    g (float[8, 500, 1100] x) => (float[8, 1, 1100] y) {
      ax = Constant <value = int64[1] {1}> ()
      a = Abs(x)  y = ReduceSum(a, ax)
    })");
  ASSERT_TRUE(k.fn);
  const std::vector<float> x = seeded(size_t(kB * kR * kC));
  std::vector<float> y(size_t(kB * kC));
  Lender lender;
  call(k, x, y, lender);
  EXPECT_TRUE(lender.taken.empty());
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t c = 0; c < kC; ++c) {
      double sum = 0;
      for (int64_t r = 0; r < kR; ++r) sum += std::abs(double(x[size_t((b * kR + r) * kC + c)]));
      ASSERT_NEAR(y[size_t(b * kC + c)], sum, 1e-6 * sum) << "row " << b << " column " << c;
    }
}

// A column mean the subtraction reads back: its result is a buffer taken from the caller.
TEST(KernelScratch, AReductionReadBackTakesItsBuffer) {
  OneKernel k = build(R"(
    g (float[256, 64] x) => (float[256, 64] y) {
      m = ReduceMean <axes = [0]> (x)
      y = Sub(x, m)
    })");
  ASSERT_TRUE(k.fn);
  const std::vector<float> x = seeded(256 * 64);
  std::vector<float> y(x.size());
  Lender lender;
  call(k, x, y, lender);
  ASSERT_GE(lender.taken.size(), 1u);
  EXPECT_EQ(lender.taken[0], sizeof(float) * (1 + 64)) << "the mean's 64 columns";
  for (int c = 0; c < 64; ++c) {
    double mean = 0;
    for (int r = 0; r < 256; ++r) mean += x[size_t(r * 64 + c)];
    mean /= 256;
    for (int r = 0; r < 256; ++r) ASSERT_NEAR(y[size_t(r * 64 + c)], x[size_t(r * 64 + c)] - mean, 1e-6);
  }
}

// The runtime's side: a generated kernel in a session borrows from the session's allocator (its buffer pool)
// for the call, and a refusal there comes back as the allocator's exception once the kernel has returned.
class CountingAllocator final : public Allocator {
 public:
  explicit CountingAllocator(size_t refuse_call) : refuse_call_(refuse_call) {}
  std::shared_ptr<void> allocate(size_t bytes) override {
    sizes.push_back(bytes);
    if (sizes.size() == refuse_call_) throw std::bad_alloc();
    return Allocator::heap().allocate(bytes);
  }
  std::vector<size_t> sizes;

 private:
  size_t refuse_call_;  // 1-based; 0 refuses none
};

TEST(KernelScratch, ASessionsKernelBorrowsFromTheSessionsAllocator) {
  Model m = fused(kStagedRows);
  runtime::GraphKernels gk = runtime::build_graph_kernels(*m.graph, {}, {});
  ASSERT_EQ(gk.factories.size(), 1u);
  const auto& [node, make] = *gk.factories.begin();
  std::unique_ptr<runtime::Kernel> kernel = make(*node);
  const std::vector<float> x = seeded(size_t(kRows * kLen));
  Tensor in(DType::Float, {kRows, kLen});
  std::copy(x.begin(), x.end(), in.data<float>());
  const std::vector<const Tensor*> inputs{&in};
  const size_t output_bytes = sizeof(float) * size_t(kRows * kLen);
  const size_t rows_bytes = sizeof(float) * size_t(kLen) * 3 * size_t(omp_get_max_threads());
  {
    CountingAllocator alloc(0);
    std::vector<Tensor> outputs(1);
    runtime::KernelContext ctx(*node, inputs, outputs, alloc);
    kernel->run(ctx);
    EXPECT_EQ(alloc.sizes, (std::vector<size_t>{output_bytes, rows_bytes}));
  }
  {
    // The scratch refused (the second allocation, after the output's): the error comes out of run().
    CountingAllocator alloc(2);
    std::vector<Tensor> outputs(1);
    runtime::KernelContext ctx(*node, inputs, outputs, alloc);
    EXPECT_THROW(kernel->run(ctx), std::bad_alloc);
    EXPECT_EQ(alloc.sizes.size(), 2u);
  }
}

}  // namespace
}  // namespace gaf::codegen
