#include "pass_test_util.h"

namespace gaf {
namespace {

using testing::expect_same_outputs;
using testing::header;
using testing::rewrite;

const char* kPass = "attention-fusion";

// nn.MultiheadAttention as PyTorch 1.13 exports it (batch 1 folded away): Q, K and V of [L, H*d] split into
// heads by Reshape + Transpose, Q divided by sqrt(d), K transposed to [H, d, L], the result transposed back.
// L = 300 is not a multiple of the query block.
std::string torch_style(const std::string& softmax = "p = Softmax <axis = -1> (s)", const std::string& extra = "",
                        int opset = 13) {
  return header(opset) + R"(g (float[300,64] q, float[300,64] k, float[300,64] v) => (float[300,64] y)" + extra +
         R"() {
    hs = Constant <value = int64[3] {300, 4, 16}> ()
    os = Constant <value = int64[2] {300, 64}> ()
    c = Constant <value = float {4.0}> ()
    qh = Reshape(q, hs)  qt = Transpose <perm = [1, 0, 2]> (qh)  qs = Div(qt, c)
    kh = Reshape(k, hs)  kt = Transpose <perm = [1, 2, 0]> (kh)
    vh = Reshape(v, hs)  vt = Transpose <perm = [1, 0, 2]> (vh)
    s = MatMul(qs, kt)
    )" + softmax + R"(
    o = MatMul(p, vt)  ot = Transpose <perm = [1, 0, 2]> (o)  y = Reshape(ot, os)
  })";
}

// Returns a copy of `m` with its gaf ops decomposed into standard ONNX (what other runtimes get).
Model decomposed(const Model& m, int opset) {
  Model c = tools::copy_model(m);
  decompose_gaf_ops(*c.graph, opset);
  return c;
}

TEST(AttentionFusion, TorchMultiheadAttentionBecomesOneNode) {
  auto r = rewrite(torch_style(), make_attention_fusion());
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Reshape", 4}, {"gaf.Attention", 1}})) << r.dump();
  EXPECT_EQ(r.count(kPass), 1);
  const Node* att = nullptr;
  for (const Node* n : r.after.graph->nodes())
    if (n->op_type == "Attention") att = n;
  ASSERT_TRUE(att);
  EXPECT_FLOAT_EQ(att->attr_float("scale", 0), 0.25f);  // the Div by 4 on Q
  EXPECT_EQ(att->attr_ints("q_perm"), (std::vector<int64_t>{1, 0, 2}));
  EXPECT_EQ(att->attr_ints("k_perm"), (std::vector<int64_t>{1, 0, 2}));  // [1,2,0] then the last two swapped
  EXPECT_EQ(att->attr_ints("out_perm"), (std::vector<int64_t>{1, 0, 2}));
  expect_same_outputs(r.before, r.after, 1e-4, 1e-5);
  expect_same_outputs(r.before, decomposed(r.after, 13), 1e-4, 1e-5);
}

TEST(AttentionFusion, ScaledScoresMaskBroadcastBatchAndCrossAttention) {
  // Scale on the scores, an additive mask, K and V shared across the batch, Lq != Lk and Dv != D.
  auto r = rewrite(header(13) + R"(g (float[2,4,70,16] q, float[1,4,600,16] k, float[1,4,600,24] v,
                                      float[1,1,70,600] mask) => (float[2,4,70,24] y) {
      kt = Transpose <perm = [0, 1, 3, 2]> (k)
      s = MatMul(q, kt)  c = Constant <value = float {0.25}> ()  ss = Mul(c, s)  sm = Add(ss, mask)
      p = Softmax <axis = 3> (sm)  y = MatMul(p, v) })",
                   make_attention_fusion());
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"gaf.Attention", 1}})) << r.dump();
  expect_same_outputs(r.before, r.after, 1e-4, 1e-5);
  expect_same_outputs(r.before, decomposed(r.after, 13), 1e-4, 1e-5);
}

