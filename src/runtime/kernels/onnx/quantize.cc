// Linear quantization: QuantizeLinear, DequantizeLinear (per tensor, or per axis from opset 13) and
// DynamicQuantizeLinear (uint8, scale and zero point computed from the data's range).
//
//   QuantizeLinear:   y = saturate(round_half_even(x / scale) + zero_point)
//   DequantizeLinear: y = (x - zero_point) * scale
#include <cmath>
#include <cstring>
#include <limits>

#include "runtime/kernels/onnx/misc_util.h"

namespace gaf::runtime {

namespace {

// Per-tensor or per-axis parameters of a (de)quantization: `channels` values of scale and zero point, applied
// to runs of `inner` consecutive elements (channel = (i / inner) % channels).
struct QuantParams {
  int64_t channels = 1;
  int64_t inner = 1;
  std::vector<double> scale;
  std::vector<int64_t> zero_point;
};

QuantParams quant_params(const Node& node, const Tensor& x, const Tensor& scale, const Tensor* zp) {
  QuantParams p;
  GAF_CHECK(is_floating(scale.dtype()), "{}: the scale must be a floating-point tensor, got {}",
            node.describe(), dtype_name(scale.dtype()));
  if (zp) {
    GAF_CHECK(zp->dims() == scale.dims(), "{}: the zero point has shape {} but the scale has shape {}",
              node.describe(), dims_to_string(zp->dims()), dims_to_string(scale.dims()));
  }
  const bool per_tensor = scale.numel() == 1 && scale.rank() <= 1;
  if (per_tensor) {
    p.inner = std::max<int64_t>(x.numel(), 1);
  } else {
    GAF_CHECK(node.opset >= 13, "{}: per-axis quantization needs opset 13 or later; scale has shape {}",
              node.describe(), dims_to_string(scale.dims()));
    GAF_CHECK(scale.rank() == 1, "{}: the scale must be a scalar or a 1-D tensor, got shape {}",
              node.describe(), dims_to_string(scale.dims()));
    const int axis = normalize_axis(node.attr_int("axis", 1), x.rank(), node);
    GAF_CHECK(scale.numel() == x.dim(axis),
              "{}: the scale has {} values but axis {} of the input {} has size {}", node.describe(),
              scale.numel(), axis, dims_to_string(x.dims()), x.dim(axis));
    p.channels = scale.numel();
    p.inner = numel_of(std::span<const int64_t>(x.dims()).subspan(size_t(axis) + 1));
  }
  p.scale.resize(size_t(scale.numel()));
  p.zero_point.assign(size_t(scale.numel()), 0);
  for (int64_t i = 0; i < scale.numel(); ++i) {
    p.scale[i] = scale.get_double(i);
    if (zp) p.zero_point[i] = zp->get_int(i);
  }
  return p;
}

// Calls f(begin, end, channel) over [0, numel) in parallel, in runs that share one channel.
template <class F>
void for_each_channel_run(int64_t numel, const QuantParams& p, F&& f) {
  parallel_for(numel, kElemGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e;) {
      const int64_t row = i / p.inner;
      const int64_t end = std::min(e, (row + 1) * p.inner);
      f(i, end, row % p.channels);
      i = end;
    }
  });
}

// x (float-like or int32) -> Q with saturation; F is the arithmetic type.
template <class X, class Q>
void quantize_run(const X* x, Q* y, int64_t n, double scale, int64_t zero_point) {
  using F = std::conditional_t<std::is_same_v<X, double> || std::is_same_v<X, int32_t>, double, float>;
  const F s = F(scale), zp = F(zero_point);
  const F lo = F(std::numeric_limits<Q>::min()), hi = F(std::numeric_limits<Q>::max());
  for (int64_t i = 0; i < n; ++i) {
    F v = std::nearbyint(F(to_arith(x[i])) / s) + zp;
    v = v > lo ? v : lo;  // NaN saturates to the low end
    v = v < hi ? v : hi;
    y[i] = Q(v);
  }
}

void quantize_linear_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& x = ctx.in(0);
  const Tensor& scale = ctx.in(1);
  const Tensor* zp = ctx.input(2);
  const QuantParams p = quant_params(node, x, scale, zp);
  for (double s : p.scale)
    GAF_CHECK(s != 0 && std::isfinite(s), "{}: the scale must be finite and non-zero, got {}",
              node.describe(), s);
  const DType qt = zp ? zp->dtype() : DType::UInt8;
  Tensor& y = ctx.allocate_output(0, qt, x.dims());
  auto with_q = [&](auto xtag) {
    using X = decltype(xtag);
    auto go = [&](auto qtag) {
      using Q = decltype(qtag);
      const X* xs = x.data<X>();
      Q* ys = y.data<Q>();
      for_each_channel_run(x.numel(), p, [&](int64_t b, int64_t e, int64_t c) {
        quantize_run(xs + b, ys + b, e - b, p.scale[c], p.zero_point[c]);
      });
    };
    switch (qt) {
      case DType::UInt8:
        go(uint8_t{});
        break;
      case DType::Int8:
        go(int8_t{});
        break;
      case DType::UInt16:
        go(uint16_t{});
        break;
      case DType::Int16:
        go(int16_t{});
        break;
      default:
        unsupported("{}: quantizing to element type {} is not supported", node.describe(), dtype_name(qt));
    }
  };
  switch (x.dtype()) {
    case DType::Float:
      with_q(float{});
      break;
    case DType::Double:
      with_q(double{});
      break;
    case DType::Float16:
      with_q(Half{});
      break;
    case DType::BFloat16:
      with_q(BFloat16{});
      break;
    case DType::Int32:
      with_q(int32_t{});
      break;
    default:
      unsupported("{}: quantizing input of element type {} is not supported", node.describe(),
                  dtype_name(x.dtype()));
  }
}

