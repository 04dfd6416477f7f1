#include "pass_test_util.h"

namespace gaf {
namespace {

using testing::expect_same_outputs;
using testing::header;

const char* kPass = "expand-depthwise-fusion";

testing::Rewritten fuse(const std::string& text, bool enabled = true, bool everywhere = false) {
  std::vector<std::unique_ptr<Pass>> passes;
  passes.push_back(make_layout_nhwc());
  passes.push_back(make_transpose_fold());
  passes.push_back(make_silu_recognition());
  passes.push_back(make_expand_depthwise_fusion());
  PassContext ctx;
  ctx.conv_expand_depthwise = enabled;
  ctx.conv_expand_depthwise_everywhere = everywhere;
  return testing::rewrite(testing::parse(text), std::move(passes), ctx);
}

std::string values(int64_t n, int salt) { return testing::test_values(n, salt, 40.0); }

struct Block {
  int64_t c = 16, e = 32, h = 10, k = 3, s = 1, dil = 1;
  std::string act1 = "Clip", act2 = "Clip";  // "Clip" (ReLU6), "Relu", "Silu" (x * Sigmoid(x)), "HardSwish",
                                               // "Sigmoid", "" (none)
  bool expansion_is_output = false;            // the expanded activation is also a graph output
};

// x [1, C, H, H] -> 1x1 Conv to E -> act1 -> KxK depthwise Conv (stride s, pads K/2) -> act2 -> y.
std::string block(const Block& b) {
  auto str = [](int64_t v) { return std::to_string(v); };
  const int64_t p = b.k / 2 * b.dil, oh = (b.h + 2 * p - b.dil * (b.k - 1) - 1) / b.s + 1;
  auto act = [&](const std::string& kind, const std::string& in, const std::string& out) {
    if (kind.empty()) return out + " = Identity(" + in + ")\n";
    if (kind == "Relu") return out + " = Relu(" + in + ")\n";
    if (kind == "HardSwish") return out + " = HardSwish(" + in + ")\n";
    if (kind == "Sigmoid") return out + " = Sigmoid(" + in + ")\n";
    if (kind == "Silu") return out + "_s = Sigmoid(" + in + ")\n" + out + " = Mul(" + in + ", " + out + "_s)\n";
    return out + " = Clip(" + in + ", lo, hi)\n";
  };
  std::string outs = "float[1," + str(b.e) + "," + str(oh) + "," + str(oh) + "] y";
  if (b.expansion_is_output) outs += ", float[1," + str(b.e) + "," + str(b.h) + "," + str(b.h) + "] a";
  return header() + "g (float[1," + str(b.c) + "," + str(b.h) + "," + str(b.h) + "] x) => (" + outs + ") {\n" +
         "w1 = Constant <value = float[" + str(b.e) + "," + str(b.c) + ",1,1] {" + values(b.e * b.c, 1) + "}> ()\n" +
         "b1 = Constant <value = float[" + str(b.e) + "] {" + values(b.e, 3) + "}> ()\n" +
         "w2 = Constant <value = float[" + str(b.e) + ",1," + str(b.k) + "," + str(b.k) + "] {" +
         values(b.e * b.k * b.k, 5) + "}> ()\n" + "b2 = Constant <value = float[" + str(b.e) + "] {" +
         values(b.e, 7) + "}> ()\n" + "lo = Constant <value = float {0}> ()\n" +
         "hi = Constant <value = float {6}> ()\n" + "a = Conv (x, w1, b1)\n" + act(b.act1, "a", "r") +
         "d = Conv <group = " + str(b.e) + ", strides = [" + str(b.s) + "," + str(b.s) + "], dilations = [" +
         str(b.dil) + "," + str(b.dil) + "], pads = [" + str(p) + "," + str(p) + "," + str(p) + "," + str(p) +
         "]> (r, w2, b2)\n" + act(b.act2, "d", "y") + "}";
}

int fused_ops(const Graph& g) {
  int n = 0;
  for (const Node* node : g.nodes()) n += node->op_type == "ExpandDepthwiseConv";
  return n;
}

TEST(ExpandDepthwiseFusion, FusesExpansionClampDepthwiseClamp) {
  auto r = fuse(block({}));
  EXPECT_EQ(r.count(kPass), 1) << r.dump();
  auto ops = r.ops();
  EXPECT_EQ(ops["gaf.ExpandDepthwiseConv"], 1) << r.dump();
  EXPECT_EQ(ops["gaf.Conv"], 0) << r.dump();
  EXPECT_EQ(ops["Clip"], 0) << r.dump();  // both clamps are attributes now
  for (const Node* n : r.after.graph->nodes())
    if (n->op_type == "ExpandDepthwiseConv") {
      EXPECT_EQ(n->attr_float("min1", -1.f), 0.f);
      EXPECT_EQ(n->attr_float("max2", -1.f), 6.f);
    }
  expect_same_outputs(r.before, r.after, 1e-4, 1e-5);
  Model d = tools::copy_model(r.after);
  decompose_gaf_ops(*d.graph, 17);  // other runtimes get the two standard convolutions back
  EXPECT_EQ(fused_ops(*d.graph), 0);
  for (const Node* n : d.graph->nodes()) EXPECT_TRUE(n->domain.empty()) << n->describe();
  expect_same_outputs(r.before, d, 1e-4, 1e-5);
}

TEST(ExpandDepthwiseFusion, FiveByFiveReluStrideTwoAndNoClampAfter) {
  Block five;  // 5x5, ReLU, nothing after the depthwise convolution
  five.k = 5, five.h = 13, five.e = 48, five.act1 = "Relu", five.act2 = "";
  Block strided = five;  // 3x3 at stride 2
  strided.k = 3, strided.s = 2;
  for (const Block& b : {five, strided}) {
    auto r = fuse(block(b));
    EXPECT_EQ(r.count(kPass), 1) << r.dump();
    for (const Node* n : r.after.graph->nodes())
      if (n->op_type == "ExpandDepthwiseConv") {
        EXPECT_EQ(n->attr_float("min1", -1.f), 0.f);
        EXPECT_FALSE(n->has_attr("max1") || n->has_attr("min2") || n->has_attr("max2")) << n->describe();
      }
    expect_same_outputs(r.before, r.after, 1e-4, 1e-5);
    Model d = tools::copy_model(r.after);
    decompose_gaf_ops(*d.graph, 17);
    expect_same_outputs(r.before, d, 1e-4, 1e-5);
  }
}

// EfficientNet's SiLU and MobileNetV3's HardSwish become the op's activation attributes, alone or after a clamp's
// place; MobileNetV3's 72 and 120 channels (not a multiple of 16) fuse too.
TEST(ExpandDepthwiseFusion, SiluAndHardSwishActivations) {
  struct Want {
    Block b;
    std::string a1, a2;  // the activation attributes
  };
  Block silu;
  silu.act1 = silu.act2 = "Silu";
  Block hard_swish;
  hard_swish.act1 = hard_swish.act2 = "HardSwish", hard_swish.e = 72, hard_swish.k = 5;
  Block mixed;  // ReLU6 before the depthwise convolution, HardSwish after, 120 channels
  mixed.act2 = "HardSwish", mixed.e = 120, mixed.c = 40;
  for (const Want& w : {Want{silu, "Silu", "Silu"}, Want{hard_swish, "HardSwish", "HardSwish"},
                        Want{mixed, "", "HardSwish"}}) {
    auto r = fuse(block(w.b));
    EXPECT_EQ(r.count(kPass), 1) << r.dump();
    auto ops = r.ops();
    EXPECT_EQ(ops["gaf.ExpandDepthwiseConv"], 1) << r.dump();
    EXPECT_EQ(ops["gaf.Silu"] + ops["HardSwish"] + ops["Clip"], 0) << r.dump();
    for (const Node* n : r.after.graph->nodes())
      if (n->op_type == "ExpandDepthwiseConv") {
        EXPECT_EQ(n->attr_string("activation1", ""), w.a1) << n->describe();
        EXPECT_EQ(n->attr_string("activation2", ""), w.a2) << n->describe();
        EXPECT_EQ(n->has_attr("min1"), w.a1.empty()) << n->describe();  // ReLU6's bounds
      }
    expect_same_outputs(r.before, r.after, 1e-4, 1e-5);
    Model d = tools::copy_model(r.after);
    decompose_gaf_ops(*d.graph, 17);  // Sigmoid * x and HardSigmoid * x around the standard convolutions
    EXPECT_EQ(fused_ops(*d.graph), 0);
    for (const Node* n : d.graph->nodes()) EXPECT_TRUE(n->domain.empty()) << n->describe();
    expect_same_outputs(r.before, d, 1e-4, 1e-5);
  }
}

TEST(ExpandDepthwiseFusion, DoesNotFireOutsideWhatTheKernelRunsOrWhereItLoses) {
  Block shared;  // the expansion is read by a second consumer (a graph output)
  shared.expansion_is_output = true, shared.act1 = "";
  Block wide;    // 96 input channels: the expansion is faster on oneDNN
  wide.c = 96;
  Block dilated;
  dilated.dil = 2;
  Block seven;   // a 7x7 window
  seven.k = 7;
  Block sigmoid;  // a Sigmoid after the expansion: not an activation the kernel has
  sigmoid.act1 = "Sigmoid";
  Block strided_five;  // stride 2 with a 5x5 window: the convolutions apart are faster (gaf_block_bench)
  strided_five.k = 5, strided_five.s = 2;
  Block strided_silu;  // stride 2 with SiLU: likewise
  strided_silu.s = 2, strided_silu.act1 = strided_silu.act2 = "Silu";
  for (const Block& b : {shared, wide, dilated, seven, sigmoid, strided_five, strided_silu}) {
    auto r = fuse(block(b));
    EXPECT_EQ(r.count(kPass), 0) << r.dump();
    EXPECT_EQ(fused_ops(*r.after.graph), 0) << r.dump();
    expect_same_outputs(r.before, r.after, 1e-4, 1e-5);
  }
  auto off = fuse(block({}), false);  // a target without the kernel
  EXPECT_EQ(off.count(kPass), 0) << off.dump();
  // Asked to fuse everywhere (for measuring), the stride-2 blocks the kernel runs but loses on fuse too.
  for (const Block& b : {strided_five, strided_silu}) {
    auto r = fuse(block(b), true, true);
    EXPECT_EQ(r.count(kPass), 1) << r.dump();
    expect_same_outputs(r.before, r.after, 1e-4, 1e-5);
  }
}

TEST(ExpandDepthwiseFusion, RunsInTheOptLevelPipelineWithTheProjectionAfter) {
  // An inverted residual block: expansion, depthwise, projection and the residual add.
  std::string text = header() + "g (float[1,16,14,14] x) => (float[1,16,14,14] y) {\n" +
                     "w1 = Constant <value = float[64,16,1,1] {" + values(64 * 16, 1) + "}> ()\n" +
                     "w2 = Constant <value = float[64,1,3,3] {" + values(64 * 9, 2) + "}> ()\n" +
                     "w3 = Constant <value = float[16,64,1,1] {" + values(16 * 64, 3) + "}> ()\n" + R"(
      lo = Constant <value = float {0}> ()  hi = Constant <value = float {6}> ()
      a = Conv (x, w1)  r = Clip(a, lo, hi)
      d = Conv <group = 64, pads = [1, 1, 1, 1]> (r, w2)  q = Clip(d, lo, hi)
      p = Conv (q, w3)  y = Add(p, x) })";
  Model m = testing::parse(text);
  tools::FuseOptions opts;
  opts.fusion.opt_level = 3;
  tools::FuseResult res;
  Model f = testing::fused_copy(m, opts, &res);
  EXPECT_EQ(res.rewrites[kPass], 1);
  EXPECT_EQ(fused_ops(*f.graph), 1) << f.graph->to_string();
  expect_same_outputs(m, f, 1e-4, 1e-5);
}

