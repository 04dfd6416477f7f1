// The rewrite pipeline on the shared real models: what fires, and that the rewritten model computes what the
// original does on the recorded inputs.
#include <filesystem>

#include "gaf/codegen.h"
#include "pass_test_util.h"

namespace gaf {
namespace {

// The pipeline the CPU target runs: the common passes and the CPU backend's.
PassManager cpu_pipeline(int level) {
  return PassManager::for_opt_level(level, codegen::cpu_kernel_backend().pipeline_passes(level, Target::cpu_host()));
}

struct Expected {
  const char* model;
  std::map<std::string, int> rewrites;  // a lower bound per pass
};

class SharedModel : public ::testing::TestWithParam<Expected> {};

TEST_P(SharedModel, RewritesFireAndOutputsMatch) {
  std::string dir = std::string(GAF_SHARED_MODELS) + "/" + GetParam().model;
  if (!std::filesystem::exists(dir + "/model.onnx")) GTEST_SKIP() << "no " << dir;
  Model m = onnx_io::load_model(dir + "/model.onnx");
  Model rewritten = tools::copy_model(m);
  PassContext ctx;
  ctx.evaluator = &runtime::constant_evaluator();
  ctx.verify_each = true;
  cpu_pipeline(3).run(*rewritten.graph, ctx);
  for (const auto& [pass, at_least] : GetParam().rewrites)
    EXPECT_GE(ctx.rewrites[pass], at_least) << pass << "\n" << rewritten.graph->to_string();
  EXPECT_LT(rewritten.graph->num_nodes(), m.graph->num_nodes());

  runtime::Session original(*m.graph), after(*rewritten.graph);
  auto inputs = tools::load_input_dir(dir + "/test_data_set_0");
  auto want = original.run(inputs);
  auto got = after.run(inputs);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    auto c = tools::compare(got[i], want[i], 1e-3, 1e-4);
    EXPECT_TRUE(c.ok) << GetParam().model << " output " << i << ": " << c.message;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Passes, SharedModel,
    ::testing::Values(Expected{"resnet18_bn", {{"conv-bn-fold", 20}}},
                      Expected{"mobilenet_v2", {{"common-subexpression-elimination", 1}}},
                      Expected{
                          "transformer_layer",
                          {{"layer-norm-recognition", 2}, {"shape-folding", 1}, {"constant-folding", 1}}},
                      Expected{"mlp", {{"gelu-recognition", 1}}}),
    [](const auto& info) { return std::string(info.param.model); });

TEST(PassManager, PipelinePerOptLevel) {
  EXPECT_TRUE(PassManager::for_opt_level(0).names().empty());
  auto l1 = PassManager::for_opt_level(1).names();
  auto l3 = PassManager::for_opt_level(3).names();
  auto has = [](const std::vector<std::string>& n, const char* p) {
    return std::find(n.begin(), n.end(), p) != n.end();
  };
  for (const char* p :
       {"constant-folding", "common-subexpression-elimination", "shape-folding", "constant-operand-fold",
        "conv-bn-fold",
        "matmul-add-to-gemm", "transpose-fold", "layer-norm-recognition", "rms-norm-recognition",
        "gelu-recognition", "silu-recognition", "hard-swish-recognition", "softmax-recognition"}) {
    EXPECT_TRUE(has(l1, p)) << p;
    EXPECT_TRUE(has(l3, p)) << p;
  }
  EXPECT_FALSE(has(l1, "sibling-matmul-merge"));
  EXPECT_FALSE(has(PassManager::for_opt_level(2).names(), "sibling-matmul-merge"));
  EXPECT_TRUE(has(l3, "sibling-matmul-merge"));
  // A BatchNorm as a multiply-add pays only where it fuses with its neighbours.
  EXPECT_FALSE(has(l1, "batch-norm-affine"));
  EXPECT_TRUE(has(cpu_pipeline(2).names(), "batch-norm-affine"));
  EXPECT_FALSE(has(PassManager::for_opt_level(2).names(), "batch-norm-affine"));
}

TEST(PassManager, ShapeChainsDeeperThanAFewSweepsFoldCompletely) {
  // Eight stages, each padding by what the previous stage's Shape computes (Swin-T pads every window
  // attention so): stage i's pads fold only after stage i-1's shape is inferred, one stage per sweep of the
  // pipeline. All of it must fold: one Pad per stage is left, every shape static.
  constexpr int kStages = 8;
  std::string body = "two = Constant <value = int64 {2}> ()  z1 = Constant <value = int64[1] {0}> ()\n"
                     "z6 = Constant <value = int64[6] {0, 0, 0, 0, 0, 0}> ()\n";
  std::string prev = "x";
  for (int i = 0; i < kStages; ++i) {
    const std::string s = std::to_string(i);
    // pad_r = W % 2 on the last axis, as Swin's (window - W % window) % window
    body += "s" + s + " = Shape(" + prev + ")  w" + s + " = Gather <axis = 0> (s" + s + ", three)  r" + s +
            " = Mod(w" + s + ", two)  u" + s + " = Unsqueeze(r" + s + ", z1)  pads" + s +
            " = Concat <axis = 0> (z6, z1, u" + s + ")  p" + s + " = Pad(" + prev + ", pads" + s + ")\n";
    prev = "p" + s;
  }
  body += "y = Relu(" + prev + ")";
  Model m = testing::parse(testing::header(13) + "g (float[1,4,4,5] x) => (float[1,4,4,?] y) {\n"
                           "three = Constant <value = int64 {3}> ()\n" + body + "}");
  Model rewritten = tools::copy_model(m);
  PassContext ctx;
  ctx.evaluator = &runtime::constant_evaluator();
  PassManager::for_opt_level(1).run(*rewritten.graph, ctx);
  auto ops = testing::histogram(*rewritten.graph);
  EXPECT_EQ(ops["Pad"], 1) << rewritten.graph->to_string();  // 5 -> 6, then every later pad is 0
  EXPECT_EQ(ops["Shape"], 0);
  EXPECT_EQ(rewritten.graph->num_nodes(), 2);
  for (const Node* n : rewritten.graph->nodes())
    EXPECT_TRUE(n->output(0)->type.has_static_shape()) << n->describe();
  testing::expect_same_outputs(m, rewritten, 0, 0);
}

}  // namespace
}  // namespace gaf
