// Fuzz target: a serialized ModelProto from the fuzzer's bytes -> import (checker, shape inference) -> fuse
// at opt level 3 -> plan for the CUDA backend (dry run, where built). Nothing runs: arbitrary shapes could
// ask for arbitrary memory.
#include <onnx/onnx_pb.h>

#include <cstdio>
#include <cstdlib>

#include "fuzz_common.h"
#include "gaf/onnx_io.h"
#include "gaf/tools.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  onnx::ModelProto proto;
  if (size > (64 << 20) || !proto.ParseFromArray(data, int(size)))
    return 0;  // not a ModelProto: nothing to do
  if (std::getenv("GAF_FUZZ_VERBOSE")) std::fprintf(stderr, "a ModelProto of %zu bytes\n", size);
  gaf::fuzz::expect_clean([&] {
    gaf::Model m = gaf::onnx_io::import_model(proto, "");
    gaf::infer_fused_body_shapes(*m.graph);
    gaf::tools::FuseOptions opts;
    opts.fusion.opt_level = 3;
    gaf::tools::fuse_model(m, opts);
  });
  return 0;
}