TEST(ExpandDepthwiseFusion, TheOptLevelPipelineRecognisesTheActivationsFirst) {
  // ReLU6 after the expansion and a SiLU written as x * Sigmoid(x) after the depthwise convolution: the pipeline
  // recognises the SiLU before this pass runs, so it joins the op (recognised after, the op would have fused
  // without it and left the SiLU apart).
  Block b;
  b.act2 = "Silu";
  Model m = testing::parse(block(b));
  tools::FuseOptions opts;
  opts.fusion.opt_level = 3;
  tools::FuseResult res;
  Model f = testing::fused_copy(m, opts, &res);
  EXPECT_EQ(res.rewrites[kPass], 1);
  EXPECT_EQ(res.rewrites["silu-recognition"], 1);
  int fused = 0;
  for (const Node* n : f.graph->nodes()) {
    EXPECT_NE(n->op_type, "Silu") << f.graph->to_string();
    if (n->op_type != "ExpandDepthwiseConv") continue;
    ++fused;
    EXPECT_EQ(n->attr_string("activation2", ""), "Silu") << n->describe();
  }
  EXPECT_EQ(fused, 1) << f.graph->to_string();
  expect_same_outputs(m, f, 1e-4, 1e-5);
}

TEST(ExpandDepthwiseFusion, TheOpRunsGeometriesTheVectorKernelDoesNot) {
  // A 7x7 window, written directly as the op with both activations: the kernel's plain path, checked against the
  // op's standard decomposition.
  auto op = [](const std::string& attrs) {
    return "<ir_version: 8, opset_import: [\"\" : 17, \"gaf\" : 1]> "
           "g (float[1,7,9,5] x) => (float[1,3,4,24] y) {\n" +
           std::string("w1 = Constant <value = float[24,5,1,1] {") + values(24 * 5, 1) + "}> ()\n" +
           "b1 = Constant <value = float[24] {" + values(24, 2) + "}> ()\n" +
           "w2 = Constant <value = float[24,1,7,7] {" + values(24 * 49, 3) + "}> ()\n" +
           "b2 = Constant <value = float[24] {" + values(24, 4) + "}> ()\n" +
           "y = gaf.ExpandDepthwiseConv <strides = [2, 2], pads = [3, 2, 2, 3], min1 = -0.5, max2 = 1.0" + attrs +
           "> (x, w1, b1, w2, b2) }";
  };
  Model m = testing::parse(op(", activation1 = \"HardSwish\", activation2 = \"Silu\""));
  Model d = tools::copy_model(m);
  EXPECT_EQ(decompose_gaf_ops(*d.graph, 17), 1);
  EXPECT_EQ(fused_ops(*d.graph), 0);
  expect_same_outputs(d, m, 1e-4, 1e-5);

  Model bad = testing::parse(op(", activation1 = \"Gelu\""));  // not an activation the kernel has
  try {
    runtime::Session s(*bad.graph);
    s.run(tools::random_inputs(*bad.graph, 1));
    ADD_FAILURE() << "an unknown activation ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("activation1 'Gelu' is not Silu or HardSwish"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gaf
