// SqueezeExcitation (squeeze_excitation.h) and the gaf.SqueezeExcitation op it runs (squeeze-excitation-fusion).
#include "runtime/kernels/fast/squeeze_excitation.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "runtime/kernels/common.h"
#include "runtime/kernels/families.h"

#include "ops/simd_vec.h"

#if defined(GAF_SIMD)
#pragma GCC diagnostic push  // GCC 12's intrinsics headers trip -Wmaybe-uninitialized (_mm512_undefined_ps)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace gaf::runtime {

namespace {

// Below this many elements per thread a second thread costs more than it saves (its share would take about a
// microsecond, a fork and two barriers about as much).
constexpr int64_t kMinPerThread = 16384;

// From this many weights per layer (R C) the threads compute the gates in slices.
constexpr int64_t kSplitGates = 16384;

// sum_i a[i] b[i], on 2 kW lanes of partial sums (32 or 16; 8 without a vector unit).
float dot(const float* a, const float* b, int64_t n) {
#if defined(GAF_SIMD)
  using namespace simd;
  vf acc0 = zero(), acc1 = zero();
  int64_t i = 0;
  for (; i + 2 * kW <= n; i += 2 * kW) {
    acc0 = fmadd(loadu(a + i), loadu(b + i), acc0);
    acc1 = fmadd(loadu(a + i + kW), loadu(b + i + kW), acc1);
  }
  for (; i < n; i += kW) {
    const lanes_t m = first(n - i);
    acc0 = fmadd(loadu(a + i, m), loadu(b + i, m), acc0);
  }
  return reduce_add(add(acc0, acc1));
#else
  float s[8] = {};
  for (int64_t i = 0; i < n; ++i) s[i % 8] += a[i] * b[i];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
#endif
}

// sum_i a[i], on 2 kW lanes of partial sums (each of them adds n / 2 kW values).
float sum(const float* a, int64_t n) {
#if defined(GAF_SIMD)
  using namespace simd;
  vf acc0 = zero(), acc1 = zero();
  int64_t i = 0;
  for (; i + 2 * kW <= n; i += 2 * kW) {
    acc0 = add(acc0, loadu(a + i));
    acc1 = add(acc1, loadu(a + i + kW));
  }
  for (; i < n; i += kW) acc0 = add(acc0, loadu(a + i, first(n - i)));
  return reduce_add(add(acc0, acc1));
#else
  float s[8] = {};
  for (int64_t i = 0; i < n; ++i) s[i % 8] += a[i];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
#endif
}

// acc[c] = sum of rows [0, rows) of x [rows, C], in blocks of 64 rows so that no partial sum takes more than 64
// values before it joins the total (a 112x112 image is 6272 rows per thread).
void sum_rows(const float* __restrict x, int64_t rows, int64_t c, float* __restrict acc) {
  constexpr int64_t kBlock = 64;
  std::fill(acc, acc + c, 0.f);
  thread_local std::vector<float> block;
  block.resize(size_t(c));
  float* __restrict b = block.data();
  for (int64_t r0 = 0; r0 < rows; r0 += kBlock) {
    const float* __restrict row = x + r0 * c;
    std::copy(row, row + c, b);
    for (int64_t r = r0 + 1; r < std::min(rows, r0 + kBlock); ++r) {
      row = x + r * c;
      for (int64_t k = 0; k < c; ++k) b[k] += row[k];
    }
    for (int64_t k = 0; k < c; ++k) acc[k] += b[k];
  }
}

// y[i] = x[i] g[i] for i < n, y == x allowed; with g_step 0, y[i] = x[i] g[0].
void scale(const float* x, const float* g, int64_t g_step, int64_t n, float* y) {
#if defined(GAF_SIMD)
  using namespace simd;
  const vf s = set1(*g);
  int64_t i = 0;
  for (; i + kW <= n; i += kW) storeu(y + i, mul(loadu(x + i), g_step ? loadu(g + i) : s));
  if (i < n) {
    const lanes_t m = first(n - i);
    storeu(y + i, mul(loadu(x + i, m), g_step ? loadu(g + i, m) : s), m);
  }
#else
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * g[i * g_step];
#endif
}

}  // namespace

SqueezeExcitation::SqueezeExcitation(const float* w1, const float* b1, const float* w2, const float* b2, int64_t c,
                                     int64_t r, const Params& p)
    : c_(c), r_(r), params_(p), w1_(w1, w1 + r * c), w2t_(size_t(r * c)), b1_(size_t(r), 0.f), b2_(size_t(c), 0.f) {
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t j = 0; j < r; ++j) w2t_[size_t(j * c + ch)] = w2[ch * r + j];
  if (b1) std::copy(b1, b1 + r, b1_.begin());
  if (b2) std::copy(b2, b2 + c, b2_.begin());
}

