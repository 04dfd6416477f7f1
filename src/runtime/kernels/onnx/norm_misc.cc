// LpNormalization, MeanVarianceNormalization, LRN.
#include "runtime/kernels/onnx/norm_ops.h"
#include "runtime/kernels/onnx/reduce_ops.h"

namespace gaf::runtime::rn {

namespace {

// ---- LpNormalization: y = x / ||x||_p along one axis (p = 1 or 2); a zero vector stays zero. ----

template <int P, class T>
void lp_normalize(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {
  using C = compute_t<T>;
  constexpr int64_t kChunk = 512;
  auto inv_norm = [](double acc) {
    double norm = P == 1 ? acc : std::sqrt(acc);
    return norm > 0 ? 1.0 / norm : 0.0;
  };
  if (inner == 1) {
    parallel_for(outer, std::max<int64_t>(1, kGrain / n), [&](int64_t b, int64_t e) {
      std::vector<C> xb(is_f16_v<T> ? static_cast<size_t>(n) : 0),
          yb(is_f16_v<T> ? static_cast<size_t>(n) : 0);
      for (int64_t o = b; o < e; ++o) {
        const C* q = as_compute(x + o * n, n, xb.data());
        double acc = 0;
#pragma omp simd reduction(+ : acc)
        for (int64_t i = 0; i < n; ++i) acc += P == 1 ? std::abs(double(q[i])) : double(q[i]) * double(q[i]);
        const C s = C(inv_norm(acc));
        C* out;
        if constexpr (is_f16_v<T>)
          out = yb.data();
        else
          out = y + o * n;
        for (int64_t i = 0; i < n; ++i) out[i] = q[i] * s;
        if constexpr (is_f16_v<T>) from_float(yb.data(), y + o * n, n);
      }
    });
    return;
  }
  const int64_t chunk = std::min(inner, kChunk), per = (inner + chunk - 1) / chunk;
  parallel_for(outer * per, std::max<int64_t>(1, kGrain / (n * chunk)), [&](int64_t b, int64_t e) {
    double acc[kChunk];
    C s[kChunk], buf[kChunk], out[kChunk];
    for (int64_t p = b; p < e; ++p) {
      const int64_t o = p / per, j0 = (p % per) * chunk, cnt = std::min(chunk, inner - j0);
      const T* xo = x + o * n * inner + j0;
      T* yo = y + o * n * inner + j0;
      std::fill(acc, acc + cnt, 0.0);
      for (int64_t i = 0; i < n; ++i) {
        const C* q = as_compute(xo + i * inner, cnt, buf);
        for (int64_t j = 0; j < cnt; ++j)
          acc[j] += P == 1 ? std::abs(double(q[j])) : double(q[j]) * double(q[j]);
      }
      for (int64_t j = 0; j < cnt; ++j) s[j] = C(inv_norm(acc[j]));
      for (int64_t i = 0; i < n; ++i) {
        const C* q = as_compute(xo + i * inner, cnt, buf);
        for (int64_t j = 0; j < cnt; ++j) out[j] = q[j] * s[j];
        if constexpr (is_f16_v<T>)
          from_float(out, yo + i * inner, cnt);
        else
          std::copy(out, out + cnt, yo + i * inner);
      }
    }
  });
}

class LpNormKernel final : public Kernel {
 public:
  explicit LpNormKernel(const Node& n) : axis_(n.attr_int("axis", -1)), p_(n.attr_int("p", 2)) {
    GAF_CHECK(p_ == 1 || p_ == 2, "{}: p must be 1 or 2, got {}", n.describe(), p_);
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.in(0);
    check_float_input(x, node, "the input");
    const int r = x.rank();
    GAF_CHECK(axis_ >= -r && axis_ < r, "{}: axis {} is out of range for an input of rank {}",
              node.describe(), axis_, r);
    const int axis = int(axis_ < 0 ? axis_ + r : axis_);
    const int64_t outer = dims_product(x.dims(), 0, axis), n = x.dim(axis),
                  inner = dims_product(x.dims(), axis + 1, r);
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
    if (y.numel() == 0) return;
    visit_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_floating_point_v<compute_t<T>>) {
        if (p_ == 1)
          lp_normalize<1>(x.data<T>(), y.data<T>(), outer, n, inner);
        else
          lp_normalize<2>(x.data<T>(), y.data<T>(), outer, n, inner);
      }
    });
  }

 private:
  int64_t axis_, p_;
};

// ---- MeanVarianceNormalization: y = (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9) over `axes`, as the
// function body in the ONNX specification defines it. ----

