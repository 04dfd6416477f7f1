// BatchNormalization.
//
// Inference: y = (x - mean) * scale / sqrt(var + epsilon) + B per channel (dimension 1), or per activation
// with spatial = 0 (opset < 9, parameters of shape C x D1 x ...). The per-channel factors are computed once
// in double.
//
// Training form (the batch statistics are computed and normalise the batch): opset 14+ with training_mode =
// 1, opset 7-13 when more than the Y output is requested, opset < 7 when is_test = 0. Outputs 1 and 2 are the
// updated running statistics, input * momentum + batch * (1 - momentum), with the population variance of the
// batch, as in the ONNX reference. The saved_mean / saved_var outputs of opset < 14 are not implemented.
#include "runtime/kernels/onnx/norm_ops.h"

namespace gaf::runtime::rn {

namespace {

class BatchNormKernel final : public Kernel {
 public:
  explicit BatchNormKernel(const Node& n)
      : eps_(n.attr_float("epsilon", 1e-5f)),
        momentum_(n.attr_float("momentum", 0.9f)),
        spatial_(n.opset >= 9 || n.attr_int("spatial", 1) != 0) {
    auto wanted = [&](int i) { return i < n.num_outputs() && !n.output(i)->absent_output; };
    if (n.opset >= 14)
      training_ = n.attr_int("training_mode", 0) != 0;
    else if (n.opset >= 7)
      training_ = wanted(1) || wanted(2) || wanted(3) || wanted(4);
    else
      training_ = n.attr_int("is_test", 0) == 0;
    if (training_ && n.opset < 14 && (wanted(3) || wanted(4)))
      unsupported(
          "{}: the saved_mean / saved_var outputs of training-mode BatchNormalization (opset {}) are not "
          "supported",
          n.describe(), n.opset);
    if (training_ && !spatial_)
      unsupported("{}: training-mode BatchNormalization with spatial = 0 is not supported", n.describe());
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.in(0);
    check_float_input(x, node, "X");
    GAF_CHECK(x.rank() >= 2, "{}: X must have rank >= 2 (N x C x ...), got shape {}", node.describe(),
              dims_to_string(x.dims()));
    const int64_t batch = x.dim(0), channels = x.dim(1), spatial = dims_product(x.dims(), 2, x.rank());
    const int64_t plen = spatial_ ? channels : channels * spatial;  // parameter count
    const char* names[] = {"scale", "B", "input_mean", "input_var"};
    std::vector<double> p[4];
    for (int i = 0; i < 4; ++i) {
      const Tensor& t = ctx.in(i + 1);
      check_float_input(t, node, names[i]);
      GAF_CHECK(t.numel() == plen, "{}: {} has shape {}; expected {} values (X has shape {}{})",
                node.describe(), names[i], dims_to_string(t.dims()), plen, dims_to_string(x.dims()),
                spatial_ ? ", one per channel" : ", spatial = 0: one per activation");
      p[i] = tensor_values(t);
    }
    std::vector<double>&scale = p[0], &bias = p[1], &mean = p[2], &var = p[3];
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());

