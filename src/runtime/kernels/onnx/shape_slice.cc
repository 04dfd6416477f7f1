// Slice, Expand and Tile: each output is a strided view of the input (steps, zero strides along broadcast
// dims, zero strides along repeat dims), materialised by strided_copy.
#include <limits>

#include "runtime/kernels/families.h"
#include "runtime/kernels/onnx/shape_util.h"

namespace gaf::runtime {

namespace {

// Slice-1 takes starts/ends/axes attributes; Slice-10+ takes starts, ends, axes?, steps? inputs.
void slice_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& x = ctx.in(0);
  const int r = x.rank();
  std::vector<int64_t> starts, ends, axes, steps;
  bool has_axes = false;
  if (node.opset < 10) {
    starts = node.attr_ints("starts");
    ends = node.attr_ints("ends");
    has_axes = node.has_attr("axes");
    axes = node.attr_ints("axes");
  } else {
    starts = read_ints(ctx.in(1), node, "starts");
    ends = read_ints(ctx.in(2), node, "ends");
    if (const Tensor* a = ctx.input(3)) {
      has_axes = true;
      axes = read_ints(*a, node, "axes");
    }
    if (const Tensor* s = ctx.input(4)) steps = read_ints(*s, node, "steps");
  }
  GAF_CHECK(starts.size() == ends.size(), "{}: starts has {} entries, ends has {}", node.describe(),
            starts.size(), ends.size());
  if (!has_axes) {
    GAF_CHECK(int(starts.size()) <= r, "{}: {} starts for an input of rank {}", node.describe(),
              starts.size(), r);
    axes.resize(starts.size());
    for (size_t i = 0; i < axes.size(); ++i) axes[i] = int64_t(i);
  }
  GAF_CHECK(axes.size() == starts.size(), "{}: axes has {} entries, starts has {}", node.describe(),
            axes.size(), starts.size());
  if (steps.empty()) steps.assign(starts.size(), 1);
  GAF_CHECK(steps.size() == starts.size(), "{}: steps has {} entries, starts has {}", node.describe(),
            steps.size(), starts.size());
  std::vector<int> ax = normalize_axes(axes, r, node);

  std::vector<int64_t> dims = x.dims(), strides = contiguous_strides(x.dims());
  int64_t offset = 0;
  for (size_t i = 0; i < ax.size(); ++i) {
    const int a = ax[i];
    const int64_t n = x.dim(a), step = steps[i];
    GAF_CHECK(step != 0, "{}: step for axis {} is 0", node.describe(), a);
    int64_t s = starts[i], e = ends[i];
    // Clamp like ONNX: [0, n] for positive steps, [-1, n-1] for negative ones (INT64 extremes included).
    if (s < 0) s = s < -n ? -n - 1 : s;  // avoid overflow when adding n below
    if (e < 0) e = e < -n ? -n - 1 : e;
    if (s < 0) s += n;
    if (e < 0) e += n;
    int64_t count;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, n);
      e = std::clamp<int64_t>(e, 0, n);
      count = e > s ? (e - s + step - 1) / step : 0;
    } else {
      s = std::clamp<int64_t>(s, -1, n - 1);
      e = std::clamp<int64_t>(e, -1, n - 1);
      count = s > e ? (s - e + (-step) - 1) / (-step) : 0;
    }
    dims[a] = count;
    if (count > 0) offset += s * strides[a];
    strides[a] *= step;
  }
  Tensor& y = ctx.allocate_output(0, x.dtype(), dims);
  if (y.numel() == 0) return;
  strided_copy(x.dtype(), y.raw(), byte_offset(x.raw(), offset, dtype_size(x.dtype())), dims,
               contiguous_strides(dims), strides);
}

void expand_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& x = ctx.in(0);
  std::vector<int64_t> shape = read_ints(ctx.in(1), node, "shape");
  for (int64_t d : shape)
    GAF_CHECK(d >= 0, "{}: shape {} has a negative dimension", node.describe(), dims_to_string(shape));
  std::vector<int64_t> dims = broadcast_shape(x.dims(), shape, node);
  Tensor& y = ctx.allocate_output(0, x.dtype(), dims);
  if (y.numel() == 0) return;
  strided_copy(x.dtype(), y.raw(), x.raw(), dims, contiguous_strides(dims),
               broadcast_strides(x.dims(), dims));
}

void tile_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& x = ctx.in(0);
  std::vector<int64_t> repeats = read_ints(ctx.in(1), node, "repeats");
  const int r = x.rank();
  GAF_CHECK(int(repeats.size()) == r, "{}: repeats has {} entries for an input of rank {}", node.describe(),
            repeats.size(), r);
  std::vector<int64_t> out(r);
  for (int i = 0; i < r; ++i) {
    GAF_CHECK(repeats[i] >= 0, "{}: repeats {} has a negative entry", node.describe(),
              dims_to_string(repeats));
    out[i] = x.dim(i) * repeats[i];
  }
  Tensor& y = ctx.allocate_output(0, x.dtype(), out);
  if (y.numel() == 0) return;
  // Output viewed as [rep0, d0, rep1, d1, ...]: the repeat dims have source stride 0.
  auto xs = contiguous_strides(x.dims()), ys = contiguous_strides(out);
  std::vector<int64_t> dims, ds, ss;
  for (int i = 0; i < r; ++i) {
    dims.insert(dims.end(), {repeats[i], x.dim(i)});
    ds.insert(ds.end(), {x.dim(i) * ys[i], ys[i]});
    ss.insert(ss.end(), {0, xs[i]});
  }
  strided_copy(x.dtype(), y.raw(), x.raw(), dims, ds, ss);
}

}  // namespace

void register_shape_slice_ops(KernelRegistry& r) {
  r.add("Slice").set_kernel(fn_kernel(slice_kernel));
  r.add("Expand").set_kernel(fn_kernel(expand_kernel));
  r.add("Tile").set_kernel(fn_kernel(tile_kernel));
}

}  // namespace gaf::runtime
