// The misc family: constants, shape queries, resize, einsum, quantization, determinants, window functions and
// the spectral ops. Each group lives in its own file (constants_and_shapes.cc, resize.cc, einsum.cc,
// quantize.cc, det_and_windows.cc, spectral.cc); this function registers them all.
#include "runtime/kernels/families.h"
#include "runtime/kernels/onnx/misc_util.h"

namespace gaf::runtime {

void register_misc_ops(KernelRegistry& r) {
  register_misc_basic_ops(r);
  register_misc_resize_ops(r);
  register_misc_einsum_ops(r);
  register_misc_quant_ops(r);
  register_misc_linalg_ops(r);
  register_spectral_ops(r);
}

}  // namespace gaf::runtime