TEST(AttentionFusion, InfiniteMasksAcrossKeyTiles) {
  // mask = log(triangle of ones): 0 where attended, -inf elsewhere; 600 keys are two key tiles. Causal: the
  // first rows' second key tile is masked out entirely; anti-causal: the last rows see nothing in their first tile (online softmax starts at
  // -inf and must not produce NaN).
  for (int upper : {0, 1}) {
    auto r = rewrite(header(14) + R"(g (float[1,2,600,16] q, float[1,2,600,16] k, float[1,2,600,16] v)
                                         => (float[1,2,600,16] y) {
        one = Constant <value = float {1.0}> ()  shp = Constant <value = int64[2] {600, 600}> ()
        ones = Expand(one, shp)  tri = Trilu <upper = )" + std::to_string(upper) + R"(> (ones)  mask = Log(tri)
        kt = Transpose <perm = [0, 1, 3, 2]> (k)  s = MatMul(q, kt)  c = Constant <value = float {0.25}> ()
        ss = Mul(s, c)  sm = Add(mask, ss)  p = Softmax <axis = -1> (sm)  y = MatMul(p, v) })",
                     make_attention_fusion());
    EXPECT_EQ(r.count(kPass), 1) << r.dump();
    expect_same_outputs(r.before, r.after, 1e-4, 1e-5);
  }
}

TEST(AttentionFusion, FinfoMinMasksAcrossKeyTiles) {
  // Hugging Face's additive mask: 0 where attended, torch.finfo(float32).min elsewhere, over two key tiles. With
  // the diagonal offset by one, row 0 (causal) or the last row (anti-causal) is masked entirely: uniform
  // weights, as softmax(s + min) gives, not NaN.
  for (const char* tri : {"Trilu <upper = 0> (ones, dk)", "Trilu <upper = 1> (ones, uk)"}) {
    auto r = rewrite(header(14) + R"(g (float[1,2,600,16] q, float[1,2,600,16] k, float[1,2,600,16] v)
                                         => (float[1,2,600,16] y) {
        one = Constant <value = float {1.0}> ()  shp = Constant <value = int64[2] {600, 600}> ()
        dk = Constant <value = int64 {-1}> ()  uk = Constant <value = int64 {1}> ()
        ones = Expand(one, shp)  t = )" + std::string(tri) + R"(  inv = Sub(one, t)
        fmin = Constant <value = float {-3.4028234663852886e+38}> ()  mask = Mul(inv, fmin)
        kt = Transpose <perm = [0, 1, 3, 2]> (k)  s = MatMul(q, kt)  c = Constant <value = float {0.25}> ()
        ss = Mul(s, c)  sm = Add(mask, ss)  p = Softmax <axis = -1> (sm)  y = MatMul(p, v) })",
                     make_attention_fusion());
    EXPECT_EQ(r.count(kPass), 1) << r.dump();
    expect_same_outputs(r.before, r.after, 1e-4, 1e-5);
  }
}

TEST(AttentionFusion, OldOpsetSoftmaxOnTheLastAxis) {
  auto r = rewrite(torch_style("p = Softmax <axis = 2> (s)", "", 11), make_attention_fusion());
  EXPECT_EQ(r.count(kPass), 1) << r.dump();
  expect_same_outputs(r.before, r.after, 1e-4, 1e-5);
  expect_same_outputs(r.before, decomposed(r.after, 11), 1e-4, 1e-5);
}

TEST(AttentionFusion, DoesNotFire) {
  const std::string cases[] = {
      torch_style("p = Softmax <axis = 1> (s)"),                              // softmax over the queries
      torch_style("p = Softmax <axis = -1> (s)", ", float[4,300,300] p"),     // probabilities read elsewhere
      torch_style("p = Softmax <axis = -1> (s)", ", float[4,300,300] s"),     // scores read elsewhere
      torch_style("p = Softmax <axis = 1> (s)", "", 11),                      // opset 11 flattens from axis 1
      // a per-head scale
      torch_style(R"(hc = Constant <value = float[4,1,1] {1, 2, 3, 4}> ()  sh = Mul(s, hc)  p = Softmax <axis = -1> (sh))"),
      // the mask added before the scale
      torch_style(R"(m = Constant <value = float[1,1] {0.5}> ()  c2 = Constant <value = float {2.0}> ()
                     sm = Add(s, m)  sc = Mul(sm, c2)  p = Softmax <axis = -1> (sc))"),
      // the mask widens the scores from [1,4,8,8] to [2,4,8,8]
      header(13) + R"(g (float[1,4,8,16] q, float[1,4,8,16] k, float[1,4,8,16] v, float[2,1,1,8] m)
                        => (float[2,4,8,16] y) {
          kt = Transpose <perm = [0, 1, 3, 2]> (k)  s = MatMul(q, kt)  sm = Add(s, m)  p = Softmax <axis = -1> (sm)
          y = MatMul(p, v) })",
  };
  for (const auto& c : cases) {
    auto r = rewrite(c, make_attention_fusion());
    EXPECT_EQ(r.count(kPass), 0) << r.dump();
  }
}

