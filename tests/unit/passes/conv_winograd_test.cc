#include "pass_test_util.h"

namespace gaf {
namespace {

using testing::expect_same_outputs;
using testing::header;

const char* kPass = "conv-winograd";

testing::Rewritten winograd(const std::string& text, bool enabled = true) {
  std::vector<std::unique_ptr<Pass>> passes;
  passes.push_back(make_layout_nhwc());
  passes.push_back(make_transpose_fold());
  passes.push_back(make_conv_winograd());
  PassContext ctx;
  ctx.conv_winograd = enabled;
  return testing::rewrite(testing::parse(text), std::move(passes), ctx);
}

std::string weights(int64_t n, int salt) { return testing::test_values(n, salt, 60.0); }

// conv(C -> M, kernel k, stride s, group g) on [batch, C, H, H] (H < 0: a symbolic size), bias, then ReLU.
std::string conv(int64_t c, int64_t m, int64_t h, int64_t k = 3, int64_t s = 1, int64_t g = 1,
                 const std::string& batch = "1") {
  const int64_t oh = (h + 2 * (k / 2) - k) / s + 1;
  auto str = [](int64_t v) { return std::to_string(v); };
  std::string wshape = str(m) + "," + str(c / g) + "," + str(k) + "," + str(k);
  const std::string hs = h > 0 ? str(h) : "W", ohs = h > 0 ? str(oh) : "OW";
  return header() + "g (float[" + batch + "," + str(c) + "," + hs + "," + hs + "] x) => (float[" + batch + "," +
         str(m) + "," + ohs + "," + ohs + "] y) {\n" + "w = Constant <value = float[" + wshape + "] {" +
         weights(m * (c / g) * k * k, 1) + "}> ()\n" + "b = Constant <value = float[" + str(m) + "] {" +
         weights(m, 5) + "}> ()\n" + "c = Conv <pads = [" + str(k / 2) + "," + str(k / 2) + "," + str(k / 2) +
         "," + str(k / 2) + "], strides = [" + str(s) + "," + str(s) + "], group = " + str(g) +
         "> (x, w, b)\n y = Relu(c) }";
}

int winograd_convs(const Graph& g) {
  int n = 0;
  for (const Node* node : g.nodes())
    n += node->op_type == "Conv" && node->attr_string("algorithm", "direct") == "winograd";
  return n;
}

TEST(ConvWinograd, MarksThreeByThreeStrideOneConvolutions) {
  auto r = winograd(conv(32, 64, 18));  // 2 * 32 * 64 * 9 * 18 * 18 = 11.9 MFLOP
  EXPECT_EQ(r.count(kPass), 1) << r.dump();
  EXPECT_EQ(winograd_convs(*r.after.graph), 1) << r.dump();
  expect_same_outputs(r.before, r.after, 1e-4, 1e-5);
  Model d = tools::copy_model(r.after);
  decompose_gaf_ops(*d.graph, 17);  // other runtimes get a plain Conv
  EXPECT_EQ(winograd_convs(*d.graph), 0);
  for (const Node* n : d.graph->nodes()) EXPECT_FALSE(n->has_attr("algorithm")) << n->describe();
  expect_same_outputs(r.before, d, 1e-4, 1e-5);
}

// A symbolic batch counts as one image for the work threshold: what pays for one image pays for more.
TEST(ConvWinograd, SymbolicBatch) {
  auto r = winograd(conv(32, 64, 18, 3, 1, 1, "N"));
  EXPECT_EQ(r.count(kPass), 1) << r.dump();
  expect_same_outputs(r.before, r.after, 1e-4, 1e-5);
}

TEST(ConvWinograd, FusedWithEpiloguesAtOptLevelThree) {
  // Two 3x3 convolutions and a residual add: Winograd kernels with ReLU and sum epilogues.
  std::string text = header() + "g (float[1,64,14,14] x) => (float[1,64,14,14] y) {\n" +
                     "w1 = Constant <value = float[64,64,3,3] {" + weights(64 * 64 * 9, 1) + "}> ()\n" +
                     "w2 = Constant <value = float[64,64,3,3] {" + weights(64 * 64 * 9, 7) + "}> ()\n" + R"(
      c1 = Conv <pads = [1, 1, 1, 1]> (x, w1)  r1 = Relu(c1)
      c2 = Conv <pads = [1, 1, 1, 1]> (r1, w2)  s = Add(c2, x)  y = Relu(s) })";
  Model m = testing::parse(text);
  tools::FuseOptions opts;
  opts.fusion.opt_level = 3;
  Model f = testing::fused_copy(m, opts);
  EXPECT_EQ(winograd_convs(*f.graph), 0);  // the convolutions sit inside fused groups
  int in_groups = 0;
  for (const Node* n : f.graph->nodes())
    if (n->body) in_groups += winograd_convs(*n->body);
  EXPECT_EQ(in_groups, 2) << f.graph->to_string();
  expect_same_outputs(m, f, 1e-4, 1e-5);
  opts.fusion.rules.winograd = false;  // the rules switch keeps them direct
  Model direct = testing::fused_copy(m, opts);
  for (const Node* n : direct.graph->nodes()) {
    if (n->body) {
      EXPECT_EQ(winograd_convs(*n->body), 0);
    }
  }
}

TEST(ConvWinograd, DoesNotFire) {
  const std::string cases[] = {
      conv(32, 64, 18, 3, 2),     // strided
      conv(32, 64, 18, 1),        // 1x1
      conv(32, 64, 18, 5),        // 5x5
      conv(32, 64, 18, 3, 1, 2),  // grouped
      conv(16, 64, 40),           // too few input channels (the transforms cost more than they save)
      conv(128, 32, 24),          // too few output channels (DenseNet's growth convolutions)
      conv(32, 64, 12),           // too little work: 5.3 MFLOP
      conv(128, 128, 12),         // 42 MFLOP on 12x12 pixels: the larger transformed weights cost more
      conv(32, 64, -1, 3, 1, 1, "N"),  // a symbolic spatial size: the work is unknown
  };
  for (const auto& c : cases) {
    auto r = winograd(c);
    EXPECT_EQ(r.count(kPass), 0) << r.dump();
  }
  auto off = winograd(conv(32, 64, 18), false);  // target without Winograd convolutions, or the rules say no
  EXPECT_EQ(off.count(kPass), 0) << off.dump();
}

}  // namespace
}  // namespace gaf
