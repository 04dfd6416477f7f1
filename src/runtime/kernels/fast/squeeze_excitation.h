// Squeeze-and-excitation in one kernel over fp32 activations x, N images of P positions by C channels, stored
// channels-last [N, P, C] or channels-first [N, C, P]:
//   m[n, c] = (1 / P) sum_p x[n, p, c]                                     the squeeze (global average)
//   h[n, j] = act(clamp(b1[j] + sum_c w1[j, c] m[n, c], lo, hi))           j < R, the hidden layer
//   g[n, c] = gate(b2[c] + sum_j w2[c, j] h[n, j])                         gate: sigmoid, or clamp(a v + b, 0, 1)
//   y[n, p, c] = x[n, p, c] g[n, c]                                        the excitation
// or y = g alone (gate_only), where the scale went into the next convolution's weights (channel-scale-fold).
//
// What it is for: the squeeze-excitation blocks of EfficientNet, MobileNetV3 and RegNetY, a global average, two
// 1x1 convolutions on one pixel and a broadcast Mul: five kernels apart, each a few microseconds of launch for
// almost no work (EfficientNet-B0's 16 blocks: 0.65 ms of 6.8). Here one parallel region reads x for the sums
// (each thread a band of positions, or of channels when channels-first), one thread computes the gates from the
// partial sums (R C multiply-adds twice: at most 0.1 M in these models; the threads share that work in slices when
// the weights are large), and every thread then scales the band it summed, which its cache still holds when the
// image is small enough.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "runtime/kernels/fast/pointwise_conv.h"

namespace gaf::runtime {

class SqueezeExcitation {
 public:
  enum class Gate : unsigned char { Sigmoid, HardSigmoid };
  struct Params {
    float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();  // h's clamp
    Activation act = Activation::None;  // after the clamp (ReLU is the clamp at 0)
    float alpha = 1.f;                  // Swish's
    Gate gate = Gate::Sigmoid;
    float gate_alpha = 0.2f, gate_beta = 0.5f;  // HardSigmoid's
  };

  // w1: [R, C] (ONNX's [R, C, 1, 1]); w2: [C, R]; biases [R] and [C], or null.
  SqueezeExcitation(const float* w1, const float* b1, const float* w2, const float* b2, int64_t c, int64_t r,
                    const Params& p);

  // x as above, p positions per image; y: x's shape, or [N, C] gates when gate_only.
  void run(const float* x, int64_t n, int64_t p, bool channels_last, bool gate_only, float* y) const;

 private:
  // hidden[j] for j in [j0, j1) from the channel sums of one image (sums[C]; inv_p = 1 / P).
  void hidden_rows(const float* sums, float inv_p, int64_t j0, int64_t j1, float* hidden) const;
  // g[c] for c in [c0, c1) from the whole hidden layer.
  void gate_channels(const float* hidden, int64_t c0, int64_t c1, float* g) const;

  int64_t c_, r_;
  Params params_;
  std::vector<float> w1_;   // [R][C]
  std::vector<float> w2t_;  // [R][C]: w2 transposed, so the gates are computed along channels
  std::vector<float> b1_;   // [R]
  std::vector<float> b2_;   // [C]
};

}  // namespace gaf::runtime
