// Pad (constant / reflect / edge / wrap, negative pads crop) and ReverseSequence.
#include "runtime/kernels/families.h"
#include "runtime/kernels/onnx/shape_util.h"

namespace gaf::runtime {

namespace {

enum class PadMode { Constant, Reflect, Edge, Wrap };

PadMode pad_mode(const Node& node) {
  std::string m = node.attr_string("mode", "constant");
  if (m == "constant") return PadMode::Constant;
  if (m == "reflect") return PadMode::Reflect;
  if (m == "edge") return PadMode::Edge;
  if (m == "wrap") return PadMode::Wrap;
  unsupported("{}: mode '{}' is not supported (constant, reflect, edge, wrap)", node.describe(), m);
}

// Source index along one axis for each output index; -1 where the constant fills.
std::vector<int64_t> axis_map(int64_t n, int64_t before, int64_t out, PadMode mode) {
  std::vector<int64_t> m(out);
  for (int64_t o = 0; o < out; ++o) {
    int64_t i = o - before;
    if (i >= 0 && i < n) {
      m[o] = i;
      continue;
    }
    switch (mode) {
      case PadMode::Constant:
        m[o] = -1;
        break;
      case PadMode::Edge:
        m[o] = std::clamp<int64_t>(i, 0, n - 1);
        break;
      case PadMode::Wrap:
        m[o] = ((i % n) + n) % n;
        break;
      case PadMode::Reflect: {
        if (n == 1) {
          m[o] = 0;
          break;
        }
        const int64_t period = 2 * (n - 1);
        int64_t k = ((i % period) + period) % period;
        m[o] = k < n ? k : period - k;
        break;
      }
    }
  }
  return m;
}

// The pad value as a scalar tensor of the input's element type.
Tensor pad_value(KernelContext& ctx, DType dtype) {
  const Node& node = ctx.node();
  Tensor v(dtype, {});
  const Tensor* cv = node.opset >= 11 ? ctx.input(2) : nullptr;
  if (dtype == DType::String) {
    if (cv) {
      GAF_CHECK(cv->dtype() == DType::String && cv->numel() == 1, "{}: constant_value must be one string",
                node.describe());
      v.strings()[0] = cv->strings()[0];
    }
    return v;
  }
  double value = node.opset < 11 ? node.attr_float("value", 0.0f) : 0.0;
  if (cv && cv->numel() > 0) {
    GAF_CHECK(cv->numel() == 1, "{}: constant_value must be a scalar, got shape {}", node.describe(),
              dims_to_string(cv->dims()));
    GAF_CHECK(cv->dtype() == dtype, "{}: constant_value is {}, the input is {}", node.describe(),
              dtype_name(cv->dtype()), dtype_name(dtype));
    std::memcpy(v.raw(), cv->raw(), dtype_size(dtype));
    return v;
  }
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    *v.data<T>() = from_double<T>(value);
  });
  return v;
}

template <class T>
void pad_copy(const T* src, T* dst, const std::vector<int64_t>& in_dims, const std::vector<int64_t>& out_dims,
              const std::vector<std::vector<int64_t>>& maps, int64_t inner_before, const T& fill) {
  const int r = int(out_dims.size());
  const int64_t L = out_dims[r - 1], n_in = in_dims[r - 1];
  const std::vector<int64_t>& m_in = maps[r - 1];
  const auto ss = contiguous_strides(in_dims);
  // Output range along the innermost axis copied straight from the input row.
  const int64_t lo = std::clamp<int64_t>(inner_before, 0, L),
                hi = std::clamp<int64_t>(inner_before + n_in, 0, L);
  const int64_t rows = prod(out_dims, 0, r - 1);
  parallel_for(rows, std::max<int64_t>(1, kCopyGrain / std::max<int64_t>(L, 1)), [&](int64_t b, int64_t e) {
    std::vector<int64_t> idx(std::max(r - 1, 1), 0);
    int64_t rem = b;
    for (int d = r - 2; d >= 0; --d) {
      idx[d] = rem % out_dims[d];
      rem /= out_dims[d];
    }
    for (int64_t row = b; row < e; ++row) {
      T* out = dst + row * L;
      int64_t off = 0;
      bool constant_row = false;
      for (int d = 0; d < r - 1; ++d) {
        int64_t s = maps[d][idx[d]];
        if (s < 0) {
          constant_row = true;
          break;
        }
        off += s * ss[d];
      }
      if (constant_row) {
        fill_elems(out, L, fill);
      } else {
        const T* in = src + off;
        for (int64_t j = 0; j < lo; ++j) out[j] = m_in[j] < 0 ? fill : in[m_in[j]];
        if (hi > lo) copy_elems(out + lo, in + (lo - inner_before), hi - lo);
        for (int64_t j = std::max(hi, lo); j < L; ++j) out[j] = m_in[j] < 0 ? fill : in[m_in[j]];
      }
      for (int d = r - 2; d >= 0; --d) {
        if (++idx[d] < out_dims[d]) break;
        idx[d] = 0;
      }
    }
  });
}

