// Unit tests of the "extra" kernel family (losses, RNN/GRU/LSTM, string ops, NonMaxSuppression, RoiAlign,
// GridSample, MaxUnpool): what the ONNX conformance data does not cover. 16-bit float paths, sequence_lens,
// bidirectional and layout-1 recurrent layers against a plain reference, large inputs that take the parallel
// paths, and errors with useful messages for bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "gaf/onnx_io.h"
#include "gaf/session.h"

namespace gaf {
namespace {

std::string model(int opset, const std::string& graph) {
  return "<ir_version: 8, opset_import: [\"\" : " + std::to_string(opset) + "]> " + graph;
}

std::vector<Tensor> run(const std::string& text, const std::vector<Tensor>& inputs) {
  Model m = onnx_io::parse_model_text(text);
  runtime::Session s(*m.graph);
  return s.run(inputs);
}

// Runs and returns the message of the error thrown (fails when nothing or something else is thrown).
template <class E = Error>
std::string error_of(const std::string& text, const std::vector<Tensor>& inputs) {
  try {
    run(text, inputs);
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "unexpected exception type: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no error thrown";
  return "";
}
#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << (msg)

template <class T>
Tensor make(std::vector<int64_t> dims, const std::vector<T>& v) {
  return Tensor::from<T>(std::move(dims), std::span<const T>(v));
}
Tensor f32(std::vector<int64_t> dims, const std::vector<float>& v) { return make<float>(std::move(dims), v); }
Tensor i64(std::vector<int64_t> dims, const std::vector<int64_t>& v) {
  return make<int64_t>(std::move(dims), v);
}
Tensor i32(std::vector<int64_t> dims, const std::vector<int32_t>& v) {
  return make<int32_t>(std::move(dims), v);
}
Tensor f16(std::vector<int64_t> dims, const std::vector<float>& v) {
  std::vector<Half> h;
  for (float x : v) h.push_back(Half{float_to_half(x)});
  return make<Half>(std::move(dims), h);
}
Tensor bf16(std::vector<int64_t> dims, const std::vector<float>& v) {
  std::vector<BFloat16> h;
  for (float x : v) h.push_back(BFloat16{float_to_bf16(x)});
  return make<BFloat16>(std::move(dims), h);
}
Tensor strs(std::vector<int64_t> dims, const std::vector<std::string>& v) {
  Tensor t(DType::String, std::move(dims));
  for (size_t i = 0; i < v.size(); ++i) t.strings()[i] = v[i];
  return t;
}

template <class T>
std::vector<T> values(const Tensor& t) {
  const T* p = t.data<T>();
  return std::vector<T>(p, p + t.numel());
}
std::vector<double> as_double(const Tensor& t) {
  std::vector<double> r(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) r[size_t(i)] = t.get_double(i);
  return r;
}
std::vector<std::string> as_strings(const Tensor& t) {
  return std::vector<std::string>(t.strings(), t.strings() + t.numel());
}

// Deterministic pseudo-random values in [lo, hi].
std::vector<float> rnd(int64_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t s = seed * 2654435761u + 12345u;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = lo + (hi - lo) * float(s >> 8) / float(1u << 24);
  }
  return v;
}
// Values rounded to fp16 so fp16 and fp32 runs see the same inputs.
std::vector<float> rnd_h(int64_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  auto v = rnd(n, seed, lo, hi);
  for (auto& x : v) x = half_to_float(float_to_half(x));
  return v;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double rtol = 1e-5,
                  double atol = 1e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], atol + rtol * std::abs(want[i])) << "at element " << i;
}

// ---------------------------------------------------------------------------------------------------------------
// NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss

// Reference: loss per position of scores [N, C, D] given log-probabilities, and the reduction.
struct LossRef {
  std::vector<double> per_pos;
  double sum = 0, wsum = 0;
};
LossRef loss_ref(const std::vector<double>& logp, const std::vector<int64_t>& t, const std::vector<double>& w,
                 int64_t N, int64_t C, int64_t D, bool has_ii, int64_t ii) {
  LossRef r;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < D; ++d) {
      const int64_t c = t[size_t(n * D + d)];
      double l = 0, wt = 0;
      if (!(has_ii && c == ii)) {
        wt = w.empty() ? 1.0 : w[size_t(c)];
        l = -wt * logp[size_t((n * C + c) * D + d)];
      }
      r.per_pos.push_back(l);
      r.sum += l;
      r.wsum += wt;
    }
  return r;
}
std::vector<double> log_softmax_ref(const std::vector<float>& x, int64_t N, int64_t C, int64_t D) {
  std::vector<double> out(x.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < D; ++d) {
      double m = -INFINITY, s = 0;
      for (int64_t c = 0; c < C; ++c) m = std::max(m, double(x[size_t((n * C + c) * D + d)]));
      for (int64_t c = 0; c < C; ++c) s += std::exp(double(x[size_t((n * C + c) * D + d)]) - m);
      for (int64_t c = 0; c < C; ++c)
        out[size_t((n * C + c) * D + d)] = double(x[size_t((n * C + c) * D + d)]) - m - std::log(s);
    }
  return out;
}

TEST(extraops_Loss, NllFloat16WeightsIgnoreIndexMean) {
  const int64_t N = 3, C = 4, D = 5;
  auto x = rnd_h(N * C * D, 1, -3.f, 0.f);
  std::vector<int64_t> t;
  for (int64_t i = 0; i < N * D; ++i) t.push_back(i % 5 == 2 ? -1 : i % C);
  auto w = rnd_h(C, 2, 0.5f, 2.f);
  auto outs =
      run(model(13, R"(g (float16[3,4,5] x, int64[3,5] t, float16[4] w) => (float16 y, float16[3,5] z) {
      y = NegativeLogLikelihoodLoss<ignore_index = -1>(x, t, w)
      z = NegativeLogLikelihoodLoss<ignore_index = -1, reduction = "none">(x, t, w) })"),
          {f16({N, C, D}, x), i64({N, D}, t), f16({C}, w)});
  std::vector<double> xd(x.begin(), x.end()), wd(w.begin(), w.end());
  LossRef r = loss_ref(xd, t, wd, N, C, D, true, -1);
  ASSERT_EQ(outs[0].dtype(), DType::Float16);
  EXPECT_EQ(outs[0].rank(), 0);
  expect_close(as_double(outs[0]), {r.sum / r.wsum}, 2e-3, 1e-3);
  expect_close(as_double(outs[1]), r.per_pos, 2e-3, 1e-3);
  EXPECT_EQ(as_double(outs[1])[2], 0.0);  // ignored position
}

TEST(extraops_Loss, SceBFloat16WithLogProbAndInt32Labels) {
  const int64_t N = 2, C = 3, D = 4;
  std::vector<float> x = rnd(N * C * D, 3, -4.f, 4.f);
  for (auto& v : x) v = bf16_to_float(float_to_bf16(v));
  std::vector<int32_t> t = {0, 1, 2, 1, 2, 2, 0, 1};
  auto outs = run(model(13, R"(g (bfloat16[2,3,4] x, int32[2,4] t) => (bfloat16 y, bfloat16[2,3,4] lp) {
      y, lp = SoftmaxCrossEntropyLoss<reduction = "sum">(x, t) })"),
                  {bf16({N, C, D}, x), i32({N, D}, t)});
  auto lp = log_softmax_ref(x, N, C, D);
  LossRef r = loss_ref(lp, std::vector<int64_t>(t.begin(), t.end()), {}, N, C, D, false, 0);
  expect_close(as_double(outs[0]), {r.sum}, 1e-2, 1e-2);
  expect_close(as_double(outs[1]), lp, 1e-2, 1e-2);
}

