// Gather, GatherElements, GatherND. Indices may be negative (counted from the end); every index is checked
// before any data is read, and an out-of-range one is an error naming the node, the index and its position.
#include "runtime/kernels/families.h"
#include "runtime/kernels/onnx/shape_util.h"

namespace gaf::runtime {

namespace {

void gather_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& data = ctx.in(0);
  const Tensor& indices = ctx.in(1);
  GAF_CHECK(data.rank() >= 1, "{}: data must have rank >= 1", node.describe());
  const int axis = normalize_axis(node.attr_int("axis", 0), data.rank(), node);
  const int64_t n = data.dim(axis);
  std::vector<int64_t> idx = checked_indices(indices, n, node, axis);
  std::vector<int64_t> dims(data.dims().begin(), data.dims().begin() + axis);
  dims.insert(dims.end(), indices.dims().begin(), indices.dims().end());
  dims.insert(dims.end(), data.dims().begin() + axis + 1, data.dims().end());
  Tensor& y = ctx.allocate_output(0, data.dtype(), dims);
  if (y.numel() == 0) return;
  const int64_t outer = prod(data.dims(), 0, axis), inner = prod(data.dims(), axis + 1, data.dims().size());
  const int64_t ni = int64_t(idx.size());
  visit_bytes(data.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = static_cast<const T*>(data.raw());
    T* dst = static_cast<T*>(y.raw());
    if (inner == 1) {
      parallel_for(outer * ni, kCopyGrain, [&](int64_t b, int64_t e) {
        int64_t o = b / ni, j = b % ni;
        for (int64_t k = b; k < e; ++k) {
          dst[k] = src[o * n + idx[j]];
          if (++j == ni) {
            j = 0;
            ++o;
          }
        }
      });
      return;
    }
    // Slices of `inner` elements, each cut into pieces of about kCopyGrain: a few large slices (qkv[0] of a
    // packed projection is one) still spread over the threads.
    const int64_t pieces = std::max<int64_t>(1, inner / kCopyGrain), piece = (inner + pieces - 1) / pieces;
    parallel_for(outer * ni * pieces, std::max<int64_t>(1, kCopyGrain / piece), [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const int64_t k = t / pieces, lo = t % pieces * piece, len = std::min(piece, inner - lo);
        copy_elems(dst + k * inner + lo, src + ((k / ni) * n + idx[k % ni]) * inner + lo, len);
      }
    });
  });
}

void gather_elements_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& data = ctx.in(0);
  const Tensor& indices = ctx.in(1);
  const int r = data.rank();
  GAF_CHECK(r >= 1 && indices.rank() == r, "{}: data {} and indices {} must have the same rank >= 1",
            node.describe(), dims_to_string(data.dims()), dims_to_string(indices.dims()));
  const int axis = normalize_axis(node.attr_int("axis", 0), r, node);
  for (int d = 0; d < r; ++d)
    GAF_CHECK(d == axis || indices.dim(d) <= data.dim(d),
              "{}: indices {} exceed data {} along axis {} (only axis {} may differ)", node.describe(),
              dims_to_string(indices.dims()), dims_to_string(data.dims()), d, axis);
  const int64_t n = data.dim(axis);
  std::vector<int64_t> idx = checked_indices(indices, n, node, axis);
  Tensor& y = ctx.allocate_output(0, data.dtype(), indices.dims());
  if (y.numel() == 0) return;
  const auto ds = contiguous_strides(data.dims());
  const std::vector<int64_t>& od = indices.dims();
  const int64_t L = od[r - 1], rows = prod(od, 0, r - 1);
  visit_bytes(data.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = static_cast<const T*>(data.raw());
    T* dst = static_cast<T*>(y.raw());
    parallel_for(rows, std::max<int64_t>(1, kCopyGrain / L), [&](int64_t b, int64_t e) {
      std::vector<int64_t> i(std::max(r - 1, 1));
      for (int64_t row = b; row < e; ++row) {
        int64_t rem = row, base = 0;
        for (int d = r - 2; d >= 0; --d) {
          i[d] = rem % od[d];
          rem /= od[d];
          if (d != axis) base += i[d] * ds[d];
        }
        const int64_t* ix = idx.data() + row * L;
        T* out = dst + row * L;
        if (axis == r - 1) {
          for (int64_t j = 0; j < L; ++j) out[j] = src[base + ix[j]];
        } else {
          const int64_t sa = ds[axis];
          for (int64_t j = 0; j < L; ++j) out[j] = src[base + j + ix[j] * sa];
        }
      }
    });
  });
}

void gather_nd_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& data = ctx.in(0);
  const Tensor& indices = ctx.in(1);
  const int r = data.rank(), q = indices.rank();
  const int64_t b = node.attr_int("batch_dims", 0);
  GAF_CHECK(r >= 1 && q >= 1, "{}: data {} and indices {} must have rank >= 1", node.describe(),
            dims_to_string(data.dims()), dims_to_string(indices.dims()));
  GAF_CHECK(b >= 0 && b < std::min(r, q), "{}: batch_dims {} must be in [0, min(rank(data), rank(indices)))",
            node.describe(), b);
  for (int d = 0; d < b; ++d)
    GAF_CHECK(data.dim(d) == indices.dim(d), "{}: batch dimension {} differs: data {} vs indices {}",
              node.describe(), d, dims_to_string(data.dims()), dims_to_string(indices.dims()));
  const int64_t m = indices.dim(q - 1);
  GAF_CHECK(m >= 1 && m <= r - b,
            "{}: indices.shape[-1] = {} must be in [1, {}] for data {} and batch_dims {}", node.describe(), m,
            r - b, dims_to_string(data.dims()), b);
  std::vector<int64_t> dims(indices.dims().begin(), indices.dims().end() - 1);
  dims.insert(dims.end(), data.dims().begin() + b + m, data.dims().end());
  const int64_t batches = prod(data.dims(), 0, b);
  const int64_t tuples = prod(indices.dims(), b, q - 1);
  const int64_t slice = prod(data.dims(), b + m, r);
  const int64_t batch_stride = prod(data.dims(), b, r);
  const auto ds = contiguous_strides(data.dims());
  // Offsets of every tuple's slice in data, checked.
  std::vector<int64_t> offs(batches * tuples);
  visit_index(indices.dtype(), node, "indices", [&](auto tag) {
    using I = typename decltype(tag)::type;
    const I* p = indices.data<I>();
    for (int64_t t = 0; t < batches * tuples; ++t) {
      int64_t off = (t / std::max<int64_t>(tuples, 1)) * batch_stride;
      for (int64_t k = 0; k < m; ++k) {
        const int a = int(b + k);
        off += checked_index(p, t * m + k, data.dim(a), node, indices, a) * ds[a];
      }
      offs[t] = off;
    }
  });
  Tensor& y = ctx.allocate_output(0, data.dtype(), dims);
  if (y.numel() == 0) return;
  visit_bytes(data.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = static_cast<const T*>(data.raw());
    T* dst = static_cast<T*>(y.raw());
    parallel_for(int64_t(offs.size()), std::max<int64_t>(1, kCopyGrain / slice), [&](int64_t lo, int64_t hi) {
      for (int64_t t = lo; t < hi; ++t) copy_elems(dst + t * slice, src + offs[t], slice);
    });
  });
}

}  // namespace

void register_index_gather_ops(KernelRegistry& r) {
  r.add("Gather").set_kernel(fn_kernel(gather_kernel));
  r.add("GatherElements").set_kernel(fn_kernel(gather_elements_kernel));
  r.add("GatherND").set_kernel(fn_kernel(gather_nd_kernel));
}

}  // namespace gaf::runtime
