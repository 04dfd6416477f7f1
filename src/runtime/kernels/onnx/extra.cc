// The "extra" op family: the remaining ONNX ops of the conformance data, each in a file of its own kind
// (loss.cc, string_ops.cc, recurrent.cc, detection.cc, grid_sample.cc).
#include "runtime/kernels/onnx/extra_util.h"
#include "runtime/kernels/families.h"

namespace gaf::runtime {

void register_extra_ops(KernelRegistry& r) {
  extra::register_extra_loss_ops(r);
  extra::register_extra_string_ops(r);
  extra::register_extra_rnn_ops(r);
  extra::register_extra_detection_ops(r);
  extra::register_extra_sample_ops(r);
}

}  // namespace gaf::runtime
