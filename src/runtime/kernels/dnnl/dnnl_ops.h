// oneDNN anchor kernels with fused epilogues, for the fusion engine.
//
// A MatMul, Gemm or Conv node can be compiled together with a chain of post-ops that oneDNN applies to the
// result before it is written (no extra pass over memory):
//
//   std::vector<PostOp> ops = {PostOp::add(2), PostOp::relu()};       // relu(conv(x, w) + residual)
//   auto k = dnnl_ops::make_anchor_kernel(conv_node, ops);
//
// The kernel reads its context inputs as: 0..n-1 the anchor's own inputs in the anchor's order (absent
// optional inputs may be null), then any further inputs named by Add post-ops. Attributes and static shapes
// come from `anchor` (which may be a node of a fused body); output 0 of the context is the result. The
// unfused runtime kernels are these kernels with an empty chain.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "gaf/kernel.h"

namespace gaf::runtime::dnnl_ops {

struct PostOp {
  enum class Kind : uint8_t {
    Relu,       // x > 0 ? x : alpha * x   (alpha = 0: Relu; alpha > 0: LeakyRelu)
    GeluErf,    // 0.5 x (1 + erf(x / sqrt 2))
    GeluTanh,   // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    Swish,      // x * sigmoid(alpha * x)   (alpha = 1: SiLU)
    HardSwish,  // x * min(max(x + 3, 0), 6) / 6   (ONNX HardSwish)
    Clip,       // min(max(x, alpha), beta)   (Relu6: alpha 0, beta 6)
    Linear,     // alpha * x + beta
    Add,        // x + addend, the addend being context input `input`, numpy-broadcast into the output
    Eltwise,    // f(x) for the unary function `eltwise` (alpha, beta its parameters)
    Binary,     // x (op) t, t being context input `input`, numpy-broadcast into the output (x first)
  };
  // Unary functions oneDNN applies in a post-op; Pow is alpha * x^beta, Elu's alpha is ONNX's.
  enum class Unary : uint8_t { Sigmoid, Tanh, Abs, Exp, Sqrt, Log, Elu, Mish, Round, Pow, Softplus };
  enum class BinaryOp : uint8_t { Mul, Sub, Div, Max, Min };
  Kind kind = Kind::Relu;
  float alpha = 0.f;
  float beta = 0.f;
  int input = -1;  // Add and Binary
  Unary eltwise = Unary::Sigmoid;
  BinaryOp binary = BinaryOp::Mul;
  bool takes_input() const { return kind == Kind::Add || kind == Kind::Binary; }

  static PostOp relu(float negative_slope = 0.f) { return {Kind::Relu, negative_slope, 0.f, -1}; }
  static PostOp gelu_erf() { return {Kind::GeluErf, 0.f, 0.f, -1}; }
  static PostOp gelu_tanh() { return {Kind::GeluTanh, 0.f, 0.f, -1}; }
  static PostOp swish(float alpha = 1.f) { return {Kind::Swish, alpha, 0.f, -1}; }
  static PostOp hard_swish() { return {Kind::HardSwish, 0.f, 0.f, -1}; }
  static PostOp clip(float lo, float hi) { return {Kind::Clip, lo, hi, -1}; }
  static PostOp linear(float alpha, float beta) { return {Kind::Linear, alpha, beta, -1}; }
  static PostOp add(int input) { return {Kind::Add, 0.f, 0.f, input}; }
  static PostOp unary(Unary f, float alpha = 0.f, float beta = 0.f) {
    PostOp p{Kind::Eltwise, alpha, beta, -1};
    p.eltwise = f;
    return p;
  }
  static PostOp binary_op(BinaryOp op, int input) {
    PostOp p{Kind::Binary, 0.f, 0.f, input};
    p.binary = op;
    return p;
  }
};

std::string_view post_op_name(PostOp::Kind k);

// Prepares a post-op chain for oneDNN 2.6, whose fused kernels (brgemm matmul and convolution) apply one
// parameter set per eltwise algorithm: a second linear, clip, pow... with other parameters computed with the
// first one's (MatMul -> *2 -> *3 gave 4x). Adjacent Linears and adjacent Clips merge into one; false, with
// `why`, when an algorithm still repeats with other parameters (the chain then has no post-op form).
bool normalize_post_ops(std::vector<PostOp>& ops, std::string* why);

// Whether make_anchor_kernel accepts post-ops for this node: MatMul, Gemm or Conv whose element type (from
// the static type of input 0) is fp32, fp16 or bf16. Other dtypes run on plain loops and take no post-ops.
bool supports_post_ops(const Node& anchor);

// The kernel of MatMul / Gemm / Conv `anchor` followed by `post_ops`. Throws gaf::Error for other ops or a
// bad chain (an Add without input index).
std::unique_ptr<Kernel> make_anchor_kernel(const Node& anchor, std::vector<PostOp> post_ops);

}  // namespace gaf::runtime::dnnl_ops