// Constant folding then attention fusion: masks built from constants (Trilu, Log(0) = -inf) fold first.
testing::Rewritten fold_and_fuse(const std::string& text) {
  std::vector<std::unique_ptr<Pass>> passes;
  passes.push_back(make_constant_folding());
  passes.push_back(make_attention_fusion());
  return rewrite(testing::parse(text), std::move(passes));
}

// The scores s [4, 300, 300] masked by `where` (a Where producing sw) before the Softmax. `lower` is the Trilu
// diagonal offset of the kept (lower) triangle: 0 keeps the diagonal, -1 leaves row 0 fully masked.
std::string masked(const std::string& where, int lower = 0) {
  return torch_style(R"(one = Constant <value = float {1.0}> ()  zero = Constant <value = float {0.0}> ()
      shp = Constant <value = int64[2] {300, 300}> ()  ones = Expand(one, shp)
      dk = Constant <value = int64 {)" + std::to_string(lower) + R"(}> ()  tri = Trilu <upper = 0> (ones, dk)
      causal = Equal(tri, zero)  ninf = Log(zero)  big = Constant <value = float {-1000000000.0}> ()
      )" + where + R"(  p = Softmax <axis = -1> (sw))", "", 14);  // Trilu: opset 14
}

TEST(AttentionFusion, BooleanMasksBecomeAdditive) {
  struct Case { std::string text; const char* what; int where_nodes; };
  const Case cases[] = {
      {masked("sw = Where(causal, ninf, s)"), "masked_fill(-inf), constant causal mask", 0},
      {masked("sw = Where(causal, big, s)"), "masked_fill(-1e9), constant mask without a fully masked row", 0},
      // torch.finfo(float32).min, what Hugging Face models fill with: s + f rounds to f, so fully masked rows
      // (row 0 here) come out uniform in both forms
      {masked("fmin = Constant <value = float {-3.4028234663852886e+38}> ()  sw = Where(causal, fmin, s)", -1),
       "masked_fill(finfo.min), a fully masked row", 0},
      // torch.where(keep, s, -inf) with the condition computed at run time: a Where node makes the mask
      {masked("kk = Transpose(k)  mk = MatMul(q, kk)  keep = Greater(mk, zero)  sw = Where(keep, s, ninf)"),
       "where(keep, s, -inf), run-time condition", 1},
  };
  for (const Case& c : cases) {
    auto r = fold_and_fuse(c.text);
    EXPECT_EQ(r.count(kPass), 1) << c.what << "\n" << r.dump();
    auto ops = r.ops();
    EXPECT_EQ(ops["gaf.Attention"], 1) << c.what;
    EXPECT_EQ(ops["Softmax"], 0) << c.what;
    EXPECT_EQ(ops["Where"], c.where_nodes) << c.what << "\n" << r.dump();
    for (const Node* n : r.after.graph->nodes())
      if (n->op_type == "Attention") {
        EXPECT_EQ(n->num_inputs(), 4) << c.what;
      }
    expect_same_outputs(r.before, r.after, 1e-4, 1e-5);
    expect_same_outputs(r.before, decomposed(r.after, 14), 1e-4, 1e-5);
  }
}

TEST(AttentionFusion, BooleanMasksThatAreNotExactStay) {
  const std::string cases[] = {
      masked("sw = Where(causal, big, s)", -1),  // -1e9 with row 0 fully masked: uniform there, not softmax(s)
      masked("kk = Transpose(k)  mk = MatMul(q, kk)  keep = Greater(mk, zero)  sw = Where(keep, s, big)"),  // unknowable
      masked("sw = Where(causal, one, s)"),  // a fill that is no mask at all
  };
  for (const auto& c : cases) {
    auto r = fold_and_fuse(c);
    EXPECT_EQ(r.count(kPass), 0) << r.dump();
  }
}

