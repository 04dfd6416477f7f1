// Vector math on the fp32 lanes of a simd::vf (simd_vec.h: 16 with AVX-512, 8 with AVX2), shared by the hand-
// written kernels (attention's softmax, the swish pass after convolutions, the convolution epilogues'
// activations) and, as text, by every generated CPU kernel (codegen's prelude embeds this file and simd_vec.h).
//
// exp2v: 2^round(t) by simd::scale2 (gradual underflow towards 0, NaN propagates) times a degree-5
// polynomial for 2^f, f = t - round(t) in [-1/2, 1/2]: a minimax fit of 2^f's relative error (9e-8 in exact
// arithmetic; measured in fp32 1.7e-7 at most over t in [-126, 127), tests/unit/runtime/simd_exp_test.cc), one
// FMA cheaper than Cephes' degree-6 exp2f (7.9e-8); the attention bench case ran about 1% faster with it.
// exp(x) as exp2v(x * log2(e)) adds a relative error of about |t| 6e-8 (the rounding of that product); expv is
// the accurate exp (1-2 ulp) for where that matters.
#pragma once

#include <cmath>
#include <cstdint>

namespace gaf::simd {

// x * sigmoid(alpha x) with swish16's limits, for scalar tails and reference paths: 0 once exp(-alpha x) passes
// 2^126.
inline float swish(float x, float alpha) {
  const double t = -double(alpha) * double(x);
  return t > 126.0 * 0.69314718055994531 ? 0.f : float(double(x) / (1.0 + std::exp(t)));
}

}  // namespace gaf::simd

#include "ops/simd_vec.h"
#include "ops/tanh_fit.h"

