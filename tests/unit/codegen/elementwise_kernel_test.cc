// Generated elementwise kernels compute what the runtime's kernels compute, NaN included.
#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

#include "gaf/codegen.h"
#include "gaf/op_registry.h"
#include "test_util.h"

namespace gaf {
namespace {

// The unfused and the fused (opt level 3) first output of the graph `text` on `in`; the fused graph must run as
// one generated kernel.
std::pair<Tensor, Tensor> unfused_and_fused(const std::string& text, const std::vector<Tensor>& in) {
  Model m = testing::parse(R"(<ir_version: 8, opset_import: ["" : 17]> )" + text);
  tools::FuseOptions opts;
  opts.fusion.opt_level = 3;
  Model f = testing::fused_copy(m, opts);
  runtime::Session su(*m.graph), sf(*f.graph);
  EXPECT_EQ(sf.generated_kernels(), size_t(1)) << f.graph->to_string();
  return {su.run(in)[0], sf.run(in)[0]};
}

// Element by element: NaN where the unfused output has NaN, the same infinities, finite values within `rel`
// (2e-6) relative (1e-30 absolute). `label(i)` names element i in a failure.
template <class Label>
void expect_agree(const Tensor& want, const Tensor& got, Label label, double rel = 2e-6) {
  ASSERT_EQ(want.numel(), got.numel());
  for (int64_t i = 0; i < want.numel(); ++i) {
    const float w = want.data<float>()[i], g = got.data<float>()[i];
    if (std::isnan(w) || std::isnan(g) || std::isinf(w) || std::isinf(g)) {
      EXPECT_TRUE((std::isnan(w) && std::isnan(g)) || w == g) << label(i) << ": unfused " << w << ", fused " << g;
    } else {
      EXPECT_NEAR(g, w, 1e-30 + rel * std::abs(w)) << label(i);
    }
  }
}

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

// Every unary op the emitter writes, on special values (NaN, infinities, signed zeros, overflow and underflow
// ranges) as well as ordinary ones: a generated kernel Neg -> Neg -> op gives what the unfused kernels give, NaN
// where they give NaN, the same infinities, finite values within 2e-6 relative (1e-30 absolute).
TEST(ElementwiseKernel, UnaryOpsOnSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> xs = {nan, inf, -inf, 0.0f, -0.0f, 1.0f, -1.0f, 0.5f, -0.5f, 2.5f, -2.5f, 3.0f, -3.0f,
                           6.0f, -6.0f, 20.0f, -20.0f, 88.5f, 89.0f, -87.0f, -104.0f, 1e-30f, -1e-30f, 1e30f, -1e30f,
                           0.3f, -0.7f, 1.5f, 7.25f, -9.5f, 40.0f, -40.0f, 1e-3f, -1e-3f, -1e-6f, 2e-7f, -0.2f};
  const std::vector<std::string> ops = {
      "Abs", "Relu", "Sqrt", "Reciprocal", "Exp", "Log", "Erf", "Tanh", "Sigmoid", "Floor", "Ceil", "Round",
      "Sign", "Sin", "Cos", "Softsign", "Softplus", "LeakyRelu <alpha = 0.1>", "ThresholdedRelu", "Elu",
      "Celu <alpha = 2.0>", "Selu", "HardSigmoid", "HardSwish", "Clip"};
  for (const std::string& op : ops) {
    SCOPED_TRACE(op);
    const std::string name = op.substr(0, op.find(' '));
    auto [want, got] = unfused_and_fused(
        fmt::format("g (float[{0}] x) => (float[{0}] y) {{ a = Neg(x)  b = Neg(a)  y = {1}(b) }}", xs.size(), op),
        {Tensor::from<float>({int64_t(xs.size())}, xs)});
    expect_agree(want, got, [&](int64_t i) { return fmt::format("{}({})", name, xs[size_t(i)]); });
  }
}

// A fused Tanh is the runtime's Tanh: both evaluate src/ops/tanh_fit.h (the generated kernel on vectors and a
// scalar tail), so over every 4096th float in [-12, 12] (both signs, the vector loop's steps and its tail) they
// agree to the last bit where both use fused multiply-adds, and within 1 ulp in any case; |tanh| never exceeds
// 1 and is exactly 1 from 8.9 (the exp form the kernels used before was 2 ulp from the runtime at 6.2e-4).
TEST(ElementwiseKernel, FusedTanhIsTheRuntimesTanh) {
  std::vector<float> xs;
  for (uint32_t b = 0x155; b <= std::bit_cast<uint32_t>(12.0f); b += 4096)
    xs.push_back(std::bit_cast<float>(b)), xs.push_back(-std::bit_cast<float>(b));
  for (float x : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(), 8.9f, -8.9f,
                  9.0f, 1e30f, -0.0f})
    xs.push_back(x);
  auto [want, got] = unfused_and_fused(
      fmt::format("g (float[{0}] x) => (float[{0}] y) {{ a = Neg(x)  b = Neg(a)  y = Tanh(b) }}", xs.size()),
      {Tensor::from<float>({int64_t(xs.size())}, xs)});
  int64_t apart = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const float w = want.data<float>()[i], g = got.data<float>()[i];
    const float ulp = std::nextafter(std::abs(w), 2.0f) - std::abs(w);
    ASSERT_LE(std::abs(g - w), ulp) << "tanh(" << xs[i] << "): unfused " << w << ", fused " << g;
    apart += g != w;
    ASSERT_LE(std::abs(g), 1.0f) << xs[i];
    if (std::abs(xs[i]) >= 8.9f) {
      ASSERT_EQ(w, std::copysign(1.0f, xs[i])) << xs[i];
      ASSERT_EQ(g, w) << xs[i];
    }
  }
  EXPECT_TRUE(std::signbit(got.data<float>()[xs.size() - 1])) << "tanh(-0) is -0";
#ifdef __FMA__
  EXPECT_EQ(apart, 0) << "values not bit for bit the runtime's, of " << xs.size();
#endif
}

