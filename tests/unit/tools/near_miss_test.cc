// Recognition passes say why a pattern they began to match was not rewritten: the anchor node and the failed
// check reach FuseResult::near_misses, the report and `explain`; a pattern that is rewritten leaves none.
#include "passes/pass_test_util.h"

namespace gaf {
namespace {

std::vector<NearMiss> misses(const std::string& text, const std::string& pass) {
  Model m = testing::parse(text);
  tools::FuseOptions opts;
  opts.fusion.opt_level = 2;
  tools::FuseResult r = tools::fuse_model(m, opts);
  std::vector<NearMiss> out;
  for (const NearMiss& n : r.near_misses)
    if (n.pass == pass) out.push_back(n);
  EXPECT_EQ(tools::explain(r).find("near miss") != std::string::npos, !out.empty()) << tools::explain(r);
  return out;
}

// Attention over [1, 2, 8, 16] heads with the scores masked by `mask` (defining `m` from `s`).
std::string attention(const std::string& mask) {
  return testing::header(14) + R"(g (float[1,2,8,16] q, float[1,2,8,16] k, float[1,2,8,16] v, bool[1,1,8,8] b)
      => (float[1,2,8,16] y) {
    kt = Transpose <perm = [0, 1, 3, 2]> (k)  qk = MatMul(q, kt)  c = Constant <value = float {0.25}> ()
    s = Mul(qk, c)  )" +
         mask + R"(  p = Softmax <axis = -1> (m)  y = MatMul(p, v) })";
}

TEST(NearMiss, AttentionWithAMaskFillItCannotFoldSaysSo) {
  auto got =
      misses(attention("f = Constant <value = float {-1000.0}> ()  m = Where(b, f, s)"), "attention-fusion");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_NE(got[0].anchor.find("Softmax"), std::string::npos) << got[0].anchor;
  EXPECT_NE(got[0].check.find("fills -1000"), std::string::npos) << got[0].check;
  // Twin: -inf (Log(0)) fuses, and leaves no near miss.
  EXPECT_TRUE(misses(attention("z = Constant <value = float {0.0}> ()  f = Log(z)  m = Where(b, f, s)"),
                     "attention-fusion")
                  .empty());
}

TEST(NearMiss, AttentionWhoseScoresAreReadElsewhereNamesThem) {
  Model m =
      testing::parse(testing::header(14) + R"(g (float[1,2,8,16] q, float[1,2,8,16] k, float[1,2,8,16] v)
      => (float[1,2,8,16] y, float[1,2,8,8] qk) {
    kt = Transpose <perm = [0, 1, 3, 2]> (k)  qk = MatMul(q, kt)  c = Constant <value = float {0.25}> ()
    s = Mul(qk, c)  p = Softmax <axis = -1> (s)  y = MatMul(p, v) })");
  tools::FuseOptions opts;
  tools::FuseResult r = tools::fuse_model(m, opts);
  ASSERT_EQ(r.near_misses.size(), 1u) << tools::explain(r);
  EXPECT_NE(r.near_misses[0].check.find("'qk'"), std::string::npos) << r.near_misses[0].check;
  EXPECT_NE(r.report_json("m", opts.target, 2).find("near_misses"), std::string::npos);
}

TEST(NearMiss, RmsNormWithAnUnrecognisedTailNamesTheNode) {
  auto text = [](const std::string& tail) {
    return testing::header(14) + R"(g (float[2,8] x) => (float[2,8] y) {
      two = Constant <value = float {2.0}> ()  eps = Constant <value = float {1e-6}> ()
      sq = Pow(x, two)  v = ReduceMean <axes = [-1]> (sq)  ve = Add(v, eps)  )" +
           tail + " }";
  };
  auto got = misses(text("r = Sqrt(ve)  l = Log(r)  y = Mul(x, l)"), "rms-norm-recognition");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_NE(got[0].check.find("Log"), std::string::npos) << got[0].check;
  EXPECT_TRUE(misses(text("r = Sqrt(ve)  y = Div(x, r)"), "rms-norm-recognition").empty());
}

}  // namespace
}  // namespace gaf
