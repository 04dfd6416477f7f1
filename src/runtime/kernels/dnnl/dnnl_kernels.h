// Internal: the kernel factories and registration functions of the oneDNN family, one per source file.
#pragma once

#include <memory>
#include <vector>

#include "gaf/kernel.h"
#include "gaf/op_registry.h"
#include "runtime/kernels/dnnl/dnnl_ops.h"

namespace gaf::runtime::dnnl_detail {

std::unique_ptr<Kernel> make_matmul_kernel(const Node& node, std::vector<dnnl_ops::PostOp> post_ops);
std::unique_ptr<Kernel> make_gemm_kernel(const Node& node, std::vector<dnnl_ops::PostOp> post_ops);
std::unique_ptr<Kernel> make_conv_kernel(const Node& node, std::vector<dnnl_ops::PostOp> post_ops);

void register_matmul_ops(KernelRegistry& r);  // MatMul, Gemm            (matmul.cc)
void register_conv_ops(KernelRegistry& r);    // Conv, ConvTranspose     (conv.cc)
void register_pool_ops(KernelRegistry& r);    // *Pool, Global*Pool, MaxUnpool (pool.cc)
void register_quant_ops(
    KernelRegistry& r);  // MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv (quant.cc)

}  // namespace gaf::runtime::dnnl_detail
