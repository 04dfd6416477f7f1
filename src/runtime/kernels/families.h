// Every kernel family registers the CPU kernels of its ops (defined in src/ops) through one of these
// functions. Adding a family: declare it here and call it from register_all_kernel_families (all.cc).
#pragma once

#include "gaf/kernel.h"

namespace gaf::runtime {

void register_all_kernel_families(KernelRegistry& r);

void register_unary_ops(KernelRegistry& r);   // unary math, activations
void register_binary_ops(KernelRegistry& r);  // arithmetic, comparison, logic, variadic, Where, Clip, Cast
void register_reduce_ops(KernelRegistry& r);  // Reduce*, ArgMax/ArgMin
void register_normalization_ops(KernelRegistry& r);  // Softmax family, *Normalization
void register_shape_ops(KernelRegistry& r);          // Reshape, Transpose, Concat, Slice, ... (data movement)
void register_index_ops(KernelRegistry& r);   // Gather*, Scatter*, OneHot, NonZero, TopK, CumSum, Trilu, ...
void register_dnnl_ops(KernelRegistry& r);    // Conv, ConvTranspose, MatMul, Gemm, pooling (oneDNN)
void register_misc_ops(KernelRegistry& r);    // Constant, Shape, Size, Range, Resize, Einsum, Identity, ...
void register_random_ops(KernelRegistry& r);  // RandomUniform/Normal(Like), Bernoulli
void register_fused_ops(KernelRegistry& r);   // gaf.fused nodes
void register_control_flow_ops(
    KernelRegistry& r);  // If, Loop, Scan, SequenceMap (their subgraphs in sessions of their own)
void register_sequence_ops(KernelRegistry& r);  // Sequence*, SplitToSequence, ConcatFromSequence, Optional*
void register_gaf_ops(KernelRegistry& r);     // gaf.Gelu, gaf.LayerNormalization, ... (rewrite results)
void register_extra_ops(KernelRegistry& r);   // losses, RNN/GRU/LSTM, string, detection and sampling ops
void register_expand_depthwise_ops(KernelRegistry& r);    // gaf.ExpandDepthwiseConv (expand-depthwise-fusion)
void register_squeeze_excitation_ops(KernelRegistry& r);  // gaf.SqueezeExcitation (squeeze-excitation-fusion)
void register_attention_ops(KernelRegistry& r);  // gaf.Attention (flash-style, from attention fusion)
void register_compressed_matmul(
    KernelRegistry& r);  // gaf.CompressedMatMul (bf16/int8 weights, weight-compression)

}  // namespace gaf::runtime
