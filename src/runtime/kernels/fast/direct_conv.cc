// DirectConv: see direct_conv.h.
#include "runtime/kernels/fast/direct_conv.h"

#include <algorithm>
#include <array>
#include <utility>

#include "runtime/kernels/common.h"

namespace gaf::runtime {

namespace {

constexpr int64_t kBlockChannels = 128;  // input channels per weight block: 128 x 64 floats = 32 KiB, in L1
constexpr int64_t kPrefetchBlocks = 2;   // how far ahead the weights are prefetched (measured: 2 > 1, 4)
constexpr int kTileWidth = 7;            // output pixels per register tile

#if defined(GAF_SIMD) && defined(__AVX512F__)
#pragma GCC diagnostic push  // GCC 12's intrinsics headers trip -Wmaybe-uninitialized (_mm512_undefined_ps)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
using simd::kW;
constexpr int kVectors = int(DirectConv::kPanel / kW);

// R pixels (x, pixel stride ldp) by the panel:
//   acc[R][kPanel] += sum_{k < kc} x[i ldp + k] w[k][kPanel]
// while prefetching npf lines from pf into L2, one per step. 7 x 4 accumulators, 4 weights and a broadcast: GCC
// keeps one accumulator in memory, measured as fast as leaving one weight vector there instead.
template <int R>
void tile(const float* x, int64_t ldp, const float* w, int64_t kc, float* acc_mem, const float* pf, int64_t npf) {
  using namespace simd;
  vf acc[R][kVectors];
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < kVectors; ++j) acc[i][j] = loadu(acc_mem + i * DirectConv::kPanel + kW * j);
  for (int64_t k = 0; k < kc; ++k) {
    vf wv[kVectors];
    for (int j = 0; j < kVectors; ++j) wv[j] = loadu(w + k * DirectConv::kPanel + kW * j);
    if (k < npf) _mm_prefetch(reinterpret_cast<const char*>(pf + k * kW), _MM_HINT_T1);
    for (int i = 0; i < R; ++i) {
      const vf xv = set1(x[i * ldp + k]);
      for (int j = 0; j < kVectors; ++j) acc[i][j] = fmadd(xv, wv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < kVectors; ++j) storeu(acc_mem + i * DirectConv::kPanel + kW * j, acc[i][j]);
}

using TileFn = void (*)(const float*, int64_t, const float*, int64_t, float*, const float*, int64_t);
template <int... R>
constexpr std::array<TileFn, sizeof...(R) + 1> tiles(std::integer_sequence<int, R...>) {
  return {nullptr, tile<R + 1>...};
}
constexpr auto kTiles = tiles(std::make_integer_sequence<int, kTileWidth>{});
#pragma GCC diagnostic pop
#endif

}  // namespace

bool DirectConv::available() {
#if defined(GAF_SIMD) && defined(__AVX512F__)
  return true;
#else
  return false;
#endif
}

DirectConv::DirectConv(const float* w, const float* bias, int64_t m, int64_t c, int64_t kh, int64_t kw)
    : m_(m), c_(c), kh_(kh), kw_(kw), panels_((m + kPanel - 1) / kPanel) {
  const int64_t taps = kh * kw;
  packed_.assign(size_t(panels_ * taps * c * kPanel), 0.f);
  for (int64_t o = 0; o < m; ++o) {
    float* p = packed_.data() + (o / kPanel) * taps * c * kPanel + o % kPanel;
    for (int64_t i = 0; i < c; ++i)
      for (int64_t t = 0; t < taps; ++t) p[(t * c + i) * kPanel] = w[(o * c + i) * taps + t];
  }
  bias_.assign(size_t(panels_ * kPanel), 0.f);
  if (bias) std::copy(bias, bias + m, bias_.begin());
}

void DirectConv::run(const float* x, const Geometry& g, float* y, const ConvEpilogue& ep) const {
  GAF_ASSERT(g.n * g.oh * g.ow <= kMaxPixels, "DirectConv: more output pixels than its partial sums hold");
  // Contiguous ranges of panels per thread: the prefetch running past a panel's end fetches the thread's next one.
  parallel_for(panels_, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) run_panel(p, x, g, y, ep);
  });
}

