// Helpers private to the "extra" op family (losses, recurrent nets, string ops, detection and sampling ops):
// the arithmetic type of a storage type, conversion of a whole tensor to it, scalar reads of small control
// inputs, and the registration entry points of the family's files (all called from register_extra_ops).
#pragma once

#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/fastmath.h"
#include "runtime/kernels/common.h"

namespace gaf::runtime::extra {

// Arithmetic type of a storage type: 16-bit floats compute in fp32, everything else in itself.
template <class T>
inline constexpr bool is_half_like_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
template <class T>
using acc_t = arith_t<T>;

// Transcendentals in the compute type: fp32 goes through the branch-free fastmath versions (within a few ulp,
// and loops over them vectorise); double uses libm.
template <class A>
inline A exp_a(A x) {
  if constexpr (std::is_same_v<A, float>)
    return fastmath::exp(x);
  else
    return std::exp(x);
}
template <class A>
inline A expm1_a(A x) {
  if constexpr (std::is_same_v<A, float>)
    return fastmath::expm1(x);
  else
    return std::expm1(x);
}
template <class A>
inline A log_a(A x) {
  if constexpr (std::is_same_v<A, float>)
    return fastmath::log(x);
  else
    return std::log(x);
}
template <class A>
inline A log1p_a(A x) {
  return std::log1p(x);  // the elementwise family's fast math has no log1p
}
template <class A>
inline A tanh_a(A x) {
  if constexpr (std::is_same_v<A, float>)
    return fastmath::tanh(x);
  else
    return std::tanh(x);
}
template <class A>
inline A sigmoid_a(A x) {
  if constexpr (std::is_same_v<A, float>) {
    return fastmath::sigmoid(x);
  } else {
    const A e = std::exp(-std::abs(x));
    return x >= 0 ? 1 / (1 + e) : e / (1 + e);
  }
}

// The elements of `t` (storage type T) in the compute type: a pointer into the tensor when they are the same
// type, else into `buf`, which receives the converted values.
template <class T>
const acc_t<T>* compute_view(const Tensor& t, std::vector<acc_t<T>>& buf) {
  const T* p = t.data<T>();
  if constexpr (std::is_same_v<T, acc_t<T>>) {
    return p;
  } else {
    buf.resize(size_t(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) buf[size_t(i)] = to_arith(p[i]);
    return buf.data();
  }
}

// The single value of a scalar control input (rank 0, or one element): throws naming the node otherwise.
inline double scalar_value(const Tensor& t, const Node& node, const char* what) {
  GAF_CHECK(t.numel() == 1, "{}: input '{}' must be a scalar (one element), got shape {}", node.describe(),
            what, dims_to_string(t.dims()));
  return t.get_double(0);
}

// Whether output i is wanted: present in the node and not an unnamed optional output.
inline bool output_wanted(const KernelContext& ctx, int i) {
  return i < ctx.num_outputs() && i < ctx.node().num_outputs() && !ctx.node().output(i)->absent_output;
}

// Grain for parallel loops: about this many scalar operations per chunk.
inline constexpr int64_t kWorkGrain = 32768;

// Registration entry points of the family's files.
void register_extra_loss_ops(KernelRegistry& r);       // NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss
void register_extra_string_ops(KernelRegistry& r);     // StringNormalizer, TfIdfVectorizer
void register_extra_rnn_ops(KernelRegistry& r);        // RNN, GRU, LSTM
void register_extra_detection_ops(KernelRegistry& r);  // NonMaxSuppression, RoiAlign
void register_extra_sample_ops(KernelRegistry& r);     // GridSample, MaxUnpool

}  // namespace gaf::runtime::extra
