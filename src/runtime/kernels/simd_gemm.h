// Small fp32 products for the attention kernel on AVX-512, where oneDNN's sgemm spends a tenth of its time in
// packing and call overhead at attention's shapes ([256 x 64] x [64 x 512] and [256 x 512] x [512 x 64]):
//   C[m, n] = alpha * A[m, k] B[k, n]  (+ C when accumulating)
// A is read through any strides, one element at a time (broadcast), so neither Q nor the probabilities are
// packed; B is read 16 columns at a time and must be contiguous along n, in chunks of 64 columns (K's transpose
// is packed into such chunks once per key tile by pack_transposed_panels; V is used in place). The register tile
// is 6 rows x 64 columns: 24 accumulators, 4 loads of B and 6 broadcasts per 24 FMAs. Measured on the bench's
// attention shapes (one Zen 4 core): 160 us per product against sgemm's 170-180 us, 105 GFLOP/s, the core's peak
// for fp32 FMA. Sums run in k order in fp32, as a GEMM's do.
#pragma once

#if defined(__AVX512F__)
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

// GCC 12's intrinsics headers trip -Wmaybe-uninitialized once inlined (the _mm512_undefined_ps of the masked
// forms they expand to).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace gaf::runtime::simd {

namespace detail {

// Transposes the 16 x 16 block at x (rows rs apart, contiguous) into out (rows ldo apart).
inline void transpose16(const float* x, int64_t rs, float* out, int64_t ldo) {
  __m512 r[16], t[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(x + i * rs);
#pragma GCC unroll 8
  for (int i = 0; i < 16; i += 2) {  // 2 x 2 blocks of single floats
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 16; i += 4) {  // 4 x 4 blocks: pairs of floats
    r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
    r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
    r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
  }
  // r[4b + c] now holds, in 128-bit lane l, column 4l + c of rows 4b .. 4b + 3: gather the lanes.
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const __m512 a0 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88), a1 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xDD);
    const __m512 b0 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88);
    const __m512 b1 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xDD);
    _mm512_storeu_ps(out + (c + 0) * ldo, _mm512_shuffle_f32x4(a0, b0, 0x88));
    _mm512_storeu_ps(out + (c + 8) * ldo, _mm512_shuffle_f32x4(a0, b0, 0xDD));
    _mm512_storeu_ps(out + (c + 4) * ldo, _mm512_shuffle_f32x4(a1, b1, 0x88));
    _mm512_storeu_ps(out + (c + 12) * ldo, _mm512_shuffle_f32x4(a1, b1, 0xDD));
  }
}

}  // namespace detail

// Xᵀ of X [n, d] (element (i, j) at x[i * rs + j * cs]) in panels of 64 columns: panel p holds [d][64], columns
// 64p .. 64p + 63 of Xᵀ, the columns past n zero. `out` has room for ceil(n / 64) * 64 * d floats. Whole 16 x 16
// blocks of a row-major X go through registers.
inline void pack_transposed_panels(const float* x, int64_t n, int64_t d, int64_t rs, int64_t cs, float* out) {
  for (int64_t p0 = 0; p0 < n; p0 += 64) {
    float* panel = out + p0 * d;
    const int64_t w = std::min<int64_t>(64, n - p0);
    int64_t i = 0;
    if (cs == 1)
      for (; i + 16 <= w; i += 16) {
        int64_t j = 0;
        for (; j + 16 <= d; j += 16) detail::transpose16(x + (p0 + i) * rs + j, rs, panel + j * 64 + i, 64);
        for (; j < d; ++j)
          for (int64_t ii = i; ii < i + 16; ++ii) panel[j * 64 + ii] = x[(p0 + ii) * rs + j];
      }
    for (; i < 64; ++i) {
      const float* row = x + (p0 + i) * rs;
      if (i < w) {
        for (int64_t j = 0; j < d; ++j) panel[j * 64 + i] = row[j * cs];
      } else {
        for (int64_t j = 0; j < d; ++j) panel[j * 64 + i] = 0.0f;
      }
    }
  }
}

namespace detail {

// One tile: R rows of C by 16 NC columns, the last 16 masked by `tail`; row0/col0 place it in the product, for
// the epilogue. Every loop over the tile is unrolled (the pragmas): with one left rolled, GCC 12 keeps `acc` in
// memory and stores all 24 registers each step (3x slower).
template <int R, int NC, class Epilogue>
inline void gemm_tile(int64_t k, float alpha, const float* a, int64_t ars, int64_t acs, const float* b, int64_t ldb,
                      __mmask16 tail, float* c, int64_t ldc, int64_t row0, int64_t col0, const Epilogue& epilogue) {
  __m512 acc[R][NC];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < NC; ++j) acc[r][j] = _mm512_setzero_ps();
  const float* ap[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) ap[r] = a + r * ars;
  for (int64_t kk = 0; kk < k; ++kk) {
    const float* brow = b + kk * ldb;
    __m512 bv[NC];
#pragma GCC unroll 8
    for (int j = 0; j < NC - 1; ++j) bv[j] = _mm512_loadu_ps(brow + 16 * j);
    bv[NC - 1] = _mm512_maskz_loadu_ps(tail, brow + 16 * (NC - 1));
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(ap[r][kk * acs]);
#pragma GCC unroll 8
      for (int j = 0; j < NC; ++j) acc[r][j] = _mm512_fmadd_ps(av, bv[j], acc[r][j]);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    __m512 x[NC];
#pragma GCC unroll 8
    for (int j = 0; j < NC; ++j) x[j] = _mm512_mul_ps(acc[r][j], va);
    epilogue(row0 + r, col0, x, tail, c + r * ldc);
  }
}

