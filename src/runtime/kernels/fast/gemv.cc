#include "runtime/kernels/fast/gemv.h"

#include <algorithm>
#include <type_traits>

#include "gaf/dtype.h"
#include "runtime/kernels/common.h"

#include "ops/simd_vec.h"

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

template <class W>
simd::vf load_w(const W* p) {
  if constexpr (std::is_same_v<W, float>) return simd::loadu(p);
  else if constexpr (std::is_same_v<W, uint16_t>) return simd::load_bf16(p);
  else return simd::load_i8(p);
}

// Rows [0, R) of a against one group of a panel, w [K][kPanel] from the group's first column: R x 4
// accumulators, and U sets of them over alternate k (so that one or two rows still keep eight FMAs in flight).
// cols: the group's columns that exist (the last one is short); scale: the group's column scales, or null.
// Meanwhile prefetches npf cache lines from pf into L2, spread over its steps.
template <class W, int R, int U>
void group_rows(const float* a, int64_t lda, const W* w, int64_t k, float* y, int64_t ldy, int64_t cols,
                const float* scale, const char* pf, int64_t npf) {
  using namespace simd;
  const int64_t steps = std::max<int64_t>(1, k / U), per = (npf + steps - 1) / steps;
  vf acc[U][R][4];
  for (int u = 0; u < U; ++u)
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < 4; ++j) acc[u][r][j] = zero();
  int64_t i = 0;
  for (; i + U <= k; i += U) {
    for (int64_t q = 0; q < per && npf > 0; ++q, --npf, pf += 64) _mm_prefetch(pf, _MM_HINT_T1);
    for (int u = 0; u < U; ++u) {
      const W* wk = w + (i + u) * kPanel;
      vf b[4];
      for (int j = 0; j < 4; ++j) {
        b[j] = load_w(wk + kW * j);
        // Keep the weights in registers: GCC 12 otherwise folds the load into each of the R FMAs that use it
        // (vfmadd231ps mem, ...), R loads of every weight vector instead of one, and a group of 4 rows is
        // load-bound: [768, 3072] with 16 rows 0.28 -> 0.25 ms, 128 rows 2.05 -> 1.6 ms (oneDNN's packed
        // primitive: 0.20, 1.5).
        __asm__("" : "+v"(b[j]));
      }
      for (int r = 0; r < R; ++r) {
        const vf ar = set1(a[r * lda + i + u]);
        for (int j = 0; j < 4; ++j) acc[u][r][j] = fmadd(ar, b[j], acc[u][r][j]);
      }
    }
  }
  for (; i < k; ++i) {  // the last k when U does not divide K
    const W* wk = w + i * kPanel;
    for (int r = 0; r < R; ++r) {
      const vf ar = set1(a[r * lda + i]);
      for (int j = 0; j < 4; ++j) acc[0][r][j] = fmadd(ar, load_w(wk + kW * j), acc[0][r][j]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < 4; ++j) {
      vf s = acc[0][r][j];
      for (int u = 1; u < U; ++u) s = add(s, acc[u][r][j]);
      const int64_t c0 = kW * j;
      if (c0 >= cols) break;
      if (scale) s = mul(s, loadu(scale + c0));
      if (cols - c0 >= kW)
        storeu(y + r * ldy + c0, s);
      else
        storeu(y + r * ldy + c0, s, first(cols - c0));
    }
}

template <class W>
using GroupFn = void (*)(const float*, int64_t, const W*, int64_t, float*, int64_t, int64_t, const float*,
                         const char*, int64_t);
#if defined(__AVX512F__)
template <class W>
constexpr GroupFn<W> kGroupFns[4] = {group_rows<W, 1, 2>, group_rows<W, 2, 2>, group_rows<W, 3, 1>,
                                     group_rows<W, 4, 1>};
#else
template <class W>
constexpr GroupFn<W> kGroupFns[2] = {group_rows<W, 1, 2>, group_rows<W, 2, 1>};
#endif
#endif

template <class W>
[[maybe_unused]] float to_float(W v) {
  if constexpr (std::is_same_v<W, uint16_t>) return bf16_to_float(v);
  else return float(v);
}

// Panel p of packed weights w [panels][K][kPanel] times rows of a into y.
template <class W>
void run_panel(const W* packed, const float* scales, int64_t p, int64_t panels, int64_t k, int64_t n,
               const float* a, int64_t m, int64_t lda, float* y) {
  const W* w = packed + p * k * kPanel;
  const float* sc = scales ? scales + p * kPanel : nullptr;
  const int64_t c0 = p * kPanel, cols = std::min(kPanel, n - c0);
#if defined(GAF_SIMD)
  // With several groups of rows only the first pass over the panel reads it from memory, and it runs at the
  // speed of the arithmetic: every pass prefetches its share of the next panel into L2 (a thread's panels are
  // consecutive), so that the stream from memory overlaps all of them.
  const int64_t groups = (m + kRowsAtOnce - 1) / kRowsAtOnce;
  const int64_t lines = groups > 1 && p + 1 < panels ? k * kPanel * int64_t(sizeof(W)) / 64 : 0;
  const int64_t share = (lines + groups - 1) / std::max<int64_t>(1, groups);
  const char* next = reinterpret_cast<const char*>(w + k * kPanel);
  for (int64_t r0 = 0, gi = 0; r0 < m; r0 += kRowsAtOnce, ++gi) {
    const int64_t rows = std::min(kRowsAtOnce, m - r0);
    const int64_t npf = std::max<int64_t>(0, std::min(share, lines - gi * share));
    for (int64_t g = 0; g < cols; g += kGroup)
      kGroupFns<W>[rows - 1](a + r0 * lda, lda, w + g, k, y + r0 * n + c0 + g, n, std::min(kGroup, cols - g),
                             sc ? sc + g : nullptr, next + gi * share * 64, g == 0 ? npf : 0);
  }
#else
  (void)panels;
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < cols; ++j) {
      float s = 0.f;
      for (int64_t i = 0; i < k; ++i) s += a[r * lda + i] * to_float(w[i * kPanel + j]);
      y[r * n + c0 + j] = sc ? s * sc[j] : s;
    }
#endif
}

