// simd::exp2v, the vector 2^t behind attention's softmax and the swish pass, against std::exp2 in double; the
// GELU passes built on it; simd::expv, the accurate exp of the generated kernels. At the build's vector width
// (ops/simd_vec.h: AVX-512 or AVX2).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "ops/fastmath.h"
#include "ops/simd_math.h"

// GCC 12's intrinsics headers trip these (_mm512_undefined_ps), as in the kernels that use exp2v
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace {

#if defined(GAF_SIMD)
namespace simd = gaf::simd;
constexpr int kW = simd::kW;

// 2^t for the kW values t0, t0 + step, ...: {t, exp2v(t)} per lane.
std::array<std::pair<float, float>, kW> lanes(double t0, double step) {
  float t[kW], y[kW];
  for (int i = 0; i < kW; ++i) t[i] = float(t0 + i * step);
  simd::storeu(y, simd::exp2v(simd::loadu(t)));
  std::array<std::pair<float, float>, kW> out;
  for (int i = 0; i < kW; ++i) out[size_t(i)] = {t[i], y[i]};
  return out;
}

TEST(SimdExp, RelativeErrorOverTheNormalRange) {
  double worst = 0;
  float at = 0;
  for (double t0 = -126; t0 < 127; t0 += kW * 7.3e-5)
    for (auto [t, y] : lanes(t0, 7.3e-5)) {
      const double err = std::fabs(double(y) / std::exp2(double(t)) - 1);
      if (err > worst) worst = err, at = t;
    }
  EXPECT_LT(worst, 2e-7) << "at t = " << at;
}

TEST(SimdExp, ExactAtIntegersAndTheEdges) {
  for (auto [t, y] : lanes(-8, 1)) EXPECT_EQ(y, std::exp2(t)) << t;  // -8 ..: the polynomial is 1 at f = 0
  for (double t0 : {-150.0, -146.0})                                  // gradual underflow, within an ulp of 2^-149
    for (auto [t, y] : lanes(t0, 0.5)) {
      EXPECT_GE(y, 0.0f) << t;
      EXPECT_NEAR(y, std::exp2(double(t)), std::exp2(-149.0)) << t;
    }
  const auto [big, y] = lanes(127.4, 0)[0];  // near the top of the range: finite, as accurate as elsewhere
  EXPECT_NEAR(y / std::exp2(double(big)), 1.0, 2e-7);
  EXPECT_TRUE(std::isnan(lanes(std::numeric_limits<double>::quiet_NaN(), 0)[0].second));
}
// simd::expv, the accurate exp of the generated kernels' vector loops, against double: within 2 ulps (2.4e-7
// relative) over the normal range, gradual underflow to 0 below it, inf above 88.73, NaN kept.
TEST(SimdExp, ExpvWithinTwoUlpsAndItsEdges) {
  auto expv = [](float x0, float step) {
    float x[kW], y[kW];
    for (int i = 0; i < kW; ++i) x[i] = x0 + float(i) * step;
    simd::storeu(y, simd::expv(simd::loadu(x)));
    std::array<std::pair<float, float>, kW> out;
    for (int i = 0; i < kW; ++i) out[size_t(i)] = {x[i], y[i]};
    return out;
  };
  double worst = 0;
  float at = 0;
  for (float x0 = -87.0f; x0 < 88.5f; x0 += kW * 1.7e-4f)
    for (auto [x, y] : expv(x0, 1.7e-4f)) {
      const double err = std::fabs(double(y) / std::exp(double(x)) - 1);
      if (err > worst) worst = err, at = x;
    }
  EXPECT_LT(worst, 2.4e-7) << "at x = " << at;
  for (auto [x, y] : expv(-103.0f, 0.1f)) EXPECT_NEAR(y, std::exp(double(x)), std::exp2(-149.0)) << x;
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {88.73f, 89.0f, 1000.0f, inf}) EXPECT_EQ(expv(x, 0)[0].second, inf) << x;
  for (float x : {-105.0f, -1000.0f, -inf}) EXPECT_EQ(expv(x, 0)[0].second, 0.0f) << x;
  EXPECT_EQ(expv(0.0f, 0)[0].second, 1.0f);
  EXPECT_TRUE(std::isnan(expv(std::numeric_limits<float>::quiet_NaN(), 0)[0].second));
}

