#include <fmt/format.h>

#include "pass_test_util.h"

namespace gaf {
namespace {

using testing::expect_same_outputs;
using testing::header;
using testing::rewrite;

const char* kPass = "transpose-fold";

TEST(TransposeFold, InversePairsCancel) {
  auto r = rewrite(header() + R"(g (float[2,3,4] x) => (float[2,3,4] y) {
      a = Transpose <perm = [1, 2, 0]> (x) b = Transpose <perm = [2, 0, 1]> (a) y = Relu(b) })",
                   make_transpose_fold());
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Relu", 1}})) << r.dump();
  EXPECT_EQ(r.count(kPass), 1);
  expect_same_outputs(r.before, r.after);
}

TEST(TransposeFold, PairsComposeIntoOne) {
  auto r = rewrite(header() + R"(g (float[2,3,4] x) => (float[3,4,2] y) {
      a = Transpose <perm = [1, 0, 2]> (x) b = Transpose <perm = [0, 2, 1]> (a) y = Relu(b) })",
                   make_transpose_fold());
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Relu", 1}, {"Transpose", 1}})) << r.dump();
  for (const Node* n : r.after.graph->nodes())
    if (n->op_type == "Transpose") {
      EXPECT_EQ(n->attr_ints("perm"), (std::vector<int64_t>{1, 2, 0}));
    }
  expect_same_outputs(r.before, r.after);
}

TEST(TransposeFold, IdentityPermutationGoes) {
  auto r = rewrite(
      header() + R"(g (float[2,3] x) => (float[2,3] y) { a = Transpose <perm = [0, 1]> (x) y = Relu(a) })",
      make_transpose_fold());
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Relu", 1}})) << r.dump();
  expect_same_outputs(r.before, r.after);
}

TEST(TransposeFold, CancellingPairBetweenGraphInputAndOutputStays) {
  // y would have to become x, a graph input: the output name would be lost.
  auto r = rewrite(header() + R"(g (float[2,3] x) => (float[2,3] y) { a = Transpose(x) y = Transpose(a) })",
                   make_transpose_fold());
  EXPECT_EQ(r.count(kPass), 0) << r.dump();
  EXPECT_EQ(r.ops()["Transpose"], 2);
}

TEST(TransposeFold, TransposedOperandsBecomeGemmFlags) {
  auto r = rewrite(header() + R"(g (float[16,8] a, float[4,16] w) => (float[8,4] y) {
      at = Transpose(a) wt = Transpose <perm = [1, 0]> (w) y = Gemm <transA = 0> (at, wt) })",
                   make_transpose_fold());
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Gemm", 1}})) << r.dump();
  const Node* gemm = r.after.graph->nodes()[0];
  EXPECT_EQ(gemm->attr_int("transA", 0), 1);
  EXPECT_EQ(gemm->attr_int("transB", 0), 1);
  expect_same_outputs(r.before, r.after);
}

TEST(TransposeFold, TwoDimensionalMatMulOfATransposeBecomesGemm) {
  auto r = rewrite(header() + R"(g (float[8,16] a, float[4,16] w) => (float[8,4] y) {
      wt = Transpose(w) y = MatMul(a, wt) })",
                   make_transpose_fold());
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Gemm", 1}})) << r.dump();
  EXPECT_EQ(r.after.graph->nodes()[0]->attr_int("transB", 0), 1);
  expect_same_outputs(r.before, r.after);

  // Twin: batched MatMul has no transpose flags.
  auto twin = rewrite(header() + R"(g (float[2,8,16] a, float[2,4,16] w) => (float[2,8,4] y) {
      wt = Transpose <perm = [0, 2, 1]> (w) y = MatMul(a, wt) })",
                      make_transpose_fold());
  EXPECT_EQ(twin.count(kPass), 0) << twin.dump();
}

TEST(TransposeFold, TransposeOfAConstantReadOnceIsFolded) {
  auto r = rewrite(header() + R"(g (float[3,2] x) => (float[3,2] y) {
      c = Constant <value = float[2,3] {1, 2, 3, 4, 5, 6}> () t = Transpose(c) y = Add(x, t) })",
                   make_transpose_fold());
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Add", 1}})) << r.dump();
  expect_same_outputs(r.before, r.after);

  // Twin: the constant is read elsewhere too; folding would keep both layouts alive.
  auto twin = rewrite(header() + R"(g (float[3,2] x, float[2,3] z) => (float[3,2] y, float[2,3] w) {
      c = Constant <value = float[2,3] {1, 2, 3, 4, 5, 6}> () t = Transpose(c) y = Add(x, t) w = Add(z, c) })",
                      make_transpose_fold());
  EXPECT_EQ(twin.count(kPass), 0) << twin.dump();
}

