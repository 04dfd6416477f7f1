// The gaf-domain kernels against their formulas evaluated in double.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <numbers>
#include <tuple>
#include <vector>

#include "gaf/session.h"
#include "gaf/tools.h"

namespace gaf {
namespace {

struct OneOp {
  Graph g;
  Node* node;
  OneOp(const std::string& op, std::vector<int64_t> dims, std::vector<Tensor> params = {}) {
    Shape shape(dims.begin(), dims.end());
    std::vector<Value*> ins{g.add_input("x", TensorType{DType::Float, shape})};
    for (size_t i = 0; i < params.size(); ++i)
      ins.push_back(params[i].defined() ? g.add_constant("p" + std::to_string(i), params[i]) : nullptr);
    node = g.add_node(op, ins, {"y"});
    node->domain = "gaf";
    node->opset = 1;
    g.add_output(node->output(0));
  }
  std::pair<Tensor, Tensor> run() {
    runtime::Session s(g);
    Tensor x = tools::random_inputs(g, 11)[0];
    return {x, s.run(std::vector<Tensor>{x})[0]};
  }
};

Tensor iota(int64_t n, float scale) {
  Tensor t(DType::Float, {n});
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = scale * float(i + 1);
  return t;
}

void expect_unary(const std::string& op, const std::function<double(double)>& f,
                  std::map<std::string, Attribute> attrs = {}) {
  OneOp o(op, {3, 17});
  o.node->attrs = std::move(attrs);
  auto [x, y] = o.run();
  for (int64_t i = 0; i < x.numel(); ++i)
    EXPECT_NEAR(y.data<float>()[i], f(x.data<float>()[i]), 1e-6) << op << " at " << x.data<float>()[i];
}

TEST(GafOps, Activations) {
  const double r2 = std::numbers::sqrt2;
  expect_unary("Gelu", [&](double x) { return 0.5 * x * (1 + std::erf(x / r2)); });
  expect_unary("Gelu",
               [](double x) {
                 return 0.5 * x *
                        (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
               },
               {{"approximate", std::string("tanh")}});
  expect_unary("Silu", [](double x) { return x / (1 + std::exp(-x)); });
  expect_unary("HardSwish", [](double x) { return x * std::clamp(x / 6 + 0.5, 0.0, 1.0); });
}

// The activations run on vector forms where the build has them (the last lanes masked): over [-12, 12] in
// 1,003 elements (no whole number of vectors), NaN and the infinities, each within 1e-6 of the double formula
// scaled by max(1, |x|); NaN stays NaN, +inf gives +inf, and -inf gives the limit 0 or NaN (the formula's
// -inf * 0).
TEST(GafOps, ActivationsOverTheirRangeAndSpecialValues) {
  const double r2 = std::numbers::sqrt2, k = std::sqrt(2 / std::numbers::pi);
  const std::vector<std::tuple<std::string, std::string, std::function<double(double)>>> cases = {
      {"Gelu", "none", [&](double x) { return 0.5 * x * (1 + std::erf(x / r2)); }},
      {"Gelu", "tanh", [&](double x) { return 0.5 * x * (1 + std::tanh(k * (x + 0.044715 * x * x * x))); }},
      {"Silu", "", [](double x) { return x / (1 + std::exp(-x)); }},
      {"HardSwish", "", [](double x) { return x * std::clamp(x / 6 + 0.5, 0.0, 1.0); }},
  };
  const int64_t n = 1003;
  Tensor x(DType::Float, {n});
  float* xp = x.data<float>();
  for (int64_t i = 0; i < n - 3; ++i) xp[i] = -12.0f + 24.0f * float(i) / float(n - 4);
  xp[n - 3] = std::nanf("");
  xp[n - 2] = INFINITY;
  xp[n - 1] = -INFINITY;
  for (const auto& [op, approximate, f] : cases) {
    OneOp o(op, {n});
    if (!approximate.empty()) o.node->attrs["approximate"] = approximate;
    runtime::Session s(o.g);
    const Tensor y = s.run(std::vector<Tensor>{x})[0];
    for (int64_t i = 0; i < n; ++i) {
      const double want = f(xp[i]), got = y.data<float>()[i];
      const std::string at = op + " " + approximate + " at " + std::to_string(xp[i]);
      if (std::isinf(xp[i]) && xp[i] < 0) {
        EXPECT_TRUE(std::isnan(got) || got == 0.0) << at << ": " << got;
      } else if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << at;
      } else if (std::isinf(want)) {
        EXPECT_EQ(got, want) << at;
      } else {
        EXPECT_NEAR(got, want, 1e-6 * std::max(1.0, std::abs(double(xp[i])))) << at;
      }
    }
  }
}

// Rows of the trailing `cols` elements: (x - mean?) / sqrt(mean((x - mean?)^2) + eps) * scale + bias.
void expect_normalized(const Tensor& x, const Tensor& y, int64_t cols, bool centre, float eps,
                       const Tensor* scale, const Tensor* bias) {
  for (int64_t r = 0; r < x.numel() / cols; ++r) {
    const float* in = x.data<float>() + r * cols;
    double mean = 0, var = 0;
    if (centre)
      for (int64_t c = 0; c < cols; ++c) mean += in[c] / double(cols);
    for (int64_t c = 0; c < cols; ++c) var += (in[c] - mean) * (in[c] - mean) / double(cols);
    for (int64_t c = 0; c < cols; ++c) {
      double want = (in[c] - mean) / std::sqrt(var + eps) * (scale ? scale->get_double(c) : 1.0) +
                    (bias ? bias->get_double(c) : 0.0);
      EXPECT_NEAR(y.data<float>()[r * cols + c], want, 1e-5 * (1 + std::abs(want)));
    }
  }
}

TEST(GafOps, LayerNormalizationOverTrailingAxes) {
  Tensor scale = iota(12, 0.5f).reshaped({3, 4}), bias = iota(12, -0.25f).reshaped({3, 4});
  OneOp o("LayerNormalization", {2, 3, 4}, {scale, bias});
  o.node->attrs = {{"axis", int64_t(1)}, {"epsilon", 1e-3f}};
  auto [x, y] = o.run();
  expect_normalized(x, y, 12, true, 1e-3f, &scale, &bias);
}

TEST(GafOps, RMSNormalizationWithAndWithoutScale) {
  Tensor scale = iota(5, 0.5f);
  OneOp with("RMSNormalization", {4, 5}, {scale});
  with.node->attrs = {{"epsilon", 1e-6f}};
  auto [x, y] = with.run();
  expect_normalized(x, y, 5, false, 1e-6f, &scale, nullptr);

  OneOp without("RMSNormalization", {4, 5});
  auto [x2, y2] = without.run();
  expect_normalized(x2, y2, 5, false, 1e-5f, nullptr, nullptr);
}

TEST(GafOps, WrongScaleSizeIsAnError) {
  OneOp o("LayerNormalization", {2, 3, 4}, {iota(3, 1.0f)});
  EXPECT_THROW(o.run(), Error);
}

}  // namespace
}  // namespace gaf
