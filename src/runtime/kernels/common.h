// Helpers shared by the kernel families: axis normalisation, numpy broadcasting, strided index walking and
// parallel loops. Kernels throw gaf::Error naming the node for bad input, gaf::UnsupportedError for what the
// runtime does not implement.
#pragma once

#include <omp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <span>
#include <type_traits>
#include <vector>

#include "gaf/kernel.h"
#include "gaf/op_registry.h"
#include "ops/geometry.h"

namespace gaf::runtime {

// Arithmetic type of a storage type: 16-bit floats compute in fp32, everything else in itself; and the
// conversions between them.
template <class T>
using arith_t = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

template <class T>
inline arith_t<T> to_arith(T v) {
  if constexpr (std::is_same_v<T, Half>)
    return half_to_float(v.bits);
  else if constexpr (std::is_same_v<T, BFloat16>)
    return bf16_to_float(v.bits);
  else
    return v;
}
template <class T>
inline T from_arith(arith_t<T> v) {
  if constexpr (std::is_same_v<T, Half>)
    return Half{float_to_half(v)};
  else if constexpr (std::is_same_v<T, BFloat16>)
    return BFloat16{float_to_bf16(v)};
  else
    return v;
}

// Maps a possibly negative axis into [0, rank); throws naming the node when out of range.
int normalize_axis(int64_t axis, int rank, const Node& node);

// Calls f(T{}) for a floating-point element type (float, double, float16, bfloat16); anything else is
// unsupported, naming the node and what the tensor is.
template <class F>
decltype(auto) visit_float(DType t, const Node& node, const char* what, F&& f) {
  switch (t) {
    case DType::Float:
      return f(float{});
    case DType::Double:
      return f(double{});
    case DType::Float16:
      return f(Half{});
    case DType::BFloat16:
      return f(BFloat16{});
    default:
      break;
  }
  unsupported("{}: {} of element type {} is not supported (float, double, float16, bfloat16 are)",
              node.describe(), what, dtype_name(t));
}

// Throws naming the node unless every input the op was given is fp32 (the fused kernels of our own ops).
void check_float_inputs(const KernelContext& ctx, const Node& node);

// Numpy broadcasting: the ops' shape functions (ops/geometry.h).
using ops::broadcast_shape;
using ops::broadcast_strides;

// Contiguous row-major strides.

// Runs f(begin, end) over [0, n) split into chunks across OpenMP threads when n is large enough.
template <class F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  int threads = omp_get_max_threads();
  if (n <= grain || threads <= 1) {
    if (n > 0) f(int64_t(0), n);
    return;
  }
  int64_t chunks = std::min<int64_t>(threads, (n + grain - 1) / grain);
#pragma omp parallel for num_threads(int(chunks)) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t b = n * c / chunks, e = n * (c + 1) / chunks;
    if (b < e) f(b, e);
  }
}

// Runs n independent tasks of uneven or noisy cost across the OpenMP threads, each thread claiming the next
// unclaimed task when it finishes one (a static split leaves a thread idle when the other is delayed).
// body(claim) runs once per thread, so per-thread scratch is set up once; claim() returns the next task index,
// or -1 when none is left.
template <class F>
void parallel_tasks(int64_t n, F&& body) {
  const int threads = int(std::min<int64_t>(omp_get_max_threads(), n));
  if (threads <= 1) {
    int64_t next = 0;
    if (n > 0) body([&]() -> int64_t { return next < n ? next++ : -1; });
    return;
  }
  std::atomic<int64_t> next{0};
#pragma omp parallel num_threads(threads)
  body([&]() -> int64_t {
    const int64_t t = next.fetch_add(1, std::memory_order_relaxed);
    return t < n ? t : -1;
  });
}

// Walks the index space of `out` dims from linear index `begin` to `end`, calling f(linear, offsets) where
// offsets[k] is the element offset into operand k (strides given per operand, broadcast strides allowed).
// The innermost dimension is passed as a run so f can vectorise: f(out_index, offs, run_len, inner_strides).
template <size_t N, class F>
void strided_walk(const std::vector<int64_t>& out, const std::array<std::vector<int64_t>, N>& strides,
                  int64_t begin, int64_t end, F&& f) {
  const int rank = int(out.size());
  if (rank == 0) {
    if (begin < end) {
      std::array<int64_t, N> offs{};
      std::array<int64_t, N> inner{};
      f(int64_t(0), offs, int64_t(1), inner);
    }
    return;
  }
  const int64_t inner_len = out[rank - 1];
  std::array<int64_t, N> inner;
  for (size_t k = 0; k < N; ++k) inner[k] = strides[k][rank - 1];
  std::vector<int64_t> idx(rank, 0);
  int64_t rem = begin;
  for (int d = rank - 1; d >= 0; --d) {
    idx[d] = out[d] ? rem % out[d] : 0;
    rem = out[d] ? rem / out[d] : 0;
  }
  int64_t pos = begin;
  while (pos < end) {
    std::array<int64_t, N> offs{};
    for (size_t k = 0; k < N; ++k)
      for (int d = 0; d < rank; ++d) offs[k] += idx[d] * strides[k][d];
    int64_t run = std::min(inner_len - idx[rank - 1], end - pos);
    f(pos, offs, run, inner);
    pos += run;
    idx[rank - 1] += run;
    for (int d = rank - 1; d > 0 && idx[d] >= out[d]; --d) {
      idx[d] = 0;
      ++idx[d - 1];
    }
  }
}

}  // namespace gaf::runtime
