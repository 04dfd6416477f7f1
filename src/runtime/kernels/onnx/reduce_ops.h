// The Reduce* operators as engine ops (see reduce_engine.h), and the entry points of the reduce family files.
//
// Accumulators: double for every floating type (16-bit floats are read as fp32); uint64 for integers, so sums
// and products wrap modulo 2^64 without undefined behaviour and the final cast to the element type wraps the
// way numpy's does. Max/Min keep the element's compute type and propagate NaN.
#pragma once

#include "runtime/kernels/onnx/reduce_engine.h"

namespace gaf::runtime::rn {

enum class ReduceKind { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

template <class C>
using acc_t = std::conditional_t<std::is_floating_point_v<C>, double, uint64_t>;

template <class C>
inline acc_t<C> widen(C x) {
  if constexpr (std::is_floating_point_v<C>)
    return double(x);
  else if constexpr (std::is_signed_v<C>)
    return uint64_t(int64_t(x));
  else
    return uint64_t(x);
}
// The accumulated value as a number: signed integers read their two's-complement accumulator back as signed.
template <class C>
inline auto acc_value(acc_t<C> s) {
  if constexpr (std::is_floating_point_v<C>)
    return s;
  else if constexpr (std::is_signed_v<C>)
    return int64_t(s);
  else
    return s;
}

template <class C>
struct SumOp {
  using S = acc_t<C>;
  static constexpr bool kShift = false;
  static S init() { return S(0); }
  static S step(S s, C x, C) { return s + widen(x); }
  static S merge(S a, S b) { return a + b; }
  static auto finish(S s, int64_t, C) { return acc_value<C>(s); }
};

template <class C>
struct MeanOp : SumOp<C> {
  static double finish(acc_t<C> s, int64_t n, C) { return double(acc_value<C>(s)) / double(n); }
};

template <class C>
struct SumSquareOp : SumOp<C> {
  static acc_t<C> step(acc_t<C> s, C x, C) { return s + widen(x) * widen(x); }
};

template <class C>
struct L1Op : SumOp<C> {
  static acc_t<C> step(acc_t<C> s, C x, C) {
    if constexpr (std::is_floating_point_v<C>)
      return s + std::abs(double(x));
    else if constexpr (std::is_signed_v<C>)
      return s + (x < 0 ? uint64_t(0) - widen(x) : widen(x));
    else
      return s + widen(x);
  }
};

template <class C>
struct L2Op : SumSquareOp<C> {
  // Integer sums of squares are non-negative: read the accumulator as unsigned.
  static double finish(acc_t<C> s, int64_t, C) { return std::sqrt(double(s)); }
};

template <class C>
struct LogSumOp : SumOp<C> {
  static double finish(acc_t<C> s, int64_t, C) { return std::log(double(acc_value<C>(s))); }
};

template <class C>
struct ProdOp : SumOp<C> {
  static acc_t<C> init() { return acc_t<C>(1); }
  static acc_t<C> step(acc_t<C> s, C x, C) { return s * widen(x); }
  static acc_t<C> merge(acc_t<C> a, acc_t<C> b) { return a * b; }
};

// log(sum(exp(x - shift))) + shift, with shift the maximum of the reduced values (computed first), so every
// exp argument is <= 0. An infinite maximum is the answer itself (all -inf, or a +inf present); the sum, NaN
// then, is not used.
template <class C>
struct LogSumExpOp {
  using S = double;
  static constexpr bool kShift = true;
  static S init() { return 0.0; }
  static S step(S s, C x, C sh) {
    if constexpr (std::is_floating_point_v<C>)
      return s + double(exp_shifted(x, sh));
    else
      return s + std::exp(double(x) - double(sh));
  }
  static S merge(S a, S b) { return a + b; }
  static double finish(S s, int64_t, C sh) {
    if constexpr (std::is_floating_point_v<C>)
      if (std::isinf(sh)) return double(sh);
    return std::log(s) + double(sh);
  }
};

template <class C>
inline constexpr C lowest_or_neg_inf() {
  if constexpr (std::is_floating_point_v<C>)
    return -std::numeric_limits<C>::infinity();
  else
    return std::numeric_limits<C>::lowest();
}
template <class C>
inline constexpr C max_or_inf() {
  if constexpr (std::is_floating_point_v<C>)
    return std::numeric_limits<C>::infinity();
  else
    return std::numeric_limits<C>::max();
}

template <class C>
struct MaxOp {
  using S = C;
  static constexpr bool kShift = false;
  static S init() { return lowest_or_neg_inf<C>(); }
  static S step(S s, C x, C) { return (x > s || is_nan(x)) ? x : s; }
  static S merge(S a, S b) { return step(a, b, C(0)); }
  static S finish(S s, int64_t, C) { return s; }
};

template <class C>
struct MinOp {
  using S = C;
  static constexpr bool kShift = false;
  static S init() { return max_or_inf<C>(); }
  static S step(S s, C x, C) { return (x < s || is_nan(x)) ? x : s; }
  static S merge(S a, S b) { return step(a, b, C(0)); }
  static S finish(S s, int64_t, C) { return s; }
};

// Sum, Mean, SumSquare, L1, L2, LogSum (reduce_sum.cc).
void run_sum_family(const Node& node, ReduceKind kind, const ReduceGeometry& g, const Tensor& x, Tensor& y);
// Max, Min, Prod, LogSumExp (reduce_extrema.cc).
void run_extrema_family(const Node& node, ReduceKind kind, const ReduceGeometry& g, const Tensor& x,
                        Tensor& y);

// ArgMax, ArgMin (reduce_arg.cc).
void register_arg_ops(KernelRegistry& r);

}  // namespace gaf::runtime::rn