#if defined(GAF_SIMD)
namespace gaf::simd {

// e^x to 1-2 ulp, Cephes' expf on the vector (the generated kernels' gaf_exp, ops' fastmath::exp on a lane): x =
// n ln2 + r with n = round(x log2(e)) and ln2 in two parts, e^r = 1 + r + r^2 P(r) (degree 5), times 2^n by
// simd::scale2. x is clamped to [-104, 89] first, which keeps NaN: below -103.97 the result is 0, above 88.73
// it overflows to inf, in between gradual underflow as scale2 gives it.
inline vf expv(vf x) {
  const vf xc = clamp(x, set1(-104.f), set1(89.f));
  const vf n = round_nearest(mul(xc, set1(1.44269504088896341f)));
  const vf r = fmadd(n, set1(2.12194440e-4f), fmadd(n, set1(-0.693359375f), xc));
  vf p = fmadd(set1(1.9875691500e-4f), r, set1(1.3981999507e-3f));
  p = fmadd(p, r, set1(8.3334519073e-3f));
  p = fmadd(p, r, set1(4.1665795894e-2f));
  p = fmadd(p, r, set1(1.6666665459e-1f));
  p = fmadd(p, r, set1(5.0000001201e-1f));
  return scale2(add(fmadd(p, mul(r, r), r), set1(1.f)), n);
}

// Callers clamp t from below (t >= -150 flushes to 0 anyway) and from above where overflow matters (t < 128).
inline vf exp2v(vf t) {
  const vf k = round_nearest(t);
  const vf f = sub(t, k);
  vf p = fmadd(set1(1.3264698770330367e-3f), f, set1(9.671508817451695e-3f));
  p = fmadd(p, f, set1(5.5507337764833714e-2f));
  p = fmadd(p, f, set1(2.4022242145351372e-1f));
  p = fmadd(p, f, set1(6.931469776119832e-1f));
  p = fmadd(p, f, set1(1.0f));
  return scale2(p, k);  // p * 2^k
}

// 1 / (1 + 2^t) with t clamped to [-126, 126] (no overflow, and the reciprocal of a normal number), by
// simd::recip; NaN stays NaN. The logistic behind swishv, sigmoidv and gelu_tanhv.
inline vf inv_one_plus_exp2(vf t) { return recip(add(exp2v(min(set1(126.f), max(set1(-126.f), t))), set1(1.f))); }

// x * sigmoid(a x) = x / (1 + 2^t), t = -a x log2(e) clamped to [-126, 126], 2^t by exp2v, the reciprocal by
// simd::recip; neg_a_log2e = -a log2(e). Where t > 126 the result is below 2^-126 |x| and comes out 0 (-inf
// too). Measured against double over |x| <= 20 (AVX-512): max relative error 1.1e-6 (alpha 1) and 2.6e-6
// (alpha 1.5), max absolute error 1.5e-6; NaN stays NaN.
inline vf swishv(vf x, vf neg_a_log2e) {
  const vf tx = mul(x, neg_a_log2e);
  const lanes_t tiny = gt(tx, set1(126.f));  // |result| < 2^-126 |x|: 0
  return select(tiny, zero(), mul(x, inv_one_plus_exp2(tx)));
}

// sigmoid(x) within 3 ulp over every float, fastmath::sigmoid on the vector: e = e^-|x| by expv (never
// overflows; subnormal and then 0 far out), s = 1 / (1 + e) divided (recip's Newton step added an ulp), s for
// x >= 0 and e s below (no cancellation, the tail down to the subnormals); NaN stays NaN. The op-by-op Sigmoid.
// (sigmoidv below is cheaper but 2^t's argument rounding costs |t| 6e-8 relative: 3.5e-6 at x = -40, past what
// a fused kernel may differ from the op by op; the generated kernels keep 1 / (1 + gaf_exp(-x)).)
inline vf logisticv(vf x) {
  const vf e = expv(sub(zero(), abs(x)));
  const vf s = div(set1(1.f), add(e, set1(1.f)));
  return select(lt(x, zero()), mul(e, s), s);
}

// sigmoid(x) = 1 / (1 + 2^t), t = -x log2(e) clamped to [-126, 126] (swishv's reciprocal, without the x): 0 <
// sigmoid(x) <= 1, about 2^-126 for x below -87; NaN stays NaN.
inline vf sigmoidv(vf x) { return inv_one_plus_exp2(mul(x, set1(-1.4426950408889634f))); }

// GELU, x Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), with Phi(-|x|) = erfc(|x| / sqrt 2) / 2 from Abramowitz and
// Stegun 7.1.26: erfc(z) = t P(t) exp(-z^2), t = 1 / (1 + p z), absolute error below 1.5e-7 (what oneDNN's
// gelu_erf uses too); the erfc form needs no 1 + erf cancellation for negative x. Measured against double over
// |x| <= 12: see simd_exp_test.cc. NaN stays NaN; z is capped at 16 (Phi(-|x|) is 0 in fp32 long before), so
// +inf gives +inf (uncapped, the reciprocal's Newton step made 0 * inf = NaN of it).
inline vf gelu_erfv(vf x) {
  const vf z = min(set1(16.f), mul(abs(x), set1(0.70710678118654752f)));
  const vf t = recip(fmadd(z, set1(0.3275911f), set1(1.f)));
  vf p = fmadd(set1(1.061405429f), t, set1(-1.453152027f));
  p = fmadd(p, t, set1(1.421413741f));
  p = fmadd(p, t, set1(-0.284496736f));
  p = fmadd(p, t, set1(0.254829592f));
  const vf e2 = max(set1(-150.f), mul(mul(z, z), set1(-1.4426950408889634f)));
  const vf q = mul(mul(mul(t, p), exp2v(e2)), set1(0.5f));  // Phi(-|x|)
  const vf phi = select(gt(x, zero()), sub(set1(1.f), q), q);  // x > 0: 1 - Phi(-x)
  return mul(x, phi);
}

// GELU's tanh form, 0.5 x (1 + tanh(u)) = x sigmoid(2 u), u = sqrt(2 / pi) (x + 0.044715 x^3): swishv's
// reciprocal of 1 + 2^t with t = -2 u log2(e) clamped to [-126, 126]; where t > 126 the result is below
// 2^-126 |x| and comes out 0 (-inf too), as the tanh form's 1 + tanh(u) rounds to 0 there.
inline vf gelu_tanhv(vf x) {
  const vf x3 = mul(mul(x, x), x);
  const vf u = mul(fmadd(x3, set1(0.044715f), x), set1(-2.f * 0.79788456080286536f * 1.4426950408889634f));
  return select(gt(u, set1(126.f)), zero(), mul(x, inv_one_plus_exp2(u)));
}

// x * clamp(x / 6 + 1/2, 0, 1), ONNX's HardSwish; the gate's min/max keep NaN out of it, so NaN * gate = NaN.
inline vf hard_swishv(vf x) {
  const vf gate = fmadd(x, set1(1.f / 6.f), set1(0.5f));
  return mul(x, min(max(gate, zero()), set1(1.f)));
}

// tanh(x): fastmath::tanh's value (tanh_fit's rational function and clamps; min/max keep a NaN x).
inline vf tanhv(vf x) {
  return tanh_fit::eval(
      x, [](vf a, vf b, vf c) { return fmadd(a, b, c); }, [](float k) { return set1(k); },
      [](vf v, float lo, float hi) { return min(set1(hi), max(set1(lo), v)); });
}

// log(1 + e^x), fastmath::softplus on the vector: max(x, 0) + 2 atanh(s), s = e / (2 + e), e = e^-|x| by expv
// (fastmath::exp's algorithm); NaN stays NaN.
inline vf softplusv(vf x) {
  const vf e = expv(sub(zero(), abs(x)));
  const vf s = div(e, add(e, set1(2.f)));
  const vf z = mul(s, s);
  vf p = fmadd(set1(1.2196954042e-01f), z, set1(1.0699280253e-01f));
  p = fmadd(p, z, set1(1.4310103704e-01f));
  p = fmadd(p, z, set1(1.9999355623e-01f));
  p = fmadd(p, z, set1(3.3333339513e-01f));
  const vf s2 = add(s, s);
  return add(select(lt(x, zero()), zero(), x), fmadd(s2, mul(p, z), s2));
}

// Mish, x tanh(softplus(x)), in closed form: tanh(log(1 + n)) = n (n + 2) / (n (n + 2) + 2) with n = e^x by
// expv: no cancellation (every term positive), within 5 ulp of the double-precision definition over
// [-87, 30] (simd_exp_test.cc; 4.4 measured), about half the operations of tanhv(softplusv(x)). From x = 20 on the ratio is 1
// in fp32 (it leaves 1 by 2 e^-2x) and the result is x (no inf / inf). NaN stays NaN (min keeps its second
// operand); -inf gives NaN, as -inf * tanh(softplus(-inf)) = -inf * 0 does.
inline vf mishv(vf x) {
  const vf n = expv(min(set1(20.f), x));
  const vf q = mul(n, add(n, set1(2.f)));
  return select(gt(x, set1(20.f)), x, mul(x, div(q, add(q, set1(2.f)))));
}

// The lanes of a vf as 32-bit integers, a GCC vector type on the same register (integer steps simd_vec.h does
// not name).
typedef int32_t vi32 __attribute__((vector_size(sizeof(vf))));
typedef uint32_t vu32 __attribute__((vector_size(sizeof(vf))));

// e^x - 1, fastmath::expm1 on the vector (the same steps and constants, so the same value): x = k ln2 + r with
// |r| <= ln2/2 (k by the 1.5 2^23 rounding, ln2 in two parts), expm1(r) by Taylor to r^8, then 2^k p + (2^k - 1)
// (no cancellation for small x; k > 24: (1 + p) 2^k - 1), the powers of two by scale2. x below -104 gives -1,
// above 89 inf; NaN stays NaN.
inline vf expm1v(vf x) {
  const vf xc = select(nle(x, x), zero(), clamp(x, set1(-104.f), set1(89.f)));
  const vf kRound = set1(12582912.0f);
  const vf k = sub(fmadd(xc, set1(1.44269504088896341f), kRound), kRound);
  vf r = fnmadd(k, set1(0.693359375f), xc);
  r = fnmadd(k, set1(-2.12194440e-4f), r);
  vf p = fmadd(set1(1.0f / 40320), r, set1(1.0f / 5040));
  p = fmadd(p, r, set1(1.0f / 720));
  p = fmadd(p, r, set1(1.0f / 120));
  p = fmadd(p, r, set1(1.0f / 24));
  p = fmadd(p, r, set1(1.0f / 6));
  p = fmadd(p, r, set1(0.5f));
  p = fmadd(mul(p, r), r, r);
  // fastmath's two factors of 2^k only keep its scaling exact; scale2 is exact in one step.
  vf y = add(scale2(p, k), sub(scale2(set1(1.f), k), set1(1.f)));
  y = select(gt(k, set1(24.f)), sub(scale2(add(set1(1.f), p), k), set1(1.f)), y);
  y = select(lt(x, set1(-104.f)), set1(-1.f), y);
  return select(nle(x, x), x, y);
}

// Natural log, fastmath::log on the vector (the same steps and constants): x = 2^k m, m in [sqrt(1/2), sqrt(2))
// (subnormals scaled by 2^23 first), f = m - 1, s = f / (2 + f), log(1 + f) = f - (f^2/2 - s (f^2/2 + R(s^2)))
// (fdlibm's arrangement). log(0) = -inf, log(< 0) = NaN, log(inf) = inf, NaN stays NaN.
inline vf logv(vf x) {
  const lanes_t tiny = lt(x, set1(1.17549435e-38f));
  const vf xs = select(tiny, mul(x, set1(8388608.0f)), x);
  const vu32 t = (vu32)xs - 0x3f3504f3u;
  vf kf = __builtin_convertvector((vi32)t >> 23, vf);
  kf = select(tiny, sub(kf, set1(23.f)), kf);
  const vf m = (vf)((t & 0x007fffffu) + 0x3f3504f3u);
  const vf f = sub(m, set1(1.f));
  const vf s = div(f, add(set1(2.f), f));
  const vf z = mul(s, s);
  vf r = fmadd(set1(2.0f / 13), z, set1(2.0f / 11));
  r = fmadd(r, z, set1(2.0f / 9));
  r = fmadd(r, z, set1(2.0f / 7));
  r = fmadd(r, z, set1(2.0f / 5));
  r = fmadd(r, z, set1(2.0f / 3));
  r = mul(r, z);
  const vf hfsq = mul(mul(set1(0.5f), f), f);
  vf y = fmadd(kf, set1(0.693359375f), sub(f, sub(hfsq, fmadd(s, add(hfsq, r), mul(kf, set1(-2.12194440e-4f))))));
  const float inf = __builtin_inff();
  y = select(eq(x, zero()), set1(-inf), y);
  y = select(lt(x, zero()), set1(__builtin_nanf("")), y);
  y = select(eq(x, set1(inf)), set1(inf), y);
  return select(nle(x, x), x, y);
}

// Half a vector's lanes as doubles, in a register of the vector's width (GCC keeps a vector twice that wide in
// memory and compares it lane by lane).
typedef double vd __attribute__((vector_size(sizeof(vf))));
typedef uint64_t vu64 __attribute__((vector_size(sizeof(vf))));
typedef float vf_half __attribute__((vector_size(sizeof(vf) / 2)));
inline vd splat_wide(double v) { return vd{} + v; }
// a b + c in one rounding (kernels build with -ffp-contract=off: a * b + c on vd would round twice).
inline vd fma_wide(vd a, vd b, vd c) {
#if defined(__AVX512F__)
  return (vd)_mm512_fmadd_pd((__m512d)a, (__m512d)b, (__m512d)c);
#else
  return (vd)_mm256_fmadd_pd((__m256d)a, (__m256d)b, (__m256d)c);
#endif
}
// Integers below 2^51 in magnitude as the low bits of kRound + v (and back): no int64 <-> double conversion,
// which AVX2 does not have.
inline constexpr double kRoundWide = 6755399441055744.0;  // 1.5 2^52: adding it rounds to an integer
inline vd pow_log_wide(vd a) {  // a > 0, finite, normal in double
  const vu64 bits = (vu64)a;
  // m in [sqrt(1/2), sqrt(2)): the exponent one higher where the mantissa is above sqrt(2)'s (0x3ff6a09e...).
  const vu64 big = ((bits >> 32) & 0xfffffu) > 0x6a09eu;  // all ones where true
  const vd m = (vd)((bits & 0x000fffffffffffffu) | (0x3ff0000000000000u - (big & 0x0010000000000000u)));
  const vd e = (vd)((bits >> 52) + (big & 1u) + 0x4338000000000000u) - splat_wide(kRoundWide + 1023);
  const vd s = (m - 1.0) / (m + 1.0);
  const vd z = s * s;
  // 2 atanh(s) = 2s + s z P(z), P to z^5 (truncation below 1e-12 relative), by Estrin's scheme (a short chain).
  const vd z2 = z * z;
  const vd p01 = fma_wide(z, splat_wide(2.0 / 5), splat_wide(2.0 / 3));
  const vd p23 = fma_wide(z, splat_wide(2.0 / 9), splat_wide(2.0 / 7));
  const vd p45 = fma_wide(z, splat_wide(2.0 / 13), splat_wide(2.0 / 11));
  const vd p = fma_wide(fma_wide(p45, z2, p23), z2, p01);
  return fma_wide(e, splat_wide(0.69314718055994530942), fma_wide(s * z, p, s + s));
}
inline vd pow_exp_wide(vd y) {  // y in [-120, 100]
  const vd t = fma_wide(y, splat_wide(1.4426950408889634074), splat_wide(kRoundWide));
  const vd n = t - kRoundWide;
  const vd r = fma_wide(n, splat_wide(-1.42860682030941723212e-6),
                        fma_wide(n, splat_wide(-0.693145751953125), y));  // ln2 in two parts
  // e^r by Taylor to r^9 (below 3e-12 relative for |r| <= ln2/2), by Estrin's scheme.
  const vd r2 = r * r, r4 = r2 * r2;
  const vd q01 = r + 1.0, q23 = fma_wide(r, splat_wide(1.0 / 6), splat_wide(0.5));
  const vd q45 = fma_wide(r, splat_wide(1.0 / 120), splat_wide(1.0 / 24));
  const vd q67 = fma_wide(r, splat_wide(1.0 / 5040), splat_wide(1.0 / 720));
  const vd q89 = fma_wide(r, splat_wide(1.0 / 362880), splat_wide(1.0 / 40320));
  const vd p = fma_wide(fma_wide(q89, r4, fma_wide(q67, r2, q45)), r4, fma_wide(q23, r2, q01));
  return p * (vd)(((vu64)t - (vu64)splat_wide(kRoundWide) + 1023u) << 52);  // 2^n
}
// b log a clamped to [-120, 100] (beyond both, fp32 gives 0 or inf), then e^ that, in double.
inline vf_half pow_wide(vf_half a, vf_half b) {
  vd y = __builtin_convertvector(b, vd) * pow_log_wide(__builtin_convertvector(a, vd));
  y = y < -120.0 ? splat_wide(-120.0) : y;
  y = y > 100.0 ? splat_wide(100.0) : y;
  return __builtin_convertvector(pow_exp_wide(y), vf_half);
}
// A vector's low and high halves, and back.
inline vf_half low_half(vf v) {
#if defined(__AVX512F__)
  return __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7);
#else
  return __builtin_shufflevector(v, v, 0, 1, 2, 3);
#endif
}
inline vf_half high_half(vf v) {
#if defined(__AVX512F__)
  return __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
#else
  return __builtin_shufflevector(v, v, 4, 5, 6, 7);
#endif
}
inline vf join_halves(vf_half lo, vf_half hi) {
#if defined(__AVX512F__)
  return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
#else
  return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7);
