// ExpandDepthwise (expand_depthwise.h) and the gaf.ExpandDepthwiseConv op it runs (the expand-depthwise-fusion
// pass), with a plain reference path for builds and geometries the vector kernel does not cover.
#include "runtime/kernels/fast/expand_depthwise.h"

#include <algorithm>
#include <array>

#include "runtime/kernels/common.h"
#include "runtime/kernels/families.h"


namespace gaf::runtime {

namespace {

constexpr int64_t kLanes = PointwiseConv::kLanes, kMaxPanel = PointwiseConv::kMaxPanel;

// How the work splits into tasks: slices of `chunk` expanded channels (the last one narrower) by `bands` bands of
// output rows, over `batch` images, in that order, parallel_for's static split giving each thread a run of them.
// The model counts FMAs per channel: a band's expanded rows (it recomputes the k - s rows it shares with the band
// above) times w times c, a third dearer in 2-vector slices and twice as dear in 1-vector ones (PointwiseConv's
// tiles are then bound by their broadcasts), plus its output rows times ow times k^2. Returns the busiest thread's
// share.
double split_cost(const ExpandDepthwise::Geometry& g, int64_t e, int64_t c, int64_t batch, int64_t chunk,
                  int64_t bands, int64_t threads) {
  const int64_t panels = (e + chunk - 1) / chunk, oh = g.oh(), ow = g.ow(), tasks = batch * panels * bands;
  std::vector<double> task(size_t(panels * bands));
  for (int64_t p = 0; p < panels; ++p) {
    const int64_t nv = (std::min(chunk, e - p * chunk) + kLanes - 1) / kLanes;
    const double eff = nv == 1 ? 2.0 : nv == 2 ? 1.33 : 1.0;
    for (int64_t band = 0; band < bands; ++band) {
      const int64_t oy0 = oh * band / bands, oy1 = oh * (band + 1) / bands;
      const int64_t r0 = std::max<int64_t>(0, oy0 * g.stride - g.pad_top);
      const int64_t r1 = std::min(g.h, (oy1 - 1) * g.stride - g.pad_top + g.k);
      task[size_t(p * bands + band)] = double(kLanes * nv) * (double(std::max<int64_t>(0, r1 - r0) * g.w * c) * eff +
                                                          double((oy1 - oy0) * ow * g.k * g.k));
    }
  }
  double worst = 0;
  for (int64_t t = 0; t < threads; ++t) {
    double sum = 0;
    for (int64_t i = tasks * t / threads; i < tasks * (t + 1) / threads; ++i) sum += task[size_t(i % (panels * bands))];
    worst = std::max(worst, sum);
  }
  return worst;
}

// The bands for this chunk that give the busiest thread the least work (the fewest bands within 2% of it).
int64_t best_bands(const ExpandDepthwise::Geometry& g, int64_t e, int64_t c, int64_t batch, int64_t chunk,
                   int64_t threads, double* cost = nullptr) {
  int64_t best = 1;
  double best_cost = split_cost(g, e, c, batch, chunk, 1, threads);
  for (int64_t bands = 2; bands <= std::min(g.oh(), 2 * threads); ++bands) {
    const double cst = split_cost(g, e, c, batch, chunk, bands, threads);
    if (cst < best_cost * 0.98) best = bands, best_cost = cst;
  }
  if (cost) *cost = best_cost;
  return best;
}

// The slice width (a multiple of kLanes up to kMaxPanel, PointwiseConv's panels) whose best split gives the
// busiest thread the least work for one image; the widest within 2% of it. MobileNetV3's 240 channels over 2
// threads (AVX-512): 64-channel slices (4 tasks) where 96 gave 3 slices and uneven bands.
int64_t best_chunk(const ExpandDepthwise::Geometry& g, int64_t e, int64_t c, int64_t threads) {
  int64_t best = 0;
  double best_cost = 0;
  for (int64_t chunk = std::min(kMaxPanel, (e + kLanes - 1) / kLanes * kLanes); chunk >= kLanes; chunk -= kLanes) {
    double cst = 0;
    best_bands(g, e, c, 1, chunk, threads, &cst);
    if (best == 0 || cst < best_cost * 0.98) best = chunk, best_cost = cst;
  }
  return best;
}

#if defined(GAF_SIMD)
#pragma GCC diagnostic push  // GCC 12's intrinsics headers trip -Wmaybe-uninitialized (_mm512_undefined_ps)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
using simd::kW;
// One output row of the depthwise convolution for nv vectors of kW channels, with its clamp (the activation
// after it is activate_row's). rows[u]: expanded row u of the window, padded (column 0 is input column
// -pad_left), pixels `ld` floats apart; w: [K * K][ld] taps; y: the row's first output pixel at this slice's first
// channel, pixels ldy apart; `last` masks the stores of vector nv - 1 (masked stores only there: dearer on this
// AMD machine). Blocks of 4 output pixels share the window's loads: per window row, 4 * S + K - S columns feed
// 4 * K FMAs.
template <int K, int S>
void depthwise_row(const float* const* rows, int64_t ld, const float* w, const float* b, float* y, int64_t ldy,
                   int64_t ow, int64_t nv, simd::lanes_t last, float lo, float hi) {
  using namespace simd;
  constexpr int kBlock = 4, kCols = kBlock * S + K - S;
  // 3x3 with AVX-512: the 9 taps stay in registers; otherwise a window row's taps are loaded with it (25, or
  // 9 of 16 registers, would not fit), as are the columns with AVX2.
  constexpr bool kTapsInRegs = K == 3 && kW == 16, kColsInRegs = kW == 16;
  const vf vlo = set1(lo), vhi = set1(hi);
  for (int64_t j = 0; j < nv; ++j) {
    const bool full = j < nv - 1 || is_all(last);
    auto store = [&](float* at, vf acc) {
      const vf v = clamp(acc, vlo, vhi);
      if (full)
        storeu(at, v);
      else
        storeu(at, v, last);
    };
    vf wv[K * K];
    if constexpr (kTapsInRegs)
      for (int t = 0; t < K * K; ++t) wv[t] = loadu(w + t * ld + kW * j);
    const vf bv = loadu(b + kW * j);
    int64_t ox = 0;
    for (; ox + kBlock <= ow; ox += kBlock) {
      vf acc[kBlock];
      for (int i = 0; i < kBlock; ++i) acc[i] = bv;
#pragma GCC unroll 5
      for (int u = 0; u < K; ++u) {
        const float* r = rows[u] + ox * S * ld + kW * j;
        // Each column once into a register: left to itself GCC 12 folds the loads into the FMAs, one per FMA.
        vf col[kCols];
        for (int c = 0; c < kCols; ++c) {
          col[c] = loadu(r + c * ld);
          if constexpr (kColsInRegs) asm("" : "+v"(col[c]));
        }
        vf tap[K];
        for (int v = 0; v < K; ++v) tap[v] = kTapsInRegs ? wv[u * K + v] : loadu(w + (u * K + v) * ld + kW * j);
#pragma GCC unroll 5
        for (int v = 0; v < K; ++v)
#pragma GCC unroll 4
          for (int i = 0; i < kBlock; ++i) acc[i] = fmadd(col[i * S + v], tap[v], acc[i]);
      }
      for (int i = 0; i < kBlock; ++i) store(y + (ox + i) * ldy + kW * j, acc[i]);
    }
    for (; ox < ow; ++ox) {
      vf acc = bv;
      for (int u = 0; u < K; ++u) {
        const float* r = rows[u] + ox * S * ld + kW * j;
        for (int v = 0; v < K; ++v) acc = fmadd(loadu(r + v * ld), loadu(w + (u * K + v) * ld + kW * j), acc);
      }
      store(y + ox * ldy + kW * j, acc);
    }
  }
}

// The activation of one output row, in place, after depthwise_row (in its loop, SiLU's registers spilled the taps
// and columns): y's pixels ldy floats apart, nv vectors, `last` masking vector nv - 1.
template <Activation kAct>
void activate_row(float* y, int64_t ldy, int64_t ow, int64_t nv, simd::lanes_t last, float alpha) {
  using namespace simd;
  const vf neg_a_log2e = set1(-alpha * 1.44269504088896341f);
  const int64_t full = is_all(last) ? nv : nv - 1;
  for (int64_t ox = 0; ox < ow; ++ox, y += ldy) {
    for (int64_t j = 0; j < full; ++j) storeu(y + kW * j, activatev(loadu(y + kW * j), kAct, neg_a_log2e));
    if (full < nv) storeu(y + kW * full, activatev(loadu(y + kW * full, last), kAct, neg_a_log2e), last);
  }
}
#pragma GCC diagnostic pop

using RowFn = void (*)(const float* const*, int64_t, const float*, const float*, float*, int64_t, int64_t, int64_t,
                       simd::lanes_t, float, float);
using ActivateFn = void (*)(float*, int64_t, int64_t, int64_t, simd::lanes_t, float);

RowFn row_kernel(int64_t k, int64_t s) {
  if (k == 3) return s == 1 ? depthwise_row<3, 1> : depthwise_row<3, 2>;
  return s == 1 ? depthwise_row<5, 1> : depthwise_row<5, 2>;
}

// Null for no activation.
ActivateFn activate_kernel(Activation act) {
  if (act == Activation::Swish) return activate_row<Activation::Swish>;
  if (act == Activation::HardSwish) return activate_row<Activation::HardSwish>;
  return nullptr;
}
#endif

}  // namespace

bool ExpandDepthwise::supports(const Geometry& g, int64_t e) {
  if (!PointwiseConv::available()) return false;
  const bool pads_ok = g.pad_top < g.k && g.pad_left < g.k && g.pad_bottom < g.k && g.pad_right < g.k &&
                       g.pad_top >= 0 && g.pad_left >= 0 && g.pad_bottom >= 0 && g.pad_right >= 0;
  return (g.k == 3 || g.k == 5) && (g.stride == 1 || g.stride == 2) && pads_ok && e > 0 && g.h > 0 && g.w > 0 && g.oh() > 0 && g.ow() > 0;
}

ExpandDepthwise::ExpandDepthwise(const float* w1, const float* b1, const float* w2, const float* b2, int64_t e,
                                 int64_t c, const Geometry& g, const Clamps& clamps)
    : g_(g),
      clamps_(clamps),
      e_(e),
      c_(c),
      chunk_(best_chunk(g, e, c, omp_get_max_threads())),
      bands1_(best_bands(g, e, c, 1, chunk_, omp_get_max_threads())),
      expand_(w1, b1, e, c, chunk_) {
  GAF_ASSERT(supports(g, e), "ExpandDepthwise: unsupported geometry");
  const int64_t taps = g.k * g.k, panels = expand_.panels();
  w2_.assign(size_t(panels * taps * chunk_), 0.f);
  b2_.assign(size_t(panels * chunk_), 0.f);
  for (int64_t p = 0; p < panels; ++p)
    for (int64_t j = 0; j < expand_.panel_cols(p); ++j) {
      const int64_t ch = expand_.panel_start(p) + j;
      for (int64_t t = 0; t < taps; ++t) w2_[size_t((p * taps + t) * chunk_ + j)] = w2[ch * taps + t];
      b2_[size_t(p * chunk_ + j)] = b2 ? b2[ch] : 0.f;
    }
}

void ExpandDepthwise::run(const float* x, int64_t batch, float* y) const {
#if defined(GAF_SIMD)
  const int64_t k = g_.k, s = g_.stride, oh = g_.oh(), ow = g_.ow(), panels = expand_.panels();
  const int64_t cols = g_.w + g_.pad_left + g_.pad_right, slot = cols * chunk_;
  // Row bands split the output rows further when the channel slices alone would leave threads uneven.
  const int64_t bands = batch == 1 ? bands1_ : best_bands(g_, e_, c_, batch, chunk_, omp_get_max_threads());
  const RowFn row = row_kernel(k, s);
  const ActivateFn activate = activate_kernel(clamps_.act2);
  PointwiseConv::Epilogue ep;
  ep.lo = clamps_.lo1, ep.hi = clamps_.hi1, ep.act = clamps_.act1, ep.alpha = clamps_.alpha1;
  parallel_for(batch * panels * bands, 1, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> ring;  // k slots, then a slot of zeros (the padding rows)
    if (ring.size() < size_t((k + 1) * slot)) ring.resize(size_t((k + 1) * slot));
    std::fill(ring.begin() + k * slot, ring.begin() + (k + 1) * slot, 0.f);
    for (int64_t sl = 0; sl < k; ++sl) {  // the padding columns of every slot
      float* r = ring.data() + sl * slot;
      std::fill(r, r + g_.pad_left * chunk_, 0.f);
      std::fill(r + (g_.pad_left + g_.w) * chunk_, r + slot, 0.f);
    }
    for (int64_t t = begin; t < end; ++t) {
      const int64_t n = t / (panels * bands), p = t / bands % panels, band = t % bands;
      const int64_t oy0 = oh * band / bands, oy1 = oh * (band + 1) / bands;
      const int64_t width = expand_.panel_cols(p), nv = (width + kW - 1) / kW, c0 = expand_.panel_start(p);
      const simd::lanes_t last = simd::tail_lanes(width);
      const float* xn = x + n * g_.h * g_.w * c_;
      const float* w2 = w2_.data() + p * k * k * chunk_;
      const float* b2 = b2_.data() + p * chunk_;
      int64_t next = 0;  // first expanded row not yet in the ring
      const float* rows[5];
      for (int64_t oy = oy0; oy < oy1; ++oy) {
        const int64_t top = oy * s - g_.pad_top;
        for (int64_t r = std::max(next, top); r < std::min(top + k, g_.h); ++r, next = r)
          expand_.run_panel(p, xn + r * g_.w * c_, g_.w, ring.data() + (r % k) * slot + g_.pad_left * chunk_,
                            chunk_, ep);
        for (int64_t u = 0; u < k; ++u) {
          const int64_t r = top + u;
          rows[u] = ring.data() + (r < 0 || r >= g_.h ? k : r % k) * slot;
        }
        float* yrow = y + ((n * oh + oy) * ow) * e_ + c0;
        row(rows, chunk_, w2, b2, yrow, e_, ow, nv, last, clamps_.lo2, clamps_.hi2);
        if (activate) activate(yrow, e_, ow, nv, last, clamps_.alpha2);
      }
    }
  });
#else
  (void)x, (void)batch, (void)y;
  GAF_ASSERT(false, "ExpandDepthwise needs AVX-512 or AVX2");
#endif
}

