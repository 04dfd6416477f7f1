#include "gaf/builder.h"
#include "pass_test_util.h"

namespace gaf {
namespace {

using testing::expect_same_outputs;

const char* kPass = "channel-scale-fold";

// A squeeze-excitation tail: x [n, C, H, H] times a gate (sigmoid of a per-channel input g, or a given shape),
// then a convolution C -> M (kernel k, group `group`). `nhwc` runs layout-nhwc and transpose-fold first, so the
// pass meets channels-last gaf.Convs.
struct SeGraph {
  Model model;
  GraphBuilder b{model, 17};
  int64_t n, c, h, m;
  SeGraph(int64_t n_, int64_t c_, int64_t h_, int64_t m_) : n(n_), c(c_), h(h_), m(m_) {}

  testing::Rewritten run(bool nhwc, std::vector<int64_t> gate_dims = {}, int64_t k = 1, int64_t group = 1,
                         bool gate_read_twice = false) {

    // x from a convolution, so that in the NHWC runs the block is channels-last from end to end.
    Value* x = b.op("Conv", {b.input("in", DType::Float, {n, c, h, h}), b.random_constant("w0", {c, c, 1, 1}, 0.3f)});
    // The gate: squeeze-excitation's sigmoid of a 1x1 convolution of the pooled map, or of an input of the
    // given shape.
    Value* g = gate_dims.empty()
                   ? b.op("Conv", {b.op("GlobalAveragePool", {x}), b.random_constant("wg", {c, c, 1, 1}, 0.3f)})
                   : b.input("g", DType::Float, Shape(gate_dims.begin(), gate_dims.end()));
    Value* s = b.op("Sigmoid", {g});
    Value* z = b.op("Mul", {x, s});
    const int64_t p = k / 2;
    Value* y = b.op("Conv", {z, b.random_constant("w", {m, c / group, k, k}, 0.3f), b.random_constant("bias", {m}, 0.1f)},
                    {{"pads", std::vector<int64_t>{p, p, p, p}}, {"group", group}});
    b.output(b.op("Relu", {y}));
    if (gate_read_twice) b.output(z);
    b.finish();
    std::vector<std::unique_ptr<Pass>> passes;
    if (nhwc) {
      passes.push_back(make_layout_nhwc());
      passes.push_back(make_transpose_fold());
    }
    passes.push_back(make_channel_scale_fold());
    return testing::rewrite(model, std::move(passes));
  }
};

// The Mul no longer reads the activation: it scales the weights ([M, C, k, k] times the gate as [1, C, 1, 1]).
void expect_weights_scaled(const Graph& g) {
  int convs = 0, scaled = 0;
  for (const Node* n : g.nodes()) {
    if (n->op_type == "Mul") {
      EXPECT_TRUE(n->input(0)->is_constant() || n->input(1)->is_constant()) << n->describe();
    }
    if (n->op_type == "Conv") {
      ++convs;
      const Node* w = n->input(1)->producer();
      scaled += w && w->op_type == "Mul";
    }
  }
  EXPECT_EQ(convs, 3) << g.to_string();
  EXPECT_EQ(scaled, 1) << g.to_string();
}

TEST(ChannelScaleFold, GateMovesIntoTheProjectionWeights) {
  for (bool nhwc : {false, true}) {
    SCOPED_TRACE(nhwc ? "NHWC" : "NCHW");
    SeGraph se(1, 32, 72, 16);  // 165888 activations against 512 weights
    auto r = se.run(nhwc);
    EXPECT_EQ(r.count(kPass), 1) << r.dump();
    expect_weights_scaled(*r.after.graph);
    expect_same_outputs(r.before, r.after, 1e-5, 1e-5);
  }
}

TEST(ChannelScaleFold, AnyKernelSizeAndAGateOfRankOne) {
  SeGraph se(1, 24, 80, 8);
  auto r = se.run(false, {24, 1, 1}, 3);  // a 3x3 convolution with zero padding: the scale still commutes
  EXPECT_EQ(r.count(kPass), 1) << r.dump();
  expect_same_outputs(r.before, r.after, 1e-5, 1e-5);
}

TEST(ChannelScaleFold, DoesNotFire) {
  {  // few activations for the weights: scaling the activation is cheaper (18432 < 2 * 4096 + 131072)
    SeGraph se(1, 32, 24, 128);
    EXPECT_EQ(se.run(true).count(kPass), 0);
  }
  {  // two images: one set of weights cannot carry two gates
    SeGraph se(2, 32, 72, 16);
    EXPECT_EQ(se.run(false, {2, 32, 1, 1}).count(kPass), 0);
  }
  {  // a gate per pixel, not per channel
    SeGraph se(1, 32, 72, 16);
    EXPECT_EQ(se.run(false, {1, 1, 72, 72}).count(kPass), 0);
  }
  {  // grouped convolution
    SeGraph se(1, 32, 72, 16);
    EXPECT_EQ(se.run(false, {1, 32, 1, 1}, 1, 2).count(kPass), 0);
  }
  {  // the scaled activation is read elsewhere too
    SeGraph se(1, 32, 72, 16);
    auto r = se.run(false, {1, 32, 1, 1}, 1, 1, true);
    EXPECT_EQ(r.count(kPass), 0) << r.dump();
  }
}

}  // namespace
}  // namespace gaf
