// simd::exp2_16, the vector 2^t behind attention's softmax and the swish pass, against std::exp2 in double; the
// GELU passes built on it.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "runtime/kernels/simd_exp.h"

// GCC 12's intrinsics headers trip these (_mm512_undefined_ps), as in the kernels that use exp2_16
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace {

#if defined(__AVX512F__)
// 2^t for the 16 values t0, t0 + step, ...: {t, exp2_16(t)} per lane.
std::array<std::pair<float, float>, 16> lanes(double t0, double step) {
  alignas(64) float t[16], y[16];
  for (int i = 0; i < 16; ++i) t[i] = float(t0 + i * step);
  _mm512_store_ps(y, gaf::runtime::simd::exp2_16(_mm512_load_ps(t)));
  std::array<std::pair<float, float>, 16> out;
  for (int i = 0; i < 16; ++i) out[size_t(i)] = {t[i], y[i]};
  return out;
}

TEST(SimdExp, RelativeErrorOverTheNormalRange) {
  double worst = 0;
  float at = 0;
  for (double t0 = -126; t0 < 127; t0 += 16 * 7.3e-5)
    for (auto [t, y] : lanes(t0, 7.3e-5)) {
      const double err = std::fabs(double(y) / std::exp2(double(t)) - 1);
      if (err > worst) worst = err, at = t;
    }
  EXPECT_LT(worst, 2e-7) << "at t = " << at;
}

TEST(SimdExp, ExactAtIntegersAndTheEdges) {
  for (auto [t, y] : lanes(-8, 1)) EXPECT_EQ(y, std::exp2(t)) << t;  // -8 .. 7: the polynomial is 1 at f = 0
  for (auto [t, y] : lanes(-150, 0.5)) {                               // gradual underflow, within an ulp of 2^-149
    EXPECT_GE(y, 0.0f) << t;
    EXPECT_NEAR(y, std::exp2(double(t)), std::exp2(-149.0)) << t;
  }
  const auto [big, y] = lanes(127.4, 0)[0];  // near the top of the range: finite, as accurate as elsewhere
  EXPECT_NEAR(y / std::exp2(double(big)), 1.0, 2e-7);
  EXPECT_TRUE(std::isnan(lanes(std::numeric_limits<double>::quiet_NaN(), 0)[0].second));
}
// The GELU passes after a MatMul (gelu_erf16, gelu_tanh16) against double over |x| <= 12: the erf form within
// 4e-7 |x| / 2 (its erfc approximation's 1.5e-7 and the rounding of t, P and exp) plus 2 ulps of the result, the
// tanh form within (4e-7 + 2.5e-7 |2u|) relative (the rounding of u grows through the exp: 1e-5 on results near
// 1e-22 at x = -8); NaN stays NaN.
TEST(SimdGelu, BothFormsAgainstDouble) {
  double worst_erf = 0, worst_tanh = 0;
  float at_erf = 0, at_tanh = 0;
  for (double x0 = -12; x0 < 12; x0 += 16 * 3.1e-4) {
    alignas(64) float x[16], ye[16], yt[16];
    for (int i = 0; i < 16; ++i) x[i] = float(x0 + i * 3.1e-4);
    _mm512_store_ps(ye, gaf::runtime::simd::gelu_erf16(_mm512_load_ps(x)));
    _mm512_store_ps(yt, gaf::runtime::simd::gelu_tanh16(_mm512_load_ps(x)));
    for (int i = 0; i < 16; ++i) {
      const double v = x[i];
      const double we = 0.5 * v * std::erfc(-v / std::sqrt(2.0));
      // 0.5 v (1 + tanh(u)) as v / (1 + exp(-2 u)): 1 + tanh(u) rounds to 0 in double for u below -19.
      const double u2 = 2 * std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v);
      const double wt = v / (1 + std::exp(-u2));
      const double ee = std::fabs(ye[i] - we) / (4e-7 * std::fabs(v) / 2 + 2.4e-7 * std::fabs(we) + 1e-30);
      const double et = std::fabs(yt[i] - wt) / ((4e-7 + 2.5e-7 * std::fabs(u2)) * std::fabs(wt) + 1e-30);
      if (ee > worst_erf) worst_erf = ee, at_erf = x[i];
      if (et > worst_tanh) worst_tanh = et, at_tanh = x[i];
    }
  }
  EXPECT_LE(worst_erf, 1.0) << "erf form at x = " << at_erf;
  EXPECT_LE(worst_tanh, 1.0) << "tanh form at x = " << at_tanh;
  const __m512 nan = _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN());
  alignas(64) float y[16];
  _mm512_store_ps(y, gaf::runtime::simd::gelu_erf16(nan));
  EXPECT_TRUE(std::isnan(y[0]));
  _mm512_store_ps(y, gaf::runtime::simd::gelu_tanh16(nan));
  EXPECT_TRUE(std::isnan(y[0]));
}
#else
TEST(SimdExp, NotBuiltWithoutAvx512) { GTEST_SKIP() << "exp2_16 needs AVX-512"; }
#endif

}  // namespace
