#include "runtime/kernels/common.h"

namespace gaf::runtime {

void check_float_inputs(const KernelContext& ctx, const Node& node) {
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor* t = ctx.input(i);
    GAF_CHECK(!t || t->dtype() == DType::Float, "{}: float tensors only (input {} is {})",
              node.describe(), i, dtype_name(t->dtype()));
  }
}

int normalize_axis(int64_t axis, int rank, const Node& node) {
  GAF_CHECK(axis >= -rank && axis < std::max(rank, 1), "{}: axis {} is out of range for rank {}", node.describe(),
            axis, rank);
  return int(axis < 0 ? axis + rank : axis);
}

}  // namespace gaf::runtime
