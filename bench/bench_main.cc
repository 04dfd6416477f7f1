// Micro-benchmarks of the runtime. Model-level fused-vs-unfused comparisons come with the fusion engine.
#include <benchmark/benchmark.h>

#include "gaf/builder.h"
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

}  // namespace

BENCHMARK_MAIN();
