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

std::vector<int64_t> broadcast_shape(std::span<const std::vector<int64_t>> shapes, const Node& node) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  std::vector<int64_t> out(rank, 1);
  for (const auto& s : shapes) {
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[rank - s.size() + i];
      int64_t d = s[i];
      if (d == o || d == 1) continue;
      GAF_CHECK(o == 1, "{}: shapes cannot be broadcast together ({} vs dimension {} of size {})",
                node.describe(), dims_to_string(s), rank - s.size() + i, o);
      o = d;
    }
  }
  return out;
}

std::vector<int64_t> broadcast_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                                     const Node& node) {
  std::vector<int64_t> shapes[2] = {a, b};
  return broadcast_shape(std::span<const std::vector<int64_t>>(shapes, 2), node);
}

std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& dims, const std::vector<int64_t>& out) {
  std::vector<int64_t> s(out.size(), 0);
  auto cs = contiguous_strides(dims);
  size_t off = out.size() - dims.size();
  for (size_t i = 0; i < dims.size(); ++i) s[off + i] = dims[i] == 1 && out[off + i] != 1 ? 0 : cs[i];
  return s;
}

}  // namespace gaf::runtime
