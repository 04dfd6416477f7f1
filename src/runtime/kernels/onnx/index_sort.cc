// TopK and Unique: the two sorting ops. Both order elements by a strict total order (NaN above every number,
// ties broken by the lower index), so results are deterministic and ties keep input order.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "runtime/kernels/families.h"
#include "runtime/kernels/onnx/shape_util.h"

namespace gaf::runtime {

namespace {

// a < b with NaN greater than everything and equal to itself.
template <class C>
inline bool key_less(const C& a, const C& b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
  }
  return a < b;
}

template <class T>
void topk_typed(const Tensor& x, Tensor& values, Tensor& indices, int axis, int64_t k, bool largest) {
  using C = arith_t<T>;
  const int64_t n = x.dim(axis);
  const int64_t outer = prod(x.dims(), 0, axis), inner = prod(x.dims(), axis + 1, x.dims().size());
  const T* src = x.data<T>();
  T* vout = values.data<T>();
  int64_t* iout = indices.data<int64_t>();
  parallel_for(outer * inner, std::max<int64_t>(1, kCopyGrain / std::max<int64_t>(n, 1)),
               [&](int64_t b, int64_t e) {
                 std::vector<C> vals(n);
                 std::vector<int64_t> ord(n);
                 for (int64_t s = b; s < e; ++s) {
                   const int64_t o = s / inner, j = s % inner;
                   const T* p = src + o * n * inner + j;
                   for (int64_t i = 0; i < n; ++i) vals[i] = to_arith(p[i * inner]);
                   std::iota(ord.begin(), ord.end(), int64_t(0));
                   auto before = [&](int64_t a, int64_t c) {
                     const C& va = vals[a];
                     const C& vc = vals[c];
                     if (largest) {
                       if (key_less(vc, va)) return true;
                       if (key_less(va, vc)) return false;
                     } else {
                       if (key_less(va, vc)) return true;
                       if (key_less(vc, va)) return false;
                     }
                     return a < c;
                   };
                   if (k < n)
                     std::partial_sort(ord.begin(), ord.begin() + k, ord.end(), before);
                   else
                     std::sort(ord.begin(), ord.end(), before);
                   T* vo = vout + o * k * inner + j;
                   int64_t* io = iout + o * k * inner + j;
                   for (int64_t i = 0; i < k; ++i) {
                     vo[i * inner] = p[ord[i] * inner];
                     io[i * inner] = ord[i];
                   }
                 }
               });
}

void topk_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& x = ctx.in(0);
  GAF_CHECK(x.rank() >= 1, "{}: the input must have rank >= 1", node.describe());
  const int axis = normalize_axis(node.attr_int("axis", -1), x.rank(), node);
  int64_t k;
  if (node.opset >= 10) {
    const Tensor& kt = ctx.in(1);
    GAF_CHECK(kt.dtype() == DType::Int64, "{}: K must be an int64 tensor, got {}", node.describe(),
              dtype_name(kt.dtype()));
    k = read_scalar_int(kt, node, "K");
  } else {
    k = node.attr_int("k");
  }
  const int64_t n = x.dim(axis);
  GAF_CHECK(k >= 0 && k <= n, "{}: k = {} is out of range for axis {} of size {}", node.describe(), k, axis,
            n);
  const bool largest = node.attr_int("largest", 1) != 0;
  std::vector<int64_t> dims = x.dims();
  dims[axis] = k;
  Tensor& values = ctx.allocate_output(0, x.dtype(), dims);
  Tensor& indices = ctx.allocate_output(1, DType::Int64, dims);
  if (values.numel() == 0) return;
  visit_dtype(x.dtype(), [&](auto tag) { topk_typed<decltype(tag)>(x, values, indices, axis, k, largest); });
}

// Element order and equality for Unique: compute-type values (fp16 through fp32), strings as strings.
template <class T>
struct ElemKey {
  static auto get(const T& v) { return to_arith(v); }
};
template <>
struct ElemKey<std::string> {
  static const std::string& get(const std::string& v) { return v; }
};

