// Fuzz target: a serialized TensorProto (what --input-pb reads) from the fuzzer's bytes -> a tensor (no folder:
// external data refused) -> written back and read again, the same dims and bytes.
#include <onnx/onnx_pb.h>

#include <cstring>
#include <string>

#include "fuzz_common.h"
#include "gaf/onnx_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 20)) return 0;
  onnx::TensorProto p;
  if (!p.ParseFromArray(data, int(size))) return 0;
  gaf::fuzz::expect_clean([&] {
    const gaf::Tensor t = gaf::onnx_io::tensor_from_proto(p);
    onnx::TensorProto back;
    gaf::onnx_io::tensor_to_proto(t, back);
    const gaf::Tensor again = gaf::onnx_io::tensor_from_proto(back);
    if (again.dims() != t.dims() || again.dtype() != t.dtype() ||
        (t.dtype() != gaf::DType::String && t.nbytes() && std::memcmp(again.raw(), t.raw(), t.nbytes()) != 0)) {
      std::fprintf(stderr, "fuzz finding: a tensor written and read back differs\n");
      std::abort();
    }
  });
  return 0;
}
