#include "pass_test_util.h"

namespace gaf {
namespace {

using testing::expect_same_outputs;
using testing::header;
using testing::rewrite;

const char* kPass = "shape-inference";

testing::Rewritten infer(const std::string& text) {
  std::vector<std::unique_ptr<Pass>> passes;
  passes.push_back(make_constant_folding());
  passes.push_back(make_shape_inference());
  return rewrite(testing::parse(text), std::move(passes));
}

std::string type_of(const Model& m, const std::string& value) {
  const Value* v = m.graph->find_value(value);
  return v ? v->type.to_string() : "missing";
}

// How many of the value's dims are known (static, or a symbol of the model's own).
int known_dims(const Model& m, const std::string& value) {
  const Value* v = m.graph->find_value(value);
  if (!v || !v->type.shape) return 0;
  return int(std::count_if(v->type.shape->begin(), v->type.shape->end(), [](const Dim& d) { return d.is_known(); }));
}

TEST(ShapeInference, ShapesFromFoldedConstants) {
  // What PyTorch exports for q/k/v = x.chunk(3, -1) and a head split: Slice bounds and the Reshape target are
  // computed from constants, so ONNX shape inference at import leaves the results unknown.
  auto r = infer(header(13) + R"(g (float[2,5,12] x) => (float[2,5,2,2] y, float[2,1,5,4] u, float[2,5] s) {
      one = Constant <value = int64[1] {1}> ()  four = Constant <value = int64[1] {4}> ()
      ax = Constant <value = int64[1] {-1}> ()
      st = Mul(one, four)  en = Add(st, four)
      k = Slice(x, st, en, ax)
      d0 = Constant <value = int64[2] {2, 5}> ()  d1 = Constant <value = int64[2] {2, -1}> ()
      shp = Concat <axis = 0> (d0, d1)
      y = Reshape(k, shp)
      zero = Constant <value = int64[1] {0}> ()  uax = Add(zero, one)
      u = Unsqueeze(k, uax)
      s = ReduceSum <keepdims = 0> (k, ax) })");
  EXPECT_EQ(type_of(r.before, "k"), "float[*]") << "ONNX now infers this; pick another example";
  EXPECT_EQ(type_of(r.after, "k"), "float[2,5,4]") << r.dump();
  EXPECT_EQ(type_of(r.after, "y"), "float[2,5,2,2]");
  EXPECT_EQ(type_of(r.after, "u"), "float[2,1,5,4]");
  EXPECT_GE(r.count(kPass), 1);
  expect_same_outputs(r.before, r.after);
}

TEST(ShapeInference, ReshapeTargetsComputedFromASymbolicShape) {
  // A dynamic-axes export's head split: the target is Concat(Shape(x)[0], Shape(x)[1], 4, 16), [B, L, 4, 16]
  // (through Gather, Slice, Unsqueeze and Cast); Expand and ConstantOfShape read such shapes too.
  auto r = infer(header(13) + R"(g (float[B,L,64] x, float[1,L] m) => (float[?,?,?,?] y, float[?,?] e, float[?,?] z) {
      s = Shape(x)
      i0 = Constant <value = int64 {0}> ()  b = Gather(s, i0)
      ax = Constant <value = int64[1] {0}> ()  bu = Unsqueeze(b, ax)
      one = Constant <value = int64[1] {1}> ()  two = Constant <value = int64[1] {2}> ()
      l = Slice(s, one, two)  lc = Cast <to = 7> (l)
      hd = Constant <value = int64[2] {4, 16}> ()
      shp = Concat <axis = 0> (bu, lc, hd)
      y = Reshape(x, shp)
      bl = Concat <axis = 0> (bu, lc)
      e = Expand(m, bl)
      z = ConstantOfShape(bl) })");
  EXPECT_EQ(type_of(r.before, "y"), "float[?,?,?,?]") << "ONNX now infers this; pick another example";
  EXPECT_EQ(type_of(r.after, "y"), "float[B,L,4,16]") << r.dump();
  EXPECT_EQ(type_of(r.after, "e"), "float[B,L]");
  EXPECT_EQ(type_of(r.after, "z"), "float[B,L]");
  expect_same_outputs(r.before, r.after);
}

