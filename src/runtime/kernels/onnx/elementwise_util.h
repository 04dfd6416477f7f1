// The elementwise engine shared by the unary, binary, variadic and cast kernels.
//
// Storage vs compute types: fp16/bf16 are storage types; kernels convert blocks of them to fp32 (F16C or
// AVX-512 conversions), run the fp32 loop and convert back. Every other type computes in itself.
//
// dispatch<Allowed>(dtype, ...) turns the runtime dtype into a C++ type once per kernel call, restricted to
// the type classes an op accepts (anything else is a clear UnsupportedError naming the node).
//
// unary_map: a flat loop over contiguous data, split across threads for large tensors.
//
// Broadcasting: plan_broadcast drops size-1 dimensions and merges dimensions that are contiguous for every
// operand, so same-shape operands become one flat run, [N,C] + [C] becomes rows with a stride-1 operand and
// [N,C,H,W] + [C,1,1] becomes runs of H*W against one scalar. Row kernels specialise the inner strides (1/1,
// scalar/1, 1/scalar) into tight loops the compiler vectorises; other strides take a gather loop. Short inner
// runs (< kShortRun) are processed as groups of rows (binary_short_runs).
//
// Integer faults (division by zero) cannot throw inside OpenMP regions: ops record them in an ErrorFlag and
// the kernel throws after the parallel loop.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/scalar_math.h"
#include "runtime/kernels/common.h"

#if defined(__AVX__)
#include <immintrin.h>
#endif

namespace gaf::runtime::ew {

// ---- types --------------------------------------------------------------------------------------

template <class S>
inline constexpr bool is_f16_v = std::is_same_v<S, Half> || std::is_same_v<S, BFloat16>;

// The type arithmetic happens in: fp32 for the 16-bit float storage types, the type itself otherwise.
template <class S>
using compute_t = std::conditional_t<is_f16_v<S>, float, S>;

// Type classes an op accepts (the ops' definitions, ops/scalar_math.h).
using ops::kTAll;
using ops::kTBool;
using ops::kTFloat;
using ops::kTFloating;
using ops::kTHalf;
using ops::kTInt;
using ops::kTNumeric;
using ops::kTSigned;
using ops::kTUnsigned;

template <class S>
constexpr unsigned type_class() {
  if constexpr (std::is_same_v<S, bool>)
    return kTBool;
  else if constexpr (is_f16_v<S>)
    return kTHalf;
  else if constexpr (std::is_floating_point_v<S>)
    return kTFloat;
  else if constexpr (std::is_signed_v<S>)
    return kTSigned;
  else
    return kTUnsigned;
}

// "float16, float, double, bfloat16" for an error message.
std::string type_class_names(unsigned classes);

[[noreturn]] void unsupported_dtype(const Node& node, const char* what, DType t, unsigned allowed);

// Calls f(S{}) with the C++ type of `t` when its class is in Allowed; UnsupportedError naming the node
// otherwise.
template <unsigned Allowed, class F>
void dispatch(DType t, const Node& node, const char* what, F&& f) {
  if (t == DType::String || t == DType::Undefined) unsupported_dtype(node, what, t, Allowed);
  visit_dtype(t, [&](auto tag) {
    using S = decltype(tag);
    if constexpr ((type_class<S>() & Allowed) != 0)
      f(tag);
    else
      unsupported_dtype(node, what, t, Allowed);
  });
}

// ---- op functors -------------------------------------------------------------------------------

// An op functor may declare `static constexpr bool kBoolOut = true` (comparisons, IsNaN): bool results.
template <class Op>
constexpr bool bool_out() {
  if constexpr (requires { Op::kBoolOut; })
    return Op::kBoolOut;
  else
    return false;
}

// Ops with attributes are constructed from the node (reading and validating them once); others by default.
template <class Op>
Op make_op(const Node& n) {
  if constexpr (std::is_constructible_v<Op, const Node&>)
    return Op(n);
  else
    return Op{};
}

// ---- scalar conversions -------------------------------------------------------------------------

inline float load_f(Half h) { return half_to_float(h.bits); }
inline float load_f(BFloat16 b) { return bf16_to_float(b.bits); }
template <class S>
inline compute_t<S> load_c(S v) {
  if constexpr (is_f16_v<S>)
    return load_f(v);
  else
    return v;
}
template <class S>
inline S store_c(compute_t<S> v) {
  if constexpr (std::is_same_v<S, Half>)
    return Half{float_to_half(v)};
  else if constexpr (std::is_same_v<S, BFloat16>)
    return BFloat16{float_to_bf16(v)};
  else
    return v;
}

using ops::saturate_cast;  // floating value -> integer, saturating, NaN -> 0

// ---- block conversions (vectorised; defined in elementwise_util.cc) -----------------------------

void to_float(const Half* src, float* dst, int64_t n);
void to_float(const BFloat16* src, float* dst, int64_t n);
void from_float(const float* src, Half* dst, int64_t n);
void from_float(const float* src, BFloat16* dst, int64_t n);

// Converts n elements read with `stride` (0: one value repeated, 1: contiguous, else a gather).
template <class S>
inline void to_float_strided(const S* src, int64_t stride, float* dst, int64_t n) {
  if (stride == 1) {
    to_float(src, dst, n);
  } else if (stride == 0) {
    float v = load_f(src[0]);
    for (int64_t i = 0; i < n; ++i) dst[i] = v;
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = load_f(src[i * stride]);
  }
}

// Elements per block when 16-bit floats are widened to fp32 on the stack.
inline constexpr int64_t kBlock = 512;

// ---- integer arithmetic with defined overflow ---------------------------------------------------

// Integer arithmetic that wraps instead of overflowing (ops/scalar_math.h).
using ops::add_wrap;
using ops::mul_wrap;
using ops::neg_wrap;
using ops::sub_wrap;
using ops::wrap_t;

// A data-dependent fault seen inside a parallel loop (integer division by zero); checked after the loop.
struct ErrorFlag {
  std::atomic<bool> set{false};
  void raise() { set.store(true, std::memory_order_relaxed); }
};

// Elementwise loops write out[i] after reading only index i (or broadcast elements), and the output is either
// a fresh buffer or exactly an input (in-place folds): the compiler's assumed loop-carried dependence does
// not exist, so its runtime overlap check (which rejects the in-place case) is skipped.
#define GAF_EW_IVDEP _Pragma("GCC ivdep")

// ---- SIMD square root ---------------------------------------------------------------------------

// out[i] = sqrt(in[i]). std::sqrt sets errno for negative input (-fmath-errno), which keeps a loop over it
// scalar with a libm call per negative element; the SIMD instruction gives IEEE results (NaN for x < 0)
// directly. 256-bit: the loop is memory bound anyway, and GCC 12's 512-bit sqrt intrinsics trip
// -Wmaybe-uninitialized.
template <class C>
inline void sqrt_range(const C* in, C* out, int64_t n) {
  int64_t i = 0;
#if defined(__AVX__)
  if constexpr (std::is_same_v<C, float>) {
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_sqrt_ps(_mm256_loadu_ps(in + i)));
  } else {
    for (; i + 4 <= n; i += 4) _mm256_storeu_pd(out + i, _mm256_sqrt_pd(_mm256_loadu_pd(in + i)));
  }
#endif
  for (; i < n; ++i) out[i] = std::sqrt(in[i]);
}