TEST(TransposeFold, TransposesMoveDownThroughElementwiseOpsAndCancel) {
  // Two transposed operands and a scalar: Add(Tr(a), Tr(b)) -> Tr(Add(a, b)); Clip and Relu let it through; the
  // inverse Transpose at the end then cancels it, so no Transpose is left.
  auto r = rewrite(header() + R"(g (float[2,3,4,5] a, float[2,3,4,5] b) => (float[2,3,4,5] y) {
      ta = Transpose <perm = [0, 2, 3, 1]> (a)  tb = Transpose <perm = [0, 2, 3, 1]> (b)
      s = Add(ta, tb)  lo = Constant <value = float {0}> ()  hi = Constant <value = float {6}> ()
      c = Clip(s, lo, hi)  h = Constant <value = float[1,1,1,1] {0.5}> ()  m = Mul(c, h)  r = Relu(m)
      y = Transpose <perm = [0, 3, 1, 2]> (r) })",
                   make_transpose_fold());
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Add", 1}, {"Clip", 1}, {"Mul", 1}, {"Relu", 1}})) << r.dump();
  expect_same_outputs(r.before, r.after);
}

TEST(TransposeFold, TransposesMoveDownThroughBroadcastsOfEqualRank) {
  // A squeeze-excitation scale: Mul(Tr(x [1,8,8,6]), Tr(s [1,1,1,6])) broadcasts dim by dim, so the Transpose moves
  // below it and cancels with the inverse one; a scale of lower rank ([6,1,1] against NCHW) keeps its Transposes.
  auto r = rewrite(header() + R"(g (float[1,8,8,6] x, float[1,1,1,6] s) => (float[1,8,8,6] y) {
      tx = Transpose <perm = [0, 3, 1, 2]> (x)  ts = Transpose <perm = [0, 3, 1, 2]> (s)  m = Mul(tx, ts)
      y = Transpose <perm = [0, 2, 3, 1]> (m) })",
                   make_transpose_fold());
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Mul", 1}})) << r.dump();
  expect_same_outputs(r.before, r.after);
  auto twin = rewrite(header() + R"(g (float[1,8,8,6] x, float[1,6,1] s) => (float[1,8,8,6] y) {
      tx = Transpose <perm = [0, 3, 1, 2]> (x)  ts = Transpose <perm = [1, 0, 2]> (s)  m = Mul(tx, ts)
      y = Transpose <perm = [0, 2, 3, 1]> (m) })",
                      make_transpose_fold());
  EXPECT_EQ(twin.ops().at("Transpose"), 3) << twin.dump();
  expect_same_outputs(twin.before, twin.after);
}

TEST(TransposeFold, ConstantsArePermutedAlong) {
  // A per-channel bias on NCHW, [1,3,1,1] or of lower rank ([3,1,1], ConvNeXt's layer scale): the Transpose
  // moves below the Add, the bias becomes the constant [1,1,1,3], and the pair cancels. A bias [3,1,1] that is
  // a graph input, not a constant, keeps the Transposes.
  for (const char* bias : {"float[1,3,1,1]", "float[3,1,1]"}) {
    SCOPED_TRACE(bias);
    auto r = rewrite(header() + fmt::format(R"(g (float[1,5,6,3] a) => (float[1,5,6,3] y) {{
        t = Transpose <perm = [0, 3, 1, 2]> (a)  b = Constant <value = {} {{0.5, -1.0, 2.0}}> ()
        s = Add(t, b)  y = Transpose <perm = [0, 2, 3, 1]> (s) }})",
                                              bias),
                     make_transpose_fold());
    EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Add", 1}})) << r.dump();
    for (const Node* n : r.after.graph->nodes())
      for (int i = 0; i < n->num_inputs(); ++i)
        if (n->input(i)->is_constant()) {
          EXPECT_EQ(n->input(i)->constant().dims(), (std::vector<int64_t>{1, 1, 1, 3}));
        }
    expect_same_outputs(r.before, r.after);
  }
  auto twin = rewrite(header() + R"(g (float[1,5,6,3] a, float[3,1,1] b) => (float[1,5,6,3] y) {
      t = Transpose <perm = [0, 3, 1, 2]> (a)  s = Add(t, b)  y = Transpose <perm = [0, 2, 3, 1]> (s) })",
                      make_transpose_fold());
  EXPECT_EQ(twin.ops().at("Transpose"), 2) << twin.dump();
  expect_same_outputs(twin.before, twin.after);
}

