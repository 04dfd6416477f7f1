// Micro-benchmarks: the demo block through the runtime, planning a 1,000-node synthetic graph (the fusion issue
// asks for well under a second), and a decoder's products of 1 to 128 rows on Gemv's packed weights beside a
// static-shape MatMul of the same size (the runtime's choice there: Gemv up to 8 rows, above that oneDNN on
// weights it packed for itself), and a decode step's products streamed from memory beside a copy.
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>

#include "gaf/builder.h"
#include "gaf/fusion.h"
#include "gaf/session.h"
#include "gaf/tools.h"
#include "runtime/kernels/common.h"
#include "runtime/kernels/fast/gemv.h"

namespace {

void BM_DemoBlock(benchmark::State& state) {
  gaf::Model m = gaf::tools::demo_transformer_block();
  gaf::runtime::Session s(*m.graph);
  auto inputs = gaf::tools::random_inputs(*m.graph, 1);
  for (auto _ : state) benchmark::DoNotOptimize(s.run(inputs));
}
BENCHMARK(BM_DemoBlock)->Unit(benchmark::kMillisecond);

// A random DAG of elementwise, broadcast, reduction and MatMul nodes over [64,64] tensors.
gaf::Model synthetic(int nodes) {
  gaf::Model m;
  gaf::GraphBuilder b(m);
  std::mt19937 rng(42);
  std::vector<gaf::Value*> pool = {b.input("x", gaf::DType::Float, {64, 64}), b.input("y", gaf::DType::Float, {64, 64})};
  const char* unary[] = {"Relu", "Neg", "Exp", "Sigmoid", "Tanh"};
  const char* binary[] = {"Add", "Mul", "Sub", "MatMul"};
  for (int i = 0; i < nodes; ++i) {
    gaf::Value* a = pool[rng() % pool.size()];
    gaf::Value* c = pool[pool.size() - 1 - rng() % std::min<size_t>(8, pool.size())];
    gaf::Value* out = rng() % 2 ? b.op(unary[rng() % 5], {a}) : b.op(binary[rng() % 4], {a, c});
    pool.push_back(out);
  }
  b.output(pool.back());
  b.finish();
  return m;
}

void BM_Plan1000Nodes(benchmark::State& state) {
  gaf::Model m = synthetic(1000);
  gaf::CostModel cm(gaf::Target::cpu_host());
  gaf::FusionOptions o;
  o.opt_level = 3;
  for (auto _ : state) benchmark::DoNotOptimize(gaf::plan_fusion(*m.graph, cm, o));
}
BENCHMARK(BM_Plan1000Nodes)->Unit(benchmark::kMillisecond);

// Args: rows, K, N. GPT-2 small's products: [768, 2304] (QKV), [768, 3072] (MLP up), [3072, 768] (MLP down).
void gemv_shapes(benchmark::internal::Benchmark* b) {
  for (int64_t rows : {1, 16, 128})
    for (auto [k, n] : {std::pair<int64_t, int64_t>{768, 3072}, {3072, 768}}) b->Args({rows, k, n});
}

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

void BM_GemvPacked(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const std::vector<float> w = random_floats(size_t(k * n), 1), a = random_floats(size_t(m * k), 2);
  std::vector<float> y(size_t(m * n));
  gaf::runtime::Gemv g(w.data(), k, n, false);
  for (auto _ : state) {
    g.run(a.data(), m, k, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * double(m * k * n), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_GemvPacked)->Apply(gemv_shapes)->Unit(benchmark::kMicrosecond);

// A decode step's products from memory: one row against 16 packed [768, 3072] / [3072, 768] weights, 151 MB in
// all (far past the caches), run in turn as a decoder's layers run them; bytes/s of weights read. Beside it the
// copy of 151 MB between two buffers (bytes/s read and written).
constexpr int kStreamWeights = 16;
void BM_GemvStream(benchmark::State& state) {
  std::vector<gaf::runtime::Gemv> layers;
  for (int i = 0; i < kStreamWeights; ++i) {
    const int64_t k = i % 2 ? 3072 : 768, n = i % 2 ? 768 : 3072;
    layers.emplace_back(random_floats(size_t(k * n), uint32_t(i)).data(), k, n, false);
  }
  const std::vector<float> a = random_floats(3072, 99);
  std::vector<float> y(3072);
  for (auto _ : state)
    for (const auto& g : layers) {
      g.run(a.data(), 1, g.k(), y.data());
      benchmark::DoNotOptimize(y.data());
    }
  state.counters["GB/s"] = benchmark::Counter(double(kStreamWeights) * 768 * 3072 * 4 * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_GemvStream)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_CopyStream(benchmark::State& state) {
  const size_t n = size_t(kStreamWeights) * 768 * 3072;
  std::vector<float> src(n, 1.f), dst(n);
  for (auto _ : state) {
    gaf::runtime::parallel_for(int64_t(n / 4096), 1, [&](int64_t b, int64_t e) {
      std::memcpy(dst.data() + b * 4096, src.data() + b * 4096, size_t(e - b) * 4096 * sizeof(float));
    });
    benchmark::DoNotOptimize(dst.data());
  }
  state.counters["GB/s"] =  // read and written
      benchmark::Counter(double(n) * 8 * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_CopyStream)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_MatMulStatic(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  gaf::Model model;
  gaf::GraphBuilder b(model);
  gaf::Value* a = b.input("a", gaf::DType::Float, {m, k});
  gaf::Value* wv = b.random_constant("w", {k, n}, 1.f);
  b.output(b.op("MatMul", {a, wv}));
  b.finish();
  gaf::runtime::Session s(*model.graph);
  const std::vector<float> av = random_floats(size_t(m * k), 2);
  std::vector<gaf::Tensor> in = {gaf::Tensor::from<float>({m, k}, av)};
  for (auto _ : state) benchmark::DoNotOptimize(s.run(in));
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * double(m * k * n), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_MatMulStatic)->Apply(gemv_shapes)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
