#include "runtime/kernels/onnx/elementwise_util.h"

#if defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace gaf::runtime::ew {

std::string type_class_names(unsigned classes) {
  std::string s;
  auto add = [&](const char* names) {
    if (!s.empty()) s += ", ";
    s += names;
  };
  if (classes & kTFloat) add("float, double");
  if (classes & kTHalf) add("float16, bfloat16");
  if (classes & kTSigned) add("int8, int16, int32, int64");
  if (classes & kTUnsigned) add("uint8, uint16, uint32, uint64");
  if (classes & kTBool) add("bool");
  return s;
}

void unsupported_dtype(const Node& node, const char* what, DType t, unsigned allowed) {
  unsupported("{}: {} of element type {} is not supported ({} takes {})", node.describe(), what,
              dtype_name(t), node.op_type, type_class_names(allowed));
}

// GCC 12's AVX-512 conversion intrinsics start from _mm256_undefined_*, which -Wmaybe-uninitialized flags.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// The hardware conversions round to nearest even and handle subnormals, infinities and NaN like
// gaf::half_to_float / gaf::float_to_half (a unit test compares them on every half value).
void to_float(const Half* src, float* dst, int64_t n) {
  const uint16_t* s = reinterpret_cast<const uint16_t*>(src);
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i))));
#endif
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
#endif
  for (; i < n; ++i) dst[i] = half_to_float(s[i]);
}

void from_float(const float* src, Half* dst, int64_t n) {
  uint16_t* d = reinterpret_cast<uint16_t*>(dst);
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(d + i),
        _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(
        reinterpret_cast<__m128i*>(d + i),
        _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
  for (; i < n; ++i) d[i] = float_to_half(src[i]);
}

#pragma GCC diagnostic pop

// bf16 is the top half of an fp32: these plain loops vectorise.
void to_float(const BFloat16* src, float* dst, int64_t n) {
  const uint16_t* s = reinterpret_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(s[i]);
}

void from_float(const float* src, BFloat16* dst, int64_t n) {
  uint16_t* d = reinterpret_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = float_to_bf16(src[i]);
}

}  // namespace gaf::runtime::ew
