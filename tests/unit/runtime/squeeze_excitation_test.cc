// SqueezeExcitation (squeeze-and-excitation in one kernel) against a double reference: both layouts, the gates
// alone and x scaled by them, batches, channel counts that are not a multiple of 16, one position to a 112x112
// map (the one- and two-thread splits, the gates computed by one thread or by all in slices), every hidden
// activation and both gates.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "runtime/kernels/fast/squeeze_excitation.h"

namespace gaf::runtime {
namespace {

struct Case {
  int64_t n, p, c, r;
};

double hidden_act(double v, const SqueezeExcitation::Params& pr) {
  v = std::clamp(v, double(pr.lo), double(pr.hi));
  if (pr.act == Activation::Swish) return v / (1 + std::exp(-double(pr.alpha) * v));
  if (pr.act == Activation::HardSwish) return v * std::clamp(v / 6 + 0.5, 0.0, 1.0);
  return v;
}

double gate_of(double v, const SqueezeExcitation::Params& pr) {
  if (pr.gate == SqueezeExcitation::Gate::HardSigmoid)
    return std::clamp(double(pr.gate_alpha) * v + double(pr.gate_beta), 0.0, 1.0);
  return 1 / (1 + std::exp(-v));
}

void check(const Case& cs, bool channels_last, bool gate_only, bool bias, const SqueezeExcitation::Params& pr) {
  std::mt19937 rng(unsigned(cs.p * 131 + cs.c * 17 + cs.r));
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> x(size_t(cs.n * cs.p * cs.c)), w1(size_t(cs.r * cs.c)), b1(size_t(cs.r)),
      w2(size_t(cs.c * cs.r)), b2(size_t(cs.c));
  // An offset per channel, so that the means are not all near 0 and the gates spread over (0, 1).
  for (size_t i = 0; i < x.size(); ++i) x[i] = u(rng) + float(int64_t(i) % 7 - 3) * 0.5f;
  for (auto* v : {&w1, &b1, &w2, &b2}) std::generate(v->begin(), v->end(), [&] { return u(rng); });
  auto at = [&](int64_t b, int64_t q, int64_t ch) {
    return size_t(channels_last ? (b * cs.p + q) * cs.c + ch : (b * cs.c + ch) * cs.p + q);
  };
  std::vector<float> y(gate_only ? size_t(cs.n * cs.c) : x.size(), 1e30f);
  SqueezeExcitation(w1.data(), bias ? b1.data() : nullptr, w2.data(), bias ? b2.data() : nullptr, cs.c, cs.r, pr)
      .run(x.data(), cs.n, cs.p, channels_last, gate_only, y.data());
  for (int64_t b = 0; b < cs.n; ++b) {
    std::vector<double> m(size_t(cs.c), 0.0), h(size_t(cs.r));
    for (int64_t ch = 0; ch < cs.c; ++ch) {
      for (int64_t q = 0; q < cs.p; ++q) m[size_t(ch)] += x[at(b, q, ch)];
      m[size_t(ch)] /= double(cs.p);
    }
    for (int64_t j = 0; j < cs.r; ++j) {
      double s = bias ? b1[size_t(j)] : 0.0;
      for (int64_t ch = 0; ch < cs.c; ++ch) s += double(w1[size_t(j * cs.c + ch)]) * m[size_t(ch)];
      h[size_t(j)] = hidden_act(s, pr);
    }
    for (int64_t ch = 0; ch < cs.c; ++ch) {
      double s = bias ? b2[size_t(ch)] : 0.0;
      for (int64_t j = 0; j < cs.r; ++j) s += double(w2[size_t(ch * cs.r + j)]) * h[size_t(j)];
      const double g = gate_of(s, pr);
      if (gate_only) {
        ASSERT_NEAR(y[size_t(b * cs.c + ch)], g, 2e-6 + 2e-5 * std::abs(g)) << "image " << b << " channel " << ch;
        continue;
      }
      for (int64_t q = 0; q < cs.p; ++q) {
        const double want = double(x[at(b, q, ch)]) * g;
        ASSERT_NEAR(y[at(b, q, ch)], want, 2e-6 + 2e-5 * std::abs(want))
            << "image " << b << " position " << q << " channel " << ch;
      }
    }
  }
}

TEST(SqueezeExcitation, MatchesTheReferenceInBothLayouts) {
  const Case cases[] = {
      {1, 49, 1152, 48},   // EfficientNet-B0's last blocks: 2 threads split 49 positions or 1152 channels,
                           // and the gates' weights
      {1, 100, 600, 39},   // the gates split at 37.5 vectors of channels and an odd hidden layer
      {1, 12544, 32, 8},   // its first: 112x112 positions of 32 channels, partial sums in 64-row blocks
      {2, 196, 120, 32},   // MobileNetV3-small: 2 images, 120 = 7.5 vectors of channels
      {1, 1, 72, 18},      // one position: one thread
      {3, 5, 9, 3},        // fewer channels than a vector
  };
  SqueezeExcitation::Params silu;
  silu.act = Activation::Swish;
  SqueezeExcitation::Params relu_hard;
  relu_hard.lo = 0.f;
  relu_hard.gate = SqueezeExcitation::Gate::HardSigmoid;
  relu_hard.gate_alpha = 1.f / 6.f;
  SqueezeExcitation::Params clipped_hard_swish;
  clipped_hard_swish.lo = -1.f, clipped_hard_swish.hi = 2.f, clipped_hard_swish.act = Activation::HardSwish;
  for (const Case& cs : cases)
    for (bool channels_last : {true, false})
      for (bool gate_only : {false, true})
        for (const auto& [name, pr] : {std::pair{"silu", silu}, std::pair{"relu+hardsigmoid", relu_hard},
                                       std::pair{"clip+hardswish", clipped_hard_swish},
                                       std::pair{"none", SqueezeExcitation::Params{}}}) {
          SCOPED_TRACE(::testing::Message() << "n " << cs.n << " p " << cs.p << " c " << cs.c << " r " << cs.r
                                            << (channels_last ? " NHWC " : " NCHW ")
                                            << (gate_only ? "gates " : "scaled ") << name);
          check(cs, channels_last, gate_only, true, pr);
        }
  check({1, 49, 40, 10}, true, false, false, silu);  // no biases
}

TEST(SqueezeExcitation, ScalesInPlace) {
  // The op writes over X when X dies there: y == x must give the same result.
  const int64_t p = 3136, c = 40, r = 10;
  std::vector<float> x(size_t(p * c)), w1(size_t(r * c), 0.05f), w2(size_t(c * r), -0.1f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int64_t(i) % 11 - 5);
  SqueezeExcitation se(w1.data(), nullptr, w2.data(), nullptr, c, r, {});
  std::vector<float> y(x.size());
  se.run(x.data(), 1, p, true, false, y.data());
  se.run(x.data(), 1, p, true, false, x.data());
  EXPECT_EQ(x, y);
}

}  // namespace
}  // namespace gaf::runtime