TEST(extraops_Loss, SceLargeSpatialParallelAndRowMajorC) {
  // D = 3000 spans several position blocks (256) per batch and many parallel units; C = 1 degenerate too.
  const int64_t N = 3, C = 37, D = 3000;
  auto x = rnd(N * C * D, 4, -5.f, 5.f);
  std::vector<int64_t> t;
  for (int64_t i = 0; i < N * D; ++i) t.push_back((i * 7) % C);
  auto w = rnd(C, 5, 0.1f, 1.f);
  auto outs = run(
      model(
          13,
          R"(g (float[3,37,3000] x, int64[3,3000] t, float[37] w) => (float y, float[3,3000] z, float[3,37,3000] lp) {
      y = SoftmaxCrossEntropyLoss<ignore_index = 3>(x, t, w)
      z, lp = SoftmaxCrossEntropyLoss<reduction = "none">(x, t, w) })"),
      {f32({N, C, D}, x), i64({N, D}, t), f32({C}, w)});
  auto lp = log_softmax_ref(x, N, C, D);
  std::vector<double> wd(w.begin(), w.end());
  LossRef mean = loss_ref(lp, t, wd, N, C, D, true, 3);
  LossRef none = loss_ref(lp, t, wd, N, C, D, false, 0);
  expect_close(as_double(outs[0]), {mean.sum / mean.wsum}, 1e-4);
  expect_close(as_double(outs[1]), none.per_pos, 1e-4, 1e-5);
  expect_close(as_double(outs[2]), lp, 1e-5, 1e-5);

  // (N, C) rows with D = 1 and many rows.
  const int64_t R = 70000, K = 5;
  auto x2 = rnd(R * K, 6, -2.f, 2.f);
  std::vector<int64_t> t2;
  for (int64_t i = 0; i < R; ++i) t2.push_back(i % K);
  outs = run(model(13, R"(g (float[70000,5] x, int64[70000] t) => (float y) {
      y = SoftmaxCrossEntropyLoss(x, t) })"),
             {f32({R, K}, x2), i64({R}, t2)});
  LossRef m2 = loss_ref(log_softmax_ref(x2, R, K, 1), t2, {}, R, K, 1, false, 0);
  expect_close(as_double(outs[0]), {m2.sum / double(R)}, 1e-4);
}

TEST(extraops_Loss, SceDoubleMatchesReference) {
  const int64_t N = 5, C = 7, D = 3;
  auto x = rnd(N * C * D, 9, -6.f, 6.f);
  std::vector<int64_t> t;
  for (int64_t i = 0; i < N * D; ++i) t.push_back((i * 3) % C);
  auto outs = run(model(13, R"(g (double[5,7,3] x, int64[5,3] t) => (double[5,3] y, double[5,7,3] lp) {
      y, lp = SoftmaxCrossEntropyLoss<reduction = "none">(x, t) })"),
                  {make<double>({N, C, D}, std::vector<double>(x.begin(), x.end())), i64({N, D}, t)});
  auto lp = log_softmax_ref(x, N, C, D);
  expect_close(as_double(outs[0]), loss_ref(lp, t, {}, N, C, D, false, 0).per_pos, 1e-13, 1e-13);
  expect_close(as_double(outs[1]), lp, 1e-13, 1e-13);
}

TEST(extraops_Loss, AllIgnoredMeanIsNaNAndSumIsZero) {
  auto outs = run(model(13, R"(g (float[2,3] x, int64[2] t) => (float y, float z) {
      y = NegativeLogLikelihoodLoss<ignore_index = 1>(x, t)
      z = NegativeLogLikelihoodLoss<ignore_index = 1, reduction = "sum">(x, t) })"),
                  {f32({2, 3}, {1, 2, 3, 4, 5, 6}), i64({2}, {1, 1})});
  EXPECT_TRUE(std::isnan(outs[0].data<float>()[0]));
  EXPECT_EQ(outs[1].data<float>()[0], 0.f);
}

TEST(extraops_Loss, BadInputErrors) {
  const std::string g = model(13, R"(g (float[2,3,2] x, int64[2,2] t) => (float y) {
      y = NegativeLogLikelihoodLoss(x, t) })");
  std::string msg = error_of(g, {f32({2, 3, 2}, rnd(12, 1)), i64({2, 2}, {0, 1, 3, 0})});
  EXPECT_HAS(msg, "NegativeLogLikelihoodLoss");
  EXPECT_HAS(msg, "value 3 at position 2 is not a class index in [0, 3)");
  msg = error_of(model(13, R"(g (float[2,3,2] x, int64[2,3] t) => (float y) {
      y = NegativeLogLikelihoodLoss(x, t) })"),
                 {f32({2, 3, 2}, rnd(12, 1)), i64({2, 3}, {0, 1, 2, 0, 1, 2})});
  EXPECT_HAS(msg, "target must have shape [2,2]");
  msg = error_of(model(13, R"(g (float[2,3] x, int64[2] t, float[2] w) => (float y) {
      y = SoftmaxCrossEntropyLoss(x, t, w) })"),
                 {f32({2, 3}, rnd(6, 1)), i64({2}, {0, 1}), f32({2}, {1, 1})});
  EXPECT_HAS(msg, "weights must have shape [3]");
  msg = error_of(model(13, R"(g (float[2,3] x, int64[2] t) => (float y) {
      y = SoftmaxCrossEntropyLoss<reduction = "avg">(x, t) })"),
                 {f32({2, 3}, rnd(6, 1)), i64({2}, {0, 1})});
  EXPECT_HAS(msg, "reduction 'avg' is not valid");
  msg = error_of<UnsupportedError>(model(13, R"(g (int32[2,3] x, int64[2] t) => (int32 y) {
      y = NegativeLogLikelihoodLoss(x, t) })"),
                                   {i32({2, 3}, {1, 2, 3, 4, 5, 6}), i64({2}, {0, 1})});
  EXPECT_HAS(msg, "int32");
}

// ---------------------------------------------------------------------------------------------------------------
// StringNormalizer, TfIdfVectorizer

TEST(extraops_StringNormalizer, Utf8CaseAndInsensitiveStopwords) {
  auto outs = run(model(10, R"(g (string[5] x) => (string[N] y, string[M] z) {
      y = StringNormalizer<case_change_action = "UPPER", stopwords = ["ÉTÉ", "the"]>(x)
      z = StringNormalizer<case_change_action = "LOWER", is_case_sensitive = 1, stopwords = ["The"]>(x) })"),
                  {strs({5}, {"The", "été", "Straße", "Привет Ωμέγα", "x\xff"})});
  EXPECT_EQ(as_strings(outs[0]), (std::vector<std::string>{"STRAßE", "ПРИВЕТ ΩΜΈΓΑ", "X\xff"}));
  EXPECT_EQ(as_strings(outs[1]), (std::vector<std::string>{"été", "straße", "привет ωμέγα", "x\xff"}));
}

