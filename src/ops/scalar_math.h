// Scalar arithmetic the op definitions' reference formulas use (ops/unary.h) and the kernels share: the
// element type classes an op accepts, integer arithmetic that wraps instead of overflowing, saturating float
// -> integer conversion, and the transcendentals on a compute type (fastmath for fp32, libm for double).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ops/fastmath.h"

namespace gaf::ops {

// Type classes an op accepts.
enum TypeClass : unsigned {
  kTFloat = 1,     // float, double
  kTHalf = 2,      // float16, bfloat16
  kTSigned = 4,    // int8..int64
  kTUnsigned = 8,  // uint8..uint64
  kTBool = 16,
};
inline constexpr unsigned kTFloating = kTFloat | kTHalf;
inline constexpr unsigned kTInt = kTSigned | kTUnsigned;
inline constexpr unsigned kTNumeric = kTFloating | kTInt;
inline constexpr unsigned kTAll = kTNumeric | kTBool;

// Floating value -> integer with saturation at the type's limits and NaN -> 0 (C++ leaves these undefined).
template <class I, class F>
inline I saturate_cast(F v) {
  constexpr F lo = F(std::numeric_limits<I>::min());
  constexpr F hi = F(std::numeric_limits<I>::max());  // rounds up to a power of two for wide types
  if (!(v == v)) return I(0);
  if (v <= lo) return std::numeric_limits<I>::min();
  if (v >= hi) return std::numeric_limits<I>::max();
  return static_cast<I>(v);
}

// Unsigned type wide enough that arithmetic on it cannot promote to int (so wrapping is defined).
template <class I>
using wrap_t = std::conditional_t<(sizeof(I) < sizeof(unsigned)), unsigned, std::make_unsigned_t<I>>;

template <class T>
inline T add_wrap(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
    return T(wrap_t<T>(a) + wrap_t<T>(b));
  else
    return a + b;
}
template <class T>
inline T sub_wrap(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
    return T(wrap_t<T>(a) - wrap_t<T>(b));
  else
    return a - b;
}
template <class T>
inline T mul_wrap(T a, T b) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
    return T(wrap_t<T>(a) * wrap_t<T>(b));
  else
    return a * b;
}
template <class T>
inline T neg_wrap(T a) {
  if constexpr (std::is_integral_v<T>)
    return T(wrap_t<T>(0) - wrap_t<T>(a));
  else
    return -a;
}

// ---- transcendentals on the compute type: fastmath for fp32, libm for double --------------------

inline float c_exp(float x) { return fastmath::exp(x); }
inline double c_exp(double x) { return std::exp(x); }
inline float c_expm1(float x) { return fastmath::expm1(x); }
inline double c_expm1(double x) { return std::expm1(x); }
inline float c_log(float x) { return fastmath::log(x); }
inline double c_log(double x) { return std::log(x); }
inline float c_tanh(float x) { return fastmath::tanh(x); }
inline double c_tanh(double x) { return std::tanh(x); }
inline float c_erf(float x) { return fastmath::erf(x); }
inline double c_erf(double x) { return std::erf(x); }
inline float c_sigmoid(float x) { return fastmath::sigmoid(x); }
inline double c_sigmoid(double x) {
  double e = std::exp(-std::fabs(x));
  double s = 1.0 / (1.0 + e);
  return x >= 0 ? s : (x < 0 ? e * s : x);
}
inline float c_softplus(float x) { return fastmath::softplus(x); }
// log(1 + e^x) without overflow: max(x, 0) + log1p(e^-|x|); NaN propagates through the first term.
inline double c_softplus(double x) { return (x < 0 ? 0.0 : x) + std::log1p(std::exp(-std::fabs(x))); }

// max(x, 0) and min(x, 0) that keep NaN and the sign of zero. The exp-based activations are written as
// pos_part(x) + alpha * expm1(neg_part(x)) (expm1(0) = 0) rather than `x < 0 ? alpha * expm1(x) : x`: GCC
// does not if-convert a conditional arm that does floating-point arithmetic (trapping math), which would
// leave the loop scalar and branchy; selecting between x and a constant vectorises.
template <class C>
inline C pos_part(C x) {
  return x < C(0) ? C(0) : x;
}
template <class C>
inline C neg_part(C x) {
  return x > C(0) ? C(0) : x;
}

}  // namespace gaf::ops