void pad_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& x = ctx.in(0);
  const int r = x.rank();
  const PadMode mode = pad_mode(node);
  std::vector<int64_t> pads;
  if (node.opset >= 11)
    pads = read_ints(ctx.in(1), node, "pads");
  else if (node.opset >= 2)
    pads = node.attr_ints("pads");
  else
    pads = node.attr_ints("paddings");
  std::vector<int> axes(r);
  for (int i = 0; i < r; ++i) axes[i] = i;
  if (const Tensor* a = node.opset >= 18 ? ctx.input(3) : nullptr)
    axes = normalize_axes(read_ints(*a, node, "axes"), r, node);
  GAF_CHECK(pads.size() == 2 * axes.size(), "{}: pads has {} entries, expected {} (2 per axis) for input {}",
            node.describe(), pads.size(), 2 * axes.size(), dims_to_string(x.dims()));
  std::vector<int64_t> before(r, 0), after(r, 0), out(r);
  for (size_t i = 0; i < axes.size(); ++i) {
    before[axes[i]] = pads[i];
    after[axes[i]] = pads[i + axes.size()];
  }
  for (int d = 0; d < r; ++d) {
    out[d] = x.dim(d) + before[d] + after[d];
    GAF_CHECK(out[d] >= 0, "{}: pads {} crop axis {} of size {} below zero", node.describe(),
              dims_to_string(pads), d, x.dim(d));
    GAF_CHECK(mode == PadMode::Constant || x.dim(d) > 0 || (before[d] <= 0 && after[d] <= 0),
              "{}: cannot pad the empty axis {} in {} mode", node.describe(), d,
              node.attr_string("mode", ""));
  }
  Tensor value = pad_value(ctx, x.dtype());
  Tensor& y = ctx.allocate_output(0, x.dtype(), out);
  if (y.numel() == 0) return;
  if (r == 0) {
    strided_copy(x.dtype(), y.raw(), x.raw(), {}, {}, {});
    return;
  }
  std::vector<std::vector<int64_t>> maps(r);
  for (int d = 0; d < r; ++d) maps[d] = axis_map(x.dim(d), before[d], out[d], mode);
  visit_bytes(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T fill;
    if constexpr (std::is_same_v<T, std::string>)
      fill = value.strings()[0];
    else
      std::memcpy(&fill, value.raw(), sizeof(T));
    pad_copy(static_cast<const T*>(x.raw()), static_cast<T*>(y.raw()), x.dims(), out, maps, before[r - 1],
             fill);
  });
}

void reverse_sequence_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& x = ctx.in(0);
  const Tensor& lens_t = ctx.in(1);
  GAF_CHECK(x.rank() >= 2, "{}: the input must have rank >= 2, got {}", node.describe(),
            dims_to_string(x.dims()));
  const int64_t time_axis = node.attr_int("time_axis", 0), batch_axis = node.attr_int("batch_axis", 1);
  GAF_CHECK((time_axis == 0 && batch_axis == 1) || (time_axis == 1 && batch_axis == 0),
            "{}: time_axis {} and batch_axis {} must be 0 and 1 in some order", node.describe(), time_axis,
            batch_axis);
  const int64_t T = x.dim(int(time_axis)), B = x.dim(int(batch_axis));
  std::vector<int64_t> lens = read_ints(lens_t, node, "sequence_lens");
  GAF_CHECK(int64_t(lens.size()) == B, "{}: sequence_lens has {} entries for a batch of {}", node.describe(),
            lens.size(), B);
  for (int64_t b = 0; b < B; ++b)
    GAF_CHECK(lens[b] >= 0 && lens[b] <= T, "{}: sequence_lens[{}] = {} is outside [0, {}]", node.describe(),
              b, lens[b], T);
  Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
  if (y.numel() == 0) return;
  const int64_t inner = prod(x.dims(), 2, x.dims().size());
  const int64_t st = (time_axis == 0 ? B : 1) * inner, sb = (batch_axis == 0 ? T : 1) * inner;
  visit_bytes(x.dtype(), [&](auto tag) {
    using E = typename decltype(tag)::type;
    const E* src = static_cast<const E*>(x.raw());
    E* dst = static_cast<E*>(y.raw());
    parallel_for(T * B, std::max<int64_t>(1, kCopyGrain / std::max<int64_t>(inner, 1)),
                 [&](int64_t lo, int64_t hi) {
                   for (int64_t k = lo; k < hi; ++k) {
                     const int64_t b = k / T, t = k % T;
                     const int64_t ts = t < lens[b] ? lens[b] - 1 - t : t;
                     copy_elems(dst + t * st + b * sb, src + ts * st + b * sb, inner);
                   }
                 });
  });
}

}  // namespace

void register_shape_pad_ops(KernelRegistry& r) {
  r.add("Pad").set_kernel(fn_kernel(pad_kernel));
  r.add("ReverseSequence").set_kernel(fn_kernel(reverse_sequence_kernel));
}

}  // namespace gaf::runtime
