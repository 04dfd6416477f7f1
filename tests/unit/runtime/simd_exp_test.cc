// simd::exp2_16, the vector 2^t behind attention's softmax and the swish pass, against std::exp2 in double.
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
#else
TEST(SimdExp, NotBuiltWithoutAvx512) { GTEST_SKIP() << "exp2_16 needs AVX-512"; }
#endif

}  // namespace
