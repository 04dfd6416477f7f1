// Every op family registers its ops (traits + reference kernel) through one of these functions. Adding a family:
// declare it here and call it from register_all_op_families (all.cc).
#pragma once

#include "gaf/op_registry.h"

namespace gaf::runtime {

void register_all_op_families(OpRegistry& r);

void register_unary_ops(OpRegistry& r);          // unary math, activations
void register_binary_ops(OpRegistry& r);         // arithmetic, comparison, logic, variadic, Where, Clip, Cast
void register_reduce_ops(OpRegistry& r);         // Reduce*, ArgMax/ArgMin
void register_normalization_ops(OpRegistry& r);  // Softmax family, *Normalization
void register_shape_ops(OpRegistry& r);          // Reshape, Transpose, Concat, Slice, ... (data movement)
void register_index_ops(OpRegistry& r);          // Gather*, Scatter*, OneHot, NonZero, TopK, CumSum, Trilu, ...
void register_dnnl_ops(OpRegistry& r);           // Conv, ConvTranspose, MatMul, Gemm, pooling (oneDNN)
void register_misc_ops(OpRegistry& r);           // Constant, Shape, Size, Range, Resize, Einsum, Identity, ...
void register_random_ops(OpRegistry& r);         // RandomUniform/Normal(Like), Bernoulli
void register_fused_ops(OpRegistry& r);          // gaf.fused nodes
void register_gaf_ops(OpRegistry& r);            // gaf.Gelu, gaf.LayerNormalization, ... (rewrite results)
void register_extra_ops(OpRegistry& r);          // losses, RNN/GRU/LSTM, string, detection and sampling ops
void register_expand_depthwise_ops(OpRegistry& r);  // gaf.ExpandDepthwiseConv (expand-depthwise-fusion)
void register_squeeze_excitation_ops(OpRegistry& r);  // gaf.SqueezeExcitation (squeeze-excitation-fusion)
void register_attention_ops(OpRegistry& r);      // gaf.Attention (flash-style, from attention fusion)
void register_compressed_matmul(OpRegistry& r);  // gaf.CompressedMatMul (bf16/int8 weights, weight-compression)

}  // namespace gaf::runtime
