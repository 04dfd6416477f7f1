// The oneDNN family: MatMul, Gemm, Conv, ConvTranspose, pooling and the integer / quantized variants. The
// kernels live in the other files of this folder; this file registers them and provides the fused-anchor entry point of
// dnnl_ops.h.
#include "runtime/kernels/common.h"
#include "runtime/kernels/dnnl/dnnl_kernels.h"
#include "runtime/kernels/families.h"

namespace gaf::runtime {

namespace dnnl_ops {

bool supports_post_ops(const Node& anchor) {
  if (anchor.domain == "gaf" && anchor.op_type == "Conv") return anchor.input(0) && anchor.input(0)->type.dtype == DType::Float;
  if (!anchor.domain.empty()) return false;
  if (anchor.op_type != "MatMul" && anchor.op_type != "Gemm" && anchor.op_type != "Conv") return false;
  const Value* x = anchor.input(0);
  if (!x) return false;
  DType t = x->type.dtype;
  return t == DType::Float || t == DType::Float16 || t == DType::BFloat16;
}

std::unique_ptr<Kernel> make_anchor_kernel(const Node& anchor, std::vector<PostOp> post_ops) {
  if (anchor.domain.empty()) {
    if (anchor.op_type == "MatMul") return dnnl_detail::make_matmul_kernel(anchor, std::move(post_ops));
    if (anchor.op_type == "Gemm") return dnnl_detail::make_gemm_kernel(anchor, std::move(post_ops));
    if (anchor.op_type == "Conv") return dnnl_detail::make_conv_kernel(anchor, std::move(post_ops));
  }
  if (anchor.domain == "gaf" && anchor.op_type == "Conv")  // channels-last Conv (layout = "NHWC")
    return dnnl_detail::make_conv_kernel(anchor, std::move(post_ops));
  fail("{}: only MatMul, Gemm and Conv take fused post-ops", anchor.describe());
}

}  // namespace dnnl_ops

void register_dnnl_ops(KernelRegistry& r) {
  dnnl_detail::register_matmul_ops(r);
  dnnl_detail::register_conv_ops(r);
  dnnl_detail::register_pool_ops(r);
  dnnl_detail::register_quant_ops(r);
}

}  // namespace gaf::runtime
