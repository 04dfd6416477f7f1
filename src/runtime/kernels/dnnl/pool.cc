// Pooling: MaxPool and AveragePool through oneDNN's pooling primitive on plain NCHW or channels-last tensors
// (fp32, fp16/bf16 staged through fp32, int8/uint8 max natively), except channels-last 2-D fp32 max pools:
// max_pool_nhwc (below). LpPool, MaxPool's Indices output, double / other integer types and window semantics
// oneDNN does not share (count_include_pad with a ceil_mode overhang) run on a plain loop. GlobalAveragePool /
// GlobalMaxPool / GlobalLpPool reduce each (n, c) plane with a vectorisable loop.
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>
#include <variant>

#include "ops/geometry.h"
#include "runtime/kernels/dnnl/dnnl_kernels.h"
#include "runtime/kernels/dnnl/plain_conv.h"
#include "runtime/kernels/dnnl/dnnl_util.h"
#include "ops/simd_vec.h"

namespace gaf::runtime::dnnl_detail {

namespace {

enum class PoolKind { Max, Avg, Lp };

const char* pool_name(PoolKind k) {
  return k == PoolKind::Max ? "MaxPool" : k == PoolKind::Avg ? "AveragePool" : "LpPool";
}

// A window padded to 3 spatial dims (leading size-1 dims), with end pads for count_include_pad.
struct PoolDims {
  int64_t planes = 0;
  int64_t in[3], k[3], s[3], d[3], pb[3], pe[3], out[3];
  int rank = 0;
  explicit PoolDims(int64_t nc, const Window& w) : planes(nc), rank(w.rank()) {
    for (int i = 0; i < 3; ++i) {
      int j = i - (3 - rank);
      in[i] = j >= 0 ? w.in[j] : 1;
      k[i] = j >= 0 ? w.k[j] : 1;
      s[i] = j >= 0 ? w.s[j] : 1;
      d[i] = j >= 0 ? w.d[j] : 1;
      pb[i] = j >= 0 ? w.pb[j] : 0;
      pe[i] = j >= 0 ? w.pe[j] : 0;
      out[i] = j >= 0 ? w.out[j] : 1;
    }
  }
  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
};

// Plain-loop pooling over planes of `x` (T is float, double or an integer type). `idx` (may be null) receives
// MaxPool's flat argmax indices, row-major (storage_order 0) or column-major over the spatial dims (1).
template <class T>
void ref_pool(const PoolDims& c, PoolKind kind, bool count_include_pad, double p, const T* x, T* y,
              int64_t* idx, bool col_major) {
  const int64_t insz = c.in_size(), outsz = c.out_size();
  const int64_t ksz = c.k[0] * c.k[1] * c.k[2];
  // Strides of the flat index per spatial dim (the padded leading dims have extent 1, any stride works).
  int64_t istr[3];
  if (!col_major) {
    istr[2] = 1, istr[1] = c.in[2], istr[0] = c.in[1] * c.in[2];
  } else {
    // Column-major over the real spatial dims: the first spatial dim varies fastest.
    int64_t acc = 1;
    for (int i = 3 - c.rank; i < 3; ++i) {
      istr[i] = acc;
      acc *= c.in[i];
    }
    for (int i = 0; i < 3 - c.rank; ++i) istr[i] = 0;
  }
  parallel_for(c.planes, std::max<int64_t>(1, 32768 / std::max<int64_t>(1, outsz * ksz)),
               [&](int64_t b, int64_t e) {
                 for (int64_t pl = b; pl < e; ++pl) {
                   const T* xp = x + pl * insz;
                   T* yp = y + pl * outsz;
                   int64_t* ip = idx ? idx + pl * outsz : nullptr;
                   for (int64_t od = 0; od < c.out[0]; ++od)
                     for (int64_t oh = 0; oh < c.out[1]; ++oh)
                       for (int64_t ow = 0; ow < c.out[2]; ++ow) {
                         const int64_t o = (od * c.out[1] + oh) * c.out[2] + ow;
                         const int64_t d0 = od * c.s[0] - c.pb[0], h0 = oh * c.s[1] - c.pb[1],
                                       w0 = ow * c.s[2] - c.pb[2];
                         double sum = 0.0;
                         int64_t valid = 0, in_pads = 0;
                         T best = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                                       : std::numeric_limits<T>::lowest();
                         int64_t best_i = -1;
                         for (int64_t kd = 0; kd < c.k[0]; ++kd) {
                           const int64_t id = d0 + kd * c.d[0];
                           if (id < -c.pb[0] || id >= c.in[0] + c.pe[0]) continue;
                           const bool vd = id >= 0 && id < c.in[0];
                           for (int64_t kh = 0; kh < c.k[1]; ++kh) {
                             const int64_t ih = h0 + kh * c.d[1];
                             if (ih < -c.pb[1] || ih >= c.in[1] + c.pe[1]) continue;
                             const bool vh = vd && ih >= 0 && ih < c.in[1];
                             for (int64_t kw = 0; kw < c.k[2]; ++kw) {
                               const int64_t iw = w0 + kw * c.d[2];
                               if (iw < -c.pb[2] || iw >= c.in[2] + c.pe[2]) continue;
                               ++in_pads;
                               if (!vh || iw < 0 || iw >= c.in[2]) continue;
                               const T v = xp[(id * c.in[1] + ih) * c.in[2] + iw];
                               ++valid;
                               if (kind == PoolKind::Max) {
                                 if (v > best || best_i < 0) {
                                   best = v;
                                   best_i = id * istr[0] + ih * istr[1] + iw * istr[2];
                                 }
                               } else if (kind == PoolKind::Avg) {
                                 sum += double(v);
                               } else {
                                 sum += p == 2.0 ? double(v) * double(v) : std::pow(std::fabs(double(v)), p);
                               }
                             }
                           }
                         }
                         if (kind == PoolKind::Max) {
                           yp[o] = best;
                           if (ip) ip[o] = best_i < 0 ? -1 : pl * insz + best_i;
                         } else if (kind == PoolKind::Avg) {
                           const int64_t div = count_include_pad ? in_pads : valid;
                           yp[o] = div ? T(sum / double(div)) : T(0);
                         } else {
                           yp[o] = T(p == 2.0 ? std::sqrt(sum) : p == 1.0 ? sum : std::pow(sum, 1.0 / p));
                         }
                       }
                 }
               });
}

// The taps [k0, k1) of a window of k taps d apart, the first at `start`, that land inside [0, size).
std::pair<int64_t, int64_t> taps_inside(int64_t start, int64_t k, int64_t d, int64_t size) {
  int64_t k0 = 0, k1 = k;
  while (k0 < k1 && start + k0 * d < 0) ++k0;
  while (k1 > k0 && start + (k1 - 1) * d >= size) --k1;
  return {k0, k1};
}

// 2-D max pooling of channels-last fp32 [N, H, W, C]: each output pixel is the lanewise maximum of its window's
// input pixels that lie inside the input (padding never wins), up to four vectors of channels at a time, the rows
// of output pixels split across the threads. The maximum keeps ref_pool's order: the first pixel, then each later
// one that compares greater (a NaN is kept only where it comes first, as there). oneDNN 2.6's channels-last
// pooling scales poorly (ResNet's 3x3/2 pool over 112x112x64: 0.150 ms with 2 threads, 0.193 with one,
// standalone); in ResNet-50 on Sapphire Rapids this takes 0.101 ms where oneDNN took 0.158.
void max_pool_nhwc(const Window& w, int64_t n, int64_t c, const float* x, float* y) {
  const int64_t ih = w.in[0], iw = w.in[1], oh = w.out[0], ow = w.out[1];
  const int64_t row_work = ow * w.k[0] * w.k[1] * c;
  parallel_for(n * oh, std::max<int64_t>(1, 65536 / std::max<int64_t>(1, row_work)), [&](int64_t r0, int64_t r1) {
    std::vector<const float*> taps(size_t(w.k[0] * w.k[1]));
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / oh, oy = r % oh;
      const int64_t h0 = oy * w.s[0] - w.pb[0];
      const auto [kh0, kh1] = taps_inside(h0, w.k[0], w.d[0], ih);
      const float* xb = x + b * ih * iw * c;
      float* yr = y + r * ow * c;
      for (int64_t ox = 0; ox < ow; ++ox) {
        const int64_t w0 = ox * w.s[1] - w.pb[1];
        const auto [kw0, kw1] = taps_inside(w0, w.k[1], w.d[1], iw);
        float* yp = yr + ox * c;
        if (kh0 >= kh1 || kw0 >= kw1) {  // a window wholly in the padding (ref_pool: -inf)
          std::fill(yp, yp + c, -std::numeric_limits<float>::infinity());
          continue;
        }
        auto at = [&](int64_t kh, int64_t kw) { return xb + ((h0 + kh * w.d[0]) * iw + w0 + kw * w.d[1]) * c; };
        int64_t nt = 0;  // the window's pixels inside the input, in ref_pool's order
        for (int64_t kh = kh0; kh < kh1; ++kh)
          for (int64_t kw = kw0; kw < kw1; ++kw) taps[size_t(nt++)] = at(kh, kw);
        int64_t j = 0;
#if defined(GAF_SIMD)
        // Four vectors of channels at a time: four independent chains of maxima, where one vector's chain of
        // k x k dependent maxima was bound by their latency (SqueezeNet's 3x3 pools 1.6x faster).
        for (; j + 4 * simd::kW <= c; j += 4 * simd::kW) {
          simd::vf best[4];
          for (int u = 0; u < 4; ++u) best[u] = simd::loadu(taps[0] + j + u * simd::kW);
          for (int64_t t = 1; t < nt; ++t)
            for (int u = 0; u < 4; ++u)
              best[u] = simd::max(simd::loadu(taps[size_t(t)] + j + u * simd::kW), best[u]);  // v > best ? v : best
          for (int u = 0; u < 4; ++u) simd::storeu(yp + j + u * simd::kW, best[u]);
        }
        for (; j < c; j += simd::kW) {
          const simd::lanes_t m = simd::first(c - j);
          simd::vf best = simd::loadu(taps[0] + j, m);
          for (int64_t t = 1; t < nt; ++t) best = simd::max(simd::loadu(taps[size_t(t)] + j, m), best);
          simd::storeu(yp + j, best, m);
        }
#endif
        for (; j < c; ++j) {
          float best = taps[0][j];
          for (int64_t t = 1; t < nt; ++t)
            if (taps[size_t(t)][j] > best) best = taps[size_t(t)][j];
          yp[j] = best;
        }
      }
    }
  });
}

// LpPool / GlobalLpPool's p: a float attribute in opset 1, an int from opset 2 on.
double lp_norm_p(const Node& node) {
  auto it = node.attrs.find("p");
  double p = 2.0;
  if (it != node.attrs.end()) {
    if (const float* f = std::get_if<float>(&it->second))
      p = *f;
    else
      p = double(node.attr_int("p", 2));
  }
  GAF_CHECK(p > 0 && std::isfinite(p), "{}: p must be a positive number, got {}", node.describe(), p);
  return p;
}

class PoolKernel final : public Kernel {
  using dt_t = memory::data_type;