TEST(TransposeFold, TransposesDoNotMoveDown) {
  const std::string cases[] = {
      // the other operand is neither transposed nor a scalar
      R"(g (float[2,3,4] a, float[3,4,2] b) => (float[2,3,4] y) {
          t = Transpose <perm = [1, 2, 0]> (a)  s = Add(t, b)  y = Transpose <perm = [2, 0, 1]> (s) })",
      // two operands transposed differently
      R"(g (float[2,3,4] a, float[4,2,3] b) => (float[2,3,4] y) {
          t = Transpose <perm = [1, 2, 0]> (a)  u = Transpose <perm = [2, 0, 1]> (b)  s = Add(t, u)
          y = Transpose <perm = [2, 0, 1]> (s) })",
      // the transposed value is also read elsewhere
      R"(g (float[2,3,4] a) => (float[2,3,4] y, float[3,4,2] t) {
          t = Transpose <perm = [1, 2, 0]> (a)  s = Relu(t)  y = Transpose <perm = [2, 0, 1]> (s) })",
  };
  for (const auto& c : cases) {
    auto r = rewrite(header() + c, make_transpose_fold());
    EXPECT_EQ(r.ops().at("Transpose"), c.find("u = Transpose") != std::string::npos ? 3 : 2) << r.dump();
    expect_same_outputs(r.before, r.after);
  }
}

TEST(TransposeFold, ChannelsLastBranchesConcatenateWithoutLeavingChannelsLast) {
  // Two NHWC branches back to NCHW, concatenated on channels (axis 1, or -3), then to NHWC again: the Concat runs
  // on the NHWC tensors along axis 3 and no Transpose is left.
  for (const char* axis : {"1", "-3"}) {
    auto r = rewrite(header() + R"(g (float[1,5,6,3] a, float[1,5,6,4] b) => (float[1,5,6,7] y) {
        ta = Transpose <perm = [0, 3, 1, 2]> (a)  tb = Transpose <perm = [0, 3, 1, 2]> (b)
        c = Concat <axis = )" + axis + R"(> (ta, tb)  y = Transpose <perm = [0, 2, 3, 1]> (c) })",
                     make_transpose_fold());
    EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Concat", 1}})) << r.dump();
    for (const Node* n : r.after.graph->nodes()) EXPECT_EQ(n->attr_int("axis", -1), 3) << n->describe();
    expect_same_outputs(r.before, r.after);
  }
  // Three operands, one of them twice, and no Transpose after: one Transpose of the result instead of three.
  auto r = rewrite(header() + R"(g (float[2,3,4] a, float[2,5,4] b) => (float[4,11,2] y) {
      ta = Transpose <perm = [2, 1, 0]> (a)  tb = Transpose <perm = [2, 1, 0]> (b)
      y = Concat <axis = 1> (ta, tb, ta) })",
                   make_transpose_fold());
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Concat", 1}, {"Transpose", 1}})) << r.dump();
  expect_same_outputs(r.before, r.after);
}

TEST(TransposeFold, DenseBlockStaysChannelsLast) {
  // A DenseNet block: its input (back to NCHW after a channels-last pool) is read by the first layer alone and by
  // the concatenation with that layer's output. The Concat moves below the Transposes although one of them has
  // another reader; that reader then moves it on, and every Transpose cancels.
  auto r = rewrite(header() + R"(g (float[1,5,6,3] a, float[1,5,6,4] b) => (float[1,5,6,3] y1, float[1,5,6,7] y2) {
      ta = Transpose <perm = [0, 3, 1, 2]> (a)  r = Relu(ta)  y1 = Transpose <perm = [0, 2, 3, 1]> (r)
      tb = Transpose <perm = [0, 3, 1, 2]> (b)  c = Concat <axis = 1> (ta, tb)  s = Relu(c)
      y2 = Transpose <perm = [0, 2, 3, 1]> (s) })",
                   make_transpose_fold());
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Concat", 1}, {"Relu", 2}})) << r.dump();
  expect_same_outputs(r.before, r.after);
}