void DirectConv::run_panel(int64_t panel, const float* x, const Geometry& g, float* y, const ConvEpilogue& ep) const {
#if defined(GAF_SIMD) && defined(__AVX512F__)
  using namespace simd;
  const int64_t pixels = g.n * g.oh * g.ow;
  alignas(64) float acc[kMaxPixels * kPanel];
  for (int64_t p = 0; p < pixels; ++p) std::copy_n(bias_.data() + panel * kPanel, kPanel, acc + p * kPanel);

  const float* wp = packed_.data() + panel * kh_ * kw_ * c_ * kPanel;
  const float* wend = packed_.data() + packed_.size();
  for (int64_t th = 0; th < kh_; ++th)
    for (int64_t tw = 0; tw < kw_; ++tw) {
      // The output columns whose input column ow sw + tw - pw lies inside the input.
      const int64_t lo_num = g.pw - tw, hi_num = g.w - 1 + g.pw - tw;
      const int64_t ow_lo = lo_num > 0 ? (lo_num + g.sw - 1) / g.sw : 0;
      const int64_t ow_hi = hi_num < 0 ? 0 : std::min(g.ow, hi_num / g.sw + 1);
      for (int64_t c0 = 0; c0 < c_; c0 += kBlockChannels) {
        const int64_t kc = std::min(kBlockChannels, c_ - c0);
        const float* w = wp + ((th * kw_ + tw) * c_ + c0) * kPanel;
        const float* pf = w + kPrefetchBlocks * kBlockChannels * kPanel;
        int64_t lines = pf < wend ? std::min<int64_t>(kc * kVectors, (wend - pf) / kW) : 0;
        for (int64_t n = 0; n < g.n && ow_lo < ow_hi; ++n)
          for (int64_t oh = 0; oh < g.oh; ++oh) {
            const int64_t ih = oh * g.sh + th - g.ph;
            if (ih < 0 || ih >= g.h) continue;
            for (int64_t o = ow_lo; o < ow_hi; o += kTileWidth) {
              const int64_t r = std::min<int64_t>(kTileWidth, ow_hi - o), npf = std::min(lines, kc);
              const float* xs = x + ((n * g.h + ih) * g.w + o * g.sw + tw - g.pw) * c_ + c0;
              kTiles[size_t(r)](xs, g.sw * c_, w, kc, acc + ((n * g.oh + oh) * g.ow + o) * kPanel, pf, npf);
              pf += npf * kW, lines -= npf;
            }
          }
        for (; lines > 0; --lines, pf += kW) _mm_prefetch(reinterpret_cast<const char*>(pf), _MM_HINT_T1);
      }
    }

  // The epilogue, from the partial sums to y.
  const vf lo = set1(ep.lo), hi = set1(ep.hi), lo2 = set1(ep.lo2), hi2 = set1(ep.hi2);
  const vf neg_a_log2e = set1(-ep.alpha * 1.44269504088896341f);
  const int64_t m0 = panel * kPanel, vectors = std::min<int64_t>(kVectors, (m_ - m0 + kW - 1) / kW);
  for (int64_t p = 0; p < pixels; ++p)
    for (int64_t j = 0; j < vectors; ++j) {
      const int64_t at = p * m_ + m0 + kW * j;
      const lanes_t lanes = first(m_ - m0 - kW * j);
      vf v = activatev(clamp(loadu(acc + p * kPanel + kW * j), lo, hi), ep.act, neg_a_log2e);
      if (ep.addend) v = clamp(add(v, loadu(ep.addend + at, lanes)), lo2, hi2);
      storeu(y + at, v, lanes);
    }
#else
  (void)panel, (void)x, (void)g, (void)y, (void)ep;
  GAF_ASSERT(false, "DirectConv needs AVX-512");
#endif
}

}  // namespace gaf::runtime
