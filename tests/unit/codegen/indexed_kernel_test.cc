// Groups with injective ops run as one generated kernel whose index arithmetic folds the Reshape / Transpose /
// Slice / Expand / Split / Squeeze in; each test checks the group is generated (no op-by-op fallback) and agrees
// with the unfused run.
#include "test_util.h"

namespace gaf {
namespace {

using testing::expect_same_outputs;
using testing::parse;

const char* kHeader = "<ir_version: 8, opset_import: [\"\" : 17]> ";

// The model `text` fused at opt level 3.
Model fused(const Model& m) {
  tools::FuseOptions opts;
  opts.fusion.opt_level = 3;
  return testing::fused_copy(m, opts);
}
Model fused(const std::string& text) { return fused(parse(kHeader + text)); }

// Fuses `text` at opt level 3, expects `groups` fused nodes all running as generated kernels, and the same outputs.
void expect_generated(const std::string& text, int groups, const std::string& header = kHeader) {
  Model m = parse(header + text);
  Model f = fused(m);
  EXPECT_EQ(testing::count_fused(*f.graph), groups) << f.graph->to_string();
  runtime::Session s(*f.graph);
  EXPECT_EQ(s.generated_kernels(), size_t(groups)) << f.graph->to_string();
  for (const auto& [node, why] : s.codegen_fallbacks()) ADD_FAILURE() << node << " runs op by op: " << why;
  expect_same_outputs(m, f);
}

TEST(IndexedKernel, HeadMergeTransposeAndResidual) {
  // PyTorch's head merge before a residual add: [12,L,64] -> Transpose -> Reshape [L,768] -> Add, then a Relu.
  expect_generated(R"(g (float[12,40,64] h, float[40,768] res) => (float[40,768] y) {
      t = Transpose <perm = [1, 0, 2]> (h)
      s = Constant <value = int64[2] {40, 768}> ()
      r = Reshape(t, s)  a = Add(r, res)  y = Relu(a) })",
                   1);
}

TEST(IndexedKernel, OutputsOfDifferentShapesGetALoopNestEach) {
  // A head split read by fused attention: Q stays [B, L, H, D] (the attention reads it through q_perm), K and V
  // are transposed to [B, H, L, D] for the KV cache; one kernel, two loop nests.
  expect_generated(R"(g (float[2,5,48] qkv) => (float[2,5,2,8] q, float[2,2,5,8] k, float[2,2,5,8] v) {
      sp = Constant <value = int64[3] {16, 16, 16}> ()  h = Constant <value = int64[4] {2, 5, 2, 8}> ()
      a, b, c = Split <axis = 2> (qkv, sp)
      q = Reshape(a, h)  kr = Reshape(b, h)  k = Transpose <perm = [0, 2, 1, 3]> (kr)
      vr = Reshape(c, h)  v = Transpose <perm = [0, 2, 1, 3]> (vr) })",
                   1);
}

TEST(IndexedKernel, RowKernelReadsOperandsBroadcastOverOuterDims) {
  // Token + position embeddings ([1, L, C] over the batch), a per-batch bias ([B, 1, 1]) and a LayerNorm row.
  expect_generated(R"(g (float[3,5,8] x, float[1,5,8] pe, float[3,1,1] b, float[8] g) => (float[3,5,8] y) {
      a = Add(x, pe)  c = Add(a, b)  y = LayerNormalization <axis = -1> (c, g) })",
                   1);
}

TEST(IndexedKernel, IntegerPositionsCastToFloat) {
  // Rotary angles: int64 positions cast to float inside the kernel (the only reader of the integer input).
  expect_generated(R"(g (int64[7] pos) => (float[7,1] t) {
      f = Cast <to = 1> (pos)  ax = Constant <value = int64[1] {1}> ()  t = Unsqueeze(f, ax) })",
                   1);
}