void SqueezeExcitation::hidden_rows(const float* sums, float inv_p, int64_t j0, int64_t j1, float* hidden) const {
  for (int64_t j = j0; j < j1; ++j) {
    const float v = b1_[size_t(j)] + dot(w1_.data() + j * c_, sums, c_) * inv_p;
    hidden[j] = activate(std::min(std::max(v, params_.lo), params_.hi), params_.act, params_.alpha);
  }
}

void SqueezeExcitation::gate_channels(const float* hidden, int64_t c0, int64_t c1, float* g) const {
  std::copy(b2_.begin() + c0, b2_.begin() + c1, g + c0);
  for (int64_t j = 0; j < r_; ++j) {
    const float h = hidden[j];
    const float* __restrict w = w2t_.data() + j * c_;
    for (int64_t ch = c0; ch < c1; ++ch) g[ch] += w[ch] * h;
  }
  if (params_.gate == Gate::HardSigmoid) {
    const float a = params_.gate_alpha, b = params_.gate_beta;
    for (int64_t ch = c0; ch < c1; ++ch) g[ch] = std::min(1.f, std::max(0.f, a * g[ch] + b));
    return;
  }
#if defined(GAF_SIMD)
  simd::map(g + c0, g + c0, c1 - c0, [](simd::vf v) { return simd::sigmoidv(v); });
#else
  for (int64_t ch = c0; ch < c1; ++ch) g[ch] = 1.f / (1.f + std::exp(-g[ch]));
#endif
}

void SqueezeExcitation::run(const float* x, int64_t n, int64_t p, bool channels_last, bool gate_only,
                            float* y) const {
  const int64_t c = c_, extent = channels_last ? p : c;  // what the threads split: positions or channels
  const int64_t most = std::min<int64_t>(omp_get_max_threads(), extent);
  const int threads = int(std::clamp<int64_t>(p * c / kMinPerThread, 1, most));
  // Large weights (1152 x 48 twice in EfficientNet-B0: 442 KB, mostly not in cache) are read by every thread in
  // slices; small ones by one thread, which saves two barriers.
  const bool split_gates = threads > 1 && r_ * c >= kSplitGates;
  const float inv_p = 1.f / float(p);
  thread_local std::vector<float> scratch;
  scratch.resize(size_t((threads + 1) * c + r_));
  float* const partial = scratch.data();               // [threads][C] channel sums (channels-first: row 0 only)
  float* const gate = scratch.data() + threads * c;    // [C]
  float* const hidden = gate + c;                      // [R]
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t lo = extent * t / nt, hi = extent * (t + 1) / nt;  // this thread's band
    // Its slices of the channels (in whole vectors) and of the hidden layer, when the gates are split.
    const int64_t c0 = (c / 16) * t / nt * 16, c1 = t + 1 == nt ? c : (c / 16) * (t + 1) / nt * 16;
    const int64_t j0 = r_ * t / nt, j1 = r_ * (t + 1) / nt;
    for (int64_t i = 0; i < n; ++i) {
      const float* xi = x + i * p * c;
      float* g = gate_only ? y + i * c : gate;
      if (channels_last)
        sum_rows(xi + lo * c, hi - lo, c, partial + t * c);
      else
        for (int64_t ch = lo; ch < hi; ++ch) partial[ch] = sum(xi + ch * p, p);
#pragma omp barrier
      if (split_gates) {
        if (channels_last)
          for (int k = 1; k < nt; ++k)
            for (int64_t ch = c0; ch < c1; ++ch) partial[ch] += partial[k * c + ch];
#pragma omp barrier
        hidden_rows(partial, inv_p, j0, j1, hidden);
#pragma omp barrier
        gate_channels(hidden, c0, c1, g);
#pragma omp barrier
      } else {
#pragma omp single
        {
          if (channels_last)
            for (int k = 1; k < nt; ++k)
              for (int64_t ch = 0; ch < c; ++ch) partial[ch] += partial[k * c + ch];
          hidden_rows(partial, inv_p, 0, r_, hidden);
          gate_channels(hidden, 0, c, g);
        }  // the single's barrier: every thread sees the gates, and partial is free for the next image
      }
      if (gate_only) continue;
      float* yi = y + i * p * c;  // may be xi (the kernel's output over its input)
      if (channels_last)
        for (int64_t r = lo; r < hi; ++r) scale(xi + r * c, gate, 1, c, yi + r * c);
      else
        for (int64_t ch = lo; ch < hi; ++ch) scale(xi + ch * p, gate + ch, 0, p, yi + ch * p);
    }
  }
}