// ---- unary --------------------------------------------------------------------------------------

// Grain for parallel loops from an op's cost per element: ~32K cheap elements per chunk, fewer for costly
// ops.
inline int64_t grain_for(double cost) {
  return std::clamp<int64_t>(int64_t(32768 / std::max(cost, 1.0)), 1024, 32768);
}

// out[i] = op(in[i]) over [0, n). S and SO are storage types; op sees and returns compute types. An op may
// provide `range(const C* in, C* out, n)` for a whole contiguous run (explicit SIMD where the compiler
// cannot). Ops are taken by value: a local copy cannot alias the output, so attributes stay in registers.
template <class S, class SO, class Op>
inline void unary_range(const S* in, SO* out, int64_t n, const Op op) {
  if constexpr (!is_f16_v<S> && !is_f16_v<SO>) {
    if constexpr (requires { op.range(in, out, n); }) {
      op.range(in, out, n);
    } else {
      GAF_EW_IVDEP
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<SO>(op(in[i]));
    }
  } else {
    alignas(64) compute_t<S> a[kBlock];
    alignas(64) compute_t<SO> r[kBlock];
    for (int64_t b = 0; b < n; b += kBlock) {
      int64_t m = std::min(kBlock, n - b);
      const compute_t<S>* pa;
      if constexpr (is_f16_v<S>) {
        to_float(in + b, a, m);
        pa = a;
      } else {
        pa = in + b;
      }
      if constexpr (is_f16_v<SO>) {
        if constexpr (requires { op.range(pa, r, m); })
          op.range(pa, r, m);
        else
          for (int64_t i = 0; i < m; ++i) r[i] = static_cast<compute_t<SO>>(op(pa[i]));
        from_float(r, out + b, m);
      } else {
        GAF_EW_IVDEP
        for (int64_t i = 0; i < m; ++i) out[b + i] = static_cast<SO>(op(pa[i]));
      }
    }
  }
}

template <class S, class SO, class Op>
void unary_map(const S* in, SO* out, int64_t n, const Op& op, int64_t grain) {
  parallel_for(n, grain, [&](int64_t b, int64_t e) { unary_range(in + b, out + b, e - b, op); });
}

// ---- broadcasting -------------------------------------------------------------------------------

