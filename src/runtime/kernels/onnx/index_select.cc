// OneHot, NonZero, Compress, Trilu and CumSum.
#include <cmath>

#include "runtime/kernels/families.h"
#include "runtime/kernels/onnx/shape_util.h"

namespace gaf::runtime {

namespace {

// OneHot: indices in [-depth, depth) select the "on" value (negative ones count from the end); indices
// outside that range, or not integral, give an all-"off" row, as the ONNX spec defines.
void one_hot_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& indices = ctx.in(0);
  const Tensor& depth_t = ctx.in(1);
  const Tensor& values = ctx.in(2);
  GAF_CHECK(depth_t.numel() == 1, "{}: depth must hold one value, got shape {}", node.describe(),
            dims_to_string(depth_t.dims()));
  GAF_CHECK(depth_t.dtype() != DType::String && indices.dtype() != DType::String,
            "{}: depth and indices must be numeric", node.describe());
  const double depth_d = depth_t.get_double(0);
  GAF_CHECK(depth_d >= 1 && depth_d < 9.2e18, "{}: depth must be positive, got {}", node.describe(), depth_d);
  const int64_t depth = int64_t(depth_d);
  GAF_CHECK(values.numel() == 2, "{}: values must hold [off_value, on_value], got shape {}", node.describe(),
            dims_to_string(values.dims()));
  const int r = indices.rank();
  int64_t axis = node.attr_int("axis", -1);
  GAF_CHECK(axis >= -(r + 1) && axis <= r, "{}: axis {} is out of range for output rank {}", node.describe(),
            axis, r + 1);
  if (axis < 0) axis += r + 1;
  std::vector<int64_t> dims = indices.dims();
  dims.insert(dims.begin() + axis, depth);
  const int64_t inner = prod(indices.dims(), size_t(axis), indices.dims().size());
  const int64_t n = indices.numel();
  // Position along the depth axis for every index, or -1 for an all-off row.
  std::vector<int64_t> hot(n);
  visit_dtype(indices.dtype(), [&](auto tag) {
    using I = decltype(tag);
    const I* p = indices.data<I>();
    for (int64_t i = 0; i < n; ++i) {
      double v = to_double(p[i]);
      if (v < 0) v += double(depth);
      hot[i] = v >= 0 && v < double(depth) && v == std::floor(v) ? int64_t(v) : -1;
    }
  });
  Tensor& y = ctx.allocate_output(0, values.dtype(), dims);
  if (y.numel() == 0) return;
  visit_bytes(values.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T off = static_cast<const T*>(values.raw())[0], on = static_cast<const T*>(values.raw())[1];
    T* out = static_cast<T*>(y.raw());
    const int64_t rows = n / std::max<int64_t>(inner, 1);  // outer
    parallel_for(rows, std::max<int64_t>(1, kCopyGrain / std::max<int64_t>(depth * inner, 1)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t o = b; o < e; ++o) {
                     T* blk = out + o * depth * inner;
                     fill_elems(blk, depth * inner, off);
                     for (int64_t i = 0; i < inner; ++i) {
                       int64_t h = hot[o * inner + i];
                       if (h >= 0) blk[h * inner + i] = on;
                     }
                   }
                 });
  });
}

