// LayerNormalization and InstanceNormalization: per-row statistics, then an affine output pass.
//
// A row's mean and variance come from one pass accumulating sum and sum of squares in double (the variance
// E[x^2] - mean^2 in double keeps ~1e-16 * (mean^2 + var) / var relative error, far below fp32 rounding);
// the output pass y = (x - mean) * inv_std * scale + bias then runs on the row while it is in cache. Rows run
// in parallel.
#include "runtime/kernels/onnx/norm_ops.h"

namespace gaf::runtime::rn {

namespace {

// Normalises rows [b, e) of length n: computes each row's statistics, then calls
// param(row, x_row, y_row, mean, inv_std) to write the affine output (LayerNorm: per-position scale and bias;
// InstanceNorm: per-channel). Row statistics are also written to mean_out / inv_out when not null.
template <class T, class Param>
void normalize_rows(const T* x, T* y, int64_t b, int64_t e, int64_t n, double eps, Param&& param,
                    double* mean_out, double* inv_out) {
  using C = compute_t<T>;
  std::vector<C> xb(is_f16_v<T> ? static_cast<size_t>(n) : 0), yb(is_f16_v<T> ? static_cast<size_t>(n) : 0);
  for (int64_t r = b; r < e; ++r) {
    const C* xr = as_compute(x + r * n, n, xb.data());
    double sum, sumsq, mean, inv;
    row_moments(xr, n, sum, sumsq);
    mean_inv_std(sum, sumsq, n, eps, mean, inv);
    if (mean_out) mean_out[r] = mean;
    if (inv_out) inv_out[r] = inv;
    C* yr;
    if constexpr (is_f16_v<T>)
      yr = yb.data();
    else
      yr = y + r * n;
    param(r, xr, yr, C(mean), C(inv));
    if constexpr (is_f16_v<T>) from_float(yb.data(), y + r * n, n);
  }
}

class LayerNormKernel final : public Kernel {
 public:
  explicit LayerNormKernel(const Node& n)
      : axis_(n.attr_int("axis", -1)), eps_(n.attr_float("epsilon", 1e-5f)) {
    int64_t stash = n.attr_int("stash_type", 1);
    // Statistics are always computed in double, at least as precise as any floating stash type.
    if (!is_floating(DType(stash)))
      unsupported("{}: stash_type {} is not supported (a floating type is)", n.describe(), stash);
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.in(0);
    const Tensor& scale = ctx.in(1);
    const Tensor* bias = ctx.input(2);
    check_float_input(x, node, "X");
    check_float_input(scale, node, "Scale");
    if (bias) check_float_input(*bias, node, "B");
    const int r = x.rank();
    GAF_CHECK(axis_ >= -r && axis_ < r, "{}: axis {} is out of range for an input of rank {}",
              node.describe(), axis_, r);
    const int axis = int(axis_ < 0 ? axis_ + r : axis_);
    const int64_t rows = dims_product(x.dims(), 0, axis), n = dims_product(x.dims(), axis, r);
    const std::vector<int64_t> norm_dims(x.dims().begin() + axis, x.dims().end());
    std::vector<int64_t> stat_dims(x.dims().begin(), x.dims().begin() + axis);
    stat_dims.resize(static_cast<size_t>(r), 1);

    Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
    const bool want_mean = wants_output(ctx, 1), want_inv = wants_output(ctx, 2);
    std::vector<double> mean(want_mean ? static_cast<size_t>(rows) : 0),
        inv(want_inv ? static_cast<size_t>(rows) : 0);
    if (n > 0 && rows > 0) {
      visit_dtype(x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_floating_point_v<compute_t<T>>) {
          using C = compute_t<T>;
          std::vector<C> sc = expand_param<C>(scale, norm_dims, node, "Scale");
          std::vector<C> bs = bias ? expand_param<C>(*bias, norm_dims, node, "B")
                                   : std::vector<C>(static_cast<size_t>(n), C(0));
          const C* scp = sc.data();
          const C* bsp = bs.data();
          auto affine = [&](int64_t, const C* xr, C* yr, C m, C is) {
            for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] - m) * is * scp[i] + bsp[i];
          };
          const T* xp = x.data<T>();
          T* yp = y.data<T>();
          parallel_for(rows, std::max<int64_t>(1, kGrain / n), [&](int64_t b, int64_t e) {
            normalize_rows(xp, yp, b, e, n, double(eps_), affine, want_mean ? mean.data() : nullptr,
                           want_inv ? inv.data() : nullptr);
          });
        }
      });
    } else {
      // No elements to normalise over: the statistics are undefined.
      std::fill(mean.begin(), mean.end(), std::nan(""));
      std::fill(inv.begin(), inv.end(), std::nan(""));
    }
    const std::initializer_list<DType> stat_types = {DType::Float, DType::Double, DType::Float16,
                                                     DType::BFloat16};
    if (want_mean) {
      Tensor& t = ctx.allocate_output(1, declared_output_dtype(node, 1, stat_types, DType::Float), stat_dims);
      store_values(mean, t);
    }
    if (want_inv) {
      Tensor& t = ctx.allocate_output(2, declared_output_dtype(node, 2, stat_types, DType::Float), stat_dims);
      store_values(inv, t);
    }
  }

 private:
  int64_t axis_;
  float eps_;
};

class InstanceNormKernel final : public Kernel {
 public:
  explicit InstanceNormKernel(const Node& n) : eps_(n.attr_float("epsilon", 1e-5f)) {}

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.in(0);
    const Tensor& scale = ctx.in(1);
    const Tensor& bias = ctx.in(2);
    check_float_input(x, node, "the input");
    GAF_CHECK(x.rank() >= 2, "{}: the input must have rank >= 2 (N x C x ...), got shape {}", node.describe(),
              dims_to_string(x.dims()));
    const int64_t channels = x.dim(1);
    GAF_CHECK(scale.numel() == channels && bias.numel() == channels,
              "{}: scale (shape {}) and B (shape {}) must have one value per channel ({})", node.describe(),
              dims_to_string(scale.dims()), dims_to_string(bias.dims()), channels);
    const int64_t rows = x.dim(0) * channels, n = dims_product(x.dims(), 2, x.rank());
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
    if (rows == 0 || n == 0) return;
    const std::vector<double> sc = tensor_values(scale), bs = tensor_values(bias);
    visit_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_floating_point_v<compute_t<T>>) {
        using C = compute_t<T>;
        auto affine = [&](int64_t row, const C* xr, C* yr, C m, C is) {
          const int64_t c = row % channels;
          const C a = C(double(is) * sc[c]), b = C(bs[c]);
          for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] - m) * a + b;
        };
        const T* xp = x.data<T>();
        T* yp = y.data<T>();
        parallel_for(rows, std::max<int64_t>(1, kGrain / n), [&](int64_t b, int64_t e) {
          normalize_rows(xp, yp, b, e, n, double(eps_), affine, nullptr, nullptr);
        });
      }
    });
  }

 private:
  float eps_;
};

}  // namespace

void register_layer_norm_ops(KernelRegistry& r) {
  r.add("LayerNormalization").set_kernel([](const Node& n) -> std::unique_ptr<Kernel> {
    return std::make_unique<LayerNormKernel>(n);
  });
  r.add("InstanceNormalization").set_kernel([](const Node& n) -> std::unique_ptr<Kernel> {
    return std::make_unique<InstanceNormKernel>(n);
  });
}

}  // namespace gaf::runtime::rn
