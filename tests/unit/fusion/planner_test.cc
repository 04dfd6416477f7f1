// Planner behaviour with a mock cost model: profitability decides, force overrides it (never legality), sibling
// fusion at opt level 3, determinism, and the fused model's ONNX form.
#include <gtest/gtest.h>

#include <algorithm>

#include "gaf/fusion.h"
#include "test_util.h"

namespace gaf {
namespace {

using testing::count_fused;
using testing::expect_same_outputs;
using testing::parse;

const char* kHeader = R"(<ir_version: 8, opset_import: ["" : 17]> )";

// Every kernel costs its op count: fusing never saves anything.
class NoGainCostModel : public CostModel {
 public:
  NoGainCostModel() : CostModel(Target::cpu_host()) {}
  double kernel_time(const KernelStats& k) const override { return double(k.num_ops); }
};

TEST(Planner, MockCostModelDecidesProfitability) {
  Model m = parse(std::string(kHeader) + R"(g (float[64,64] x) => (float[64,64] y) { a = Relu(x) y = Neg(a) })");
  FusionOptions o;
  NoGainCostModel none;
  FusionPlan p = plan_fusion(*m.graph, none, o);
  ASSERT_EQ(p.decisions.size(), 1u);
  EXPECT_EQ(p.decisions[0].reason, Reason::NegativeBenefit);
  EXPECT_EQ(p.groups.size(), 2u);

  CostModel real(Target::cpu_host());
  FusionPlan q = plan_fusion(*m.graph, real, o);
  EXPECT_TRUE(q.decisions[0].fused);
  EXPECT_GT(q.decisions[0].benefit_s, 0);
}

TEST(Planner, ForceOverridesCostButNotLegality) {
  Model m = parse(std::string(kHeader) + R"(g (float[64,64] x, float[64,64] w) => (float[64,64] y) {
      a = MatMul(x, w) b = Add(a, x) y = MatMul(b, w) })");
  FusionOptions o;
  o.rules = FusionRules::parse(R"({"rules": [{"pattern": "MatMul -> Add", "action": "force", "reason": "FFN"},
                                            {"pattern": "Add -> MatMul", "action": "force"}]})");
  NoGainCostModel none;
  FusionPlan p = plan_fusion(*m.graph, none, o);
  int fused = 0;
  for (const auto& d : p.decisions) {
    if (d.fused) {
      ++fused;
    } else {
      EXPECT_EQ(d.reason, Reason::MultipleAnchors);  // forcing cannot make an illegal merge legal
    }
  }
  EXPECT_EQ(fused, 1);
}

// A Reshape alone is a view (the runtime takes its input under the new dims): the cost model gives it no bytes,
// so a projection's bias Add goes into the MatMul before it rather than into a kernel with the Reshape (the Q/K/V
// projections of an attention layer). A Transpose moves its data and keeps its bytes.
TEST(Planner, ViewsCostNothingAloneSoTheBiasJoinsTheMatMul) {
  Model m = parse(std::string(kHeader) + R"(g (float[512,768] x, float[768,768] w, float[768] b)
      => (float[512,12,64] y, float[768,512] t) {
      s = Constant <value = int64[3] {512, 12, 64}> ()
      p = MatMul(x, w)  a = Add(p, b)  y = Reshape(a, s)  t = Transpose <perm = [1, 0]> (x) })");
  auto node = [&](const std::string& op) {
    for (const Node* n : m.graph->nodes())
      if (n->op_type == op) return n;
    ADD_FAILURE() << "no " << op;
    return static_cast<const Node*>(nullptr);
  };
  EXPECT_EQ(node_stats(*node("Reshape")).bytes, 0.0);
  EXPECT_EQ(node_stats(*node("Transpose")).bytes, 2.0 * 512 * 768 * 4);
  // Fused with the Add, the Reshape's output is written by the kernel: its bytes count.
  EXPECT_GT(group_stats({node("Add"), node("Reshape")}, *m.graph).bytes, 0.0);

  CostModel real(Target::cpu_host());
  FusionPlan p = plan_fusion(*m.graph, real, FusionOptions{});
  bool bias_in_matmul = false;
  for (const Group& gr : p.groups) {
    std::vector<std::string> ops;
    for (const Node* n : gr.nodes) ops.push_back(n->op_type);
    if (ops == std::vector<std::string>{"MatMul", "Add"}) bias_in_matmul = true;
    EXPECT_FALSE(std::count(ops.begin(), ops.end(), "Reshape") && ops.size() > 1) << p.to_string();
  }
  EXPECT_TRUE(bias_in_matmul) << p.to_string();
}

TEST(Planner, SiblingFusionAtOptLevelThree) {
  std::string text = std::string(kHeader) + R"(g (float[256,256] x) => (float[256,256] a, float[256,256] b) {
      a = Relu(x) b = Sigmoid(x) })";
  Model m = parse(text);
  tools::FuseOptions o;
  o.fusion.opt_level = 2;
  Model m2 = testing::fused_copy(m, o);
  EXPECT_EQ(m2.graph->num_nodes(), 2u);
  o.fusion.opt_level = 3;
  Model m3 = testing::fused_copy(m, o);
  ASSERT_EQ(m3.graph->num_nodes(), 1u);
  EXPECT_EQ(m3.graph->nodes()[0]->num_outputs(), 2);
  expect_same_outputs(m, m3);
}

TEST(Planner, DeterministicOutput) {
  Model a = tools::demo_transformer_block(16, 32, 2, 64);
  Model b = tools::demo_transformer_block(16, 32, 2, 64);
  tools::FuseOptions o;
  o.fusion.opt_level = 3;
  tools::fuse_model(a, o);
  tools::fuse_model(b, o);
  EXPECT_EQ(onnx_io::export_model(a).SerializeAsString(), onnx_io::export_model(b).SerializeAsString());
}

TEST(Planner, DemoBlockFusesAndMatches) {
  Model m = tools::demo_transformer_block(16, 32, 2, 64);
  tools::FuseOptions o;
  o.fusion.opt_level = 3;
  tools::FuseResult r;
  Model f = testing::fused_copy(m, o, &r);
  EXPECT_GT(count_fused(*f.graph), 3);
  EXPECT_LT(r.after.kernels, r.before.kernels);
  EXPECT_LT(r.after.bytes, r.before.bytes);
  expect_same_outputs(m, f, 1e-4, 1e-5);
  EXPECT_NE(r.summary_line().find("fused operators"), std::string::npos);
}

TEST(FusedExport, FunctionsPassTheCheckerAndRoundTrip) {
  Model m = parse(std::string(kHeader) + R"(g (float[8,8] x) => (float[8,8] y) { a = Relu(x) b = Mul(a, x) y = Neg(b) })");
  tools::FuseOptions o;
  tools::fuse_model(m, o);
  auto proto = onnx_io::export_model(m);
  ASSERT_EQ(proto.functions_size(), 1);
  EXPECT_EQ(proto.functions(0).domain(), "gaf.fused");
  EXPECT_EQ(proto.functions(0).name(), "Relu_Mul_Neg_0");
  EXPECT_NO_THROW(onnx_io::check_model(PortableModel(m)));
  Model back = onnx_io::import_model(proto);
  ASSERT_EQ(back.graph->num_nodes(), 1u);
  ASSERT_TRUE(back.graph->nodes()[0]->body);
  EXPECT_EQ(back.graph->nodes()[0]->body->num_nodes(), 3u);
  EXPECT_EQ(onnx_io::export_model(back).SerializeAsString(), proto.SerializeAsString());
}

}  // namespace
}  // namespace gaf
