// Fuzz target: ONNX text from the fuzzer's bytes -> parse -> fuse at opt level 3 -> print back as text (opt's
// printer) and parse that again.
#include <string>

#include "fuzz_common.h"
#include "gaf/onnx_io.h"
#include "gaf/tools.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 20)) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  gaf::fuzz::expect_clean([&] {
    gaf::Model m = gaf::onnx_io::parse_model_text(text);
    gaf::tools::FuseOptions opts;
    opts.fusion.opt_level = 3;
    gaf::tools::fuse_model(m, opts);
    gaf::onnx_io::parse_model_text(gaf::tools::model_text(m));
  });
  return 0;
}