namespace {

// gaf.ExpandDepthwiseConv(X [N, H, W, C], W1 [E, C, 1, 1], B1, W2 [E, 1, K, K], B2) -> Y [N, OH, OW, E]; clamp
// bounds as attributes (min1/max1 after the expansion, min2/max2 after the depthwise convolution) and the
// activations after them (activation1, activation2), strides and pads of the depthwise convolution.
class ExpandDepthwiseKernel final : public Kernel {
 public:
  explicit ExpandDepthwiseKernel(const Node& node) : node_(node) {
    const std::vector<int64_t> strides = node.attr_ints("strides"), pads = node.attr_ints("pads");
    GAF_CHECK(strides.size() == 2 && strides[0] == strides[1], "{}: strides must be two equal values",
              node.describe());
    GAF_CHECK(pads.size() == 4, "{}: pads must have four values", node.describe());
    geom_.stride = strides[0];
    geom_.pad_top = pads[0], geom_.pad_left = pads[1], geom_.pad_bottom = pads[2], geom_.pad_right = pads[3];
    clamps_.lo1 = node.attr_float("min1", clamps_.lo1), clamps_.hi1 = node.attr_float("max1", clamps_.hi1);
    clamps_.lo2 = node.attr_float("min2", clamps_.lo2), clamps_.hi2 = node.attr_float("max2", clamps_.hi2);
    clamps_.act1 = activation_attribute(node, "activation1"), clamps_.act2 = activation_attribute(node, "activation2");
  }

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.in(0);
    const Tensor& w1 = ctx.in(1);
    const Tensor& w2 = ctx.in(3);
    const Tensor* b1 = ctx.input(2);
    const Tensor* b2 = ctx.input(4);
    check_float_inputs(ctx, node_);
    GAF_CHECK(x.rank() == 4 && w1.rank() == 4 && w2.rank() == 4, "{}: X, W1 and W2 must have rank 4",
              node_.describe());
    const int64_t e = w1.dims()[0], c = w1.dims()[1], k = w2.dims()[2];
    GAF_CHECK(x.dims()[3] == c && w1.dims()[2] == 1 && w1.dims()[3] == 1,
              "{}: W1 {} is not a 1x1 expansion of X's {} channels", node_.describe(), dims_to_string(w1.dims()),
              x.dims()[3]);
    GAF_CHECK(w2.dims()[0] == e && w2.dims()[1] == 1 && w2.dims()[3] == k,
              "{}: W2 {} is not a square depthwise window over {} channels", node_.describe(),
              dims_to_string(w2.dims()), e);
    for (const Tensor* b : {b1, b2})
      GAF_CHECK(!b || b->numel() == e, "{}: a bias has {} values for {} channels", node_.describe(),
                b ? b->numel() : 0, e);
    ExpandDepthwise::Geometry g = geom_;
    g.h = x.dims()[1], g.w = x.dims()[2], g.k = k;
    GAF_CHECK(g.h + g.pad_top + g.pad_bottom >= k && g.w + g.pad_left + g.pad_right >= k,
              "{}: the {}x{} window does not fit the padded {}x{} input", node_.describe(), k, k, g.h, g.w);
    Tensor& y = ctx.allocate_output(0, DType::Float, {x.dims()[0], g.oh(), g.ow(), e});
    const float* pb1 = b1 ? b1->data<float>() : nullptr;
    const float* pb2 = b2 ? b2->data<float>() : nullptr;
    if (!ExpandDepthwise::supports(g, e)) {
      reference(x, w1.data<float>(), pb1, w2.data<float>(), pb2, e, c, g, y);
      return;
    }
    // Weights and biases are constants in every graph the pass writes: packed once, again only if a tensor or
    // the geometry changes.
    const std::array<const float*, 4> params = {w1.data<float>(), pb1, w2.data<float>(), pb2};
    const std::array<int64_t, 5> shape = {e, c, k, g.h, g.w};
    if (!impl_ || params != params_ || shape != shape_) {
      impl_ = std::make_unique<ExpandDepthwise>(params[0], pb1, params[2], pb2, e, c, g, clamps_);
      params_ = params, shape_ = shape;
    }
    impl_->run(x.data<float>(), x.dims()[0], y.data<float>());
  }

