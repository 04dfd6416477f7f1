#include "pass_test_util.h"

namespace gaf {
namespace {

using testing::expect_same_outputs;
using testing::header;
using testing::rewrite;

const char* kPass = "layer-norm-recognition";

// LayerNorm over the last axis of x[2,5,8] as PyTorch exports it at opset 13. `square`, `normalize` and
// `affine` are the lines that vary between the tests.
std::string layer_norm(const std::string& square, const std::string& normalize, const std::string& affine,
                       int opset = 13, const std::string& axes = "[-1]") {
  return header(opset) + "g (float[2,5,8] x) => (float[2,5,8] y) {" +  //
         " m = ReduceMean <axes = " + axes + "> (x) d = Sub(x, m)" + square +
         " v = ReduceMean <axes = " + axes + "> (sq)" +
         " eps = Constant <value = float {1e-5}> () ve = Add(v, eps) s = Sqrt(ve)" + normalize + affine + "}";
}

const char* kPow = " two = Constant <value = float {2}> () sq = Pow(d, two)";
const char* kDiv = " n = Div(d, s)";
const char* kAffine = R"( gamma = Constant <value = float[8] {1, 2, 3, 4, 5, 6, 7, 8}> () g1 = Mul(n, gamma)
    beta = Constant <value = float[8] {0, 1, 0, 1, 0, 1, 0, 1}> () y = Add(g1, beta))";

TEST(LayerNormRecognition, PyTorchOpset13FormBecomesGafLayerNormalization) {
  auto r = rewrite(layer_norm(kPow, kDiv, kAffine), make_layer_norm_recognition());
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"gaf.LayerNormalization", 1}})) << r.dump();
  EXPECT_EQ(r.count(kPass), 1);
  const Node* ln = r.after.graph->nodes()[0];
  EXPECT_EQ(ln->attr_int("axis", 0), 2);
  EXPECT_FLOAT_EQ(ln->attr_float("epsilon", 0), 1e-5f);
  EXPECT_EQ(ln->num_inputs(), 3);
  expect_same_outputs(r.before, r.after, 1e-4, 1e-5);
}

TEST(LayerNormRecognition, Opset17GivesTheStandardOp) {
  auto r = rewrite(layer_norm(kPow, kDiv, kAffine, 17), make_layer_norm_recognition());
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"LayerNormalization", 1}})) << r.dump();
  expect_same_outputs(r.before, r.after, 1e-4, 1e-5);
}

TEST(LayerNormRecognition, MulSquareReciprocalAndNoAffine) {
  auto r = rewrite(layer_norm(" sq = Mul(d, d)", " rs = Reciprocal(s) y = Mul(rs, d)", ""),
                   make_layer_norm_recognition());
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"gaf.LayerNormalization", 1}})) << r.dump();
  EXPECT_EQ(r.after.graph->nodes()[0]->num_inputs(), 2);  // ones for the scale, no bias
  expect_same_outputs(r.before, r.after, 1e-4, 1e-5);
}

// The tail is shared with RMSNorm: torch.rsqrt's Div(1, Sqrt(.)) form normalises a LayerNorm too.
TEST(LayerNormRecognition, RsqrtForm) {
  auto r = rewrite(layer_norm(kPow, " one = Constant <value = float {1}> () rs = Div(one, s) n = Mul(d, rs)", kAffine),
                   make_layer_norm_recognition());
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"gaf.LayerNormalization", 1}})) << r.dump();
  expect_same_outputs(r.before, r.after, 1e-4, 1e-5);
}

TEST(LayerNormRecognition, GammaOnlyAndBroadcastShapedGamma) {
  auto r =
      rewrite(layer_norm(kPow, kDiv, R"( gamma = Constant <value = float[1,1,8] {1, 2, 3, 4, 5, 6, 7, 8}> ()
      y = Mul(gamma, n))"),
              make_layer_norm_recognition());
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"gaf.LayerNormalization", 1}})) << r.dump();
  expect_same_outputs(r.before, r.after, 1e-4, 1e-5);
}

TEST(LayerNormRecognition, OverTwoTrailingAxes) {
  auto r = rewrite(layer_norm(kPow, kDiv, " y = Identity(n)", 13, "[1, 2]"), make_layer_norm_recognition());
  EXPECT_EQ(r.ops()["gaf.LayerNormalization"], 1) << r.dump();
  EXPECT_EQ(r.after.graph->nodes()[0]->attr_int("axis", 0), 1);
  expect_same_outputs(r.before, r.after, 1e-4, 1e-5);
}

TEST(LayerNormRecognition, DoesNotFire) {
  const std::string cases[] = {
      // not the trailing axes
      layer_norm(kPow, kDiv, kAffine, 13, "[1]"),
      // cube, not square
      layer_norm(" three = Constant <value = float {3}> () sq = Pow(d, three)", kDiv, kAffine),
      // the centred value is read outside the pattern
      layer_norm(kPow, kDiv, " y = Add(n, d)"),
      // gamma varies across rows, not features
      layer_norm(kPow, kDiv,
                 R"( gamma = Constant <value = float[5,1] {1, 2, 3, 4, 5}> () y = Mul(n, gamma))"),
      // divides something else by the deviation
      layer_norm(kPow, " n = Div(x, s)", " y = Identity(n)"),
  };
  for (const auto& c : cases) {
    auto r = rewrite(c, make_layer_norm_recognition());
    EXPECT_EQ(r.count(kPass), 0) << r.dump();
  }
  // Mean and variance over different axes.
  std::string mixed = layer_norm(kPow, kDiv, kAffine);
  mixed.replace(mixed.find("[-1]"), 4, "[2]");  // the mean over axis 2 == -1: still a LayerNorm
  EXPECT_EQ(rewrite(mixed, make_layer_norm_recognition()).count(kPass), 1);
  mixed = layer_norm(kPow, kDiv, kAffine, 13, "[1, 2]");
  mixed.replace(mixed.find("[1, 2]"), 6, "[2]");
  EXPECT_EQ(rewrite(mixed, make_layer_norm_recognition()).count(kPass), 0);
}

}  // namespace
}  // namespace gaf
