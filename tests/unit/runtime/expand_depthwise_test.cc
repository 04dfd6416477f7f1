// ExpandDepthwise (the fused MobileNet-style expansion + depthwise convolution) against a double reference: both
// window sizes and strides, asymmetric padding, channel slices of every width (channel counts that are not a
// multiple of 16 too), row bands, batches, clamps and activations.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "runtime/kernels/fast/expand_depthwise.h"

namespace gaf::runtime {
namespace {

struct Case {
  int64_t n, h, w, c, e, k, s;
  std::array<int64_t, 4> pads;  // top, left, bottom, right
};

double act(double v, Activation a, double alpha) {
  if (a == Activation::Swish) return v / (1 + std::exp(-alpha * v));
  if (a == Activation::HardSwish) return v * std::clamp(v / 6 + 0.5, 0.0, 1.0);
  return v;
}

void check(const Case& cs, bool bias, const ExpandDepthwise::Clamps& cl) {
  std::mt19937 rng(unsigned(cs.h * 131 + cs.c * 17 + cs.e + cs.k * 7 + cs.s));
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> x(size_t(cs.n * cs.h * cs.w * cs.c)), w1(size_t(cs.e * cs.c)), b1(size_t(cs.e)),
      w2(size_t(cs.e * cs.k * cs.k)), b2(size_t(cs.e));
  for (auto* v : {&x, &w1, &b1, &w2, &b2}) std::generate(v->begin(), v->end(), [&] { return u(rng); });
  ExpandDepthwise::Geometry g;
  g.h = cs.h, g.w = cs.w, g.k = cs.k, g.stride = cs.s;
  g.pad_top = cs.pads[0], g.pad_left = cs.pads[1], g.pad_bottom = cs.pads[2], g.pad_right = cs.pads[3];
  ASSERT_TRUE(ExpandDepthwise::supports(g, cs.e));
  const int64_t oh = g.oh(), ow = g.ow();
  std::vector<float> y(size_t(cs.n * oh * ow * cs.e), 1e30f);
  ExpandDepthwise(w1.data(), bias ? b1.data() : nullptr, w2.data(), bias ? b2.data() : nullptr, cs.e, cs.c, g, cl)
      .run(x.data(), cs.n, y.data());
  // The expansion in double, then the depthwise window over it.
  std::vector<double> ex(size_t(cs.h * cs.w * cs.e));
  for (int64_t b = 0; b < cs.n; ++b) {
    for (int64_t p = 0; p < cs.h * cs.w; ++p)
      for (int64_t o = 0; o < cs.e; ++o) {
        double s = bias ? b1[size_t(o)] : 0.0;
        for (int64_t i = 0; i < cs.c; ++i)
          s += double(x[size_t((b * cs.h * cs.w + p) * cs.c + i)]) * w1[size_t(o * cs.c + i)];
        ex[size_t(p * cs.e + o)] = act(std::clamp(s, double(cl.lo1), double(cl.hi1)), cl.act1, cl.alpha1);
      }
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j)
        for (int64_t o = 0; o < cs.e; ++o) {
          double s = bias ? b2[size_t(o)] : 0.0;
          for (int64_t a = 0; a < cs.k; ++a)
            for (int64_t t = 0; t < cs.k; ++t) {
              const int64_t r = i * cs.s + a - g.pad_top, q = j * cs.s + t - g.pad_left;
              if (r >= 0 && r < cs.h && q >= 0 && q < cs.w)
                s += ex[size_t((r * cs.w + q) * cs.e + o)] * w2[size_t((o * cs.k + a) * cs.k + t)];
            }
          s = act(std::clamp(s, double(cl.lo2), double(cl.hi2)), cl.act2, cl.alpha2);
          ASSERT_NEAR(y[size_t(((b * oh + i) * ow + j) * cs.e + o)], s, 1e-4 * (1 + std::sqrt(double(cs.c))))
              << "image " << b << " pixel (" << i << ", " << j << ") channel " << o << " of " << cs.h << "x" << cs.w
              << "x" << cs.c << " -> " << cs.e << ", " << cs.k << "x" << cs.k << " stride " << cs.s;
        }
  }
}

TEST(ExpandDepthwise, MatchesTheReferenceForEveryWindowStrideAndPadding) {
  if (!PointwiseConv::available()) GTEST_SKIP() << "built without AVX-512";
  // Channel slices of every width the split picks (a narrower last one); channel counts not a multiple of 16
  // (masked stores: MobileNetV3's 72, 88, 120); rows that are not a multiple of the 4-pixel block; row bands;
  // asymmetric and zero pads; a batch of 2; 1x1 spatial output.
  const Case cases[] = {{1, 9, 9, 16, 96, 3, 1, {1, 1, 1, 1}},   {1, 12, 11, 24, 144, 3, 2, {1, 1, 1, 1}},
                        {2, 7, 7, 8, 32, 5, 1, {2, 2, 2, 2}},    {1, 10, 13, 5, 208, 5, 2, {2, 1, 0, 2}},
                        {1, 6, 5, 32, 224, 3, 1, {0, 0, 0, 0}},  {1, 3, 3, 3, 16, 3, 2, {0, 2, 1, 0}},
                        {1, 14, 14, 64, 384, 3, 1, {1, 1, 1, 1}}, {1, 12, 12, 16, 72, 3, 2, {1, 1, 1, 1}},
                        {1, 7, 9, 24, 88, 3, 1, {1, 1, 1, 1}},   {2, 14, 14, 40, 120, 5, 1, {2, 2, 2, 2}},
                        {1, 5, 6, 7, 9, 5, 2, {2, 2, 2, 2}},     {1, 14, 14, 40, 240, 5, 1, {2, 2, 2, 2}}};
  for (const Case& c : cases) {
    ExpandDepthwise::Clamps none, relu6, mixed, silu, hard_swish;
    relu6.lo1 = relu6.lo2 = 0.f, relu6.hi1 = relu6.hi2 = 6.f;
    mixed.lo1 = -0.25f, mixed.hi2 = 0.5f;
    silu.act1 = silu.act2 = Activation::Swish;
    hard_swish.act1 = hard_swish.act2 = Activation::HardSwish;
    hard_swish.lo2 = -1.f;  // a clamp before the activation
    ExpandDepthwise::Clamps swish_then_clip = silu;  // Swish's alpha, a clamp on one side only
    swish_then_clip.alpha1 = 1.5f, swish_then_clip.act2 = Activation::None, swish_then_clip.hi2 = 0.25f;
    for (const auto* cl : {&relu6, &none, &mixed, &silu, &hard_swish, &swish_then_clip}) check(c, cl != &none, *cl);
  }
}

TEST(ExpandDepthwise, SupportsOnlyWhatTheKernelRuns) {
  ExpandDepthwise::Geometry g;
  g.h = g.w = 8, g.k = 3, g.stride = 1, g.pad_top = g.pad_left = g.pad_bottom = g.pad_right = 1;
  EXPECT_EQ(ExpandDepthwise::supports(g, 32), PointwiseConv::available());
  EXPECT_EQ(ExpandDepthwise::supports(g, 24), PointwiseConv::available());  // not a multiple of 16: masked
  ExpandDepthwise::Geometry k7 = g;
  k7.k = 7;
  EXPECT_FALSE(ExpandDepthwise::supports(k7, 32));
  ExpandDepthwise::Geometry s3 = g;
  s3.stride = 3;
  EXPECT_FALSE(ExpandDepthwise::supports(s3, 32));
  ExpandDepthwise::Geometry pad3 = g;
  pad3.pad_left = 3;
  EXPECT_FALSE(ExpandDepthwise::supports(pad3, 32));
}

}  // namespace
}  // namespace gaf::runtime
