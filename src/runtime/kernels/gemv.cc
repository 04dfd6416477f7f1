#include "runtime/kernels/gemv.h"

#include <algorithm>

#include "runtime/kernels/common.h"
#include "runtime/kernels/pointwise_conv.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#if defined(__AVX512F__)
#pragma GCC diagnostic push  // GCC 12's intrinsics headers trip -Wmaybe-uninitialized (_mm512_undefined_ps)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace gaf::runtime {

namespace {

constexpr int64_t kPanel = 64;  // columns per panel: four vectors

#if defined(__AVX512F__)
// Rows [0, R) of a against one panel w [K][64]: R x 4 accumulators, and U sets of them over alternate k (so that
// one or two rows still keep eight FMAs in flight). cols: the panel's columns that exist (the last one is short).
template <int R, int U>
void panel_rows(const float* a, int64_t lda, const float* w, int64_t k, float* y, int64_t ldy, int64_t cols) {
  __m512 acc[U][R][4];
  for (int u = 0; u < U; ++u)
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < 4; ++j) acc[u][r][j] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + U <= k; i += U)
    for (int u = 0; u < U; ++u) {
      const float* wk = w + (i + u) * kPanel;
      __m512 b[4];
      for (int j = 0; j < 4; ++j) b[j] = _mm512_loadu_ps(wk + 16 * j);
      for (int r = 0; r < R; ++r) {
        const __m512 ar = _mm512_set1_ps(a[r * lda + i + u]);
        for (int j = 0; j < 4; ++j) acc[u][r][j] = _mm512_fmadd_ps(ar, b[j], acc[u][r][j]);
      }
    }
  for (; i < k; ++i) {  // the last k when U does not divide K
    const float* wk = w + i * kPanel;
    for (int r = 0; r < R; ++r) {
      const __m512 ar = _mm512_set1_ps(a[r * lda + i]);
      for (int j = 0; j < 4; ++j) acc[0][r][j] = _mm512_fmadd_ps(ar, _mm512_loadu_ps(wk + 16 * j), acc[0][r][j]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < 4; ++j) {
      __m512 s = acc[0][r][j];
      for (int u = 1; u < U; ++u) s = _mm512_add_ps(s, acc[u][r][j]);
      const int64_t c0 = 16 * j;
      if (c0 >= cols) break;
      const __mmask16 m = cols - c0 >= 16 ? __mmask16(0xFFFF) : tail_mask(cols - c0);
      _mm512_mask_storeu_ps(y + r * ldy + c0, m, s);
    }
}

using PanelFn = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t);
constexpr PanelFn kPanelFns[4] = {panel_rows<1, 2>, panel_rows<2, 2>, panel_rows<3, 1>, panel_rows<4, 1>};
#endif

}  // namespace

Gemv::Gemv(const float* b, int64_t k, int64_t n, bool transposed)
    : k_(k), n_(n), panels_((n + kPanel - 1) / kPanel), packed_(size_t(panels_ * k * kPanel), 0.f) {
  for (int64_t p = 0; p < panels_; ++p)
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < std::min(kPanel, n - p * kPanel); ++j) {
        const int64_t col = p * kPanel + j;
        packed_[size_t((p * k + i) * kPanel + j)] = transposed ? b[col * k + i] : b[i * n + col];
      }
}

void Gemv::run(const float* a, int64_t m, int64_t lda, float* y) const {
  parallel_for(panels_, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const float* w = packed_.data() + p * k_ * kPanel;
      const int64_t c0 = p * kPanel, cols = std::min(kPanel, n_ - c0);
      for (int64_t r0 = 0; r0 < m; r0 += 4) {
        const int64_t rows = std::min<int64_t>(4, m - r0);
#if defined(__AVX512F__)
        kPanelFns[rows - 1](a + r0 * lda, lda, w, k_, y + r0 * n_ + c0, n_, cols);
#else
        for (int64_t r = r0; r < r0 + rows; ++r)
          for (int64_t j = 0; j < cols; ++j) {
            float s = 0.f;
            for (int64_t i = 0; i < k_; ++i) s += a[r * lda + i] * w[i * kPanel + j];
            y[r * n_ + c0 + j] = s;
          }
#endif
      }
    }
  });
}

}  // namespace gaf::runtime

#if defined(__AVX512F__)
#pragma GCC diagnostic pop
#endif
