// PointwiseConv: see pointwise_conv.h.
#include "runtime/kernels/fast/pointwise_conv.h"

#include <algorithm>
#include <array>
#include <utility>

#include "runtime/kernels/common.h"


namespace gaf::runtime {

namespace {

constexpr int64_t kChunk = 48;  // about this many pixels per task

#if defined(GAF_SIMD)
#pragma GCC diagnostic push  // GCC 12's intrinsics headers trip -Wmaybe-uninitialized (_mm512_undefined_ps)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
using simd::kW;
// Pixels per tile for NV vectors of output channels: NV x PB accumulators plus NV weights and a broadcast stay
// within the vector registers. AVX-512 (32): 3 x 6 measured faster than 4 x 6, whose 31 registers leave no
// slack. AVX2 (16): the weights are left in memory (FMA operands) from 4 vectors on.
constexpr int tile_pixels(int nv) {
  if constexpr (kW == 16) return nv >= 5 ? 3 : nv == 4 ? 4 : nv == 3 ? 6 : nv == 2 ? 8 : 12;
  return nv >= 5 ? 2 : nv == 4 ? 3 : nv == 3 ? 4 : nv == 2 ? 6 : 12;
}
// Whether the NV weights of a channel are pinned in registers.
constexpr bool weights_in_registers(int nv) { return nv * tile_pixels(nv) + nv + 1 <= (kW == 16 ? 32 : 16); }

// `tiles` tiles one after another, each PB pixels from x (row stride k) by NV x kW output channels of a panel w
// ([k][NV x kW]); y and the addend have row stride ldy, `off` is the first tile's element offset in them,
// last_lanes counts the lanes of the last vector. The activation is a template argument: a run-time choice kept
// GCC from unrolling the epilogue, which spilled the accumulators (MobileNetV2 1.15x slower).
template <int NV, int PB, bool kAdd, Activation kAct>
void tile(const float* x, int64_t k, const float* w, const float* bias, float* y, int64_t ldy, int64_t off,
          int64_t last_lanes, const PointwiseConv::Epilogue& ep, int64_t tiles) {
  using namespace simd;
  const lanes_t last = first(last_lanes);
  const vf lo = set1(ep.lo), hi = set1(ep.hi);
  const vf lo2 = set1(ep.lo2), hi2 = set1(ep.hi2);
  const vf neg_a_log2e = set1(-ep.alpha * 1.44269504088896341f);
  const bool full = is_all(last);
  for (int64_t t = 0; t < tiles; ++t, x += PB * k, off += PB * ldy) {
    vf acc[PB][NV];
    for (int j = 0; j < NV; ++j) {
      const vf b = loadu(bias + kW * j);
      for (int i = 0; i < PB; ++i) acc[i][j] = b;
    }
    for (int64_t c = 0; c < k; ++c) {
      vf wv[NV];
      for (int j = 0; j < NV; ++j) {
        wv[j] = loadu(w + c * NV * kW + kW * j);
        // Keep the weights in registers: left to itself GCC 12 folds them into every FMA as a memory operand,
        // and the loads (NV x PB per channel instead of NV) then bound the tile at half the FMA rate.
        if constexpr (weights_in_registers(NV)) asm("" : "+v"(wv[j]));
      }
      for (int i = 0; i < PB; ++i) {
        const vf xv = set1(x[i * k + c]);
        for (int j = 0; j < NV; ++j) acc[i][j] = fmadd(xv, wv[j], acc[i][j]);
      }
    }
    for (int i = 0; i < PB; ++i)
      for (int j = 0; j < NV; ++j) {
        // Masked loads and stores only where needed: on AMD machines they cost more than plain ones.
        const bool partial = j == NV - 1 && !full;
        const int64_t at = off + i * ldy + kW * j;
        vf v = activatev(clamp(acc[i][j], lo, hi), kAct, neg_a_log2e);
        if constexpr (kAdd) {
          const vf a = partial ? loadu(ep.addend + at, last) : loadu(ep.addend + at);
          v = clamp(add(v, a), lo2, hi2);
        }
        if (partial)
          storeu(y + at, v, last);
        else
          storeu(y + at, v);
      }
  }
}

using TileFn = void (*)(const float*, int64_t, const float*, const float*, float*, int64_t, int64_t, int64_t,
                        const PointwiseConv::Epilogue&, int64_t);

// For each epilogue form (addend or not, activation): tiles of full height by vectors - 1; and for the
// r < tile_pixels(NV) pixels left at the end of a run, one tile of exactly r pixels (r tiles of one pixel each
// were latency-bound: NV independent FMA chains).
template <bool kAdd, Activation kAct>
constexpr TileFn kFull[] = {tile<1, tile_pixels(1), kAdd, kAct>, tile<2, tile_pixels(2), kAdd, kAct>,
                            tile<3, tile_pixels(3), kAdd, kAct>, tile<4, tile_pixels(4), kAdd, kAct>,
                            tile<5, tile_pixels(5), kAdd, kAct>, tile<6, tile_pixels(6), kAdd, kAct>};
template <int NV, bool kAdd, Activation kAct, int... R>
constexpr std::array<TileFn, sizeof...(R) + 1> tails(std::integer_sequence<int, R...>) {
  return {nullptr, tile<NV, R + 1, kAdd, kAct>...};
}
template <int NV, bool kAdd, Activation kAct>
constexpr auto kTail = tails<NV, kAdd, kAct>(std::make_integer_sequence<int, tile_pixels(NV) - 1>{});

// The full-height tile (r = 0) or the tile of r pixels, for nv vectors.
template <bool kAdd, Activation kAct>
TileFn pick(int64_t nv, int64_t r) {
  if (r == 0) return kFull<kAdd, kAct>[nv - 1];
  switch (nv) {
    case 1: return kTail<1, kAdd, kAct>[size_t(r)];
    case 2: return kTail<2, kAdd, kAct>[size_t(r)];
    case 3: return kTail<3, kAdd, kAct>[size_t(r)];
    case 4: return kTail<4, kAdd, kAct>[size_t(r)];
    case 5: return kTail<5, kAdd, kAct>[size_t(r)];
    default: return kTail<6, kAdd, kAct>[size_t(r)];
  }
}

TileFn tile_fn(const PointwiseConv::Epilogue& ep, int64_t nv, int64_t r) {
  using A = Activation;
  switch (ep.act) {
    case A::Swish: return ep.addend ? pick<true, A::Swish>(nv, r) : pick<false, A::Swish>(nv, r);
    case A::HardSwish: return ep.addend ? pick<true, A::HardSwish>(nv, r) : pick<false, A::HardSwish>(nv, r);
    default: return ep.addend ? pick<true, A::None>(nv, r) : pick<false, A::None>(nv, r);
  }
}
#pragma GCC diagnostic pop
#endif

}  // namespace

bool PointwiseConv::available() {
#if defined(GAF_SIMD)
  return true;
#else
  return false;
#endif
}

PointwiseConv::PointwiseConv(const float* w, const float* bias, int64_t n, int64_t k, int64_t panel_width)
    : n_(n), k_(k) {
  if (panel_width == 0) panel_width = kMaxPanel;
  GAF_ASSERT(panel_width > 0 && panel_width % kLanes == 0 && panel_width <= kMaxPanel, "PointwiseConv: panel width");
  // Taken once at its full size: line_vector's large buffers have all their pages in place, so a vector grown
  // panel by panel would hold its spare capacity resident. The panels' widths add up to n rounded up to kLanes
  // (every panel but the last is a multiple of kLanes wide).
  packed_.reserve(size_t(k * ((n + kLanes - 1) / kLanes * kLanes)));
  for (int64_t s = 0; s < n; s += panel_width) {
    const int64_t cols = std::min(panel_width, n - s), width = (cols + kLanes - 1) / kLanes * kLanes;
    panel_start_.push_back(s);
    panel_cols_.push_back(cols);
    panel_offset_.push_back(packed_.size());
    bias_offset_.push_back(bias_.size());
    packed_.resize(packed_.size() + size_t(k * width), 0.f);
    float* p = packed_.data() + panel_offset_.back();
    for (int64_t c = 0; c < k; ++c)
      for (int64_t j = 0; j < cols; ++j) p[c * width + j] = w[(s + j) * k + c];
    for (int64_t j = 0; j < width; ++j) bias_.push_back(bias && j < cols ? bias[s + j] : 0.f);
  }
}

void PointwiseConv::run(const float* x, int64_t pixels, float* y, const Epilogue& ep) const {
#if defined(GAF_SIMD)
  // Chunks of about kChunk pixels, of equal size; tasks chunk by chunk (all panels of a chunk together), so each
  // thread gets an even share of the pixels and writes whole output rows.
  const int64_t chunks = std::max<int64_t>(1, (pixels + kChunk - 1) / kChunk), panels = int64_t(panel_cols_.size());
  parallel_for(chunks * panels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t chunk = t / panels, panel = t % panels;
      const int64_t p0 = pixels * chunk / chunks, p1 = pixels * (chunk + 1) / chunks;
      Epilogue at = ep;
      if (ep.addend) at.addend = ep.addend + p0 * n_ + panel_start_[size_t(panel)];
      run_panel(panel, x + p0 * k_, p1 - p0, y + p0 * n_ + panel_start_[size_t(panel)], n_, at);
    }
  });
