// PointwiseConv (the AVX-512 1x1 convolution behind MobileNet-style expansions) against a double reference: the
// tile shapes and their tails, every epilogue, and an output that is its own addend.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "runtime/kernels/fast/pointwise_conv.h"

namespace gaf::runtime {
namespace {

struct Case {
  int64_t pixels, k, n;
};

void check(const Case& c, bool bias, PointwiseConv::Epilogue ep, bool add, bool in_place) {
  std::mt19937 rng(unsigned(c.pixels * 131 + c.k * 17 + c.n));
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> x(size_t(c.pixels * c.k)), w(size_t(c.n * c.k)), b(size_t(c.n)), r(size_t(c.pixels * c.n));
  for (auto* v : {&x, &w, &b, &r}) std::generate(v->begin(), v->end(), [&] { return u(rng); });
  std::vector<float> y(r.size(), 1e30f);
  if (in_place) y = r;
  ep.addend = add ? (in_place ? y.data() : r.data()) : nullptr;
  PointwiseConv(w.data(), bias ? b.data() : nullptr, c.n, c.k).run(x.data(), c.pixels, y.data(), ep);
  for (int64_t p = 0; p < c.pixels; ++p)
    for (int64_t o = 0; o < c.n; ++o) {
      double s = bias ? b[size_t(o)] : 0.0;
      for (int64_t i = 0; i < c.k; ++i) s += double(x[size_t(p * c.k + i)]) * w[size_t(o * c.k + i)];
      s = std::clamp(s, double(ep.lo), double(ep.hi));
      if (add) s = std::clamp(s + r[size_t(p * c.n + o)], double(ep.lo2), double(ep.hi2));
      ASSERT_NEAR(y[size_t(p * c.n + o)], s, 1e-5 * (1 + std::sqrt(double(c.k))))
          << "pixel " << p << " channel " << o << " of " << c.pixels << "x" << c.k << " -> " << c.n;
    }
}

TEST(PointwiseConv, MatchesTheReferenceForEveryTileShapeAndEpilogue) {
  if (!PointwiseConv::available()) GTEST_SKIP() << "built without AVX-512";
  // Output channels: 1 to 6 vectors per panel, partial last vectors, several panels; pixels: whole tiles, tails,
  // fewer pixels than a tile, several chunks.
  const Case cases[] = {{1, 1, 17}, {7, 3, 16}, {50, 16, 96}, {49, 24, 144}, {13, 64, 200},
                        {100, 70, 24}, {130, 5, 40}, {3, 9, 1000}};
  for (const Case& c : cases) {
    PointwiseConv::Epilogue none, relu6, clip;
    relu6.lo = 0.f, relu6.hi = 6.f;
    clip.lo = -0.5f, clip.hi = 0.25f;
    check(c, true, none, false, false);
    check(c, false, relu6, false, false);
    check(c, true, clip, false, false);
    PointwiseConv::Epilogue add_relu;  // ResNet's residual: Add, then Relu
    add_relu.lo2 = 0.f;
    check(c, true, add_relu, true, false);
    check(c, true, clip, true, false);  // a clamp before the addend
    check(c, true, add_relu, true, true);
  }
}

TEST(PointwiseConv, EveryTailLengthOfEveryTileWidth) {
  if (!PointwiseConv::available()) GTEST_SKIP() << "built without AVX-512";
  // 1 to 6 vectors of output channels, each with every pixel count up to two full tiles (12 pixels per tile at
  // most): the tiles of fewer pixels that finish a run.
  for (int64_t n : {16, 32, 45, 64, 80, 96})
    for (int64_t pixels = 1; pixels <= 25; ++pixels) {
      PointwiseConv::Epilogue relu6;
      relu6.lo = 0.f, relu6.hi = 6.f;
      check({pixels, 5, n}, true, relu6, false, false);
      PointwiseConv::Epilogue add;
      check({pixels, 5, n}, true, add, true, false);
    }
}

}  // namespace
}  // namespace gaf::runtime

namespace gaf::runtime {
namespace {

// A NaN in a pixel stays NaN through the clamps (Relu, Relu6, the residual's Relu), as the unfused Relu and
// Clip keep it; the pixels without one are untouched by it.
TEST(PointwiseConv, ClampsKeepANaN) {
  if (!PointwiseConv::available()) GTEST_SKIP() << "built without AVX-512";
  const int64_t pixels = 13, k = 4, n = 32;
  std::vector<float> x(size_t(pixels * k), 0.5f), w(size_t(n * k), 0.25f), r(size_t(pixels * n), -3.f);
  x[size_t(5 * k + 2)] = std::nanf("");
  PointwiseConv::Epilogue relu6;
  relu6.lo = 0.f, relu6.hi = 6.f;
  PointwiseConv::Epilogue add_relu;
  add_relu.lo2 = 0.f;
  add_relu.addend = r.data();
  for (const PointwiseConv::Epilogue& ep : {relu6, add_relu}) {
    std::vector<float> y(size_t(pixels * n), 1e30f);
    PointwiseConv(w.data(), nullptr, n, k).run(x.data(), pixels, y.data(), ep);
    for (int64_t p = 0; p < pixels; ++p)
      for (int64_t o = 0; o < n; ++o) {
        const float v = y[size_t(p * n + o)];
        if (p == 5)
          EXPECT_TRUE(std::isnan(v)) << "pixel 5 channel " << o << ": " << v;
        else
          EXPECT_EQ(v, ep.addend ? 0.f : 0.5f) << "pixel " << p << " channel " << o;
      }
  }
}

}  // namespace
}  // namespace gaf::runtime