 public:
  PoolKernel(const Node& node, PoolKind kind) : node_(node), kind_(kind) {
    attrs_ = WindowAttrs::parse(node);
    GAF_CHECK(!attrs_.kernel_shape.empty(), "{}: required attribute 'kernel_shape' is missing",
              node.describe());
    count_include_pad_ = node.attr_int("count_include_pad", 0) != 0;
    storage_order_ = node.attr_int("storage_order", 0);
    GAF_CHECK(storage_order_ == 0 || storage_order_ == 1, "{}: storage_order must be 0 or 1, got {}",
              node.describe(), storage_order_);
    if (kind == PoolKind::Lp) p_ = lp_norm_p(node);
    want_indices_ = kind == PoolKind::Max && node.num_outputs() > 1 && !node.output(1)->absent_output;
    // gaf.MaxPool / gaf.AveragePool with layout = "NHWC": channels-last activations (layout-nhwc pass).
    nhwc_ = node.attr_string("layout", "NCHW") == "NHWC";
    GAF_CHECK(!nhwc_ || !want_indices_, "{}: an NHWC pool has no indices output", node.describe());
    // Static input shape: build the primitive now; shape errors surface at run time instead.
    if (auto x = static_input_dims(node, 0)) {
      try {
        Dims key;
        key_append(key, *x, node.input(0)->type.dtype);
        cache_.insert(key, build(logical(*x), node.input(0)->type.dtype));
      } catch (const Error&) {
      }
    }
  }

