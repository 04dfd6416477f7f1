// Ops in domain "gaf": what the recognition passes produce when the model's opset has no standard op for a
// pattern (src/passes/*_recognition.cc). Each mirrors the ONNX op of a later opset (attributes, inputs):
//   gaf.Gelu(x, approximate = "none" | "tanh")                ONNX Gelu (opset 20)
//   gaf.Silu(x) = x * sigmoid(x)                              (no ONNX op)
//   gaf.HardSwish(x) = x * max(0, min(1, x / 6 + 0.5))        ONNX HardSwish (opset 14)
//   gaf.LayerNormalization(x, scale, [bias], axis, epsilon)   ONNX LayerNormalization (opset 17), output Y
//   only gaf.RMSNormalization(x, [scale], axis, epsilon)           ONNX RMSNormalization (opset 23)
// fp32 only (the passes rewrite fp32 patterns only); statistics accumulate in double.
#include <cmath>
#include <numbers>

#include "ops/simd_math.h"
#include "runtime/kernels/common.h"
#include "runtime/kernels/families.h"

namespace gaf::runtime {

namespace {

const Tensor& float_input(const KernelContext& ctx, int i) {
  const Tensor& t = ctx.in(i);
  if (t.dtype() != DType::Float)
    unsupported("{}: element type {} is not supported (gaf ops take float)", ctx.node().describe(),
                dtype_name(t.dtype()));
  return t;
}

// y = f(x) element by element, on both cores. Each activation below is a functor with a scalar form (libm)
// and, where the build has a vector ISA, a vector form from ops/simd_math.h, which then takes every element
// (the last lanes masked). The vector forms are the ones the products' post-op pass applies, so a GELU after
// a MatMul and one run alone give the same values.
template <class F>
void unary(KernelContext& ctx, F f) {
  const Tensor& x = float_input(ctx, 0);
  Tensor& y = ctx.allocate_output(0, DType::Float, x.dims());
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  parallel_for(x.numel(), 1 << 14, [&](int64_t b, int64_t e) {
#if defined(GAF_SIMD)
    simd::map(xp + b, yp + b, e - b, f);
#else
    for (int64_t i = b; i < e; ++i) yp[i] = f(xp[i]);
#endif
  });
}

struct GeluErf {
  float operator()(float x) const {
    return 0.5f * x * (1.0f + std::erf(x * float(1.0 / std::numbers::sqrt2)));
  }
#if defined(GAF_SIMD)
  simd::vf operator()(simd::vf x) const { return simd::gelu_erfv(x); }
#endif
};
struct GeluTanh {
  float operator()(float x) const {
    const float k = float(std::sqrt(2.0 / std::numbers::pi));
    return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
  }
#if defined(GAF_SIMD)
  simd::vf operator()(simd::vf x) const { return simd::gelu_tanhv(x); }
#endif
};
struct Silu {
  float operator()(float x) const { return x / (1.0f + std::exp(-x)); }
#if defined(GAF_SIMD)
  simd::vf operator()(simd::vf x) const { return simd::swishv(x, simd::set1(-1.4426950408889634f)); }
#endif
};
struct HardSwish {
  float operator()(float x) const { return x * std::max(0.0f, std::min(1.0f, x * (1.0f / 6.0f) + 0.5f)); }
#if defined(GAF_SIMD)
  simd::vf operator()(simd::vf x) const { return simd::hard_swishv(x); }
#endif
};

void gelu(KernelContext& ctx) {
  std::string approximate = ctx.node().attr_string("approximate", "none");
  GAF_CHECK(approximate == "none" || approximate == "tanh",
            "{}: approximate must be 'none' or 'tanh', not '{}'", ctx.node().describe(), approximate);
  if (approximate == "tanh")
    unary(ctx, GeluTanh{});
  else
    unary(ctx, GeluErf{});
}

void silu(KernelContext& ctx) { unary(ctx, Silu{}); }

void hard_swish(KernelContext& ctx) { unary(ctx, HardSwish{}); }

// Shared by LayerNormalization (centred) and RMSNormalization: y = (x - mean?) / sqrt(var + eps) * scale +
// bias over rows of the trailing dims from `axis`.
void normalize(KernelContext& ctx, bool centre, int bias_input) {
  const Node& n = ctx.node();
  const Tensor& x = float_input(ctx, 0);
  int axis = normalize_axis(n.attr_int("axis", -1), x.rank(), n);
  float eps = n.attr_float("epsilon", 1e-5f);
  int64_t cols = 1;
  for (int d = axis; d < x.rank(); ++d) cols *= x.dim(d);
  int64_t rows = cols ? x.numel() / cols : 0;
  const float* scale = nullptr;
  const float* bias = nullptr;
  for (int i : {1, bias_input}) {
    if (i < 0 || !ctx.input(i)) continue;
    const Tensor& p = float_input(ctx, i);
    GAF_CHECK(p.numel() == cols, "{}: input {} has {} elements, the normalised shape {}", n.describe(), i,
              p.numel(), cols);
    (i == 1 ? scale : bias) = p.data<float>();
  }
  Tensor& y = ctx.allocate_output(0, DType::Float, x.dims());
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  // Rows in parallel; each row's sums vectorise (double lanes), then one vectorised pass writes the output.
  parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* in = xp + r * cols;
      float* out = yp + r * cols;
      double sum = 0;
      if (centre) {
#pragma omp simd reduction(+ : sum)
        for (int64_t c = 0; c < cols; ++c) sum += double(in[c]);
      }
      const double mean = centre ? sum / double(cols) : 0.0;
      double var = 0;
#pragma omp simd reduction(+ : var)
      for (int64_t c = 0; c < cols; ++c) {
        const double d = double(in[c]) - mean;
        var += d * d;
      }
      const float m = float(mean), rstd = 1.0f / std::sqrt(float(var / double(cols)) + eps);
      if (scale && bias) {
#pragma omp simd
        for (int64_t c = 0; c < cols; ++c) out[c] = (in[c] - m) * rstd * scale[c] + bias[c];
      } else if (scale) {
#pragma omp simd
        for (int64_t c = 0; c < cols; ++c) out[c] = (in[c] - m) * rstd * scale[c];
      } else {
#pragma omp simd
        for (int64_t c = 0; c < cols; ++c) out[c] = (in[c] - m) * rstd;
      }
    }
  });
}

void layer_norm(KernelContext& ctx) {
  GAF_CHECK(ctx.input(1), "{}: the scale input is required", ctx.node().describe());
  normalize(ctx, true, 2);
}

void rms_norm(KernelContext& ctx) { normalize(ctx, false, -1); }  // no bias input

}  // namespace

void register_gaf_ops(KernelRegistry& r) {
  const std::string d = "gaf";
  r.add("Gelu", d).set_kernel(fn_kernel(gelu));
  r.add("Silu", d).set_kernel(fn_kernel(silu));
  r.add("HardSwish", d).set_kernel(fn_kernel(hard_swish));
  r.add("LayerNormalization", d).set_kernel(fn_kernel(layer_norm));
  r.add("RMSNormalization", d).set_kernel(fn_kernel(rms_norm));
}

}  // namespace gaf::runtime