// Every standard unary op whose definition (src/ops) has a scalar formula, found in the op registry: a new op
// is tested here the day it is defined. Default attributes, the same special values and tolerance as above.
TEST(ElementwiseKernel, EveryUnaryFormulaMatchesItsKernel) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> xs = {nan,   inf,    -inf,  0.0f,  -0.0f,  1.0f,   -1.0f,   0.5f,
                           -0.5f, 2.5f,   -2.5f, 20.0f, -20.0f, 88.5f,  -104.0f, 1e-30f,
                           1e30f, -1e30f, -0.7f, 7.25f, 40.0f,  -1e-6f, 2e-7f};
  std::vector<std::string> tested;
  for (const auto& entry : OpRegistry::instance().all()) {
    const OpInfo& info = entry.second;  // not a structured binding: clang 14 cannot capture one
    // Boolean ops (Not, IsNaN) and CastLike (two operands) are covered by the tests of their groups.
    if (!info.domain.empty() || info.kind != OpKind::Elementwise || !info.scalar || info.op_type == "Not" ||
        info.op_type == "IsNaN" || info.op_type == "CastLike")
      continue;
    SCOPED_TRACE(info.op_type);
    // Built without the ONNX checker (Debian's ONNX 1.12 stops at opset 17; Mish is 18): x -> Neg -> Neg ->
    // op.
    auto build = [&] {
      Model m;
      m.opsets[""] = 18;
      Graph& g = *m.graph;
      Value* x = g.add_input("x", TensorType{DType::Float, Shape{Dim(int64_t(xs.size()))}});
      Node* a = g.add_node("Neg", {x}, {"a"});
      Node* b = g.add_node("Neg", {a->output(0)}, {"b"});
      Node* y = g.add_node(info.op_type, {b->output(0)}, {"y"});
      for (Node* n : {a, b, y}) n->opset = 18;
      if (info.op_type == "Cast") y->attrs["to"] = Attribute(int64_t(DType::Float));  // required
      y->output(0)->type = x->type;
      g.add_output(y->output(0));
      return m;
    };
    Model unfused = build(), fused = build();
    tools::FuseOptions opts;
    opts.fusion.opt_level = 3;
    tools::fuse_model(fused, opts);
    runtime::Session su(*unfused.graph), sf(*fused.graph);
    ASSERT_EQ(sf.generated_kernels(), size_t(1)) << fused.graph->to_string();
    const std::vector<Tensor> in = {Tensor::from<float>({int64_t(xs.size())}, xs)};
    expect_agree(su.run(in)[0], sf.run(in)[0],
                 [&](int64_t i) { return fmt::format("{}({})", info.op_type, xs[size_t(i)]); });
    tested.push_back(info.op_type);
  }
  EXPECT_GE(tested.size(), size_t(25)) << fmt::format("{}", fmt::join(tested, ", "));
}