  void run(KernelContext& ctx) override {
    const Tensor& X = ctx.in(0);
    Dims key;
    key_append(key, &X);
    Entry* e = cache_.find(key);
    if (!e) e = &cache_.insert(key, build(logical(X.dims()), X.dtype()));
    Tensor& Y = ctx.allocate_output(0, X.dtype(), physical(e->out));
    Tensor* I = want_indices_ ? &ctx.allocate_output(1, DType::Int64, e->out) : nullptr;
    if (Y.numel() == 0) return;
    if (e->nhwc_max) {
      max_pool_nhwc(e->win, X.dim(0), X.dims().back(), X.data<float>(), Y.data<float>());
      return;
    }
    if (e->use_dnnl) {
      run_dnnl(ctx, *e, X, Y);
      return;
    }
    if (nhwc_) {  // no oneDNN kernel (e.g. dilations): the plain loop on an NCHW copy
      GAF_CHECK(X.dtype() == DType::Float, "{}: an NHWC pool takes float", node_.describe());
      Tensor Xc(DType::Float, logical(X.dims()), ctx.allocator()), Yc(DType::Float, e->out, ctx.allocator());
      channels(X.data<float>(), Xc.data<float>(), X.dims(), true);
      ref_pool<float>(PoolDims(X.dim(0) * X.dims().back(), e->win), kind_, count_include_pad_, p_,
                      Xc.data<float>(), Yc.data<float>(), nullptr, false);
      channels(Yc.data<float>(), Y.data<float>(), Y.dims(), false);
      return;
    }
    PoolDims pd(X.dim(0) * X.dim(1), e->win);
    const bool col = storage_order_ == 1;
    int64_t* idx = I ? I->data<int64_t>() : nullptr;
    if (is_dnnl_float(X.dtype())) {
      Tensor Xf = to_float(X, ctx.allocator());
      Tensor Yf = Y.dtype() == DType::Float ? Y : Tensor(DType::Float, Y.dims(), ctx.allocator());
      ref_pool<float>(pd, kind_, count_include_pad_, p_, Xf.data<float>(), Yf.data<float>(), idx, col);
      if (Y.dtype() != DType::Float) store_from_float(Yf.data<float>(), Y);
      return;
    }
    visit_dtype(X.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
        unsupported("{}: element type {} is not supported", node_.describe(), dtype_name(X.dtype()));
      } else {
        if (kind_ != PoolKind::Max && !std::is_floating_point_v<T>)
          unsupported("{}: {} of element type {} is not supported", node_.describe(), pool_name(kind_),
                      dtype_name(X.dtype()));
        ref_pool<T>(pd, kind_, count_include_pad_, p_, X.data<T>(), Y.data<T>(), idx, col);
      }
    });
  }

 private:
  struct Entry {
    Window win;
    Dims out;
    bool use_dnnl = false;
    bool nhwc_max = false;  // max_pool_nhwc
    dnnl::pooling_v2_forward prim;
    size_t scratch = 0;
    memory::desc src_md, dst_md;
  };

  std::unique_ptr<Entry> build(const Dims& x, DType t) {
    GAF_CHECK(x.size() >= 3, "{}: input must be N x C x spatial (rank >= 3), got {}", node_.describe(),
              dims_to_string(x));
    auto e = std::make_unique<Entry>();
    Dims in(x.begin() + 2, x.end());
    e->win = forward_window(node_, attrs_, in, attrs_.kernel_shape);
    e->out = {x[0], x[1]};
    e->out.insert(e->out.end(), e->win.out.begin(), e->win.out.end());
    if (e->win.rank() > 3)
      unsupported("{}: {} spatial dimensions are not supported (at most 3)", node_.describe(), e->win.rank());
    bool ok = kind_ != PoolKind::Lp && !want_indices_ && numel_of(x) > 0 && numel_of(e->out) > 0 &&
              (is_dnnl_float(t) || (kind_ == PoolKind::Max && (t == DType::Int8 || t == DType::UInt8)));
    if (!ok) return e;
    const Window& w = e->win;
    if (nhwc_ && kind_ == PoolKind::Max && t == DType::Float && w.rank() == 2) {
      e->nhwc_max = true;
      return e;
    }
    memory::dims strides, kernel, dil, pl, pr;
    bool overhang = false;
    for (int i = 0; i < w.rank(); ++i) {
      // oneDNN sizes the output with floor((in + pl + pr - extent) / s) + 1; ceil_mode needs a larger pr.
      int64_t r = w.pe[i];
      if ((w.in[i] + w.pb[i] + r - w.extent(i)) / w.s[i] + 1 != w.out[i]) {
        r = (w.out[i] - 1) * w.s[i] + w.extent(i) - w.in[i] - w.pb[i];
        overhang |= r > w.pe[i];
      }
      if (r < 0) return e;
      strides.push_back(w.s[i]);
      kernel.push_back(w.k[i]);
      dil.push_back(w.d[i] - 1);
      pl.push_back(w.pb[i]);
      pr.push_back(r);
    }
    // oneDNN counts a ceil_mode overhang as padding; ONNX's count_include_pad counts only the given pads.
    if (kind_ == PoolKind::Avg && count_include_pad_ && overhang) return e;
    const dt_t data_type = t == DType::Int8 ? dt_t::s8 : t == DType::UInt8 ? dt_t::u8 : dt_t::f32;
    e->src_md = user_desc(x, data_type);
    e->dst_md = user_desc(e->out, data_type);
    const dnnl::algorithm alg = kind_ == PoolKind::Max ? dnnl::algorithm::pooling_max
                                : count_include_pad_   ? dnnl::algorithm::pooling_avg_include_padding
                                                       : dnnl::algorithm::pooling_avg_exclude_padding;
    try {
      dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, alg, e->src_md, e->dst_md, strides,
                                       kernel, dil, pl, pr);
      dnnl::pooling_v2_forward::primitive_desc pd(d, base_attr(), engine());
      if (is_reference_impl(pd)) return e;  // the plain loop is as good and shares the ONNX semantics
      e->prim = dnnl::pooling_v2_forward(pd);
      e->scratch = pd.scratchpad_desc().get_size();
      e->use_dnnl = true;
    } catch (const dnnl::error&) {
      // Window configurations oneDNN rejects (e.g. pads as large as the kernel) take the plain loop.
    }
    return e;
  }

  void run_dnnl(KernelContext& ctx, Entry& e, const Tensor& X, Tensor& Y) {
    const bool staged = X.dtype() == DType::Float16 || X.dtype() == DType::BFloat16;
    Tensor Xf = staged ? to_float(X, ctx.allocator()) : X;
    Tensor Yf = staged ? Tensor(DType::Float, Y.dims(), ctx.allocator()) : Y;
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, wrap(e.src_md, Xf.raw())},
                                         {DNNL_ARG_DST, wrap(e.dst_md, Yf.raw())}};
    execute(e.prim, e.scratch, args);
    if (staged) store_from_float(Yf.data<float>(), Y);
  }

  // NHWC: physical [N, spatial..., C] <-> logical [N, C, spatial...].
  Dims logical(const Dims& d) const { return nhwc_ ? channels_last_logical(d) : d; }
  Dims physical(const Dims& d) const { return nhwc_ ? channels_last_physical(d) : d; }
  // Copies between channels-last `phys` dims [N, S..., C] and channels-first: to_first = NHWC -> NCHW.
  static void channels(const float* src, float* dst, const Dims& phys, bool to_first) {
    const int64_t n = phys[0], c = phys.back(), sp = numel_of(phys) / std::max<int64_t>(n * c, 1);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < sp; ++i)
        for (int64_t k = 0; k < c; ++k) {
          int64_t last = (b * sp + i) * c + k, first = (b * c + k) * sp + i;
          dst[to_first ? first : last] = src[to_first ? last : first];
        }
  }
  memory::desc user_desc(const Dims& d, dt_t t) const { return nhwc_ ? channels_last_desc(d, t) : plain_desc(d, t); }

  const Node& node_;
  bool nhwc_ = false;
  PoolKind kind_;
  WindowAttrs attrs_;
  bool count_include_pad_ = false, want_indices_ = false;
  int64_t storage_order_ = 0;
  double p_ = 2.0;
  ShapeCache<Entry> cache_;
};

