// The shared real models with their batch dimension made symbolic, as exports with dynamic axes have it: the
// rewrites and fusion must plan as many kernels as for the static model, and the fused model must compute
// what the unfused one does at each batch size.
#include <filesystem>

#include "test_util.h"

namespace gaf {
namespace {

struct Case {
  const char* model;
  size_t axis;                   // the batch axis of the inputs and outputs
  std::vector<int64_t> batches;  // what the export allows
  // Whether the export computes its reshape targets from the input shape. transformer_layer's are constants
  // holding batch 1 ([128, 12, 64] from a [128, N, 768] slice), so with N symbolic the element counts of the
  // slices and their reshapes differ and those stay apart: its plan is not the static one.
  bool batch_generic = true;
};

// Dim `axis` of every graph input and output becomes the symbol "N"; every other computed value forgets its
// shape (the stored value_info), so the pipeline infers them.
void make_batch_symbolic(Graph& g, size_t axis) {
  for (const auto* list : {&g.inputs(), &g.outputs()})
    for (Value* v : *list)
      if (v->type.shape && v->type.shape->size() > axis) (*v->type.shape)[axis] = Dim("N");
  for (Node* n : g.nodes())
    for (Value* v : n->outputs())
      if (!g.is_graph_output(v)) v->type.shape.reset();
}

class SymbolicBatch : public ::testing::TestWithParam<Case> {};

TEST_P(SymbolicBatch, PlansLikeTheStaticModelAndMatchesUnfused) {
  const Case& c = GetParam();
  std::string path = std::string(GAF_SHARED_MODELS) + "/" + c.model + "/model.onnx";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no " << path;
  Model m = onnx_io::load_model(path);
  tools::FuseOptions opts;
  opts.fusion.opt_level = 3;
  tools::FuseResult static_plan, symbolic_plan;
  testing::fused_copy(m, opts, &static_plan);
  make_batch_symbolic(*m.graph, c.axis);
  Model fused = testing::fused_copy(m, opts, &symbolic_plan);
  if (c.batch_generic) {
    EXPECT_EQ(symbolic_plan.after.kernels, static_plan.after.kernels) << c.model;
  }
  EXPECT_LT(symbolic_plan.after.kernels, symbolic_plan.before.kernels) << c.model;
  for (const auto& [pass, count] : static_plan.rewrites)  // each rewrite still fires
    EXPECT_GT(symbolic_plan.rewrites[pass], 0) << c.model << ": " << pass;
  for (int64_t batch : c.batches) {
    runtime::Session a(*m.graph), b(*fused.graph);
    auto inputs = tools::random_inputs(*m.graph, 11, batch);
    auto want = a.run(inputs);
    auto got = b.run(inputs);
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i].dims(), want[i].dims());
      auto cmp = tools::compare(got[i], want[i], 1e-3, 1e-4);
      EXPECT_TRUE(cmp.ok) << c.model << " batch " << batch << " output " << i << ": " << cmp.message;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(SharedModels, SymbolicBatch,
                         ::testing::Values(Case{"mlp", 0, {1, 3}}, Case{"mobilenet_v2", 0, {1, 3}},
                                           Case{"resnet18_bn", 0, {1, 3}},
                                           Case{"transformer_layer", 0, {1}, false}),
                         [](const auto& info) { return std::string(info.param.model); });

}  // namespace
}  // namespace gaf