TEST(ShapeInference, SlicesWithComputedBounds) {
  // HF's bias[:, :, key_length - query_length : key_length]: start L - L = 0 and end L on a dim that is L keeps
  // it; a start of 1 gives L - 1, an end L on a static dim min(L, 16).
  auto r = infer(header(13) + R"(g (float[B,L,8] y, float[1,16,8] c) => (float[?,?,?] a, float[?,?,?] u, float[?,?,?] w) {
      s = Shape(y)  i = Constant <value = int64[1] {1}> ()  l = Gather(s, i)
      z = Sub(l, l)  ax = Constant <value = int64[1] {1}> ()
      a = Slice(y, z, l, ax)
      one = Constant <value = int64[1] {1}> ()  u = Slice(y, one, l, ax)
      w = Slice(c, z, l, ax) })");
  EXPECT_NE(type_of(r.before, "a"), "float[B,L,8]") << "ONNX now infers this; pick another example";
  EXPECT_EQ(type_of(r.after, "a"), "float[B,L,8]") << r.dump();
  EXPECT_EQ(type_of(r.after, "u"), "float[B,L-1,8]") << r.dump();
  EXPECT_EQ(type_of(r.after, "w"), "float[1,min(L,16),8]") << r.dump();
  expect_same_outputs(r.before, r.after);
}

TEST(ShapeInference, DecoderSizesAsSumsOfSymbols) {
  // A decode step with dynamic axes: positions Range(P, P + T), presents Concat(past, new) of P + T rows, the
  // causal mask cut from a [16, 16] buffer at [(P+T) - T : P+T, : P+T] (cut(T,16) by min(P+T,16)), a start
  // counted from the end (x[:, -2:] of T rows: 2), and a Range whose length is a number.
  auto r = infer(header(14) + R"(g (float[B,T,8] x, float[B,2,P,4] past, float[B,2,T,4] k, float[1,16,16] c)
      => (int64[?] pos, float[?,?,?,?] kv, float[?,?,?] m, float[?,?,?] tail, int64[?] five) {
      sx = Shape(x)  sp = Shape(past)  i1 = Constant <value = int64 {1}> ()  i2 = Constant <value = int64 {2}> ()
      t = Gather(sx, i1)  p = Gather(sp, i2)  e = Add(p, t)  pos = Range(p, e, i1)
      kv = Concat <axis = 2> (past, k)
      skv = Shape(kv)  l = Gather(skv, i2)  st = Sub(l, t)
      a0 = Constant <value = int64[1] {0}> ()  a1 = Constant <value = int64[1] {1}> ()  a2 = Constant <value = int64[1] {2}> ()
      stu = Unsqueeze(st, a0)  lu = Unsqueeze(l, a0)
      m1 = Slice(c, stu, lu, a1)  m = Slice(m1, a0, lu, a2)
      m2 = Constant <value = int64[1] {-2}> ()  big = Constant <value = int64[1] {9223372036854775807}> ()
      tail = Slice(x, m2, big, a1)
      i3 = Constant <value = int64 {3}> ()  i13 = Constant <value = int64 {13}> ()  five = Range(i3, i13, i2) })");
  EXPECT_EQ(type_of(r.after, "pos"), "int64[T]") << r.dump();
  EXPECT_EQ(type_of(r.after, "kv"), "float[B,2,P+T,4]") << r.dump();
  EXPECT_EQ(type_of(r.after, "m"), "float[1,cut(T,16),min(P+T,16)]") << r.dump();
  EXPECT_EQ(type_of(r.after, "tail"), "float[B,2,8]") << r.dump();
  EXPECT_EQ(type_of(r.after, "five"), "int64[5]") << r.dump();
  runtime::Session s(*r.after.graph);
  auto out = s.run(tools::random_inputs(*r.after.graph, 3, std::map<std::string, int64_t>{{"B", 2}, {"T", 3}, {"P", 5}}));
  EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{3}));
  EXPECT_EQ(out[1].dims(), (std::vector<int64_t>{2, 2, 8, 4}));
  EXPECT_EQ(out[2].dims(), (std::vector<int64_t>{1, 3, 8}));
  EXPECT_EQ(out[3].dims(), (std::vector<int64_t>{2, 2, 8}));
  EXPECT_EQ(out[4].dims(), (std::vector<int64_t>{5}));
}

TEST(ShapeInference, ATransposeTellsItsInputsDims) {
  // A fused body read back from ONNX: the Reshape by a computed shape is unknown, the Transpose after it known
  // from the call site.
  auto r = infer(header(14) + R"(g (float[B,T,64] x, int64[4] shp) => (float[B,4,T,16] y) {
      h = Reshape(x, shp)  y = Transpose <perm = [0, 2, 1, 3]> (h) })");
  EXPECT_NE(type_of(r.before, "h"), "float[B,T,4,16]") << "ONNX now infers this; pick another example";
  EXPECT_EQ(type_of(r.after, "h"), "float[B,T,4,16]") << r.dump();
}