// Sum of n floats with 16 independent partial sums (vectorises without reassociation flags).
inline float sum_floats(const float* x, int64_t n) {
  float acc[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) acc[j] += x[i + j];
  float s = 0.f;
  for (int j = 0; j < 16; ++j) s += acc[j];
  for (; i < n; ++i) s += x[i];
  return s;
}

inline float max_floats(const float* x, int64_t n) {
  float acc[16];
  for (int j = 0; j < 16; ++j) acc[j] = -std::numeric_limits<float>::infinity();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) acc[j] = std::max(acc[j], x[i + j]);
  float m = -std::numeric_limits<float>::infinity();
  for (int j = 0; j < 16; ++j) m = std::max(m, acc[j]);
  for (; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

// GlobalAveragePool / GlobalMaxPool / GlobalLpPool: one value per (n, c) plane.
template <PoolKind kKind>
void global_pool_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& X = ctx.in(0);
  GAF_CHECK(X.rank() >= 3, "{}: input must be N x C x spatial (rank >= 3), got {}", node.describe(),
            dims_to_string(X.dims()));
  Dims out = X.dims();
  for (size_t i = 2; i < out.size(); ++i) out[i] = 1;
  const int64_t planes = X.dim(0) * X.dim(1);
  const int64_t size = planes ? X.numel() / planes : 0;
  Tensor& Y = ctx.allocate_output(0, X.dtype(), out);
  if (planes == 0) return;
  GAF_CHECK(size > 0, "{}: the spatial size of {} is zero", node.describe(), dims_to_string(X.dims()));
  const double p = kKind == PoolKind::Lp ? lp_norm_p(node) : 0.0;
  const int64_t grain = std::max<int64_t>(1, 32768 / size);
  if (is_dnnl_float(X.dtype())) {
    Tensor Xf = to_float(X, ctx.allocator());
    Tensor Yf = Y.dtype() == DType::Float ? Y : Tensor(DType::Float, out, ctx.allocator());
    const float* x = Xf.data<float>();
    float* y = Yf.data<float>();
    parallel_for(planes, grain, [&](int64_t b, int64_t e) {
      for (int64_t pl = b; pl < e; ++pl) {
        const float* xp = x + pl * size;
        if constexpr (kKind == PoolKind::Avg) {
          y[pl] = sum_floats(xp, size) / float(size);
        } else if constexpr (kKind == PoolKind::Max) {
          y[pl] = max_floats(xp, size);
        } else {
          double s = 0.0;
          if (p == 2.0) {
            for (int64_t i = 0; i < size; ++i) s += double(xp[i]) * double(xp[i]);
          } else {
            for (int64_t i = 0; i < size; ++i) s += std::pow(std::fabs(double(xp[i])), p);
          }
          y[pl] = float(p == 2.0 ? std::sqrt(s) : std::pow(s, 1.0 / p));
        }
      }
    });
    if (Y.dtype() != DType::Float) store_from_float(y, Y);
    return;
  }
  if (X.dtype() != DType::Double)
    unsupported("{}: element type {} is not supported (float, float16, bfloat16, double)", node.describe(),
                dtype_name(X.dtype()));
  const double* x = X.data<double>();
  double* y = Y.data<double>();
  parallel_for(planes, grain, [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      const double* xp = x + pl * size;
      double s = kKind == PoolKind::Max ? -std::numeric_limits<double>::infinity() : 0.0;
      for (int64_t i = 0; i < size; ++i) {
        if constexpr (kKind == PoolKind::Avg)
          s += xp[i];
        else if constexpr (kKind == PoolKind::Max)
          s = std::max(s, xp[i]);
        else
          s += std::pow(std::fabs(xp[i]), p);
      }
      y[pl] = kKind == PoolKind::Avg ? s / double(size) : kKind == PoolKind::Max ? s : std::pow(s, 1.0 / p);
    }
  });
}