// Binary ops on every pair of special values, the same way.
TEST(ElementwiseKernel, BinaryOpsOnSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> vals = {nan, inf, -inf, 0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 2.0f, -2.5f, 3.0f, 1e30f, -7.0f};
  std::vector<float> xs, zs;
  for (float a : vals)
    for (float b : vals) xs.push_back(a), zs.push_back(b);
  for (const std::string op : {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mod <fmod = 1>", "PRelu"}) {
    SCOPED_TRACE(op);
    const int64_t n = int64_t(xs.size());
    auto [want, got] = unfused_and_fused(
        fmt::format("g (float[{0}] x, float[{0}] z) => (float[{0}] y) {{ a = Neg(x)  b = Neg(z)  y = {1}(a, b) }}", n, op),
        {Tensor::from<float>({n}, xs), Tensor::from<float>({n}, zs)});
    expect_agree(want, got, [&](int64_t i) { return fmt::format("{}({}, {})", op, -xs[size_t(i)], -zs[size_t(i)]); });
  }
}

// Row kernels (softmax, reductions, normalisation over the last axis) on rows holding NaN, infinities, all -inf,
// huge and ordinary values: what the unfused kernels give, row by row.
TEST(ElementwiseKernel, RowOpsOnSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<std::vector<float>> rows = {
      {1, 2, 3, 4, 5, 6, 7, 8},          {nan, 1, 2, 3, 4, 5, 6, 7},        {inf, 1, 2, 3, 4, 5, 6, 7},
      {-inf, 1, 2, 3, 4, 5, 6, 7},       {-inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf},
      {inf, -inf, 0, 0, 0, 0, 0, 0},     {1e30f, 1e30f, -1e30f, 0, 0, 0, 0, 0},
      {100, 100, 100, 100, 100, 100, 100, 100}, {-0.0f, 0, -0.0f, 0, 0, 0, 0, 0}};
  std::vector<float> xs;
  for (const auto& r : rows) xs.insert(xs.end(), r.begin(), r.end());
  const int64_t nrows = int64_t(rows.size());
  const std::string ops[] = {"Softmax <axis = -1>", "LogSoftmax <axis = -1>", "ReduceMax <axes = [-1]>",
                             "ReduceMin <axes = [-1]>", "ReduceMean <axes = [-1]>", "ReduceL2 <axes = [-1]>",
                             "ReduceLogSumExp <axes = [-1]>", "LayerNormalization <axis = -1>"};
  for (const std::string& op : ops) {
    SCOPED_TRACE(op);
    const bool reduce = op.rfind("Reduce", 0) == 0, ln = op.rfind("Layer", 0) == 0;
    const std::string out = reduce ? fmt::format("float[{},1]", nrows) : fmt::format("float[{},8]", nrows);
    const std::string args = ln ? "b, s, t" : "b";
    const std::string consts = ln ? "s = Constant <value = float[8] {1, 2, 1, 2, 1, 2, 1, 2}> () "
                                    "t = Constant <value = float[8] {0, 1, 0, 1, 0, 1, 0, 1}> () "
                                  : "";
    auto [want, got] = unfused_and_fused(
        fmt::format("g (float[{0},8] x) => ({1} y) {{ {2} a = Neg(x)  b = Neg(a)  y = {3}({4}) }}", nrows, out, consts,
                    op, args),
        {Tensor::from<float>({nrows, 8}, xs)});
    expect_agree(want, got, [&](int64_t i) {
      return fmt::format("row {}, element {}", i / (want.numel() / nrows), i);
    });
  }
}

// The vector loops of fp32 groups (AVX-512 or AVX2: whole vectors of 16 or 8 lanes, then the scalar loop for the
// rest): rows of 37 run both in every row. Random values with special ones (NaN, infinities, signed zeros,
// exp's overflow and underflow ranges) at columns that fall in vector lanes (0, 5, 17) and in the tail (33, 36).
std::vector<float> row_values(int64_t rows, int64_t cols, uint32_t seed) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> special = {nan, inf, -inf, 0.0f, -0.0f, 89.0f, -88.0f, -104.0f, 1e-30f, 30.0f, -0.3f};
  std::vector<float> v(size_t(rows * cols));
  uint32_t state = seed;
  size_t k = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      state = state * 1664525u + 1013904223u;
      float x = (float(state >> 8) / float(1 << 24) - 0.5f) * 8.0f;
      if (c == 0 || c == 5 || c == 17 || c == 33 || c == 36) x = special[k++ % special.size()];
      v[size_t(r * cols + c)] = x;
    }
  return v;
}

