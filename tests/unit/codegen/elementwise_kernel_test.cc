// Generated elementwise kernels compute what the runtime's kernels compute, NaN included.
#include "test_util.h"

namespace gaf {
namespace {

TEST(ElementwiseKernel, MaxAndMinPropagateNaNFromEitherOperand) {
  // Sqrt of the negative random inputs gives NaN on either side of Max and Min, as the unfused kernels see it.
  Model m = testing::parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[64,33] x, float[64,33] z) => (float[64,33] c, float[64,33] d, float[64,33] e, float[64,33] f) {
      a = Sqrt(x)  b = Neg(z)  c = Max(a, b)  d = Max(b, a)  e = Min(a, b)  f = Min(b, a) })");
  tools::FuseOptions opts;
  opts.fusion.opt_level = 3;
  Model f = testing::fused_copy(m, opts);
  ASSERT_EQ(testing::count_fused(*f.graph), 1) << f.graph->to_string();
  runtime::Session s(*f.graph);
  EXPECT_EQ(s.generated_kernels(), size_t(1));
  runtime::Session su(*m.graph);
  auto inputs = tools::random_inputs(*m.graph, 3);
  auto want = su.run(inputs), got = s.run(inputs);
  ASSERT_EQ(want.size(), size_t(4));
  ASSERT_EQ(got.size(), size_t(4));
  for (size_t o = 0; o < 4; ++o) {
    int64_t nans = 0, wrong = 0;
    for (int64_t i = 0; i < want[o].numel(); ++i) {
      const float w = want[o].data<float>()[i], g = got[o].data<float>()[i];
      nans += std::isnan(w);
      wrong += std::isnan(w) != std::isnan(g);
    }
    EXPECT_GT(nans, 0) << "output " << o;
    EXPECT_EQ(wrong, 0) << "output " << o << ": " << wrong << " of " << nans << " NaNs differ";
  }
  testing::expect_same_outputs(m, f);
}

}  // namespace
}  // namespace gaf
