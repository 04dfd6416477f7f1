#include "gaf/builder.h"
#include "pass_test_util.h"

namespace gaf {
namespace {

using testing::expect_same_outputs;

const char* kPass = "squeeze-excitation-fusion";

// A squeeze-excitation block: x = Conv(in) [n, C, H, H]; m = GlobalAveragePool(x) (or ReduceMean over the
// spatial axes); h = act(Conv1x1(m, W1, B1)) with R = C / 4; g = gate(Conv1x1(h, W2, B2)); y = Mul(x, g), then a
// 1x1 projection to M channels. Each field below changes one thing; `nhwc` runs the channels-last rewrites
// first (layout-nhwc, transpose-fold, the activation recognitions, channel-scale-fold), as the opt-level pipeline
// does.
struct Se {
  int64_t n = 1, c = 40, h = 9, m = 24;
  std::string mean = "GlobalAveragePool";  // or "ReduceMean"
  std::vector<int64_t> axes = {2, 3};       // ReduceMean's
  std::string act = "Relu";                 // "Relu", "Silu" (x * Sigmoid(x)), "HardSwish", "Clip", "Tanh", ""
  std::string gate = "Sigmoid";             // "Sigmoid", "HardSigmoid", "Tanh"
  bool biases = true;
  bool w1_input = false;                    // W1 a graph input, not a constant
  int64_t k1 = 1;                           // the squeeze convolution's kernel (padded to keep 1x1)
  bool mean_is_output = false, hidden_is_output = false;
  bool scale_other = false;                 // the gates scale another tensor than x
  bool nhwc = false;

