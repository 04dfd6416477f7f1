// Fuzz target: a random graph chosen by the fuzzer's bytes (the selftest's family: elementwise, broadcast,
// reductions, softmax, MatMul anchors with epilogues, symbolic batch dims) fused at opt level 3 with
// generated kernels must compute what the unfused graph computes. A mismatch is a finding (abort with the
// graph's text).
#include <cstring>

#include "fuzz_common.h"
#include "gaf/onnx_io.h"
#include "gaf/session.h"
#include "gaf/tools.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 9) return 0;
  uint64_t seed = 0;
  std::memcpy(&seed, data, 8);
  const int nodes = 2 + data[8] % 24;
  const std::string text = std::string("<ir_version: 8, opset_import: [\"\" : 17]>\n") +
                           gaf::tools::random_graph_text(seed, int(size % 1000), nodes);
  gaf::fuzz::expect_clean([&] {
    gaf::Model unfused = gaf::onnx_io::parse_model_text(text);
    gaf::Model fused = gaf::onnx_io::parse_model_text(text);
    gaf::tools::FuseOptions opts;
    opts.fusion.opt_level = 3;
    gaf::tools::fuse_model(fused, opts);
    const auto inputs = gaf::tools::random_inputs(*unfused.graph, seed, 2);
    gaf::runtime::Session su(*unfused.graph), sf(*fused.graph);
    const auto a = su.run(inputs), b = sf.run(inputs);
    for (size_t i = 0; i < a.size(); ++i) {
      const auto c = gaf::tools::compare(b[i], a[i], 1e-3, 1e-4);
      if (!c.ok) {
        std::fprintf(stderr, "fuzz finding: fused != unfused (output %zu: %s)\n%s\n", i, c.message.c_str(),
                     text.c_str());
        std::abort();
      }
    }
  });
  return 0;
}
