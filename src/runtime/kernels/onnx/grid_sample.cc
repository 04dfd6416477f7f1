// Sampling ops: GridSample (MaxUnpool lives with the pooling ops in dnnl/pool.cc).
//
// GridSample (4-D input): output pixel (n, :, h, w) samples X[n] at grid[n, h, w] = (x, y) in [-1, 1],
// mapped to pixel coordinates with or without align_corners. Nearest (round half to even), bilinear and
// bicubic (Keys, a = -0.75) interpolation; zeros, border or reflection padding, as in the ONNX reference and
// onnxruntime. The taps (input offset, weight) of a block of output pixels are computed once and applied to
// every channel.

#include <algorithm>

#include "runtime/kernels/onnx/extra_util.h"

namespace gaf::runtime::extra {

namespace {

// ---- GridSample ----------------------------------------------------------------------------------------

enum class Interp { Nearest, Linear, Cubic };
enum class Padding { Zeros, Border, Reflection };

// Reflects x into [lo, hi] by the nearer border, repeatedly (period 2 * (hi - lo)).
template <class A>
A reflect(A x, A lo, A hi) {
  const A range = hi - lo;
  if (range <= 0) return lo;
  if (x >= lo && x <= hi) return x;
  A d = std::fmod(x - lo, 2 * range);
  if (d < 0) d += 2 * range;
  return d <= range ? lo + d : hi - (d - range);
}

template <class A>
void cubic_coeffs(A t, A c[4]) {
  constexpr A a = A(-0.75);
  t = std::abs(t);
  c[0] = ((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a;
  c[1] = ((a + 2) * t - (a + 3)) * t * t + 1;
  c[2] = ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1;
  c[3] = ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a;
}

class GridSampleKernel final : public Kernel {
 public:
  explicit GridSampleKernel(const Node& node) {
    const std::string d = node.describe();
    const std::string mode = node.attr_string("mode", node.opset >= 20 ? "linear" : "bilinear");
    if (mode == "bilinear" || mode == "linear")
      interp_ = Interp::Linear;
    else if (mode == "nearest")
      interp_ = Interp::Nearest;
    else if (mode == "bicubic" || mode == "cubic")
      interp_ = Interp::Cubic;
    else
      fail("{}: mode '{}' is not valid (bilinear, nearest or bicubic)", d, mode);
    const std::string pad = node.attr_string("padding_mode", "zeros");
    if (pad == "zeros")
      padding_ = Padding::Zeros;
    else if (pad == "border")
      padding_ = Padding::Border;
    else if (pad == "reflection")
      padding_ = Padding::Reflection;
    else
      fail("{}: padding_mode '{}' is not valid (zeros, border or reflection)", d, pad);
    align_corners_ = node.attr_int("align_corners", 0) != 0;
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const std::string d = node.describe();
    const Tensor& x = ctx.in(0);
    const Tensor& grid = ctx.in(1);
    if (x.rank() == 5) unsupported("{}: volumetric (5-D) GridSample is not supported", d);
    GAF_CHECK(x.rank() == 4, "{}: X must have shape [N, C, H, W], got {}", d, dims_to_string(x.dims()));
    GAF_CHECK(grid.rank() == 4 && grid.dim(0) == x.dim(0) && grid.dim(3) == 2,
              "{}: grid must have shape [{}, H_out, W_out, 2] for X of shape {}, got {}", d, x.dim(0),
              dims_to_string(x.dims()), dims_to_string(grid.dims()));
    const bool empty_out = x.dim(0) * x.dim(1) * grid.dim(1) * grid.dim(2) == 0;
    GAF_CHECK(empty_out || (x.dim(2) > 0 && x.dim(3) > 0), "{}: cannot sample an empty image {}", d,
              dims_to_string(x.dims()));
    visit_float(x.dtype(), node, "X", [&](auto tag) {
      using T = decltype(tag);
      std::vector<acc_t<T>> gbuf;
      const acc_t<T>* g = nullptr;
      visit_float(grid.dtype(), node, "grid", [&](auto gtag) {
        using G = decltype(gtag);
        const G* gp = grid.data<G>();
        gbuf.resize(size_t(grid.numel()));
        for (int64_t i = 0; i < grid.numel(); ++i) gbuf[size_t(i)] = acc_t<T>(to_arith(gp[i]));
        g = gbuf.data();
      });
      run_typed<T>(ctx, x, g, grid.dim(1), grid.dim(2));
    });
  }

 private:
  static constexpr int kMaxTaps = 16;

  template <class A>
  struct Taps {
    int n = 0;
    int64_t off[kMaxTaps];
    A w[kMaxTaps];
  };

  template <class A>
  A denormalize(A v, int64_t len) const {
    return align_corners_ ? (v + 1) / 2 * A(len - 1) : ((v + 1) * A(len) - 1) / 2;
  }

  // Adds the pixel (r, c) with weight w, applying the padding mode to out-of-range indices.
  template <class A>
  void add_tap(Taps<A>& t, int64_t r, int64_t c, A w, int64_t H, int64_t W, const A border[4]) const {
    if (padding_ == Padding::Zeros) {
      if (r < 0 || r >= H || c < 0 || c >= W) return;
    } else if (padding_ == Padding::Border) {
      r = std::clamp<int64_t>(r, 0, H - 1);
      c = std::clamp<int64_t>(c, 0, W - 1);
    } else {
      c = int64_t(reflect(A(c), border[0], border[2]));
      r = int64_t(reflect(A(r), border[1], border[3]));
      r = std::clamp<int64_t>(r, 0, H - 1);
      c = std::clamp<int64_t>(c, 0, W - 1);
    }
    t.off[t.n] = r * W + c;
    t.w[t.n] = w;
    ++t.n;
  }

  template <class A>
  void taps_at(A gx, A gy, int64_t H, int64_t W, Taps<A>& t) const {
    t.n = 0;
    const A border[4] = {align_corners_ ? A(0) : A(-0.5), align_corners_ ? A(0) : A(-0.5),
                         align_corners_ ? A(W - 1) : A(W) - A(0.5),
                         align_corners_ ? A(H - 1) : A(H) - A(0.5)};
    A x = denormalize(gx, W), y = denormalize(gy, H);
    if (interp_ == Interp::Nearest) {
      x = std::nearbyint(x);
      y = std::nearbyint(y);
    }
    if (x < border[0] || x > border[2] || y < border[1] || y > border[3]) {
      if (padding_ == Padding::Border) {
        x = std::clamp(x, A(0), A(W - 1));
        y = std::clamp(y, A(0), A(H - 1));
      } else if (padding_ == Padding::Reflection) {
        x = reflect(x, border[0], border[2]);
        y = reflect(y, border[1], border[3]);
      }
    }
    if (!std::isfinite(x) || !std::isfinite(y)) {
      // A NaN or infinite grid value reads nothing (zeros) or the clamped border pixel.
      if (padding_ == Padding::Zeros) return;
      x = std::isnan(x) ? A(0) : std::clamp(x, A(0), A(W - 1));
      y = std::isnan(y) ? A(0) : std::clamp(y, A(0), A(H - 1));
    }
    // Zeros padding: a point more than the interpolation support away from the image reads nothing (this also
    // keeps the integer conversions below in range).
    if (padding_ == Padding::Zeros && (x < A(-3) || y < A(-3) || x > A(W + 2) || y > A(H + 2))) return;
    if (interp_ == Interp::Nearest) {
      add_tap(t, int64_t(y), int64_t(x), A(1), H, W, border);
    } else if (interp_ == Interp::Linear) {
      const int64_t x1 = int64_t(std::floor(x)), y1 = int64_t(std::floor(y));
      const A dx1 = x - A(x1), dx2 = A(x1 + 1) - x, dy1 = y - A(y1), dy2 = A(y1 + 1) - y;
      add_tap(t, y1, x1, dy2 * dx2, H, W, border);
      add_tap(t, y1, x1 + 1, dy2 * dx1, H, W, border);
      add_tap(t, y1 + 1, x1, dy1 * dx2, H, W, border);
      add_tap(t, y1 + 1, x1 + 1, dy1 * dx1, H, W, border);
    } else {
      const int64_t x0 = int64_t(std::floor(x)) - 1, y0 = int64_t(std::floor(y)) - 1;
      A cx[4], cy[4];
      cubic_coeffs(x - A(x0) - 1, cx);
      cubic_coeffs(y - A(y0) - 1, cy);
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) add_tap(t, y0 + i, x0 + j, cy[i] * cx[j], H, W, border);
    }
  }

  template <class T>
  void run_typed(KernelContext& ctx, const Tensor& x, const acc_t<T>* grid, int64_t Ho, int64_t Wo) const {
    using A = acc_t<T>;
    const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3), P = Ho * Wo;
    T* y = ctx.allocate_output(0, x.dtype(), {N, C, Ho, Wo}).template data<T>();
    if (N * C * P == 0) return;
    const T* xp = x.data<T>();
    constexpr int64_t kBlock = 64;  // output pixels per work unit
    const int64_t blocks = (P + kBlock - 1) / kBlock;
    const int64_t taps = interp_ == Interp::Cubic ? 16 : interp_ == Interp::Linear ? 4 : 1;
    parallel_for(N * blocks, std::max<int64_t>(1, kWorkGrain / (kBlock * C * taps)),
                 [&](int64_t ub, int64_t ue) {
                   std::vector<Taps<A>> tb(kBlock);
                   for (int64_t u = ub; u < ue; ++u) {
                     const int64_t n = u / blocks, p0 = (u % blocks) * kBlock, len = std::min(kBlock, P - p0);
                     const A* g = grid + (n * P + p0) * 2;
                     for (int64_t i = 0; i < len; ++i) taps_at(g[2 * i], g[2 * i + 1], H, W, tb[size_t(i)]);
                     for (int64_t c = 0; c < C; ++c) {
                       const T* plane = xp + (n * C + c) * H * W;
                       T* out = y + (n * C + c) * P + p0;
                       for (int64_t i = 0; i < len; ++i) {
                         const Taps<A>& t = tb[size_t(i)];
                         A acc = 0;
                         for (int k = 0; k < t.n; ++k) acc += t.w[k] * to_arith(plane[t.off[k]]);
                         out[i] = from_arith<T>(acc);
                       }
                     }
                   }
                 });
  }

  Interp interp_ = Interp::Linear;
  Padding padding_ = Padding::Zeros;
  bool align_corners_ = false;
};

}  // namespace

void register_extra_sample_ops(KernelRegistry& r) {
  r.add("GridSample").set_kernel([](const Node& n) { return std::make_unique<GridSampleKernel>(n); });
}

}  // namespace gaf::runtime::extra