class MvnKernel final : public Kernel {
 public:
  explicit MvnKernel(const Node& n) : axes_(n.attr_ints("axes", {0, 2, 3})) {}

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.in(0);
    check_float_input(x, node, "the input");
    std::vector<bool> mask = axes_mask(axes_, x.rank(), node);
    ReduceGeometry g = make_reduce_geometry(x.dims(), mask, /*keepdims=*/true, node);
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
    if (x.numel() == 0) return;
    visit_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_floating_point_v<compute_t<T>>) {
        using C = compute_t<T>;
        const T* xp = x.data<T>();
        std::vector<double> mean(static_cast<size_t>(g.outputs)), sq(static_cast<size_t>(g.outputs));
        run_reduce<MeanOp<C>>(g, xp, mean.data());
        run_reduce<SumSquareOp<C>>(g, xp, sq.data());
        std::vector<C> shift(static_cast<size_t>(g.outputs)), scale(static_cast<size_t>(g.outputs));
        for (int64_t o = 0; o < g.outputs; ++o) {
          const double var = std::max(0.0, sq[o] / double(g.reduced) - mean[o] * mean[o]);
          shift[o] = C(mean[o]);
          scale[o] = C(1.0 / (std::sqrt(var) + 1e-9));
        }
        const std::array<std::vector<int64_t>, 1> strides = {broadcast_strides(g.out_dims, x.dims())};
        T* yp = y.data<T>();
        parallel_for(x.numel(), kGrain, [&](int64_t b, int64_t e) {
          strided_walk(x.dims(), strides, b, e,
                       [&](int64_t pos, const std::array<int64_t, 1>& offs, int64_t run,
                           const std::array<int64_t, 1>& inner) {
                         const C* sh = shift.data() + offs[0];
                         const C* sc = scale.data() + offs[0];
                         const int64_t st = inner[0];
                         for (int64_t o = 0; o < run; o += kConvBlock) {
                           const int64_t cnt = std::min(kConvBlock, run - o);
                           C xb[kConvBlock], yb[kConvBlock];
                           const C* q = as_compute(xp + pos + o, cnt, xb);
                           for (int64_t i = 0; i < cnt; ++i) {
                             const int64_t k = (o + i) * st;
                             yb[i] = (q[i] - sh[k]) * sc[k];
                           }
                           if constexpr (is_f16_v<T>)
                             from_float(yb, yp + pos + o, cnt);
                           else
                             std::copy(yb, yb + cnt, yp + pos + o);
                         }
                       });
        });
      }
    });
  }

 private:
  std::vector<int64_t> axes_;
};

// ---- LRN: y = x / (bias + alpha / size * sum of x^2 over a window of `size` channels) ^ beta. ----

template <class C>
inline C pow_neg_beta(C v, double beta) {
  // The common exponents without a call to pow.
  if (beta == 0.75) return C(1) / (std::sqrt(v) * std::sqrt(std::sqrt(v)));
  if (beta == 0.5) return C(1) / std::sqrt(v);
  if (beta == 1.0) return C(1) / v;
  return C(std::pow(double(v), -beta));
}

class LrnKernel final : public Kernel {
 public:
  explicit LrnKernel(const Node& n)
      : size_(n.attr_int("size")),
        alpha_(n.attr_float("alpha", 1e-4f)),
        beta_(n.attr_float("beta", 0.75f)),
        bias_(n.attr_float("bias", 1.0f)) {
    GAF_CHECK(size_ >= 1, "{}: size must be >= 1, got {}", n.describe(), size_);
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.in(0);
    check_float_input(x, node, "the input");
    GAF_CHECK(x.rank() >= 2, "{}: the input must have rank >= 2 (N x C x ...), got shape {}", node.describe(),
              dims_to_string(x.dims()));
    const int64_t channels = x.dim(1), spatial = dims_product(x.dims(), 2, x.rank());
    const int64_t rows = x.dim(0) * channels;
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
    if (y.numel() == 0) return;
    const int64_t before = (size_ - 1) / 2, after = size_ / 2;  // floor((size-1)/2), ceil((size-1)/2)
    const double k = double(alpha_) / double(size_), beta = beta_;
    visit_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_floating_point_v<compute_t<T>>) {
        using C = compute_t<T>;
        const T* xp = x.data<T>();
        T* yp = y.data<T>();
        const C kc = C(k), bc = C(bias_);
        const int64_t chunk = std::min<int64_t>(spatial, 512), per = (spatial + chunk - 1) / chunk;
        parallel_for(rows * per, std::max<int64_t>(1, kGrain / (chunk * size_)), [&](int64_t b, int64_t e) {
          C acc[512], buf[512], out[512];
          for (int64_t p = b; p < e; ++p) {
            const int64_t row = p / per, s0 = (p % per) * chunk, cnt = std::min(chunk, spatial - s0);
            const int64_t n = row / channels, c = row % channels;
            const int64_t c0 = std::max<int64_t>(0, c - before), c1 = std::min(channels - 1, c + after);
            std::fill(acc, acc + cnt, C(0));
            for (int64_t cc = c0; cc <= c1; ++cc) {
              const C* q = as_compute(xp + (n * channels + cc) * spatial + s0, cnt, buf);
              for (int64_t i = 0; i < cnt; ++i) acc[i] += q[i] * q[i];
            }
            const C* q = as_compute(xp + row * spatial + s0, cnt, buf);
            for (int64_t i = 0; i < cnt; ++i) out[i] = q[i] * pow_neg_beta(bc + kc * acc[i], beta);
            if constexpr (is_f16_v<T>)
              from_float(out, yp + row * spatial + s0, cnt);
            else
              std::copy(out, out + cnt, yp + row * spatial + s0);
          }
        });
      }
    });
  }

 private:
  int64_t size_;
  float alpha_, beta_, bias_;
};

}  // namespace

void register_misc_norm_ops(KernelRegistry& r) {
  r.add("LpNormalization").set_kernel([](const Node& n) -> std::unique_ptr<Kernel> {
    return std::make_unique<LpNormKernel>(n);
  });
  r.add("MeanVarianceNormalization").set_kernel([](const Node& n) -> std::unique_ptr<Kernel> {
    return std::make_unique<MvnKernel>(n);
  });
  r.add("LRN").set_kernel(
      [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<LrnKernel>(n); });
}

}  // namespace gaf::runtime::rn
