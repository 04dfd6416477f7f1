// Anchor groups (Conv / MatMul + an elementwise epilogue): an epilogue with a oneDNN post-op form runs as one
// primitive; one without runs its body op by op, with the group's constant weights still constants there.
#include <cmath>
#include <limits>
#include <map>

#include "gaf/builder.h"
#include "runtime/kernels/fused_body.h"
#include "test_util.h"

namespace gaf {
namespace {

struct Fused {
  Model unfused, fused;
};

// A Conv on x [N, 16 or 32, H, W] (bias, padding 1 for 3x3) and a MatMul of a [5, 16] by constants, each followed
// by the epilogue `act` adds.
template <class Act>
Fused conv_and_matmul(std::vector<int64_t> xd, std::vector<int64_t> wd, Act act) {
  Fused r;
  GraphBuilder b(r.unfused);
  Value* x = b.input("x", DType::Float, Shape(xd.begin(), xd.end()));
  Value* w = b.random_constant("w", wd, 2.0f, 1);
  Value* bias = b.random_constant("b", {wd[0]}, 1.0f, 2);
  const int64_t pad = wd[2] / 2;
  b.output(act(b, b.op("Conv", {x, w, bias}, {{"pads", std::vector<int64_t>{pad, pad, pad, pad}}})));
  Value* a = b.input("a", DType::Float, {5, 16});
  b.output(act(b, b.op("MatMul", {a, b.random_constant("v", {16, 8}, 2.0f, 3)})));
  b.finish();
  tools::FuseOptions opts;
  opts.fusion.opt_level = 3;
  r.fused = testing::fused_copy(r.unfused, opts);
  return r;
}

// Fused against unfused, output i within rtol[i] (and atol), over two runs of one session each (the second reuses
// the kernels' state: packed weights, cached primitives).
void expect_matches_twice(const Fused& m, std::vector<double> rtol, double atol = 0) {
  runtime::Session su(*m.unfused.graph), sf(*m.fused.graph);
  for (uint64_t seed : {1, 2}) {
    auto inputs = tools::random_inputs(*m.unfused.graph, seed);
    auto ou = su.run(inputs), of = sf.run(inputs);
    ASSERT_EQ(ou.size(), of.size());
    for (size_t i = 0; i < ou.size(); ++i) {
      auto c = tools::compare(of[i], ou[i], rtol[i], atol);
      EXPECT_TRUE(c.ok) << "seed " << seed << ", output " << i << ": " << c.message;
    }
  }
}

TEST(AnchorEpilogue, HardSigmoidIsALinearAndAClip) {
  // MobileNetV3's squeeze-excitation gate: a 1x1 convolution on the pooled [N, C, 1, 1] map, then HardSigmoid
  // (alpha 1/6, beta 1/2); the MatMul takes ONNX's default HardSigmoid (alpha 0.2, beta 0.5). Weights large
  // enough that both clamps are hit.
  bool first = true;
  Fused m = conv_and_matmul({2, 32, 1, 1}, {48, 32, 1, 1}, [&](GraphBuilder& b, Value* y) {
    if (!std::exchange(first, false)) return b.op("HardSigmoid", {y});
    return b.op("HardSigmoid", {y}, {{"alpha", 1.0f / 6.0f}, {"beta", 0.5f}});
  });
  int anchors = 0;
  for (const Node* n : m.fused.graph->nodes())
    if (n->body) {
      ++anchors;
      bool has_hs = false;
      for (const Node* b : n->body->nodes()) has_hs |= b->op_type == "HardSigmoid";
      EXPECT_TRUE(has_hs) << n->describe();
    }
  EXPECT_EQ(anchors, 2) << m.fused.graph->to_string();
  runtime::Session s(*m.fused.graph);
  EXPECT_EQ(s.generated_kernels(), size_t(2));
  for (const auto& [node, why] : s.codegen_fallbacks()) ADD_FAILURE() << node << " runs op by op: " << why;
  // Near the lower clamp the gate is a difference of nearly equal values (x / 6 + 1/2 for x near -3): the
  // rounding of the convolution's sum (1e-6 of its ~10) makes a relative error there; hence the atol. Fused and
  // unfused convolutions differ in layout, and so in summation order, on AVX2 machines.
  expect_matches_twice(m, {1e-5, 1e-5}, 1e-6);
}

TEST(AnchorEpilogue, NoPostOpFormRunsOpByOpOnConstantWeights) {
  // Sin has no oneDNN post-op form: each group runs its body through a nested session, where the convolution and
  // the MatMul see the weights as constants, as in the unfused graph (packed once). The MatMul then runs the same
  // oneDNN implementation and agrees exactly; the convolution runs channels-last in the fused graph.
  Fused m = conv_and_matmul({2, 16, 1, 1}, {24, 16, 1, 1}, [](GraphBuilder& b, Value* y) { return b.op("Sin", {y}); });
  runtime::Session s(*m.fused.graph);
  EXPECT_EQ(s.codegen_fallbacks().size(), size_t(2)) << m.fused.graph->to_string();
  for (const auto& [node, why] : s.codegen_fallbacks())
    EXPECT_NE(why.find("no oneDNN post-op form"), std::string::npos) << why;
  // The nested session's body reads the weights and the bias as constants; the fused node's own body does not.
  int anchors = 0;
  for (const Node* n : m.fused.graph->nodes()) {
    if (!n->body) continue;
    auto bound = runtime::body_with_bound_constants(*n);
    EXPECT_EQ(bound->inputs().size(), n->body->inputs().size());
    for (const Node* b : bound->nodes()) {
      if (b->op_type != "Conv" && b->op_type != "MatMul") continue;
      ++anchors;
      for (int i = 1; i < b->num_inputs(); ++i) EXPECT_TRUE(b->input(i)->is_constant()) << b->describe() << " input " << i;
    }
    for (const Node* b : n->body->nodes()) {
      if (b->op_type == "Conv" || b->op_type == "MatMul") {
        EXPECT_FALSE(b->input(1)->is_constant());
      }
    }
  }
  EXPECT_EQ(anchors, 2);
  expect_matches_twice(m, {1e-5, 0});
}

// A NaN or an infinity in the input reaches the epilogue as in the unfused graph, except where oneDNN's post-ops
// define NaN otherwise: its relu and clip (max/min instructions) give 0 for NaN and its exp gives inf. The
// unfused kernels keep NaN, as ONNX Runtime does (its fused Conv+Relu too): a known difference of these fusions.
TEST(AnchorEpilogue, SpecialValuesThroughPostOps) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::map<std::string, float> nan_becomes = {{"Relu", 0.0f}, {"HardSigmoid", 0.0f}, {"Exp", inf}};
  for (const char* act : {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "Elu", "Softplus",
                          "Abs", "Exp"}) {
    SCOPED_TRACE(act);
    Model m;
    GraphBuilder b(m);
    Value* a = b.input("a", DType::Float, {6, 4});
    Value* w = b.random_constant("w", {4, 5}, 1.0f, 3);
    b.output(b.op(act, {b.op("MatMul", {a, w})}));
    b.finish();
    tools::FuseOptions opts;
    opts.fusion.opt_level = 3;
    Model f = testing::fused_copy(m, opts);
    runtime::Session su(*m.graph), sf(*f.graph);
    EXPECT_EQ(sf.generated_kernels(), size_t(1));
    std::vector<float> x = {nan, 1, 2, 3, inf, 1, 2, 3, -inf, 1, 2, 3, 1, 1, 1, 1, 1e30f, -1e30f, 0, 0, -5, 0.5f, 2, -1};
    std::vector<Tensor> in = {Tensor::from<float>({6, 4}, x)};
    Tensor want = su.run(in)[0], got = sf.run(in)[0];
    for (int64_t i = 0; i < want.numel(); ++i) {
      const float u = want.data<float>()[i], g = got.data<float>()[i];
      auto oneDNN = nan_becomes.find(act);
      if (std::isnan(u) && oneDNN != nan_becomes.end())
        EXPECT_EQ(g, oneDNN->second) << act << " element " << i;
      else if (std::isnan(u) || std::isnan(g) || std::isinf(u) || std::isinf(g))
        EXPECT_TRUE((std::isnan(u) && std::isnan(g)) || u == g)
            << act << " element " << i << ": unfused " << u << ", fused " << g;
      else
        EXPECT_NEAR(g, u, 1e-30 + 1e-5 * std::abs(u)) << act << " element " << i;
    }
  }
}

}  // namespace
}  // namespace gaf
