// Small fp32 products for the attention kernel, where oneDNN's sgemm spends a tenth of its time in packing and
// call overhead at attention's shapes ([256 x 64] x [64 x 512] and [256 x 512] x [512 x 64]):
//   C[m, n] = alpha * A[m, k] B[k, n]  (+ C when accumulating)
// A is read through any strides, one element at a time (broadcast), so neither Q nor the probabilities are
// packed; B is read a vector (simd::kW columns) at a time and must be contiguous along n, in chunks of kPanel
// columns (K's transpose is packed into such chunks once per key tile by pack_transposed_panels; V is used in
// place). The register tile is 6 rows x kPanel columns: with AVX-512 6 x 64 (24 accumulators, 4 loads of B and 6
// broadcasts per 24 FMAs, of 32 registers); with AVX2 6 x 16 (12 accumulators, 2 loads and 6 broadcasts per 12
// FMAs, of 16). Measured on the bench's attention shapes (one Zen 4 core, AVX-512): 160 us per product against
// sgemm's 170-180 us, 105 GFLOP/s, the core's peak for fp32 FMA. Sums run in k order in fp32, as a GEMM's do.
#pragma once

#include "ops/simd_vec.h"

#if defined(GAF_SIMD)
#include <algorithm>
#include <cstdint>

// GCC 12's intrinsics headers trip -Wmaybe-uninitialized once inlined (the _mm512_undefined_ps of the masked
// forms they expand to).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace gaf::simd {

// Columns per chunk of B (and per panel of a packed Kᵀ), and the vectors in one.
inline constexpr int kPanelVecs = kW == 16 ? 4 : 2;
inline constexpr int64_t kPanel = kPanelVecs * kW;

namespace detail {

#if defined(__AVX512F__)

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
#else
// Transposes the 8 x 8 block at x (rows rs apart, contiguous) into out (rows ldo apart).
inline void transpose8(const float* x, int64_t rs, float* out, int64_t ldo) {
  __m256 r[8], t[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(x + i * rs);
#pragma GCC unroll 4
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
#pragma GCC unroll 2
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  // r[4b + c] holds, in 128-bit lane l, column 4l + c of rows 4b .. 4b + 3.
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    _mm256_storeu_ps(out + c * ldo, _mm256_permute2f128_ps(r[c], r[4 + c], 0x20));
    _mm256_storeu_ps(out + (c + 4) * ldo, _mm256_permute2f128_ps(r[c], r[4 + c], 0x31));
  }
}
#endif

// The kW x kW block transpose of this build.
inline void transpose_block(const float* x, int64_t rs, float* out, int64_t ldo) {
#if defined(__AVX512F__)
  transpose16(x, rs, out, ldo);
#else
  transpose8(x, rs, out, ldo);
#endif
}

}  // namespace detail

// Xᵀ of X [n, d] (element (i, j) at x[i * rs + j * cs]) in panels of kPanel columns: panel p holds [d][kPanel],
// columns kPanel p .. kPanel (p + 1) - 1 of Xᵀ, the columns past n zero. `out` has room for ceil(n / kPanel) *
// kPanel * d floats. Whole kW x kW blocks of a row-major X go through registers.
inline void pack_transposed_panels(const float* x, int64_t n, int64_t d, int64_t rs, int64_t cs, float* out) {
  for (int64_t p0 = 0; p0 < n; p0 += kPanel) {
    float* panel = out + p0 * d;
    const int64_t w = std::min<int64_t>(kPanel, n - p0);
    int64_t i = 0;
    if (cs == 1)
      for (; i + kW <= w; i += kW) {
        int64_t j = 0;
        for (; j + kW <= d; j += kW) detail::transpose_block(x + (p0 + i) * rs + j, rs, panel + j * kPanel + i, kPanel);
        for (; j < d; ++j)
          for (int64_t ii = i; ii < i + kW; ++ii) panel[j * kPanel + ii] = x[(p0 + ii) * rs + j];
      }
    for (; i < kPanel; ++i) {
      const float* row = x + (p0 + i) * rs;
      if (i < w) {
        for (int64_t j = 0; j < d; ++j) panel[j * kPanel + i] = row[j * cs];
      } else {
        for (int64_t j = 0; j < d; ++j) panel[j * kPanel + i] = 0.0f;
      }
    }
  }
}