TEST(IndexedKernel, ElementwiseBetweenTransposes) {
  expect_generated(R"(g (float[3,5,7] x, float[7,5] b) => (float[3,5,7] y) {
      t = Transpose <perm = [0, 2, 1]> (x)  u = Mul(t, b)  v = Tanh(u)  y = Transpose <perm = [0, 2, 1]> (v) })",
                   1);
}

TEST(IndexedKernel, SliceWithStepsExpandAndSqueeze) {
  // Every other column, reversed rows; a per-row value expanded; a size-1 axis dropped.
  expect_generated(R"(g (float[4,1,9,10] x, float[4,1,9,1] r) => (float[4,5,5] y) {
      st = Constant <value = int64[2] {8, 1}> ()  en = Constant <value = int64[2] {-100, 100}> ()
      ax = Constant <value = int64[2] {2, 3}> ()  sp = Constant <value = int64[2] {-2, 2}> ()
      s = Slice(x, st, en, ax, sp)
      es = Constant <value = int64[4] {4, 1, 5, 5}> ()
      st2 = Constant <value = int64[1] {8}> ()  en2 = Constant <value = int64[1] {-100}> ()
      ax2 = Constant <value = int64[1] {2}> ()  sp2 = Constant <value = int64[1] {-2}> ()
      rs = Slice(r, st2, en2, ax2, sp2)
      e = Expand(rs, es)
      a = Sub(s, e)
      sq = Constant <value = int64[1] {1}> ()
      q = Squeeze(a, sq)
      y = Abs(q) })",
                   1);
}

TEST(IndexedKernel, SplitIntoHeads) {
  // A fused QKV projection output split three ways, each half scaled: a multi-output group.
  expect_generated(R"(g (float[16,96] qkv) => (float[16,2,16] q, float[16,2,16] k, float[16,2,16] v) {
      parts = Constant <value = int64[3] {32, 32, 32}> ()
      a, b, c = Split <axis = 1> (qkv, parts)
      s = Constant <value = int64[3] {16, 2, 16}> ()
      qa = Reshape(a, s)  ka = Reshape(b, s)  va = Reshape(c, s)
      h = Constant <value = float {0.5}> ()
      q = Mul(qa, h)  k = Neg(ka)  v = Relu(va) })",
                   1);
}

TEST(IndexedKernel, SymbolicBatchThroughReshape) {
  expect_generated(R"(g (float[N,6,4] x, float[4] b) => (float[N,6,4] y) {
      f = Constant <value = int64[2] {0, -1}> ()  s = Constant <value = int64[3] {0, 6, 4}> ()
      r = Reshape(x, f)  e = Exp(r)  back = Reshape(e, s)  y = Add(back, b) })",
                   1);
}

// The fused node of a fused model with one group, and its kernel's source.
std::string kernel_source(const Model& f) {
  for (const Node* n : f.graph->nodes())
    if (n->body) {
      std::string why;
      auto k = codegen::emit_kernel(*n, "k", {}, &why);
      EXPECT_TRUE(k.has_value()) << why;
      return k ? k->source : "";
    }
  ADD_FAILURE() << "no fused node";
  return "";
}

// The part of a kernel's source after its last "#pragma omp simd": the innermost loop's body and what follows.
std::string innermost(const std::string& source) {
  const size_t at = source.rfind("#pragma omp simd");
  EXPECT_NE(at, std::string::npos) << source;
  return at == std::string::npos ? "" : source.substr(at);
}

