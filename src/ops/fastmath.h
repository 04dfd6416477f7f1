// Branch-free fp32 implementations of the transcendental functions the hot activations need (exp, expm1,
// log, tanh, sigmoid, softplus, erf). Straight-line code with selects instead of branches, so that a plain
// loop over them auto-vectorises (AVX2 / AVX-512 with -march=native); libm's scalar calls do not.
//
// Accuracy, checked against double-precision libm over dense sweeps by the Exp/Log/Tanh/... kernel tests in
// tests/unit/runtime/elementwise_test.cc: exp, expm1, log within 1.5 ulp; sigmoid, softplus, erf within 3
// ulp; tanh within 5 ulp (3e-7 relative). Special values follow libm: NaN propagates, overflow gives inf,
// underflow gives (sub)normals or 0.
//
// Constants: a Cody-Waite split of ln 2; Taylor coefficients for the reduced exp/expm1 and the atanh series
// of log. The others are fits made with mpmath: erf(x)/x in x^2 on [0, 1] and erf(x) in (x - 2.5) / 1.5 on
// [1, 4] (least-squares Chebyshev, mpmath.chebyfit), atanh(s)/s in s^2 on [0, 1/9] (chebyfit); tanh's
// rational fit is in tanh_fit.h.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "ops/tanh_fit.h"

