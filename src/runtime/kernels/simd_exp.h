// 2^t on 16 fp32 lanes (AVX-512), shared by the kernels that need a fast exp (attention's softmax, the swish pass
// after convolutions): 2^round(t) by vscalefps (underflow to 0, -inf -> 0, NaN propagates) times a degree-6
// polynomial for 2^f, f = t - round(t) in [-1/2, 1/2] (Cephes' exp2f coefficients; max relative error ~1.2e-7).
// exp(x) is exp2_16(x * log2(e)): the rounding of that product adds a relative error of about |t| 6e-8.
#pragma once

#if defined(__AVX512F__)
#include <immintrin.h>

namespace gaf::runtime::simd {

// Callers clamp t from below (t >= -150 flushes to 0 anyway) and from above where overflow matters (t < 128).
inline __m512 exp2_16(__m512 t) {
  const __m512 k = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(t, k);
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(1.535336188319500e-4f), f, _mm512_set1_ps(1.339887440266574e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.618437357674640e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.550332471162809e-2f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.402264791363012e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931472028550421e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, k);  // p * 2^k
}

}  // namespace gaf::runtime::simd
#endif