TEST(IndexedKernel, SymbolicHeadSplitWithoutDivisions) {
  // A decoder's QKV split into heads with batch and sequence symbolic ([B,S,96] -> [B,S,2,16] -> [B,2,S,16]): the
  // symbolic dims face themselves across the Reshape, so the head index is a multiply-add and the inner loop
  // reads contiguously; before, each element divided its linear index by S * 32 and took it modulo S.
  const std::string text = R"(g (float[B,S,96] qkv) => (float[B,2,S,16] k, float[B,2,S,16] v) {
      sp = Constant <value = int64[3] {32, 32, 32}> ()  h = Constant <value = int64[4] {0, 0, 2, 16}> ()
      a, b, c = Split <axis = 2> (qkv, sp)
      kr = Reshape(b, h)  k = Transpose <perm = [0, 2, 1, 3]> (kr)
      vr = Reshape(c, h)  v = Transpose <perm = [0, 2, 1, 3]> (vr) })";
  expect_generated(text, 1);
  const std::string inner = innermost(kernel_source(fused(text)));
  EXPECT_EQ(inner.find(" / "), std::string::npos) << inner;
  EXPECT_EQ(inner.find(" % "), std::string::npos) << inner;
  EXPECT_NE(inner.find("sym[1]"), std::string::npos) << inner;  // the loop is the symbolic one
}

TEST(IndexedKernel, SymbolicHeadMergeDividesByTheHeadSizeOnly) {
  // Its twin: merging heads back ([B,S,2,16] -> [B,S,32]) reads a run whose input side has two dims, so the
  // index is split again, by the constant head size; no symbol is divided by.
  const std::string text = R"(g (float[B,S,2,16] x) => (float[B,S,32] y) {
      f = Constant <value = int64[3] {0, 0, 32}> ()  e = Exp(x)  m = Reshape(e, f)  y = Neg(m) })";
  expect_generated(text, 1);
  const std::string inner = innermost(kernel_source(fused(text)));
  EXPECT_NE(inner.find(" / (int64_t(16))"), std::string::npos) << inner;
  EXPECT_EQ(inner.find("/ (sym["), std::string::npos) << inner;
  EXPECT_EQ(inner.find("% sym["), std::string::npos) << inner;
}

TEST(IndexedKernel, ColumnReductionWithProducers) {
  // Sum over the leading axis: each output element loops over the 8 batch entries of its producers.
  expect_generated(R"(g (float[8,64,49] x, float[64,49] b) => (float[64,49] y) {
      a = Add(x, b)  r = Relu(a)  m = Mul(r, r)  ax = Constant <value = int64[1] {0}> ()
      y = ReduceSum <keepdims = 0> (m, ax) })",
                   1);
}

TEST(IndexedKernel, MiddleAxisMeanAndReductionBehindTranspose) {
  expect_generated(R"(g (float[4,32,50] x) => (float[4,1,50] y) {
      e = Exp(x)  y = ReduceMean <axes = [1], keepdims = 1> (e) })",
                   1);
  // A Transpose in front of a row reduction: the row kernel reads rows contiguously, the indexed one does not.
  expect_generated(R"(g (float[6,20,9] x) => (float[9,6] y) {
      t = Transpose <perm = [2, 0, 1]> (x)  n = Neg(t)  y = ReduceMax <axes = [2], keepdims = 0> (n) })",
                   1);
}

TEST(IndexedKernel, ChannelsLastGlobalPoolInChannelBlocks) {
  // NHWC global pooling, [1,14,14,200] -> [1,1,1,200]: one output row, so the work items are blocks of channels
  // (on two threads 64 wide, the last one 8), parallel (39200 elements read), each a vector loop under the
  // spatial loops; a SiLU producer computed per element read.
  expect_generated(R"(g (float[1,14,14,200] x) => (float[1,1,1,200] y) {
      s = Sigmoid(x)  m = Mul(x, s)  y = ReduceMean <axes = [1, 2]> (m) })",
                   1);
  // A max without keepdims over two batch rows, 130 channels (on two threads blocks of 128 and 2).
  expect_generated(R"(g (float[2,12,12,130] x) => (float[2,130] y) {
      n = Neg(x)  y = ReduceMax <axes = [1, 2], keepdims = 0> (n) })",
                   1);
}

