#include "runtime/kernels/reduce_util.h"

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

std::function<double(const Node&)> input_flops(double per_element) {
  return [per_element](const Node& n) -> double {
    const Value* x = n.input(0);
    if (!x || !x->type.has_static_shape()) return 0.0;
    return double(numel_of(x->type.static_dims())) * per_element;
  };
}

}  // namespace gaf::runtime::rn
