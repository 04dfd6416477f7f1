// ScatterElements (and the deprecated Scatter), ScatterND. The output starts as a copy of data; updates are
// applied in index order, so with repeated indices the last update wins (reduction none) or all of them are
// combined (add, mul, max, min). Indices are checked before anything is written.
#include "runtime/kernels/families.h"
#include "runtime/kernels/onnx/shape_util.h"

namespace gaf::runtime {

namespace {

enum class Red { None, Add, Mul, Max, Min };

Red reduction_of(const Node& node) {
  std::string s = node.attr_string("reduction", "none");
  if (s == "none") return Red::None;
  if (s == "add") return Red::Add;
  if (s == "mul") return Red::Mul;
  if (s == "max") return Red::Max;
  if (s == "min") return Red::Min;
  unsupported("{}: reduction '{}' is not supported (none, add, mul, max, min)", node.describe(), s);
}

template <Red R, class T>
inline void combine(T& dst, const T& v) {
  if constexpr (R == Red::None) {
    dst = v;
  } else {
    using C = arith_t<T>;
    const C a = to_arith(dst), b = to_arith(v);
    C c;
    if constexpr (std::is_same_v<T, bool>) {
      if constexpr (R == Red::Add || R == Red::Max)
        c = a || b;
      else
        c = a && b;
    } else if constexpr (R == Red::Add) {
      c = static_cast<C>(a + b);
    } else if constexpr (R == Red::Mul) {
      c = static_cast<C>(a * b);
    } else if constexpr (R == Red::Max) {
      c = std::max(a, b);
    } else {
      c = std::min(a, b);
    }
    dst = from_arith<T>(c);
  }
}

// Calls f(TypeTag<T>, std::integral_constant<Red, R>): byte-width types for plain assignment (any dtype,
// strings too), the real element type for reductions.
template <class F>
void visit_scatter(DType dtype, Red red, F&& f) {
  if (red == Red::None) {
    visit_bytes(dtype, [&](auto tag) { f(tag, std::integral_constant<Red, Red::None>{}); });
    return;
  }
  visit_dtype(dtype, [&](auto v) {
    using T = decltype(v);
    switch (red) {
      case Red::Add:
        return f(TypeTag<T>{}, std::integral_constant<Red, Red::Add>{});
      case Red::Mul:
        return f(TypeTag<T>{}, std::integral_constant<Red, Red::Mul>{});
      case Red::Max:
        return f(TypeTag<T>{}, std::integral_constant<Red, Red::Max>{});
      case Red::Min:
        return f(TypeTag<T>{}, std::integral_constant<Red, Red::Min>{});
      case Red::None:
        break;
    }
  });
}

Tensor& copy_data_to_output(KernelContext& ctx, const Tensor& data) {
  Tensor& y = ctx.allocate_output(0, data.dtype(), data.dims());
  if (data.dtype() == DType::String) {
    for (int64_t i = 0; i < data.numel(); ++i) y.strings()[i] = data.strings()[i];
  } else {
    parallel_memcpy(y.raw(), data.raw(), data.nbytes());
  }
  return y;
}

void scatter_elements_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& data = ctx.in(0);
  const Tensor& indices = ctx.in(1);
  const Tensor& updates = ctx.in(2);
  const int r = data.rank();
  const Red red = node.op_type == "Scatter" ? Red::None : reduction_of(node);
  GAF_CHECK(r >= 1 && indices.rank() == r, "{}: data {} and indices {} must have the same rank >= 1",
            node.describe(), dims_to_string(data.dims()), dims_to_string(indices.dims()));
  GAF_CHECK(updates.dims() == indices.dims(), "{}: updates {} must have the shape of indices {}",
            node.describe(), dims_to_string(updates.dims()), dims_to_string(indices.dims()));
  GAF_CHECK(updates.dtype() == data.dtype(), "{}: updates are {}, data is {}", node.describe(),
            dtype_name(updates.dtype()), dtype_name(data.dtype()));
  const int axis = normalize_axis(node.attr_int("axis", 0), r, node);
  for (int d = 0; d < r; ++d)
    GAF_CHECK(d == axis || indices.dim(d) <= data.dim(d),
              "{}: indices {} exceed data {} along axis {} (only axis {} may differ)", node.describe(),
              dims_to_string(indices.dims()), dims_to_string(data.dims()), d, axis);
  std::vector<int64_t> idx = checked_indices(indices, data.dim(axis), node, axis);
  Tensor& y = copy_data_to_output(ctx, data);
  if (indices.numel() == 0) return;
  const auto ds = contiguous_strides(data.dims());
  const std::vector<int64_t>& id = indices.dims();
  const int64_t L = id[r - 1], rows = prod(id, 0, r - 1);
  visit_scatter(data.dtype(), red, [&](auto tag, auto rc) {
    using T = typename decltype(tag)::type;
    constexpr Red R = decltype(rc)::value;
    const T* up = static_cast<const T*>(updates.raw());
    T* dst = static_cast<T*>(y.raw());
    std::vector<int64_t> i(std::max(r - 1, 1), 0);
    for (int64_t row = 0; row < rows; ++row) {
      int64_t base = 0;
      for (int d = 0; d < r - 1; ++d)
        if (d != axis) base += i[d] * ds[d];
      const int64_t* ix = idx.data() + row * L;
      const T* u = up + row * L;
      const int64_t sa = ds[axis], sj = axis == r - 1 ? 0 : 1;
      for (int64_t j = 0; j < L; ++j) combine<R>(dst[base + j * sj + ix[j] * sa], u[j]);
      for (int d = r - 2; d >= 0; --d) {
        if (++i[d] < id[d]) break;
        i[d] = 0;
      }
    }
  });
}

void scatter_nd_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& data = ctx.in(0);
  const Tensor& indices = ctx.in(1);
  const Tensor& updates = ctx.in(2);
  const int r = data.rank(), q = indices.rank();
  const Red red = reduction_of(node);
  GAF_CHECK(r >= 1 && q >= 1, "{}: data {} and indices {} must have rank >= 1", node.describe(),
            dims_to_string(data.dims()), dims_to_string(indices.dims()));
  const int64_t m = indices.dim(q - 1);
  GAF_CHECK(m >= 1 && m <= r, "{}: indices.shape[-1] = {} must be in [1, {}]", node.describe(), m, r);
  std::vector<int64_t> ud(indices.dims().begin(), indices.dims().end() - 1);
  ud.insert(ud.end(), data.dims().begin() + m, data.dims().end());
  GAF_CHECK(updates.dims() == ud, "{}: updates {} must have shape {} (indices.shape[:-1] + data.shape[{}:])",
            node.describe(), dims_to_string(updates.dims()), dims_to_string(ud), m);
  GAF_CHECK(updates.dtype() == data.dtype(), "{}: updates are {}, data is {}", node.describe(),
            dtype_name(updates.dtype()), dtype_name(data.dtype()));
  const int64_t tuples = prod(indices.dims(), 0, q - 1), slice = prod(data.dims(), m, r);
  const auto ds = contiguous_strides(data.dims());
  std::vector<int64_t> offs(tuples);
  visit_index(indices.dtype(), node, "indices", [&](auto tag) {
    using I = typename decltype(tag)::type;
    const I* p = indices.data<I>();
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t off = 0;
      for (int64_t k = 0; k < m; ++k)
        off += checked_index(p, t * m + k, data.dim(int(k)), node, indices, int(k)) * ds[k];
      offs[t] = off;
    }
  });
  Tensor& y = copy_data_to_output(ctx, data);
  if (slice == 0) return;
  visit_scatter(data.dtype(), red, [&](auto tag, auto rc) {
    using T = typename decltype(tag)::type;
    constexpr Red R = decltype(rc)::value;
    const T* up = static_cast<const T*>(updates.raw());
    T* dst = static_cast<T*>(y.raw());
    for (int64_t t = 0; t < tuples; ++t) {
      T* o = dst + offs[t];
      const T* u = up + t * slice;
      if constexpr (R == Red::None) {
        copy_elems(o, u, slice);
      } else {
        for (int64_t j = 0; j < slice; ++j) combine<R>(o[j], u[j]);
      }
    }
  });
}

}  // namespace

// Opaque, not Injective: an output element is not a function of one computed input position (it depends on
// which updates, if any, target it), so the planner must not fuse these as index maps.
void register_index_scatter_ops(KernelRegistry& r) {
  r.add("ScatterElements").set_kernel(fn_kernel(scatter_elements_kernel));
  r.add("Scatter").set_kernel(fn_kernel(scatter_elements_kernel));
  r.add("ScatterND").set_kernel(fn_kernel(scatter_nd_kernel));
}

}  // namespace gaf::runtime