template <class T>
void unique_typed(KernelContext& ctx, const Tensor& x, bool has_axis, int axis, bool sorted) {
  const std::vector<int64_t> xd = has_axis ? x.dims() : std::vector<int64_t>{x.numel()};
  const int64_t n = xd[axis];
  const int64_t outer = prod(xd, 0, axis), inner = prod(xd, axis + 1, xd.size());
  const T* src = static_cast<const T*>(x.raw());
  // Slice i holds elements (o * n + i) * inner + j for o < outer, j < inner, compared in that order.
  auto cmp = [&](int64_t a, int64_t b) -> int {
    for (int64_t o = 0; o < outer; ++o) {
      const T* pa = src + (o * n + a) * inner;
      const T* pb = src + (o * n + b) * inner;
      for (int64_t j = 0; j < inner; ++j) {
        const auto& va = ElemKey<T>::get(pa[j]);
        const auto& vb = ElemKey<T>::get(pb[j]);
        if (key_less(va, vb)) return -1;
        if (key_less(vb, va)) return 1;
      }
    }
    return 0;
  };
  std::vector<int64_t> ord(n);
  std::iota(ord.begin(), ord.end(), int64_t(0));
  std::sort(ord.begin(), ord.end(), [&](int64_t a, int64_t b) {
    int c = cmp(a, b);
    return c != 0 ? c < 0 : a < b;
  });
  // Groups of equal slices in sorted order: first (lowest) index and count; inverse for every slice.
  std::vector<int64_t> first, count, inverse(n);
  for (int64_t i = 0; i < n; ++i) {
    if (i == 0 || cmp(ord[i - 1], ord[i]) != 0) {
      first.push_back(ord[i]);
      count.push_back(0);
    }
    ++count.back();
    inverse[ord[i]] = int64_t(first.size()) - 1;
  }
  const int64_t u = int64_t(first.size());
  // Output order of the groups: sorted, or by first occurrence.
  std::vector<int64_t> gorder(u), rank_of(u);
  std::iota(gorder.begin(), gorder.end(), int64_t(0));
  if (!sorted)
    std::sort(gorder.begin(), gorder.end(), [&](int64_t a, int64_t b) { return first[a] < first[b]; });
  for (int64_t g = 0; g < u; ++g) rank_of[gorder[g]] = g;

  std::vector<int64_t> ydims = has_axis ? x.dims() : std::vector<int64_t>{u};
  ydims[has_axis ? axis : 0] = u;
  Tensor& y = ctx.allocate_output(0, x.dtype(), ydims);
  T* dst = static_cast<T*>(y.raw());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t g = 0; g < u; ++g)
      copy_elems(dst + (o * u + g) * inner, src + (o * n + first[gorder[g]]) * inner, inner);
  if (ctx.num_outputs() > 1) {
    int64_t* p = ctx.allocate_output(1, DType::Int64, {u}).template data<int64_t>();
    for (int64_t g = 0; g < u; ++g) p[g] = first[gorder[g]];
  }
  if (ctx.num_outputs() > 2) {
    int64_t* p = ctx.allocate_output(2, DType::Int64, {n}).template data<int64_t>();
    for (int64_t i = 0; i < n; ++i) p[i] = rank_of[inverse[i]];
  }
  if (ctx.num_outputs() > 3) {
    int64_t* p = ctx.allocate_output(3, DType::Int64, {u}).template data<int64_t>();
    for (int64_t g = 0; g < u; ++g) p[g] = count[gorder[g]];
  }
}

void unique_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& x = ctx.in(0);
  const bool has_axis = node.has_attr("axis");
  const int axis = has_axis ? normalize_axis(node.attr_int("axis"), x.rank(), node) : 0;
  GAF_CHECK(!has_axis || x.rank() >= 1, "{}: axis given for a scalar input", node.describe());
  const bool sorted = node.attr_int("sorted", 1) != 0;
  if (x.dtype() == DType::String) {
    unique_typed<std::string>(ctx, x, has_axis, axis, sorted);
    return;
  }
  visit_dtype(x.dtype(), [&](auto tag) { unique_typed<decltype(tag)>(ctx, x, has_axis, axis, sorted); });
}

}  // namespace

void register_index_sort_ops(KernelRegistry& r) {
  r.add("TopK").set_kernel(fn_kernel(topk_kernel));
  r.add("Unique").set_kernel(fn_kernel(unique_kernel));
}

}  // namespace gaf::runtime