// MaxUnpool(X, I, output_shape?): zeros with X scattered to the positions I (MaxPool's flat Indices into its
// input, whose shape is the default output (in - 1) * stride - pads + kernel). A given output_shape keeps
// those coordinates (a larger output is zero at the end of each spatial dim).
void max_unpool_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& X = ctx.in(0);
  const Tensor& I = ctx.in(1);
  GAF_CHECK(X.rank() >= 3, "{}: input must be N x C x spatial (rank >= 3), got {}", node.describe(),
            dims_to_string(X.dims()));
  GAF_CHECK(I.dims() == X.dims(), "{}: indices I {} must have the shape of X {}", node.describe(),
            dims_to_string(I.dims()), dims_to_string(X.dims()));
  GAF_CHECK(I.dtype() == DType::Int64, "{}: indices I must be int64, got {}", node.describe(),
            dtype_name(I.dtype()));
  const int r = X.rank() - 2;
  const WindowAttrs a = WindowAttrs::parse(node);
  GAF_CHECK(int(a.kernel_shape.size()) == r, "{}: kernel_shape must have {} values", node.describe(), r);
  Dims s = a.strides.empty() ? Dims(r, 1) : a.strides, pads = a.pads.empty() ? Dims(2 * r, 0) : a.pads;
  GAF_CHECK(int(s.size()) == r && int(pads.size()) == 2 * r,
            "{}: strides / pads do not match {} spatial dimensions", node.describe(), r);
  Dims def;  // default spatial output: the shape the indices refer to
  for (int i = 0; i < r; ++i) {
    int64_t o = (X.dim(i + 2) - 1) * s[i] - pads[i] - pads[r + i] + a.kernel_shape[i];
    GAF_CHECK(o >= 0, "{}: output size {} in spatial dimension {} is negative", node.describe(), o, i);
    def.push_back(o);
  }
  Dims out = {X.dim(0), X.dim(1)};
  out.insert(out.end(), def.begin(), def.end());
  const Tensor* shape = ctx.input(2);
  if (shape && shape->defined()) {
    Dims want = shape->to_int_vector();
    GAF_CHECK(int(want.size()) == X.rank() && want[0] == X.dim(0) && want[1] == X.dim(1),
              "{}: output_shape {} must be N x C x spatial for X {}", node.describe(), dims_to_string(want),
              dims_to_string(X.dims()));
    out = want;
  }
  Tensor& Y = ctx.allocate_output(0, X.dtype(), out, /*zero=*/true);
  const int64_t n = X.numel(), def_plane = numel_of(def);
  const int64_t total = X.dim(0) * X.dim(1) * def_plane;
  const Dims out_sp(out.begin() + 2, out.end());
  const int64_t out_plane = numel_of(out_sp);
  const int64_t* idx = I.data<int64_t>();
  const size_t esize = dtype_size(X.dtype());
  const char* x = static_cast<const char*>(X.raw());
  char* y = static_cast<char*>(Y.raw());
  const bool same = out_sp == def;
  for (int64_t j = 0; j < n; ++j) {
    int64_t k = idx[j];
    GAF_CHECK(k >= 0 && k < total, "{}: index {} at position {} is outside the unpooled input of {} elements",
              node.describe(), k, j, total);
    if (!same) {  // re-ravel the spatial coordinates into the requested output shape
      int64_t plane = k / def_plane, rem = k % def_plane, pos = 0, mul = 1;
      for (int d = r - 1; d >= 0; --d) {
        const int64_t c = rem % def[d];
        rem /= def[d];
        GAF_CHECK(c < out_sp[d], "{}: index {} falls outside output_shape {}", node.describe(), idx[j],
                  dims_to_string(out));
        pos += c * mul;
        mul *= out_sp[d];
      }
      k = plane * out_plane + pos;
    }
    std::memcpy(y + k * esize, x + j * esize, esize);
  }
}

}  // namespace