// BERT exported with dynamic batch and sequence axes: the head reshapes' targets are computed from Shape(x), so
// only symbolic shape inference gives attention fusion (and everything after it) their ranks.
TEST(AttentionFusion, DynamicBatchAndSequenceExport) {
  auto w = [](int salt) { return testing::test_values(64 * 64, salt, 100.0); };
  std::string text = header(13) + R"(g (float[B,L,64] x, float[B,1,1,L] mask) => (float[B,L,64] y)
    <float[64,64] wq = {)" + w(1) + R"(}, float[64,64] wk = {)" + w(2) + R"(}, float[64,64] wv = {)" + w(3) + R"(}> {
    q0 = MatMul(x, wq)  k0 = MatMul(x, wk)  v0 = MatMul(x, wv)
    s = Shape(x)
    i0 = Constant <value = int64[1] {0}> ()  i1 = Constant <value = int64[1] {1}> ()
    b = Gather <axis = 0> (s, i0)  l = Gather <axis = 0> (s, i1)
    h = Constant <value = int64[1] {4}> ()  d = Constant <value = int64[1] {16}> ()
    shp = Concat <axis = 0> (b, l, h, d)
    q1 = Reshape(q0, shp)  q = Transpose <perm = [0, 2, 1, 3]> (q1)
    k1 = Reshape(k0, shp)  kt = Transpose <perm = [0, 2, 3, 1]> (k1)
    v1 = Reshape(v0, shp)  v = Transpose <perm = [0, 2, 1, 3]> (v1)
    sc = MatMul(q, kt)  c = Constant <value = float {0.25}> ()  ss = Mul(sc, c)  sm = Add(ss, mask)
    p = Softmax <axis = -1> (sm)  o = MatMul(p, v)  ot = Transpose <perm = [0, 2, 1, 3]> (o)
    m64 = Constant <value = int64[1] {64}> ()  oshp = Concat <axis = 0> (b, l, m64)
    y = Reshape(ot, oshp) })";
  Model m = testing::parse(text);
  tools::FuseOptions opts;
  opts.fusion.opt_level = 3;
  tools::FuseResult r;
  Model f = testing::fused_copy(m, opts, &r);  // through the ONNX round trip
  EXPECT_EQ(r.rewrites["attention-fusion"], 1) << f.graph->to_string();
  EXPECT_LE(r.after.kernels, 10) << f.graph->to_string();  // was 20 of 21 with the shapes unknown
  runtime::Session fs(*f.graph);
  for (const auto& [node, why] : fs.codegen_fallbacks()) ADD_FAILURE() << node << " runs op by op: " << why;
  for (int64_t n : {1, 5}) {  // B = L = n
    runtime::Session a(*m.graph), b(*f.graph);
    auto inputs = tools::random_inputs(*m.graph, 3, n);
    auto want = a.run(inputs), got = b.run(inputs);
    ASSERT_EQ(got[0].dims(), (std::vector<int64_t>{n, n, 64}));
    auto cmp = tools::compare(got[0], want[0], 1e-4, 1e-5);
    EXPECT_TRUE(cmp.ok) << "B = L = " << n << ": " << cmp.message;
  }
}

// Hugging Face GPT-2 exported with dynamic axes: the causal mask is bias[:, :, L - L : L, :L] of a constant
// [1, 1, 16, 16] buffer (dims min(L, 16), which broadcast against the L x L scores as L), applied with
// Where(causal, w, finfo.min), then the additive padding mask. Both become one additive mask.
std::string gpt2_dynamic(const std::string& masking) {
  std::string tril;
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) tril += std::string(i || j ? "," : "") + (j <= i ? "1" : "0");
  return header(14) + R"(g (float[B,4,L,16] q, float[B,4,L,16] k, float[B,4,L,16] v, float[B,1,1,L] pad)
      => (float[B,4,L,16] y) <bool[1,1,16,16] bias = {)" + tril + R"(}> {
    kt = Transpose <perm = [0, 1, 3, 2]> (k)
    s0 = MatMul(q, kt)  c = Constant <value = float {4.0}> ()  w = Div(s0, c)
    sh = Shape(q)  i2 = Constant <value = int64[1] {2}> ()  l = Gather <axis = 0> (sh, i2)
    st = Sub(l, l)  z = Constant <value = int64[1] {0}> ()
    starts = Concat <axis = 0> (st, z)  ends = Concat <axis = 0> (l, l)  axes = Constant <value = int64[2] {2, 3}> ()
    causal = Slice(bias, starts, ends, axes)
    fmin = Constant <value = float {-3.4028234663852886e+38}> ()
    )" + masking + R"(
    p = Softmax <axis = -1> (sm)  y = MatMul(p, v) })";
}

TEST(AttentionFusion, Gpt2DynamicExport) {
  Model m = testing::parse(gpt2_dynamic("cw = Where(causal, w, fmin)  sm = Add(cw, pad)"));
  tools::FuseOptions opts;
  opts.fusion.opt_level = 3;
  tools::FuseResult r;
  Model f = testing::fused_copy(m, opts, &r);
  EXPECT_EQ(r.rewrites["attention-fusion"], 1) << f.graph->to_string();
  for (int64_t n : {1, 5, 16}) {  // B = L = n; the padding mask holds 0 and finfo.min
    runtime::Session a(*m.graph), b(*f.graph);
    auto inputs = tools::random_inputs(*m.graph, 3, n);
    float* pad = inputs[3].data<float>();
    for (int64_t i = 0; i < inputs[3].numel(); ++i) pad[i] = pad[i] < -0.5f ? -3.4028234663852886e+38f : 0.0f;
    auto want = a.run(inputs), got = b.run(inputs);
    auto cmp = tools::compare(got[0], want[0], 1e-4, 1e-5);
    EXPECT_TRUE(cmp.ok) << "B = L = " << n << ": " << cmp.message;
  }
}

