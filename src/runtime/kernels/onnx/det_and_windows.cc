// Det (batched determinant by LU with partial pivoting) and the window functions HannWindow, HammingWindow,
// BlackmanWindow.
#include <cmath>
#include <numbers>

#include "runtime/kernels/onnx/misc_util.h"

namespace gaf::runtime {

namespace {

// ---- Det ----

// Determinant of the n x n row-major matrix in `a` (overwritten by its LU factors).
double lu_determinant(double* a, int64_t n) {
  double det = 1.0;
  for (int64_t c = 0; c < n; ++c) {
    int64_t piv = c;
    double best = std::abs(a[c * n + c]);
    for (int64_t r = c + 1; r < n; ++r) {
      double v = std::abs(a[r * n + c]);
      if (v > best) best = v, piv = r;
    }
    if (best == 0.0) return 0.0;
    if (piv != c) {
      for (int64_t j = 0; j < n; ++j) std::swap(a[c * n + j], a[piv * n + j]);
      det = -det;
    }
    const double p = a[c * n + c];
    det *= p;
    const double inv = 1.0 / p;
    for (int64_t r = c + 1; r < n; ++r) {
      double f = a[r * n + c] * inv;
      if (f == 0.0) continue;
      double* row = a + r * n;
      const double* prow = a + c * n;
      for (int64_t j = c + 1; j < n; ++j) row[j] -= f * prow[j];
    }
  }
  return det;
}

void det_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& x = ctx.in(0);
  GAF_CHECK(x.rank() >= 2 && x.dim(-1) == x.dim(-2),
            "{}: the input must be a (batch of) square matrices [*, M, M], got shape {}", node.describe(),
            dims_to_string(x.dims()));
  const int64_t n = x.dim(-1);
  std::vector<int64_t> out_dims(x.dims().begin(), x.dims().end() - 2);
  Tensor& out = ctx.allocate_output(0, x.dtype(), out_dims);
  const int64_t batch = out.numel();
  auto go = [&](auto tag) {
    using T = decltype(tag);
    const T* src = x.data<T>();
    T* dst = out.data<T>();
    const int64_t grain = std::max<int64_t>(1, kElemGrain / std::max<int64_t>(1, n * n * n / 8));
    parallel_for(batch, grain, [&](int64_t b, int64_t e) {
      std::vector<double> a(static_cast<size_t>(n * n));
      for (int64_t i = b; i < e; ++i) {
        const T* m = src + i * n * n;
        for (int64_t j = 0; j < n * n; ++j) a[j] = double(to_arith(m[j]));
        dst[i] = from_arith<T>(arith_t<T>(lu_determinant(a.data(), n)));
      }
    });
  };
  switch (x.dtype()) {
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
      unsupported("{}: Det of element type {} is not supported", node.describe(), dtype_name(x.dtype()));
  }
}

// ---- Window functions: w[n] = sum_k a_k cos(2 pi k n / N), N = size (periodic) or size - 1 (symmetric) ----

enum class Window { Hann, Hamming, Blackman };

template <Window W>
void window_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& size_t_ = ctx.in(0);
  GAF_CHECK(is_integer(size_t_.dtype()), "{}: the size input must be an integer scalar, got {}",
            node.describe(), dtype_name(size_t_.dtype()));
  const int64_t size = int64_t(scalar_input(size_t_, node, "size"));
  GAF_CHECK(size >= 0, "{}: the window size must not be negative, got {}", node.describe(), size);
  const bool periodic = node.attr_int("periodic", 1) != 0;
  const DType dt = output_datatype_attr(node);
  Tensor& out = ctx.allocate_output(0, dt, {size});
  const double denom = double(periodic ? size : size - 1);
  constexpr double kTwoPi = 2.0 * std::numbers::pi;
  auto value = [&](int64_t i) -> double {
    // A one-point symmetric window has N = 0; its single value is the window's peak, 1.
    if (denom == 0) return 1.0;
    const double t = kTwoPi * double(i) / denom;
    if constexpr (W == Window::Hann)
      return 0.5 - 0.5 * std::cos(t);
    else if constexpr (W == Window::Hamming)
      return 25.0 / 46.0 - (21.0 / 46.0) * std::cos(t);
    else
      return 0.42 - 0.5 * std::cos(t) + 0.08 * std::cos(2.0 * t);
  };
  visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data<T>();
    parallel_for(size, kElemGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) o[i] = from_double<T>(value(i));
    });
  });
}

}  // namespace

void register_misc_linalg_ops(KernelRegistry& r) {
  r.add("Det").set_kernel(fn_kernel(det_kernel));
  r.add("HannWindow").set_kernel(fn_kernel(window_kernel<Window::Hann>));
  r.add("HammingWindow").set_kernel(fn_kernel(window_kernel<Window::Hamming>));
  r.add("BlackmanWindow").set_kernel(fn_kernel(window_kernel<Window::Blackman>));
}

}  // namespace gaf::runtime
