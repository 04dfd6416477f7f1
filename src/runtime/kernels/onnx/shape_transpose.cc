// Transpose and the block rearrangements built on it (DepthToSpace, SpaceToDepth): each is a permutation of a
// (reshaped) input, copied by strided_copy (memcpy of contiguous runs, cache-blocked 2-D tiles otherwise).
#include "runtime/kernels/families.h"
#include "runtime/kernels/onnx/shape_util.h"

namespace gaf::runtime {

namespace {

class TransposeKernel final : public Kernel {
 public:
  explicit TransposeKernel(const Node& node)
      : has_perm_(node.has_attr("perm")), perm_(node.attr_ints("perm")) {}

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.in(0);
    const int r = x.rank();
    std::vector<int> perm(r);
    if (has_perm_) {
      GAF_CHECK(int(perm_.size()) == r, "{}: perm {} has {} entries for an input of rank {}", node.describe(),
                dims_to_string(perm_), perm_.size(), r);
      std::vector<bool> seen(r, false);
      for (int i = 0; i < r; ++i) {
        GAF_CHECK(perm_[i] >= 0 && perm_[i] < r && !seen[perm_[i]],
                  "{}: perm {} is not a permutation of 0..{}", node.describe(), dims_to_string(perm_), r - 1);
        seen[perm_[i]] = true;
        perm[i] = int(perm_[i]);
      }
    } else {
      for (int i = 0; i < r; ++i) perm[i] = r - 1 - i;
    }
    std::vector<int64_t> dims(r);
    for (int i = 0; i < r; ++i) dims[i] = x.dim(perm[i]);
    // Moving only size-1 dims does not change the element order: a view.
    int last = -1;
    bool order_kept = true;
    for (int i = 0; i < r; ++i) {
      if (x.dim(perm[i]) == 1) continue;
      if (perm[i] < last) order_kept = false;
      last = perm[i];
    }
    if (order_kept) {
      ctx.set_output(0, x.reshaped(std::move(dims)));
      return;
    }
    Tensor& y = ctx.allocate_output(0, x.dtype(), dims);
    transpose_into(x, y, x.dims(), perm);
  }

 private:
  bool has_perm_;
  std::vector<int64_t> perm_;
};

void check_4d(const Node& node, const Tensor& x, int64_t b) {
  GAF_CHECK(x.rank() == 4, "{}: the input must be 4-D (N,C,H,W), got {}", node.describe(),
            dims_to_string(x.dims()));
  GAF_CHECK(b > 0, "{}: blocksize must be positive, got {}", node.describe(), b);
}

void depth_to_space_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& x = ctx.in(0);
  const int64_t b = node.attr_int("blocksize");
  check_4d(node, x, b);
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  GAF_CHECK(c % (b * b) == 0, "{}: channels {} are not a multiple of blocksize^2 = {}", node.describe(), c,
            b * b);
  const std::string mode = node.attr_string("mode", "DCR");
  std::vector<int64_t> in_dims;
  std::vector<int> perm;
  if (mode == "DCR") {
    in_dims = {n, b, b, c / (b * b), h, w};
    perm = {0, 3, 4, 1, 5, 2};
  } else if (mode == "CRD") {
    in_dims = {n, c / (b * b), b, b, h, w};
    perm = {0, 1, 4, 2, 5, 3};
  } else {
    fail("{}: mode '{}' is not valid (DCR or CRD)", node.describe(), mode);
  }
  Tensor& y = ctx.allocate_output(0, x.dtype(), {n, c / (b * b), h * b, w * b});
  transpose_into(x, y, in_dims, perm);
}

void space_to_depth_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& x = ctx.in(0);
  const int64_t b = node.attr_int("blocksize");
  check_4d(node, x, b);
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  GAF_CHECK(h % b == 0 && w % b == 0, "{}: spatial size {}x{} is not a multiple of blocksize {}",
            node.describe(), h, w, b);
  Tensor& y = ctx.allocate_output(0, x.dtype(), {n, c * b * b, h / b, w / b});
  transpose_into(x, y, {n, c, h / b, b, w / b, b}, {0, 3, 5, 1, 2, 4});
}

}  // namespace

void register_shape_transpose_ops(KernelRegistry& r) {
  r.add("Transpose").set_kernel([](const Node& n) { return std::make_unique<TransposeKernel>(n); });
  r.add("DepthToSpace").set_kernel(fn_kernel(depth_to_space_kernel));
  r.add("SpaceToDepth").set_kernel(fn_kernel(space_to_depth_kernel));
}

}  // namespace gaf::runtime