 private:
  void reference(const Tensor& x, const float* w1, const float* b1, const float* w2, const float* b2, int64_t e,
                 int64_t c, const ExpandDepthwise::Geometry& g, Tensor& y) const {
    const int64_t n = x.dims()[0], oh = g.oh(), ow = g.ow();
    std::vector<float> ex(size_t(g.h * g.w * e));
    for (int64_t b = 0; b < n; ++b) {
      const float* xb = x.data<float>() + b * g.h * g.w * c;
      for (int64_t p = 0; p < g.h * g.w; ++p)
        for (int64_t ch = 0; ch < e; ++ch) {
          float v = b1 ? b1[ch] : 0.f;
          for (int64_t i = 0; i < c; ++i) v += xb[p * c + i] * w1[ch * c + i];
          ex[size_t(p * e + ch)] = activate(std::min(std::max(v, clamps_.lo1), clamps_.hi1), clamps_.act1, clamps_.alpha1);
        }
      float* yb = y.data<float>() + b * oh * ow * e;
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j)
          for (int64_t ch = 0; ch < e; ++ch) {
            float v = b2 ? b2[ch] : 0.f;
            for (int64_t u = 0; u < g.k; ++u)
              for (int64_t t = 0; t < g.k; ++t) {
                const int64_t r = i * g.stride + u - g.pad_top, q = j * g.stride + t - g.pad_left;
                if (r >= 0 && r < g.h && q >= 0 && q < g.w)
                  v += ex[size_t((r * g.w + q) * e + ch)] * w2[(ch * g.k + u) * g.k + t];
              }
            yb[(i * ow + j) * e + ch] = activate(std::min(std::max(v, clamps_.lo2), clamps_.hi2), clamps_.act2, clamps_.alpha2);
          }
    }
  }

  const Node& node_;
  ExpandDepthwise::Geometry geom_;  // strides and pads; the sizes come with each run's tensors
  ExpandDepthwise::Clamps clamps_;
  std::unique_ptr<ExpandDepthwise> impl_;
  std::array<const float*, 4> params_ = {};  // W1, B1, W2, B2 the kernel was packed from
  std::array<int64_t, 5> shape_ = {};         // and E, C, K, H, W it was packed for
};

}  // namespace

void register_expand_depthwise_ops(KernelRegistry& r) {
  r.add("ExpandDepthwiseConv", "gaf").set_kernel([](const Node& n) -> std::unique_ptr<Kernel> {
    return std::make_unique<ExpandDepthwiseKernel>(n);
  });
}

}  // namespace gaf::runtime
