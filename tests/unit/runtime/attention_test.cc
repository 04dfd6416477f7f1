// The gaf.Attention kernel skips the keys a mask removes from every row of a query block (attention_live_keys),
// and gives what the unfused graph gives with such masks: padding, causal, fully masked rows, NaN.
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gaf/builder.h"

#include "../passes/pass_test_util.h"
#include "runtime/kernels/fast/attention.h"

namespace gaf {
namespace {

using runtime::attention_live_keys;
using testing::expect_same_outputs;
using testing::header;
using testing::rewrite;

const float kInf = std::numeric_limits<float>::infinity();
const float kMin = -3.4028234663852886e+38f;  // torch.finfo(float32).min, Hugging Face's fill

TEST(AttentionLiveKeys, PaddingCausalAndFullyMaskedRows) {
  // One padding row shared by the block (row stride 0): keys 2..5 attended, the rest -inf or finfo.min.
  std::vector<float> pad = {-kInf, kMin, 0, 0, 0.5f, 0, -1e31f, -kInf};
  EXPECT_EQ(attention_live_keys(pad.data(), 0, 1, 4, 8), (std::pair<int64_t, int64_t>{2, 6}));
  EXPECT_EQ(attention_live_keys(nullptr, 0, 1, 4, 8), (std::pair<int64_t, int64_t>{0, 8}));
  // A causal block of rows 2 and 3 of an 8x8 mask: keys up to 3 are attended by some row.
  std::vector<float> causal(64);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) causal[size_t(i * 8 + j)] = j <= i ? 0.0f : -kInf;
  EXPECT_EQ(attention_live_keys(causal.data() + 16, 8, 1, 2, 8), (std::pair<int64_t, int64_t>{0, 4}));
  // Keys along a strided mask (key stride 8: the transposed causal mask's column 1 = row 1 of the original).
  EXPECT_EQ(attention_live_keys(causal.data() + 1, 1, 8, 1, 8), (std::pair<int64_t, int64_t>{1, 8}));
  // A row with no attended key keeps the whole range; a NaN counts as attended; -1e29 is not a fill.
  std::vector<float> rows = {0, -kInf, -kInf, -kInf, -kInf, kMin, -kInf, -kInf};
  EXPECT_EQ(attention_live_keys(rows.data(), 4, 1, 2, 4), (std::pair<int64_t, int64_t>{0, 4}));
  std::vector<float> odd = {-kInf, -kInf, std::nanf(""), -kInf, -1e29f, -kInf};
  EXPECT_EQ(attention_live_keys(odd.data(), 0, 1, 1, 6), (std::pair<int64_t, int64_t>{2, 5}));
}

// The scan (16 keys at a time on contiguous rows, rows last to first, each row's end only down to the largest end
// so far) against the definition, row by row and key by key, on seeded masks whose live ranges start and end
// inside and across 16-key chunks; contiguous, strided and shared rows.
TEST(AttentionLiveKeys, ScanMatchesTheDefinition) {
  std::mt19937 rng(7);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const float fills[] = {-kInf, kMin, -1e30f};
  for (int trial = 0; trial < 400; ++trial) {
    const int64_t rows = uni(1, 9), lk = uni(1, 70), mcs = uni(0, 2) == 0 ? 2 : 1;
    const int64_t mrs = trial % 7 == 0 ? 0 : lk * mcs;
    std::vector<float> m(size_t(rows * lk * mcs), 0.5f);
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t first = uni(0, int(lk)), last = uni(int(first), int(lk));  // live keys [first, last)
      for (int64_t j = 0; j < lk; ++j)
        if (j < first || j >= last || uni(0, 5) == 0) m[size_t(i * lk * mcs + j * mcs)] = fills[uni(0, 2)];
    }
    if (trial % 11 == 5) m[size_t(uni(0, int(m.size()) - 1))] = std::nanf("");
    int64_t lo = lk, hi = 0;
    bool dead_row = false;
    for (int64_t i = 0; i < (mrs == 0 ? 1 : rows); ++i) {
      int64_t first = -1, last = -1;
      for (int64_t j = 0; j < lk; ++j)
        if (!(m[size_t(i * mrs + j * mcs)] <= -1e30f)) {
          if (first < 0) first = j;
          last = j + 1;
        }
      if (first < 0) {
        dead_row = true;
      } else {
        lo = std::min(lo, first);
        hi = std::max(hi, last);
      }
    }
    const std::pair<int64_t, int64_t> want = dead_row ? std::pair<int64_t, int64_t>{0, lk} : std::pair{lo, hi};
    EXPECT_EQ(attention_live_keys(m.data(), mrs, mcs, rows, lk), want)
        << "trial " << trial << ": rows " << rows << " lk " << lk << " mrs " << mrs << " mcs " << mcs;
  }
}

