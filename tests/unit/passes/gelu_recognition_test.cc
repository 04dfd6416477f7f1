#include "pass_test_util.h"

namespace gaf {
namespace {

using testing::expect_same_outputs;
using testing::header;
using testing::rewrite;

const char* kPass = "gelu-recognition";

std::string graph(const std::string& body) {
  return header(13) + "g (float[4,64] x, float[4,64] z) => (float[4,64] y) {" + R"(
      sqrt2 = Constant <value = float {1.4142135}> () rsqrt2 = Constant <value = float {0.70710678}> ()
      one = Constant <value = float {1}> () half = Constant <value = float {0.5}> ()
      k = Constant <value = float {0.7978845608}> () c = Constant <value = float {0.044715}> ()
      three = Constant <value = float {3}> () )" +
         body + "}";
}

TEST(GeluRecognition, ErfFormInEveryAssociation) {
  const char* forms[] = {
      // PyTorch: ((1 + erf(x / sqrt2)) * x) * 0.5
      "q = Div(x, sqrt2) e = Erf(q) a = Add(e, one) m = Mul(x, a) y = Mul(m, half)",
      // (x * 0.5) * (1 + erf(x * 1/sqrt2))
      "h = Mul(half, x) q = Mul(x, rsqrt2) e = Erf(q) a = Add(one, e) y = Mul(h, a)",
      // ((1 + erf) * 0.5) * x
      "q = Div(x, sqrt2) e = Erf(q) a = Add(e, one) m = Mul(a, half) y = Mul(x, m)",
  };
  for (const char* f : forms) {
    auto r = rewrite(graph(f), make_gelu_recognition());
    EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"gaf.Gelu", 1}})) << f << "\n" << r.dump();
    EXPECT_EQ(r.count(kPass), 1);
    EXPECT_FALSE(r.after.graph->nodes()[0]->has_attr("approximate"));
    expect_same_outputs(r.before, r.after, 1e-5, 1e-6);
  }
}

TEST(GeluRecognition, TanhForm) {
  const char* forms[] = {
      "p = Pow(x, three) t = Mul(c, p) s = Add(x, t) u = Mul(s, k) th = Tanh(u) "
      "a = Add(th, one) m = Mul(x, a) y = Mul(m, half)",
      "x2 = Mul(x, x) p = Mul(x2, x) t = Mul(p, c) s = Add(t, x) u = Mul(k, s) th = Tanh(u) "
      "a = Add(one, th) h = Mul(x, half) y = Mul(a, h)",
  };
  for (const char* f : forms) {
    auto r = rewrite(graph(f), make_gelu_recognition());
    EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"gaf.Gelu", 1}})) << f << "\n" << r.dump();
    EXPECT_EQ(r.after.graph->nodes()[0]->attr_string("approximate", ""), "tanh");
    expect_same_outputs(r.before, r.after, 1e-5, 1e-6);
  }
}

TEST(GeluRecognition, DoesNotFire) {
  const char* forms[] = {
      // divides by 1.5, not sqrt 2
      "d = Constant <value = float {1.5}> () q = Div(x, d) e = Erf(q) "
      "a = Add(e, one) m = Mul(x, a) y = Mul(m, half)",
      // adds 0.5, not 1
      "q = Div(x, sqrt2) e = Erf(q) a = Add(e, half) m = Mul(x, a) y = Mul(m, half)",
      // multiplies another tensor than the erf's argument
      "q = Div(x, sqrt2) e = Erf(q) a = Add(e, one) m = Mul(z, a) y = Mul(m, half)",
      // the erf is read elsewhere
      "q = Div(x, sqrt2) e = Erf(q) a = Add(e, one) m = Mul(x, a) h = Mul(m, half) y = Add(h, e)",
      // tanh form with the wrong cubic coefficient
      "p = Pow(x, three) t = Mul(half, p) s = Add(x, t) u = Mul(s, k) th = Tanh(u) "
      "a = Add(th, one) m = Mul(x, a) y = Mul(m, half)",
  };
  for (const char* f : forms) {
    auto r = rewrite(graph(f), make_gelu_recognition());
    EXPECT_EQ(r.count(kPass), 0) << f << "\n" << r.dump();
  }
}

}  // namespace
}  // namespace gaf