    visit_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_floating_point_v<compute_t<T>>) {
        const T* xp = x.data<T>();
        if (training_) {
          std::vector<double> bmean(static_cast<size_t>(channels)), bvar(static_cast<size_t>(channels));
          batch_statistics(xp, batch, channels, spatial, bmean, bvar);
          normalize(xp, y.data<T>(), batch, channels, spatial, scale, bias, bmean, bvar);
          const double mo = momentum_;
          for (int k = 1; k <= 2; ++k) {
            if (!wants_output(ctx, k)) continue;
            const std::vector<double>& run = k == 1 ? mean : var;
            const std::vector<double>& cur = k == 1 ? bmean : bvar;
            std::vector<double> upd(static_cast<size_t>(channels));
            for (int64_t c = 0; c < channels; ++c) upd[c] = run[c] * mo + cur[c] * (1.0 - mo);
            Tensor& t = ctx.allocate_output(k, ctx.in(k + 2).dtype(), {channels});
            store_values(upd, t);
          }
        } else {
          normalize(xp, y.data<T>(), batch, channels, spatial, scale, bias, mean, var);
          // Running statistics asked for in inference mode are the inputs, unchanged.
          for (int k = 1; k <= 2; ++k)
            if (wants_output(ctx, k)) ctx.set_output(k, ctx.in(k + 2));
        }
      }
    });
  }

 private:
  // Per-channel mean and population variance over the batch and spatial dimensions.
  template <class T>
  static void batch_statistics(const T* x, int64_t batch, int64_t channels, int64_t spatial,
                               std::vector<double>& bmean, std::vector<double>& bvar) {
    const int64_t count = batch * spatial;
    parallel_for(channels, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, count)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t c = b; c < e; ++c) {
                     double s = 0, q = 0;
                     for (int64_t n = 0; n < batch; ++n) {
                       double rs, rq;
                       row_moments(x + (n * channels + c) * spatial, spatial, rs, rq);
                       s += rs;
                       q += rq;
                     }
                     const double m = count ? s / double(count) : std::nan("");
                     bmean[c] = m;
                     bvar[c] = count ? std::max(0.0, q / double(count) - m * m) : std::nan("");
                   }
                 });
  }

  // y = (x - mean) * scale / sqrt(var + eps) + bias, parameters per channel or per activation.
  template <class T>
  void normalize(const T* x, T* y, int64_t batch, int64_t channels, int64_t spatial,
                 const std::vector<double>& scale, const std::vector<double>& bias,
                 const std::vector<double>& mean, const std::vector<double>& var) const {
    using C = compute_t<T>;
    const size_t plen = scale.size();
    std::vector<C> m(plen), a(plen), b(plen);
    for (size_t i = 0; i < plen; ++i) {
      m[i] = C(mean[i]);
      a[i] = C(scale[i] / std::sqrt(var[i] + double(eps_)));
      b[i] = C(bias[i]);
    }
    // Rows of `len` elements; per-row parameters when spatial > 1 (channel = row % channels), otherwise the
    // parameters run along the row.
    const bool per_row = spatial_ && spatial > 1;
    const int64_t len = per_row ? spatial : channels * spatial,
                  rows = batch * channels * spatial / std::max<int64_t>(1, len);
    if (len == 0 || rows == 0) return;
    parallel_for(rows, std::max<int64_t>(1, kGrain / len), [&](int64_t rb, int64_t re) {
      C xb[kConvBlock], yb[kConvBlock];
      for (int64_t r = rb; r < re; ++r) {
        const T* xr = x + r * len;
        T* yr = y + r * len;
        for (int64_t o = 0; o < len; o += kConvBlock) {
          const int64_t cnt = std::min(kConvBlock, len - o);
          const C* q = as_compute(xr + o, cnt, xb);
          C* out;
          if constexpr (is_f16_v<T>)
            out = yb;
          else
            out = yr + o;
          if (per_row) {
            const int64_t c = r % channels;
            const C mc = m[c], ac = a[c], bc = b[c];
            for (int64_t i = 0; i < cnt; ++i) out[i] = (q[i] - mc) * ac + bc;
          } else {
            const C *mp = m.data() + o, *ap = a.data() + o, *bp = b.data() + o;
            for (int64_t i = 0; i < cnt; ++i) out[i] = (q[i] - mp[i]) * ap[i] + bp[i];
          }
          if constexpr (is_f16_v<T>) from_float(yb, yr + o, cnt);
        }
      }
    });
  }

  float eps_, momentum_;
  bool spatial_;
  bool training_ = false;
};

}  // namespace

void register_batch_norm_ops(KernelRegistry& r) {
  r.add("BatchNormalization").set_kernel([](const Node& n) -> std::unique_ptr<Kernel> {
    return std::make_unique<BatchNormKernel>(n);
  });
}

}  // namespace gaf::runtime::rn