void non_zero_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const int64_t n = x.numel();
  // A scalar is treated as a 1-element vector (numpy semantics).
  const std::vector<int64_t> dims = x.rank() == 0 ? std::vector<int64_t>{1} : x.dims();
  const int r = int(dims.size());
  const int threads = omp_get_max_threads();
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(threads, n / kCopyGrain));
  std::vector<int64_t> counts(chunks + 1, 0);
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = x.data<T>();
    auto nz = [](T v) { return to_arith(v) != arith_t<T>(0); };
    parallel_for(chunks, 1, [&](int64_t cb, int64_t ce) {
      for (int64_t c = cb; c < ce; ++c) {
        int64_t cnt = 0;
        for (int64_t i = n * c / chunks, e = n * (c + 1) / chunks; i < e; ++i) cnt += nz(p[i]) ? 1 : 0;
        counts[c + 1] = cnt;
      }
    });
    for (int64_t c = 0; c < chunks; ++c) counts[c + 1] += counts[c];
    const int64_t total = counts[chunks];
    Tensor& y = ctx.allocate_output(0, DType::Int64, {r, total});
    int64_t* out = y.data<int64_t>();
    parallel_for(chunks, 1, [&](int64_t cb, int64_t ce) {
      std::vector<int64_t> idx(r);
      for (int64_t c = cb; c < ce; ++c) {
        int64_t k = counts[c];
        const int64_t b = n * c / chunks, e = n * (c + 1) / chunks;
        int64_t rem = b;
        for (int d = r - 1; d >= 0; --d) {
          idx[d] = rem % dims[d];
          rem /= dims[d];
        }
        for (int64_t i = b; i < e; ++i) {
          if (nz(p[i])) {
            for (int d = 0; d < r; ++d) out[d * total + k] = idx[d];
            ++k;
          }
          for (int d = r - 1; d >= 0; --d) {
            if (++idx[d] < dims[d]) break;
            idx[d] = 0;
          }
        }
      }
    });
  });
}

void compress_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& x = ctx.in(0);
  const Tensor& cond = ctx.in(1);
  GAF_CHECK(cond.dtype() == DType::Bool && cond.rank() == 1,
            "{}: condition must be a 1-D bool tensor, got {}{}", node.describe(), dtype_name(cond.dtype()),
            dims_to_string(cond.dims()));
  const bool has_axis = node.has_attr("axis");
  const int axis = has_axis ? normalize_axis(node.attr_int("axis"), x.rank(), node) : 0;
  const std::vector<int64_t> xd = has_axis ? x.dims() : std::vector<int64_t>{x.numel()};
  const int64_t n = xd[axis];
  const bool* c = cond.data<bool>();
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < cond.numel(); ++i) {
    if (!c[i]) continue;
    GAF_CHECK(i < n, "{}: condition selects index {}, but axis {} has size {}", node.describe(), i, axis, n);
    keep.push_back(i);
  }
  std::vector<int64_t> dims = xd;
  dims[axis] = int64_t(keep.size());
  Tensor& y = ctx.allocate_output(0, x.dtype(), dims);
  if (y.numel() == 0) return;
  const int64_t outer = prod(xd, 0, axis), inner = prod(xd, axis + 1, xd.size());
  const int64_t nk = int64_t(keep.size());
  visit_bytes(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = static_cast<const T*>(x.raw());
    T* dst = static_cast<T*>(y.raw());
    parallel_for(outer * nk, std::max<int64_t>(1, kCopyGrain / inner), [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k)
        copy_elems(dst + k * inner, src + ((k / nk) * n + keep[k % nk]) * inner, inner);
    });
  });
}

void trilu_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& x = ctx.in(0);
  GAF_CHECK(x.rank() >= 2, "{}: the input must have rank >= 2, got {}", node.describe(),
            dims_to_string(x.dims()));
  int64_t k = 0;
  if (const Tensor* kt = ctx.input(1)) k = read_scalar_int(*kt, node, "k");
  const bool upper = node.attr_int("upper", 1) != 0;
  const int64_t N = x.dim(-2), M = x.dim(-1);
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
  if (y.numel() == 0) return;
  const int64_t rows = x.numel() / M;
  // Row i keeps columns [lo, hi): upper keeps j >= i + k, lower keeps j <= i + k. k is clamped first so that
  // i + k cannot overflow.
  const int64_t kc = std::clamp<int64_t>(k, -N - 1, M + 1);
  visit_bytes(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = static_cast<const T*>(x.raw());
    T* dst = static_cast<T*>(y.raw());
    const T zero{};
    parallel_for(rows, std::max<int64_t>(1, kCopyGrain / M), [&](int64_t b, int64_t e) {
      for (int64_t row = b; row < e; ++row) {
        const int64_t i = row % N;
        const int64_t lo = upper ? std::clamp<int64_t>(i + kc, 0, M) : 0;
        const int64_t hi = upper ? M : std::clamp<int64_t>(i + kc + 1, 0, M);
        T* o = dst + row * M;
        const T* s = src + row * M;
        fill_elems(o, lo, zero);
        if (hi > lo) copy_elems(o + lo, s + lo, hi - lo);
        fill_elems(o + std::max(lo, hi), M - std::max(lo, hi), zero);
      }
    });
  });
}