namespace detail {

// One tile: R rows of C by kW NC columns, the last vector masked by `tail`; row0/col0 place it in the product,
// for the epilogue. Every loop over the tile is unrolled (the pragmas): with one left rolled, GCC 12 keeps `acc`
// in memory and stores all 24 registers each step (3x slower).
template <int R, int NC, class Epilogue>
inline void gemm_tile(int64_t k, float alpha, const float* a, int64_t ars, int64_t acs, const float* b, int64_t ldb,
                      lanes_t tail, float* c, int64_t ldc, int64_t row0, int64_t col0, const Epilogue& epilogue) {
  vf acc[R][NC];
  const bool full = is_all(tail);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int j = 0; j < NC; ++j) acc[r][j] = zero();
  const float* ap[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) ap[r] = a + r * ars;
  for (int64_t kk = 0; kk < k; ++kk) {
    const float* brow = b + kk * ldb;
    vf bv[NC];
#pragma GCC unroll 8
    for (int j = 0; j < NC - 1; ++j) bv[j] = loadu(brow + kW * j);
    // A masked load only for a partial vector (AVX2's vmaskmovps is dearer than a plain load).
    bv[NC - 1] = full ? loadu(brow + kW * (NC - 1)) : loadu(brow + kW * (NC - 1), tail);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const vf av = set1(ap[r][kk * acs]);
#pragma GCC unroll 8
      for (int j = 0; j < NC; ++j) acc[r][j] = fmadd(av, bv[j], acc[r][j]);
    }
  }
  const vf va = set1(alpha);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    vf x[NC];
#pragma GCC unroll 8
    for (int j = 0; j < NC; ++j) x[j] = mul(acc[r][j], va);
    epilogue(row0 + r, col0, x, tail, c + r * ldc);
  }
}

template <int NC, class Epilogue>
inline void gemm_chunk(int64_t m, int64_t k, float alpha, const float* a, int64_t ars, int64_t acs, const float* b,
                       int64_t ldb, lanes_t tail, float* c, int64_t ldc, int64_t col0, const Epilogue& epilogue) {
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

// Epilogues: what becomes of a tile's row of results, x[NC] for row i, columns j .. j + kW NC - 1 (the last
// vector's lanes `tail`), bound for c.
template <int NC>
inline bool partial(int v, lanes_t tail) {
  return v == NC - 1 && !is_all(tail);
}
// Stores vector v of a row at c + kW v, masked where partial.
template <int NC>
inline void store_lanes(float* c, int v, vf x, lanes_t tail) {
  if (partial<NC>(v, tail))
    storeu(c + kW * v, x, tail);
  else
    storeu(c + kW * v, x);
}
template <int NC>
inline vf load_lanes(const float* c, int v, lanes_t tail) {
  return partial<NC>(v, tail) ? loadu(c + kW * v, tail) : loadu(c + kW * v);
}
struct StoreC {
  template <int NC>
  void operator()(int64_t, int64_t, const vf (&x)[NC], lanes_t tail, float* c) const {
#pragma GCC unroll 8
    for (int v = 0; v < NC; ++v) store_lanes<NC>(c, v, x[v], tail);
  }
};
struct AddToC {
  template <int NC>
  void operator()(int64_t, int64_t, const vf (&x)[NC], lanes_t tail, float* c) const {
#pragma GCC unroll 8
    for (int v = 0; v < NC; ++v) store_lanes<NC>(c, v, add(x[v], load_lanes<NC>(c, v, tail)), tail);
  }
};

// C[m, n] (rows ldc apart) = epilogue(alpha * A B): StoreC stores, AddToC accumulates. A[i, kk] is
// a[i * ars + kk * acs]. B's columns come in chunks of kPanel: chunk q starts at b + q * chunk_stride, and
// B[kk, kPanel q + j] is that + kk * ldb + j. A row-major B has chunk_stride kPanel; panels from
// pack_transposed_panels have ldb kPanel and chunk_stride kPanel k.
template <class Epilogue = StoreC>
inline void gemm_bcast(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t ars, int64_t acs,
                       const float* b, int64_t ldb, int64_t chunk_stride, float* c, int64_t ldc,
                       const Epilogue& epilogue = {}) {
  for (int64_t c0 = 0; c0 < n; c0 += kPanel) {
    const int64_t w = std::min<int64_t>(kPanel, n - c0);
    const int nc = int((w + kW - 1) / kW);
    const lanes_t tail = first(w - kW * (nc - 1));
    const float* bc = b + c0 / kPanel * chunk_stride;
    float* cc = c + c0;
    switch (nc) {
#if defined(__AVX512F__)
      case 4: detail::gemm_chunk<4>(m, k, alpha, a, ars, acs, bc, ldb, tail, cc, ldc, c0, epilogue); break;
      case 3: detail::gemm_chunk<3>(m, k, alpha, a, ars, acs, bc, ldb, tail, cc, ldc, c0, epilogue); break;
#endif
      case 2: detail::gemm_chunk<2>(m, k, alpha, a, ars, acs, bc, ldb, tail, cc, ldc, c0, epilogue); break;
      default: detail::gemm_chunk<1>(m, k, alpha, a, ars, acs, bc, ldb, tail, cc, ldc, c0, epilogue); break;
    }
  }
}

}  // namespace gaf::simd

#pragma GCC diagnostic pop
#endif
