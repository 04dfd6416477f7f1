// Integer and quantized MatMul / Conv: MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv on plain loops
// with 32-bit integer accumulation (wrapping like the hardware), zero points per tensor, per row / column
// (MatMul) or per output channel (Conv), and requantization rounding half to even with saturation. (oneDNN's
// int8 kernels take only signed 8-bit weights and per-tensor weight zero points, so they do not cover the
// ONNX ops.)
#include <cmath>
#include <limits>

#include "ops/geometry.h"
#include "runtime/kernels/dnnl/dnnl_kernels.h"
#include "runtime/kernels/dnnl/plain_conv.h"
#include "runtime/kernels/dnnl/dnnl_util.h"

namespace gaf::runtime::dnnl_detail {

namespace {

// Calls f(T{}) for a uint8 / int8 element type; unsupported otherwise.
template <class F>
void visit_int8(const Node& node, const char* what, DType t, F&& f) {
  if (t == DType::UInt8)
    f(uint8_t{});
  else if (t == DType::Int8)
    f(int8_t{});
  else
    unsupported("{}: {} of element type {} is not supported (uint8 or int8)", node.describe(), what,
                dtype_name(t));
}

// A zero point or scale of a MatMul operand, expanded to one value per (operand matrix, row) for A or per
// (operand matrix, column) for B. Accepted shapes: scalar / one element; 1-D of the row (column) count,
// shared by all matrices; or the operand's rank with the reduced (K) axis of size 1, broadcast over the batch
// dims.
std::vector<double> expand_matmul_param(const Node& node, const char* name, const Tensor* t,
                                        const Dims& operand, bool rows) {
  const int r = int(operand.size());
  Dims target = operand;
  target[rows ? r - 1 : r - 2] = 1;
  const int64_t count = numel_of(target);
  if (!t || !t->defined()) return std::vector<double>(1, 0.0);
  std::vector<double> vals(t->numel());
  visit_dtype(t->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = static_cast<const T*>(t->raw());
    for (int64_t i = 0; i < t->numel(); ++i) vals[i] = to_double(p[i]);
  });
  if (t->numel() == 1) return vals;
  Dims pd = t->dims();
  const int64_t len = rows ? operand[r - 2] : operand[r - 1];
  if (pd.size() == 1 && pd[0] == len) pd = rows ? Dims{len, 1} : Dims{1, len};
  GAF_CHECK(pd.size() <= size_t(r), "{}: {} of shape {} does not fit the operand {}", node.describe(), name,
            dims_to_string(t->dims()), dims_to_string(operand));
  Dims padded(r - pd.size(), 1);
  padded.insert(padded.end(), pd.begin(), pd.end());
  for (int i = 0; i < r; ++i)
    GAF_CHECK(padded[i] == target[i] || padded[i] == 1,
              "{}: {} of shape {} must be a scalar or per-{} for the operand {}", node.describe(), name,
              dims_to_string(t->dims()), rows ? "row" : "column", dims_to_string(operand));
  std::vector<double> out(count);
  std::array<Dims, 1> st{broadcast_strides(padded, target)};
  strided_walk<1>(
      target, st, 0, count,
      [&](int64_t pos, const std::array<int64_t, 1>& offs, int64_t run, const std::array<int64_t, 1>& inner) {
        for (int64_t j = 0; j < run; ++j) out[pos + j] = vals[offs[0] + j * inner[0]];
      });
  return out;
}

inline double param_at(const std::vector<double>& v, int64_t i) { return v.size() == 1 ? v[0] : v[i]; }

// acc(i, m, :) = sum_k (a - za) * (b - zb) for every output matrix i and row m; finish(i, m, acc) consumes
// rows. za is per (A matrix, row), zb per (B matrix, column), each possibly a single value.
template <class TA, class TB, class Finish>
void int_matmul(const BatchedMatMul& bm, const TA* a, const std::vector<double>& za, const TB* b,
                const std::vector<double>& zb, int64_t b_mats, Finish&& finish) {
  const int64_t M = bm.M, N = bm.N, K = bm.K;
  // B minus its zero point, once per B matrix (uint32: products and sums wrap instead of overflowing).
  std::vector<uint32_t> bz(size_t(b_mats * K * N));
  parallel_for(b_mats * K, std::max<int64_t>(1, 32768 / std::max<int64_t>(1, N)), [&](int64_t s, int64_t e) {
    for (int64_t r = s; r < e; ++r) {
      const int64_t mat = r / K;
      for (int64_t n = 0; n < N; ++n)
        bz[r * N + n] = uint32_t(int32_t(b[r * N + n]) - int32_t(param_at(zb, mat * N + n)));
    }
  });
  parallel_for(bm.count * M, std::max<int64_t>(1, 32768 / std::max<int64_t>(1, N * K)),
               [&](int64_t s, int64_t e) {
                 std::vector<uint32_t> acc(N);
                 for (int64_t r = s; r < e; ++r) {
                   const int64_t i = r / M, m = r % M;
                   const TA* ap = a + (bm.a_index[i] * M + m) * K;
                   const uint32_t* bp = bz.data() + bm.b_index[i] * K * N;
                   const int32_t zero = int32_t(param_at(za, bm.a_index[i] * M + m));
                   std::fill(acc.begin(), acc.end(), 0u);
                   for (int64_t k = 0; k < K; ++k) {
                     const uint32_t av = uint32_t(int32_t(ap[k]) - zero);
                     if (av == 0) continue;
                     const uint32_t* br = bp + k * N;
                     for (int64_t n = 0; n < N; ++n) acc[n] += av * br[n];
                   }
                   finish(i, m, acc.data());
                 }
               });
}

template <class T>
T saturate_round(double v) {
  v = std::nearbyint(v);
  v = std::min<double>(std::max<double>(v, std::numeric_limits<T>::lowest()), std::numeric_limits<T>::max());
  return T(v);
}

// The canonical [batch..., rows, cols] dims of a MatMul operand (1-D A is one row, 1-D B one column).
Dims canonical_operand(const Dims& d, bool is_a) {
  if (d.size() != 1) return d;
  return is_a ? Dims{1, d[0]} : Dims{d[0], 1};
}

double scalar_param(const Node& node, const char* name, const Tensor* t, double def) {
  if (!t || !t->defined()) return def;
  GAF_CHECK(t->numel() == 1, "{}: {} must be a scalar, got shape {}", node.describe(), name,
            dims_to_string(t->dims()));
  return t->get_double(0);
}

// MatMulInteger(A, B, a_zero_point, b_zero_point) -> int32; QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp,
// y_scale, y_zp) -> y_zp's type.
template <bool kQLinear>
void int_matmul_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const int ia = 0, ib = kQLinear ? 3 : 1;
  const Tensor& A = ctx.in(ia);
  const Tensor& B = ctx.in(ib);
  BatchedMatMul bm = batched_matmul(node, A.dims(), B.dims());
  Dims ac = canonical_operand(A.dims(), true), bc = canonical_operand(B.dims(), false);
  const int64_t b_mats = B.numel() / std::max<int64_t>(1, bm.K * bm.N);
  std::vector<double> za, zb, sa, sb;
  if constexpr (kQLinear) {
    sa = expand_matmul_param(node, "a_scale", &ctx.in(1), ac, true);
    za = expand_matmul_param(node, "a_zero_point", ctx.input(2), ac, true);
    sb = expand_matmul_param(node, "b_scale", &ctx.in(4), bc, false);
    zb = expand_matmul_param(node, "b_zero_point", ctx.input(5), bc, false);
  } else {
    za = expand_matmul_param(node, "a_zero_point", ctx.input(2), ac, true);
    zb = expand_matmul_param(node, "b_zero_point", ctx.input(3), bc, false);
  }
  const Tensor* yzp = kQLinear ? ctx.input(7) : nullptr;
  const DType out_type = kQLinear ? (yzp && yzp->defined() ? yzp->dtype() : A.dtype()) : DType::Int32;
  Tensor& Y = ctx.allocate_output(0, out_type, bm.out);
  if (Y.numel() == 0) return;
  visit_int8(node, "A", A.dtype(), [&](auto ta) {
    using TA = decltype(ta);
    visit_int8(node, "B", B.dtype(), [&](auto tb) {
      using TB = decltype(tb);
      const TA* a = A.data<TA>();
      const TB* b = B.data<TB>();
      const int64_t M = bm.M, N = bm.N;
      if constexpr (!kQLinear) {
        int32_t* y = Y.data<int32_t>();
        int_matmul(bm, a, za, b, zb, b_mats, [&](int64_t i, int64_t m, const uint32_t* acc) {
          int32_t* yr = y + (i * M + m) * N;
          for (int64_t n = 0; n < N; ++n) yr[n] = int32_t(acc[n]);
        });
      } else {
        const double ys = scalar_param(node, "y_scale", &ctx.in(6), 1.0);
        const double yz = scalar_param(node, "y_zero_point", yzp, 0.0);
        GAF_CHECK(ys != 0.0, "{}: y_scale is zero", node.describe());
        visit_int8(node, "y", out_type, [&](auto ty) {
          using TY = decltype(ty);
          TY* y = Y.data<TY>();
          int_matmul(bm, a, za, b, zb, b_mats, [&](int64_t i, int64_t m, const uint32_t* acc) {
            TY* yr = y + (i * M + m) * N;
            const double s_row = param_at(sa, bm.a_index[i] * M + m) / ys;
            const int64_t bb = bm.b_index[i] * N;
            for (int64_t n = 0; n < N; ++n)
              yr[n] = saturate_round<TY>(double(int32_t(acc[n])) * s_row * param_at(sb, bb + n) + yz);
          });
        });
      }
    });
  });
}

