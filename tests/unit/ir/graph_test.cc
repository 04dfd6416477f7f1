#include "gaf/graph.h"

#include <gtest/gtest.h>

#include "gaf/builder.h"
#include "gaf/op_registry.h"
#include "test_util.h"

namespace gaf {
namespace {

TEST(Graph, UsesFollowEdits) {
  Graph g;
  Value* x = g.add_input("x", {DType::Float, Shape{2, 3}});
  Node* a = g.add_node("Relu", {x}, {"a"});
  Node* b = g.add_node("Neg", {a->output(0)}, {"b"});
  g.add_output(b->output(0));
  ASSERT_EQ(x->uses().size(), 1u);
  EXPECT_EQ(x->uses()[0].node, a);
  g.replace_all_uses(a->output(0), x);
  EXPECT_EQ(b->input(0), x);
  EXPECT_TRUE(a->output(0)->uses().empty());
  g.remove_node(a);
  EXPECT_EQ(g.num_nodes(), 1u);
  EXPECT_NO_THROW(verify(g));
}

TEST(Graph, TopoSortRestoresOrderAndVerifierCatchesDisorder) {
  Graph g;
  Value* x = g.add_input("x", {DType::Float, Shape{4}});
  Node* n1 = g.add_node("Relu", {x}, {"r"});
  Node* n2 = g.add_node("Neg", {x}, {"n"});
  g.add_output(n2->output(0));
  // Make n1 depend on n2, which comes after it.
  n1->set_input(0, n2->output(0));
  EXPECT_THROW(verify(g), Error);
  g.topo_sort();
  EXPECT_NO_THROW(verify(g));
  EXPECT_EQ(g.nodes()[0], n2);
}

TEST(Graph, SymbolicDimsPrint) {
  TensorType t{DType::Float, Shape{Dim(std::string("batch")), 128, Dim()}};
  EXPECT_EQ(t.to_string(), "float[batch,128,?]");
  EXPECT_FALSE(t.has_static_shape());
}

TEST(Graph, DuplicateValueNameIsAnError) {
  Graph g;
  g.add_input("x", {DType::Float, Shape{1}});
  EXPECT_THROW(g.add_input("x", {DType::Float, Shape{1}}), Error);
}

TEST(Graph, CloneIsDeep) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::Float, {2, 2});
  b.output(b.op("Relu", {b.op("Add", {x, b.scalar(1.0f)})}));
  b.finish();
  auto c = m.graph->clone();
  EXPECT_EQ(c->num_nodes(), 2u);
  EXPECT_NE(c->nodes()[0], m.graph->nodes()[0]);
  EXPECT_NO_THROW(verify(*c));
  EXPECT_EQ(c->to_string(), m.graph->to_string());
}

TEST(Builder, ShapeInferenceFillsTypes) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::Float, {2, 8});
  Value* w = b.random_constant("w", {8, 4}, 0.5f);
  Value* y = b.op("MatMul", {x, w});
  b.output(y);
  b.finish();
  ASSERT_TRUE(y->type.has_static_shape());
  EXPECT_EQ(y->type.static_dims(), (std::vector<int64_t>{2, 4}));
}

TEST(OpRegistry, KindsAreOrdered) {
  EXPECT_LT(OpKind::Elementwise, OpKind::Broadcast);
  EXPECT_LT(OpKind::Injective, OpKind::Reduction);
  EXPECT_LT(OpKind::Anchor, OpKind::Opaque);
  EXPECT_EQ(op_kind_name(OpKind::Reduction), "reduction");
}

TEST(DType, HalfRoundTrip) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f, 0.33325195f}) {
    EXPECT_EQ(half_to_float(float_to_half(f)), f) << f;
  }
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.5f)), 1.5f);
}

TEST(Tensor, SetDoubleConvertsToTheElementType) {
  Tensor f(DType::Float, {2}), d(DType::Double, {2}), h(DType::Float16, {1}), i(DType::Int32, {1});
  f.set_double(1, 0.1);
  EXPECT_EQ(f.data<float>()[1], 0.1f);  // rounded once to float
  d.set_double(0, 0.1);
  EXPECT_EQ(d.data<double>()[0], 0.1);
  h.set_double(0, -2.5);
  EXPECT_EQ(h.get_double(0), -2.5);
  i.set_double(0, 7.0);
  EXPECT_EQ(i.data<int32_t>()[0], 7);
}

}  // namespace
}  // namespace gaf

namespace gaf {
namespace {

// A size that overflows 64 bits is an error naming the shape, at the tensor and through a run whose shape comes
// from the model's data (Expand to [2^40, 2^40]), never a small buffer written past its end.
TEST(Tensor, SizesThatOverflowAreErrors) {
  const int64_t big = int64_t(1) << 40;
  try {
    Tensor t(DType::Float, {big, big});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[1099511627776,1099511627776]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Tensor(DType::Double, {int64_t(1) << 31, int64_t(1) << 31}), Error);  // elements fit, bytes do not
  Model m = gaf::testing::parse(R"(<ir_version: 8, opset_import: ["" : 17]> g (float[1] x, int64[2] shape)
      => (float[?,?] y) { y = Expand(x, shape) })");
  runtime::Session s(*m.graph);
  Tensor x = Tensor::from<float>({1}, std::vector<float>{1.f});
  Tensor shape = Tensor::from<int64_t>({2}, std::vector<int64_t>{big, big});
  EXPECT_THROW(s.run(std::vector<Tensor>{x, shape}), Error);
}

}  // namespace
}  // namespace gaf