TEST(extraops_StringNormalizer, AllDroppedKeepsRankAndErrors) {
  auto outs = run(model(10, R"(g (string[1,2] x) => (string[1,N] y) {
      y = StringNormalizer<stopwords = ["a", "B"]>(x) })"),
                  {strs({1, 2}, {"A", "b"})});
  EXPECT_EQ(outs[0].dims(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(as_strings(outs[0]), std::vector<std::string>{""});
  std::string msg = error_of(model(10, R"(g (string[2,2] x) => (string[N] y) { y = StringNormalizer(x) })"),
                             {strs({2, 2}, {"a", "b", "c", "d"})});
  EXPECT_HAS(msg, "must have shape [C] or [1, C], got [2,2]");
  msg = error_of(model(10, R"(g (string[2] x) => (string[N] y) {
      y = StringNormalizer<case_change_action = "TITLE">(x) })"),
                 {strs({2}, {"a", "b"})});
  EXPECT_HAS(msg, "case_change_action 'TITLE' is not valid");
}

TEST(extraops_TfIdf, StringPoolIdfTfidfAndColumnMapping) {
  // Pool: unigrams {a, b}, bigrams {(a, b), (b, c)}; columns permuted: a->3, b->0, ab->2, bc->1.
  const char* attrs = R"(max_gram_length = 2, min_gram_length = 1, max_skip_count = 1, ngram_counts = [0, 2],
      ngram_indexes = [3, 0, 2, 1], pool_strings = ["a", "b", "a", "b", "b", "c"], weights = [0.5, 2.0, 3.0, 4.0])";
  auto outs =
      run(model(9, std::string(R"(g (string[2,5] x) => (float[2,4] tf, float[2,4] idf, float[2,4] tfidf) {
      tf = TfIdfVectorizer<mode = "TF", )") +
                       attrs + R"(>(x)
      idf = TfIdfVectorizer<mode = "IDF", )" +
                       attrs + R"(>(x)
      tfidf = TfIdfVectorizer<mode = "TFIDF", )" +
                       attrs + R"(>(x) })"),
          {strs({2, 5}, {"a", "b", "c", "a", "x", "b", "x", "c", "c", "c"})});
  // Row 0 (a b c a x): a 2, b 1, ab 1 (adjacent), bc 1 (adjacent). Row 1 (b x c c c): b 1, bc 1 (one item
  // skipped). Columns: [b, bc, ab, a]; column weights [2, 4, 3, 0.5].
  EXPECT_EQ(values<float>(outs[0]), (std::vector<float>{1, 1, 1, 2, 1, 1, 0, 0}));
  EXPECT_EQ(values<float>(outs[1]), (std::vector<float>{2, 4, 3, 0.5, 2, 4, 0, 0}));
  EXPECT_EQ(values<float>(outs[2]), (std::vector<float>{2, 4, 3, 1, 2, 4, 0, 0}));
}

TEST(extraops_TfIdf, Int32InputLargeBatchAndErrors) {
  const int64_t N = 20000, L = 8;
  std::vector<int32_t> x;
  for (int64_t i = 0; i < N * L; ++i) x.push_back(int32_t((i * 5 + i / L) % 4));
  auto outs = run(model(9, R"(g (int32[20000,8] x) => (float[20000,3] y) {
      y = TfIdfVectorizer<mode = "TF", max_gram_length = 2, min_gram_length = 2, max_skip_count = 0,
          ngram_counts = [0, 0], ngram_indexes = [0, 1, 2], pool_int64s = [0, 1, 1, 2, 3, 0]>(x) })"),
                  {i32({N, L}, x)});
  const float* y = outs[0].data<float>();
  for (int64_t r = 0; r < N; r += 997) {
    float want[3] = {0, 0, 0};
    for (int64_t i = 0; i + 1 < L; ++i) {
      const int32_t a = x[size_t(r * L + i)], b = x[size_t(r * L + i + 1)];
      if (a == 0 && b == 1) ++want[0];
      if (a == 1 && b == 2) ++want[1];
      if (a == 3 && b == 0) ++want[2];
    }
    for (int c = 0; c < 3; ++c) ASSERT_EQ(y[r * 3 + c], want[c]) << "row " << r << " column " << c;
  }
  std::string msg = error_of(model(9, R"(g (int64[4] x) => (float[N] y) {
      y = TfIdfVectorizer<mode = "TF", max_gram_length = 1, min_gram_length = 1, max_skip_count = 0,
          ngram_counts = [0], ngram_indexes = [0, 1], pool_int64s = [1, 2, 3]>(x) })"),
                             {i64({4}, {1, 2, 3, 4})});
  EXPECT_HAS(msg, "ngram_indexes has 2 entries for the 3 n-grams");
  msg = error_of(model(9, R"(g (string[2] x) => (float[N] y) {
      y = TfIdfVectorizer<mode = "TF", max_gram_length = 1, min_gram_length = 1, max_skip_count = 0,
          ngram_counts = [0], ngram_indexes = [0], pool_int64s = [1]>(x) })"),
                 {strs({2}, {"a", "b"})});
  EXPECT_HAS(msg, "string input needs pool_strings");
}

// ---------------------------------------------------------------------------------------------------------------
// RNN, GRU, LSTM against a plain double reference (layout 0)

double sigm(double v) { return 1.0 / (1.0 + std::exp(-v)); }

struct RecInputs {
  int64_t S, B, I, H, D;
  std::vector<float> X, W, R, bias, h0, c0, P;  // bias/h0/c0/P empty when absent
  std::vector<int32_t> lens;                    // empty when absent
};
struct RecOut {
  std::vector<double> y, yh, yc;
};
using Fn = std::function<double(double)>;

