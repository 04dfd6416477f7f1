#include "pass_test_util.h"

namespace gaf {
namespace {

using testing::expect_same_outputs;
using testing::header;
using testing::rewrite;

const char* kPass = "hard-swish-recognition";

std::string graph(const std::string& body, int opset = 13) {
  return header(opset) + "g (float[4,64] x, float[4,64] z) => (float[4,64] y) {" + R"(
      three = Constant <value = float {3}> () zero = Constant <value = float {0}> ()
      six = Constant <value = float {6}> () sixth = Constant <value = float {0.16666667}> ()
      five = Constant <value = float {5}> () )" +
         body + "}";
}

TEST(HardSwishRecognition, HardSigmoidForm) {
  auto r = rewrite(graph("h = HardSigmoid <alpha = 0.16666667, beta = 0.5> (x) y = Mul(x, h)"),
                   make_hard_swish_recognition());
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"gaf.HardSwish", 1}})) << r.dump();
  EXPECT_EQ(r.count(kPass), 1);
  expect_same_outputs(r.before, r.after, 1e-5, 1e-6);

  auto std14 = rewrite(graph("h = HardSigmoid <alpha = 0.16666667, beta = 0.5> (x) y = Mul(h, x)", 14),
                       make_hard_swish_recognition());
  EXPECT_EQ(std14.ops(), (std::map<std::string, int>{{"HardSwish", 1}})) << std14.dump();
  expect_same_outputs(std14.before, std14.after, 1e-5, 1e-6);
}

TEST(HardSwishRecognition, Relu6Forms) {
  const char* forms[] = {
      "a = Add(x, three) c = Clip(a, zero, six) m = Mul(x, c) y = Div(m, six)",
      "a = Add(three, x) c = Clip(a, zero, six) d = Div(c, six) y = Mul(d, x)",
      "a = Add(x, three) c = Clip(a, zero, six) m = Mul(c, x) y = Mul(m, sixth)",
  };
  for (const char* f : forms) {
    auto r = rewrite(graph(f), make_hard_swish_recognition());
    EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"gaf.HardSwish", 1}})) << f << "\n" << r.dump();
    expect_same_outputs(r.before, r.after, 1e-5, 1e-6);
  }
}

TEST(HardSwishRecognition, DoesNotFire) {
  const char* forms[] = {
      // default alpha 0.2
      "h = HardSigmoid(x) y = Mul(x, h)",
      // gates another tensor
      "h = HardSigmoid <alpha = 0.16666667, beta = 0.5> (x) y = Mul(z, h)",
      // Relu5
      "a = Add(x, three) c = Clip(a, zero, five) m = Mul(x, c) y = Div(m, six)",
      // x + 6
      "a = Add(x, six) c = Clip(a, zero, six) m = Mul(x, c) y = Div(m, six)",
      // divided by 3
      "a = Add(x, three) c = Clip(a, zero, six) m = Mul(x, c) y = Div(m, three)",
      // the clipped value is read elsewhere
      "a = Add(x, three) c = Clip(a, zero, six) m = Mul(x, c) d = Div(m, six) y = Add(d, c)",
  };
  for (const char* f : forms) {
    auto r = rewrite(graph(f), make_hard_swish_recognition());
    EXPECT_EQ(r.count(kPass), 0) << f << "\n" << r.dump();
  }
}

}  // namespace
}  // namespace gaf