// b [K, N] (or [N, K] transposed) -> [panel][K][kPanel], columns past N zero.
template <class W>
void pack(const W* b, int64_t k, int64_t n, bool transposed, W* out) {
  const int64_t panels = (n + kPanel - 1) / kPanel;
  for (int64_t p = 0; p < panels; ++p)
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < std::min(kPanel, n - p * kPanel); ++j) {
        const int64_t col = p * kPanel + j;
        out[(p * k + i) * kPanel + j] = transposed ? b[col * k + i] : b[i * n + col];
      }
}

}  // namespace

Gemv::Gemv(const float* b, int64_t k, int64_t n, bool transposed)
    : Gemv(Storage::F32, b, nullptr, k, n, transposed) {}

Gemv::Gemv(Storage storage, const void* raw, const float* scale, int64_t k, int64_t n, bool transposed)
    : storage_(storage), k_(k), n_(n), panels_((n + kPanel - 1) / kPanel), transposed_(transposed) {
  const size_t elems = size_t(panels_ * k * kPanel);
  if (storage == Storage::F32) {
    packed_.assign(elems * sizeof(float), 0);
    pack(static_cast<const float*>(raw), k, n, transposed, reinterpret_cast<float*>(packed_.data()));
  } else if (storage == Storage::BF16) {
    packed_.assign(elems * sizeof(uint16_t), 0);
    pack(static_cast<const uint16_t*>(raw), k, n, transposed, reinterpret_cast<uint16_t*>(packed_.data()));
  } else {
    packed_.assign(elems, 0);
    pack(static_cast<const int8_t*>(raw), k, n, transposed, reinterpret_cast<int8_t*>(packed_.data()));
    scale_.assign(size_t(panels_ * kPanel), 0.f);
    std::copy(scale, scale + n, scale_.begin());
  }
}

void Gemv::unpack(float* out) const {
  GAF_ASSERT(storage_ == Storage::F32, "Gemv::unpack: fp32 weights only");
  const float* w = reinterpret_cast<const float*>(packed_.data());
  parallel_for(panels_, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t c0 = p * kPanel, cols = std::min(kPanel, n_ - c0);
      for (int64_t i = 0; i < k_; ++i) {
        const float* row = w + (p * k_ + i) * kPanel;
        if (transposed_)
          for (int64_t j = 0; j < cols; ++j) out[(c0 + j) * k_ + i] = row[j];
        else
          std::copy(row, row + cols, out + i * n_ + c0);
      }
    }
  });
}

void Gemv::run(const float* a, int64_t m, int64_t lda, float* y) const {
  parallel_for(panels_, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      if (storage_ == Storage::F32)
        run_panel(reinterpret_cast<const float*>(packed_.data()), nullptr, p, panels_, k_, n_, a, m, lda, y);
      else if (storage_ == Storage::BF16)
        run_panel(reinterpret_cast<const uint16_t*>(packed_.data()), nullptr, p, panels_, k_, n_, a, m, lda, y);
      else
        run_panel(reinterpret_cast<const int8_t*>(packed_.data()), scale_.data(), p, panels_, k_, n_, a, m, lda, y);
    }
  });
}

}  // namespace gaf::runtime

#if defined(GAF_SIMD)
#pragma GCC diagnostic pop
#endif
