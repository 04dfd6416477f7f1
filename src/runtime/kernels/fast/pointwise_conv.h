// A 1x1 convolution over channels-last fp32 activations, with its epilogue, on register tiles (ops/simd_vec.h):
//   y[p, n] = ops(b[n] + sum_k x[p, k] w[n, k])   for p < pixels, n < N   (x [pixels, K], y [pixels, N])
// ops: clamp(act(clamp(v, lo, hi)) + addend, lo2, hi2), act an activation (Swish, HardSwish or none), the addend a
// residual [pixels, N] like y (or none): Relu, Clip, SiLU, HardSwish, a residual Add, and clamps on either side.
//
// What it is for: the pointwise convolutions of MobileNet-style blocks, a GEMM of many pixels by few channels.
// Each tile keeps 2 to 12 pixels by up to 6 vectors of output channels in registers, the weights of one input
// channel in registers too (with AVX2 where they fit), and streams the pixels' inputs as broadcasts: two FMAs per
// cycle where oneDNN 2.6's 1x1 convolution measured 60-75% of that on such shapes (AVX-512, MobileNetV2's
// 112x112, 16 -> 96 expansion: 82 us against oneDNN's 133 us). The weights are packed once into panels of up to
// kMaxPanel output channels.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "gaf/graph.h"
#include "runtime/kernels/fast/line_vector.h"
#include "ops/simd_math.h"

namespace gaf::runtime {

// An activation a convolution epilogue applies: Swish x sigmoid(alpha x) (SiLU at alpha 1), HardSwish
// x clamp(x / 6 + 1/2, 0, 1), or none.
enum class Activation : unsigned char { None, Swish, HardSwish };

// The activation a fused op's string attribute `name` names: "Silu" (Swish at alpha 1), "HardSwish", or none when
// absent; anything else throws naming the node (gaf.ExpandDepthwiseConv, gaf.SqueezeExcitation).
Activation activation_attribute(const Node& node, const char* name);

// The scalar form (for reference paths), with the vector one's limits.
inline float activate(float x, Activation act, float alpha) {
  if (act == Activation::HardSwish) return x * std::min(1.f, std::max(0.f, x * (1.f / 6.f) + 0.5f));
  return act == Activation::Swish ? simd::swish(x, alpha) : x;
}

#if defined(GAF_SIMD)
// activate() on simd::kW lanes; neg_a_log2e = -alpha log2(e) (simd::swishv).
inline simd::vf activatev(simd::vf x, Activation act, simd::vf neg_a_log2e) {
  if (act == Activation::Swish) return simd::swishv(x, neg_a_log2e);
  if (act == Activation::HardSwish) return simd::hard_swishv(x);
  return x;
}
#endif

// What a convolution kernel of our own applies to each output v (PointwiseConv, DirectConv):
//   clamp(act(clamp(v, lo, hi)) + addend, lo2, hi2)
struct ConvEpilogue {
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  Activation act = Activation::None;  // after the clamp, before the addend
  float alpha = 1.f;                  // Swish's
  const float* addend = nullptr;      // like y: [pixels, N]
  float lo2 = -std::numeric_limits<float>::infinity(), hi2 = std::numeric_limits<float>::infinity();
};

class PointwiseConv {
 public:
  using Epilogue = ConvEpilogue;

  // Whether this build has the kernel (it needs AVX-512 or AVX2).
  static bool available();

  // Channels per vector (16 with AVX-512, 8 with AVX2) and per panel at most (6 vectors).
#if defined(GAF_SIMD)
  static constexpr int64_t kLanes = simd::kW;
#else
  static constexpr int64_t kLanes = 16;
#endif
  static constexpr int64_t kMaxPanel = 6 * kLanes;

  // w: [N, K] (ONNX's [M, C, 1, 1]); bias: [N] or null. The output channels are computed in panels of
  // panel_width (a multiple of kLanes, at most kMaxPanel; 0: kMaxPanel) channels, the last one narrower.
  PointwiseConv(const float* w, const float* bias, int64_t n, int64_t k, int64_t panel_width = 0);

  // y may be the addend (read before written, element by element).
  void run(const float* x, int64_t pixels, float* y, const Epilogue& ep) const;

  // One panel's output channels for `pixels` pixels of x, on the calling thread: y points at the panel's first
  // channel of the first pixel, pixel rows ldy floats apart (the addend likewise).
  void run_panel(int64_t panel, const float* x, int64_t pixels, float* y, int64_t ldy, const Epilogue& ep) const;

  int64_t n() const { return n_; }
  int64_t k() const { return k_; }
  int64_t panels() const { return int64_t(panel_cols_.size()); }
  int64_t panel_start(int64_t p) const { return panel_start_[size_t(p)]; }
  int64_t panel_cols(int64_t p) const { return panel_cols_[size_t(p)]; }

 private:
  int64_t n_, k_;
  std::vector<int64_t> panel_cols_;   // output channels per panel (kMaxPanel, ..., the rest)
  std::vector<int64_t> panel_start_;  // first output channel of each panel
  std::vector<size_t> panel_offset_;  // each panel's [K][width rounded up to kLanes] weights in packed_
  std::vector<size_t> bias_offset_;   // each panel's bias in bias_
  line_vector<float> packed_, bias_;  // bias_ zero-padded to the panels' width
};

}  // namespace gaf::runtime