TEST(ShapeInference, ShapeArithmeticItCannotFollowStaysUnknown) {
  // A target read from a runtime input, and one whose element is a product of symbols: no dim is invented.
  auto r = infer(header(13) + R"(g (float[B,L,64] x, int64[3] t) => (float[?,?,?] y, float[?,?] y2) {
      y = Reshape(x, t)
      zero = Constant <value = int64[1] {0}> ()  two = Constant <value = int64[1] {2}> ()
      s = Shape(x)  bl = Slice(s, zero, two)
      p = ReduceProd <keepdims = 1> (bl)  d = Constant <value = int64[1] {64}> ()
      shp = Concat <axis = 0> (p, d)
      y2 = Reshape(x, shp) })");
  EXPECT_EQ(type_of(r.after, "y"), "float[?,?,?]") << r.dump();
  EXPECT_EQ(type_of(r.after, "y2"), "float[?,64]") << r.dump();
}

TEST(ShapeInference, ConvolutionsAndGlobalPoolsAfterAComputedSlice) {
  // ShuffleNet's channel split: the Slice end is computed, so ONNX leaves everything after it unknown; the
  // convolutions (explicit pads and stride, SAME_UPPER with dilation, no spatial dims known) follow once it is known.
  auto r = infer(header(13) + R"(g (float[1,8,9,9] x, float[4,4,3,3] w, float[4,4,3,3] w2, float[1,8,H,W] z)
      => (float[1,?,?,?] o, float[1,?,?,?] cz) {
      two = Constant <value = int64[1] {2}> ()  zero = Constant <value = int64[1] {0}> ()
      one = Constant <value = int64[1] {1}> ()  en = Mul(two, two)
      h = Slice(x, zero, en, one)
      c = Conv <pads = [1, 1, 1, 1], strides = [2, 2]> (h, w)
      d = Conv <auto_pad = "SAME_UPPER", dilations = [2, 2]> (c, w2)
      y = GlobalAveragePool(d)
      o = Relu(y)
      hz = Slice(z, zero, en, one)
      cz = Conv (hz, w) })");
  EXPECT_EQ(type_of(r.before, "c"), "float[*]") << "ONNX now infers this; pick another example";
  EXPECT_EQ(type_of(r.after, "h"), "float[1,4,9,9]") << r.dump();
  EXPECT_EQ(type_of(r.after, "c"), "float[1,4,5,5]");
  EXPECT_EQ(type_of(r.after, "d"), "float[1,4,5,5]");
  EXPECT_EQ(type_of(r.after, "y"), "float[1,4,1,1]");
  EXPECT_EQ(type_of(r.after, "cz"), "float[1,4,?,?]");  // unknown spatial dims stay unknown
  expect_same_outputs(r.before, r.after);
}

TEST(ShapeInference, SymbolicDimsFlowThrough) {
  auto r = infer(header(13) + R"(g (float[N,8] x, float[8,3] w) => (float[N,3] y) {
      one = Constant <value = int64[1] {1}> ()  zero = Constant <value = int64[1] {0}> ()  ax = Add(zero, one)
      u = Unsqueeze(x, ax)  t = Transpose <perm = [1, 0, 2]> (u)  m = MatMul(t, w)  y = Squeeze(m, zero) })");
  EXPECT_NE(type_of(r.before, "u"), "float[N,1,8]");  // the axes come from an Add: unknown to ONNX
  EXPECT_EQ(type_of(r.after, "u"), "float[N,1,8]") << r.dump();
  EXPECT_EQ(type_of(r.after, "t"), "float[1,N,8]");
  EXPECT_EQ(type_of(r.after, "m"), "float[1,N,3]");
  expect_same_outputs(r.before, r.after);
}

TEST(ShapeInference, OpsWithoutARuleOfOurOwnGoThroughONNXInference) {
  // Swin's window padding: the pads, Tile's repeats and Range's bounds are computed, so ONNX leaves the results
  // unknown at import; once folded, ONNX's own inference functions for Pad, Tile and Range give the shapes, and
  // the MatMul after the Pad follows from it.
  auto r = infer(header(13) + R"(g (float[1,5,6,8] x, float[10,4] w) => (float[?,?,?,?] y, float[?,?,?,?] t, int64[?] q) {
      one = Constant <value = int64[1] {1}> ()  z1 = Constant <value = int64[1] {0}> ()
      z2 = Constant <value = int64[2] {0, 0}> ()  z3 = Constant <value = int64[3] {0, 0, 0}> ()  two = Add(one, one)
      pads = Concat <axis = 0> (z1, one, z2, z3, two)
      p = Pad(x, pads)
      y = MatMul(p, w)
      reps = Concat <axis = 0> (one, two, one, one)
      t = Tile(x, reps)
      n = Constant <value = int64 {3}> ()  st = Constant <value = int64 {0}> ()  lim = Mul(n, n)
      q = Range(st, lim, n) })");
  EXPECT_EQ(known_dims(r.before, "p"), 0) << "ONNX now infers this; pick another example";
  EXPECT_EQ(type_of(r.after, "p"), "float[1,6,6,10]") << r.dump();
  EXPECT_EQ(type_of(r.after, "y"), "float[1,6,6,4]");
  EXPECT_EQ(type_of(r.after, "t"), "float[1,10,6,8]");
  EXPECT_EQ(type_of(r.after, "q"), "int64[3]");
  expect_same_outputs(r.before, r.after);
}

