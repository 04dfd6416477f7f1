#include "runtime/kernels/onnx/norm_ops.h"

namespace gaf::runtime::rn {

std::vector<double> tensor_values(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) v[i] = to_double(p[i]);
  });
  return v;
}

template <class C>
std::vector<C> expand_param(const Tensor& p, const std::vector<int64_t>& target, const Node& node,
                            const char* what) {
  std::vector<int64_t> pd = p.dims();
  while (pd.size() > target.size() && pd.front() == 1) pd.erase(pd.begin());
  bool ok = pd.size() <= target.size();
  for (size_t i = 0; ok && i < pd.size(); ++i) {
    int64_t t = target[target.size() - pd.size() + i];
    ok = pd[i] == t || pd[i] == 1;
  }
  GAF_CHECK(ok, "{}: {} of shape {} does not broadcast to the normalized shape {}", node.describe(), what,
            dims_to_string(p.dims()), dims_to_string(target));
  const int64_t n = numel_of(target);
  std::vector<C> out(static_cast<size_t>(n));
  visit_dtype(p.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* src = p.data<T>();
    if (p.numel() == n) {
      for (int64_t i = 0; i < n; ++i) out[i] = C(to_double(src[i]));
      return;
    }
    std::vector<int64_t> strides = broadcast_strides(pd, target);
    const int rank = int(target.size());
    for (int64_t i = 0; i < n; ++i) {
      int64_t rem = i, off = 0;
      for (int d = rank - 1; d >= 0; --d) {
        off += (rem % target[d]) * strides[d];
        rem /= target[d];
      }
      out[i] = C(to_double(src[off]));
    }
  });
  return out;
}
template std::vector<float> expand_param<float>(const Tensor&, const std::vector<int64_t>&, const Node&,
                                                const char*);
template std::vector<double> expand_param<double>(const Tensor&, const std::vector<int64_t>&, const Node&,
                                                  const char*);

DType declared_output_dtype(const Node& node, int i, std::initializer_list<DType> allowed, DType fallback) {
  if (i < node.num_outputs()) {
    DType d = node.output(i)->type.dtype;
    for (DType a : allowed)
      if (a == d) return d;
  }
  return fallback;
}

void store_values(const std::vector<double>& v, Tensor& t) {
  GAF_ASSERT(static_cast<size_t>(t.numel()) == v.size(), "store_values: size mismatch");
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) p[i] = cast_out<T>(v[i]);
  });
}

void check_float_input(const Tensor& t, const Node& node, const char* what) {
  if (!is_floating(t.dtype()))
    unsupported("{}: {} has element type {}; float, double, float16 and bfloat16 are supported",
                node.describe(), what, dtype_name(t.dtype()));
}

}  // namespace gaf::runtime::rn