TEST(TransposeFold, ConcatKeepsItsTransposes) {
  const std::string cases[] = {
      // one operand not transposed
      R"(g (float[1,5,6,3] a, float[1,4,5,6] b) => (float[1,7,5,6] y) {
          ta = Transpose <perm = [0, 3, 1, 2]> (a)  y = Concat <axis = 1> (ta, b) })",
      // operands transposed differently
      R"(g (float[1,5,6,3] a, float[1,4,6,5] b) => (float[1,7,5,6] y) {
          ta = Transpose <perm = [0, 3, 1, 2]> (a)  tb = Transpose <perm = [0, 1, 3, 2]> (b)
          y = Concat <axis = 1> (ta, tb) })",
      // a transposed operand that is a graph output
      R"(g (float[1,5,6,3] a, float[1,5,6,4] b) => (float[1,7,5,6] y, float[1,3,5,6] ta) {
          ta = Transpose <perm = [0, 3, 1, 2]> (a)  tb = Transpose <perm = [0, 3, 1, 2]> (b)
          y = Concat <axis = 1> (ta, tb) })",
      // every transposed operand also read by something else: no Transpose could go
      R"(g (float[1,5,6,3] a, float[1,5,6,4] b) => (float[1,7,5,6] y, float[1,3,5,6] ra, float[1,4,5,6] rb) {
          ta = Transpose <perm = [0, 3, 1, 2]> (a)  tb = Transpose <perm = [0, 3, 1, 2]> (b)
          y = Concat <axis = 1> (ta, tb)  ra = Relu(ta)  rb = Relu(tb) })",
  };
  for (const auto& c : cases) {
    auto r = rewrite(header() + c, make_transpose_fold());
    EXPECT_EQ(r.count(kPass), 0) << r.dump();
    expect_same_outputs(r.before, r.after);
  }
}


// The Transposes of a graph, as their perms.
std::vector<std::vector<int64_t>> transposes(const Model& m) {
  std::vector<std::vector<int64_t>> out;
  for (const Node* n : m.graph->nodes())
    if (n->op_type == "Transpose") out.push_back(n->attr_ints("perm"));
  return out;
}

TEST(TransposeFold, ChannelShuffleStaysChannelsLast) {
  // ShuffleNet's channel shuffle between channels-last convolutions: NCHW -> [N, 2, C/2, H, W] -> swap the two
  // channel factors -> NCHW. The shuffle becomes a swap of the last two axes of [N, H, W, 2, C/2] and the layout
  // Transposes cancel: one Transpose is left, of the shuffle itself.
  auto r = rewrite(header() + R"(g (float[1,3,5,8] x) => (float[1,3,5,8] y) {
      a = Transpose <perm = [0, 3, 1, 2]> (x)
      s1 = Constant <value = int64[5] {1, 2, 4, 3, 5}> ()  r1 = Reshape(a, s1)
      t = Transpose <perm = [0, 2, 1, 3, 4]> (r1)
      s2 = Constant <value = int64[4] {1, -1, 3, 5}> ()  r2 = Reshape(t, s2)
      y = Transpose <perm = [0, 2, 3, 1]> (r2) })",
                   make_transpose_fold());
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Reshape", 2}, {"Transpose", 1}})) << r.dump();
  EXPECT_EQ(transposes(r.after), (std::vector<std::vector<int64_t>>{{0, 1, 2, 4, 3}})) << r.dump();
  expect_same_outputs(r.before, r.after);
}

TEST(TransposeFold, TransposesMoveDownThroughReshapesAndCancel) {
  // A channels-last feature map flattened to tokens the NCHW way, then transposed to [N, HW, C] (ViT's patch
  // embedding, x.flatten(2).transpose(1, 2)): the reshape merges H and W, adjacent in NHWC too, and the two
  // Transposes meet and cancel. Unsqueeze and Flatten are reshapes as well.
  auto r = rewrite(header() + R"(g (float[2,3,4,8] x) => (float[2,12,8] y, float[2,8,1,12] u, float[2,96] f) {
      a = Transpose <perm = [0, 3, 1, 2]> (x)
      s = Constant <value = int64[3] {2, 8, 12}> ()  r = Reshape(a, s)
      rl = Relu(r)  y = Transpose <perm = [0, 2, 1]> (rl)
      b = Transpose <perm = [0, 3, 1, 2]> (x)  ax = Constant <value = int64[1] {2}> ()
      bs = Reshape(b, s)  u = Unsqueeze(bs, ax)
      c = Transpose <perm = [0, 3, 1, 2]> (x)  f = Flatten <axis = 1> (c) })",
                   make_transpose_fold());
  // y: none left. u: the Unsqueeze's unit dim rides along, one Transpose after it. f: flattening C, H, W reorders
  // the NHWC data, so that Transpose stays.
  EXPECT_EQ(transposes(r.after), (std::vector<std::vector<int64_t>>{{0, 3, 1, 2}, {0, 3, 1, 2}})) << r.dump();
  EXPECT_EQ(r.ops()["Relu"], 1);
  EXPECT_EQ(r.ops()["Flatten"], 1);
  expect_same_outputs(r.before, r.after);
}