#else
  (void)x, (void)pixels, (void)y, (void)ep;
  GAF_ASSERT(false, "PointwiseConv needs AVX-512 or AVX2");
#endif
}

void PointwiseConv::run_panel(int64_t panel, const float* x, int64_t pixels, float* y, int64_t ldy,
                              const Epilogue& ep) const {
#if defined(GAF_SIMD)
  const int64_t cols = panel_cols_[size_t(panel)], nv = (cols + kW - 1) / kW;
  const int64_t last = cols - (nv - 1) * kW;  // lanes of the last vector
  const float* w = packed_.data() + panel_offset_[size_t(panel)];
  const float* b = bias_.data() + bias_offset_[size_t(panel)];
  const int64_t pb = tile_pixels(int(nv));
  const int64_t tiles = pixels / pb, p = tiles * pb;
  tile_fn(ep, nv, 0)(x, k_, w, b, y, ldy, 0, last, ep, tiles);
  if (pixels > p) tile_fn(ep, nv, pixels - p)(x + p * k_, k_, w, b, y, ldy, p * ldy, last, ep, 1);
#else
  (void)panel, (void)x, (void)pixels, (void)y, (void)ldy, (void)ep;
  GAF_ASSERT(false, "PointwiseConv needs AVX-512 or AVX2");
#endif
}

Activation activation_attribute(const Node& node, const char* name) {
  const std::string a = node.attr_string(name, "");
  GAF_CHECK(a.empty() || a == "Silu" || a == "HardSwish", "{}: {} '{}' is not Silu or HardSwish", node.describe(),
            name, a);
  return a.empty() ? Activation::None : a == "Silu" ? Activation::Swish : Activation::HardSwish;
}

}  // namespace gaf::runtime
