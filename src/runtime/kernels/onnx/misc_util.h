// Helpers private to the misc kernel family (Constant, Shape, Resize, Einsum, quantization, ...): the compute
// type of a storage type, scalar reads of small control inputs, and the registration entry points of the
// family's files (all called from register_misc_ops in misc.cc).
#pragma once

#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/kernels/common.h"

namespace gaf::runtime {


template <class T>
inline constexpr bool is_16bit_float_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
template <class T>
inline constexpr bool is_float_like_v = std::is_floating_point_v<T> || is_16bit_float_v<T>;

// The single value of a scalar control input (rank 0, or one element): throws naming the node otherwise.
inline double scalar_input(const Tensor& t, const Node& node, const char* what) {
  GAF_CHECK(t.numel() == 1, "{}: input '{}' must be a scalar (one element), got shape {}", node.describe(),
            what, dims_to_string(t.dims()));
  return t.get_double(0);
}

// The output_datatype attribute of the ops that make a numeric tensor from scalar inputs (the window
// functions, MelWeightMatrix): float when absent; throws naming the node for a type the runtime cannot hold
// (String, an unknown value).
inline DType output_datatype_attr(const Node& node) {
  const DType dt = DType(node.attr_int("output_datatype", int64_t(DType::Float)));
  if (dt == DType::Undefined || dt == DType::String || dtype_size(dt) == 0)
    unsupported("{}: output_datatype {} is not supported", node.describe(), int(dt));
  return dt;
}

// Grain for parallel loops over elements: about 32K elements per chunk.
inline constexpr int64_t kElemGrain = 32768;

// Registration entry points of the family's files.
void register_misc_basic_ops(
    KernelRegistry& r);  // Constant, ConstantOfShape, Shape, Size, Range, Identity, ...
void register_misc_resize_ops(KernelRegistry& r);  // Resize, Upsample
void register_misc_einsum_ops(KernelRegistry& r);  // Einsum
void register_misc_quant_ops(KernelRegistry& r);   // QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear
void register_misc_linalg_ops(KernelRegistry& r);  // Det, HannWindow, HammingWindow, BlackmanWindow
void register_spectral_ops(KernelRegistry& r);     // DFT, STFT, MelWeightMatrix

}  // namespace gaf::runtime