void cumsum_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& x = ctx.in(0);
  const Tensor& axis_t = ctx.in(1);
  GAF_CHECK(axis_t.dtype() == DType::Int32 || axis_t.dtype() == DType::Int64,
            "{}: axis must be an int32 or int64 scalar, got {}", node.describe(), dtype_name(axis_t.dtype()));
  const int axis = normalize_axis(read_scalar_int(axis_t, node, "axis"), x.rank(), node);
  const bool exclusive = node.attr_int("exclusive", 0) != 0, reverse = node.attr_int("reverse", 0) != 0;
  if (x.dtype() == DType::Bool) unsupported("{}: CumSum of bool is not supported", node.describe());
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
  if (y.numel() == 0) return;
  const int64_t n = x.rank() == 0 ? 1 : x.dim(axis);
  const int64_t outer = prod(x.dims(), 0, axis), inner = prod(x.dims(), axis + 1, x.dims().size());
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = arith_t<T>;
    const T* src = x.data<T>();
    T* dst = y.data<T>();
    const int64_t step = reverse ? -1 : 1;
    if (inner == 1) {
      parallel_for(outer, std::max<int64_t>(1, kCopyGrain / n), [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) {
          const T* s = src + o * n;
          T* d = dst + o * n;
          C acc = C(0);
          for (int64_t a = 0, i = reverse ? n - 1 : 0; a < n; ++a, i += step) {
            if (exclusive) {
              d[i] = from_arith<T>(acc);
              acc = static_cast<C>(acc + to_arith(s[i]));
            } else {
              acc = static_cast<C>(acc + to_arith(s[i]));
              d[i] = from_arith<T>(acc);
            }
          }
        }
      });
      return;
    }
    // Rows along the axis are contiguous vectors of `inner`: accumulate a block of them at a time.
    constexpr int64_t kBlock = 1024;
    const int64_t blocks = (inner + kBlock - 1) / kBlock;
    parallel_for(outer * blocks, std::max<int64_t>(1, kCopyGrain / (n * std::min(inner, kBlock))),
                 [&](int64_t b, int64_t e) {
                   std::unique_ptr<C[]> acc(new C[std::min(inner, kBlock)]);
                   for (int64_t it = b; it < e; ++it) {
                     const int64_t o = it / blocks, j0 = (it % blocks) * kBlock,
                                   len = std::min(kBlock, inner - j0);
                     C* ac = acc.get();
                     std::fill(ac, ac + len, C(0));
                     for (int64_t a = 0, i = reverse ? n - 1 : 0; a < n; ++a, i += step) {
                       const T* s = src + (o * n + i) * inner + j0;
                       T* d = dst + (o * n + i) * inner + j0;
                       if (exclusive) {
                         for (int64_t j = 0; j < len; ++j) {
                           d[j] = from_arith<T>(ac[j]);
                           ac[j] = static_cast<C>(ac[j] + to_arith(s[j]));
                         }
                       } else {
                         for (int64_t j = 0; j < len; ++j) {
                           ac[j] = static_cast<C>(ac[j] + to_arith(s[j]));
                           d[j] = from_arith<T>(ac[j]);
                         }
                       }
                     }
                   }
                 });
  });
}

}  // namespace

void register_index_select_ops(KernelRegistry& r) {
  r.add("OneHot").set_kernel(fn_kernel(one_hot_kernel));
  r.add("NonZero").set_kernel(fn_kernel(non_zero_kernel));
  r.add("Compress").set_kernel(fn_kernel(compress_kernel));
  r.add("Trilu").set_kernel(fn_kernel(trilu_kernel));
  r.add("CumSum").set_kernel(fn_kernel(cumsum_kernel));
}

}  // namespace gaf::runtime
