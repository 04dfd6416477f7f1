#include "pass_test_util.h"

namespace gaf {
namespace {

using testing::expect_same_outputs;
using testing::header;
using testing::rewrite;

const char* kPass = "layout-nhwc";

testing::Rewritten layout(const std::string& text) {
  std::vector<std::unique_ptr<Pass>> passes;
  passes.push_back(make_layout_nhwc());
  passes.push_back(make_transpose_fold());
  return rewrite(testing::parse(text), std::move(passes));
}

Model decomposed(const Model& m) {
  Model c = tools::copy_model(m);
  decompose_gaf_ops(*c.graph, 17);
  return c;
}

// A residual block: conv -> relu -> conv -> + x -> relu -> max pool, with 3x3 and 1x1 (strided) convolutions.
std::string block() {
  std::string w1, w2;
  for (int i = 0; i < 8 * 8 * 9; ++i) w1 += (i ? "," : "") + std::to_string(((i * 37) % 19 - 9) / 40.0);
  for (int i = 0; i < 8 * 8; ++i) w2 += (i ? "," : "") + std::to_string(((i * 11) % 13 - 6) / 20.0);
  return header() + "g (float[1,8,12,12] x) => (float[1,8,6,6] y) {\n" +
         "w1 = Constant <value = float[8,8,3,3] {" + w1 + "}> ()\n" +
         "w2 = Constant <value = float[8,8,1,1] {" + w2 + "}> ()\n" + R"(
    c1 = Conv <pads = [1, 1, 1, 1]> (x, w1)  r1 = Relu(c1)
    c2 = Conv(r1, w2)  s = Add(c2, x)  r2 = Relu(s)
    y = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (r2) })";
}

TEST(LayoutNhwc, ResidualBlockRunsChannelsLastBetweenTwoTransposes) {
  auto r = layout(block());
  EXPECT_EQ(r.count(kPass), 3);  // two convolutions and the pool
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{
                         {"gaf.Conv", 2}, {"gaf.MaxPool", 1}, {"Relu", 2}, {"Add", 1}, {"Transpose", 2}}))
      << r.dump();
  for (const Node* n : r.after.graph->nodes())
    if (n->domain == "gaf") {
      EXPECT_EQ(n->attr_string("layout", ""), "NHWC");
    }
  expect_same_outputs(r.before, r.after, 1e-4, 1e-5);
  expect_same_outputs(r.before, decomposed(r.after), 1e-4, 1e-5);  // what other runtimes get
}

TEST(LayoutNhwc, FusedWithEpiloguesAtOptLevelThree) {
  Model m = testing::parse(block());
  tools::FuseOptions opts;
  opts.fusion.opt_level = 3;
  Model f = testing::fused_copy(m, opts);
  runtime::Session s(*f.graph);
  for (const auto& [node, why] : s.codegen_fallbacks()) ADD_FAILURE() << node << " runs op by op: " << why;
  expect_same_outputs(m, f, 1e-4, 1e-5);
}

// A squeeze-excitation block: conv -> (global average pool -> 1x1 convs -> sigmoid) scales the conv's
// channels.
std::string squeeze_excitation(const std::string& pool = "GlobalAveragePool") {
  std::string w1, w2, w3;
  for (int i = 0; i < 8 * 8 * 9; ++i) w1 += (i ? "," : "") + std::to_string(((i * 37) % 19 - 9) / 40.0);
  for (int i = 0; i < 4 * 8; ++i) w2 += (i ? "," : "") + std::to_string(((i * 11) % 13 - 6) / 20.0);
  for (int i = 0; i < 8 * 4; ++i) w3 += (i ? "," : "") + std::to_string(((i * 7) % 11 - 5) / 20.0);
  return header() + "g (float[1,8,12,12] x) => (float[1,8,12,12] y) {\n" +
         "w1 = Constant <value = float[8,8,3,3] {" + w1 + "}> ()\n" +
         "w2 = Constant <value = float[4,8,1,1] {" + w2 + "}> ()\n" +
         "w3 = Constant <value = float[8,4,1,1] {" + w3 + "}> ()\n" +
         "c1 = Conv <pads = [1, 1, 1, 1]> (x, w1)  h = Relu(c1)  p = " + pool + R"((h)
    s1 = Conv(p, w2)  r = Relu(s1)  s2 = Conv(r, w3)  g = Sigmoid(s2)  y = Mul(h, g) })";
}

