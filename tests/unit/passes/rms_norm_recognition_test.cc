#include "pass_test_util.h"

namespace gaf {
namespace {

using testing::expect_same_outputs;
using testing::header;
using testing::rewrite;

const char* kPass = "rms-norm-recognition";

std::string rms_norm(const std::string& square, const std::string& tail, const std::string& eps = "float {1e-6}",
                     const std::string& root = " s = Sqrt(ve)") {
  return header(13) + "g (float[2,5,8] x) => (float[2,5,8] y) {" + square +
         " v = ReduceMean <axes = [-1]> (sq)" + " eps = Constant <value = " + eps + "> () ve = Add(eps, v)" + root +
         tail + "}";
}

const char* kPow = " two = Constant <value = float {2}> () sq = Pow(x, two)";
const char* kLlama = R"( r = Reciprocal(s) n = Mul(x, r)
    gamma = Constant <value = float[8] {1, 2, 3, 4, 5, 6, 7, 8}> () y = Mul(n, gamma))";

TEST(RmsNormRecognition, LlamaFormBecomesGafRMSNormalization) {
  auto r = rewrite(rms_norm(kPow, kLlama), make_rms_norm_recognition());
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"gaf.RMSNormalization", 1}})) << r.dump();
  EXPECT_EQ(r.count(kPass), 1);
  const Node* n = r.after.graph->nodes()[0];
  EXPECT_EQ(n->num_inputs(), 2);
  EXPECT_FLOAT_EQ(n->attr_float("epsilon", 0), 1e-6f);
  expect_same_outputs(r.before, r.after, 1e-4, 1e-5);
}

TEST(RmsNormRecognition, DivFormWithoutScale) {
  auto r = rewrite(rms_norm(" sq = Mul(x, x)", " y = Div(x, s)"), make_rms_norm_recognition());
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"gaf.RMSNormalization", 1}})) << r.dump();
  EXPECT_EQ(r.after.graph->nodes()[0]->num_inputs(), 1);
  expect_same_outputs(r.before, r.after, 1e-4, 1e-5);
}

// torch.rsqrt exports as Div(1, Sqrt(.)); x.pow(-0.5) as Pow(., -0.5): the forms LLaMA-style exports carry.
TEST(RmsNormRecognition, RsqrtAndPowForms) {
  const char* kGamma = R"( gamma = Constant <value = float[8] {1, 2, 3, 4, 5, 6, 7, 8}> () y = Mul(gamma, n))";
  const std::string cases[] = {
      rms_norm(kPow, std::string(" one = Constant <value = float {1}> () r = Div(one, s) n = Mul(x, r)") + kGamma),
      rms_norm(kPow, std::string(" n = Mul(r, x)") + kGamma, "float {1e-5}",
               " half = Constant <value = float {-0.5}> () r = Pow(ve, half)"),
      rms_norm(" sq = Mul(x, x)", " y = Mul(x, r)", "float {1e-6}",
               " half = Constant <value = float[1] {-0.5}> () r = Pow(ve, half)"),
  };
  for (const auto& c : cases) {
    auto r = rewrite(c, make_rms_norm_recognition());
    EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"gaf.RMSNormalization", 1}})) << r.dump();
    expect_same_outputs(r.before, r.after, 1e-4, 1e-5);
  }
}

TEST(RmsNormRecognition, DoesNotFire) {
  const std::string cases[] = {
      // cube, not square
      rms_norm(" three = Constant <value = float {3}> () sq = Pow(x, three)", " y = Div(x, s)"),
      // the squares are read elsewhere
      rms_norm(kPow, " n = Div(x, s) y = Add(n, sq)"),
      // normalises another tensor than the one squared
      rms_norm(kPow, " ax = Abs(x) y = Div(ax, s)"),
      // eps is not a single value
      rms_norm(kPow, kLlama, "float[8] {1, 1, 1, 1, 1, 1, 1, 1}"),
      // 2 / sqrt(v + eps): not a reciprocal
      rms_norm(kPow, " two2 = Constant <value = float {2}> () r = Div(two2, s) y = Mul(x, r)"),
      // sqrt(v + eps) / 1: the reciprocal's operands swapped
      rms_norm(kPow, " one = Constant <value = float {1}> () r = Div(s, one) y = Mul(x, r)"),
      // (v + eps) ^ -0.25: not a square root
      rms_norm(kPow, " y = Mul(x, r)", "float {1e-6}", " q = Constant <value = float {-0.25}> () r = Pow(ve, q)"),
      // (v + eps) ^ -0.5 multiplied into another tensor than the one squared
      rms_norm(kPow, " ax = Abs(x) y = Mul(ax, r)", "float {1e-6}",
               " half = Constant <value = float {-0.5}> () r = Pow(ve, half)"),
  };
  for (const auto& c : cases) {
    auto r = rewrite(c, make_rms_norm_recognition());
    EXPECT_EQ(r.count(kPass), 0) << r.dump();
  }
}

}  // namespace
}  // namespace gaf