// The GELU passes after a MatMul (gelu_erfv, gelu_tanhv) against double over |x| <= 12: the erf form within
// 4e-7 |x| / 2 (its erfc approximation's 1.5e-7 and the rounding of t, P and exp) plus 2 ulps of the result, the
// tanh form within (4e-7 + 2.5e-7 |2u|) relative (the rounding of u grows through the exp: 1e-5 on results near
// 1e-22 at x = -8); NaN stays NaN.
TEST(SimdGelu, BothFormsAgainstDouble) {
  double worst_erf = 0, worst_tanh = 0;
  float at_erf = 0, at_tanh = 0;
  for (double x0 = -12; x0 < 12; x0 += kW * 3.1e-4) {
    float x[kW], ye[kW], yt[kW];
    for (int i = 0; i < kW; ++i) x[i] = float(x0 + i * 3.1e-4);
    simd::storeu(ye, simd::gelu_erfv(simd::loadu(x)));
    simd::storeu(yt, simd::gelu_tanhv(simd::loadu(x)));
    for (int i = 0; i < kW; ++i) {
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
  const simd::vf nan = simd::set1(std::numeric_limits<float>::quiet_NaN());
  float y[kW];
  simd::storeu(y, simd::gelu_erfv(nan));
  EXPECT_TRUE(std::isnan(y[0]));
  simd::storeu(y, simd::gelu_tanhv(nan));
  EXPECT_TRUE(std::isnan(y[0]));
}

// swishv and sigmoidv against double over |x| <= 20 (simd::recip's Newton step: AVX-512's rcp14 or AVX2's rcp).
TEST(SimdSwish, SwishAndSigmoidAgainstDouble) {
  double worst_swish = 0, worst_sigmoid = 0;
  const simd::vf neg_log2e = simd::set1(-1.44269504088896341f);
  for (double x0 = -20; x0 < 20; x0 += kW * 1.7e-3) {
    float x[kW], ys[kW], yg[kW];
    for (int i = 0; i < kW; ++i) x[i] = float(x0 + i * 1.7e-3);
    simd::storeu(ys, simd::swishv(simd::loadu(x), neg_log2e));
    simd::storeu(yg, simd::sigmoidv(simd::loadu(x)));
    for (int i = 0; i < kW; ++i) {
      const double sg = 1 / (1 + std::exp(-double(x[i])));
      worst_swish = std::max(worst_swish, std::fabs(ys[i] - x[i] * sg) / (std::fabs(x[i] * sg) + 1e-30));
      worst_sigmoid = std::max(worst_sigmoid, std::fabs(yg[i] - sg) / sg);
    }
  }
  EXPECT_LT(worst_swish, 1.5e-6);
  EXPECT_LT(worst_sigmoid, 1.5e-6);
}
// sinv and cosv against double: over |x| <= 8192 (the reduced range) within 2^-23 absolute plus 2^-23 of the
// value (so within an ulp of 1 near the peaks and close to the value's own ulps near the zeros), and lanes
// beyond the bound, the infinities and NaN as libm gives them.
TEST(SimdTrig, SinAndCosAgainstDouble) {
  double worst = 0;
  float at = 0;
  auto check = [&](double x0, double step) {
    float x[kW], ys[kW], yc[kW];
    for (int i = 0; i < kW; ++i) x[i] = float(x0 + i * step);
    simd::storeu(ys, simd::sinv(simd::loadu(x)));
    simd::storeu(yc, simd::cosv(simd::loadu(x)));
    for (int i = 0; i < kW; ++i) {
      const double ws = std::sin(double(x[i])), wc = std::cos(double(x[i]));
      const double e = std::max(std::fabs(ys[i] - ws) / (0x1p-23 * (1 + std::fabs(ws))),
                                std::fabs(yc[i] - wc) / (0x1p-23 * (1 + std::fabs(wc))));
      if (e > worst) worst = e, at = x[i];
    }
  };
  for (double x0 = -8192; x0 < 8192; x0 += kW * 0.0137) check(x0, 0.0137);
  for (double x0 = -7; x0 < 7; x0 += kW * 1.1e-5) check(x0, 1.1e-5);
  EXPECT_LE(worst, 1.0) << "at x = " << at;

  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  float x[kW], ys[kW], yc[kW];
  const float special[] = {1e5f, -3.7e6f, 1e30f, inf, -inf, nan, 8192.5f, -0.0f};
  for (int i = 0; i < kW; ++i) x[i] = special[i % 8];
  simd::storeu(ys, simd::sinv(simd::loadu(x)));
  simd::storeu(yc, simd::cosv(simd::loadu(x)));
  for (int i = 0; i < kW; ++i) {
    if (std::isnan(std::sin(x[i]))) {
      EXPECT_TRUE(std::isnan(ys[i]) && std::isnan(yc[i])) << x[i];
      continue;
    }
    EXPECT_EQ(ys[i], std::sin(x[i])) << x[i];
    EXPECT_EQ(yc[i], std::cos(x[i])) << x[i];
  }
}
// The op-by-op Tanh, Softplus and Mish vector forms against the scalar fastmath forms they stand for: tanhv
// bit for bit, softplusv within 2 ulp, mishv within 1e-6 relative (1e-30 absolute) of x tanh(softplus(x)) in
// fastmath, over [-30, 30] and NaN.
TEST(SimdActivations, TanhSoftplusMishAsTheirScalarForms) {
  for (double x0 = -30; x0 < 30; x0 += kW * 7.3e-4) {
    float x[kW], yt[kW], ys[kW], ym[kW];
    for (int i = 0; i < kW; ++i) x[i] = float(x0 + i * 7.3e-4);
    simd::storeu(yt, simd::tanhv(simd::loadu(x)));
    simd::storeu(ys, simd::softplusv(simd::loadu(x)));
    simd::storeu(ym, simd::mishv(simd::loadu(x)));
    for (int i = 0; i < kW; ++i) {
      const float t = gaf::fastmath::tanh(x[i]), sp = gaf::fastmath::softplus(x[i]);
      const float m = x[i] * gaf::fastmath::tanh(sp);
      ASSERT_EQ(yt[i], t) << "tanh at " << x[i];
      ASSERT_NEAR(ys[i], sp, 2.4e-7 * std::fabs(sp) + 1e-30) << "softplus at " << x[i];
      ASSERT_NEAR(ym[i], m, 1e-6 * std::fabs(m) + 1e-30) << "mish at " << x[i];
    }
  }
  float y[kW];
  const simd::vf nan = simd::set1(std::numeric_limits<float>::quiet_NaN());
  for (auto f : {simd::tanhv, simd::softplusv, simd::mishv}) {
    simd::storeu(y, f(nan));
    EXPECT_TRUE(std::isnan(y[0]));
  }
}

// expm1v and logv are fastmath::expm1 and fastmath::log on the vector, step for step: the same value for every
// 4099th bit pattern (normals, subnormals, zeros, infinities, NaNs of both signs).
TEST(SimdMath, Expm1AndLogAreFastmathsValues) {
  float x[kW], e[kW], l[kW];
  int64_t checked = 0;
  for (uint64_t u0 = 0; u0 < (uint64_t(1) << 32); u0 += uint64_t(4099) * kW) {
    for (int i = 0; i < kW; ++i) {
      const uint32_t u = uint32_t(u0 + uint64_t(i) * 4099);
      std::memcpy(&x[i], &u, 4);
    }
    simd::storeu(e, simd::expm1v(simd::loadu(x)));
    simd::storeu(l, simd::logv(simd::loadu(x)));
    for (int i = 0; i < kW; ++i, ++checked) {
      const float fe = gaf::fastmath::expm1(x[i]), fl = gaf::fastmath::log(x[i]);
      if (std::isnan(fe)) {
        ASSERT_TRUE(std::isnan(e[i])) << "expm1 at " << x[i];
      } else {
        ASSERT_EQ(e[i], fe) << "expm1 at " << x[i];
      }
      if (std::isnan(fl)) {
        ASSERT_TRUE(std::isnan(l[i])) << "log at " << x[i];
      } else {
        ASSERT_EQ(l[i], fl) << "log at " << x[i];
      }
    }
  }
  EXPECT_GT(checked, 1000000);
}

// |y - r| in units of the last place of r rounded to fp32 (subnormals: 2^-149); infinities and NaN must match.
double ulps(float y, double r) {
  const float rf = float(r);
  if (std::isnan(rf) || std::isinf(rf)) return (y == rf || (std::isnan(y) && std::isnan(rf))) ? 0 : 1e30;
  const int e = rf == 0 ? -149 : std::max(std::ilogb(rf) - 23, -149);
  return std::fabs(double(y) - r) / std::ldexp(1.0, e);
}

// powv against pow in double: bases over every binade (random bit patterns of positive floats), exponents
// integral and fractional, small and large, results from 0 through the subnormals to inf: within an ulp of
// the exact value. Lanes of C's special cases (zero and negative bases, infinities, NaN) mixed into one vector
// with ordinary lanes give libm's powf value.
TEST(SimdMath, PowWithinAnUlpAndLibmsSpecialCases) {
  uint32_t seed = 12345;
  auto next = [&] { return seed = seed * 1664525u + 1013904223u; };
  double worst = 0;
  float wa = 0, wb = 0;
  float a[kW], b[kW], y[kW];
  for (int it = 0; it < 200000; ++it) {
    for (int i = 0; i < kW; ++i) {
      const uint32_t u = next() & 0x7f7fffffu;  // positive and finite
      std::memcpy(&a[i], &u, 4);
      const float f = float(int32_t(next() % 20001u) - 10000);
      b[i] = it % 4 == 0 ? float(int32_t(next() % 9u) - 4) : it % 4 == 1 ? f / 10000 : f / (it % 4 == 2 ? 100 : 3);
    }
    simd::storeu(y, simd::powv(simd::loadu(a), simd::loadu(b)));
    for (int i = 0; i < kW; ++i) {
      const double e = ulps(y[i], std::pow(double(a[i]), double(b[i])));
      if (e > worst) worst = e, wa = a[i], wb = b[i];
    }
  }
  EXPECT_LE(worst, 1.0) << "at " << wa << " ^ " << wb;

  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float sa[] = {0.f, -0.f, 1.f, -1.f, inf, -inf, nan, 2.f, -2.f, 0.5f, 1e-40f, -8.f, 4.f, 3.f, 1.f, 9.f};
  const float sb[] = {-1.f, 3.f, nan, inf, 0.5f, 3.f, 0.f, -inf, 2.f, inf, 0.5f, 3.f, 0.5f, 3.f, 1e30f, 0.5f};
  for (int shift = 0; shift < 16; shift += kW) {
    for (int i = 0; i < kW; ++i) a[i] = sa[shift + i], b[i] = sb[shift + i];
    simd::storeu(y, simd::powv(simd::loadu(a), simd::loadu(b)));
    for (int i = 0; i < kW; ++i) {
      const float r = std::pow(a[i], b[i]);
      if (std::isnan(r)) {
        EXPECT_TRUE(std::isnan(y[i])) << a[i] << " ^ " << b[i];
      } else {
        EXPECT_EQ(y[i], r) << a[i] << " ^ " << b[i];
      }
    }
  }
}

// mishv's closed form against x tanh(log1p(e^x)) in double: within 5 ulp from x = -87 (below, e^x is
// subnormal) through 30, the identity from 20 on; NaN stays NaN.
TEST(SimdMath, MishClosedFormAgainstTheDefinition) {
  double worst = 0;
  float at = 0;
  float x[kW], y[kW];
  for (double x0 = -87; x0 < 30; x0 += kW * 3.1e-5) {
    for (int i = 0; i < kW; ++i) x[i] = float(x0 + i * 3.1e-5);
    simd::storeu(y, simd::mishv(simd::loadu(x)));
    for (int i = 0; i < kW; ++i) {
      const double xd = x[i], e = ulps(y[i], xd * std::tanh(std::log1p(std::exp(xd))));
      if (e > worst) worst = e, at = x[i];
    }
  }
  EXPECT_LE(worst, 5.0) << "at x = " << at;
  simd::storeu(y, simd::mishv(simd::set1(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(y[0]));
  simd::storeu(y, simd::mishv(simd::set1(1e30f)));
  EXPECT_EQ(y[0], 1e30f);
}
#else
TEST(SimdExp, NotBuiltWithoutAVectorUnit) { GTEST_SKIP() << "exp2v needs AVX-512 or AVX2"; }
#endif

}  // namespace
