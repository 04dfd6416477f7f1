// Data movement family: the view ops (Reshape, Flatten, Squeeze, Unsqueeze: zero-copy, the output shares the
// input's storage) live here; the copying ops are in shape_*.cc.
#include "runtime/kernels/families.h"
#include "runtime/kernels/onnx/shape_util.h"

namespace gaf::runtime {

namespace {

// Reshape-5+: shape is input 1; Reshape-1 had a "shape" attribute. 0 copies the input dim (unless allowzero),
// -1 is inferred.
void reshape_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& x = ctx.in(0);
  std::vector<int64_t> shape;
  if (const Tensor* s = ctx.input(1))
    shape = read_ints(*s, node, "shape");
  else if (node.opset < 5 && node.has_attr("shape"))
    shape = node.attr_ints("shape");
  else
    fail("{}: the shape input is missing", node.describe());
  const bool allowzero = node.attr_int("allowzero", 0) != 0;
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allowzero) {
      GAF_CHECK(int(i) < x.rank(), "{}: shape {} copies dimension {} (0), but the input {} has rank {}",
                node.describe(), dims_to_string(shape), i, dims_to_string(x.dims()), x.rank());
      shape[i] = x.dim(int(i));
    }
    if (shape[i] == -1) {
      GAF_CHECK(infer < 0, "{}: shape {} has more than one -1", node.describe(), dims_to_string(shape));
      infer = int(i);
      continue;
    }
    GAF_CHECK(shape[i] >= 0, "{}: shape {} has a negative dimension", node.describe(), dims_to_string(shape));
    known *= shape[i];
  }
  if (infer >= 0) {
    GAF_CHECK(known != 0 && x.numel() % known == 0, "{}: cannot reshape {} to {}: the -1 cannot be inferred",
              node.describe(), dims_to_string(x.dims()), dims_to_string(shape));
    shape[infer] = x.numel() / known;
  }
  GAF_CHECK(numel_of(shape) == x.numel(), "{}: cannot reshape {} ({} elements) to {} ({} elements)",
            node.describe(), dims_to_string(x.dims()), x.numel(), dims_to_string(shape), numel_of(shape));
  ctx.set_output(0, x.reshaped(std::move(shape)));
}

void flatten_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& x = ctx.in(0);
  int64_t axis = node.attr_int("axis", 1);
  GAF_CHECK(axis >= -x.rank() && axis <= x.rank(), "{}: axis {} is out of range for rank {}", node.describe(),
            axis, x.rank());
  if (axis < 0) axis += x.rank();
  int64_t outer = prod(x.dims(), 0, size_t(axis));
  ctx.set_output(0, x.reshaped({outer, prod(x.dims(), size_t(axis), x.dims().size())}));
}

// Axes come from the "axes" attribute before opset 13 and from input 1 from opset 13.
bool read_axes(KernelContext& ctx, std::vector<int64_t>& axes) {
  const Node& node = ctx.node();
  if (node.opset >= 13) {
    const Tensor* a = ctx.input(1);
    if (!a) return false;
    axes = read_ints(*a, node, "axes");
    return true;
  }
  if (!node.has_attr("axes")) return false;
  axes = node.attr_ints("axes");
  return true;
}

void squeeze_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& x = ctx.in(0);
  std::vector<int64_t> axes;
  bool given = read_axes(ctx, axes) && !axes.empty();
  std::vector<bool> drop(x.rank(), false);
  if (given) {
    for (int a : normalize_axes(axes, x.rank(), node)) {
      GAF_CHECK(x.dim(a) == 1, "{}: cannot squeeze axis {} of shape {}: its size is {}, not 1",
                node.describe(), a, dims_to_string(x.dims()), x.dim(a));
      drop[a] = true;
    }
  } else {
    for (int i = 0; i < x.rank(); ++i) drop[i] = x.dim(i) == 1;
  }
  std::vector<int64_t> dims;
  for (int i = 0; i < x.rank(); ++i)
    if (!drop[i]) dims.push_back(x.dim(i));
  ctx.set_output(0, x.reshaped(std::move(dims)));
}

void unsqueeze_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& x = ctx.in(0);
  std::vector<int64_t> axes;
  GAF_CHECK(read_axes(ctx, axes), "{}: the axes {} is missing", node.describe(),
            node.opset >= 13 ? "input" : "attribute");
  const int out_rank = x.rank() + int(axes.size());
  std::vector<bool> inserted(out_rank, false);
  for (int a : normalize_axes(axes, out_rank, node)) inserted[a] = true;
  std::vector<int64_t> dims;
  int k = 0;
  for (int i = 0; i < out_rank; ++i) dims.push_back(inserted[i] ? 1 : x.dim(k++));
  ctx.set_output(0, x.reshaped(std::move(dims)));
}

}  // namespace

void register_shape_view_ops(KernelRegistry& r) {
  r.add("Reshape").set_kernel(fn_kernel(reshape_kernel));
  r.add("Flatten").set_kernel(fn_kernel(flatten_kernel));
  r.add("Squeeze").set_kernel(fn_kernel(squeeze_kernel));
  r.add("Unsqueeze").set_kernel(fn_kernel(unsqueeze_kernel));
}

void register_shape_ops(KernelRegistry& r) {
  register_shape_view_ops(r);
  register_shape_transpose_ops(r);
  register_shape_concat_ops(r);
  register_shape_slice_ops(r);
  register_shape_pad_ops(r);
}

}  // namespace gaf::runtime