  testing::Rewritten run() const {
    Model model;
    GraphBuilder b(model, 17);
    const int64_t r = c / 4;
    Value* in = b.input("in", DType::Float, {n, c, h, h});
    Value* x = b.op("Conv", {in, b.random_constant("w0", {c, c, 1, 1}, 0.3f)});
    Value* mv = mean == "GlobalAveragePool" ? b.op("GlobalAveragePool", {x})
                                            : b.op("ReduceMean", {x}, {{"axes", axes}});
    std::vector<Value*> c1 = {mv, w1_input ? b.input("w1", DType::Float, {r, c, k1, k1})
                                            : b.random_constant("w1", {r, c, k1, k1}, 0.3f)};
    if (biases) c1.push_back(b.random_constant("b1", {r}, 0.2f));
    const int64_t p = k1 / 2;
    Value* s = b.op("Conv", c1, {{"pads", std::vector<int64_t>{p, p, p, p}}});
    Value* hv = s;
    if (act == "Silu") hv = b.op("Mul", {s, b.op("Sigmoid", {s})});
    else if (act == "Clip") hv = b.op("Clip", {s, b.scalar(-0.5f), b.scalar(1.5f)});
    else if (!act.empty()) hv = b.op(act, {s});
    std::vector<Value*> c2 = {hv, b.random_constant("w2", {c, r, 1, 1}, 0.3f)};
    if (biases) c2.push_back(b.random_constant("b2", {c}, 0.2f));
    Value* pre = b.op("Conv", c2);
    Value* g = gate == "HardSigmoid" ? b.op("HardSigmoid", {pre}, {{"alpha", 1.f / 6.f}, {"beta", 0.5f}})
                                     : b.op(gate, {pre});
    Value* scaled = b.op("Mul", {scale_other ? b.op("Relu", {x}) : x, g});
    b.output(b.op("Conv", {scaled, b.random_constant("wp", {m, c, 1, 1}, 0.3f)}));
    if (mean_is_output) b.output(mv);
    if (hidden_is_output) b.output(hv);
    b.finish();
    std::vector<std::unique_ptr<Pass>> passes;
    if (nhwc) {
      passes.push_back(make_layout_nhwc());
      passes.push_back(make_transpose_fold());
      passes.push_back(make_silu_recognition());
      passes.push_back(make_hard_swish_recognition());
      passes.push_back(make_channel_scale_fold());
    }
    passes.push_back(make_squeeze_excitation_fusion());
    return testing::rewrite(model, std::move(passes));
  }
};

const Node* the_op(const Graph& g) {
  for (const Node* n : g.nodes())
    if (n->op_type == "SqueezeExcitation") return n;
  return nullptr;
}

// Fused: one op, none of the block's five left; its outputs equal the block's, and so do those of the
// decomposition other runtimes get.
void expect_fused(const testing::Rewritten& r, bool gate_only = false) {
  EXPECT_EQ(r.count(kPass), 1) << r.dump();
  auto ops = r.ops();
  EXPECT_EQ(ops["gaf.SqueezeExcitation"], 1) << r.dump();
  EXPECT_EQ(ops["GlobalAveragePool"] + ops["ReduceMean"] + ops["Sigmoid"] + ops["HardSigmoid"], 0) << r.dump();
  EXPECT_EQ(ops["Mul"], gate_only ? 1 : 0) << r.dump();
  EXPECT_EQ(ops["Conv"] + ops["gaf.Conv"], 2) << r.dump();  // the first and the projection
  const Node* se = the_op(*r.after.graph);
  if (se) {
    EXPECT_EQ(se->attr_int("gate_only", 0), gate_only ? 1 : 0) << se->describe();
  }
  expect_same_outputs(r.before, r.after, 1e-4, 1e-5);
  Model d = tools::copy_model(r.after);
  decompose_gaf_ops(*d.graph, 17);
  for (const Node* n : d.graph->nodes()) {
    EXPECT_TRUE(n->domain.empty() || n->op_type != "SqueezeExcitation") << n->describe();
  }
  expect_same_outputs(r.before, d, 1e-4, 1e-5);
}

TEST(SqueezeExcitationFusion, FusesTheBlockChannelsFirst) {
  Se relu;  // MobileNetV3 / RegNetY style: ReLU, then a sigmoid gate
  auto r = relu.run();
  expect_fused(r);
  const Node* se = the_op(*r.after.graph);
  ASSERT_TRUE(se);
  EXPECT_EQ(se->attr_string("layout", ""), "NCHW");
  EXPECT_EQ(se->attr_float("min", -1.f), 0.f);
  EXPECT_FALSE(se->has_attr("max") || se->has_attr("activation")) << se->describe();
  EXPECT_EQ(se->attr_string("gate", ""), "Sigmoid");

  Se hard = relu;  // MobileNetV3's hard sigmoid, with ReduceMean, 2 images
  hard.gate = "HardSigmoid", hard.mean = "ReduceMean", hard.n = 2;
  r = hard.run();
  expect_fused(r);
  se = the_op(*r.after.graph);
  ASSERT_TRUE(se);
  EXPECT_EQ(se->attr_string("gate", ""), "HardSigmoid");
  EXPECT_FLOAT_EQ(se->attr_float("alpha", 0.f), 1.f / 6.f);

  Se plain = relu;  // no activation, no biases, a Clip-free chain
  plain.act = "", plain.biases = false;
  r = plain.run();
  expect_fused(r);
  se = the_op(*r.after.graph);
  ASSERT_TRUE(se);
  EXPECT_FALSE(se->has_attr("min")) << se->describe();
  EXPECT_EQ(se->num_inputs(), 4) << se->describe();  // B2 left off; B1 an empty slot
}

TEST(SqueezeExcitationFusion, FusesChannelsLastBlocksWithTheirActivations) {
  struct Want {
    std::string act, gate, attr;  // the block's activation and gate; the op's activation attribute
    float min, max;               // and its clamp (NaN: none)
  };
  const float none = std::nanf("");
  for (const Want& w : {Want{"Silu", "Sigmoid", "Silu", none, none}, Want{"Relu", "HardSigmoid", "", 0.f, none},
                        Want{"HardSwish", "Sigmoid", "HardSwish", none, none},
                        Want{"Clip", "Sigmoid", "", -0.5f, 1.5f}}) {
    SCOPED_TRACE(w.act + " " + w.gate);
    Se se;
    se.act = w.act, se.gate = w.gate, se.nhwc = true, se.c = 72;
    auto r = se.run();
    expect_fused(r);
    const Node* op = the_op(*r.after.graph);
    ASSERT_TRUE(op);
    EXPECT_EQ(op->attr_string("layout", ""), "NHWC");
    EXPECT_EQ(op->attr_string("activation", ""), w.attr);
    EXPECT_EQ(op->has_attr("min"), !std::isnan(w.min)) << op->describe();
    if (!std::isnan(w.min)) {
      EXPECT_EQ(op->attr_float("min", 0.f), w.min);
    }
    if (!std::isnan(w.max)) {
      EXPECT_EQ(op->attr_float("max", 0.f), w.max);
    }
  }
}

// Where channel-scale-fold moved the gates into the projection's weights (a large map, few weights), the op
// computes the gates alone and the weights' Mul stays; so it does where the gates scale another tensor.
TEST(SqueezeExcitationFusion, GatesAloneWhereTheScaleWentElsewhere) {
  Se folded;
  folded.nhwc = true, folded.c = 32, folded.h = 72, folded.m = 16, folded.act = "Silu";
  auto r = folded.run();
  EXPECT_EQ(r.count("channel-scale-fold"), 1) << r.dump();
  expect_fused(r, true);
  for (const Node* n : r.after.graph->nodes())
    if (n->op_type == "Mul") {
      EXPECT_TRUE(n->input(0)->is_constant() || n->input(1)->is_constant()) << n->describe();  // W * gates
    }

  Se other;
  other.scale_other = true;
  r = other.run();
  expect_fused(r, true);
}

TEST(SqueezeExcitationFusion, DoesNotFire) {
  auto none = [](const Se& se, const char* why) {
    SCOPED_TRACE(why);
    auto r = se.run();
    EXPECT_EQ(r.count(kPass), 0) << r.dump();
    EXPECT_EQ(r.ops()["gaf.SqueezeExcitation"], 0) << r.dump();
  };
  Se se;
  Se v = se;
  v.mean_is_output = true;
  none(v, "the pooled channels are a graph output");
  v = se, v.hidden_is_output = true;
  none(v, "the hidden layer is read elsewhere");
  v = se, v.w1_input = true;
  none(v, "W1 is not a constant");
  v = se, v.k1 = 3;
  none(v, "a 3x3 squeeze convolution (padded to keep the 1x1 map)");
  v = se, v.mean = "ReduceMean", v.axes = {2};
  none(v, "the mean over one spatial axis only");
  v = se, v.mean = "ReduceMean", v.axes = {1, 2};
  none(v, "channels-first convolutions after a mean over the channels-last spatial axes");
  v = se, v.gate = "Tanh";
  none(v, "Tanh is no gate");
  v = se, v.act = "Tanh";
  none(v, "Tanh is not an activation the kernel applies");
  // The twins of the cases above fire: the standard block, and ReduceMean over both spatial axes.
  EXPECT_EQ(se.run().count(kPass), 1);
  v = se, v.mean = "ReduceMean";
  EXPECT_EQ(v.run().count(kPass), 1);
}

}  // namespace
}  // namespace gaf