#endif
}
// a^b for fp32 a and b, within an ulp of the exact value (tests/unit/runtime/simd_exp_test.cc). Lanes with a
// finite a > 0 and a finite b compute e^(b log a) in double, widened from the lanes: log a = k ln2 + 2 atanh(s)
// (m in [sqrt(1/2), sqrt(2)), s = (m - 1) / (m + 1), the series to s^13: below 1e-12 relative), b log a
// clamped to [-120, 100] (beyond both, fp32 gives 0 or inf), e^y = 2^n e^r with |r| <= ln2/2 by Taylor to r^9
// (3e-12); one rounding to fp32 at the end, so a result exact in fp32 (2^3, 9^0.5) comes out exact. The other
// lanes (a <= 0, infinities, NaN: C's special cases, integral exponents of negative bases) take std::pow lane
// by lane, as the op-by-op Pow computed every lane before (libm's powf: ~55 ms over 16M elements on 2 cores).
inline vf powv(vf a, vf b) {
  const float inf = __builtin_inff();
  const lanes_t regular = land(land(gt(a, zero()), lt(a, set1(inf))), lt(abs(b), set1(inf)));
  // The other lanes compute 1^0 on the way and are replaced below.
  const vf ar = select(regular, a, set1(1.f)), br = select(regular, b, zero());
  const vf r = join_halves(pow_wide(low_half(ar), low_half(br)), pow_wide(high_half(ar), high_half(br)));
  if (is_all(regular)) return r;
  alignas(64) float as[kW], bs[kW], rs[kW];
  storeu(as, a);
  storeu(bs, b);
  storeu(rs, r);
  const unsigned ok = bits(regular);
  for (int i = 0; i < kW; ++i)
    if (!((ok >> i) & 1u)) rs[i] = std::pow(as[i], bs[i]);
  return loadu(rs);
}

