// A post-op chain applied to a product's or a convolution's fp32 output after the fact, where no oneDNN primitive
// ran it in its store phase: Gemv's rows (a decoder's prompt and decode steps), the plain-loop small products, a
// K = 0 product, convolutions on the paths oneDNN does not take.
//
// The output is viewed as [rows, cols] (cols its last dim). A stretch of a row goes through every op of the
// chain while it is in L1, the activations in their vector forms (ops/simd_math.h), a binary operand read
// through its broadcast strides (converted to fp32 once when it is not), the rows split across the threads.
// Before, each op was a scalar sweep over the whole output, and one with an operand ran on one thread: a
// 256-token LLaMA-style prompt's gate product with SiLU x up ([256, 768] x [768, 3072]) took 6.0 ms where the
// product alone took 3.9.
#pragma once

#include <cstdint>
#include <vector>

#include "gaf/kernel.h"
#include "runtime/kernels/dnnl/dnnl_ops.h"

namespace gaf::runtime::dnnl_detail {

using Dims = std::vector<int64_t>;

class PostOpPass {
 public:
  // `ops` on an output of dims `out`; each op that takes an input reads ctx.in(op.input), which must broadcast to
  // `out` (throws naming the node otherwise).
  PostOpPass(const Node& node, const std::vector<dnnl_ops::PostOp>& ops, KernelContext& ctx, const Dims& out);

  // The chain on all of y, in place, across the OpenMP threads.
  void apply(float* y) const;

 private:
  // Rows [r0, r1) of y, on the calling thread.
  void apply_rows(float* y, int64_t r0, int64_t r1) const;
  // A binary operand in the [rows, cols] view: element (r, c) at data[row_offset(r) + c * col_stride].
  struct Operand {
    const float* data = nullptr;
    int64_t col_stride = 0;
    int64_t row_stride = -1;  // >= 0 when row_offset(r) = r * row_stride
    Dims lead_strides;        // else per leading dim of the output
  };
  int64_t row_offset(const Operand& t, int64_t r) const;

  std::vector<dnnl_ops::PostOp> ops_;
  std::vector<Operand> operands_;  // per op; data null where the op takes no input
  std::vector<Tensor> converted_;  // operands converted to fp32
  Dims lead_;                      // the output's dims but the last
  int64_t rows_ = 1, cols_ = 1;
};

}  // namespace gaf::runtime::dnnl_detail