// The attention-fusion pass alone on a built model.
auto fuse_attention(Model& model) {
  std::vector<std::unique_ptr<Pass>> passes;
  passes.push_back(make_attention_fusion());
  return testing::rewrite(model, std::move(passes));
}

// Scores of [2 batches, 2 heads, 600 queries, 600 keys] (two query blocks, two key tiles) plus `mask`, built in the
// graph from constants: the kernel trims the keys, the unfused graph computes every one.
void expect_fused_matches(const std::string& mask_nodes) {
  auto r = rewrite(header(14) + R"(g (float[2,2,600,16] q, float[2,2,600,16] k, float[2,2,600,16] v)
                                       => (float[2,2,600,16] y) {
      )" + mask_nodes + R"(
      kt = Transpose <perm = [0, 1, 3, 2]> (k)  s = MatMul(q, kt)  c = Constant <value = float {0.25}> ()
      ss = Mul(s, c)  sm = Add(ss, mask)  p = Softmax <axis = -1> (sm)  y = MatMul(p, v) })",
                   make_attention_fusion());
  ASSERT_EQ(r.count("attention-fusion"), 1) << r.dump();
  expect_same_outputs(r.before, r.after, 1e-4, 1e-5);
}

TEST(AttentionLiveKeys, PaddedBatchesMatchUnfused) {
  // Right padding: 300 and 550 valid keys, filled with -inf and with finfo.min.
  // (-inf as Log(0): the text format has no literal for it.)
  for (const char* fill : {"z = Constant <value = float {0.0}> ()  fill = Log(z)",
                           "fill = Constant <value = float {-3.4028234663852886e+38}> ()"}) {
    SCOPED_TRACE(fill);
    expect_fused_matches(std::string(R"(
      start = Constant <value = float {0.0}> ()  limit = Constant <value = float {600.0}> ()
      delta = Constant <value = float {1.0}> ()  pos = Range(start, limit, delta)
      len = Constant <value = float[2,1,1,1] {300.0, 550.0}> ()  valid = Less(pos, len)
      zero = Constant <value = float {0.0}> ()  )") +
                         fill + R"(  mask = Where(valid, zero, fill))");
  }
}