// sin(x) (quadrant 0) or cos(x) = sin(x + pi/2) (quadrant 1) for |x| <= kTrigReduced: n = round(x 2/pi),
// r = x - n pi/2 with pi/2 in three parts (Cody and Waite; n pi/2's first part exact for n < 2^13), sin r
// and cos r on [-pi/4, pi/4] by Cephes' sinf/cosf polynomials, chosen and signed by (n + quadrant) mod 4.
// NaN and the infinities give NaN. Beyond the bound the reduction loses bits: sinv / cosv take those lanes
// from libm.
inline constexpr float kTrigReduced = 8192.f;
inline vf sin_quadrant(vf x, float quadrant) {
  const vf n = round_nearest(mul(x, set1(0.636619772367581343f)));
  vf r = fnmadd(n, set1(1.5703125f), x);
  r = fnmadd(n, set1(4.837512969970703125e-4f), r);
  r = fnmadd(n, set1(7.54978995489188216e-8f), r);
  const vf r2 = mul(r, r);
  vf s = fmadd(set1(-1.9515295891e-4f), r2, set1(8.3321608736e-3f));
  s = fmadd(s, r2, set1(-1.6666654611e-1f));
  s = fmadd(mul(s, r2), r, r);
  vf c = fmadd(set1(2.443315711809948e-5f), r2, set1(-1.388731625493765e-3f));
  c = fmadd(c, r2, set1(4.166664568298827e-2f));
  c = fmadd(mul(c, r2), r2, fnmadd(set1(0.5f), r2, set1(1.f)));
  const vf q = add(n, set1(quadrant));
  const vf odd = fnmadd(floorv(mul(q, set1(0.5f))), set1(2.f), q);     // q mod 2
  const vf upper = fnmadd(floorv(mul(q, set1(0.25f))), set1(4.f), q);  // q mod 4
  const vf v = select(gt(odd, set1(0.5f)), c, s);
  return select(gt(upper, set1(1.5f)), sub(zero(), v), v);
}
// y where |x| <= kTrigReduced (or x is NaN); f(x) lane by lane elsewhere.
template <class F>
inline vf trig_wide_lanes(vf x, vf y, F f) {
  const lanes_t wide = gt(abs(x), set1(kTrigReduced));
  if (!bits(wide)) return y;
  alignas(64) float xs[kW], ys[kW];
  storeu(xs, x);
  storeu(ys, y);
  for (int i = 0; i < kW; ++i)
    if (std::fabs(xs[i]) > kTrigReduced) ys[i] = f(xs[i]);
  return loadu(ys);
}
// Measured against double over |x| <= 8192 (AVX-512): see simd_exp_test.cc.
inline vf sinv(vf x) {
  return trig_wide_lanes(x, sin_quadrant(x, 0.f), [](float v) { return std::sin(v); });
}
inline vf cosv(vf x) {
  return trig_wide_lanes(x, sin_quadrant(x, 1.f), [](float v) { return std::cos(v); });
}

}  // namespace gaf::simd
#endif