void dequantize_linear_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& x = ctx.in(0);
  const Tensor& scale = ctx.in(1);
  const Tensor* zp = ctx.input(2);
  if (zp) {
    GAF_CHECK(zp->dtype() == x.dtype(), "{}: the zero point ({}) must have the input's element type ({})",
              node.describe(), dtype_name(zp->dtype()), dtype_name(x.dtype()));
  }
  const QuantParams p = quant_params(node, x, scale, zp);
  if (x.dtype() == DType::Int32) {
    for (int64_t z : p.zero_point)
      GAF_CHECK(z == 0, "{}: an int32 input needs a zero point of 0, got {}", node.describe(), z);
  }
  // The output has the scale's element type (float, or a 16-bit float from opset 19).
  const DType yt = scale.dtype();
  Tensor& y = ctx.allocate_output(0, yt, x.dims());
  auto with_x = [&](auto xtag) {
    using X = decltype(xtag);
    auto go = [&](auto ytag) {
      using Y = decltype(ytag);
      using F = arith_t<Y>;
      const X* xs = x.data<X>();
      Y* ys = y.data<Y>();
      for_each_channel_run(x.numel(), p, [&](int64_t b, int64_t e, int64_t c) {
        const F s = F(p.scale[c]);
        // Zero points fit the input type and are 0 for int32 input, so the difference fits int32.
        const auto z = int32_t(p.zero_point[c]);
        for (int64_t i = b; i < e; ++i) ys[i] = from_arith<Y>(F(int32_t(xs[i]) - z) * s);
      });
    };
    switch (yt) {
      case DType::Float:
        go(float{});
        break;
      case DType::Double:
        go(double{});
        break;
      case DType::Float16:
        go(Half{});
        break;
      case DType::BFloat16:
        go(BFloat16{});
        break;
      default:
        GAF_ASSERT(false, "scale type checked by quant_params");
    }
  };
  switch (x.dtype()) {
    case DType::UInt8:
      with_x(uint8_t{});
      break;
    case DType::Int8:
      with_x(int8_t{});
      break;
    case DType::UInt16:
      with_x(uint16_t{});
      break;
    case DType::Int16:
      with_x(int16_t{});
      break;
    case DType::Int32:
      with_x(int32_t{});
      break;
    default:
      unsupported("{}: dequantizing input of element type {} is not supported", node.describe(),
                  dtype_name(x.dtype()));
  }
}

// y_scale = (max(x, 0) - min(x, 0)) / 255, y_zero_point = saturate(round(-min / y_scale)), y as
// QuantizeLinear.
void dynamic_quantize_linear_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& x = ctx.in(0);
  if (x.dtype() != DType::Float)
    unsupported("{}: DynamicQuantizeLinear of element type {} is not supported", node.describe(),
                dtype_name(x.dtype()));
  const float* xs = x.data<float>();
  const int64_t n = x.numel();
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(omp_get_max_threads(), n / kElemGrain));
  std::vector<float> mins(size_t(chunks), 0.f), maxs(size_t(chunks), 0.f);
  parallel_for(chunks, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      // 16 lanes in a GCC/Clang vector (compare-select is a vector min/max); the range always includes 0.
      using v16 = float __attribute__((vector_size(64)));
      v16 vmn = {}, vmx = {};
      int64_t i = n * c / chunks;
      const int64_t e = n * (c + 1) / chunks;
      for (; i + 16 <= e; i += 16) {
        v16 v;
        std::memcpy(&v, xs + i, sizeof v);
        vmn = v < vmn ? v : vmn;
        vmx = v > vmx ? v : vmx;
      }
      float mn = 0.f, mx = 0.f;
      for (int l = 0; l < 16; ++l) {
        mn = std::min(mn, vmn[l]);
        mx = std::max(mx, vmx[l]);
      }
      for (; i < e; ++i) {
        mn = std::min(mn, xs[i]);
        mx = std::max(mx, xs[i]);
      }
      mins[c] = mn;
      maxs[c] = mx;
    }
  });
  float mn = *std::min_element(mins.begin(), mins.end());
  float mx = *std::max_element(maxs.begin(), maxs.end());
  GAF_CHECK(std::isfinite(mn) && std::isfinite(mx), "{}: the input contains infinite values ({} .. {})",
            node.describe(), mn, mx);
  // An all-zero input has an empty range; like onnxruntime, use scale 1 (any scale maps it to 0).
  float scale = mx == mn ? 1.f : (mx - mn) / 255.f;
  float zpf = std::nearbyint(std::clamp(0.f - mn / scale, 0.f, 255.f));
  auto zp = uint8_t(zpf);
  uint8_t* ys = ctx.allocate_output(0, DType::UInt8, x.dims()).data<uint8_t>();
  parallel_for(n, kElemGrain, [&](int64_t b, int64_t e) { quantize_run(xs + b, ys + b, e - b, scale, zp); });
  ctx.allocate_output(1, DType::Float, {}).data<float>()[0] = scale;
  ctx.allocate_output(2, DType::UInt8, {}).data<uint8_t>()[0] = zp;
}

}  // namespace

void register_misc_quant_ops(KernelRegistry& r) {
  r.add("QuantizeLinear").set_kernel(fn_kernel(quantize_linear_kernel));
  r.add("DequantizeLinear").set_kernel(fn_kernel(dequantize_linear_kernel));
  r.add("DynamicQuantizeLinear").set_kernel(fn_kernel(dynamic_quantize_linear_kernel));
}

}  // namespace gaf::runtime
