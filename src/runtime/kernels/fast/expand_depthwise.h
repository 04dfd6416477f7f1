// An expansion 1x1 convolution, its activation, a depthwise KxK convolution and its activation in one pass over
// channels-last fp32 activations x [N, H, W, C] -> y [N, OH, OW, E]:
//   e[n, h, w, c] = act1(clamp(b1[c] + sum_k x[n, h, w, k] w1[c, k], lo1, hi1))        (never written to memory)
//   y[n, i, j, c] = act2(clamp(b2[c] + sum_{u,v} e[n, i*s + u - pad_top, j*s + v - pad_left, c] w2[c, u, v],
//                              lo2, hi2))
// with e zero outside the image (the depthwise convolution's padding); act1 and act2 Swish, HardSwish or none
// (pointwise_conv.h): ReLU6 in MobileNetV2, HardSwish in MobileNetV3, SiLU in EfficientNet.
//
// What it is for: MobileNet-style inverted residual blocks, where the expansion writes a tensor 6x wider than its
// input (MobileNetV2's 112x112x96: 4.8 MB) only for the depthwise convolution to read it back. Here each task
// owns a slice of the expanded channels and a band of output rows and keeps just the K expanded rows the
// depthwise window needs in a ring buffer that stays in L2: PointwiseConv (pointwise_conv.h) computes each
// expanded row into it, a register-blocked depthwise row kernel reads it.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "runtime/kernels/fast/pointwise_conv.h"

namespace gaf::runtime {

class ExpandDepthwise {
 public:
  struct Geometry {
    int64_t h = 0, w = 0;  // input rows and columns
    int64_t k = 3;         // depthwise window (k x k)
    int64_t stride = 1;
    int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
    int64_t oh() const { return (h + pad_top + pad_bottom - k) / stride + 1; }
    int64_t ow() const { return (w + pad_left + pad_right - k) / stride + 1; }
  };
  struct Clamps {
    float lo1 = -std::numeric_limits<float>::infinity(), hi1 = std::numeric_limits<float>::infinity();
    float lo2 = -std::numeric_limits<float>::infinity(), hi2 = std::numeric_limits<float>::infinity();
    Activation act1 = Activation::None, act2 = Activation::None;  // each after its clamp
    float alpha1 = 1.f, alpha2 = 1.f;                             // Swish's
  };

  // Whether this build has the kernel (it needs AVX-512) and whether it runs this geometry: k 3 or 5, stride 1 or
  // 2, every pad < k.
  static bool supports(const Geometry& g, int64_t e);

  // w1: [E, C] (ONNX's [E, C, 1, 1]); w2: [E, K, K] (ONNX's [E, 1, K, K]); biases [E] or null.
  ExpandDepthwise(const float* w1, const float* b1, const float* w2, const float* b2, int64_t e, int64_t c,
                  const Geometry& g, const Clamps& clamps);

  void run(const float* x, int64_t batch, float* y) const;

 private:
  Geometry g_;
  Clamps clamps_;
  int64_t e_, c_, chunk_;
  int64_t bands1_;  // row bands for one image (best_bands), chosen with chunk_ at construction
  PointwiseConv expand_;  // panels of chunk_ channels: one per task's channel slice
  std::vector<float> w2_;  // per panel: [K * K][chunk_] taps, channels innermost
  std::vector<float> b2_;
};

}  // namespace gaf::runtime