TEST(TransposeFold, ReshapeKeepsItsTranspose) {
  const std::string cases[] = {
      // merged dims not adjacent in x: heads merged back after attention ([B, H, L, D] -> [B, L, H*D])
      R"(g (float[2,3,4,5] x) => (float[2,4,15] y) {
          t = Transpose <perm = [0, 2, 1, 3]> (x)
          s = Constant <value = int64[3] {2, 4, 15}> ()  y = Reshape(t, s) })",
      // a 2-D transpose flattened: the reorder is the whole transpose, nothing would move below the reshape
      R"(g (float[3,4] x) => (float[12] y) {
          t = Transpose <perm = [1, 0]> (x)  s = Constant <value = int64[1] {12}> ()  y = Reshape(t, s) })",
      // the transposed tensor is read elsewhere too
      R"(g (float[2,3,4] x) => (float[4,6] y, float[4,2,3] t) {
          t = Transpose <perm = [2, 0, 1]> (x)  s = Constant <value = int64[2] {4, 6}> ()  y = Reshape(t, s) })",
  };
  for (const auto& c : cases) {
    auto r = rewrite(header() + c, make_transpose_fold());
    EXPECT_EQ(r.count(kPass), 0) << r.dump();
    expect_same_outputs(r.before, r.after);
  }
}

TEST(TransposeFold, ChannelSplitStaysChannelsLast) {
  // A channel split (x.chunk(2, dim=1)) of a channels-last tensor viewed as NCHW: each Slice runs on the NHWC
  // tensor along axis 3, and both halves meet the Transposes back to NHWC and cancel.
  auto r = rewrite(header() + R"(g (float[1,3,5,8] x) => (float[1,3,5,4] y, float[1,3,5,4] z) {
      a = Transpose <perm = [0, 3, 1, 2]> (x)
      s0 = Constant <value = int64[1] {0}> ()  s4 = Constant <value = int64[1] {4}> ()
      s8 = Constant <value = int64[1] {8}> ()  ax = Constant <value = int64[1] {-3}> ()
      h0 = Slice(a, s0, s4, ax)  h1 = Slice(a, s4, s8, ax)
      y = Transpose <perm = [0, 2, 3, 1]> (h0)  z = Transpose <perm = [0, 2, 3, 1]> (h1) })",
                   make_transpose_fold());
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Slice", 2}})) << r.dump();
  expect_same_outputs(r.before, r.after);
}

TEST(TransposeFold, SliceKeepsItsTranspose) {
  const std::string cases[] = {
      // the transposed tensor is also read by a Relu
      R"(g (float[1,3,5,8] x) => (float[1,4,3,5] y, float[1,8,3,5] u) {
          a = Transpose <perm = [0, 3, 1, 2]> (x)  u = Relu(a)
          s0 = Constant <value = int64[1] {0}> ()  s4 = Constant <value = int64[1] {4}> ()
          ax = Constant <value = int64[1] {1}> ()  y = Slice(a, s0, s4, ax) })",
      // axes computed at run time
      R"(g (float[1,3,5,8] x, int64[1] ax) => (float[1,?,?,?] y) {
          a = Transpose <perm = [0, 3, 1, 2]> (x)
          s0 = Constant <value = int64[1] {0}> ()  s4 = Constant <value = int64[1] {2}> ()
          y = Slice(a, s0, s4, ax) })",
  };
  for (const auto& c : cases) {
    auto r = rewrite(header() + c, make_transpose_fold());
    EXPECT_EQ(r.count(kPass), 0) << r.dump();
  }
}

}  // namespace
}  // namespace gaf