RecOut rec_ref(const std::string& cell, const RecInputs& in, bool reverse, bool lbr, double clip, Fn f, Fn g,
               Fn h, bool input_forget = false) {
  const int64_t S = in.S, B = in.B, I = in.I, H = in.H, D = in.D;
  const int64_t G = cell == "RNN" ? 1 : cell == "GRU" ? 3 : 4, GH = G * H;
  RecOut o;
  o.y.assign(size_t(S * D * B * H), 0.0);
  o.yh.assign(size_t(D * B * H), 0.0);
  o.yc.assign(size_t(D * B * H), 0.0);
  auto cl = [&](double v) { return clip > 0 ? std::clamp(v, -clip, clip) : v; };
  for (int64_t d = 0; d < D; ++d) {
    const bool fwd = D == 2 ? d == 0 : !reverse;
    for (int64_t b = 0; b < B; ++b) {
      std::vector<double> hs(size_t(H), 0.0), cs(size_t(H), 0.0);
      for (int64_t k = 0; k < H; ++k) {
        if (!in.h0.empty()) hs[size_t(k)] = in.h0[size_t((d * B + b) * H + k)];
        if (!in.c0.empty()) cs[size_t(k)] = in.c0[size_t((d * B + b) * H + k)];
      }
      const int64_t len = in.lens.empty() ? S : in.lens[size_t(b)];
      for (int64_t step = 0; step < len; ++step) {
        const int64_t t = fwd ? step : len - 1 - step;
        const float* x = in.X.data() + (t * B + b) * I;
        auto wx = [&](int64_t gi) {  // W x + Wb for gate row gi
          double s = in.bias.empty() ? 0.0 : in.bias[size_t(d * 2 * GH + gi)];
          for (int64_t k = 0; k < I; ++k) s += double(in.W[size_t((d * GH + gi) * I + k)]) * x[k];
          return s;
        };
        auto rv = [&](int64_t gi, const std::vector<double>& v) {  // R v + Rb for gate row gi
          double s = in.bias.empty() ? 0.0 : in.bias[size_t(d * 2 * GH + GH + gi)];
          for (int64_t k = 0; k < H; ++k) s += double(in.R[size_t((d * GH + gi) * H + k)]) * v[size_t(k)];
          return s;
        };
        std::vector<double> nh(static_cast<size_t>(H)), nc(static_cast<size_t>(H));
        if (cell == "RNN") {
          for (int64_t k = 0; k < H; ++k) nh[size_t(k)] = f(cl(wx(k) + rv(k, hs)));
        } else if (cell == "GRU") {
          std::vector<double> z(static_cast<size_t>(H)), r(static_cast<size_t>(H)),
              rh(static_cast<size_t>(H));
          for (int64_t k = 0; k < H; ++k) {
            z[size_t(k)] = f(cl(wx(k) + rv(k, hs)));
            r[size_t(k)] = f(cl(wx(H + k) + rv(H + k, hs)));
            rh[size_t(k)] = r[size_t(k)] * hs[size_t(k)];
          }
          for (int64_t k = 0; k < H; ++k) {
            const double hh = lbr ? g(cl(wx(2 * H + k) + r[size_t(k)] * rv(2 * H + k, hs)))
                                  : g(cl(wx(2 * H + k) + rv(2 * H + k, rh)));
            nh[size_t(k)] = (1 - z[size_t(k)]) * hh + z[size_t(k)] * hs[size_t(k)];
          }
        } else {
          auto p = [&](int64_t j, int64_t k) {
            return in.P.empty() ? 0.0 : double(in.P[size_t(d * 3 * H + j * H + k)]);
          };
          for (int64_t k = 0; k < H; ++k) {
            const double i = f(cl(wx(k) + rv(k, hs) + p(0, k) * cs[size_t(k)]));
            const double fg =
                input_forget ? 1 - i : f(cl(wx(2 * H + k) + rv(2 * H + k, hs) + p(2, k) * cs[size_t(k)]));
            const double c = g(cl(wx(3 * H + k) + rv(3 * H + k, hs)));
            nc[size_t(k)] = fg * cs[size_t(k)] + i * c;
            const double og = f(cl(wx(H + k) + rv(H + k, hs) + p(1, k) * nc[size_t(k)]));
            nh[size_t(k)] = og * h(nc[size_t(k)]);
          }
          cs = nc;
        }
        hs = nh;
        for (int64_t k = 0; k < H; ++k) o.y[size_t(((t * D + d) * B + b) * H + k)] = hs[size_t(k)];
      }
      for (int64_t k = 0; k < H; ++k) {
        o.yh[size_t((d * B + b) * H + k)] = hs[size_t(k)];
        o.yc[size_t((d * B + b) * H + k)] = cs[size_t(k)];
      }
    }
  }
  return o;
}

RecInputs rec_inputs(const std::string& cell, int64_t S, int64_t B, int64_t I, int64_t H, int64_t D,
                     uint32_t seed, bool half = false) {
  const int64_t G = cell == "RNN" ? 1 : cell == "GRU" ? 3 : 4;
  auto r = [&](int64_t n, uint32_t s, float lo = -0.5f, float hi = 0.5f) {
    return half ? rnd_h(n, seed * 31 + s, lo, hi) : rnd(n, seed * 31 + s, lo, hi);
  };
  RecInputs in{S,
               B,
               I,
               H,
               D,
               r(S * B * I, 1, -1.f, 1.f),
               r(D * G * H * I, 2),
               r(D * G * H * H, 3),
               r(D * 2 * G * H, 4),
               r(D * B * H, 5),
               r(D * B * H, 6),
               r(D * 3 * H, 7),
               {}};
  if (cell != "LSTM") in.c0.clear(), in.P.clear();
  return in;
}

std::string dims3(int64_t a, int64_t b, int64_t c) { return fmt::format("[{},{},{}]", a, b, c); }

TEST(extraops_Recurrent, GruBidirectionalSeqLensLinearBeforeReset) {
  for (int lbr : {0, 1}) {
    RecInputs in = rec_inputs("GRU", 5, 3, 4, 6, 2, 10 + lbr);
    in.lens = {5, 2, 0};
    const std::string g = fmt::format(
        R"(g (float{} X, float{} W, float{} R, float{} B, int32[3] L, float{} H0) => (float[5,2,3,6] Y, float{} Yh) {{
          Y, Yh = GRU<hidden_size = 6, direction = "bidirectional", linear_before_reset = {}>(X, W, R, B, L, H0) }})",
        dims3(5, 3, 4), dims3(2, 18, 4), dims3(2, 18, 6), "[2,36]", dims3(2, 3, 6), dims3(2, 3, 6), lbr);
    auto outs = run(model(14, g), {f32({5, 3, 4}, in.X), f32({2, 18, 4}, in.W), f32({2, 18, 6}, in.R),
                                   f32({2, 36}, in.bias), i32({3}, in.lens), f32({2, 3, 6}, in.h0)});
    RecOut ref = rec_ref(
        "GRU", in, false, lbr, 0, sigm, [](double v) { return std::tanh(v); }, nullptr);
    expect_close(as_double(outs[0]), ref.y, 1e-5, 1e-6);
    expect_close(as_double(outs[1]), ref.yh, 1e-5, 1e-6);
    // Batch entry 2 has length 0: its state is the initial one, and Y is zero for it.
    EXPECT_EQ(outs[1].data<float>()[2 * 6], in.h0[2 * 6]);
  }
}

