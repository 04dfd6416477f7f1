// Helpers for the data movement and indexing kernels (shape_*.cc, index_*.cc).
//
// Data movement does not look at values, only at bytes, so those kernels dispatch on the element width
// (visit_bytes: uint8/16/32/64, or std::string for string tensors) and one instantiation serves every dtype
// of that width. strided_copy is the common engine behind Transpose, Slice, Expand, Tile, DepthToSpace and
// SpaceToDepth: it simplifies the index space, then copies contiguous runs with memcpy, transposes in cache
// blocks when the source's unit-stride dimension is not the destination's, and parallelises over outer dims.
#pragma once

#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/kernels/common.h"

namespace gaf::runtime {

// Registration of the sub-files of the shape and index families (called by register_shape_ops /
// register_index_ops).
void register_shape_view_ops(KernelRegistry& r);       // Reshape, Flatten, Squeeze, Unsqueeze
void register_shape_transpose_ops(KernelRegistry& r);  // Transpose, DepthToSpace, SpaceToDepth
void register_shape_concat_ops(KernelRegistry& r);     // Concat, Split
void register_shape_slice_ops(KernelRegistry& r);      // Slice, Expand, Tile
void register_shape_pad_ops(KernelRegistry& r);        // Pad, ReverseSequence
void register_index_gather_ops(KernelRegistry& r);     // Gather, GatherElements, GatherND
void register_index_scatter_ops(KernelRegistry& r);    // ScatterElements, Scatter, ScatterND
void register_index_select_ops(KernelRegistry& r);     // OneHot, NonZero, Compress, Trilu, CumSum
void register_index_sort_ops(KernelRegistry& r);       // TopK, Unique

template <class T>
struct TypeTag {
  using type = T;
};

// Calls f(TypeTag<T>{}) with T an unsigned integer of the element's width, or std::string for strings.
template <class F>
decltype(auto) visit_bytes(DType t, F&& f) {
  if (t == DType::String) return f(TypeTag<std::string>{});
  switch (t == DType::Undefined ? 0 : dtype_size(t)) {
    case 1:
      return f(TypeTag<uint8_t>{});
    case 2:
      return f(TypeTag<uint16_t>{});
    case 4:
      return f(TypeTag<uint32_t>{});
    case 8:
      return f(TypeTag<uint64_t>{});
    default:
      break;
  }
  unsupported("element type {} is not supported here", dtype_name(t));
}

// Calls f(TypeTag<T>{}) for an index tensor (int32 or int64); anything else is an error naming the node.
template <class F>
decltype(auto) visit_index(DType t, const Node& node, const char* what, F&& f) {
  if (t == DType::Int64) return f(TypeTag<int64_t>{});
  if (t == DType::Int32) return f(TypeTag<int32_t>{});
  fail("{}: {} must be int32 or int64, got {}", node.describe(), what, dtype_name(t));
}

template <class T>
inline void copy_elems(T* dst, const T* src, int64_t n) {
  if constexpr (std::is_trivially_copyable_v<T>) {
    if (n > 0) std::memcpy(dst, src, size_t(n) * sizeof(T));
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
  }
}

template <class T>
inline void fill_elems(T* dst, int64_t n, const T& v) {
  for (int64_t i = 0; i < n; ++i) dst[i] = v;
}

// Elements per parallel chunk for memory-bound loops.
constexpr int64_t kCopyGrain = 32 * 1024;

// Copies `bytes` contiguous bytes, in parallel when large.
void parallel_memcpy(void* dst, const void* src, size_t bytes);

// Copies a strided view of `src` into `dst`: element (i0, i1, ...) of the index space `dims` goes from
// src[sum i_k * src_strides[k]] to dst[sum i_k * dst_strides[k]]. Strides are in elements; source strides may
// be zero (broadcast) or negative (reversed slices); destination strides must address distinct elements.
void strided_copy(DType dtype, void* dst, const void* src, const std::vector<int64_t>& dims,
                  const std::vector<int64_t>& dst_strides, const std::vector<int64_t>& src_strides);

// Copies the input of a permutation: out dims are in.dims[perm[i]], out is contiguous.
void transpose_into(const Tensor& in, Tensor& out, const std::vector<int64_t>& in_dims,
                    const std::vector<int>& perm);

// Byte offset helper for untyped pointers.
inline void* byte_offset(void* p, int64_t elems, size_t esize) {
  return static_cast<char*>(p) + elems * int64_t(esize);
}
inline const void* byte_offset(const void* p, int64_t elems, size_t esize) {
  return static_cast<const char*>(p) + elems * int64_t(esize);
}

// Values of a 1-D (or scalar) integer tensor, e.g. a shape, axes or pads input; error naming the node when it
// is not an integer tensor.
std::vector<int64_t> read_ints(const Tensor& t, const Node& node, const char* what);

// y = the parts concatenated along `axis` (y allocated with the summed dims; parts contiguous, of y's dtype
// and of its dims elsewhere), and the reverse: x cut along `axis` into the allocated parts, in order.
void concat_into(Tensor& y, const std::vector<const Tensor*>& parts, int axis);
// Throws naming the node unless `sizes` (a split's lengths) are all >= 0 and sum to `dim`, axis `axis`'s
// size.
void check_split_lengths(const std::vector<int64_t>& sizes, int64_t dim, int axis, const Node& node);
void split_into(const Tensor& x, const std::vector<Tensor*>& parts, int axis);

// Reads one integer from a scalar or one-element tensor.
int64_t read_scalar_int(const Tensor& t, const Node& node, const char* what);

// Normalises a list of possibly negative axes for `rank`; rejects out-of-range and repeated axes.
std::vector<int> normalize_axes(const std::vector<int64_t>& axes, int rank, const Node& node);

// Index at linear position `pos` of an index tensor, checked against [-n, n) and made non-negative; the error
// names the node, the index, its position and the axis.
template <class I>
inline int64_t checked_index(const I* idx, int64_t pos, int64_t n, const Node& node, const Tensor& indices,
                             int axis) {
  int64_t v = int64_t(idx[pos]);
  if (v < -n || v >= n) {
    fail("{}: index {} at position {} of indices {} is out of range for axis {} of size {}", node.describe(),
         v, pos, dims_to_string(indices.dims()), axis, n);
  }
  return v < 0 ? v + n : v;
}

// All indices of `t` (int32 or int64) checked against [-n, n) and normalised into [0, n).
std::vector<int64_t> checked_indices(const Tensor& t, int64_t n, const Node& node, int axis);

inline int64_t prod(const std::vector<int64_t>& d, size_t b, size_t e) {
  int64_t p = 1;
  for (size_t i = b; i < e && i < d.size(); ++i) p *= d[i];
  return p;
}

}  // namespace gaf::runtime
