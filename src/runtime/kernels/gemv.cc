#include "runtime/kernels/gemv.h"

#include <algorithm>

#include "runtime/kernels/common.h"

#include "runtime/kernels/simd_vec.h"

#if defined(GAF_SIMD)
#pragma GCC diagnostic push  // GCC 12's intrinsics headers trip -Wmaybe-uninitialized (_mm512_undefined_ps)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace gaf::runtime {

namespace {

constexpr int64_t kPanel = 64;  // columns per panel

#if defined(GAF_SIMD)
// A panel is computed in groups of 4 vectors of columns (one group with AVX-512, two with AVX2), and up to
// kRowsAtOnce rows of a at a time: R x 4 accumulators (x U) plus 4 of weights fit the registers (32 or 16).
constexpr int64_t kGroup = 4 * simd::kW;
constexpr int64_t kRowsAtOnce = simd::kW == 16 ? 4 : 2;

// Rows [0, R) of a against one group of a panel, w [K][kPanel] from the group's first column: R x 4
// accumulators, and U sets of them over alternate k (so that one or two rows still keep eight FMAs in flight).
// cols: the group's columns that exist (the last one is short).
template <int R, int U>
void group_rows(const float* a, int64_t lda, const float* w, int64_t k, float* y, int64_t ldy, int64_t cols) {
  using namespace simd;
  vf acc[U][R][4];
  for (int u = 0; u < U; ++u)
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < 4; ++j) acc[u][r][j] = zero();
  int64_t i = 0;
  for (; i + U <= k; i += U)
    for (int u = 0; u < U; ++u) {
      const float* wk = w + (i + u) * kPanel;
      vf b[4];
      for (int j = 0; j < 4; ++j) b[j] = loadu(wk + kW * j);
      for (int r = 0; r < R; ++r) {
        const vf ar = set1(a[r * lda + i + u]);
        for (int j = 0; j < 4; ++j) acc[u][r][j] = fmadd(ar, b[j], acc[u][r][j]);
      }
    }
  for (; i < k; ++i) {  // the last k when U does not divide K
    const float* wk = w + i * kPanel;
    for (int r = 0; r < R; ++r) {
      const vf ar = set1(a[r * lda + i]);
      for (int j = 0; j < 4; ++j) acc[0][r][j] = fmadd(ar, loadu(wk + kW * j), acc[0][r][j]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < 4; ++j) {
      vf s = acc[0][r][j];
      for (int u = 1; u < U; ++u) s = add(s, acc[u][r][j]);
      const int64_t c0 = kW * j;
      if (c0 >= cols) break;
      if (cols - c0 >= kW)
        storeu(y + r * ldy + c0, s);
      else
        storeu(y + r * ldy + c0, s, first(cols - c0));
    }
}

using GroupFn = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t);
#if defined(__AVX512F__)
constexpr GroupFn kGroupFns[4] = {group_rows<1, 2>, group_rows<2, 2>, group_rows<3, 1>, group_rows<4, 1>};
#else
constexpr GroupFn kGroupFns[2] = {group_rows<1, 2>, group_rows<2, 1>};
#endif
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
#if defined(GAF_SIMD)
      for (int64_t r0 = 0; r0 < m; r0 += kRowsAtOnce) {
        const int64_t rows = std::min(kRowsAtOnce, m - r0);
        for (int64_t g = 0; g < cols; g += kGroup)
          kGroupFns[rows - 1](a + r0 * lda, lda, w + g, k_, y + r0 * n_ + c0 + g, n_, std::min(kGroup, cols - g));
      }
#else
      for (int64_t r0 = 0; r0 < m; r0 += 4) {
        const int64_t rows = std::min<int64_t>(4, m - r0);
        for (int64_t r = r0; r < r0 + rows; ++r)
          for (int64_t j = 0; j < cols; ++j) {
            float s = 0.f;
            for (int64_t i = 0; i < k_; ++i) s += a[r * lda + i] * w[i * kPanel + j];
            y[r * n_ + c0 + j] = s;
          }
      }
#endif
    }
  });
}

}  // namespace gaf::runtime

#if defined(GAF_SIMD)
#pragma GCC diagnostic pop
#endif