TEST(LayoutNhwc, GlobalPoolsOfSqueezeExcitationRunChannelsLast) {
  for (const char* pool : {"GlobalAveragePool", "GlobalMaxPool"}) {
    auto r = layout(squeeze_excitation(pool));
    EXPECT_EQ(r.count(kPass), 4) << pool;  // three convolutions and the pool
    auto ops = r.ops();
    EXPECT_EQ(ops[pool], 0) << r.dump();
    EXPECT_EQ(ops[std::string(pool) == "GlobalAveragePool" ? "ReduceMean" : "ReduceMax"], 1) << r.dump();
    EXPECT_EQ(ops["Transpose"], 2) << r.dump();  // the block's entry and exit only
    expect_same_outputs(r.before, r.after, 1e-4, 1e-5);
    expect_same_outputs(r.before, decomposed(r.after), 1e-4, 1e-5);
  }
}

// Exports with a dynamic batch: the convolutions still go channels-last (the kernels plan per input shape).
TEST(LayoutNhwc, SymbolicBatch) {
  std::string text = block();
  text.replace(text.find("float[1,8,12,12] x"), 18, "float[N,8,12,12] x");
  text.replace(text.find("float[1,8,6,6] y"), 16, "float[N,8,6,6] y");
  auto r = layout(text);
  EXPECT_EQ(r.count(kPass), 3) << r.dump();
  EXPECT_EQ(r.ops()["Transpose"], 2) << r.dump();
  for (int64_t batch : {1, 3}) {
    runtime::Session a(*r.before.graph), b(*r.after.graph);
    auto inputs = tools::random_inputs(*r.before.graph, 5, batch);
    auto want = a.run(inputs), got = b.run(inputs);
    ASSERT_EQ(got[0].dims(), (std::vector<int64_t>{batch, 8, 6, 6}));
    auto c = tools::compare(got[0], want[0], 1e-4, 1e-5);
    EXPECT_TRUE(c.ok) << "batch " << batch << ": " << c.message;
  }
}

// Channels-last max pools run max_pool_nhwc: against the NCHW pool on windows with padding, a ceil_mode overhang,
// dilations, asymmetric pads and stride 1, on channel counts with and without a partial vector. Exact: a maximum
// is one of its inputs.
TEST(LayoutNhwc, MaxPoolWindows) {
  for (int c : {3, 20, 37, 77, 130}) {  // 77, 130: whole blocks of four vectors and a rest
    SCOPED_TRACE(c);
    const std::string cs = std::to_string(c);
    auto r = layout(header() + "g (float[2," + cs + ",13,11] x) => (float[2," + cs + ",7,6] a, float[2," + cs +
                    ",7,6] b, float[2," + cs + ",6,5] d, float[2," + cs + ",13,10] e) {" + R"(
        a = MaxPool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]> (x)
        b = MaxPool <kernel_shape = [2, 2], strides = [2, 2], ceil_mode = 1> (x)
        d = MaxPool <kernel_shape = [2, 2], strides = [2, 2], dilations = [2, 2]> (x)
        e = MaxPool <kernel_shape = [2, 3], pads = [1, 0, 0, 1]> (x) })");
    EXPECT_EQ(r.count(kPass), 4) << r.dump();
    expect_same_outputs(r.before, r.after, 0, 0);
  }
}

TEST(LayoutNhwc, DoesNotFire) {
  const std::string cases[] = {
      // weights fed at run time
      header() + R"(g (float[1,2,5,5] x, float[3,2,3,3] w) => (float[1,3,3,3] y) { y = Conv(x, w) })",
      // one spatial dim
      header() +
          R"(g (float[1,2,5] x) => (float[1,2,3] y) { w = Constant <value = float[2,2,3] {1,2,3,4,5,6,7,8,9,1,2,3}> ()
          y = Conv(x, w) })",
      // a global pool over one spatial dim
      header() + R"(g (float[1,2,5] x) => (float[1,2,1] y) { y = GlobalAveragePool(x) })",
      // max pool indices are NCHW positions
      header() + R"(g (float[1,2,4,4] x) => (float[1,2,2,2] y, int64[1,2,2,2] i) {
          y, i = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (x) })",
  };
  for (const auto& c : cases) {
    auto r = layout(c);
    EXPECT_EQ(r.count(kPass), 0) << r.dump();
  }
}

}  // namespace
}  // namespace gaf
