#include "pass_test_util.h"

namespace gaf {
namespace {

using testing::expect_same_outputs;
using testing::header;
using testing::rewrite;

std::vector<std::unique_ptr<Pass>> shape_and_constant_folding() {
  std::vector<std::unique_ptr<Pass>> p;
  p.push_back(make_shape_folding());
  p.push_back(make_constant_folding());
  return p;
}

// Reshape(y, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])): the reshape target computed at run time.
const char* kDynamicReshape = R"(g (float[D0,6] x, float[D0,2,3] y) => (float[D0,6] z) {
    s = Shape(x)
    i = Constant <value = int64 {0}> ()
    d = Gather <axis = 0> (s, i)
    ax = Constant <value = int64[1] {0}> ()
    u = Unsqueeze(d, ax)
    m = Constant <value = int64[1] {-1}> ()
    t = Concat <axis = 0> (u, m)
    r = Reshape(y, t)
    z = Add(r, x) })";

std::string with_dim(const std::string& d0) {
  std::string text = kDynamicReshape;
  for (size_t p; (p = text.find("D0")) != std::string::npos;) text.replace(p, 2, d0);
  return header() + text;
}

TEST(ShapeFolding, StaticShapeChainBecomesAConstant) {
  auto r = testing::rewrite(testing::parse(with_dim("4")), shape_and_constant_folding());
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Add", 1}, {"Reshape", 1}})) << r.dump();
  EXPECT_EQ(r.count("shape-folding"), 1);
  EXPECT_EQ(r.count("constant-folding"), 3);
  const Value* target = r.after.graph->nodes()[0]->input(1);
  ASSERT_TRUE(target->is_constant());
  EXPECT_EQ(target->constant().to_int_vector(), (std::vector<int64_t>{4, -1}));
  expect_same_outputs(r.before, r.after);
}

TEST(ShapeFolding, SymbolicDimsStayDynamic) {
  auto r = testing::rewrite(testing::parse(with_dim("N")), shape_and_constant_folding());
  EXPECT_EQ(r.count("shape-folding"), 0) << r.dump();
  EXPECT_EQ(r.ops()["Shape"], 1);
}

// PyTorch's MultiheadAttention under a symbolic batch: the packed projection is sliced by Shape(qkv)[-1] / 3,
// whose dim is static though the shape is not.
TEST(ShapeFolding, StaticDimsOfASymbolicShape) {
  auto r = testing::rewrite(testing::parse(header() + R"(g (float[N,4,6] qkv) => (float[N,4,2] q) {
      s = Shape(qkv)
      i = Constant <value = int64[1] {-1}> ()
      e = Gather <axis = 0> (s, i)
      three = Constant <value = int64[1] {3}> ()
      d = Div(e, three)
      zero = Constant <value = int64[1] {0}> ()
      ax = Constant <value = int64[1] {2}> ()
      q = Slice(qkv, zero, d, ax) })"),
                            shape_and_constant_folding());
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Slice", 1}})) << r.dump();
  EXPECT_EQ(r.count("shape-folding"), 1);
  EXPECT_EQ(r.after.graph->nodes()[0]->input(2)->constant().to_int_vector(), (std::vector<int64_t>{2}));
  expect_same_outputs(r.before, r.after);

  // Shape's own range: [start, end) static is enough.
  auto ranged = rewrite(header(15) + R"(g (float[N,3,5] x) => (int64[2] s) { s = Shape <start = 1> (x) })",
                        make_shape_folding());
  EXPECT_EQ(ranged.count("shape-folding"), 1) << ranged.dump();
  EXPECT_EQ(ranged.after.graph->outputs()[0]->constant().to_int_vector(), (std::vector<int64_t>{3, 5}));
  expect_same_outputs(ranged.before, ranged.after);
}

TEST(ShapeFolding, GatherOfASymbolicDimDoesNotFire) {
  const char* cases[] = {
      // the gathered dim is the symbolic one (also from the end, and in a list)
      R"(g (float[N,6] x) => (int64 d) { s = Shape(x) i = Constant <value = int64 {0}> () d = Gather(s, i) })",
      R"(g (float[N,6] x) => (int64[2] d) {
          s = Shape(x) i = Constant <value = int64[2] {1, -2}> () d = Gather(s, i) })",
      // indices fed at run time
      R"(g (float[N,6] x, int64 i) => (int64 d) { s = Shape(x) d = Gather(s, i) })",
      // Shape over a range holding the symbol
      R"(g (float[2,N,6] x) => (int64[1] d) { s = Shape <start = 1> (x) i = Constant <value = int64[1] {0}> ()
          d = Gather(s, i) })",
  };
  for (const char* text : cases) {
    auto r = rewrite(header(15) + text, make_shape_folding());
    EXPECT_EQ(r.count("shape-folding"), 0) << text << "\n" << r.dump();
  }
}

