// 2^t on 16 fp32 lanes (AVX-512), shared by the kernels that need a fast exp (attention's softmax, the swish pass
// after convolutions, the convolution epilogues' activations): 2^round(t) by vscalefps (gradual underflow towards 0, NaN propagates) times a degree-5
// polynomial for 2^f, f = t - round(t) in [-1/2, 1/2]: a minimax fit of 2^f's relative error (9e-8 in exact
// arithmetic; measured in fp32 1.7e-7 at most over t in [-126, 127), tests/unit/runtime/simd_exp_test.cc), one
// FMA cheaper than Cephes' degree-6 exp2f (7.9e-8); the attention bench case ran about 1% faster with it.
// exp(x) is exp2_16(x * log2(e)): the rounding of that product adds a relative error of about |t| 6e-8.
#pragma once

#include <cmath>

namespace gaf::runtime::simd {

// x * sigmoid(alpha x) with swish16's limits, for scalar tails and reference paths: 0 once exp(-alpha x) passes
// 2^126.
inline float swish(float x, float alpha) {
  const double t = -double(alpha) * double(x);
  return t > 126.0 * 0.69314718055994531 ? 0.f : float(double(x) / (1.0 + std::exp(t)));
}

}  // namespace gaf::runtime::simd

#if defined(__AVX512F__)
#include <immintrin.h>

namespace gaf::runtime::simd {

// Callers clamp t from below (t >= -150 flushes to 0 anyway) and from above where overflow matters (t < 128).
inline __m512 exp2_16(__m512 t) {
  const __m512 k = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(t, k);
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(1.3264698770330367e-3f), f, _mm512_set1_ps(9.671508817451695e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5507337764833714e-2f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022242145351372e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931469776119832e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, k);  // p * 2^k
}

// x * sigmoid(a x) = x / (1 + 2^t), t = -a x log2(e) clamped to [-126, 126], 2^t by exp2_16, the reciprocal as
// rcp14 refined by one Newton step; neg_a_log2e = -a log2(e). Where t > 126 the result is below 2^-126 |x| and
// comes out 0 (-inf too). Measured against double over |x| <= 20: max relative error 1.1e-6 (alpha 1) and 2.6e-6
// (alpha 1.5), max absolute error 1.5e-6; NaN stays NaN.
inline __m512 swish16(__m512 x, __m512 neg_a_log2e) {
  const __m512 tx = _mm512_mul_ps(x, neg_a_log2e);
  const __mmask16 tiny = _mm512_cmp_ps_mask(tx, _mm512_set1_ps(126.f), _CMP_GT_OQ);  // |result| < 2^-126 |x|: 0
  const __m512 t = _mm512_min_ps(_mm512_set1_ps(126.f), _mm512_max_ps(_mm512_set1_ps(-126.f), tx));
  const __m512 d = _mm512_add_ps(exp2_16(t), _mm512_set1_ps(1.f));
  __m512 r = _mm512_rcp14_ps(d);
  r = _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(2.f)));  // r (2 - d r)
  return _mm512_maskz_mul_ps(_knot_mask16(tiny), x, r);
}

// sigmoid(x) = 1 / (1 + 2^t), t = -x log2(e) clamped to [-126, 126] (swish16's reciprocal, without the x): 0 <
// sigmoid(x) <= 1, about 2^-126 for x below -87; NaN stays NaN.
inline __m512 sigmoid16(__m512 x) {
  const __m512 tx = _mm512_mul_ps(x, _mm512_set1_ps(-1.4426950408889634f));
  const __m512 t = _mm512_min_ps(_mm512_set1_ps(126.f), _mm512_max_ps(_mm512_set1_ps(-126.f), tx));
  const __m512 d = _mm512_add_ps(exp2_16(t), _mm512_set1_ps(1.f));
  const __m512 r = _mm512_rcp14_ps(d);
  return _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(2.f)));  // r (2 - d r)
}

// GELU, x Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), with Phi(-|x|) = erfc(|x| / sqrt 2) / 2 from Abramowitz and
// Stegun 7.1.26: erfc(z) = t P(t) exp(-z^2), t = 1 / (1 + p z), absolute error below 1.5e-7 (what oneDNN's
// gelu_erf uses too); the erfc form needs no 1 + erf cancellation for negative x. Measured against double over
// |x| <= 12: see simd_exp_test.cc. NaN stays NaN.
inline __m512 gelu_erf16(__m512 x) {
  const __m512 z = _mm512_mul_ps(_mm512_abs_ps(x), _mm512_set1_ps(0.70710678118654752f));
  const __m512 d = _mm512_fmadd_ps(z, _mm512_set1_ps(0.3275911f), _mm512_set1_ps(1.f));
  __m512 t = _mm512_rcp14_ps(d);
  t = _mm512_mul_ps(t, _mm512_fnmadd_ps(d, t, _mm512_set1_ps(2.f)));  // t (2 - d t)
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(1.061405429f), t, _mm512_set1_ps(-1.453152027f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.421413741f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.284496736f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.254829592f));
  const __m512 e2 = _mm512_max_ps(_mm512_set1_ps(-150.f),
                                  _mm512_mul_ps(_mm512_mul_ps(z, z), _mm512_set1_ps(-1.4426950408889634f)));
  const __m512 q = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(t, p), exp2_16(e2)), _mm512_set1_ps(0.5f));  // Phi(-|x|)
  const __mmask16 pos = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GT_OQ);
  const __m512 phi = _mm512_mask_sub_ps(q, pos, _mm512_set1_ps(1.f), q);  // x > 0: 1 - Phi(-x)
  return _mm512_mul_ps(x, phi);
}

// GELU's tanh form, 0.5 x (1 + tanh(u)) = x sigmoid(2 u), u = sqrt(2 / pi) (x + 0.044715 x^3): swish16's
// reciprocal of 1 + 2^t with t = -2 u log2(e) clamped to [-126, 126].
inline __m512 gelu_tanh16(__m512 x) {
  const __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
  const __m512 u = _mm512_mul_ps(_mm512_fmadd_ps(x3, _mm512_set1_ps(0.044715f), x),
                                 _mm512_set1_ps(-2.f * 0.79788456080286536f * 1.4426950408889634f));
  const __m512 t = _mm512_min_ps(_mm512_set1_ps(126.f), _mm512_max_ps(_mm512_set1_ps(-126.f), u));
  const __m512 d = _mm512_add_ps(exp2_16(t), _mm512_set1_ps(1.f));
  __m512 r = _mm512_rcp14_ps(d);
  r = _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(2.f)));
  return _mm512_mul_ps(x, r);
}

// x * clamp(x / 6 + 1/2, 0, 1), ONNX's HardSwish; the gate's min/max keep NaN out of it, so NaN * gate = NaN.
inline __m512 hard_swish16(__m512 x) {
  const __m512 gate = _mm512_fmadd_ps(x, _mm512_set1_ps(1.f / 6.f), _mm512_set1_ps(0.5f));
  return _mm512_mul_ps(x, _mm512_min_ps(_mm512_max_ps(gate, _mm512_setzero_ps()), _mm512_set1_ps(1.f)));
}

}  // namespace gaf::runtime::simd
#endif