TEST(extraops_Recurrent, LstmReversePeepholesClipAndLayout1) {
  RecInputs in = rec_inputs("LSTM", 4, 2, 3, 5, 1, 20);
  in.lens = {3, 4};
  const std::string body =
      R"(Y, Yh, Yc = LSTM<hidden_size = 5, direction = "reverse", clip = 0.7, layout = {}>(X, W, R, B, L, H0, C0, P))";
  const std::string g0 = fmt::format(
      R"(g (float[4,2,3] X, float[1,20,3] W, float[1,20,5] R, float[1,40] B, int32[2] L, float[1,2,5] H0, float[1,2,5] C0, float[1,15] P) => (float[4,1,2,5] Y, float[1,2,5] Yh, float[1,2,5] Yc) {{ {} }})",
      fmt::format(fmt::runtime(body), 0));
  auto outs = run(model(14, g0),
                  {f32({4, 2, 3}, in.X), f32({1, 20, 3}, in.W), f32({1, 20, 5}, in.R), f32({1, 40}, in.bias),
                   i32({2}, in.lens), f32({1, 2, 5}, in.h0), f32({1, 2, 5}, in.c0), f32({1, 15}, in.P)});
  auto th = [](double v) { return std::tanh(v); };
  RecOut ref = rec_ref("LSTM", in, true, false, 0.7, sigm, th, th);
  expect_close(as_double(outs[0]), ref.y);
  expect_close(as_double(outs[1]), ref.yh);
  expect_close(as_double(outs[2]), ref.yc);

  // layout = 1: X [B, S, I], Y [B, S, D, H], states [B, D, H]; same numbers transposed.
  std::vector<float> xt(in.X.size());
  for (int64_t t = 0; t < 4; ++t)
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t k = 0; k < 3; ++k) xt[size_t((b * 4 + t) * 3 + k)] = in.X[size_t((t * 2 + b) * 3 + k)];
  const std::string g1 = fmt::format(
      R"(g (float[2,4,3] X, float[1,20,3] W, float[1,20,5] R, float[1,40] B, int32[2] L, float[2,1,5] H0, float[2,1,5] C0, float[1,15] P) => (float[2,4,1,5] Y, float[2,1,5] Yh, float[2,1,5] Yc) {{ {} }})",
      fmt::format(fmt::runtime(body), 1));
  auto o1 = run(model(14, g1),
                {f32({2, 4, 3}, xt), f32({1, 20, 3}, in.W), f32({1, 20, 5}, in.R), f32({1, 40}, in.bias),
                 i32({2}, in.lens), f32({2, 1, 5}, in.h0), f32({2, 1, 5}, in.c0), f32({1, 15}, in.P)});
  const float* y0 = outs[0].data<float>();
  const float* y1 = o1[0].data<float>();
  for (int64_t t = 0; t < 4; ++t)
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t k = 0; k < 5; ++k) ASSERT_EQ(y1[(b * 4 + t) * 5 + k], y0[(t * 2 + b) * 5 + k]);
  EXPECT_EQ(values<float>(o1[1]), values<float>(outs[1]));  // D = 1: [1,B,H] and [B,1,H] coincide
  EXPECT_EQ(values<float>(o1[2]), values<float>(outs[2]));
}

TEST(extraops_Recurrent, RnnActivationsWithAlphaAndFloat16) {
  RecInputs in = rec_inputs("RNN", 6, 2, 5, 4, 2, 30, /*half=*/true);
  const std::string g =
      R"(g (float16[6,2,5] X, float16[2,4,5] W, float16[2,4,4] R, float16[2,8] B) => (float16[6,2,2,4] Y, float16[2,2,4] Yh) {
      Y, Yh = RNN<hidden_size = 4, direction = "bidirectional", activations = ["LeakyRelu", "HardSigmoid"],
                  activation_alpha = [0.1, 0.3], activation_beta = [0.4]>(X, W, R, B) })";
  auto outs = run(model(14, g),
                  {f16({6, 2, 5}, in.X), f16({2, 4, 5}, in.W), f16({2, 4, 4}, in.R), f16({2, 8}, in.bias)});
  in.h0.clear();
  auto leaky = [](double v) { return v >= 0 ? v : 0.1 * v; };
  auto hsig = [](double v) { return std::clamp(0.3 * v + 0.4, 0.0, 1.0); };
  // Directions use different activations: run the reference per direction.
  RecOut r0 = rec_ref("RNN", in, false, false, 0, leaky, nullptr, nullptr);
  RecOut r1 = rec_ref("RNN", in, false, false, 0, hsig, nullptr, nullptr);
  std::vector<double> want(r0.y.size());
  for (int64_t t = 0; t < 6; ++t)
    for (int64_t d = 0; d < 2; ++d)
      for (int64_t i = 0; i < 8; ++i) {
        const size_t k = size_t((t * 2 + d) * 8 + i);
        want[k] = d == 0 ? r0.y[k] : r1.y[k];
      }
  ASSERT_EQ(outs[0].dtype(), DType::Float16);
  expect_close(as_double(outs[0]), want, 4e-3, 2e-3);
}

TEST(extraops_Recurrent, LstmInputForgetOtherActivations) {
  RecInputs in = rec_inputs("LSTM", 5, 3, 4, 6, 1, 70);
  in.P.clear();
  in.h0.clear();
  in.c0.clear();
  const std::string g =
      R"(g (float[5,3,4] X, float[1,24,4] W, float[1,24,6] R, float[1,48] B) => (float[5,1,3,6] Y, float[1,3,6] Yh, float[1,3,6] Yc) {
      Y, Yh, Yc = LSTM<hidden_size = 6, input_forget = 1, activations = ["HardSigmoid", "Elu", "Softplus"],
                       activation_alpha = [0.25, 0.9]>(X, W, R, B) })";
  auto outs = run(model(14, g), {f32({5, 3, 4}, in.X), f32({1, 24, 4}, in.W), f32({1, 24, 6}, in.R),
                                 f32({1, 48}, in.bias)});
  auto hsig = [](double v) { return std::clamp(0.25 * v + 0.5, 0.0, 1.0); };  // beta takes its default 0.5
  auto elu = [](double v) { return v >= 0 ? v : 0.9 * std::expm1(v); };
  auto softplus = [](double v) { return std::log1p(std::exp(v)); };
  RecOut ref = rec_ref("LSTM", in, false, false, 0, hsig, elu, softplus, /*input_forget=*/true);
  expect_close(as_double(outs[0]), ref.y, 1e-5, 1e-6);
  expect_close(as_double(outs[2]), ref.yc, 1e-5, 1e-6);
}

TEST(extraops_Recurrent, GruDoubleReverseWithInitialState) {
  RecInputs in = rec_inputs("GRU", 4, 2, 3, 5, 1, 80);
  auto dbl = [](std::vector<int64_t> dims, const std::vector<float>& v) {
    return make<double>(std::move(dims), std::vector<double>(v.begin(), v.end()));
  };
  const std::string g =
      R"(g (double[4,2,3] X, double[1,15,3] W, double[1,15,5] R, double[1,30] B, double[1,2,5] H0) => (double[4,1,2,5] Y) {
      Y, Yh = GRU<hidden_size = 5, direction = "reverse", linear_before_reset = 1, clip = 0.375>(X, W, R, B, , H0) })";
  auto outs = run(model(14, g), {dbl({4, 2, 3}, in.X), dbl({1, 15, 3}, in.W), dbl({1, 15, 5}, in.R),
                                 dbl({1, 30}, in.bias), dbl({1, 2, 5}, in.h0)});
  ASSERT_EQ(outs[0].dtype(), DType::Double);
  RecOut ref = rec_ref(
      "GRU", in, true, true, 0.375, sigm, [](double v) { return std::tanh(v); }, nullptr);
  expect_close(as_double(outs[0]), ref.y, 1e-12, 1e-13);
}

