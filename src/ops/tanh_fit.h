// tanh as one rational function, the one definition behind the runtime's Tanh (fastmath::tanh, which the
// op-by-op kernels and Mish use) and the generated kernels' gaf_tanh (codegen's prelude embeds this file's text,
// as it does simd_vec.h and simd_math.h): the kernels call tanh_fit::eval, fastmath::tanh computes the same
// value in a shape GCC vectorises, so a fused Tanh gives the unfused one's value; on a vector it needs no exp
// and no branch (the exp form, 1 - 2 / (e^2x + 1) with a series near 0, cost the twelve-op transcendental chain
// about a quarter of its time).
//
// tanh(x) = c P(c^2) / Q(c^2) with c = x clamped to [-kLimit, kLimit]: a rational least-squares fit of tanh(c)/c
// in c^2 on [0, 81] (Loeb's iterated linear least squares on Chebyshev nodes, relative error 7.5e-9 before fp32
// rounding; fp32 evaluation brings it to <= 5 ulp). Evaluated in fp32 the fit rises above 1 near 8.6 (by 2 ulp)
// and is 1 - 2 ulp at 9, so the result is clamped to [-1, 1] and x to kLimit = 8.9, where the fit rounds to
// exactly 1: tanh(x) = +-1 exactly for |x| >= 8.9, 1 ulp from the rounded tanh up to 9.01, where tanh rounds to
// 1. The clamps keep NaN (the value clamped goes second to min/max); -0 stays -0.
#pragma once

namespace gaf::tanh_fit {

inline constexpr float kLimit = 8.9f;
inline constexpr int kNumP = 7, kNumQ = 4;
inline constexpr float kP[kNumP] = {-8.3611360686e-14f, 5.2257243998e-11f, -2.0111900452e-08f, 1.1125436335e-05f,
                                    3.1011441814e-03f,  1.3081478041e-01f, 9.9999999250e-01f};  // highest first
inline constexpr float kQ[kNumQ] = {2.5420805503e-04f, 2.4483933670e-02f, 4.6414804421e-01f, 1.0f};

// c P(c^2) / Q(c^2) for c in [-kLimit, kLimit] (or NaN), on a float or a vector of floats: fma(a, b, d) is
// a * b + d rounded once, splat(k) the constant k as a T.
template <class T, class Fma, class Splat>
inline T rational(T c, Fma fma, Splat splat) {
  const T t = c * c;
  T p = splat(kP[0]);
  // Unrolled before the vectoriser sees the caller's loop (a loop left inside stops it vectorising).
#pragma GCC unroll 8
  for (int i = 1; i < kNumP; ++i) p = fma(p, t, splat(kP[i]));
  T q = splat(kQ[0]);
#pragma GCC unroll 8
  for (int i = 1; i < kNumQ; ++i) q = fma(q, t, splat(kQ[i]));
  return c * p / q;
}

// tanh(x): the clamps around `rational`; lo_hi(v, lo, hi) is v clamped to [lo, hi] keeping a NaN v.
template <class T, class Fma, class Splat, class Clamp>
inline T eval(T x, Fma fma, Splat splat, Clamp lo_hi) {
  return lo_hi(rational(lo_hi(x, -kLimit, kLimit), fma, splat), -1.0f, 1.0f);
}

}  // namespace gaf::tanh_fit