// Rows of 37 run one vector per step and a scalar tail; rows of 85 (these formulas are heavy: eight vectors
// per step where the row has them, else four) run four, then one vector, then the tail; rows of 221 eight, four
// (with 16 lanes), one and the tail, with 16 lanes as with 8.
TEST(ElementwiseKernel, VectorLoopAndTailAgreeInEveryLoopForm) {
  for (const int64_t C : {37, 85, 221}) {
  const int64_t R = 40;
  const std::vector<Tensor> in = {Tensor::from<float>({R, C}, row_values(R, C, 1)),
                                  Tensor::from<float>({R, C}, row_values(R, C, 2)),
                                  Tensor::from<float>({C}, row_values(1, C, 3)),
                                  Tensor::from<float>({R, 1}, row_values(R, 1, 4))};
  // Flat (every operand the whole space), then the row form with an operand varying along the row (b) and one
  // per row (c); every transcendental's vector form, Where and comparisons, Max/Min with NaN.
  const std::string bodies[] = {
      "t = Mul(x, z)  u = Sigmoid(t)  w = Tanh(x)  e = Exp(z)  l = Log(u)  s = Erf(w)  m = Max(e, l)  p = Add(m, s) "
      "q = Softplus(x)  k = Less(x, z)  y0 = Where(k, p, q)  el = Elu(z)  y = Sub(y0, el)",
      "t = Mul(x, b)  u = Add(t, c)  w = Tanh(u)  e = Exp(w)  m = Min(e, x)  n = Sqrt(z)  y0 = Div(m, n) "
      "f = Floor(y0)  h = Selu(f)  y = Mul(h, c)"};
  for (const std::string& body : bodies) {
    SCOPED_TRACE(fmt::format("rows of {}: {}", C, body));
    auto [want, got] = unfused_and_fused(
        fmt::format("g (float[{0},{1}] x, float[{0},{1}] z, float[{1}] b, float[{0},1] c) => (float[{0},{1}] y) "
                    "{{ {2} }}",
                    R, C, body),
        in);
    expect_agree(want, got, [&](int64_t i) { return fmt::format("row {}, column {}", i / C, i % C); });
  }
  }
}

// A row kernel's row-shaped elementwise stages run on vectors too (a heavy formula eight or four per step):
// inputs read whole (x), along the row (b), once per row (c) and a row's reduction broadcast back (m), in rows
// of 37 (one vector per step, then the tail), of 85 (four, one, then the tail) and of 221 (eight first).
TEST(ElementwiseKernel, RowKernelStagesRunOnVectors) {
  for (const int64_t C : {37, 85, 221}) {
    const int64_t R = 40;
    // b finite: a NaN in it would reach every row's mean and leave nothing to compare.
    std::vector<float> b = row_values(1, C, 7);
    for (float& v : b) v = std::isfinite(v) ? v : 0.5f;
    const std::vector<Tensor> in = {Tensor::from<float>({R, C}, row_values(R, C, 6)), Tensor::from<float>({C}, b),
                                    Tensor::from<float>({R, 1}, row_values(R, 1, 8))};
    const std::string text = fmt::format(
        "g (float[{0},{1}] x, float[{1}] b, float[{0},1] c) => (float[{0},{1}] y) {{ t = Mul(x, b)  u = Tanh(t) "
        "e = Exp(u)  m = ReduceMean <axes = [-1]> (e)  d = Sub(e, m)  s = Sigmoid(d)  w = Add(s, c) "
        "y = Softmax <axis = -1> (w) }}",
        R, C);
    SCOPED_TRACE(text);
    auto [want, got] = unfused_and_fused(text, in);
    int64_t finite = 0;
    for (int64_t i = 0; i < want.numel(); ++i) finite += std::isfinite(want.data<float>()[i]);
    EXPECT_GT(finite, want.numel() / 4);
    // Eight ops in a chain, the softmax's exp of sums near 4 (one rounding there is 2.4e-7 of its argument):
    // 2e-5 relative; a lane computed from the wrong elements is off by far more.
    expect_agree(want, got, [&](int64_t i) { return fmt::format("row {}, column {}", i / C, i % C); }, 2e-5);
  }
}

