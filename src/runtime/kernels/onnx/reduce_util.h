// Helpers shared by the reduction and normalisation kernels: the compute type of each storage type, block
// conversion of 16-bit floats, a vectorisable exp, output casts and axis handling.
#pragma once

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "gaf/dtype.h"
#include "runtime/kernels/common.h"

namespace gaf::runtime::rn {

// 16-bit floats are storage types: they compute in fp32. Everything else computes in its own type.
template <class T>
inline constexpr bool is_f16_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
template <class T>
using compute_t = std::conditional_t<is_f16_v<T>, float, T>;

// Elements converted per block when a kernel reads or writes 16-bit floats through an fp32 buffer.
inline constexpr int64_t kConvBlock = 1024;
// Work (elements touched) below which a kernel runs on one thread.
inline constexpr int64_t kGrain = 32768;

inline void to_float(const Half* src, float* dst, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
#endif
  for (; i < n; ++i) dst[i] = half_to_float(src[i].bits);
}
inline void to_float(const BFloat16* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = std::bit_cast<float>(uint32_t(src[i].bits) << 16);
}
inline void from_float(const float* src, Half* dst, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(
        reinterpret_cast<__m128i*>(dst + i),
        _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
  for (; i < n; ++i) dst[i].bits = float_to_half(src[i]);
}
inline void from_float(const float* src, BFloat16* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i].bits = float_to_bf16(src[i]);
}

// One element of T as compute type.
template <class T>
inline compute_t<T> load_c(T v) {
  if constexpr (std::is_same_v<T, Half>) {
#if defined(__F16C__)
    return _cvtsh_ss(v.bits);
#else
    return half_to_float(v.bits);
#endif
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return std::bit_cast<float>(uint32_t(v.bits) << 16);
  } else {
    return v;
  }
}

// Reads n elements of T as compute type: a pointer to them (no copy) or to `buf` holding the converted
// values. `buf` must hold n elements when T is a 16-bit float.
template <class T>
inline const compute_t<T>* as_compute(const T* p, int64_t n, compute_t<T>* buf) {
  if constexpr (is_f16_v<T>) {
    to_float(p, buf, n);
    return buf;
  } else {
    (void)n;
    (void)buf;
    return p;
  }
}

// Calls f(q, offset, count) over [0, n) of `p` read as compute type, in blocks of `block` (at most
// kConvBlock) elements when T needs conversion, in one call otherwise.
template <class T, class F>
inline void for_compute_blocks(const T* p, int64_t n, int64_t block, F&& f) {
  if constexpr (is_f16_v<T>) {
    float buf[kConvBlock];
    for (int64_t off = 0; off < n; off += block) {
      int64_t cnt = std::min(block, n - off);
      to_float(p + off, buf, cnt);
      f(static_cast<const float*>(buf), off, cnt);
    }
  } else {
    (void)block;
    if (n > 0) f(p, int64_t(0), n);
  }
}

// Scalar conversion of a computed value to the storage type Y. Floating values going to an integer type are
// clamped to its range (NaN becomes 0) instead of invoking undefined behaviour.
template <class Y, class V>
inline Y cast_out(V v) {
  if constexpr (std::is_same_v<Y, Half>) {
    return Half{float_to_half(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<Y, BFloat16>) {
    return BFloat16{float_to_bf16(static_cast<float>(v))};
  } else if constexpr (std::is_integral_v<Y> && std::is_floating_point_v<V>) {
    if (!(v == v)) return Y(0);
    if (v <= V(std::numeric_limits<Y>::lowest())) return std::numeric_limits<Y>::lowest();
    if (v >= V(std::numeric_limits<Y>::max())) return std::numeric_limits<Y>::max();
    return static_cast<Y>(v);
  } else {
    return static_cast<Y>(v);
  }
}

template <class C>
inline bool is_nan(C x) {
  if constexpr (std::is_floating_point_v<C>)
    return x != x;
  else
    return false;
}

// exp(x) in fp32 with about 1 ulp error, written so loops calling it vectorise: range reduction to
// x = n*ln2 + r, |r| <= ln2/2, a degree-6 polynomial for e^r and 2^n assembled in the exponent bits.
// Underflows to 0 below about -87.3 (no subnormal results), overflows to +inf above 88.72, propagates NaN.
inline float exp_approx(float x) {
  const float hi = 88.7228391f, lo = -87.3365479f;
  float xc = std::min(std::max(x, lo), hi);
  float t = xc * 1.44269504088896341f;
  float n = (t + 12582912.0f) - 12582912.0f;  // round to nearest
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // n is in [-126, 128]; split 2^n into two factors so n = 128 does not overflow the exponent field.
  int32_t ni = static_cast<int32_t>(n);
  int32_t n1 = ni >> 1, n2 = ni - n1;
  float s1 = std::bit_cast<float>((n1 + 127) << 23);
  float s2 = std::bit_cast<float>((n2 + 127) << 23);
  float res = p * s1 * s2;
  res = x < lo ? 0.0f : res;
  res = x > hi ? std::numeric_limits<float>::infinity() : res;
  res = x != x ? x : res;
  return res;
}

// exp(x) for x <= 0 or NaN (a shifted softmax argument), cheaper than exp_approx: no overflow handling, one
// scale. Same accuracy; 0 below about -87.3; NaN propagates.
inline float exp_nonpos(float x) {
  const float lo = -87.3365479f;
  float xc = x > lo ? x : lo;
  float t = xc * 1.44269504088896341f;
  float n = (t + 12582912.0f) - 12582912.0f;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  float res = p * std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);  // n in [-126, 0]
  res = x < lo ? 0.0f : res;
  res = x != x ? x : res;
  return res;
}

// exp(x - m) where m is the maximum of the values x is drawn from (x - m <= 0 or NaN).
template <class C>
inline C exp_shifted(C x, C m) {
  if constexpr (std::is_same_v<C, float>)
    return exp_nonpos(x - m);
  else
    return C(std::exp(double(x) - double(m)));
}

template <class C>
inline C exp_c(C x) {
  if constexpr (std::is_same_v<C, float>)
    return exp_approx(x);
  else
    return C(std::exp(double(x)));
}

// Validates and normalises reduction axes: each in [-rank, rank-1], no duplicates. Returns a mask over the
// dimensions.
std::vector<bool> axes_mask(const std::vector<int64_t>& axes, int rank, const Node& node);

// Product of dims in [b, e).
inline int64_t dims_product(const std::vector<int64_t>& dims, int b, int e) {
  int64_t p = 1;
  for (int i = b; i < e; ++i) p *= dims[i];
  return p;
}

// True when output i of the node exists and is wanted.
inline bool wants_output(const KernelContext& ctx, int i) {
  return i < ctx.num_outputs() && !ctx.node().output(i)->absent_output;
}

}  // namespace gaf::runtime::rn
