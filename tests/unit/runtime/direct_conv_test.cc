// DirectConv (the AVX-512 convolution for few output pixels and many channels) against a double reference: kernel
// sizes, strides and pads (taps falling outside the input on every side), rows wider than a register tile, input
// channels in several blocks and a partial one, a partial panel of output channels, a batch, every epilogue, and an
// output that is its own addend.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "runtime/kernels/fast/direct_conv.h"

namespace gaf::runtime {
namespace {

struct Case {
  int64_t n, h, w, c, m, kh, kw, sh, sw, ph, pw, pe_h, pe_w;  // pe: the bottom / right pads
};

void check(const Case& c, bool bias, ConvEpilogue ep, bool add, bool in_place) {
  const int64_t oh = (c.h + c.ph + c.pe_h - c.kh) / c.sh + 1, ow = (c.w + c.pw + c.pe_w - c.kw) / c.sw + 1;
  std::mt19937 rng(unsigned(c.c * 131 + c.m * 17 + c.kh * 5 + c.sh));
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> x(size_t(c.n * c.h * c.w * c.c)), w(size_t(c.m * c.c * c.kh * c.kw)), b(size_t(c.m)),
      r(size_t(c.n * oh * ow * c.m));
  for (auto* v : {&x, &w, &b, &r}) std::generate(v->begin(), v->end(), [&] { return u(rng); });
  std::vector<float> y(r.size(), 1e30f);
  if (in_place) y = r;
  ep.addend = add ? (in_place ? y.data() : r.data()) : nullptr;
  DirectConv::Geometry g{.n = c.n, .h = c.h, .w = c.w, .oh = oh, .ow = ow, .sh = c.sh, .sw = c.sw, .ph = c.ph,
                         .pw = c.pw};
  DirectConv(w.data(), bias ? b.data() : nullptr, c.m, c.c, c.kh, c.kw).run(x.data(), g, y.data(), ep);
  for (int64_t i = 0; i < c.n; ++i)
    for (int64_t p = 0; p < oh; ++p)
      for (int64_t q = 0; q < ow; ++q)
        for (int64_t o = 0; o < c.m; ++o) {
          double s = bias ? b[size_t(o)] : 0.0;
          for (int64_t th = 0; th < c.kh; ++th)
            for (int64_t tw = 0; tw < c.kw; ++tw) {
              const int64_t ih = p * c.sh + th - c.ph, iw = q * c.sw + tw - c.pw;
              if (ih < 0 || ih >= c.h || iw < 0 || iw >= c.w) continue;
              for (int64_t k = 0; k < c.c; ++k)
                s += double(x[size_t(((i * c.h + ih) * c.w + iw) * c.c + k)]) *
                     w[size_t(((o * c.c + k) * c.kh + th) * c.kw + tw)];
            }
          s = std::clamp(s, double(ep.lo), double(ep.hi));
          if (ep.act == Activation::HardSwish) s = s * std::clamp(s / 6 + 0.5, 0.0, 1.0);
          if (ep.act == Activation::Swish) s = s / (1 + std::exp(-ep.alpha * s));
          const size_t at = size_t(((i * oh + p) * ow + q) * c.m + o);
          if (add) s = std::clamp(s + r[at], double(ep.lo2), double(ep.hi2));
          ASSERT_NEAR(y[at], s, 2e-5 * (1 + std::sqrt(double(c.c * c.kh * c.kw))))
              << "image " << i << " pixel " << p << "," << q << " channel " << o << " of " << c.c << " -> " << c.m
              << " " << c.kh << "x" << c.kw << " stride " << c.sh;
        }
}

TEST(DirectConv, MatchesTheReferenceForEveryGeometryAndEpilogue) {
  if (!DirectConv::available()) GTEST_SKIP() << "built without AVX-512";
  const Case cases[] = {
      {1, 7, 7, 130, 200, 3, 3, 1, 1, 1, 1, 1, 1},    // ResNet's 3x3 at 7x7; two channel blocks, a partial panel
      {1, 14, 14, 64, 128, 3, 3, 2, 2, 1, 1, 1, 1},   // stride 2
      {1, 13, 13, 300, 64, 1, 1, 2, 2, 0, 0, 0, 0},   // a 1x1 downsample, 300 = 2 blocks + 44
      {2, 4, 9, 40, 96, 5, 3, 1, 2, 2, 0, 2, 1},      // a batch, 5x3, rows of 9 (> one tile), uneven pads
      {1, 1, 1, 256, 130, 3, 3, 1, 1, 1, 1, 1, 1},    // only the centre tap inside
      {1, 8, 8, 17, 16, 1, 1, 1, 1, 0, 0, 0, 0},      // 64 pixels, one partial vector
  };
  for (const Case& c : cases) {
    ConvEpilogue none, relu6, hard_swish, swish;
    relu6.lo = 0.f, relu6.hi = 6.f;
    hard_swish.act = Activation::HardSwish;
    swish.act = Activation::Swish, swish.alpha = 1.5f;
    check(c, true, none, false, false);
    check(c, false, relu6, false, false);
    check(c, true, hard_swish, false, false);
    check(c, true, swish, false, false);
    ConvEpilogue add_relu;  // ResNet's residual: Add, then Relu
    add_relu.lo2 = 0.f;
    check(c, true, add_relu, true, false);
    check(c, true, relu6, true, false);  // a clamp before the addend
    check(c, true, add_relu, true, true);
  }
}

}  // namespace
}  // namespace gaf::runtime