TEST(AttentionLiveKeys, CausalMaskMatchesUnfused) {
  // Keys after each query masked with -inf: the first query block attends to keys below 256 only, and its
  // sub-blocks of 64 rows to keys below 64, 128, ... With the diagonal one lower, row 0 attends to nothing and
  // comes out NaN, fused as unfused.
  for (const char* diagonal : {"0", "-1"}) {
    SCOPED_TRACE(diagonal);
    expect_fused_matches(std::string(R"(
      one = Constant <value = float {1.0}> ()  shp = Constant <value = int64[2] {600, 600}> ()
      dk = Constant <value = int64 {)") + diagonal + R"(}> ()
      ones = Expand(one, shp)  t = Trilu <upper = 0> (ones, dk)  keep = Cast <to = 9> (t)
      zero = Constant <value = float {0.0}> ()  fill = Log(zero)  mask = Where(keep, zero, fill))");
  }
}

// Seeded random masks of every kind the live-key ranges meet: padding on either side (one row per batch), causal
// with the diagonal shifted, scattered fills, rows cut at random lengths or masked entirely, a stray NaN; fills of
// -inf, finfo.min and -1e30. Query and key lengths cross the 256-row blocks and the 64-row sub-blocks.
TEST(AttentionLiveKeys, RandomMasksMatchUnfused) {
  std::mt19937 rng(2026);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const float fills[] = {-kInf, kMin, -1e30f};
  for (int trial = 0; trial < 24; ++trial) {
    const int64_t B = uni(1, 2), H = uni(1, 2), Lq = uni(1, 330), Lk = uni(1, 330), D = 16;
    const int kind = trial % 4;
    const float fill = fills[uni(0, 2)];
    const int64_t mrows = kind == 0 ? 1 : Lq;
    std::vector<float> m(size_t(B * mrows * Lk), 0.0f);
    auto at = [&](int64_t b, int64_t i, int64_t j) -> float& { return m[size_t((b * mrows + i) * Lk + j)]; };
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < mrows; ++i) {
        const int64_t cut = uni(0, int(Lk)), lead = uni(0, 3) == 0 ? uni(0, int(Lk)) : 0, shift = uni(-2, 2);
        for (int64_t j = 0; j < Lk; ++j) {
          bool dead = kind == 0   ? (j >= cut || j < lead)
                      : kind == 1 ? j > i + shift
                      : kind == 2 ? uni(0, 3) == 0
                                  : (i % 9 == 4 || j >= std::max<int64_t>(1, cut));
          if (dead) at(b, i, j) = fill;
        }
      }
    if (trial % 5 == 3) m[size_t(uni(0, int(m.size()) - 1))] = std::nanf("");
    SCOPED_TRACE(fmt::format("trial {}: kind {}, B {} H {} Lq {} Lk {}, fill {}", trial, kind, B, H, Lq, Lk, fill));
    Model model;
    GraphBuilder b(model);
    Value* q = b.input("q", DType::Float, {B, H, Lq, D});
    Value* k = b.input("k", DType::Float, {B, H, Lk, D});
    Value* v = b.input("v", DType::Float, {B, H, Lk, D});
    Value* mask = b.constant(Tensor::from<float>({B, 1, mrows, Lk}, m), "mask");
    Value* s = b.op("MatMul", {q, b.op("Transpose", {k}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}})});
    Value* p = b.op("Softmax", {b.op("Add", {b.op("Mul", {s, b.scalar(0.25f)}), mask})}, {{"axis", int64_t(-1)}});
    b.output(b.op("MatMul", {p, v}));
    b.finish();
    auto r = fuse_attention(model);
    ASSERT_EQ(r.count("attention-fusion"), 1) << r.dump();
    expect_same_outputs(r.before, r.after, 1e-4, 1e-5);
  }
}

// The AVX-512 path's edges: a depth of 80 (one full and one partial 16-lane group past a 64-key panel's depth),
// a value depth of 70 (a 64-column chunk and 6 more), Q and V stored transposed (read through a column stride;
// V's product then goes through sgemm), 700 keys (a second key tile ending inside a panel), and a band mask
// (each query sees the 100 keys up to itself) whose 64-row sub-blocks start their keys inside a panel.
TEST(AttentionKernel, OddDepthsTransposedOperandsAndABandMask) {
  const int64_t L = 700, D = 80, DV = 70, W = 100;
  std::vector<float> m(size_t(L * L), -kInf);
  for (int64_t i = 0; i < L; ++i)
    for (int64_t j = std::max<int64_t>(0, i - W); j <= i; ++j) m[size_t(i * L + j)] = 0.0f;
  for (bool band : {true, false}) {
    SCOPED_TRACE(band ? "band mask" : "no mask");
    Model model;
    GraphBuilder b(model);
    const std::vector<int64_t> swap = {0, 1, 3, 2};
    Value* qt = b.input("qt", DType::Float, {1, 2, D, L});  // Q stored transposed
    Value* k = b.input("k", DType::Float, {1, 2, L, D});
    Value* vt = b.input("vt", DType::Float, {1, 2, DV, L});  // V stored transposed
    Value* q = b.op("Transpose", {qt}, {{"perm", swap}});
    Value* v = b.op("Transpose", {vt}, {{"perm", swap}});
    Value* s = b.op("Mul", {b.op("MatMul", {q, b.op("Transpose", {k}, {{"perm", swap}})}), b.scalar(0.11f)});
    if (band) s = b.op("Add", {s, b.constant(Tensor::from<float>({1, 1, L, L}, m), "band")});
    b.output(b.op("MatMul", {b.op("Softmax", {s}, {{"axis", int64_t(-1)}}), v}));
    b.finish();
    auto r = fuse_attention(model);
    ASSERT_EQ(r.count("attention-fusion"), 1) << r.dump();
    const Node* att = nullptr;
    for (const Node* n : r.after.graph->nodes())
      if (n->op_type == "Attention") att = n;
    ASSERT_NE(att, nullptr);
    EXPECT_FALSE(att->attr_ints("q_perm").empty());  // the transposes are read through, not run
    EXPECT_FALSE(att->attr_ints("v_perm").empty());
    expect_same_outputs(r.before, r.after, 1e-4, 1e-5);
  }
}

}  // namespace
}  // namespace gaf
