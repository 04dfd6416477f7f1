// Shape functions shared by the op definitions (their flop counts) and the kernels: numpy broadcasting, the
// sliding-window geometry of Conv, ConvTranspose and the pooling ops (attribute parsing, auto_pad, output
// sizes) and numpy matmul shapes, following the ONNX operator definitions.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gaf/graph.h"

namespace gaf::ops {

using Dims = std::vector<int64_t>;

// numpy broadcasting of `shapes`; throws naming the node when they cannot be broadcast together.
Dims broadcast_shape(std::span<const Dims> shapes, const Node& node);
Dims broadcast_shape(const Dims& a, const Dims& b, const Node& node);
// Element strides of a tensor of `dims` read in the broadcast `out` shape (0 along broadcast dimensions).
Dims broadcast_strides(const Dims& dims, const Dims& out);

// Static dims of input i of a node, or empty optional when unknown.
std::optional<Dims> static_input_dims(const Node& n, int i);

// Channels-last activations (gaf.Conv / gaf.MaxPool / gaf.AveragePool with layout = "NHWC"): the logical
// [N, C, spatial...] dims of physical [N, spatial..., C] ones; ranks below 3 pass unchanged.
Dims channels_last_logical(const Dims& physical);

// Attributes of a windowed op, as written on the node (empty vectors: not given).
struct WindowAttrs {
  Dims kernel_shape, strides, dilations, pads;
  std::string auto_pad = "NOTSET";
  bool ceil_mode = false;
  // ConvTranspose only.
  Dims output_padding, output_shape;

  static WindowAttrs parse(const Node& node);
};

// Resolved spatial geometry: per spatial dim the input size, kernel, stride, dilation, pads and output size.
struct Window {
  Dims in, k, s, d, pb, pe, out;
  int rank() const { return int(in.size()); }
  int64_t extent(int i) const { return (k[i] - 1) * d[i] + 1; }  // dilated kernel size
};

// Forward window (Conv, pooling): `kernel` is the spatial kernel (Conv: from the weights). Throws naming the
// node for inconsistent attributes or an input smaller than the window.
Window forward_window(const Node& node, const WindowAttrs& a, const Dims& in, const Dims& kernel);

// ConvTranspose window: out = s*(in-1) + output_padding + extent - pb - pe, or pads derived from output_shape
// / auto_pad. The returned pe is net of output_padding, so out = s*(in-1) + extent - pb - pe; pads may be
// negative when output_padding or output_shape ask for more than the natural size (the extra outputs get only
// the bias).
Window transpose_window(const Node& node, const WindowAttrs& a, const Dims& in, const Dims& kernel);

// Channel bookkeeping and spatial window of one Conv / ConvTranspose (and ConvInteger / QLinearConv) call.
struct ConvShape {
  int64_t N = 0, C = 0, M = 0, G = 1;  // batch, input channels, output channels, groups
  Window win;
  Dims out;  // N, M, spatial
};
// Validates X [N, C, spatial], W (Conv: [M, C/G, k]; ConvTranspose: [C, M/G, k]) and the optional bias dims.
ConvShape conv_shape(const Node& node, bool transpose, const WindowAttrs& attrs, int64_t group, const Dims& x,
                     const Dims& w, const Dims* b);

// numpy matmul shapes of A and B: 1-D operands promoted, inner dims checked, batch dims broadcast.
struct MatMulShape {
  Dims out;               // ONNX output dims
  Dims batch;             // broadcast batch dims
  Dims a_batch, b_batch;  // each operand's own batch dims
  int64_t M = 0, N = 0, K = 0;
  bool a_vec = false, b_vec = false;
};
MatMulShape matmul_shape(const Node& node, const Dims& a, const Dims& b);

// numpy matmul of A and B: 1-D operands, broadcast batch dims. For output batch i, A's matrix is
// a_index[i] (offset a_index[i] * M * K) and B's is b_index[i].
struct BatchedMatMul {
  Dims out;                                // ONNX output dims
  Dims batch;                              // broadcast batch dims
  int64_t M = 0, N = 0, K = 0, count = 1;  // count: number of output matrices
  bool a_vec = false, b_vec = false;
  std::vector<int64_t> a_index, b_index;
};
BatchedMatMul batched_matmul(const Node& node, const Dims& a, const Dims& b);

}  // namespace gaf::ops