TEST(AttentionFusion, Gpt2MasksInTheOtherOrderNeedAnInfiniteFill) {
  // Where(b, s + m, finfo.min): where m is finfo.min too, f + m would overflow to -inf in the additive form.
  Model m = testing::parse(gpt2_dynamic("sp = Add(w, pad)  sm = Where(causal, sp, fmin)"));
  Model f = tools::copy_model(m);
  tools::FuseOptions opts;
  opts.fusion.opt_level = 1;
  EXPECT_EQ(tools::fuse_model(f, opts).rewrites["attention-fusion"], 0) << f.graph->to_string();
  // With an -inf fill the same order is exact, and fuses.
  Model inf = testing::parse(gpt2_dynamic("zf = Constant <value = float {0.0}> ()  ninf = Log(zf)  sp = Add(w, pad)  "
                                          "sm = Where(causal, sp, ninf)"));
  Model fi = tools::copy_model(inf);
  EXPECT_EQ(tools::fuse_model(fi, opts).rewrites["attention-fusion"], 1) << fi.graph->to_string();
  expect_same_outputs(inf, fi, 1e-4, 1e-5, 9);
}

// Hugging Face BERT's mask: an int64 attention_mask [B, L] of 1s and 0s becomes (1 - m) * finfo.min, unsqueezed
// to [B, 1, 1, L] and added to the scores; a sequence padded entirely (an empty one in the batch) masks every key.
TEST(AttentionFusion, HuggingFaceBertMaskFromAnIntegerInput) {
  Model m = testing::parse(header(13) + R"(g (float[B,4,L,16] q, float[B,4,L,16] k, float[B,4,L,16] v,
                                           int64[B,L] am) => (float[B,4,L,16] y) {
    a1 = Constant <value = int64[1] {1}> ()  a2 = Constant <value = int64[1] {2}> ()
    u1 = Unsqueeze(am, a1)  u2 = Unsqueeze(u1, a2)  mf = Cast <to = 1> (u2)
    one = Constant <value = float {1.0}> ()  inv = Sub(one, mf)
    fmin = Constant <value = float {-3.4028234663852886e+38}> ()  ext = Mul(inv, fmin)
    kt = Transpose <perm = [0, 1, 3, 2]> (k)  s0 = MatMul(q, kt)  c = Constant <value = float {4.0}> ()
    w = Div(s0, c)  sm = Add(w, ext)  p = Softmax <axis = -1> (sm)  y = MatMul(p, v) })");
  tools::FuseOptions opts;
  opts.fusion.opt_level = 3;
  tools::FuseResult r;
  Model f = testing::fused_copy(m, opts, &r);
  EXPECT_EQ(r.rewrites["attention-fusion"], 1) << f.graph->to_string();
  for (int64_t n : {1, 3, 9}) {  // B = L = n
    runtime::Session a(*m.graph), b(*f.graph);
    auto inputs = tools::random_inputs(*m.graph, 5, n);
    int64_t* am = inputs[3].data<int64_t>();
    for (int64_t i = 0; i < inputs[3].numel(); ++i) am[i] = am[i] % 3 != 0;  // about a third padded
    if (n > 1)
      for (int64_t j = 0; j < n; ++j) am[j] = 0;  // the first sequence padded entirely
    auto want = a.run(inputs), got = b.run(inputs);
    auto cmp = tools::compare(got[0], want[0], 1e-4, 1e-5);
    EXPECT_TRUE(cmp.ok) << "B = L = " << n << ": " << cmp.message;
  }
}

TEST(AttentionFusion, RunsInTheOptLevelPipeline) {
  Model m = testing::parse(torch_style());
  Model fused = tools::copy_model(m);
  tools::FuseOptions opts;
  opts.fusion.opt_level = 1;
  tools::fuse_model(fused, opts);
  EXPECT_EQ(testing::histogram(*fused.graph).count("gaf.Attention"), 1u) << fused.graph->to_string();
  expect_same_outputs(m, fused, 1e-4, 1e-5);
}

}  // namespace
}  // namespace gaf
