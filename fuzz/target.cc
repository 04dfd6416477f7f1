// Fuzz target: a target file (JSON) from the fuzzer's bytes -> Target::parse -> plan a small model with its
// numbers (the cost model on any positive figures).
#include <string>

#include "fuzz_common.h"
#include "fuzz_model.h"
#include "gaf/tools.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 16)) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  gaf::fuzz::expect_clean([&] {
    gaf::tools::FuseOptions opts;
    opts.target = gaf::Target::parse(text, "fuzz.json");
    opts.fusion.opt_level = 3;
    gaf::Model m = gaf::onnx_io::parse_model_text(gaf::fuzz::kPlanModel);
    gaf::tools::fuse_model(m, opts);
  });
  return 0;
}