TEST(extraops_Recurrent, LargeLstmParallelGemm) {
  // 2 * 4 * 96 = 768 gate columns and 300 rows: the blocked GEMM runs in parallel.
  RecInputs in = rec_inputs("LSTM", 30, 10, 64, 96, 1, 40);
  in.P.clear();
  const std::string g =
      R"(g (float[30,10,64] X, float[1,384,64] W, float[1,384,96] R, float[1,768] B) => (float[30,1,10,96] Y, float[1,10,96] Yh, float[1,10,96] Yc) {
      Y, Yh, Yc = LSTM<hidden_size = 96>(X, W, R, B) })";
  auto outs = run(model(14, g), {f32({30, 10, 64}, in.X), f32({1, 384, 64}, in.W), f32({1, 384, 96}, in.R),
                                 f32({1, 768}, in.bias)});
  in.h0.clear();
  in.c0.clear();
  auto th = [](double v) { return std::tanh(v); };
  RecOut ref = rec_ref("LSTM", in, false, false, 0, sigm, th, th);
  expect_close(as_double(outs[0]), ref.y, 1e-4, 1e-5);
  expect_close(as_double(outs[2]), ref.yc, 1e-4, 1e-5);
}

TEST(extraops_Recurrent, ConstantWeightsMatchFedWeights) {
  // W and R as initializers are transposed once at session creation; results must equal the fed path.
  RecInputs in = rec_inputs("GRU", 3, 2, 2, 3, 1, 50);
  auto list = [](const std::vector<float>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + fmt::format("{}", v[i]);
    return s;
  };
  const std::string gc = fmt::format(
      R"(g (float[3,2,2] X) => (float[1,2,3] Yh) <float[1,9,2] W = {{{}}}, float[1,9,3] R = {{{}}}> {{
          Y, Yh = GRU<hidden_size = 3>(X, W, R) }})",
      list(in.W), list(in.R));
  auto oc = run(model(14, gc), {f32({3, 2, 2}, in.X)});
  auto of = run(model(14, R"(g (float[3,2,2] X, float[1,9,2] W, float[1,9,3] R) => (float[1,2,3] Yh) {
      Y, Yh = GRU<hidden_size = 3>(X, W, R) })"),
                {f32({3, 2, 2}, in.X), f32({1, 9, 2}, in.W), f32({1, 9, 3}, in.R)});
  EXPECT_EQ(values<float>(oc[0]), values<float>(of[0]));
}

TEST(extraops_Recurrent, BadInputErrors) {
  RecInputs in = rec_inputs("RNN", 2, 1, 3, 2, 1, 60);
  const std::string g = R"(g (float[2,1,3] X, float[1,2,4] W, float[1,2,2] R) => (float[1,1,2] Yh) {
      Y, Yh = RNN<hidden_size = 2>(X, W, R) })";
  std::string msg =
      error_of(model(14, g), {f32({2, 1, 3}, in.X), f32({1, 2, 4}, rnd(8, 1)), f32({1, 2, 2}, in.R)});
  EXPECT_HAS(msg, "RNN");
  EXPECT_HAS(msg, "W must have shape [1, 2, input_size = 3], got [1,2,4]");
  msg = error_of(
      model(14, R"(g (float[2,1,3] X, float[1,2,3] W, float[1,2,2] R, int32[1] L) => (float[1,1,2] Yh) {
      Y, Yh = RNN<hidden_size = 2>(X, W, R, , L) })"),
      {f32({2, 1, 3}, in.X), f32({1, 2, 3}, in.W), f32({1, 2, 2}, in.R), i32({1}, {3})});
  EXPECT_HAS(msg, "sequence_lens[0] = 3 is outside [0, seq_length = 2]");
  msg = error_of<UnsupportedError>(
      model(14, R"(g (float[2,1,3] X, float[1,2,3] W, float[1,2,2] R) => (float[1,1,2] Yh) {
      Y, Yh = RNN<hidden_size = 2, activations = ["Gelu"]>(X, W, R) })"),
      {f32({2, 1, 3}, in.X), f32({1, 2, 3}, in.W), f32({1, 2, 2}, in.R)});
  EXPECT_HAS(msg, "activation function 'Gelu' is not supported");
}

// ---------------------------------------------------------------------------------------------------------------
// NonMaxSuppression, RoiAlign

TEST(extraops_Nms, CenterFormatThresholdsAndLimit) {
  // Boxes (center format): 0 and 1 overlap strongly (IoU 0.9 / 1.1), 2 is apart, 3 has zero area.
  const std::vector<float> boxes = {0.5f, 0.5f, 1.f, 1.f, 0.6f, 0.5f, 1.f, 1.f,
                                    5.f,  5.f,  1.f, 1.f, 0.5f, 0.5f, 0.f, 1.f};
  const std::vector<float> scores = {0.9f, 0.95f, 0.3f, 0.99f,   // class 0
                                     0.1f, 0.2f,  0.8f, 0.05f};  // class 1
  const char* g =
      R"(g (float[1,4,4] b, float[1,2,4] s, int64[1] m, float[1] iou, float[1] st) => (int64[N,3] y) {
      y = NonMaxSuppression<center_point_box = 1>(b, s, m, iou, st) })";
  auto outs = run(model(11, g), {f32({1, 4, 4}, boxes), f32({1, 2, 4}, scores), i64({1}, {10}),
                                 f32({1}, {0.5f}), f32({1}, {0.15f})});
  // Class 0 order: 3 (zero area: kept, suppresses nothing), 1, 0 (suppressed by 1), 2. Class 1: 2, 1 (>
  // 0.15).
  EXPECT_EQ(values<int64_t>(outs[0]), (std::vector<int64_t>{0, 0, 3, 0, 0, 1, 0, 0, 2, 0, 1, 2, 0, 1, 1}));
  outs = run(model(11, g), {f32({1, 4, 4}, boxes), f32({1, 2, 4}, scores), i64({1}, {1}), f32({1}, {0.7f}),
                            f32({1}, {0.f})});
  EXPECT_EQ(values<int64_t>(outs[0]), (std::vector<int64_t>{0, 0, 3, 0, 1, 2}));
  // No max_output_boxes_per_class: nothing selected.
  outs = run(
      model(11, R"(g (float[1,4,4] b, float[1,2,4] s) => (int64[N,3] y) { y = NonMaxSuppression(b, s) })"),
      {f32({1, 4, 4}, boxes), f32({1, 2, 4}, scores)});
  EXPECT_EQ(outs[0].dims(), (std::vector<int64_t>{0, 3}));
}

