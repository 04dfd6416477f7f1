// A session that owns its graph holds a weight once: where every kernel reading a constant keeps it packed
// (a decoder's products on Gemv), the graph's copy is released, and every row count still gives the product.
#include <gtest/gtest.h>

#include <cmath>

#include "gaf/builder.h"
#include "gaf/session.h"
#include "test_util.h"

namespace gaf {
namespace {

constexpr int64_t K = 256, N = 384;  // K * N over Gemv's 2^16 threshold: packed when the session starts

Tensor weights(std::vector<int64_t> dims, int salt) {
  Tensor w(DType::Float, std::move(dims));
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = float((i * 7919 + salt * 131) % 201 - 100) / 800.f;
  return w;
}

Tensor rows_of(int64_t m, int64_t k, int salt) {
  Tensor x(DType::Float, {m, k});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = float((i * 104729 + salt) % 97 - 48) / 64.f;
  return x;
}

// y[m, n] = x[m, k] * w, with w [k, n] or, transposed, [n, k].
std::vector<double> product(const std::vector<double>& x, int64_t m, int64_t k, const Tensor& w, bool transposed) {
  const int64_t n = transposed ? w.dim(0) : w.dim(1);
  std::vector<double> y(size_t(m * n), 0.0);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t i = 0; i < k; ++i)
      for (int64_t c = 0; c < n; ++c)
        y[size_t(r * n + c)] += x[size_t(r * k + i)] * double(w.data<float>()[transposed ? c * k + i : i * n + c]);
  return y;
}

void expect_near(const Tensor& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(size_t(got.numel()), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got.data<float>()[i], want[i], 1e-3 + 1e-4 * std::abs(want[i])) << what << ", element " << i;
}

// The model fused at opt level 2, in place.
void fuse(Model& m, PrecisionMode mode = PrecisionMode::Fp32) {
  tools::FuseOptions opts;
  opts.fusion.opt_level = 2;
  opts.fusion.rules.precision_mode = mode;
  tools::fuse_model(m, opts);
}

bool has_data(const Graph& g, const std::string& name) {
  const Value* v = g.find_value(name);
  return v && v->is_constant() && v->constant().has_data();
}

// A decoder's products, rows known only at run time: MatMul(a, w1) then Gemm(., w2, transB), both weights
// packed for Gemv; then MatMul(., w3) where w3 is also read by a ReduceSum, which needs its data.
struct Products {
  Graph g;
  Tensor w1 = weights({K, N}, 1), w2 = weights({K, N}, 2), w3 = weights({K, N}, 3);
  Products() {
    const Dim rows(std::string("rows"));
    Value* a = g.add_input("a", TensorType{DType::Float, Shape{rows, Dim(K)}});
    auto node = [&](const std::string& op, std::vector<Value*> ins, const std::string& out, Shape shape) {
      Node* n = g.add_node(op, ins, {out});
      n->opset = 17;
      n->output(0)->type = TensorType{DType::Float, std::move(shape)};
      return n;
    };
    Value* y1 = node("MatMul", {a, g.add_constant("w1", w1)}, "y1", Shape{rows, Dim(N)})->output(0);
    Node* gemm = node("Gemm", {y1, g.add_constant("w2", w2)}, "y2", Shape{rows, Dim(K)});
    gemm->attrs["transB"] = int64_t(1);
    Value* w3v = g.add_constant("w3", w3);
    g.add_output(node("MatMul", {gemm->output(0), w3v}, "y3", Shape{rows, Dim(N)})->output(0));
    Node* sum = node("ReduceSum", {w3v}, "s", Shape{Dim(1), Dim(1)});
    sum->attrs["keepdims"] = int64_t(1);
    g.add_output(sum->output(0));
  }
};

TEST(OwnedSession, HoldsTheWeightsItPacksOnce) {
  Products p;
  runtime::Session borrowed(p.g);
  runtime::Session owned(p.g.clone());
  EXPECT_EQ(borrowed.released_weight_bytes(), 0u);
  EXPECT_EQ(owned.released_weight_bytes(), size_t(2 * K * N) * sizeof(float));
  EXPECT_FALSE(has_data(owned.graph(), "w1"));
  EXPECT_FALSE(has_data(owned.graph(), "w2"));
  EXPECT_TRUE(has_data(owned.graph(), "w3")) << "the ReduceSum reads it: kept";
  for (const char* w : {"w1", "w2", "w3"}) EXPECT_TRUE(has_data(p.g, w)) << "a borrowed graph is left as it is";
  EXPECT_THROW(runtime::Session(std::unique_ptr<Graph>()), Error);
  const Value* w1 = owned.graph().find_value("w1");
  EXPECT_EQ(w1->constant().dims(), (std::vector<int64_t>{K, N}));  // still typed and shaped

  double total = 0;
  for (int64_t i = 0; i < p.w3.numel(); ++i) total += p.w3.data<float>()[i];
  // 1 and 7 rows: Gemv; 64: Gemv's row groups; 300 (past the 256 Gemv takes): oneDNN on the weights unpacked
  // for the run, three times, where a borrowed session packs its own copy on the third.
  for (const int64_t m : {1, 7, 64, 300, 300, 300, 2}) {
    const Tensor x = rows_of(m, K, int(m));
    std::vector<double> xd(x.data<float>(), x.data<float>() + x.numel());
    const auto y1 = product(xd, m, K, p.w1, false);
    const auto y2 = product(y1, m, N, p.w2, true);
    const auto y3 = product(y2, m, K, p.w3, false);
    for (runtime::Session* s : {&borrowed, &owned}) {
      const std::string what = fmt::format("{} rows, {} session", m, s == &owned ? "owned" : "borrowed");
      std::vector<Tensor> out = s->run({{"a", x}});
      expect_near(out[0], y3, what);
      EXPECT_NEAR(out[1].data<float>()[0], total, 1e-3) << what;
    }
  }
}

// A product fused with its bias and activation (one oneDNN primitive in a gaf.fused node) lets go of its
// weights the same way; a weight that is not a Gemv product's (static rows) is kept.
TEST(OwnedSession, FusedProductsReleaseTheirWeightsToo) {
  for (const bool dynamic : {true, false}) {
    SCOPED_TRACE(dynamic ? "rows known at run time" : "static rows");
    Model m;
    GraphBuilder b(m, 17);
    Value* a = b.input("a", DType::Float, dynamic ? Shape{Dim(std::string("rows")), Dim(K)} : Shape{Dim(5), Dim(K)});
    const Tensor w = weights({K, N}, 4), bias = weights({N}, 5);
    Value* y = b.op("MatMul", {a, b.constant(w, "w")});
    y = b.op("Relu", {b.op("Add", {y, b.constant(bias, "bias")})});
    b.output(y);
    b.finish();
    fuse(m);
    ASSERT_EQ(testing::count_fused(*m.graph), 1) << m.graph->to_string();
    runtime::Session owned(m.graph->clone());
    EXPECT_EQ(owned.released_weight_bytes(), dynamic ? size_t(K * N) * sizeof(float) : 0u);
    EXPECT_EQ(has_data(owned.graph(), "w"), !dynamic);
    EXPECT_TRUE(has_data(owned.graph(), "bias"));
    for (const int64_t rows : dynamic ? std::vector<int64_t>{1, 20, 300} : std::vector<int64_t>{5}) {
      const Tensor x = rows_of(rows, K, int(rows));
      std::vector<double> want = product(std::vector<double>(x.data<float>(), x.data<float>() + x.numel()), rows, K,
                                         w, false);
      for (size_t i = 0; i < want.size(); ++i) want[i] = std::max(0.0, want[i] + bias.data<float>()[i % N]);
      expect_near(owned.run({{"a", x}})[0], want, fmt::format("{} rows", rows));
    }
  }
}

// Weights compressed to bfloat16 (precision_mode bf16_mixed: gaf.CompressedMatMul, every row count on Gemv)
// are held once too, and the owned session computes exactly what a borrowing one does.
TEST(OwnedSession, CompressedWeightsAreHeldOnce) {
  Model m;
  GraphBuilder b(m, 17);
  Value* a = b.input("a", DType::Float, Shape{Dim(std::string("rows")), Dim(K)});
  b.output(b.op("MatMul", {a, b.constant(weights({K, N}, 7), "w")}));
  b.finish();
  fuse(m, PrecisionMode::Bf16Mixed);
  ASSERT_EQ(m.graph->nodes().size(), 1u);
  ASSERT_EQ(m.graph->nodes()[0]->op_type, "CompressedMatMul") << m.graph->to_string();
  runtime::Session borrowed(*m.graph);
  runtime::Session owned(m.graph->clone());
  EXPECT_EQ(owned.released_weight_bytes(), size_t(K * N) * 2);  // the bfloat16 copy
  for (const int64_t rows : {1, 40}) {
    const Tensor x = rows_of(rows, K, 3);
    const Tensor y0 = borrowed.run({{"a", x}})[0], y1 = owned.run({{"a", x}})[0];
    ASSERT_EQ(y0.numel(), y1.numel());
    for (int64_t i = 0; i < y0.numel(); ++i) ASSERT_EQ(y0.data<float>()[i], y1.data<float>()[i]) << rows << " rows";
  }
}

// A product fused with an addend that broadcasts over its rows ([2, 1, N] onto [2, rows, N]) does not fold its
// rows into one matrix, which Gemv needs: its released weights are unpacked for such a run, and the sums agree.
TEST(OwnedSession, AnUnfoldedProductUnpacksReleasedWeights) {
  Model m;
  GraphBuilder b(m, 17);
  Value* a = b.input("a", DType::Float, Shape{Dim(2), Dim(std::string("rows")), Dim(K)});
  Value* r = b.input("r", DType::Float, Shape{Dim(2), Dim(1), Dim(N)});
  const Tensor w = weights({K, N}, 6);
  b.output(b.op("Add", {b.op("MatMul", {a, b.constant(w, "w")}), r}));
  b.finish();
  fuse(m);
  ASSERT_EQ(testing::count_fused(*m.graph), 1) << m.graph->to_string();
  runtime::Session owned(m.graph->clone());
  ASSERT_EQ(owned.released_weight_bytes(), size_t(K * N) * sizeof(float));
  for (const int64_t rows : {3, 1}) {
    const Tensor x = rows_of(2 * rows, K, int(rows)), res = rows_of(2, N, 9);
    std::vector<double> want = product(std::vector<double>(x.data<float>(), x.data<float>() + x.numel()),
                                       2 * rows, K, w, false);
    for (size_t i = 0; i < want.size(); ++i) want[i] += res.data<float>()[(i / size_t(rows * N)) * N + i % N];
    expect_near(owned.run({{"a", x.reshaped({2, rows, K})}, {"r", res.reshaped({2, 1, N})}})[0], want,
                fmt::format("{} rows", rows));
  }
}

}  // namespace
}  // namespace gaf