template <size_t N>
struct BroadcastPlan {
  std::vector<int64_t> dims;                    // coalesced output dims
  std::array<std::vector<int64_t>, N> strides;  // element strides of each operand over `dims`
  int64_t numel = 1;
};

// Reads operands of dims ins[k] in the (already broadcast) `out` shape; merges what can be merged.
template <size_t N>
BroadcastPlan<N> plan_broadcast(const std::vector<int64_t>& out,
                                const std::array<const std::vector<int64_t>*, N>& ins) {
  std::array<std::vector<int64_t>, N> full;
  for (size_t k = 0; k < N; ++k) full[k] = broadcast_strides(*ins[k], out);
  BroadcastPlan<N> p;
  for (size_t d = 0; d < out.size(); ++d) {
    p.numel *= out[d];
    if (out[d] == 1) continue;
    bool merge = !p.dims.empty();
    for (size_t k = 0; k < N && merge; ++k) merge = p.strides[k].back() == full[k][d] * out[d];
    if (merge) {
      p.dims.back() *= out[d];
      for (size_t k = 0; k < N; ++k) p.strides[k].back() = full[k][d];
    } else {
      p.dims.push_back(out[d]);
      for (size_t k = 0; k < N; ++k) p.strides[k].push_back(full[k][d]);
    }
  }
  return p;
}

// Runs row(out_offset, in_offsets, run_length, inner_strides) over the plan's output, in parallel chunks.
template <size_t N, class Row>
void broadcast_run(const BroadcastPlan<N>& p, int64_t grain, Row&& row) {
  if (p.numel == 0) return;
  parallel_for(p.numel, grain, [&](int64_t begin, int64_t end) {
    strided_walk(p.dims, p.strides, begin, end,
                 [&](int64_t pos, const std::array<int64_t, N>& offs, int64_t run,
                     const std::array<int64_t, N>& inner) { row(pos, offs, run, inner); });
  });
}

// o[i] = op(a[i*sa], b[i*sb]) on compute types, with the common stride patterns specialised; an op with a
// `bool row(a, sa, b, sb, o, n)` computes the rows it returns true for itself.
template <class A, class B, class O, class Op>
inline void binary_row_native(const A* a, int64_t sa, const B* b, int64_t sb, O* o, int64_t n, const Op op) {
  if constexpr (requires { op.row(a, sa, b, sb, o, n); }) {  // the op's own form of some rows (Pow's vector)
    if (op.row(a, sa, b, sb, o, n)) return;
  }
  if (sa == 1 && sb == 1) {
    GAF_EW_IVDEP
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<O>(op(a[i], b[i]));
  } else if (sa == 0 && sb == 1) {
    const A x = a[0];
    GAF_EW_IVDEP
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<O>(op(x, b[i]));
  } else if (sa == 1 && sb == 0) {
    const B y = b[0];
    GAF_EW_IVDEP
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<O>(op(a[i], y));
  } else if (sa == 0 && sb == 0) {
    const O r = static_cast<O>(op(a[0], b[0]));
    std::fill_n(o, n, r);
  } else {
    GAF_EW_IVDEP
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<O>(op(a[i * sa], b[i * sb]));
  }
}

// Storage-typed row: 16-bit float operands and results go through fp32 blocks.
template <class SA, class SB, class SO, class Op>
inline void binary_row(const SA* a, int64_t sa, const SB* b, int64_t sb, SO* o, int64_t n, const Op op) {
  if constexpr (!is_f16_v<SA> && !is_f16_v<SB> && !is_f16_v<SO>) {
    binary_row_native(a, sa, b, sb, o, n, op);
  } else {
    alignas(64) float ab[kBlock], bb[kBlock], rb[kBlock];
    for (int64_t s = 0; s < n; s += kBlock) {
      int64_t m = std::min(kBlock, n - s);
      const compute_t<SA>* pa;
      const compute_t<SB>* pb;
      int64_t spa = sa, spb = sb;
      if constexpr (is_f16_v<SA>) {
        if (sa == 0) {
          if (s == 0) ab[0] = load_f(a[0]);
        } else {
          to_float_strided(a + s * sa, sa, ab, m);
          spa = 1;
        }
        pa = ab;
      } else {
        pa = a + s * sa;
      }
      if constexpr (is_f16_v<SB>) {
        if (sb == 0) {
          if (s == 0) bb[0] = load_f(b[0]);
        } else {
          to_float_strided(b + s * sb, sb, bb, m);
          spb = 1;
        }
        pb = bb;
      } else {
        pb = b + s * sb;
      }
      if constexpr (is_f16_v<SO>) {
        binary_row_native(pa, spa, pb, spb, rb, m, op);
        from_float(rb, o + s, m);
      } else {
        binary_row_native(pa, spa, pb, spb, o + s, m, op);
      }
    }
  }
}

