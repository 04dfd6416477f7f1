// The fp32 vector the hand-written kernels are written on, at the build's widest width: 16 lanes with AVX-512
// (__m512, lane masks __mmask16), 8 lanes with AVX2 + FMA (__m256, lane masks as all-ones lanes of a __m256).
// A kernel written on these functions and kW compiles to either; where neither ISA is there (GAF_SIMD unset) the
// kernels keep their portable paths. The AVX2 forms cost what the AVX-512 ones do per lane except where noted.
// Generated CPU kernels include this file's text too (codegen's prelude), so it holds only what a standalone
// C++17 translation unit compiles: standard and intrinsics headers.
#pragma once

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#define GAF_SIMD 1
#include <immintrin.h>

#include <cstdint>

// GCC 12's intrinsics headers trip -Wmaybe-uninitialized once inlined (the _mm512_undefined_ps of the masked
// forms they expand to).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace gaf::simd {

#if defined(__AVX512F__)
using vf = __m512;
using lanes_t = __mmask16;
inline constexpr int kW = 16;

inline vf set1(float x) { return _mm512_set1_ps(x); }
inline vf zero() { return _mm512_setzero_ps(); }
inline vf loadu(const float* p) { return _mm512_loadu_ps(p); }
inline void storeu(float* p, vf x) { _mm512_storeu_ps(p, x); }
// The first n lanes (0 <= n; n >= kW: all).
inline lanes_t first(int64_t n) { return n >= 16 ? lanes_t(0xFFFF) : lanes_t((1u << n) - 1); }
inline lanes_t all_lanes() { return lanes_t(0xFFFF); }
inline bool is_all(lanes_t k) { return k == lanes_t(0xFFFF); }
// Lanes outside k read as 0 and are not written.
inline vf loadu(const float* p, lanes_t k) { return _mm512_maskz_loadu_ps(k, p); }
// kW bfloat16 values (the high halves of floats) / kW int8 values, as floats.
inline vf load_bf16(const uint16_t* p) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
}
inline vf load_i8(const int8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
inline void storeu(float* p, vf x, lanes_t k) { _mm512_mask_storeu_ps(p, k, x); }

inline vf add(vf a, vf b) { return _mm512_add_ps(a, b); }
inline vf sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
inline vf mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
inline vf div(vf a, vf b) { return _mm512_div_ps(a, b); }  // correctly rounded; a fifth of mul's rate
inline vf fmadd(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }    // a b + c
inline vf fnmadd(vf a, vf b, vf c) { return _mm512_fnmadd_ps(a, b, c); }  // c - a b
// max/min as the instructions: where either operand is NaN the result is b (the second).
inline vf max(vf a, vf b) { return _mm512_max_ps(a, b); }
inline vf min(vf a, vf b) { return _mm512_min_ps(a, b); }
inline vf abs(vf a) { return _mm512_abs_ps(a); }
inline vf round_nearest(vf a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline vf floorv(vf a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
inline vf ceilv(vf a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC); }
inline vf sqrtv(vf a) { return _mm512_sqrt_ps(a); }

// Comparisons: ordered (false where either is NaN) except nle (true where a <= b fails, NaN included).
inline lanes_t gt(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
inline lanes_t lt(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
inline lanes_t nle(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_NLE_UQ); }
inline lanes_t eq(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
inline lanes_t land(lanes_t a, lanes_t b) { return lanes_t(a & b); }
inline lanes_t lnot(lanes_t a) { return lanes_t(~a); }
// Lane i of the result is bit i.
inline unsigned bits(lanes_t k) { return unsigned(k); }
// k ? a : b by lane.
inline vf select(lanes_t k, vf a, vf b) { return _mm512_mask_mov_ps(b, k, a); }

inline float reduce_add(vf a) { return _mm512_reduce_add_ps(a); }
inline float reduce_max(vf a) { return _mm512_reduce_max_ps(a); }

// p * 2^k for integral k in [-150, 128] (gradual underflow towards 0), NaN propagates.
inline vf scale2(vf p, vf k) { return _mm512_scalef_ps(p, k); }

// 1 / d: rcp14 (relative error 2^-14) refined by one Newton step.
inline vf recip(vf d) {
  const vf r = _mm512_rcp14_ps(d);
  return mul(r, fnmadd(d, r, set1(2.f)));  // r (2 - d r)
}

#else  // AVX2 + FMA
using vf = __m256;
using lanes_t = __m256;  // all ones in a lane that is on
inline constexpr int kW = 8;

inline vf set1(float x) { return _mm256_set1_ps(x); }
inline vf zero() { return _mm256_setzero_ps(); }
inline vf loadu(const float* p) { return _mm256_loadu_ps(p); }
inline void storeu(float* p, vf x) { _mm256_storeu_ps(p, x); }
inline lanes_t first(int64_t n) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(int(n < 8 ? n : 8)), lane));
}
inline lanes_t all_lanes() { return _mm256_castsi256_ps(_mm256_set1_epi32(-1)); }
inline bool is_all(lanes_t k) { return _mm256_movemask_ps(k) == 0xFF; }
inline vf loadu(const float* p, lanes_t k) { return _mm256_maskload_ps(p, _mm256_castps_si256(k)); }
inline vf load_bf16(const uint16_t* p) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
}
inline vf load_i8(const int8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
inline void storeu(float* p, vf x, lanes_t k) { _mm256_maskstore_ps(p, _mm256_castps_si256(k), x); }

inline vf add(vf a, vf b) { return _mm256_add_ps(a, b); }
inline vf sub(vf a, vf b) { return _mm256_sub_ps(a, b); }
inline vf mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
inline vf div(vf a, vf b) { return _mm256_div_ps(a, b); }
inline vf fmadd(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
inline vf fnmadd(vf a, vf b, vf c) { return _mm256_fnmadd_ps(a, b, c); }
inline vf max(vf a, vf b) { return _mm256_max_ps(a, b); }
inline vf min(vf a, vf b) { return _mm256_min_ps(a, b); }
inline vf abs(vf a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.f), a); }
inline vf round_nearest(vf a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline vf floorv(vf a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
inline vf ceilv(vf a) { return _mm256_round_ps(a, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC); }
inline vf sqrtv(vf a) { return _mm256_sqrt_ps(a); }

inline lanes_t gt(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
inline lanes_t lt(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
inline lanes_t nle(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_NLE_UQ); }
inline lanes_t eq(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
inline lanes_t land(lanes_t a, lanes_t b) { return _mm256_and_ps(a, b); }
inline lanes_t lnot(lanes_t a) { return _mm256_xor_ps(a, all_lanes()); }
inline unsigned bits(lanes_t k) { return unsigned(_mm256_movemask_ps(k)); }
inline vf select(lanes_t k, vf a, vf b) { return _mm256_blendv_ps(b, a, k); }

inline float reduce_add(vf a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
inline float reduce_max(vf a) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
}

// p * 2^k for integral k in [-150, 128], as two exponent-field products 2^(k / 2) 2^(k - k / 2) (each a normal
// float), so that the result underflows gradually, as vscalefps does. NaN in p propagates.
inline vf scale2(vf p, vf k) {
  const __m256i ki = _mm256_cvtps_epi32(k);
  const __m256i k1 = _mm256_srai_epi32(ki, 1), k2 = _mm256_sub_epi32(ki, k1);
  auto pow2 = [](__m256i e) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23));
  };
  return mul(mul(p, pow2(k1)), pow2(k2));
}

// 1 / d, correctly rounded: rcp refined by one Newton step would leave 2.5e-7 relative (rcp's 1.5 2^-12
// squared), ten times AVX-512's rcp14 + Newton, enough to break GELU's bound (simd_exp_test.cc); vdivps costs
// about as much as rcp and two steps.
inline vf recip(vf d) { return _mm256_div_ps(set1(1.f), d); }
#endif

// v clamped to [lo, hi] with a NaN kept, as the unfused Clip and Relu keep it (std::min(std::max(v, lo), hi)
// in scalar code): the instructions return their second operand where either is NaN, so v goes second.
inline vf clamp(vf v, vf lo, vf hi) { return min(hi, max(lo, v)); }

// The lanes of the last of ceil(n / kW) vectors that hold one of n elements.
inline lanes_t tail_lanes(int64_t n) { return first(n % kW == 0 ? kW : n % kW); }

// out[i] = f(in[i]) for n floats, f taking a vector: whole vectors, then the last lanes masked. in == out is fine.
template <class F>
inline void map(const float* in, float* out, int64_t n, F f) {
  int64_t i = 0;
  for (; i + kW <= n; i += kW) storeu(out + i, f(loadu(in + i)));
  if (i < n) {
    const lanes_t m = first(n - i);
    storeu(out + i, f(loadu(in + i, m)), m);
  }
}

}  // namespace gaf::simd

#pragma GCC diagnostic pop
#endif