// Light stages streamed into a reduction's loop, and a stage read in too many places staged instead: against op
// by op on rows with special values.
TEST(ElementwiseKernel, StreamedAndStagedReductionInputsAgree) {
  const int64_t R = 40, C = 37;
  const std::vector<Tensor> in = {Tensor::from<float>({R, C}, row_values(R, C, 9))};
  for (const std::string body : {"a = Relu(x)  b = Mul(a, a)  y = ReduceMean <axes = [-1]> (b)",
                                 "a = Relu(x)  b = Mul(a, a)  c = Mul(b, b)  d = Mul(c, c)  e = Mul(d, d) "
                                 "y = ReduceMax <axes = [-1]> (e)"}) {
    SCOPED_TRACE(body);
    auto [want, got] = unfused_and_fused(
        fmt::format("g (float[{0},{1}] x) => (float[{0},1] y) {{ {2} }}", R, C, body), in);
    expect_agree(want, got, [&](int64_t i) { return fmt::format("row {}", i); });
  }
}

// Softmax, LogSoftmax and ReduceLogSumExp sum exp(x - max) over whole vectors first: rows of 37 with special
// values in vector lanes and in the tail.
TEST(ElementwiseKernel, ExpSumsOverVectorsAndTail) {
  const int64_t R = 40, C = 37;
  const std::vector<Tensor> in = {Tensor::from<float>({R, C}, row_values(R, C, 5))};
  for (const std::string op : {"Softmax <axis = -1>", "LogSoftmax <axis = -1>", "ReduceLogSumExp <axes = [-1]>"}) {
    SCOPED_TRACE(op);
    const std::string out =
        op.rfind("Reduce", 0) == 0 ? fmt::format("float[{},1]", R) : fmt::format("float[{},{}]", R, C);
    auto [want, got] = unfused_and_fused(
        fmt::format("g (float[{0},{1}] x) => ({2} y) {{ a = Mul(x, x)  b = Sub(x, a)  y = {3}(b) }}", R, C, out, op),
        in);
    expect_agree(want, got, [&](int64_t i) { return fmt::format("element {}", i); });
  }
}

// fp16 and bf16 groups convert a vector of elements at a time (gaf_vload / gaf_vstore with the 16-bit kind)
// and their tails one at a time: rows of 37 (one vector per step, then the tail) and 221 (eight vectors per step
// first) with special values in both, against op by op. The unfused ops round every intermediate to 16 bits,
// the fused kernel only its output: within two roundings of the 16-bit type, NaN and infinities as unfused.
TEST(ElementwiseKernel, SixteenBitGroupsConvertWholeVectors) {
  for (const auto& [type, dtype, rel] : {std::tuple{"float16", DType::Float16, 2.0 * 0x1p-11},
                                         std::tuple{"bfloat16", DType::BFloat16, 2.0 * 0x1p-8}})
    for (const int64_t C : {37, 221}) {
      const int64_t R = 40;
      std::vector<Tensor> in;
      for (uint32_t seed : {1u, 2u}) {
        const std::vector<float> v = row_values(R, C, seed);
        Tensor t(dtype, {R, C});
        for (int64_t i = 0; i < t.numel(); ++i) t.set_double(i, v[size_t(i)]);
        in.push_back(std::move(t));
      }
      const std::string text = fmt::format(
          "g ({0}[{1},{2}] x, {0}[{1},{2}] z) => ({0}[{1},{2}] y) {{ a = Mul(x, z)  b = Sigmoid(a)  y = Sub(b, x) }}",
          type, R, C);
      SCOPED_TRACE(text);
      auto [want, got] = unfused_and_fused(text, in);
      ASSERT_EQ(got.dtype(), dtype);
      for (int64_t i = 0; i < want.numel(); ++i) {
        const double w = want.get_double(i), g = got.get_double(i);
        const std::string at = fmt::format("row {}, column {}: unfused {}, fused {}", i / C, i % C, w, g);
        if (!std::isfinite(w) || !std::isfinite(g))
          EXPECT_TRUE((std::isnan(w) && std::isnan(g)) || w == g) << at;
        else
          EXPECT_NEAR(g, w, rel * (std::abs(w) + std::abs(in[0].get_double(i)))) << at;
      }
    }
}