TEST(IndexedKernel, LongColumnSumsInFp32Partials) {
  // Sums over more steps than a partial holds (64): three full partials and a short one (200 rows), blocks wider
  // than 64 outputs (1100 columns: 1024-wide blocks where the threads still get two items each, and a short
  // last block), two reduced axes (the partials run over the inner one, 70 steps), and L1 / LogSum forms.
  expect_generated(R"(g (float[200,1100] x) => (float[1,1100] y) {
      a = Abs(x)  ax = Constant <value = int64[1] {0}> ()  y = ReduceSum <keepdims = 1> (a, ax) })",
                   1);
  expect_generated(R"(g (float[3,130,2,70] x) => (float[3,1,2,1] y) {
      e = Exp(x)  y = ReduceMean <axes = [1, 3], keepdims = 1> (e) })",
                   1);
  expect_generated(R"(g (float[300,70] x) => (float[70] y) {
      n = Neg(x)  y = ReduceL1 <axes = [0], keepdims = 0> (n) })",
                   1);
  expect_generated(R"(g (float[300,70] x) => (float[70] z) {
      r = Relu(x)  h = Constant <value = float {1.0}> ()  p = Add(r, h)
      z = ReduceLogSum <axes = [0], keepdims = 0> (p) })",
                   1);
}

TEST(IndexedKernel, MiddleAxisNormalisationThroughAScratchBuffer) {
  // x - mean(x over C) then scaled: the reduction's result is read back broadcast, and Relu(x) is also an output.
  expect_generated(R"(g (float[2,16,30] x) => (float[2,16,30] y, float[2,16,30] r) {
      r = Relu(x)  m = ReduceMean <axes = [1], keepdims = 1> (r)  d = Sub(r, m)  h = Constant <value = float {0.5}> ()
      y = Mul(d, h) })",
                   1);
}


TEST(IndexedKernel, FewOutputsSplitTheReducedRange) {
  // A loss, the mean of (x - t)^2 over a whole [256, 1024] tensor: one output, whose reduced range goes to the
  // threads in 8 chunks of 32 rows (262144 elements read, 32768 a chunk), each a vector reduction along the rows.
  const std::string loss = R"(g (float[256,1024] x, float[256,1024] t) => (float y) {
      d = Sub(x, t)  s = Mul(d, d)  y = ReduceMean <keepdims = 0> (s) })";
  expect_generated(loss, 1);
  EXPECT_NE(kernel_source(fused(loss)).find("extent * c / chunks"), std::string::npos);
  // Two long rows over the trailing axes: the row kernel would run each on one thread, so the indexed form runs
  // them, split (a max, its NaN handling merged across chunks below).
  const std::string rows = R"(g (float[2,300,400] x) => (float[2,1,1] y) {
      n = Neg(x)  y = ReduceMax <axes = [1, 2]> (n) })";
  expect_generated(rows, 1);
  EXPECT_NE(kernel_source(fused(rows)).find("extent * c / chunks"), std::string::npos);
  // Squares in double through the chunks; a column sum over a long leading axis into 6 outputs (fp32 partials).
  expect_generated(R"(g (float[3,64,2048] x) => (float[3] y) {
      a = Abs(x)  y = ReduceL2 <axes = [1, 2], keepdims = 0> (a) })",
                   1);
  expect_generated(R"(g (float[32768,2,3] x) => (float[2,3] y) {
      e = Exp(x)  ax = Constant <value = int64[1] {0}> ()  y = ReduceSum <keepdims = 0> (e, ax) })",
                   1);
  // Statistics of a whole tensor read back over it, (x - mean) / max: two reductions into scratch buffers, then
  // a nest that reads them (the row kernel has no form for a reduction over every axis).
  expect_generated(R"(g (float[100,100] x) => (float[100,100] y) {
      m = ReduceMean <keepdims = 1> (x)  h = ReduceMax <keepdims = 1> (x)  d = Sub(x, m)  y = Div(d, h) })",
                   1);
  // The does-not-split twin: 4096 rows of 16 read whole, one row per item, as before.
  const std::string many = R"(g (float[4096,16] x) => (float[4096] y) {
      n = Neg(x)  y = ReduceMin <axes = [1], keepdims = 0> (n) })";
  expect_generated(many, 1);
  EXPECT_EQ(kernel_source(fused(many)).find("extent * c / chunks"), std::string::npos);
}

