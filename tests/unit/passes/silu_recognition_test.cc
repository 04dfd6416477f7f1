#include "pass_test_util.h"

namespace gaf {
namespace {

using testing::expect_same_outputs;
using testing::header;
using testing::rewrite;

const char* kPass = "silu-recognition";

TEST(SiluRecognition, XTimesSigmoidXInBothOrders) {
  for (const char* body : {"s = Sigmoid(x) y = Mul(x, s)", "s = Sigmoid(x) y = Mul(s, x)"}) {
    auto r = rewrite(header(13) + "g (float[4,64] x, float[4,64] z) => (float[4,64] y) {" + body + "}",
                     make_silu_recognition());
    EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"gaf.Silu", 1}})) << r.dump();
    EXPECT_EQ(r.count(kPass), 1);
    expect_same_outputs(r.before, r.after, 1e-5, 1e-6);
  }
}

TEST(SiluRecognition, DoesNotFire) {
  const char* bodies[] = {
      "s = Sigmoid(x) y = Mul(z, s)",                // gates another tensor (GLU-like)
      "s = Sigmoid(x) m = Mul(x, s) y = Add(m, s)",  // the sigmoid is read elsewhere
      "s = Sigmoid(x) y = Add(x, s)",                // not a product
  };
  for (const char* body : bodies) {
    auto r = rewrite(header(13) + "g (float[4,64] x, float[4,64] z) => (float[4,64] y) {" + body + "}",
                     make_silu_recognition());
    EXPECT_EQ(r.count(kPass), 0) << body << "\n" << r.dump();
  }
  auto f64 = rewrite(header(13) + "g (double[4,8] x) => (double[4,8] y) { s = Sigmoid(x) y = Mul(x, s) }",
                     make_silu_recognition());
  EXPECT_EQ(f64.count(kPass), 0);  // fp32 only
}

}  // namespace
}  // namespace gaf