TEST(extraops_Nms, ManyBoxesAndErrors) {
  // 2 batches x 3 classes x 2000 boxes on a grid: no two boxes overlap, so all above the threshold survive.
  const int64_t nb = 2, nc = 3, n = 2000;
  std::vector<float> boxes, scores = rnd(nb * nc * n, 7, 0.f, 1.f);
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t i = 0; i < n; ++i) {
      const float y = float(i / 50) * 2, x = float(i % 50) * 2;
      boxes.insert(boxes.end(), {y, x, y + 1, x + 1});
    }
  auto outs = run(
      model(
          11,
          R"(g (float[2,2000,4] b, float[2,3,2000] s, int64[1] m, float[1] iou, float[1] st) => (int64[N,3] y) {
      y = NonMaxSuppression(b, s, m, iou, st) })"),
      {f32({nb, n, 4}, boxes), f32({nb, nc, n}, scores), i64({1}, {5000}), f32({1}, {0.1f}),
       f32({1}, {0.5f})});
  int64_t want = 0;
  for (float s : scores) want += s > 0.5f;
  ASSERT_EQ(outs[0].dim(0), want);
  // Within a class, scores are non-increasing in selection order.
  const int64_t* y = outs[0].data<int64_t>();
  for (int64_t i = 1; i < want; ++i) {
    if (y[3 * i] == y[3 * i - 3] && y[3 * i + 1] == y[3 * i - 2]) {
      ASSERT_GE(scores[size_t((y[3 * i - 3] * nc + y[3 * i - 2]) * n + y[3 * i - 1])],
                scores[size_t((y[3 * i] * nc + y[3 * i + 1]) * n + y[3 * i + 2])]);
    }
  }
  std::string msg = error_of(
      model(11, R"(g (float[1,4,4] b, float[1,1,3] s) => (int64[N,3] y) { y = NonMaxSuppression(b, s) })"),
      {f32({1, 4, 4}, rnd(16, 1)), f32({1, 1, 3}, rnd(3, 2))});
  EXPECT_HAS(msg, "scores [1,1,3] do not match boxes [1,4,4]");
  msg = error_of(model(11, R"(g (float[1,1,4] b, float[1,1,1] s, int64[1] m, float[1] iou) => (int64[N,3] y) {
      y = NonMaxSuppression(b, s, m, iou) })"),
                 {f32({1, 1, 4}, rnd(4, 1)), f32({1, 1, 1}, {1}), i64({1}, {1}), f32({1}, {1.5f})});
  EXPECT_HAS(msg, "iou_threshold must be in [0, 1], got 1.5");
}

TEST(extraops_RoiAlign, MaxModeOpsetDefaultsFloat16AndErrors) {
  // 1x1x4x4 ramp X[h, w] = 4h + w. A roi covering pixel centres exactly samples the ramp bilinearly.
  std::vector<float> x(16);
  for (int i = 0; i < 16; ++i) x[size_t(i)] = float(i);
  const char* g = R"(g (float[1,1,4,4] x, float[1,4] r, int64[1] b) => (float[1,1,1,1] y) {{
      y = RoiAlign<output_height = 1, output_width = 1, sampling_ratio = 2, mode = "{}">(x, r, b) }})";
  // Opset 16 default half_pixel: roi [1, 1, 3, 3] -> [0.5, 2.5]; samples at 1.0 and 2.0 in both axes.
  auto avg = run(model(16, fmt::format(fmt::runtime(g), "avg")),
                 {f32({1, 1, 4, 4}, x), f32({1, 4}, {1, 1, 3, 3}), i64({1}, {0})});
  EXPECT_FLOAT_EQ(avg[0].data<float>()[0], (5 + 6 + 9 + 10) / 4.f);
  // Max mode: max over samples of the largest weighted corner (samples fall on pixels: weight 1).
  auto mx = run(model(16, fmt::format(fmt::runtime(g), "max")),
                {f32({1, 1, 4, 4}, x), f32({1, 4}, {1, 1, 3, 3}), i64({1}, {0})});
  EXPECT_FLOAT_EQ(mx[0].data<float>()[0], 10.f);
  // Opset 10 (output_half_pixel): roi [1, 1, 3, 3] as is; samples at 1.5 and 2.5.
  auto o10 = run(model(10, fmt::format(fmt::runtime(g), "avg")),
                 {f32({1, 1, 4, 4}, x), f32({1, 4}, {1, 1, 3, 3}), i64({1}, {0})});
  EXPECT_FLOAT_EQ(o10[0].data<float>()[0], (4 * 2 + 2) + 0.f);  // mean of 4y + x at y, x in {1.5, 2.5}
  auto h = run(model(16, R"(g (float16[1,1,4,4] x, float16[1,4] r, int64[1] b) => (float16[1,1,1,1] y) {
      y = RoiAlign<output_height = 1, output_width = 1, sampling_ratio = 2>(x, r, b) })"),
               {f16({1, 1, 4, 4}, x), f16({1, 4}, {1, 1, 3, 3}), i64({1}, {0})});
  EXPECT_FLOAT_EQ(float(h[0].get_double(0)), 7.5f);
  std::string msg = error_of(model(16, fmt::format(fmt::runtime(g), "avg")),
                             {f32({1, 1, 4, 4}, x), f32({1, 4}, {1, 1, 3, 3}), i64({1}, {1})});
  EXPECT_HAS(msg, "batch_indices[0] = 1 is out of range for a batch of 1");
  msg = error_of(model(16, fmt::format(fmt::runtime(g), "avg")),
                 {f32({1, 1, 4, 4}, x), f32({1, 4}, {1, NAN, 3, 3}), i64({1}, {0})});
  EXPECT_HAS(msg, "roi 0 has a non-finite coordinate");
}

TEST(extraops_RoiAlign, ManyRoisChannelsParallel) {
  // 40 rois x 37 channels: the (roi, channel block) units run in parallel; compare with the serial formula on
  // a linear image, where bilinear sampling is exact: X[c, h, w] = c + 2h + 3w.
  const int64_t C = 37, H = 20, W = 24, R = 40;
  std::vector<float> x(size_t(C * H * W));
  for (int64_t c = 0; c < C; ++c)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t w = 0; w < W; ++w) x[size_t((c * H + h) * W + w)] = float(c + 2 * h + 3 * w);
  std::vector<float> rois;
  std::vector<int64_t> bi(size_t(R), 0);
  for (int64_t r = 0; r < R; ++r) {
    const float x0 = float(r % 7) + 1.f, y0 = float(r % 5) + 1.f;
    rois.insert(rois.end(), {x0, y0, x0 + 6.f, y0 + 8.f});
  }
  auto outs = run(model(16, R"(g (float[1,37,20,24] x, float[40,4] r, int64[40] b) => (float[40,37,2,3] y) {
      y = RoiAlign<output_height = 2, output_width = 3, sampling_ratio = 2>(x, r, b) })"),
                  {f32({1, C, H, W}, x), f32({R, 4}, rois), i64({R}, bi)});
  const float* y = outs[0].data<float>();
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t ph = 0; ph < 2; ++ph)
        for (int64_t pw = 0; pw < 3; ++pw) {
          // Bin centre in half-pixel coordinates: the mean of a linear function over symmetric samples.
          const double ys = rois[size_t(4 * r + 1)] - 0.5 + (ph + 0.5) * 4.0;
          const double xs = rois[size_t(4 * r)] - 0.5 + (pw + 0.5) * 2.0;
          ASSERT_NEAR(y[((r * C + c) * 2 + ph) * 3 + pw], c + 2 * ys + 3 * xs, 1e-3) << r << " " << c;
        }
}

// ---------------------------------------------------------------------------------------------------------------
// GridSample, MaxUnpool