TEST(ShapeInference, ONNXInferenceThatFailsOrCannotKnowLeavesShapesUnknown) {
  // Pads read at run time: nothing known. Pads of the wrong length: ONNX's Pad inference throws; the shape
  // stays unknown and the runtime reports the node (no crash here).
  auto r = infer(header(13) + R"(g (float[1,5,6,8] x, int64[8] pin) => (float[?,?,?,?] y, float[?,?,?,?] y2) {
      one = Constant <value = int64[1] {1}> ()  z2 = Constant <value = int64[2] {0, 0}> ()
      bad = Concat <axis = 0> (z2, one)
      y = Pad(x, pin)
      y2 = Pad(x, bad) })");
  EXPECT_EQ(known_dims(r.after, "y"), 0) << r.dump();
  EXPECT_EQ(known_dims(r.after, "y2"), 0) << r.dump();
  EXPECT_EQ(r.count(kPass), 0);
}

TEST(ShapeInference, DoesNotInventShapes) {
  // The Reshape target is a graph input: its length gives the rank, nothing gives the dims.
  auto r = infer(header(13) + R"(g (float[2,6] x, int64[2] s) => (float[?,?] y) { r = Reshape(x, s)  y = Relu(r) })");
  EXPECT_EQ(type_of(r.after, "r"), "float[?,?]") << r.dump();
  EXPECT_EQ(type_of(r.after, "y"), type_of(r.before, "y"));
}

}  // namespace
}  // namespace gaf

namespace gaf {
namespace {

// h <- tanh(h * x) * w + h in a Loop whose body reads x and (with `outer_constant`) a Constant w of the main
// graph, both captures of the body.
std::string loop_reading(bool outer_constant) {
  return header(17) + std::string(R"(g (float[4,16] x, int64 n) => (float[4,16] y) {
      t = Constant <value = bool {1}> ()
      )") + (outer_constant ? "w = Constant <value = float {0.5}> ()" : "") + R"(
      y = Loop (n, t, x) <body = step (int64 i, bool c, float[4,16] h) => (bool c_out, float[4,16] h_out) {
        c_out = Identity (c)
        a = Mul (h, x)
        b = Tanh (a)
        d = Mul (b, )" + (outer_constant ? "w" : "x") + R"()
        h_out = Add (d, h)
      }>
    })";
}

// The captures of the first Loop's body, as "name:type".
std::vector<std::string> capture_types(const Model& m) {
  std::vector<std::string> out;
  for (const Node* n : m.graph->nodes())
    if (n->op_type == "Loop") {
      const Graph& body = *n->subgraphs().at(0).second;
      for (int k = 0; k < n->implicit_inputs; ++k) {
        const Value* c = body.inputs()[body.inputs().size() - size_t(n->implicit_inputs) + size_t(k)];
        out.push_back(c->name() + ":" + c->type.to_string());
      }
    }
  return out;
}

TEST(ShapeInference, TypesASubgraphsCapturesFromTheValuesTheyStandFor) {
  // The outer Constant is typed only after import: its capture in the body has no rank until this pass.
  auto r = infer(loop_reading(true));
  const auto before = capture_types(r.before), after = capture_types(r.after);
  ASSERT_EQ(after.size(), size_t(2)) << r.dump();
  EXPECT_NE(before, after);
  for (const std::string& c : after) EXPECT_EQ(c.find("[*]"), std::string::npos) << c;
  EXPECT_NE(std::find(after.begin(), after.end(), "w:float[]"), after.end()) << fmt::format("{}", fmt::join(after, " "));
  EXPECT_GE(r.count(kPass), 1);
}

TEST(ShapeInference, CapturesTypedAtImportAreLeftAlone) {
  // Twin: the body reads only x, a typed graph input: nothing to do.
  auto r = infer(loop_reading(false));
  ASSERT_EQ(capture_types(r.after).size(), size_t(1)) << r.dump();
  EXPECT_EQ(capture_types(r.before), capture_types(r.after));
  EXPECT_EQ(capture_types(r.after)[0], "x:float[4,16]");
  EXPECT_EQ(r.count(kPass), 0) << r.dump();
}

}  // namespace
}  // namespace gaf
