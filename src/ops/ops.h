// The op families: each defines its ops in the op registry (include/gaf/op_registry.h): kind, flags, flop
// count and, for elementwise ops, the scalar formula generated kernels compute. This is the one place an op's
// meaning is written down; the passes, the planner, the cost model and the emitters read it from the
// registry, and each backend registers its kernels for these ops (the CPU runtime: runtime::KernelRegistry).
//
// Adding an op: define it in its family's file here, give it a kernel in each backend that runs it (a
// standard unary or binary op's CPU kernel is one functor in runtime/kernels/onnx/unary.cc or binary.cc), and a
// test.
#pragma once

#include "gaf/graph.h"
#include "gaf/op_registry.h"

namespace gaf::ops {

void register_all(OpRegistry& r);

void register_elementwise_ops(
    OpRegistry& r);                          // unary math, activations, arithmetic, comparison, logic,
                                             // variadic, Where, Clip, Cast, quantisation, our gaf activations
void register_reduction_ops(OpRegistry& r);  // Reduce*, ArgMax/ArgMin, CumSum, Softmax family, normalisations
void register_data_movement_ops(OpRegistry& r);  // reshapes, Transpose, Concat, Split, Slice, Gather,
                                                 // Scatter, Pad, Tile, Resize, ...
void register_linear_ops(
    OpRegistry& r);                     // Conv, MatMul, Gemm, pooling, Einsum, recurrent cells, and our
                                        // Attention, ExpandDepthwiseConv, SqueezeExcitation, CompressedMatMul
void register_misc_ops(OpRegistry& r);  // Constant, Shape, Range, random, strings, detection, losses,
                                        // window functions, Det, and fused nodes (gaf.fused)

}  // namespace gaf::ops
