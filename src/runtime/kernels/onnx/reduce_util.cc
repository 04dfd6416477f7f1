#include "runtime/kernels/onnx/reduce_util.h"

namespace gaf::runtime::rn {

std::vector<bool> axes_mask(const std::vector<int64_t>& axes, int rank, const Node& node) {
  std::vector<bool> mask(rank, false);
  for (int64_t a : axes) {
    GAF_CHECK(a >= -rank && a < rank, "{}: axis {} is out of range for an input of rank {}", node.describe(),
              a, rank);
    int ax = int(a < 0 ? a + rank : a);
    GAF_CHECK(!mask[ax], "{}: axis {} is listed twice in axes", node.describe(), a);
    mask[ax] = true;
  }
  return mask;
}

}  // namespace gaf::runtime::rn