// Identity grid for an H x W image: the pixel centres in normalised coordinates.
std::vector<float> identity_grid(int64_t N, int64_t H, int64_t W, bool align) {
  std::vector<float> g;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t w = 0; w < W; ++w) {
        auto norm = [&](int64_t i, int64_t len) {
          return align ? (len == 1 ? 0.f : 2.f * float(i) / float(len - 1) - 1.f)
                       : (2.f * float(i) + 1.f) / float(len) - 1.f;
        };
        g.push_back(norm(w, W));
        g.push_back(norm(h, H));
      }
  return g;
}

TEST(extraops_GridSample, IdentityGridReproducesInputAllModesLarge) {
  const int64_t N = 2, C = 5, H = 48, W = 40;
  auto x = rnd(N * C * H * W, 8);
  for (const char* mode : {"nearest", "bilinear", "bicubic"})
    for (int align : {0, 1}) {
      const std::string g =
          fmt::format(R"(g (float[2,5,48,40] x, float[2,48,40,2] grid) => (float[2,5,48,40] y) {{
          y = GridSample<mode = "{}", align_corners = {}>(x, grid) }})",
                      mode, align);
      auto outs = run(model(16, g), {f32({N, C, H, W}, x), f32({N, H, W, 2}, identity_grid(N, H, W, align))});
      expect_close(as_double(outs[0]), std::vector<double>(x.begin(), x.end()), 1e-4, 1e-5);
    }
}

TEST(extraops_GridSample, PaddingModesOutsideAndFloat16) {
  // 1x1x2x3 image; sample points outside the image.
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};
  // (x, y) normalised: far left of row 0 centre, beyond the right edge of row 1 centre.
  const std::vector<float> grid = {-2.f, -0.5f, 1.5f, 0.5f};
  auto sample = [&](const char* mode, const char* pad) {
    const std::string g = fmt::format(R"(g (float[1,1,2,3] x, float[1,1,2,2] grid) => (float[1,1,1,2] y) {{
        y = GridSample<mode = "{}", padding_mode = "{}">(x, grid) }})",
                                      mode, pad);
    return as_double(run(model(16, g), {f32({1, 1, 2, 3}, x), f32({1, 1, 2, 2}, grid)})[0]);
  };
  // Pixel coordinates (align_corners 0): x = ((gx + 1) * 3 - 1) / 2 -> -2.0 and 3.25; y = 0 and 1.
  expect_close(sample("bilinear", "zeros"), {0.0, 0.0});
  expect_close(sample("bilinear", "border"), {1.0, 6.0});
  // Reflection about [-0.5, 2.5]: -2.0 -> 1.0, 3.25 -> 1.75.
  expect_close(sample("bilinear", "reflection"), {2.0, 5.75});
  expect_close(sample("nearest", "reflection"), {2.0, 6.0});  // rounded first: 3.25 -> 3, reflected to 2
  auto h = run(model(16, R"(g (float16[1,1,2,3] x, float16[1,1,2,2] grid) => (float16[1,1,1,2] y) {
      y = GridSample<padding_mode = "border">(x, grid) })"),
               {f16({1, 1, 2, 3}, x), f16({1, 1, 2, 2}, grid)});
  expect_close(as_double(h[0]), {1.0, 6.0});
  std::string msg = error_of(model(16, R"(g (float[1,1,2,3] x, float[2,1,2,2] grid) => (float[1,1,1,2] y) {
      y = GridSample(x, grid) })"),
                             {f32({1, 1, 2, 3}, x), f32({2, 1, 2, 2}, rnd(8, 1))});
  EXPECT_HAS(msg, "grid must have shape [1, H_out, W_out, 2]");
  msg = error_of(model(16, R"(g (float[1,1,2,3] x, float[1,1,2,2] grid) => (float[1,1,1,2] y) {
      y = GridSample<mode = "area">(x, grid) })"),
                 {f32({1, 1, 2, 3}, x), f32({1, 1, 2, 2}, grid)});
  EXPECT_HAS(msg, "mode 'area' is not valid");
}

TEST(extraops_GridSample, ExtremeAndNonFiniteGridValues) {
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};
  const std::vector<float> grid = {1e30f, -1e30f, INFINITY, 0.f, NAN, 0.f, -7.3f, 11.9f};
  for (const char* pad : {"zeros", "border", "reflection"}) {
    const std::string g = fmt::format(R"(g (float[1,1,2,3] x, float[1,2,2,2] grid) => (float[1,1,2,2] y) {{
        y = GridSample<mode = "bicubic", padding_mode = "{}">(x, grid) }})",
                                      pad);
    auto y = as_double(run(model(16, g), {f32({1, 1, 2, 3}, x), f32({1, 2, 2, 2}, grid)})[0]);
    if (std::string(pad) == "zeros") {
      EXPECT_EQ(y[0], 0.0);
      EXPECT_EQ(y[1], 0.0);
      EXPECT_EQ(y[2], 0.0);
    } else {
      for (double v : y) EXPECT_TRUE(std::isfinite(v)) << pad;
    }
    if (std::string(pad) == "border") {
      EXPECT_EQ(y[0], 3.0);  // x -> right edge, y -> top edge
    }
  }
}

// MaxUnpool's kernel is the pooling family's (runtime/kernels/dnnl/pool.cc); these cases pin the behaviour the data expects.
TEST(extraops_MaxUnpool, Int32PadsAndOutputShape) {
  // 1-D: X [1, 2, 3], kernel 3 stride 2 pads [1, 1]: inferred length (3 - 1) * 2 + 3 - 2 = 5.
  auto outs = run(model(11, R"(g (int32[1,2,3] x, int64[1,2,3] i) => (int32[1,2,5] y) {
      y = MaxUnpool<kernel_shape = [3], strides = [2], pads = [1, 1]>(x, i) })"),
                  {i32({1, 2, 3}, {1, 2, 3, 4, 5, 6}), i64({1, 2, 3}, {0, 2, 4, 5, 8, 9})});
  EXPECT_EQ(values<int32_t>(outs[0]), (std::vector<int32_t>{1, 0, 2, 0, 3, 4, 0, 0, 5, 6}));
  // With output_shape [1, 2, 7]: the same values, each channel padded at the end.
  outs = run(model(11, R"(g (int32[1,2,3] x, int64[1,2,3] i, int64[3] s) => (int32[1,2,7] y) {
      y = MaxUnpool<kernel_shape = [3], strides = [2], pads = [1, 1]>(x, i, s) })"),
             {i32({1, 2, 3}, {1, 2, 3, 4, 5, 6}), i64({1, 2, 3}, {0, 2, 4, 5, 8, 9}), i64({3}, {1, 2, 7})});
  EXPECT_EQ(values<int32_t>(outs[0]), (std::vector<int32_t>{1, 0, 2, 0, 3, 0, 0, 4, 0, 0, 5, 6, 0, 0}));
  std::string msg = error_of(model(11, R"(g (float[1,1,2] x, int64[1,1,2] i) => (float[1,1,4] y) {
      y = MaxUnpool<kernel_shape = [2], strides = [2]>(x, i) })"),
                             {f32({1, 1, 2}, {1, 2}), i64({1, 1, 2}, {1, 4})});
  EXPECT_HAS(msg, "index 4 at position 1 is outside");
}

}  // namespace
}  // namespace gaf