void register_pool_ops(KernelRegistry& r) {
  r.add("MaxPool").set_kernel([](const Node& n) -> std::unique_ptr<Kernel> {
    return std::make_unique<PoolKernel>(n, PoolKind::Max);
  });
  r.add("AveragePool").set_kernel([](const Node& n) -> std::unique_ptr<Kernel> {
    return std::make_unique<PoolKernel>(n, PoolKind::Avg);
  });
  r.add("MaxPool", "gaf")
      .set_kernel(  // layout = "NHWC"
          [](const Node& n) -> std::unique_ptr<Kernel> {
            return std::make_unique<PoolKernel>(n, PoolKind::Max);
          });
  r.add("AveragePool", "gaf").set_kernel([](const Node& n) -> std::unique_ptr<Kernel> {
    return std::make_unique<PoolKernel>(n, PoolKind::Avg);
  });
  r.add("LpPool").set_kernel(
      [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<PoolKernel>(n, PoolKind::Lp); });
  // Data-dependent scatter: no fusion.
  r.add("MaxUnpool").set_kernel(fn_kernel(max_unpool_kernel));
  r.add("GlobalAveragePool").set_kernel(fn_kernel(global_pool_kernel<PoolKind::Avg>));
  r.add("GlobalMaxPool").set_kernel(fn_kernel(global_pool_kernel<PoolKind::Max>));
  r.add("GlobalLpPool").set_kernel(fn_kernel(global_pool_kernel<PoolKind::Lp>));
}

}  // namespace gaf::runtime::dnnl_detail
