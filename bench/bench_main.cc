// Micro-benchmarks: the demo block through the runtime, and planning a 1,000-node synthetic graph (the fusion
// issue asks for well under a second).
#include <benchmark/benchmark.h>

#include <random>

#include "gaf/builder.h"
#include "gaf/fusion.h"
#include "gaf/session.h"
#include "gaf/tools.h"

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

}  // namespace

BENCHMARK_MAIN();
