#include "pass_test_util.h"

namespace gaf {
namespace {

using testing::expect_same_outputs;
using testing::header;
using testing::rewrite;

const char* kPass = "softmax-recognition";

// Softmax over axis `max_axis` (ReduceMax) and `sum_axis` (ReduceSum, axes as an input from opset 13).
std::string softmax(int max_axis, int sum_axis, const std::string& tail = "y = Div(e, s)", int opset = 13) {
  std::string sum = opset >= 13 ? "ax = Constant <value = int64[1] {" + std::to_string(sum_axis) +
                                      "}> () s = ReduceSum(e, ax)"
                                : "s = ReduceSum <axes = [" + std::to_string(sum_axis) + "]> (e)";
  return header(opset) + "g (float[2,6,16] x) => (float[2,6,16] y) {" + "  m = ReduceMax <axes = [" +
         std::to_string(max_axis) + "]> (x)  d = Sub(x, m)  e = Exp(d) " + sum + " " + tail + "}";
}

TEST(SoftmaxRecognition, MaxSubtractedFormBecomesSoftmax) {
  for (int axis : {-1, 1}) {
    auto r = rewrite(softmax(axis, axis), make_softmax_recognition());
    EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Softmax", 1}})) << r.dump();
    EXPECT_EQ(r.count(kPass), 1);
    EXPECT_EQ(r.after.graph->nodes()[0]->attr_int("axis", 0), axis == -1 ? 2 : 1);
    expect_same_outputs(r.before, r.after, 1e-5, 1e-6);
  }
  auto old = rewrite(softmax(2, 2, "y = Div(e, s)", 11), make_softmax_recognition());
  EXPECT_EQ(old.count(kPass), 1) << old.dump();
  expect_same_outputs(old.before, old.after, 1e-5, 1e-6);
}

TEST(SoftmaxRecognition, DoesNotFire) {
  const std::string cases[] = {
      softmax(1, 2),                                 // max and sum over different axes
      softmax(2, 2, "q = Div(e, s) y = Add(q, e)"),  // e read elsewhere
      softmax(2, 2, "y = Div(s, e)"),                // upside down
      softmax(1, 1, "y = Div(e, s)", 11),            // before opset 13 Softmax flattens from its axis
  };
  for (const auto& c : cases) {
    auto r = rewrite(c, make_softmax_recognition());
    EXPECT_EQ(r.count(kPass), 0) << r.dump();
  }
  // Without the max subtraction: not rewritten (Softmax would not overflow where this does).
  auto plain = rewrite(header(13) + R"(g (float[2,16] x) => (float[2,16] y) {
      e = Exp(x) ax = Constant <value = int64[1] {1}> () s = ReduceSum(e, ax) y = Div(e, s) })",
                       make_softmax_recognition());
  EXPECT_EQ(plain.count(kPass), 0);
}

}  // namespace
}  // namespace gaf
