// ExpandDepthwise (the fused MobileNet-style expansion + depthwise convolution) against a double reference: both
// window sizes and strides, asymmetric padding, channel slices of every width, row bands, batches and clamps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "runtime/kernels/expand_depthwise.h"

namespace gaf::runtime {
namespace {

struct Case {
  int64_t n, h, w, c, e, k, s;
  std::array<int64_t, 4> pads;  // top, left, bottom, right
};

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
        ex[size_t(p * cs.e + o)] = std::clamp(s, double(cl.lo1), double(cl.hi1));
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
          s = std::clamp(s, double(cl.lo2), double(cl.hi2));
          ASSERT_NEAR(y[size_t(((b * oh + i) * ow + j) * cs.e + o)], s, 1e-4 * (1 + std::sqrt(double(cs.c))))
              << "image " << b << " pixel (" << i << ", " << j << ") channel " << o << " of " << cs.h << "x" << cs.w
              << "x" << cs.c << " -> " << cs.e << ", " << cs.k << "x" << cs.k << " stride " << cs.s;
        }
  }
}

TEST(ExpandDepthwise, MatchesTheReferenceForEveryWindowStrideAndPadding) {
  if (!PointwiseConv::available()) GTEST_SKIP() << "built without AVX-512";
  // Channel slices of 48 (a narrower last one), 96; rows that are not a multiple of the 4-pixel block; row bands
  // (3 slices over 2 threads); asymmetric and zero pads; a batch of 2; 1x1 spatial output.
  const Case cases[] = {{1, 9, 9, 16, 96, 3, 1, {1, 1, 1, 1}},   {1, 12, 11, 24, 144, 3, 2, {1, 1, 1, 1}},
                        {2, 7, 7, 8, 32, 5, 1, {2, 2, 2, 2}},    {1, 10, 13, 5, 208, 5, 2, {2, 1, 0, 2}},
                        {1, 6, 5, 32, 224, 3, 1, {0, 0, 0, 0}},  {1, 3, 3, 3, 16, 3, 2, {0, 2, 1, 0}},
                        {1, 14, 14, 64, 384, 3, 1, {1, 1, 1, 1}}};
  for (const Case& c : cases) {
    ExpandDepthwise::Clamps none, relu6, mixed;
    relu6.lo1 = relu6.lo2 = 0.f, relu6.hi1 = relu6.hi2 = 6.f;
    mixed.lo1 = -0.25f, mixed.hi2 = 0.5f;
    check(c, true, relu6);
    check(c, false, none);
    check(c, true, mixed);
  }
}

TEST(ExpandDepthwise, SupportsOnlyWhatTheKernelRuns) {
  ExpandDepthwise::Geometry g;
  g.h = g.w = 8, g.k = 3, g.stride = 1, g.pad_top = g.pad_left = g.pad_bottom = g.pad_right = 1;
  EXPECT_EQ(ExpandDepthwise::supports(g, 32), PointwiseConv::available());
  EXPECT_FALSE(ExpandDepthwise::supports(g, 24));  // not a multiple of 16
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