TEST(ShapeFolding, ShapeStartEndAndSize) {
  auto r = rewrite(header(15) + R"(g (float[2,3,5] x) => (int64[2] s, int64 n) {
      s = Shape <start = 1> (x) n = Size(x) })",
                   make_shape_folding());
  EXPECT_EQ(r.count("shape-folding"), 2);
  EXPECT_EQ(r.after.graph->num_nodes(), 0u) << r.dump();
  EXPECT_EQ(r.after.graph->outputs()[0]->constant().to_int_vector(), (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(r.after.graph->outputs()[1]->constant().get_int(0), 30);
  expect_same_outputs(r.before, r.after);

  auto tail =
      rewrite(header(15) + R"(g (float[2,3,5] x) => (int64[1] s) { s = Shape <start = -1, end = 9> (x) })",
              make_shape_folding());
  EXPECT_EQ(tail.after.graph->outputs()[0]->constant().to_int_vector(), (std::vector<int64_t>{5}));
}

TEST(ShapeFolding, ReshapeOfReshapeCollapses) {
  auto r = rewrite(header() + R"(g (float[2,12] x) => (float[3,8] y) {
      a = Constant <value = int64[2] {4, 6}> () b = Constant <value = int64[2] {3, -1}> ()
      r1 = Reshape(x, a) y = Reshape(r1, b) })",
                   make_shape_folding());
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Reshape", 1}})) << r.dump();
  expect_same_outputs(r.before, r.after);

  // Twin: a 0 in the outer target copies a dim of the inner result, which differs from x's.
  auto twin = rewrite(header() + R"(g (float[2,12] x) => (float[4,2,3] y) {
      a = Constant <value = int64[2] {4, 6}> () b = Constant <value = int64[3] {0, 2, -1}> ()
      r1 = Reshape(x, a) y = Reshape(r1, b) })",
                      make_shape_folding());
  EXPECT_EQ(twin.ops()["Reshape"], 2) << twin.dump();
}

TEST(ShapeFolding, NoOpReshapeGoes) {
  auto r = rewrite(header() + R"(g (float[2,3] x) => (float[2,3] y) {
      s = Constant <value = int64[2] {0, -1}> () r = Reshape(x, s) y = Relu(r) })",
                   make_shape_folding());
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Relu", 1}})) << r.dump();
  expect_same_outputs(r.before, r.after);

  auto twin = rewrite(header() + R"(g (float[2,3] x) => (float[3,2] y) {
      s = Constant <value = int64[2] {3, -1}> () r = Reshape(x, s) y = Relu(r) })",
                      make_shape_folding());
  EXPECT_EQ(twin.count("shape-folding"), 0);
}

}  // namespace
}  // namespace gaf

namespace gaf {
namespace {

// The causal mask's query length read from Q after its head Transpose: the size comes from the input that
// declares the symbol instead, and the Transpose is then read by the MatMul alone. The twin: a size no graph
// input declares (P+T of a Concat) keeps its Shape.
TEST(ShapeFolding, SizeReadFromTheInputThatDeclaresItsSymbol) {
  auto r = testing::rewrite(
      testing::parse(testing::header(14) + R"(g (float[B,T,4,8] q, float[B,4,P,8] past, float[B,4,T,8] k)
          => (float[B,4,T,L] s, int64 t, int64 l) {
      qt = Transpose <perm = [0, 2, 1, 3]> (q)  kv = Concat <axis = 2> (past, k)
      kvt = Transpose <perm = [0, 1, 3, 2]> (kv)  s = MatMul(qt, kvt)
      i2 = Constant <value = int64 {2}> ()
      sq = Shape(qt)  t = Gather <axis = 0> (sq, i2)
      skv = Shape(kv)  l = Gather <axis = 0> (skv, i2) })"),
      shape_and_constant_folding());
  EXPECT_EQ(r.count("shape-folding"), 1) << r.dump();
  for (const Node* n : r.after.graph->nodes())
    if (n->op_type == "Shape") {
      EXPECT_TRUE(n->input(0)->name() == "q" || n->input(0)->name() == "kv") << r.dump();
    }
  runtime::Session a(*r.before.graph), b(*r.after.graph);
  auto in = tools::random_inputs(*r.before.graph, 1, std::map<std::string, int64_t>{{"B", 2}, {"T", 3}, {"P", 5}});
  auto x = a.run(in), y = b.run(in);
  EXPECT_EQ(y[1].get_int(0), 3);
  EXPECT_EQ(x[1].get_int(0), y[1].get_int(0));
  EXPECT_EQ(y[2].get_int(0), 8);
}

}  // namespace
}  // namespace gaf
