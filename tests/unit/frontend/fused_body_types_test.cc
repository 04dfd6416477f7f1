// A fused model read back from its ONNX file: function bodies carry no value types in ONNX, so import infers
// them. With symbolic dims ONNX alone leaves fresh "unk__" symbols, and the code generator cannot size its
// loops from those; import takes the call-site output types, and the reader completes the rest with our own shape
// inference (infer_fused_body_shapes, which testing::fused_copy runs as the CLI does).
#include "passes/pass_test_util.h"

namespace gaf {
namespace {

// Rotary position embedding under a dynamic sequence (LLaMA-style): cos/sin caches sliced to the sequence,
// x * cos + rotate_half(x) * sin.
TEST(FusedBodyTypes, RotaryEmbeddingWithADynamicSequenceGeneratesCodeAfterTheRoundTrip) {
  std::string cs = testing::test_values(64 * 16, 3, 20.0), sn = testing::test_values(64 * 16, 7, 20.0);
  Model m = testing::parse(testing::header(14) + R"(g (float[B,4,L,16] x) => (float[B,4,L,16] y)
    <float[1,1,64,16] cosc = {)" +
                           cs + R"(}, float[1,1,64,16] sinc = {)" + sn + R"(}> {
    sh = Shape(x)  i2 = Constant <value = int64[1] {2}> ()  l = Gather <axis = 0> (sh, i2)
    z = Constant <value = int64[1] {0}> ()  ax = Constant <value = int64[1] {2}> ()
    cos = Slice(cosc, z, l, ax)  sin = Slice(sinc, z, l, ax)
    h8 = Constant <value = int64[1] {8}> ()  h16 = Constant <value = int64[1] {16}> ()
    am1 = Constant <value = int64[1] {-1}> ()
    x1 = Slice(x, z, h8, am1)  x2 = Slice(x, h8, h16, am1)  nx2 = Neg(x2)
    rot = Concat <axis = -1> (nx2, x1)
    a = Mul(x, cos)  b = Mul(rot, sin)  y = Add(a, b) })");
  tools::FuseOptions opts;
  opts.fusion.opt_level = 3;
  tools::FuseResult r;
  Model f = testing::fused_copy(m, opts, &r);  // export, import
  EXPECT_LT(r.after.kernels, r.before.kernels);
  for (const Node* n : f.graph->nodes()) {
    if (!n->body) continue;
    for (const Node* b : n->body->nodes()) {
      for (const Value* v : b->outputs()) {
        ASSERT_TRUE(v->type.shape) << v->name();
        for (const Dim& d : *v->type.shape) EXPECT_TRUE(d.is_known()) << v->name() << ": " << d.to_string();
      }
    }
  }
  runtime::Session fs(*f.graph);
  for (const auto& [node, why] : fs.codegen_fallbacks()) ADD_FAILURE() << node << " runs op by op: " << why;
  for (int64_t n : {1, 5}) {
    runtime::Session a(*m.graph), b(*f.graph);
    auto inputs = tools::random_inputs(*m.graph, 3, n);
    auto want = a.run(inputs), got = b.run(inputs);
    auto cmp = tools::compare(got[0], want[0], 1e-5, 1e-6);
    EXPECT_TRUE(cmp.ok) << "B = L = " << n << ": " << cmp.message;
  }
}

}  // namespace
}  // namespace gaf
