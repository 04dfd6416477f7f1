// verify on a mismatch: it says, for each fused group it could not run alone, why; it proposes a rules file
// only after checking that fusing with it makes the outputs match; float16/bfloat16 outputs get a tolerance
// of their type, stated.
#include <gtest/gtest.h>

#include "test_util.h"

namespace gaf {
namespace {

std::string conv_weights() {
  std::string w;
  for (int i = 0; i < 4 * 2 * 3 * 3; ++i) w += (i ? ", " : "") + std::to_string(((i * 37) % 17 - 8) / 8.0);
  return w;
}

// Sqrt of the negative inputs gives NaN; a fused Conv + Relu (oneDNN's relu, as ONNX Runtime's fused Conv)
// makes it 0, the unfused Relu keeps it.
Model nan_through_conv_relu() {
  return testing::parse(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,2,6,6] x) => (float[1,4,6,6] y) <float[4,2,3,3] w = {)" +
                        conv_weights() + R"(}> {
  s = Sqrt(x)
  c = Conv<pads = [1, 1, 1, 1]>(s, w)
  y = Relu(c)
})");
}

TEST(Verify, SaysWhyAGroupWasNotBisectedAndProposesACheckedRule) {
  Model m = nan_through_conv_relu();
  tools::FuseOptions opts;
  opts.fusion.opt_level = 2;
  tools::VerifyResult v = tools::verify_fusion(m, opts, {}, 1e-3, 1e-5);
  const std::string text = v.text();
  ASSERT_FALSE(v.ok) << text;
  // The channels-last layout renamed the group's values: each group not run alone is listed with why.
  ASSERT_FALSE(v.unchecked.empty()) << text;
  for (const std::string& u : v.unchecked)
    EXPECT_TRUE(u.find("exist only in the fused graph") != std::string::npos) << u;
  EXPECT_EQ(v.rule, R"({"rules": [{"pattern": "Conv -> Relu", "action": "forbid", "reason": "verify"}]})")
      << text;
  EXPECT_NE(text.find("a rules file that avoids it (checked: it never fuses Conv -> Relu"), std::string::npos)
      << text;
  // The rule as a user would pass it: then the outputs match.
  opts.fusion.rules = FusionRules::parse(v.rule);
  tools::VerifyResult with_rule = tools::verify_fusion(m, opts, {}, 1e-3, 1e-5);
  EXPECT_TRUE(with_rule.ok) << with_rule.text();
  EXPECT_TRUE(with_rule.rule.empty());
}

TEST(Verify, DoesNotFireWhenOutputsMatch) {
  Model m = nan_through_conv_relu();
  tools::FuseOptions opts;
  opts.fusion.opt_level = 2;
  std::vector<Tensor> positive = tools::random_inputs(*m.graph, 3);
  for (int64_t i = 0; i < positive[0].numel(); ++i) positive[0].data<float>()[i] = 0.25f + float(i % 7);
  tools::VerifyResult v = tools::verify_fusion(m, opts, positive, 1e-3, 1e-5);
  EXPECT_TRUE(v.ok) << v.text();
  EXPECT_TRUE(v.unchecked.empty() && v.culprits.empty() && v.rule.empty()) << v.text();
}

TEST(Verify, Bfloat16OutputsAreComparedAtTheirTypesPrecision) {
  Model m = testing::parse(R"(<ir_version: 8, opset_import: ["" : 17]>
g (bfloat16[64,64] x) => (bfloat16[64,64] y) {
  a = Mul(x, x)
  b = Add(a, x)
  c = Tanh(b)
  d = Mul(c, x)
  e = Sub(d, a)
  y = Add(e, c)
})");
  tools::FuseOptions opts;
  opts.fusion.opt_level = 2;
  tools::VerifyResult v = tools::verify_fusion(m, opts, {}, 1e-3, 1e-5);
  EXPECT_TRUE(v.ok) << v.text();
  EXPECT_NE(v.tolerance.find("bfloat16 2^-5"), std::string::npos) << v.tolerance;
  // The rounding between the unfused ops is real: at fp32's tolerance the fused output differs.
  Model f = testing::fused_copy(m, opts);
  const std::vector<Tensor> in = tools::random_inputs(*m.graph, 0);
  runtime::Session su(*m.graph), sf(*f.graph);
  EXPECT_FALSE(tools::compare(sf.run(in)[0], su.run(in)[0], 1e-3, 1e-5).ok);
}

}  // namespace
}  // namespace gaf