template <int NC, class Epilogue>
inline void gemm_chunk(int64_t m, int64_t k, float alpha, const float* a, int64_t ars, int64_t acs, const float* b,
                       int64_t ldb, __mmask16 tail, float* c, int64_t ldc, int64_t col0, const Epilogue& epilogue) {
  constexpr int kRows = 6;
  int64_t r = 0;
  for (; r + kRows <= m; r += kRows)
    gemm_tile<kRows, NC>(k, alpha, a + r * ars, ars, acs, b, ldb, tail, c + r * ldc, ldc, r, col0, epilogue);
  const float* ar = a + r * ars;
  float* cr = c + r * ldc;
  switch (m - r) {
    case 5: gemm_tile<5, NC>(k, alpha, ar, ars, acs, b, ldb, tail, cr, ldc, r, col0, epilogue); break;
    case 4: gemm_tile<4, NC>(k, alpha, ar, ars, acs, b, ldb, tail, cr, ldc, r, col0, epilogue); break;
    case 3: gemm_tile<3, NC>(k, alpha, ar, ars, acs, b, ldb, tail, cr, ldc, r, col0, epilogue); break;
    case 2: gemm_tile<2, NC>(k, alpha, ar, ars, acs, b, ldb, tail, cr, ldc, r, col0, epilogue); break;
    case 1: gemm_tile<1, NC>(k, alpha, ar, ars, acs, b, ldb, tail, cr, ldc, r, col0, epilogue); break;
    default: break;
  }
}

}  // namespace detail

// Epilogues: what becomes of a tile's row of results, x[NC] for row i, columns j .. j + 16 NC - 1 (the last
// vector's lanes `tail`), bound for c.
template <int NC>
inline __mmask16 lanes(int v, __mmask16 tail) {
  return v == NC - 1 ? tail : __mmask16(0xFFFF);
}
struct StoreC {
  template <int NC>
  void operator()(int64_t, int64_t, const __m512 (&x)[NC], __mmask16 tail, float* c) const {
#pragma GCC unroll 8
    for (int v = 0; v < NC; ++v) _mm512_mask_storeu_ps(c + 16 * v, lanes<NC>(v, tail), x[v]);
  }
};
struct AddToC {
  template <int NC>
  void operator()(int64_t, int64_t, const __m512 (&x)[NC], __mmask16 tail, float* c) const {
#pragma GCC unroll 8
    for (int v = 0; v < NC; ++v) {
      const __mmask16 k = lanes<NC>(v, tail);
      _mm512_mask_storeu_ps(c + 16 * v, k, _mm512_add_ps(x[v], _mm512_maskz_loadu_ps(k, c + 16 * v)));
    }
  }
};

// C[m, n] (rows ldc apart) = epilogue(alpha * A B): StoreC stores, AddToC accumulates. A[i, kk] is
// a[i * ars + kk * acs]. B's columns come in chunks of 64: chunk q starts at b + q * chunk_stride, and
// B[kk, 64q + j] is that + kk * ldb + j. A row-major B has chunk_stride 64; panels from pack_transposed_panels
// have ldb 64 and chunk_stride 64 k.
template <class Epilogue = StoreC>
inline void gemm_bcast(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t ars, int64_t acs,
                       const float* b, int64_t ldb, int64_t chunk_stride, float* c, int64_t ldc,
                       const Epilogue& epilogue = {}) {
  for (int64_t c0 = 0; c0 < n; c0 += 64) {
    const int64_t w = std::min<int64_t>(64, n - c0);
    const int nc = int((w + 15) / 16);
    const int64_t last = w - 16 * (nc - 1);
    const __mmask16 tail = last == 16 ? __mmask16(0xFFFF) : __mmask16((1u << last) - 1);
    const float* bc = b + c0 / 64 * chunk_stride;
    float* cc = c + c0;
    switch (nc) {
      case 4: detail::gemm_chunk<4>(m, k, alpha, a, ars, acs, bc, ldb, tail, cc, ldc, c0, epilogue); break;
      case 3: detail::gemm_chunk<3>(m, k, alpha, a, ars, acs, bc, ldb, tail, cc, ldc, c0, epilogue); break;
      case 2: detail::gemm_chunk<2>(m, k, alpha, a, ars, acs, bc, ldb, tail, cc, ldc, c0, epilogue); break;
      default: detail::gemm_chunk<1>(m, k, alpha, a, ars, acs, bc, ldb, tail, cc, ldc, c0, epilogue); break;
    }
  }
}

}  // namespace gaf::runtime::simd

#pragma GCC diagnostic pop
#endif