TEST(IndexedKernel, SplitReductionsAreExactAboutNaNAndThreadCounts) {
  // Two reductions of one tensor in one kernel (a max and a sum, horizontally fused at opt level 3). A NaN in
  // one chunk makes the max NaN (chunk partials merged with NaN kept); the chunking depends on the shape only, so
  // one thread and two give the same bits.
  const std::string text = R"(g (float[64,20000] x) => (float y, float z) {
      n = Neg(x)  y = ReduceMax <keepdims = 0> (n)  a = Abs(x)  z = ReduceSum <keepdims = 0> (a) })";
  expect_generated(text, 1);
  Model f = fused(text);
  std::vector<Tensor> in = tools::random_inputs(*f.graph, 3);
  auto run = [&](int threads) {
    testing::OneThread restore;  // puts the count back after
    omp_set_num_threads(threads);
    runtime::Session s(*f.graph);
    return s.run(in);
  };
  auto one = run(1), two = run(2);
  ASSERT_EQ(one.size(), 2u);
  EXPECT_FALSE(std::isnan(one[0].data<float>()[0]));
  EXPECT_EQ(one[0].data<float>()[0], two[0].data<float>()[0]);
  EXPECT_EQ(one[1].data<float>()[0], two[1].data<float>()[0]);
  in[0].data<float>()[37 * 20000 + 11] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(run(2)[0].data<float>()[0]));
}

TEST(RowKernel, SoftmaxBeforeOpset13RowsFromItsAxis) {
  // Opset 11 coerces the input to 2-D at `axis`: the row is every axis from it on (default axis 1: [6, 10] rows
  // of a [4, 6, 10] tensor), which the row kernel reads as one row of 60.
  const std::string opset11 = "<ir_version: 7, opset_import: [\"\" : 11]> ";
  expect_generated(R"(g (float[4,6,10] x) => (float[4,6,10] y) { a = Relu(x)  y = Softmax(a) })", 1, opset11);
  expect_generated(R"(g (float[4,6,10] x) => (float[4,6,10] y) { a = Tanh(x)  y = LogSoftmax <axis = 2> (a) })", 1,
                   opset11);
  expect_generated(R"(g (float[3,5,7] x) => (float[3,5,7] y) { a = Neg(x)  y = Softmax <axis = -2> (a) })", 1,
                   opset11);
}

TEST(RowKernel, MasksAndNormStatisticsInTheRow) {
  // A mask made in the row (Greater) read by Where before the Softmax: written into Where's formula, no buffer.
  expect_generated(R"(g (float[64,256] x) => (float[64,256] y) {
      a = Relu(x)  k = Constant <value = float {0.5}> ()  c = Greater(a, k)  z = Constant <value = float {0.0}> ()
      w = Where(c, a, z)  y = Softmax <axis = -1> (w) })",
                   1);
  // LayerNormalization's Mean and InvStdDev returned by the group: one value per row each.
  expect_generated(R"(g (float[64,256] x, float[256] s, float[256] b) => (float[64,256] y, float[64,1] m, float[64,1] v) {
      a = Relu(x)  y, m, v = LayerNormalization <axis = -1> (a, s, b) })",
                   1);
  expect_generated(R"(g (float[4,8,30] x, float[8,30] s) => (float[4,8,30] y, float[4,1,1] v) {
      a = Neg(x)  y, m, v = LayerNormalization <axis = 1> (a, s) })",
                   1);
}