// Short innermost runs (e.g. [N, 4] + [4], [N, 3] + [N, 1]): calling the row kernel per run of a few elements
// costs more than the arithmetic, so rows are processed in groups of about kTile elements. Per group, each
// operand is either read in place (contiguous over the group, or one scalar), or copied into a contiguous
// tile: a row repeated for every row (kept across groups while the source row stays the same), or a gather.
inline constexpr int64_t kShortRun = 32;
inline constexpr int64_t kTile = 512;

// Points *p at the group's data of one operand (stride 1 or 0 over g * k elements), using `tile` as needed.
template <class T>
inline int64_t group_operand(const T* src, int64_t base, int64_t s0, int64_t s1, int64_t g, int64_t k,
                             T* tile, int64_t& tile_base, const T*& p) {
  if (s1 == 1 && s0 == k) {  // contiguous over the group
    p = src + base;
    return 1;
  }
  if (s0 == 0 && s1 == 0) {  // one value
    p = src + base;
    return 0;
  }
  if (s0 == 0) {  // the same row for every row: tile it once
    if (tile_base != base) {
      for (int64_t j = 0; j < k; ++j) tile[j] = src[base + j * s1];
      for (int64_t r = 1; r < kTile / k; ++r) std::copy(tile, tile + k, tile + r * k);
      tile_base = base;
    }
  } else {
    for (int64_t r = 0; r < g; ++r)
      for (int64_t j = 0; j < k; ++j) tile[r * k + j] = src[base + r * s0 + j * s1];
    tile_base = -1;
  }
  p = tile;
  return 1;
}

template <class SA, class SB, class SO, class Op>
void binary_short_runs(const SA* a, const SB* b, SO* out, const BroadcastPlan<2>& p, const Op& op,
                       int64_t grain) {
  const int rank = int(p.dims.size());
  const int64_t k = p.dims[rank - 1], m = p.dims[rank - 2];
  const int64_t sa0 = p.strides[0][rank - 2], sa1 = p.strides[0][rank - 1];
  const int64_t sb0 = p.strides[1][rank - 2], sb1 = p.strides[1][rank - 1];
  const int64_t rows_per_group = kTile / k;
  parallel_for(p.numel / k, std::max<int64_t>(1, grain / k), [&](int64_t row_begin, int64_t row_end) {
    SA ta[kTile];
    SB tb[kTile];
    int64_t ta_base = -1, tb_base = -1;
    for (int64_t row = row_begin; row < row_end;) {
      // Offsets of the row's outer index (all dims but the last two), then of the row itself.
      int64_t outer = row / m, i = row % m, oa = 0, ob = 0;
      for (int d = rank - 3; d >= 0; --d) {
        int64_t c = outer % p.dims[d];
        outer /= p.dims[d];
        oa += c * p.strides[0][d];
        ob += c * p.strides[1][d];
      }
      const int64_t g = std::min({rows_per_group, m - i, row_end - row});
      const SA* pa;
      const SB* pb;
      int64_t spa = group_operand(a, oa + i * sa0, sa0, sa1, g, k, ta, ta_base, pa);
      int64_t spb = group_operand(b, ob + i * sb0, sb0, sb1, g, k, tb, tb_base, pb);
      binary_row(pa, spa, pb, spb, out + row * k, g * k, op);
      row += g;
    }
  });
}

// out (dims = the broadcast shape, already allocated) = op(a, b) with a, b read in dims adims / bdims (which
// may differ from the tensors' own dims by leading or inserted 1s: legacy broadcasting and PRelu use that).
template <class SA, class SB, class SO, class Op>
void binary_broadcast(const SA* a, const std::vector<int64_t>& adims, const SB* b,
                      const std::vector<int64_t>& bdims, SO* out, const std::vector<int64_t>& odims,
                      const Op& op, int64_t grain) {
  auto plan = plan_broadcast<2>(odims, {&adims, &bdims});
  if (plan.dims.size() >= 2 && plan.dims.back() < kShortRun && plan.numel > 0) {
    binary_short_runs(a, b, out, plan, op, grain);
    return;
  }
  broadcast_run(
      plan, grain,
      [&](int64_t pos, const std::array<int64_t, 2>& offs, int64_t run, const std::array<int64_t, 2>& inner) {
        binary_row(a + offs[0], inner[0], b + offs[1], inner[1], out + pos, run, op);
      });
}

// ---- registration of the family's other files ---------------------------------------------------

void register_variadic_ops(KernelRegistry& r);  // elementwise_variadic.cc: Max, Min, Sum, Mean
void register_cast_ops(KernelRegistry& r);      // elementwise_cast.cc: Cast, CastLike
void register_where_op(KernelRegistry& r);      // elementwise_where.cc: Where

}  // namespace gaf::runtime::ew