namespace {

// gaf.SqueezeExcitation(X, W1 [R, C, 1...], B1, W2 [C, R, 1...], B2) -> Y: X [N, spatial..., C] when layout is
// NHWC, else [N, C, spatial...]; Y is X's shape, or the gates [N, 1..., C] / [N, C, 1...] when gate_only. The
// hidden layer's clamp (min, max) and activation (Silu, HardSwish), the gate (Sigmoid, or HardSigmoid with
// alpha and beta) are attributes.
class SqueezeExcitationKernel final : public Kernel {
 public:
  explicit SqueezeExcitationKernel(const Node& node) : node_(node) {
    const std::string layout = node.attr_string("layout", "NCHW");
    GAF_CHECK(layout == "NCHW" || layout == "NHWC", "{}: layout '{}' is not NCHW or NHWC", node.describe(), layout);
    channels_last_ = layout == "NHWC";
    gate_only_ = node.attr_int("gate_only", 0) != 0;
    params_.lo = node.attr_float("min", params_.lo), params_.hi = node.attr_float("max", params_.hi);
    params_.act = activation_attribute(node, "activation");
    const std::string gate = node.attr_string("gate", "Sigmoid");
    GAF_CHECK(gate == "Sigmoid" || gate == "HardSigmoid", "{}: gate '{}' is not Sigmoid or HardSigmoid",
              node.describe(), gate);
    params_.gate = gate == "Sigmoid" ? SqueezeExcitation::Gate::Sigmoid : SqueezeExcitation::Gate::HardSigmoid;
    params_.gate_alpha = node.attr_float("alpha", params_.gate_alpha);
    params_.gate_beta = node.attr_float("beta", params_.gate_beta);
  }

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.in(0);
    const Tensor& w1 = ctx.in(1);
    const Tensor& w2 = ctx.in(3);
    const Tensor* b1 = ctx.input(2);
    const Tensor* b2 = ctx.input(4);
    check_float_inputs(ctx, node_);
    const int rank = x.rank();
    GAF_CHECK(rank >= 3, "{}: X must have rank 3 or more, has {}", node_.describe(), rank);
    const int64_t c = x.dims()[channels_last_ ? size_t(rank - 1) : 1];
    int64_t p = 1;
    for (int a = channels_last_ ? 1 : 2; a < (channels_last_ ? rank - 1 : rank); ++a) p *= x.dims()[size_t(a)];
    GAF_CHECK(w1.rank() >= 2 && w1.dims()[1] == c && w1.numel() == w1.dims()[0] * c,
              "{}: W1 {} is not a 1x1 convolution of X's {} channels", node_.describe(), dims_to_string(w1.dims()), c);
    const int64_t r = w1.dims()[0];
    GAF_CHECK(w2.rank() >= 2 && w2.dims()[0] == c && w2.dims()[1] == r && w2.numel() == c * r,
              "{}: W2 {} is not a 1x1 convolution from {} back to {} channels", node_.describe(),
              dims_to_string(w2.dims()), r, c);
    GAF_CHECK(!b1 || b1->numel() == r, "{}: B1 has {} values for {} channels", node_.describe(),
              b1 ? b1->numel() : 0, r);
    GAF_CHECK(!b2 || b2->numel() == c, "{}: B2 has {} values for {} channels", node_.describe(),
              b2 ? b2->numel() : 0, c);
    GAF_CHECK(p > 0, "{}: X {} has no positions to average", node_.describe(), dims_to_string(x.dims()));
    std::vector<int64_t> out = x.dims();
    if (gate_only_)
      for (int a = 1; a < rank; ++a) out[size_t(a)] = a == (channels_last_ ? rank - 1 : 1) ? c : 1;
    Tensor* y = nullptr;
    if (!gate_only_ && ctx.can_take(0)) {  // X dies here: the scaled activation overwrites it
      ctx.set_output(0, x);
      y = &ctx.output(0);
    } else {
      y = &ctx.allocate_output(0, DType::Float, out);
    }
    if (y->numel() == 0) return;
    // The weights are constants in every graph the pass writes: packed once, again only if a tensor changes.
    const std::array<const float*, 4> params = {w1.data<float>(), b1 ? b1->data<float>() : nullptr,
                                                w2.data<float>(), b2 ? b2->data<float>() : nullptr};
    if (!impl_ || params != packed_ || c != c_ || r != r_) {
      impl_ = std::make_unique<SqueezeExcitation>(params[0], params[1], params[2], params[3], c, r, params_);
      packed_ = params, c_ = c, r_ = r;
    }
    impl_->run(x.data<float>(), x.dims()[0], p, channels_last_, gate_only_, y->data<float>());
  }

 private:
  const Node& node_;
  bool channels_last_ = false, gate_only_ = false;
  SqueezeExcitation::Params params_;
  std::unique_ptr<SqueezeExcitation> impl_;
  std::array<const float*, 4> packed_ = {};  // W1, B1, W2, B2 the kernel was packed from
  int64_t c_ = 0, r_ = 0;                      // and C, R
};

}  // namespace

void register_squeeze_excitation_ops(KernelRegistry& r) {
  r.add("SqueezeExcitation", "gaf").set_kernel([](const Node& n) -> std::unique_ptr<Kernel> {
    return std::make_unique<SqueezeExcitationKernel>(n);
  });
}

}  // namespace gaf::runtime

#if defined(GAF_SIMD)
#pragma GCC diagnostic pop
#endif