TEST(RowKernel, RowExtremesInWholeVectorsGiveTheUnfusedValuesNaNAndInfinitiesIncluded) {
  // Rows of 100: whole vectors, then a tail of 4 (16 or 8 lanes). The softmax's maximum and the ReduceMax /
  // ReduceMin of the same row, one kernel; NaN in a vector's lane or in the tail, infinities, signed zeros.
  const std::string text = R"(g (float[8,100] x) => (float[8,100] y, float[8,1] m, float[8,1] n) {
      a = Neg(x)  y = Softmax <axis = -1> (a)  m = ReduceMax <axes = [1]> (a)  n = ReduceMin <axes = [1]> (a) })";
  expect_generated(text, 1);
  Model m = parse(kHeader + text);
  Model f = fused(m);
  std::vector<Tensor> in = tools::random_inputs(*m.graph, 5);
  float* x = in[0].data<float>();
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  x[1 * 100 + 5] = nan;                             // in a whole vector
  x[2 * 100 + 98] = nan;                            // in the tail
  x[3 * 100 + 40] = -inf;                           // the row's maximum after Neg: +inf
  x[4 * 100 + 99] = inf;                            // its minimum, in the tail: -inf
  for (int j = 0; j < 100; ++j) x[5 * 100 + j] = j % 2 ? 0.0f : -0.0f;  // every element a zero
  x[6 * 100 + 17] = -3e38f;                         // a large maximum in a vector
  runtime::Session su(*m.graph), sf(*f.graph);
  auto want = su.run(in), got = sf.run(in);
  ASSERT_EQ(got.size(), 3u);
  for (size_t o = 0; o < 3; ++o)
    for (int64_t i = 0; i < want[o].numel(); ++i) {
      const float w = want[o].data<float>()[i], g = got[o].data<float>()[i];
      if (std::isnan(w) || std::isnan(g) || std::isinf(w) || std::isinf(g))
        EXPECT_TRUE((std::isnan(w) && std::isnan(g)) || w == g) << "output " << o << " element " << i << ": " << w
                                                                << " unfused, " << g << " fused";
      else
        EXPECT_NEAR(g, w, 1e-6 * std::abs(w) + 1e-30) << "output " << o << " element " << i;
    }
  EXPECT_TRUE(std::isnan(got[1].data<float>()[1]) && std::isnan(got[2].data<float>()[2]));
  EXPECT_EQ(got[1].data<float>()[3], inf);
  EXPECT_EQ(got[2].data<float>()[4], -inf);
  EXPECT_EQ(got[1].data<float>()[5], 0.0f);
  EXPECT_EQ(got[1].data<float>()[6], 3e38f);
}

TEST(IndexedKernel, ConcatAlongAnOuterAxisSelectsItsOperand) {
  // Rows from three operands (one of them twice, one transposed first), then elementwise work: every operand is
  // read at its row clamped into its own range and the right one selected, row by row.
  expect_generated(R"(g (float[2,6] a, float[6,3] b, float[1,6] c) => (float[8,6] y) {
      bt = Transpose <perm = [1, 0]> (b)  k = Concat <axis = 0> (a, bt, c, a)  y = Tanh(k) })",
                   1);
}

TEST(IndexedKernel, ChannelConcatLoopsOverItsOperands) {
  // DenseNet's concatenation of channels-last features, then its BatchNorm as a multiply-add and a ReLU: one
  // inner loop per operand's channel range, of 7 operands (more than an outer-axis Concat may have).
  expect_generated(R"(g (float[1,3,3,5] a, float[1,3,3,4] b, float[1,3,3,4] c, float[1,3,3,4] d,
                         float[1,3,3,4] e, float[1,3,3,4] f, float[1,3,3,1] h, float[26] s) => (float[1,3,3,26] y) {
      k = Concat <axis = 3> (a, b, c, d, e, f, h)  m = Mul(k, s)  y = Relu(m) })",
                   1);
}

}  // namespace
}  // namespace gaf
