// Fuzz target: a rules file (JSON) from the fuzzer's bytes -> FusionRules::parse -> fuse a small model with them
// (forbid/force patterns, skip lists, global switches all applied).
#include <string>

#include "fuzz_common.h"
#include "fuzz_model.h"
#include "gaf/tools.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 16)) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  gaf::fuzz::expect_clean([&] {
    gaf::tools::FuseOptions opts;
    opts.fusion.rules = gaf::FusionRules::parse(text, "fuzz.json");
    opts.fusion.opt_level = 3;
    gaf::Model m = gaf::onnx_io::parse_model_text(gaf::fuzz::kPlanModel);
    gaf::tools::fuse_model(m, opts);
  });
  return 0;
}
