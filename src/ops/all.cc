#include "ops/ops.h"

namespace gaf::ops {

void register_all(OpRegistry& r) {
  register_elementwise_ops(r);
  register_reduction_ops(r);
  register_data_movement_ops(r);
  register_linear_ops(r);
  register_misc_ops(r);
}

}  // namespace gaf::ops
