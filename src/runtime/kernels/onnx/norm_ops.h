// Normalisation family: the registration entry points of its files and the helpers they share.
#pragma once

#include "runtime/kernels/onnx/reduce_util.h"

namespace gaf::runtime::rn {

void register_softmax_ops(KernelRegistry& r);     // Softmax, LogSoftmax, Hardmax (norm_softmax.cc)
void register_layer_norm_ops(KernelRegistry& r);  // LayerNormalization, InstanceNormalization (norm_layer.cc)
void register_batch_norm_ops(KernelRegistry& r);  // BatchNormalization (norm_batch.cc)
void register_misc_norm_ops(
    KernelRegistry& r);  // LpNormalization, MeanVarianceNormalization, LRN (norm_misc.cc)

// Sum and sum of squares of n contiguous values of T, accumulated in double (vectorised).
template <class T>
inline void row_moments(const T* x, int64_t n, double& sum, double& sumsq) {
  double s = 0, q = 0;
  for_compute_blocks(x, n, kConvBlock, [&](const compute_t<T>* p, int64_t, int64_t cnt) {
#pragma omp simd reduction(+ : s, q)
    for (int64_t i = 0; i < cnt; ++i) {
      double v = double(p[i]);
      s += v;
      q += v * v;
    }
  });
  sum = s;
  sumsq = q;
}

// Mean and 1/sqrt(var + eps) from the moments of n values (population variance, clamped at 0).
inline void mean_inv_std(double sum, double sumsq, int64_t n, double eps, double& mean, double& inv_std) {
  mean = sum / double(n);
  double var = sumsq / double(n) - mean * mean;
  var = var < 0 ? 0 : var;  // rounding; a NaN (an infinite or NaN element) stays NaN, as numpy's mean and var give
  inv_std = 1.0 / std::sqrt(var + eps);
}

// All values of a (small) numeric tensor as double, e.g. per-channel parameters.
std::vector<double> tensor_values(const Tensor& t);

// A parameter tensor (Scale, B of LayerNormalization) broadcast to `target` dims and flattened, in compute
// type C. Its dims must broadcast to target without growing it (numpy rules, leading 1s allowed).
template <class C>
std::vector<C> expand_param(const Tensor& p, const std::vector<int64_t>& target, const Node& node,
                            const char* what);

// Output i's element type as declared by the model when it is one of `allowed`, else `fallback`.
DType declared_output_dtype(const Node& node, int i, std::initializer_list<DType> allowed, DType fallback);

// Writes double values into a tensor of any floating type.
void store_values(const std::vector<double>& v, Tensor& t);

// Checks that a tensor has a floating element type the normalisation kernels support.
void check_float_input(const Tensor& t, const Node& node, const char* what);

}  // namespace gaf::runtime::rn
