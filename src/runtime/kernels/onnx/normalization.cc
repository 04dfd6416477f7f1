// Normalisation family registration: Softmax/LogSoftmax/Hardmax (norm_softmax.cc), LayerNormalization and
// InstanceNormalization (norm_layer.cc), BatchNormalization (norm_batch.cc), LpNormalization,
// MeanVarianceNormalization and LRN (norm_misc.cc).
#include "runtime/kernels/common.h"
#include "runtime/kernels/families.h"
#include "runtime/kernels/onnx/norm_ops.h"

namespace gaf::runtime {

void register_normalization_ops(KernelRegistry& r) {
  rn::register_softmax_ops(r);
  rn::register_layer_norm_ops(r);
  rn::register_batch_norm_ops(r);
  rn::register_misc_norm_ops(r);
}

}  // namespace gaf::runtime