// A row kernel's fp32 stages reading fp16 elements a vector at a time (Cast, then Mul and Softmax in fp32): rows
// of 37 and 221 with special values, against op by op at fp32's tolerance (the Cast is exact).
TEST(ElementwiseKernel, RowStagesReadSixteenBitOperandsAsVectors) {
  for (const int64_t C : {37, 221}) {
    const int64_t R = 40;
    const std::vector<float> v = row_values(R, C, 3);
    Tensor x(DType::Float16, {R, C});
    for (int64_t i = 0; i < x.numel(); ++i) x.set_double(i, v[size_t(i)]);
    std::vector<float> b = row_values(1, C, 4);
    for (float& e : b) e = std::isfinite(e) ? e : 0.25f;
    const std::string text = fmt::format(
        "g (float16[{0},{1}] x, float[{1}] b) => (float[{0},{1}] y) {{ c = Cast <to = 1> (x)  a = Mul(c, b) "
        " y = Softmax <axis = -1> (a) }}",
        R, C);
    SCOPED_TRACE(text);
    auto [want, got] = unfused_and_fused(text, {x, Tensor::from<float>({C}, b)});
    expect_agree(want, got, [&](int64_t i) { return fmt::format("row {}, column {}", i / C, i % C); });
  }
}

// Which kernels get the vector loop: float groups (flat, row form, exp sums; fp16 and bf16 elements converted
// a vector at a time), not one with an integer operand.
TEST(ElementwiseKernel, FloatGroupsGetTheVectorLoop) {
  auto source_of = [](const std::string& text) {
    Model m = testing::parse(R"(<ir_version: 8, opset_import: ["" : 17]> )" + text);
    tools::FuseOptions opts;
    opts.fusion.opt_level = 3;
    Model f = testing::fused_copy(m, opts);
    for (const Node* n : f.graph->nodes())
      if (n->body) {
        std::string why;
        auto k = codegen::emit_kernel(*n, "k", codegen::EmitOptions{}, &why);
        EXPECT_TRUE(k) << why;
        return k ? k->source : std::string();
      }
    ADD_FAILURE() << "no fused node: " << f.graph->to_string();
    return std::string();
  };
  const std::string flat =
      source_of("g (float[64,37] x, float[64,37] z) => (float[64,37] y) { a = Mul(x, z)  y = Tanh(a) }");
  EXPECT_NE(flat.find("gaf_vload(in0 + (i))"), std::string::npos) << flat;
  EXPECT_NE(flat.find("#if defined(GAF_VECTOR)"), std::string::npos);
  // Tanh is heavy (its exp and division): four vectors per step, each statement for all four in turn, then one
  // vector per step; a Mul and an Add stream at one.
  EXPECT_NE(flat.find("iv + 4 * gaf_vw <= hi"), std::string::npos) << flat;
  EXPECT_NE(flat.find("const auto t0_3 = (a0_3 * a1_3);"), std::string::npos) << flat;
  EXPECT_NE(flat.find("gaf_vstore(out0 + (i + 3 * gaf_vw), gaf_vec("), std::string::npos) << flat;
  EXPECT_NE(flat.find("iv + gaf_vw <= hi"), std::string::npos) << flat;
  const std::string light =
      source_of("g (float[64,37] x, float[64,37] z) => (float[64,37] y) { a = Mul(x, z)  y = Add(a, x) }");
  EXPECT_NE(light.find("iv + gaf_vw <= hi"), std::string::npos) << light;
  EXPECT_EQ(light.find("* gaf_vw"), std::string::npos) << light;
  const std::string rows =
      source_of("g (float[64,37] x, float[37] b) => (float[64,37] y) { a = Mul(x, b)  y = Tanh(a) }");
  EXPECT_NE(rows.find("gaf_vload(in1 + (b1 + j))"), std::string::npos) << rows;
  const std::string softmax =
      source_of("g (float[64,37] x) => (float[64,37] y) { a = Mul(x, x)  y = Softmax <axis = -1> (a) }");
  EXPECT_NE(softmax.find("gaf_exp_nonpos(gaf_vload("), std::string::npos) << softmax;
  // The row kernel's stages: Mul on one vector per step, Tanh (heavy) on four.
  const std::string staged = source_of(
      "g (float[64,37] x, float[37] b) => (float[64,37] y) { a = Mul(x, b)  t = Tanh(a)  y = Softmax <axis = -1> (t) }");
  EXPECT_NE(staged.find("const gaf_v a1_0 = gaf_vload(in1 + (j));"), std::string::npos) << staged;
  EXPECT_NE(staged.find("jv + 4 * gaf_vw <= L"), std::string::npos) << staged;
  EXPECT_NE(staged.find("const gaf_v y_3 = gaf_vec(gaf_tanh(a0_3));"), std::string::npos) << staged;
  // A light stage that only a reduction over the row reads streams in the reduction's loop: no row buffer, no
  // scratch. Softmax reads its input twice and keeps it staged, and so does a heavy stage (Exp: its vector form).
  const std::string streamed = source_of(
      "g (float[64,37] x) => (float[64,1] y) { a = Relu(x)  b = Mul(a, a)  y = ReduceMean <axes = [-1]> (b) }");
  EXPECT_NE(streamed.find("s0 += (((gaf_max(in0[r * L + j], 0.0f)) * (gaf_max(in0[r * L + j], 0.0f))));"),
            std::string::npos)
      << streamed;
  EXPECT_EQ(streamed.find("buf0"), std::string::npos) << streamed;
  EXPECT_EQ(streamed.find("malloc"), std::string::npos) << streamed;
  // A chain of squares would write Relu's formula 16 times: more than 8 places, so Relu is staged and the squares
  // read its buffer (16 reads) in the reduction's loop.
  const std::string squares = source_of(
      "g (float[64,37] x) => (float[64,1] y) { a = Relu(x)  b = Mul(a, a)  c = Mul(b, b)  d = Mul(c, c) "
      "e = Mul(d, d)  y = ReduceMean <axes = [-1]> (e) }");
  EXPECT_NE(squares.find("gaf_vstore(buf0 + j, y_0);"), std::string::npos) << squares;
  EXPECT_EQ(squares.find("buf1"), std::string::npos) << squares;
  const size_t reduce_line = squares.find("s0 += ");
  ASSERT_NE(reduce_line, std::string::npos) << squares;
  const std::string loop = squares.substr(reduce_line, squares.find('\n', reduce_line) - reduce_line);
  size_t reads = 0;
  for (size_t p = loop.find("buf0[j]"); p != std::string::npos; p = loop.find("buf0[j]", p + 1)) ++reads;
  EXPECT_EQ(reads, 16u) << loop;
  const std::string softmax_staged =
      source_of("g (float[64,37] x) => (float[64,37] y) { a = Relu(x)  y = Softmax <axis = -1> (a) }");
  EXPECT_NE(softmax_staged.find("gaf_vstore(buf0 + j, y_0);"), std::string::npos) << softmax_staged;
  const std::string exp_staged =
      source_of("g (float[64,37] x) => (float[64,1] y) { a = Exp(x)  ax = Constant <value = int64[1] {-1}> () "
                "y = ReduceSum(a, ax) }");
  EXPECT_NE(exp_staged.find("s0 += buf0[j];"), std::string::npos) << exp_staged;
  const std::string half = source_of(
      "g (float16[64,37] x, float16[64,37] z) => (float16[64,37] y) { a = Mul(x, z)  y = Tanh(a) }");
  EXPECT_NE(half.find("gaf_vload(in0 + (i), false)"), std::string::npos) << half;
  EXPECT_NE(half.find("gaf_vstore(out0 + (i), gaf_vec(t1_0), false);"), std::string::npos) << half;
  EXPECT_NE(half.find("gaf_load_half(in0[i])"), std::string::npos) << half;  // the tail
  const std::string bf16 = source_of(
      "g (bfloat16[64,37] x, float[64,37] z) => (bfloat16[64,37] y) { c = Cast <to = 1> (x)  a = Mul(c, z) "
      " d = Cast <to = 16> (a)  y = Relu(d) }");
  EXPECT_NE(bf16.find("gaf_vload(in0 + (i), true)"), std::string::npos) << bf16;
  EXPECT_NE(bf16.find("gaf_vload(in1 + (i))"), std::string::npos) << bf16;
  // A row kernel's fp32 stage reading an fp16 operand (a mixed-precision graph's Cast before a softmax).
  const std::string mixed = source_of(
      "g (float16[64,37] x, float[37] b) => (float[64,37] y) { c = Cast <to = 1> (x)  a = Mul(c, b) "
      " y = Softmax <axis = -1> (a) }");
  EXPECT_NE(mixed.find("gaf_vload(in0 + (r * L + j), false)"), std::string::npos) << mixed;
}

}  // namespace
}  // namespace gaf