namespace gaf::fastmath {

// Fused multiply-add when the target has it (one rounding, vectorisable); a*b+c otherwise.
inline float fmadd(float a, float b, float c) {
#ifdef __FMA__
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

inline float select(bool c, float a, float b) { return c ? a : b; }

// Same as select, through an integer mask. Used where a plain select let GCC sink the computation of the
// other value into a branch (it may not speculate trapping fp math), which stopped the loop vectorising.
inline float blend(bool c, float a, float b) {
  uint32_t m = 0u - uint32_t(c);
  return std::bit_cast<float>((std::bit_cast<uint32_t>(a) & m) | (std::bit_cast<uint32_t>(b) & ~m));
}

// 2^k for k in [-126, 127], built from the exponent bits.
inline float pow2i(int32_t k) { return std::bit_cast<float>(uint32_t(k + 127) << 23); }

// Reduces x = k ln2 + r with |r| <= ln2/2 and returns expm1(r) (Taylor to r^8: error < 2e-10); k through `k`.
// x must be finite and within [-104, 89].
inline float expm1_reduced(float x, int32_t& k) {
  const float kLog2e = 1.44269504088896341f;
  const float kLn2Hi = 0.693359375f;     // exact in 9 bits: k * kLn2Hi is exact for |k| < 2^15
  const float kLn2Lo = -2.12194440e-4f;  // ln2 - kLn2Hi
  const float kRound = 12582912.0f;      // 1.5 * 2^23: adding it rounds to an integer
  float n = (fmadd(x, kLog2e, kRound)) - kRound;
  k = int32_t(n);
  float r = fmadd(-n, kLn2Hi, x);
  r = fmadd(-n, kLn2Lo, r);
  float p = 1.0f / 40320;
  p = fmadd(p, r, 1.0f / 5040);
  p = fmadd(p, r, 1.0f / 720);
  p = fmadd(p, r, 1.0f / 120);
  p = fmadd(p, r, 1.0f / 24);
  p = fmadd(p, r, 1.0f / 6);
  p = fmadd(p, r, 0.5f);
  return fmadd(p * r, r, r);  // r + r^2 (1/2 + r/6 + ...)
}

inline float exp(float x) {
  // Clamp into the range where the two-step scaling below is exact; NaN takes a safe path and is restored.
  float xc = select(x < -104.0f, -104.0f, select(x > 89.0f, 89.0f, x));
  xc = select(xc == xc, xc, 0.0f);
  int32_t k;
  float p = expm1_reduced(xc, k);
  // 2^k in two factors so that results in the subnormal range and overflow to inf round once.
  int32_t k1 = k >> 1, k2 = k - k1;
  float y = ((1.0f + p) * pow2i(k1)) * pow2i(k2);
  return select(x == x, y, x);
}

inline float expm1(float x) {
  float xc = select(x < -104.0f, -104.0f, select(x > 89.0f, 89.0f, x));
  xc = select(xc == xc, xc, 0.0f);
  int32_t k;
  float p = expm1_reduced(xc, k);
  int32_t k1 = k >> 1, k2 = k - k1;
  float s1 = pow2i(k1), s2 = pow2i(k2);
  // expm1(x) = 2^k p + (2^k - 1); for k = 0 this is exactly p (no cancellation for small x).
  float s = s1 * s2;  // inf for k > 127: that branch is replaced below
  float y = fmadd(p * s1, s2, s - 1.0f);
  // Beyond k = 24 the -1 is below half an ulp; this form also overflows to inf only when expm1 does.
  y = select(k > 24, ((1.0f + p) * s1) * s2 - 1.0f, y);
  y = select(x < -104.0f, -1.0f, y);
  return select(x == x, y, x);
}

// Natural log: x = 2^k m with m in [sqrt(1/2), sqrt(2)), f = m - 1 (exact), s = f / (2 + f),
// log(1 + f) = f - (f^2/2 - s (f^2/2 + R(s^2))) with R the atanh series (fdlibm's arrangement: the leading
// term f is exact, so the error stays near 1 ulp).
inline float log(float x) {
  // Subnormals: scale by 2^23 first so the exponent extraction sees a normal number.
  bool sub = x < 1.17549435e-38f;
  float xs = select(sub, x * 8388608.0f, x);
  uint32_t bits = std::bit_cast<uint32_t>(xs);
  // Offset so that m lands in [sqrt(1/2), sqrt(2)): 0x3f3504f3 is the bit pattern of sqrt(1/2).
  uint32_t t = bits - 0x3f3504f3u;
  int32_t k = (int32_t(t) >> 23) - (sub ? 23 : 0);
  float m = std::bit_cast<float>((t & 0x007fffffu) + 0x3f3504f3u);
  float f = m - 1.0f;
  float s = f / (2.0f + f);
  float z = s * s;
  float r = 2.0f / 13;
  r = fmadd(r, z, 2.0f / 11);
  r = fmadd(r, z, 2.0f / 9);
  r = fmadd(r, z, 2.0f / 7);
  r = fmadd(r, z, 2.0f / 5);
  r = fmadd(r, z, 2.0f / 3);
  r *= z;
  float hfsq = 0.5f * f * f;
  const float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  float kf = float(k);
  float y = fmadd(kf, kLn2Hi, -((hfsq - fmadd(s, hfsq + r, kf * kLn2Lo)) - f));
  // Special values: log(0) = -inf, log(<0) = NaN, log(inf) = inf, NaN stays NaN.
  y = blend(x == 0.0f, -INFINITY, y);
  y = blend(x < 0.0f, NAN, y);
  y = blend(x == INFINITY, INFINITY, y);
  return blend(x == x, y, x);
}

// tanh by tanh_fit.h's rational function (<= 5 ulp), the value the generated kernels compute (tanh_fit::eval),
// in the form GCC vectorises at memory speed: on |x|, with the sign put back. (eval's nested clamps written as ?:
// vectorised here into masked paths that measured 2.4x slower.) About twice as fast as the expm1 form e/(e+2),
// which is what keeps Tanh memory-bound.
inline float tanh(float x) {
  const float a = std::fabs(x);
  const float c = select(a > tanh_fit::kLimit, tanh_fit::kLimit, a);
  float y = tanh_fit::rational(
      c, [](float p, float t, float k) { return fmadd(p, t, k); }, [](float k) { return k; });
  y = select(y > 1.0f, 1.0f, y);
  y = std::copysign(y, x);
  return select(x == x, y, x);
}

// 1/(1+e^-x) for x >= 0, e^x/(1+e^x) for x < 0: no cancellation, correct tails.
inline float sigmoid(float x) {
  float e = exp(-std::fabs(x));
  float s = 1.0f / (1.0f + e);
  return select(x >= 0.0f, s, select(x < 0.0f, e * s, x));
}

// log(1 + e^x) = max(x, 0) + log1p(e) with e = e^-|x| in (0, 1]; log1p(e) = 2 atanh(s), s = e / (2 + e) in
// (0, 1/3], needs no range reduction (the general log1p would double the dependency chain).
inline float softplus(float x) {
  float e = exp(-std::fabs(x));
  float s = e / (2.0f + e);
  float z = s * s;
  float p = 1.2196954042e-01f;
  p = fmadd(p, z, 1.0699280253e-01f);
  p = fmadd(p, z, 1.4310103704e-01f);
  p = fmadd(p, z, 1.9999355623e-01f);
  p = fmadd(p, z, 3.3333339513e-01f);
  float s2 = 2.0f * s;
  float l = fmadd(s2, p * z, s2);        // 2s (1 + z P(z)): the leading term rounds once
  return select(x < 0.0f, 0.0f, x) + l;  // NaN propagates through x
}

inline float erf(float x) {
  float a = std::fabs(x);
  // |x| <= 1: erf(x) = x P(x^2).
  float t = a * a;
  float p = 7.875875063e-05f;
  p = fmadd(p, t, -8.016864287e-04f);
  p = fmadd(p, t, 5.189087423e-03f);
  p = fmadd(p, t, -2.685421201e-02f);
  p = fmadd(p, t, 1.128359472e-01f);
  p = fmadd(p, t, -3.761262667e-01f);
  p = fmadd(p, t, 1.128379166e+00f);
  float small = a * p;
  // 1 < |x| < 4: a degree-14 polynomial in u = (|x| - 2.5) / 1.5 (error 1e-8); erf rounds to 1 beyond 4.
  float ac = select(a > 4.0f, 4.0f, a);
  float u = (ac - 2.5f) * (1.0f / 1.5f);
  float q = 2.5800609880e-04f;
  q = fmadd(q, u, 9.4972383513e-05f);
  q = fmadd(q, u, -2.0327987745e-03f);
  q = fmadd(q, u, 1.5429110748e-03f);
  q = fmadd(q, u, 4.6670288067e-03f);
  q = fmadd(q, u, -1.0411845236e-02f);
  q = fmadd(q, u, 6.6378641387e-03f);
  q = fmadd(q, u, 9.5793056336e-03f);
  q = fmadd(q, u, -3.1868450733e-02f);
  q = fmadd(q, u, 4.6389583733e-02f);
  q = fmadd(q, u, -4.3651478573e-02f);
  q = fmadd(q, u, 2.8187406266e-02f);
  q = fmadd(q, u, -1.2252830410e-02f);
  q = fmadd(q, u, 3.2672703553e-03f);
  q = fmadd(q, u, 9.9959304798e-01f);
  float y = select(a <= 1.0f, small, select(a >= 4.0f, 1.0f, q));
  y = std::copysign(y, x);
  return select(x == x, y, x);
}

}  // namespace gaf::fastmath
