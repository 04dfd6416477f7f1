// A 2-D convolution over channels-last fp32 activations for few output pixels and many channels, with its epilogue:
//   y[n, oh, ow, m] = ops(b[m] + sum_{kh, kw, c} x[n, oh sh + kh - ph, ow sw + kw - pw, c] w[m, c, kh, kw])
// (taps outside the input count as zero; ops: ConvEpilogue, pointwise_conv.h), dilation 1, one group.
//
// What it is for: the late stages of ResNet-style networks (7x7 outputs, 512 to 2048 channels), where every weight
// is used by only 49 pixels and the megabytes of weights come from memory on every run. oneDNN 2.6's direct
// convolution computes those at the FMA peak when the weights are in cache but loses 30-40% streaming them cold,
// whatever the layout (ResNet-50's 512ch 3x3 at 7x7: 0.64 ms warm, 0.90-1.0 ms with weights from memory).
// This kernel walks the weights once, in blocks of kBlockChannels input channels of one tap (32 KiB, held in L1
// while every output pixel takes its share), and prefetches the block kPrefetchBlocks ahead into L2 a line per
// step, so the stream overlaps the arithmetic: 0.78 ms on that convolution. Each task is a panel of 64 output
// channels (4 vectors); its partial sums for all the pixels (at most kMaxPixels) stay on the stack, the register
// tile is 7 pixels of an output row by the panel.
#pragma once

#include <cstdint>

#include "runtime/kernels/fast/line_vector.h"
#include "runtime/kernels/fast/pointwise_conv.h"

namespace gaf::runtime {

class DirectConv {
 public:
  // Input [n, h, w, c], output [n, oh, ow, m] (channels last); strides and the top / left pads. The bottom / right
  // pads are what oh and ow imply.
  struct Geometry {
    int64_t n = 1, h = 0, w = 0, oh = 0, ow = 0;
    int64_t sh = 1, sw = 1, ph = 0, pw = 0;
  };

  static constexpr int64_t kPanel = 64;      // output channels per task (4 AVX-512 vectors)
  static constexpr int64_t kMaxPixels = 64;  // output pixels (n oh ow) at most: the partial sums on the stack

  // Whether this build has the kernel (AVX-512).
  static bool available();

  // w: [m, c, kh, kw] (ONNX's layout); bias: [m] or null.
  DirectConv(const float* w, const float* bias, int64_t m, int64_t c, int64_t kh, int64_t kw);

  // g.n * g.oh * g.ow <= kMaxPixels. y may be the addend (read before written, element by element).
  void run(const float* x, const Geometry& g, float* y, const ConvEpilogue& ep) const;

 private:
  void run_panel(int64_t panel, const float* x, const Geometry& g, float* y, const ConvEpilogue& ep) const;

  int64_t m_, c_, kh_, kw_, panels_;
  line_vector<float> packed_;  // [panel][kh][kw][c][kPanel], zero past m
  line_vector<float> bias_;    // [panels * kPanel], zero past m
};

}  // namespace gaf::runtime