// Per-output-channel values (scalar or [M]) of a Conv quantization parameter.
std::vector<double> channel_param(const Node& node, const char* name, const Tensor* t, int64_t M,
                                  double def) {
  if (!t || !t->defined()) return {def};
  GAF_CHECK(t->numel() == 1 || (t->rank() == 1 && t->dim(0) == M),
            "{}: {} must be a scalar or have one value per output channel ({}), got shape {}",
            node.describe(), name, M, dims_to_string(t->dims()));
  std::vector<double> v(t->numel());
  for (int64_t i = 0; i < t->numel(); ++i) v[i] = t->get_double(i);
  return v;
}

// ConvInteger(x, w, x_zero_point, w_zero_point) -> int32; QLinearConv(x, x_scale, x_zp, w, w_scale, w_zp,
// y_scale, y_zp, B) -> y_zp's type.
template <bool kQLinear>
class IntConvKernel final : public Kernel {
 public:
  explicit IntConvKernel(const Node& node)
      : attrs_(WindowAttrs::parse(node)), group_(node.attr_int("group", 1)) {}

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const int ix = 0, iw = kQLinear ? 3 : 1;
    const Tensor& X = ctx.in(ix);
    const Tensor& W = ctx.in(iw);
    const Tensor* bias = kQLinear ? ctx.input(8) : nullptr;
    if (bias && !bias->defined()) bias = nullptr;
    ConvShape s = conv_shape(node, false, attrs_, group_, X.dims(), W.dims(), bias ? &bias->dims() : nullptr);
    if (s.win.rank() > 3)
      unsupported("{}: {} spatial dimensions are not supported (at most 3)", node.describe(), s.win.rank());
    const double xz = scalar_param(node, "x_zero_point", ctx.input(2), 0.0);
    std::vector<double> wz = channel_param(node, "w_zero_point", ctx.input(kQLinear ? 5 : 3), s.M, 0.0);
    std::vector<uint32_t> wz_m(s.M);
    for (int64_t m = 0; m < s.M; ++m) wz_m[m] = uint32_t(int32_t(param_at(wz, m)));
    const Tensor* yzp = kQLinear ? ctx.input(7) : nullptr;
    const DType out_type = kQLinear ? (yzp && yzp->defined() ? yzp->dtype() : X.dtype()) : DType::Int32;
    Tensor& Y = ctx.allocate_output(0, out_type, s.out);
    if (Y.numel() == 0) return;
    ConvDims cd(s.N, s.C, s.M, s.G, s.win);
    std::vector<int32_t> bv;
    if (bias) {
      GAF_CHECK(bias->dtype() == DType::Int32, "{}: bias B must be int32, got {}", node.describe(),
                dtype_name(bias->dtype()));
      bv.assign(bias->data<int32_t>(), bias->data<int32_t>() + s.M);
    }
    visit_int8(node, "x", X.dtype(), [&](auto tx) {
      using TX = decltype(tx);
      visit_int8(node, "w", W.dtype(), [&](auto tw) {
        using TW = decltype(tw);
        const TX* x = X.data<TX>();
        const TW* w = W.data<TW>();
        const uint32_t xzu = uint32_t(int32_t(xz));
        if constexpr (!kQLinear) {
          int32_t* y = Y.data<int32_t>();
          ref_conv<uint32_t>(cd, x, xzu, w, wz_m.data(),
                             [&](int64_t n, int64_t m, const uint32_t* acc, int64_t sz) {
                               int32_t* yp = y + (n * cd.M + m) * sz;
                               for (int64_t i = 0; i < sz; ++i) yp[i] = int32_t(acc[i]);
                             });
        } else {
          const double xs = scalar_param(node, "x_scale", &ctx.in(1), 1.0);
          std::vector<double> ws = channel_param(node, "w_scale", &ctx.in(4), s.M, 1.0);
          const double ys = scalar_param(node, "y_scale", &ctx.in(6), 1.0);
          const double yz = scalar_param(node, "y_zero_point", yzp, 0.0);
          GAF_CHECK(ys != 0.0, "{}: y_scale is zero", node.describe());
          visit_int8(node, "y", out_type, [&](auto ty) {
            using TY = decltype(ty);
            TY* y = Y.data<TY>();
            ref_conv<uint32_t>(
                cd, x, xzu, w, wz_m.data(), [&](int64_t n, int64_t m, const uint32_t* acc, int64_t sz) {
                  TY* yp = y + (n * cd.M + m) * sz;
                  const double scale = xs * param_at(ws, m) / ys;
                  const int64_t b = bv.empty() ? 0 : bv[m];
                  for (int64_t i = 0; i < sz; ++i)
                    yp[i] = saturate_round<TY>(double(int64_t(int32_t(acc[i])) + b) * scale + yz);
                });
          });
        }
      });
    });
  }

 private:
  WindowAttrs attrs_;
  int64_t group_;
};

}  // namespace

void register_quant_ops(KernelRegistry& r) {
  r.add("MatMulInteger").set_kernel(fn_kernel(int_matmul_kernel<false>));
  r.add("QLinearMatMul").set_kernel(fn_kernel(int_matmul_kernel<true>));
  r.add("ConvInteger").set_kernel([](const Node& n) -> std::unique_ptr<Kernel> {
    return std::make_unique<IntConvKernel<false>>(n);
  });
  r.add("QLinearConv").set_kernel([](const Node& n) -> std::unique_ptr<Kernel> {
    return std::make_unique<IntConvKernel<true>>(n);
  });
}

}  // namespace gaf::runtime::dnnl_detail
