// Unit tests of the oneDNN kernel family (MatMul, Gemm, Conv, ConvTranspose, pooling, integer / quantized ops
// and the fused post-op API), against naive double-precision references written independently here. They
// cover what the ONNX conformance data does not: fp16 / bf16 staging, batch broadcasting, constant (packed)
// vs fed weights, shapes that change between runs, large tensors on the parallel paths, plain-loop dtypes and
// error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "gaf/builder.h"
#include "gaf/onnx_io.h"
#include "gaf/session.h"
#include "gaf/tools.h"
#include "runtime/kernels/dnnl/dnnl_ops.h"
#include "runtime/kernels/dnnl/dnnl_util.h"
#include "runtime/kernels/dnnl/post_op_pass.h"

namespace gaf {
namespace {

using runtime::Session;
namespace dnnl_ops = runtime::dnnl_ops;
using Dims = std::vector<int64_t>;

// ---- helpers ----

std::vector<double> random_values(int64_t n, uint32_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// A tensor of `dtype` holding `vals` (converted through the dtype's compute type).
Tensor make_tensor(DType dtype, const Dims& dims, const std::vector<double>& vals) {
  Tensor t(dtype, dims);
  EXPECT_EQ(t.numel(), int64_t(vals.size()));
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = static_cast<T*>(t.raw());
    for (size_t i = 0; i < vals.size(); ++i) p[i] = from_double<T>(vals[i]);
  });
  return t;
}

Tensor random_tensor(DType dtype, const Dims& dims, uint32_t seed, double lo = -1.0, double hi = 1.0) {
  auto v = random_values(numel_of(dims), seed, lo, hi);
  if (is_integer(dtype))
    for (auto& x : v) x = std::round(x);
  return make_tensor(dtype, dims, v);
}

std::vector<double> values(const Tensor& t) {
  std::vector<double> v(t.numel());
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = static_cast<const T*>(t.raw());
    for (int64_t i = 0; i < t.numel(); ++i) v[i] = to_double(p[i]);
  });
  return v;
}

void expect_close(const Tensor& got, const Dims& dims, const std::vector<double>& want, double rtol = 1e-4,
                  double atol = 1e-5) {
  ASSERT_EQ(got.dims(), dims);
  auto g = values(got);
  ASSERT_EQ(g.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < g.size() && bad < 5; ++i) {
    if (std::isnan(want[i]) && std::isnan(g[i])) continue;
    if (!(std::fabs(g[i] - want[i]) <= atol + rtol * std::fabs(want[i]))) {
      ADD_FAILURE() << "element " << i << ": got " << g[i] << ", want " << want[i];
      ++bad;
    }
  }
}

// One op in a model: inputs flagged constant become initializers (packed weights path), null tensors are
// absent optional inputs. With `infer` false the model skips ONNX shape inference (for deliberately bad
// shapes).
struct OpGraph {
  Model model;
  std::unique_ptr<Session> session;
  std::vector<Tensor> feeds;

  OpGraph(const std::string& op, const std::vector<const Tensor*>& inputs,
          std::map<std::string, Attribute> attrs, std::vector<bool> constant = {}, int num_outputs = 1,
          bool infer = true, int opset = 17) {
    GraphBuilder b(model, opset);
    std::vector<Value*> ins;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i]) {
        ins.push_back(nullptr);
        continue;
      }
      if (i < constant.size() && constant[i]) {
        ins.push_back(b.constant(*inputs[i], fmt::format("c{}", i)));
      } else {
        Shape s;
        for (int64_t d : inputs[i]->dims()) s.push_back(Dim(d));
        ins.push_back(b.input(fmt::format("in{}", i), inputs[i]->dtype(), s));
        feeds.push_back(*inputs[i]);
      }
    }
    for (Value* v : b.op_n(op, ins, num_outputs, std::move(attrs), "op")) b.output(v);
    if (infer)
      b.finish();
    else
      model.graph->topo_sort();
    session = std::make_unique<Session>(*model.graph);
  }
  std::vector<Tensor> run() { return session->run(feeds); }
};

Tensor run1(const std::string& op, const std::vector<const Tensor*>& inputs,
            std::map<std::string, Attribute> attrs = {}, std::vector<bool> constant = {}) {
  OpGraph g(op, inputs, std::move(attrs), std::move(constant));
  return g.run().at(0);
}

// Expects running the op to throw gaf::Error whose message contains every fragment.
void expect_error(const std::string& op, const std::vector<const Tensor*>& inputs,
                  std::map<std::string, Attribute> attrs, const std::vector<std::string>& fragments) {
  try {
    OpGraph g(op, inputs, std::move(attrs), {}, 1, false);
    g.run();
    ADD_FAILURE() << op << ": expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "message: " << msg;
  }
}

// Flat index <-> coordinates of a row-major shape.
Dims unravel(int64_t i, const Dims& dims) {
  Dims c(dims.size());
  for (int d = int(dims.size()) - 1; d >= 0; --d) {
    c[d] = i % dims[d];
    i /= dims[d];
  }
  return c;
}
int64_t ravel(const Dims& c, const Dims& dims) {
  int64_t i = 0;
  for (size_t d = 0; d < dims.size(); ++d) i = i * dims[d] + c[d];
  return i;
}

// ---- naive references (double) ----

// numpy matmul.
std::vector<double> ref_matmul(const std::vector<double>& a, Dims ad, const std::vector<double>& b, Dims bd,
                               Dims* out_dims) {
  bool av = ad.size() == 1, bv = bd.size() == 1;
  if (av) ad.insert(ad.begin(), 1);
  if (bv) bd.push_back(1);
  size_t r = std::max(ad.size(), bd.size());
  while (ad.size() < r) ad.insert(ad.begin(), 1);
  while (bd.size() < r) bd.insert(bd.begin(), 1);
  Dims od(r);
  for (size_t i = 0; i + 2 < r; ++i) od[i] = std::max(ad[i], bd[i]);
  int64_t M = ad[r - 2], K = ad[r - 1], N = bd[r - 1];
  od[r - 2] = M;
  od[r - 1] = N;
  std::vector<double> y(numel_of(od));
  for (int64_t i = 0; i < int64_t(y.size()); ++i) {
    Dims c = unravel(i, od);
    Dims ca = c, cb = c;
    for (size_t d = 0; d + 2 < r; ++d) {
      ca[d] = ad[d] == 1 ? 0 : c[d];
      cb[d] = bd[d] == 1 ? 0 : c[d];
    }
    double s = 0;
    for (int64_t k = 0; k < K; ++k) {
      ca[r - 1] = k;
      cb[r - 2] = k;
      ca[r - 2] = c[r - 2];
      cb[r - 1] = c[r - 1];
      s += a[ravel(ca, ad)] * b[ravel(cb, bd)];
    }
    y[i] = s;
  }
  Dims out(od.begin(), od.end() - 2);
  if (!av) out.push_back(M);
  if (!bv) out.push_back(N);
  *out_dims = out;
  return y;
}

struct ConvParams {
  Dims strides, pads, dilations;  // pads: begin..., end...
  int64_t group = 1;
};

// Conv: x [N, C, sp...], w [M, C/g, k...].
std::vector<double> ref_conv(const std::vector<double>& x, const Dims& xd, const std::vector<double>& w,
                             const Dims& wd, const std::vector<double>* bias, const ConvParams& p,
                             Dims* out_dims) {
  const size_t S = xd.size() - 2;
  const int64_t N = xd[0], C = xd[1], M = wd[0], G = p.group, cg = C / G, mg = M / G;
  Dims od = {N, M}, ks(wd.begin() + 2, wd.end()), in(xd.begin() + 2, xd.end());
  for (size_t i = 0; i < S; ++i)
    od.push_back((in[i] + p.pads[i] + p.pads[S + i] - ((ks[i] - 1) * p.dilations[i] + 1)) / p.strides[i] + 1);
  Dims osp(od.begin() + 2, od.end());
  std::vector<double> y(numel_of(od));
  for (int64_t i = 0; i < int64_t(y.size()); ++i) {
    Dims c = unravel(i, od);
    int64_t n = c[0], m = c[1], g = m / mg;
    double s = bias ? (*bias)[m] : 0.0;
    for (int64_t ci = 0; ci < cg; ++ci)
      for (int64_t t = 0; t < numel_of(ks); ++t) {
        Dims kc = unravel(t, ks);
        Dims xc = {n, g * cg + ci};
        bool ok = true;
        for (size_t d = 0; d < S; ++d) {
          int64_t pos = c[2 + d] * p.strides[d] - p.pads[d] + kc[d] * p.dilations[d];
          ok &= pos >= 0 && pos < in[d];
          xc.push_back(pos);
        }
        if (!ok) continue;
        Dims wc = {m, ci};
        wc.insert(wc.end(), kc.begin(), kc.end());
        s += x[ravel(xc, xd)] * w[ravel(wc, wd)];
      }
    y[i] = s;
  }
  *out_dims = od;
  return y;
}

// ConvTranspose: x [N, C, sp...], w [C, M/g, k...]; output size from pads and output_padding.
std::vector<double> ref_conv_transpose(const std::vector<double>& x, const Dims& xd,
                                       const std::vector<double>& w, const Dims& wd,
                                       const std::vector<double>* bias, const ConvParams& p,
                                       const Dims& output_padding, Dims* out_dims) {
  const size_t S = xd.size() - 2;
  const int64_t N = xd[0], C = xd[1], G = p.group, cg = C / G, mg = wd[1], M = mg * G;
  Dims od = {N, M}, ks(wd.begin() + 2, wd.end()), in(xd.begin() + 2, xd.end());
  for (size_t i = 0; i < S; ++i)
    od.push_back(p.strides[i] * (in[i] - 1) + output_padding[i] + (ks[i] - 1) * p.dilations[i] + 1 -
                 p.pads[i] - p.pads[S + i]);
  std::vector<double> y(numel_of(od), 0.0);
  for (int64_t i = 0; i < int64_t(x.size()); ++i) {
    Dims c = unravel(i, xd);
    int64_t n = c[0], ch = c[1], g = ch / cg;
    for (int64_t ml = 0; ml < mg; ++ml)
      for (int64_t t = 0; t < numel_of(ks); ++t) {
        Dims kc = unravel(t, ks);
        Dims oc = {n, g * mg + ml};
        bool ok = true;
        for (size_t d = 0; d < S; ++d) {
          int64_t pos = c[2 + d] * p.strides[d] - p.pads[d] + kc[d] * p.dilations[d];
          ok &= pos >= 0 && pos < od[2 + d];
          oc.push_back(pos);
        }
        if (!ok) continue;
        Dims wc = {ch, ml};
        wc.insert(wc.end(), kc.begin(), kc.end());
        y[ravel(oc, od)] += x[i] * w[ravel(wc, wd)];
      }
  }
  if (bias)
    for (int64_t i = 0; i < int64_t(y.size()); ++i) y[i] += (*bias)[unravel(i, od)[1]];
  *out_dims = od;
  return y;
}

// Pooling with explicit output sizes (PyTorch / ONNX semantics: count_include_pad counts the given pads but
// not a ceil_mode overhang). kind: 0 max, 1 avg, 2 lp. `argmax` gets flat row-major indices.
std::vector<double> ref_pool(int kind, const std::vector<double>& x, const Dims& xd, const Dims& k,
                             const Dims& s, const Dims& pads, const Dims& dil, const Dims& out_sp,
                             bool include_pad, double p, std::vector<int64_t>* argmax) {
  const size_t S = xd.size() - 2;
  Dims od = {xd[0], xd[1]};
  od.insert(od.end(), out_sp.begin(), out_sp.end());
  Dims in(xd.begin() + 2, xd.end());
  std::vector<double> y(numel_of(od));
  if (argmax) argmax->assign(y.size(), -1);
  for (int64_t i = 0; i < int64_t(y.size()); ++i) {
    Dims c = unravel(i, od);
    double best = -INFINITY, sum = 0;
    int64_t best_i = -1, valid = 0, counted = 0;
    for (int64_t t = 0; t < numel_of(k); ++t) {
      Dims kc = unravel(t, k);
      Dims xc = {c[0], c[1]};
      bool ok = true, in_pad = true;
      for (size_t d = 0; d < S; ++d) {
        int64_t pos = c[2 + d] * s[d] - pads[d] + kc[d] * dil[d];
        ok &= pos >= 0 && pos < in[d];
        in_pad &= pos >= -pads[d] && pos < in[d] + pads[S + d];
        xc.push_back(pos);
      }
      counted += in_pad;
      if (!ok) continue;
      ++valid;
      double v = x[ravel(xc, xd)];
      if (v > best) {
        best = v;
        best_i = ravel(xc, xd);
      }
      sum += kind == 2 ? std::pow(std::fabs(v), p) : v;
    }
    y[i] = kind == 0   ? best
           : kind == 1 ? sum / double(include_pad ? counted : valid)
                       : std::pow(sum, 1.0 / p);
    if (argmax) (*argmax)[i] = best_i;
  }
  return y;
}

std::vector<double> as_double(const Tensor& t) { return values(t); }

// ---- registry ----

TEST(DnnlRegistry, OpsAreAnchorsWithFlops) {
  for (const char* op :
       {"MatMul", "Gemm", "Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool", "GlobalAveragePool",
        "GlobalMaxPool", "GlobalLpPool", "MatMulInteger", "QLinearMatMul", "ConvInteger", "QLinearConv"}) {
    const OpInfo* info = OpRegistry::instance().find(op);
    ASSERT_NE(info, nullptr) << op;
    EXPECT_EQ(info->kind, OpKind::Anchor) << op;
    EXPECT_TRUE(runtime::KernelRegistry::cpu().find(op)) << op;
    EXPECT_TRUE(info->flops) << op;
  }
  EXPECT_TRUE(OpRegistry::instance().find("LpPool")->flags & kPrecisionSensitive);
  EXPECT_EQ(OpRegistry::instance().find("MaxUnpool")->kind, OpKind::Opaque);  // data-dependent scatter
}

TEST(DnnlRegistry, FlopsFromStaticShapes) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::Float, {2, 8, 16, 16});
  Value* w = b.random_constant("w", {32, 4, 3, 3}, 0.1f);
  Value* y = b.op("Conv", {x, w}, {{"group", int64_t(2)}, {"strides", Dims{2, 2}}});
  Value* a = b.input("a", DType::Float, {3, 5, 7});
  Value* bm = b.input("b", DType::Float, {7, 11});
  Value* z = b.op("MatMul", {a, bm});
  Value* u = b.input("u", DType::Float, {Dim(std::string("n")), 7});
  Value* v = b.op("MatMul", {u, bm});
  b.output(y);
  b.output(z);
  b.output(v);
  b.finish();
  auto nodes = m.graph->nodes();
  // Conv: out 7x7, 2 * N * M * 49 * (C/g) * 9
  EXPECT_DOUBLE_EQ(find_op(*nodes[0])->flops(*nodes[0]), 2.0 * 2 * 32 * 49 * 4 * 9);
  EXPECT_DOUBLE_EQ(find_op(*nodes[1])->flops(*nodes[1]), 2.0 * 3 * 5 * 7 * 11);
  EXPECT_DOUBLE_EQ(find_op(*nodes[2])->flops(*nodes[2]), 0.0);  // symbolic batch: unknown
}

// ---- MatMul ----

struct MatMulCase {
  Dims a, b;
};

TEST(DnnlMatMul, NumpySemanticsFedAndConstant) {
  std::vector<MatMulCase> cases = {
      {{3, 4}, {4, 5}},       {{4}, {4, 5}},       {{3, 4}, {4}},          {{4}, {4}},
      {{2, 3, 4}, {4, 5}},    {{4}, {2, 4, 5}},    {{2, 3, 4}, {2, 4, 5}}, {{2, 1, 3, 4}, {3, 4, 5}},
      {{1, 3, 4}, {2, 4, 5}}, {{2, 3, 3, 4}, {4}}, {{3, 4}, {2, 2, 4, 5}}, {{1, 1, 3, 4}, {4, 6}},
      {{2, 3, 1, 4}, {4, 7}},
  };
  uint32_t seed = 1;
  for (const auto& c : cases) {
    for (bool constant_b : {false, true}) {
      SCOPED_TRACE(dims_to_string(c.a) + " x " + dims_to_string(c.b) + (constant_b ? " const" : ""));
      Tensor a = random_tensor(DType::Float, c.a, seed++), b = random_tensor(DType::Float, c.b, seed++);
      Dims od;
      auto want = ref_matmul(as_double(a), c.a, as_double(b), c.b, &od);
      expect_close(run1("MatMul", {&a, &b}, {}, {false, constant_b}), od, want);
    }
  }
}

TEST(DnnlMatMul, LargeParallelAndConstantWeights) {
  Tensor a = random_tensor(DType::Float, {3, 67, 130}, 11), b = random_tensor(DType::Float, {130, 259}, 12);
  Dims od;
  auto want = ref_matmul(as_double(a), a.dims(), as_double(b), b.dims(), &od);
  expect_close(run1("MatMul", {&a, &b}, {}, {false, true}), od, want, 1e-4, 1e-4);
  expect_close(run1("MatMul", {&a, &b}), od, want, 1e-4, 1e-4);
}

TEST(DnnlMatMul, Fp16AndBf16ThroughFp32) {
  for (DType t : {DType::Float16, DType::BFloat16}) {
    for (bool constant_b : {false, true}) {
      Tensor a = random_tensor(t, {2, 5, 24}, 3), b = random_tensor(t, {24, 9}, 4);
      Dims od;
      auto want = ref_matmul(as_double(a), a.dims(), as_double(b), b.dims(), &od);
      Tensor y = run1("MatMul", {&a, &b}, {}, {false, constant_b});
      EXPECT_EQ(y.dtype(), t);
      // One rounding of the fp32 result to the 16-bit type.
      expect_close(y, od, want, t == DType::Float16 ? 2e-3 : 1e-2, 1e-2);
    }
  }
}

TEST(DnnlMatMul, DoubleAndIntegersOnPlainLoops) {
  Tensor a = random_tensor(DType::Double, {2, 3, 17}, 5), b = random_tensor(DType::Double, {17, 4}, 6);
  Dims od;
  auto want = ref_matmul(as_double(a), a.dims(), as_double(b), b.dims(), &od);
  expect_close(run1("MatMul", {&a, &b}), od, want, 1e-12, 1e-12);
  for (DType t : {DType::Int32, DType::Int64, DType::UInt32, DType::UInt64}) {
    Tensor ai = random_tensor(t, {2, 3, 6}, 7, 0, 9), bi = random_tensor(t, {1, 6, 5}, 8, 0, 9);
    auto wi = ref_matmul(as_double(ai), ai.dims(), as_double(bi), bi.dims(), &od);
    Tensor y = run1("MatMul", {&ai, &bi});
    EXPECT_EQ(y.dtype(), t);
    expect_close(y, od, wi, 0, 0);
  }
  // Signed integers with negative values.
  Tensor an = random_tensor(DType::Int64, {4, 6}, 9, -50, 50),
         bn = random_tensor(DType::Int64, {6, 3}, 10, -50, 50);
  auto wn = ref_matmul(as_double(an), an.dims(), as_double(bn), bn.dims(), &od);
  expect_close(run1("MatMul", {&an, &bn}), od, wn, 0, 0);
}

TEST(DnnlMatMul, EmptyAndZeroInnerDimension) {
  Tensor a = random_tensor(DType::Float, {3, 0}, 1), b = random_tensor(DType::Float, {0, 4}, 2);
  Tensor y = run1("MatMul", {&a, &b});
  expect_close(y, {3, 4}, std::vector<double>(12, 0.0));
  Tensor a2 = random_tensor(DType::Float, {0, 5}, 1), b2 = random_tensor(DType::Float, {5, 4}, 2);
  EXPECT_EQ(run1("MatMul", {&a2, &b2}).dims(), (Dims{0, 4}));
}

TEST(DnnlMatMul, ShapesChangingBetweenRuns) {
  Model m;
  GraphBuilder b(m);
  Value* a = b.input("a", DType::Float, {Dim(std::string("n")), Dim(std::string("m")), 8});
  Value* w = b.random_constant("w", {8, 6}, 1.f);
  b.output(b.op("MatMul", {a, w}));
  b.finish();
  Session s(*m.graph);
  std::vector<double> wv = as_double(m.graph->find_value("w")->constant());
  for (Dims d : {Dims{1, 3, 8}, Dims{4, 5, 8}, Dims{1, 3, 8}, Dims{2, 1, 8}}) {
    Tensor x = random_tensor(DType::Float, d, uint32_t(d[0] * 10 + d[1]));
    Dims od;
    auto want = ref_matmul(as_double(x), d, wv, {8, 6}, &od);
    expect_close(s.run(std::vector<Tensor>{x}).at(0), od, want);
  }
}

TEST(DnnlMatMul, BadShapesNameTheNode) {
  Tensor a = random_tensor(DType::Float, {3, 4}, 1), b = random_tensor(DType::Float, {5, 6}, 2);
  expect_error("MatMul", {&a, &b}, {}, {"'op'", "inner dimensions", "[3,4]", "[5,6]"});
  Tensor c = random_tensor(DType::Float, {2, 3, 4}, 3), d = random_tensor(DType::Float, {3, 4, 5}, 4);
  expect_error("MatMul", {&c, &d}, {}, {"'op'", "broadcast"});
  Tensor e = random_tensor(DType::Double, {3, 4}, 5);
  Tensor f = random_tensor(DType::Float, {4, 2}, 6);
  expect_error("MatMul", {&e, &f}, {}, {"'op'", "double", "float"});
}

// ---- Gemm ----

std::vector<double> ref_gemm(const Tensor& A, const Tensor& B, const Tensor* C, bool ta, bool tb,
                             double alpha, double beta, int64_t M, int64_t N, int64_t K) {
  auto a = as_double(A), b = as_double(B);
  std::vector<double> c = C ? as_double(*C) : std::vector<double>{};
  Dims cd = C ? C->dims() : Dims{};
  while (cd.size() < 2) cd.insert(cd.begin(), 1);
  std::vector<double> y(M * N);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += (ta ? a[k * M + i] : a[i * K + k]) * (tb ? b[j * K + k] : b[k * N + j]);
      double cv = C ? c[(cd[0] == 1 ? 0 : i) * cd[1] + (cd[1] == 1 ? 0 : j)] : 0.0;
      y[i * N + j] = alpha * s + beta * cv;
    }
  return y;
}

TEST(DnnlGemm, TransposesScalesAndBiasBroadcasts) {
  const int64_t M = 6, N = 10, K = 7;
  uint32_t seed = 20;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (Dims cdims : {Dims{}, Dims{N}, Dims{1, N}, Dims{M, 1}, Dims{M, N}, Dims{1}})
        for (bool constant : {false, true}) {
          SCOPED_TRACE(fmt::format("ta {} tb {} C {} const {}", ta, tb, dims_to_string(cdims), constant));
          Tensor A = random_tensor(DType::Float, ta ? Dims{K, M} : Dims{M, K}, seed++);
          Tensor B = random_tensor(DType::Float, tb ? Dims{N, K} : Dims{K, N}, seed++);
          Tensor C = random_tensor(DType::Float, cdims, seed++);
          float alpha = 0.75f, beta = cdims.size() == 1 ? 1.0f : -1.5f;
          std::map<std::string, Attribute> attrs = {
              {"transA", int64_t(ta)}, {"transB", int64_t(tb)}, {"alpha", alpha}, {"beta", beta}};
          auto want = ref_gemm(A, B, &C, ta, tb, alpha, beta, M, N, K);
          expect_close(run1("Gemm", {&A, &B, &C}, attrs, {false, constant, constant}), {M, N}, want);
        }
}

TEST(DnnlGemm, NoBiasBetaZeroAndDouble) {
  Tensor A = random_tensor(DType::Float, {4, 3}, 1), B = random_tensor(DType::Float, {3, 5}, 2);
  expect_close(run1("Gemm", {&A, &B}), {4, 5}, ref_gemm(A, B, nullptr, false, false, 1, 0, 4, 5, 3));
  Tensor C = make_tensor(DType::Float, {5}, std::vector<double>(5, NAN));
  expect_close(run1("Gemm", {&A, &B, &C}, {{"beta", 0.f}}), {4, 5},
               ref_gemm(A, B, nullptr, false, false, 1, 0, 4, 5, 3));
  Tensor Ad = random_tensor(DType::Double, {3, 4}, 3), Bd = random_tensor(DType::Double, {5, 3}, 4);
  Tensor Cd = random_tensor(DType::Double, {4, 1}, 5);
  std::map<std::string, Attribute> attrs = {{"transA", int64_t(1)}, {"transB", int64_t(1)}, {"alpha", 2.f}};
  expect_close(run1("Gemm", {&Ad, &Bd, &Cd}, attrs), {4, 5}, ref_gemm(Ad, Bd, &Cd, true, true, 2, 1, 4, 5, 3),
               1e-6, 1e-6);
  Tensor Ah = random_tensor(DType::Float16, {8, 16}, 6), Bh = random_tensor(DType::Float16, {16, 4}, 7);
  Tensor Ch = random_tensor(DType::Float16, {4}, 8);
  expect_close(run1("Gemm", {&Ah, &Bh, &Ch}, {}, {false, true, true}), {8, 4},
               ref_gemm(Ah, Bh, &Ch, false, false, 1, 1, 8, 4, 16), 2e-3, 2e-3);
}

// A few rows against constant weights of at least 64K elements run on Gemv (gemv.h), not oneDNN: every row
// count up to its 8, both weight layouts, column counts that end in a partial panel and a partial vector, alpha,
// every broadcast of C, and a MatMul whose batch folds into the rows.
TEST(DnnlGemm, FewRowsAgainstConstantWeights) {
  uint32_t seed = 90;
  for (int64_t m : {1, 2, 3, 5, 8})
    for (bool tb : {false, true})
      for (const auto& [n, k] : {std::pair<int64_t, int64_t>{1000, 96}, std::pair<int64_t, int64_t>{203, 401}})
        for (Dims cdims : {Dims{}, Dims{n}, Dims{m, 1}, Dims{m, n}}) {
          SCOPED_TRACE(fmt::format("M {} N {} K {} tb {} C {}", m, n, k, tb, dims_to_string(cdims)));
          Tensor A = random_tensor(DType::Float, {m, k}, seed++);
          Tensor B = random_tensor(DType::Float, tb ? Dims{n, k} : Dims{k, n}, seed++);
          Tensor C = random_tensor(DType::Float, cdims, seed++);
          std::map<std::string, Attribute> attrs = {{"transB", int64_t(tb)}, {"alpha", 0.75f}, {"beta", -1.5f}};
          const bool with_c = !cdims.empty();
          std::vector<const Tensor*> ins = {&A, &B};
          if (with_c) ins.push_back(&C);
          auto want = ref_gemm(A, B, with_c ? &C : nullptr, false, tb, 0.75, with_c ? -1.5 : 0.0, m, n, k);
          expect_close(run1("Gemm", ins, attrs, {false, true, true}), {m, n}, want);
        }
  Tensor a = random_tensor(DType::Float, {2, 1, 300}, seed++), b = random_tensor(DType::Float, {300, 250}, seed++);
  Dims od;
  auto want = ref_matmul(as_double(a), a.dims(), as_double(b), b.dims(), &od);
  expect_close(run1("MatMul", {&a, &b}, {}, {false, true}), od, want);
}

// Rows known only at run time (a decoder's tokens) against large constant weights: packed for Gemv when the
// session starts, then up to 32 rows run as passes of 8 over them and more on oneDNN; each count agrees with
// the reference, in one session whose row count changes between runs, for MatMul and for Gemm(transB).
TEST(DnnlMatMul, DynamicRowsAgainstConstantWeights) {
  uint32_t seed = 300;
  for (bool gemm : {false, true}) {
    Model m;
    GraphBuilder b(m, 13);
    Value* a = b.input("a", DType::Float, {Dim(std::string("m")), 300});
    Tensor w = random_tensor(DType::Float, gemm ? Dims{250, 300} : Dims{300, 250}, seed++);
    Value* wv = b.constant(w, "w");
    b.output(gemm ? b.op("Gemm", {a, wv}, {{"transB", int64_t(1)}}) : b.op("MatMul", {a, wv}));
    b.finish();
    runtime::Session s(*m.graph);
    for (int64_t rows : {1, 8, 9, 20, 32, 33, 64, 3}) {
      Dims od;
      SCOPED_TRACE(fmt::format("{} rows {}", gemm ? "Gemm" : "MatMul", rows));
      Tensor x = random_tensor(DType::Float, {rows, 300}, seed++);
      auto want = gemm ? ref_gemm(x, w, nullptr, false, true, 1, 0, rows, 250, 300)
                       : ref_matmul(as_double(x), x.dims(), as_double(w), w.dims(), &od);
      expect_close(s.run(std::vector<Tensor>{x})[0], {rows, 250}, want);
    }
  }
}

// Small products in kernels whose primitives wait for run-time shapes run as a plain loop (at most 64K
// multiply-adds: no primitive built per row count), larger ones on oneDNN: both agree with the reference, for
// Gemm's transposes, alpha, beta and C broadcasts with fed and constant B, and for a decoder's rotary outer
// product [n, 1] x [1, 32] with fed B, at row counts on both sides of the limit, in one session each.
TEST(DnnlGemm, SmallProductsWithRunTimeRows) {
  uint32_t seed = 700;
  const int64_t N = 10, K = 7;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (bool constant : {false, true}) {
        Model m;
        GraphBuilder b(m, 13);
        Value* a = b.input("a", DType::Float, ta ? std::vector<Dim>{K, Dim(std::string("m"))}
                                                 : std::vector<Dim>{Dim(std::string("m")), K});
        Tensor w = random_tensor(DType::Float, tb ? Dims{N, K} : Dims{K, N}, seed++);
        Tensor c = random_tensor(DType::Float, {N}, seed++);
        Value* wv = constant ? b.constant(w, "w") : b.input("w", DType::Float, {w.dim(0), w.dim(1)});
        b.output(b.op("Gemm", {a, wv, b.constant(c, "c")},
                      {{"transA", int64_t(ta)}, {"transB", int64_t(tb)}, {"alpha", 0.75f}, {"beta", -1.5f}}));
        b.finish();
        Session s(*m.graph);
        for (int64_t rows : {1, 5, 300, 937, 2000, 3}) {  // 937 x 7 x 10 = 65590 MACs: oneDNN
          SCOPED_TRACE(fmt::format("ta {} tb {} const {} rows {}", ta, tb, constant, rows));
          Tensor x = random_tensor(DType::Float, ta ? Dims{K, rows} : Dims{rows, K}, seed++);
          std::vector<Tensor> ins{x};
          if (!constant) ins.push_back(w);
          expect_close(s.run(ins).at(0), {rows, N}, ref_gemm(x, w, &c, ta, tb, 0.75, -1.5, rows, N, K));
        }
      }
  Model m;
  GraphBuilder b(m, 13);
  Value* pos = b.input("pos", DType::Float, {Dim(std::string("n")), 1});
  Value* freq = b.input("freq", DType::Float, {1, 32});
  b.output(b.op("MatMul", {pos, freq}));
  b.finish();
  Session s(*m.graph);
  Tensor f = random_tensor(DType::Float, {1, 32}, seed++);
  for (int64_t n : {16, 256, 1280, 4096, 17}) {
    SCOPED_TRACE(fmt::format("rotary n {}", n));
    Tensor x = random_tensor(DType::Float, {n, 1}, seed++);
    Dims od;
    auto want = ref_matmul(as_double(x), x.dims(), as_double(f), f.dims(), &od);
    expect_close(s.run(std::vector<Tensor>{x, f}).at(0), od, want);
  }
}

TEST(DnnlGemm, BadShapes) {
  Tensor A = random_tensor(DType::Float, {4, 3}, 1), B = random_tensor(DType::Float, {4, 5}, 2);
  expect_error("Gemm", {&A, &B}, {}, {"'op'", "inner dimensions"});
  Tensor B2 = random_tensor(DType::Float, {3, 5}, 2), C = random_tensor(DType::Float, {3}, 3);
  expect_error("Gemm", {&A, &B2, &C}, {}, {"'op'", "[3]", "broadcast", "[4,5]"});
  Tensor A3 = random_tensor(DType::Float, {2, 4, 3}, 1);
  expect_error("Gemm", {&A3, &B2}, {}, {"'op'", "2-D"});
}

// ---- Conv ----

struct ConvCase {
  Dims x, w;
  ConvParams p;
  bool bias;
};

std::map<std::string, Attribute> conv_attrs(const ConvParams& p) {
  return {{"strides", p.strides}, {"pads", p.pads}, {"dilations", p.dilations}, {"group", p.group}};
}

TEST(DnnlConv, AgainstNaiveReference) {
  std::vector<ConvCase> cases = {
      {{1, 3, 11}, {4, 3, 3}, {{1}, {1, 1}, {1}, 1}, true},
      {{2, 4, 13}, {6, 2, 4}, {{2}, {0, 2}, {2}, 2}, false},
      {{1, 3, 9, 10}, {5, 3, 3, 3}, {{1, 1}, {1, 1, 1, 1}, {1, 1}, 1}, true},
      {{2, 8, 12, 9}, {8, 4, 3, 2}, {{2, 1}, {1, 0, 2, 1}, {1, 2}, 2}, true},
      {{1, 6, 10, 10}, {6, 1, 3, 3}, {{1, 1}, {1, 1, 1, 1}, {1, 1}, 6}, true},    // depthwise
      {{1, 4, 10, 10}, {12, 1, 5, 5}, {{2, 2}, {2, 2, 2, 2}, {1, 1}, 4}, false},  // depthwise, multiplier 3
      {{1, 16, 7, 7}, {24, 16, 1, 1}, {{1, 1}, {0, 0, 0, 0}, {1, 1}, 1}, true},   // pointwise (plain layout)
      {{2, 16, 8, 8}, {8, 16, 1, 1}, {{2, 2}, {0, 0, 0, 0}, {1, 1}, 1}, false},   // strided pointwise
      {{1, 2, 5, 6, 7}, {3, 2, 2, 3, 2}, {{1, 2, 1}, {1, 0, 1, 0, 1, 1}, {2, 1, 1}, 1}, true},
  };
  uint32_t seed = 100;
  for (const auto& c : cases) {
    for (bool constant : {false, true}) {
      SCOPED_TRACE(dims_to_string(c.x) + " * " + dims_to_string(c.w) + (constant ? " const" : ""));
      Tensor x = random_tensor(DType::Float, c.x, seed++), w = random_tensor(DType::Float, c.w, seed++);
      Tensor b = random_tensor(DType::Float, {c.w[0]}, seed++);
      std::vector<double> bv = as_double(b);
      Dims od;
      auto want = ref_conv(as_double(x), c.x, as_double(w), c.w, c.bias ? &bv : nullptr, c.p, &od);
      std::vector<const Tensor*> ins = {&x, &w};
      if (c.bias) ins.push_back(&b);
      expect_close(run1("Conv", ins, conv_attrs(c.p), {false, constant, constant}), od, want);
    }
  }
}

TEST(DnnlConv, AutoPad) {
  Tensor x = random_tensor(DType::Float, {1, 2, 7, 8}, 1), w = random_tensor(DType::Float, {3, 2, 4, 3}, 2);
  // SAME: out = ceil(in / stride); total pad = (out - 1) * s + k - in, the odd unit at the end (UPPER) or
  // the beginning (LOWER). Here H: out 4, total 4+... computed below per dim.
  for (const char* mode : {"SAME_UPPER", "SAME_LOWER", "VALID"}) {
    SCOPED_TRACE(mode);
    Dims s = {2, 2}, k = {4, 3}, in = {7, 8}, pads(4, 0);
    if (std::string(mode) != "VALID")
      for (int i = 0; i < 2; ++i) {
        int64_t out = (in[i] + s[i] - 1) / s[i],
                total = std::max<int64_t>(0, (out - 1) * s[i] + k[i] - in[i]);
        int64_t small = total / 2;
        pads[i] = std::string(mode) == "SAME_UPPER" ? small : total - small;
        pads[2 + i] = total - pads[i];
      }
    ConvParams p{s, pads, {1, 1}, 1};
    Dims od;
    auto want = ref_conv(as_double(x), x.dims(), as_double(w), w.dims(), nullptr, p, &od);
    expect_close(run1("Conv", {&x, &w}, {{"strides", s}, {"auto_pad", std::string(mode)}}, {false, true}), od,
                 want);
  }
}

TEST(DnnlConv, LargeParallelFp16Bf16AndDouble) {
  Tensor x = random_tensor(DType::Float, {2, 32, 20, 20}, 1),
         w = random_tensor(DType::Float, {48, 32, 3, 3}, 2);
  ConvParams p{{1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
  Dims od;
  auto want = ref_conv(as_double(x), x.dims(), as_double(w), w.dims(), nullptr, p, &od);
  expect_close(run1("Conv", {&x, &w}, conv_attrs(p), {false, true}), od, want, 1e-4, 1e-4);
  for (DType t : {DType::Float16, DType::BFloat16, DType::Double}) {
    SCOPED_TRACE(dtype_name(t));
    Tensor xs = random_tensor(t, {1, 4, 9, 9}, 3), ws = random_tensor(t, {6, 2, 3, 3}, 4);
    Tensor bs = random_tensor(t, {6}, 5);
    ConvParams q{{2, 1}, {1, 1, 0, 1}, {1, 2}, 2};
    auto bv = as_double(bs);
    auto want2 = ref_conv(as_double(xs), xs.dims(), as_double(ws), ws.dims(), &bv, q, &od);
    Tensor y = run1("Conv", {&xs, &ws, &bs}, conv_attrs(q));
    EXPECT_EQ(y.dtype(), t);
    double tol = t == DType::Double ? 1e-12 : t == DType::Float16 ? 2e-3 : 1e-2;
    expect_close(y, od, want2, tol, tol);
  }
}

TEST(DnnlConv, BadInputs) {
  Tensor x = random_tensor(DType::Float, {1, 4, 8, 8}, 1), w = random_tensor(DType::Float, {6, 3, 3, 3}, 2);
  expect_error("Conv", {&x, &w}, {}, {"'op'", "4 channels", "expects 3"});
  Tensor w2 = random_tensor(DType::Float, {6, 4, 3, 3}, 2), b = random_tensor(DType::Float, {5}, 3);
  expect_error("Conv", {&x, &w2, &b}, {}, {"'op'", "bias", "[6]"});
  Tensor w3 = random_tensor(DType::Float, {6, 4, 9, 9}, 2);
  expect_error("Conv", {&x, &w3}, {}, {"'op'", "larger than the padded input"});
  expect_error("Conv", {&x, &w2}, {{"strides", Dims{1, 1, 1}}}, {"'op'", "strides", "3 values"});
  expect_error("Conv", {&x, &w2}, {{"kernel_shape", Dims{2, 2}}}, {"'op'", "kernel_shape"});
  expect_error("Conv", {&x, &w2}, {{"auto_pad", std::string("SAME")}}, {"'op'", "auto_pad 'SAME'"});
  Tensor xi = random_tensor(DType::Int32, {1, 4, 8, 8}, 1), wi = random_tensor(DType::Int32, {6, 4, 3, 3}, 2);
  try {
    OpGraph g("Conv", {&xi, &wi}, {}, {}, 1, false);
    g.run();
    ADD_FAILURE() << "int32 Conv should be unsupported";
  } catch (const UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("int32"), std::string::npos) << e.what();
  }
}

// ---- ConvTranspose ----

TEST(DnnlConvTranspose, AgainstNaiveReference) {
  struct Case {
    Dims x, w;
    ConvParams p;
    Dims output_padding;
    bool bias;
  };
  std::vector<Case> cases = {
      {{1, 3, 6}, {3, 2, 3}, {{2}, {1, 0}, {1}, 1}, {1}, true},
      {{1, 2, 4, 5}, {2, 3, 3, 3}, {{1, 1}, {0, 0, 0, 0}, {1, 1}, 1}, {0, 0}, false},
      {{2, 4, 5, 4}, {4, 3, 3, 2}, {{2, 3}, {1, 0, 0, 1}, {1, 2}, 2}, {1, 2}, true},
      {{1, 4, 6, 6}, {4, 1, 4, 4}, {{2, 2}, {1, 1, 1, 1}, {1, 1}, 4}, {0, 0}, true},  // depthwise upsampling
      {{1, 2, 3, 4, 3}, {2, 2, 2, 3, 2}, {{2, 1, 2}, {0, 1, 0, 0, 1, 1}, {1, 1, 2}, 1}, {1, 0, 1}, false},
  };
  uint32_t seed = 300;
  for (const auto& c : cases)
    for (bool constant : {false, true})
      for (DType t : {DType::Float, DType::Double}) {
        SCOPED_TRACE(dims_to_string(c.x) + " * " + dims_to_string(c.w) + (constant ? " const " : " ") +
                     std::string(dtype_name(t)));
        Tensor x = random_tensor(t, c.x, seed++), w = random_tensor(t, c.w, seed++);
        Tensor b = random_tensor(t, {c.w[1] * c.p.group}, seed++);
        auto bv = as_double(b);
        Dims od;
        auto want = ref_conv_transpose(as_double(x), c.x, as_double(w), c.w, c.bias ? &bv : nullptr, c.p,
                                       c.output_padding, &od);
        auto attrs = conv_attrs(c.p);
        attrs["output_padding"] = c.output_padding;
        std::vector<const Tensor*> ins = {&x, &w};
        if (c.bias) ins.push_back(&b);
        expect_close(run1("ConvTranspose", ins, attrs, {false, constant, constant}), od, want, 1e-5, 1e-5);
      }
}

TEST(DnnlConvTranspose, OutputShapeLargerThanNaturalGetsBiasOnly) {
  Tensor x = random_tensor(DType::Float, {1, 1, 3, 3}, 1), w = random_tensor(DType::Float, {1, 2, 3, 3}, 2);
  Tensor b = make_tensor(DType::Float, {2}, {0.5, -0.25});
  // Natural output 9x7; asking 10x8 pads the end (total padding -1 -> begin 0, end -1).
  Tensor y = run1("ConvTranspose", {&x, &w, &b}, {{"strides", Dims{3, 2}}, {"output_shape", Dims{10, 8}}});
  ConvParams p{{3, 2}, {0, 0, 0, 0}, {1, 1}, 1};
  auto bv = as_double(b);
  Dims od;
  auto want = ref_conv_transpose(as_double(x), x.dims(), as_double(w), w.dims(), &bv, p, {1, 1}, &od);
  expect_close(y, od, want);
  EXPECT_EQ(od, (Dims{1, 2, 10, 8}));
}

// ---- pooling ----

TEST(DnnlPool, MaxPoolWithIndicesBothStorageOrders) {
  Tensor x = random_tensor(DType::Float, {2, 3, 7, 6}, 1);
  Dims k = {3, 2}, s = {2, 2}, pads = {1, 0, 1, 1}, dil = {1, 1};
  std::vector<int64_t> argmax;
  Dims out_sp = {(7 + 2 - 3) / 2 + 1, (6 + 1 - 2) / 2 + 1};
  auto want = ref_pool(0, as_double(x), x.dims(), k, s, pads, dil, out_sp, false, 0, &argmax);
  for (int64_t order : {0, 1}) {
    OpGraph g("MaxPool", {&x},
              {{"kernel_shape", k}, {"strides", s}, {"pads", pads}, {"storage_order", order}}, {}, 2);
    auto outs = g.run();
    Dims od = {2, 3, out_sp[0], out_sp[1]};
    expect_close(outs[0], od, want);
    ASSERT_EQ(outs[1].dtype(), DType::Int64);
    auto idx = values(outs[1]);
    for (size_t i = 0; i < argmax.size(); ++i) {
      int64_t e = argmax[i];
      if (order == 1) {  // column-major within the plane: h + w * H
        int64_t plane = e / 42, hw = e % 42;
        e = plane * 42 + (hw / 6) + (hw % 6) * 7;
      }
      EXPECT_EQ(int64_t(idx[i]), e) << "element " << i << " storage_order " << order;
    }
  }
}

TEST(DnnlPool, CeilModeDilationsAndAveragePadCounting) {
  Tensor x = random_tensor(DType::Float, {1, 2, 9, 8}, 2);
  struct Case {
    Dims k, s, pads, dil;
    bool ceil, include;
  };
  std::vector<Case> cases = {
      {{3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, true, false},
      {{3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true, true},  // overhang not counted by count_include_pad
      {{2, 3}, {3, 2}, {1, 0, 0, 1}, {1, 1}, false, true},
      {{2, 2}, {1, 2}, {0, 1, 1, 0}, {2, 3}, true, false},
  };
  for (const auto& c : cases) {
    Dims out_sp;
    for (int i = 0; i < 2; ++i) {
      int64_t in = x.dim(2 + i), ext = (c.k[i] - 1) * c.dil[i] + 1,
              span = in + c.pads[i] + c.pads[2 + i] - ext;
      int64_t o = (c.ceil ? (span + c.s[i] - 1) / c.s[i] : span / c.s[i]) + 1;
      if (c.ceil && (o - 1) * c.s[i] >= in + c.pads[i]) --o;
      out_sp.push_back(o);
    }
    Dims od = {1, 2, out_sp[0], out_sp[1]};
    std::map<std::string, Attribute> attrs = {
        {"kernel_shape", c.k}, {"strides", c.s}, {"pads", c.pads}, {"ceil_mode", int64_t(c.ceil)}};
    SCOPED_TRACE(fmt::format("k {} s {} pads {} dil {} ceil {}", dims_to_string(c.k), dims_to_string(c.s),
                             dims_to_string(c.pads), dims_to_string(c.dil), c.ceil));
    auto mx = ref_pool(0, as_double(x), x.dims(), c.k, c.s, c.pads, c.dil, out_sp, false, 0, nullptr);
    auto attrs_max = attrs;
    attrs_max["dilations"] = c.dil;
    expect_close(run1("MaxPool", {&x}, attrs_max), od, mx);
    if (c.dil == Dims{1, 1}) {
      auto av = ref_pool(1, as_double(x), x.dims(), c.k, c.s, c.pads, c.dil, out_sp, c.include, 0, nullptr);
      auto attrs_avg = attrs;
      attrs_avg["count_include_pad"] = int64_t(c.include);
      expect_close(run1("AveragePool", {&x}, attrs_avg), od, av);
      for (double p : {1.0, 2.0, 3.0}) {
        if (c.ceil) break;  // LpPool has no ceil_mode before opset 18
        auto lp = ref_pool(2, as_double(x), x.dims(), c.k, c.s, c.pads, c.dil, out_sp, false, p, nullptr);
        auto attrs_lp = attrs;
        attrs_lp.erase("ceil_mode");
        attrs_lp["p"] = int64_t(p);
        expect_close(run1("LpPool", {&x}, attrs_lp), od, lp);
      }
    }
  }
}

TEST(DnnlPool, TypesAndSpatialRanks) {
  // 1-D and 3-D, int8 / uint8 / double / fp16 max, fp16 average.
  Tensor x1 = random_tensor(DType::Float, {2, 3, 11}, 3);
  auto w1 = ref_pool(0, as_double(x1), x1.dims(), {3}, {2}, {1, 1}, {1}, {6}, false, 0, nullptr);
  expect_close(
      run1("MaxPool", {&x1}, {{"kernel_shape", Dims{3}}, {"strides", Dims{2}}, {"pads", Dims{1, 1}}}),
      {2, 3, 6}, w1);
  Tensor x3 = random_tensor(DType::Float, {1, 2, 5, 6, 4}, 4);
  // D: (5 + 0 + 1 - 2) / 1 + 1 = 5, H: (6 + 1 + 1 - 3) / 2 + 1 = 3, W: (4 - 2) / 2 + 1 = 2
  auto w3 = ref_pool(1, as_double(x3), x3.dims(), {2, 3, 2}, {1, 2, 2}, {0, 1, 0, 1, 1, 0}, {1, 1, 1},
                     {5, 3, 2}, false, 0, nullptr);
  expect_close(
      run1("AveragePool", {&x3},
           {{"kernel_shape", Dims{2, 3, 2}}, {"strides", Dims{1, 2, 2}}, {"pads", Dims{0, 1, 0, 1, 1, 0}}}),
      {1, 2, 5, 3, 2}, w3);
  for (DType t : {DType::Int8, DType::UInt8, DType::Double, DType::Float16}) {
    SCOPED_TRACE(dtype_name(t));
    Tensor x = random_tensor(t, {1, 2, 6, 6}, 5, t == DType::UInt8 ? 0 : -100, 100);
    auto want =
        ref_pool(0, as_double(x), x.dims(), {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, {3, 3}, false, 0, nullptr);
    Tensor y = run1("MaxPool", {&x}, {{"kernel_shape", Dims{2, 2}}, {"strides", Dims{2, 2}}});
    EXPECT_EQ(y.dtype(), t);
    expect_close(y, {1, 2, 3, 3}, want, 0, 0);
  }
  Tensor xh = random_tensor(DType::Float16, {1, 2, 6, 6}, 6);
  auto wh =
      ref_pool(1, as_double(xh), xh.dims(), {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, {6, 6}, false, 0, nullptr);
  expect_close(run1("AveragePool", {&xh}, {{"kernel_shape", Dims{3, 3}}, {"pads", Dims{1, 1, 1, 1}}}),
               {1, 2, 6, 6}, wh, 2e-3, 2e-3);
  expect_error("MaxPool", {&x1}, {}, {"'op'", "kernel_shape"});
  Tensor x2 = random_tensor(DType::Float, {2, 3}, 3);
  expect_error("MaxPool", {&x2}, {{"kernel_shape", Dims{2}}}, {"'op'", "rank >= 3"});
}

TEST(DnnlPool, LpPoolOpset1TakesAFloatP) {
  Tensor x = random_tensor(DType::Float, {1, 3, 6, 5}, 9);
  auto want =
      ref_pool(2, as_double(x), x.dims(), {2, 2}, {2, 1}, {0, 0, 0, 0}, {1, 1}, {3, 4}, false, 3.0, nullptr);
  OpGraph g("LpPool", {&x}, {{"kernel_shape", Dims{2, 2}}, {"strides", Dims{2, 1}}, {"p", 3.f}}, {}, 1, true,
            1);
  expect_close(g.run().at(0), {1, 3, 3, 4}, want);
  OpGraph gg("GlobalLpPool", {&x}, {{"p", 1.5f}}, {}, 1, true, 1);
  auto v = values(x);
  std::vector<double> gw(3, 0.0);
  for (size_t i = 0; i < v.size(); ++i) gw[i / 30] += std::pow(std::fabs(v[i]), 1.5);
  for (auto& w : gw) w = std::pow(w, 1 / 1.5);
  expect_close(gg.run().at(0), {1, 3, 1, 1}, gw);
}

TEST(DnnlPool, MaxUnpoolInvertsMaxPoolIndices) {
  Tensor x = random_tensor(DType::Float, {2, 3, 6, 8}, 11);
  OpGraph pool("MaxPool", {&x}, {{"kernel_shape", Dims{2, 2}}, {"strides", Dims{2, 2}}}, {}, 2);
  auto pooled = pool.run();
  const Tensor& vals = pooled[0];
  const Tensor& idx = pooled[1];
  // Default output: the pooled input's shape; zeros except the maxima at their indices.
  Tensor y = run1("MaxUnpool", {&vals, &idx}, {{"kernel_shape", Dims{2, 2}}, {"strides", Dims{2, 2}}});
  std::vector<double> want(x.numel(), 0.0);
  auto xv = values(x), iv = values(idx);
  for (double i : iv) want[int64_t(i)] = xv[int64_t(i)];
  expect_close(y, x.dims(), want, 0, 0);
  // A larger output_shape keeps the coordinates, zero at the end of each spatial dim.
  Tensor shape = make_tensor(DType::Int64, {4}, {2, 3, 7, 9});
  Tensor y2 =
      run1("MaxUnpool", {&vals, &idx, &shape}, {{"kernel_shape", Dims{2, 2}}, {"strides", Dims{2, 2}}});
  std::vector<double> want2(2 * 3 * 7 * 9, 0.0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    Dims c = unravel(i, x.dims());
    want2[ravel(c, {2, 3, 7, 9})] = want[i];
  }
  expect_close(y2, {2, 3, 7, 9}, want2, 0, 0);
  Tensor bad = make_tensor(DType::Int64, vals.dims(), std::vector<double>(vals.numel(), 1000.0));
  expect_error("MaxUnpool", {&vals, &bad}, {{"kernel_shape", Dims{2, 2}}, {"strides", Dims{2, 2}}},
               {"'op'", "index 1000", "outside"});
}

TEST(DnnlPool, GlobalPoolsLargePlanes) {
  for (DType t : {DType::Float, DType::Float16, DType::Double}) {
    SCOPED_TRACE(dtype_name(t));
    Tensor x = random_tensor(t, {2, 40, 33, 31}, 7);  // 80 planes of 1023 elements: the parallel path
    auto v = values(x);
    const int64_t planes = 80, size = 33 * 31;
    std::vector<double> avg(planes), mx(planes), lp(planes);
    for (int64_t p = 0; p < planes; ++p) {
      double s = 0, m = -INFINITY, q = 0;
      for (int64_t i = 0; i < size; ++i) {
        s += v[p * size + i];
        m = std::max(m, v[p * size + i]);
        q += std::pow(std::fabs(v[p * size + i]), 3.0);
      }
      avg[p] = s / size;
      mx[p] = m;
      lp[p] = std::cbrt(q);
    }
    double tol = t == DType::Float16 ? 2e-3 : 1e-5;
    expect_close(run1("GlobalAveragePool", {&x}), {2, 40, 1, 1}, avg, tol, tol);
    expect_close(run1("GlobalMaxPool", {&x}), {2, 40, 1, 1}, mx, 0, 0);
    expect_close(run1("GlobalLpPool", {&x}, {{"p", int64_t(3)}}), {2, 40, 1, 1}, lp, tol, tol);
  }
}

// ---- integer / quantized ----

TEST(DnnlQuant, MatMulIntegerZeroPointsPerRowAndColumn) {
  Tensor a = random_tensor(DType::UInt8, {2, 3, 5}, 1, 0, 255),
         b = random_tensor(DType::Int8, {5, 4}, 2, -128, 127);
  Tensor za = make_tensor(DType::UInt8, {3}, {3, 128, 7});     // per row of A
  Tensor zb = make_tensor(DType::Int8, {4}, {-1, 0, 5, -20});  // per column of B
  Tensor y = run1("MatMulInteger", {&a, &b, &za, &zb});
  auto av = values(a), bv = values(b);
  std::vector<double> want;
  for (int64_t bi = 0; bi < 2; ++bi)
    for (int64_t m = 0; m < 3; ++m)
      for (int64_t n = 0; n < 4; ++n) {
        double s = 0;
        for (int64_t k = 0; k < 5; ++k)
          s += (av[(bi * 3 + m) * 5 + k] - values(za)[m]) * (bv[k * 4 + n] - values(zb)[n]);
        want.push_back(s);
      }
  EXPECT_EQ(y.dtype(), DType::Int32);
  expect_close(y, {2, 3, 4}, want, 0, 0);
}

TEST(DnnlQuant, QLinearMatMulRoundsHalfToEvenAndSaturates) {
  // 1x2 * 2x3 with scales chosen so the products land on .5 and beyond the uint8 range.
  Tensor a = make_tensor(DType::UInt8, {1, 2}, {3, 1}),
         b = make_tensor(DType::UInt8, {2, 3}, {1, 2, 200, 0, 1, 0});
  Tensor as = make_tensor(DType::Float, {}, {1.0}), bs = make_tensor(DType::Float, {}, {1.0});
  Tensor ys = make_tensor(DType::Float, {}, {2.0});
  Tensor z = make_tensor(DType::UInt8, {}, {0}), yz = make_tensor(DType::UInt8, {}, {10});
  // acc = [3, 7, 600] -> /2 = [1.5, 3.5, 300] -> rint [2, 4, 300] + 10 -> [12, 14, 255 (saturated)]
  Tensor y = run1("QLinearMatMul", {&a, &as, &z, &b, &bs, &z, &ys, &yz});
  EXPECT_EQ(y.dtype(), DType::UInt8);
  expect_close(y, {1, 3}, {12, 14, 255}, 0, 0);
}

TEST(DnnlQuant, ConvIntegerPerChannelWeightZeroPoint) {
  Tensor x = random_tensor(DType::UInt8, {1, 2, 5, 5}, 3, 0, 255),
         w = random_tensor(DType::Int8, {3, 2, 3, 3}, 4, -50, 50);
  Tensor xz = make_tensor(DType::UInt8, {}, {100});
  Tensor wz = make_tensor(DType::Int8, {3}, {1, -2, 0});
  Tensor y = run1("ConvInteger", {&x, &w, &xz, &wz}, {{"pads", Dims{1, 1, 1, 1}}});
  // Reference: (x - xz) with padding contributing zero, (w - wz[m]).
  auto xv = values(x), wv = values(w);
  for (auto& v : xv) v -= 100;
  for (int64_t m = 0; m < 3; ++m)
    for (int64_t i = 0; i < 18; ++i) wv[m * 18 + i] -= values(wz)[m];
  Dims od;
  auto want = ref_conv(xv, x.dims(), wv, w.dims(), nullptr, {{1, 1}, {1, 1, 1, 1}, {1, 1}, 1}, &od);
  EXPECT_EQ(y.dtype(), DType::Int32);
  expect_close(y, od, want, 0, 0);
}

// ---- fused post-ops ----

double apply_ref(const dnnl_ops::PostOp& op, double x) {
  using K = dnnl_ops::PostOp::Kind;
  switch (op.kind) {
    case K::Relu:
      return x > 0 ? x : op.alpha * x;
    case K::GeluErf:
      return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case K::GeluTanh:
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case K::Swish:
      return x / (1 + std::exp(-op.alpha * x));
    case K::HardSwish:
      return x * std::min(std::max(x + 3, 0.0), 6.0) / 6;
    case K::Clip:
      return std::min(std::max(x, double(op.alpha)), double(op.beta));
    case K::Linear:
      return op.alpha * x + op.beta;
    case K::Eltwise:
      switch (op.eltwise) {
        case dnnl_ops::PostOp::Unary::Sigmoid: return 1 / (1 + std::exp(-x));
        case dnnl_ops::PostOp::Unary::Tanh: return std::tanh(x);
        case dnnl_ops::PostOp::Unary::Abs: return std::fabs(x);
        case dnnl_ops::PostOp::Unary::Exp: return std::exp(x);
        case dnnl_ops::PostOp::Unary::Sqrt: return std::sqrt(x);
        case dnnl_ops::PostOp::Unary::Log: return std::log(x);
        case dnnl_ops::PostOp::Unary::Elu: return x > 0 ? x : op.alpha * (std::exp(x) - 1);
        case dnnl_ops::PostOp::Unary::Mish: return x * std::tanh(std::log1p(std::exp(x)));
        case dnnl_ops::PostOp::Unary::Round: return std::nearbyint(x);
        case dnnl_ops::PostOp::Unary::Pow: return op.alpha * std::pow(x, double(op.beta));
        case dnnl_ops::PostOp::Unary::Softplus: return std::log1p(std::exp(x));
      }
      break;
    case K::Add:
    case K::Binary:
      break;
  }
  return x;
}

// Runs `node` with a post-op chain through make_anchor_kernel; `extra` are the Add inputs after the anchor's
// own.
Tensor run_fused(const Node& node, std::vector<const Tensor*> inputs,
                 const std::vector<dnnl_ops::PostOp>& ops) {
  auto k = dnnl_ops::make_anchor_kernel(node, ops);
  std::vector<Tensor> outs(1);
  runtime::KernelContext ctx(node, std::move(inputs), outs, Allocator::heap());
  k->run(ctx);
  return outs[0];
}

// act(conv + residual) + per-channel and act(conv) + residual for every activation, on a small problem, a
// wider one (blocked layouts: the residual goes in as a sum through the output's layout) and a pointwise one
// (plain layout, where a sum must come first in the chain, else binary adds are used).
void check_conv_post_ops(const Dims& xd, int64_t M, int64_t k) {
  using P = dnnl_ops::PostOp;
  const int64_t pad = k / 2;
  Model m;
  GraphBuilder b(m);
  Value* xv = b.input("x", DType::Float, {xd[0], xd[1], xd[2], xd[3]});
  Value* wv = b.random_constant("w", {M, xd[1], k, k}, 0.2f);
  Value* bv = b.random_constant("b", {M}, 0.2f);
  b.output(b.op("Conv", {xv, wv, bv}, {{"pads", Dims{pad, pad, pad, pad}}}));
  b.finish();
  const Node& conv = *m.graph->nodes()[0];
  ASSERT_TRUE(dnnl_ops::supports_post_ops(conv));
  Tensor x = random_tensor(DType::Float, xd, 1);
  const Tensor& w = m.graph->find_value("w")->constant();
  const Tensor& bias = m.graph->find_value("b")->constant();
  auto biasv = as_double(bias);
  Dims od;
  auto base = ref_conv(as_double(x), x.dims(), as_double(w), w.dims(), &biasv,
                       {{1, 1}, {pad, pad, pad, pad}, {1, 1}, 1}, &od);
  Tensor residual = random_tensor(DType::Float, od, 2);
  Tensor per_channel = random_tensor(DType::Float, {M, 1, 1}, 3);
  auto rv = as_double(residual), cv = as_double(per_channel);
  const int64_t plane = od[2] * od[3];
  for (const P& act : {P::relu(), P::relu(0.1f), P::gelu_erf(), P::gelu_tanh(), P::swish(1.5f),
                       P::hard_swish(), P::clip(0.f, 0.6f), P::linear(2.f, -0.5f)}) {
    SCOPED_TRACE(std::string(dnnl_ops::post_op_name(act.kind)));
    Tensor y = run_fused(conv, {&x, &w, &bias, &residual, &per_channel}, {P::add(3), act, P::add(4)});
    std::vector<double> want(base.size());
    for (size_t i = 0; i < base.size(); ++i) want[i] = apply_ref(act, base[i] + rv[i]) + cv[(i / plane) % M];
    expect_close(y, od, want, 1e-4, 1e-4);
    Tensor y2 = run_fused(conv, {&x, &w, &bias, &residual}, {act, P::add(3)});
    for (size_t i = 0; i < base.size(); ++i) want[i] = apply_ref(act, base[i]) + rv[i];
    expect_close(y2, od, want, 1e-4, 1e-4);
    // The activation last (a trailing Swish runs as a pass over the output after the primitive).
    Tensor y3 = run_fused(conv, {&x, &w, &bias, &residual}, {P::add(3), act});
    for (size_t i = 0; i < base.size(); ++i) want[i] = apply_ref(act, base[i] + rv[i]);
    expect_close(y3, od, want, 1e-4, 1e-4);
  }
}

// The pass that replaces oneDNN's swish post-op: x * sigmoid(alpha x) within 3e-6 relative (1e-6 absolute near
// zero) over a range wider than activations take, through the vector body, its masked tail and the thread split;
// infinities and NaN as the limits say.
TEST(DnnlUtil, SwishPassMatchesTheDefinition) {
  for (float alpha : {1.0f, 1.5f}) {
    std::vector<float> y(100003);
    for (size_t i = 0; i < y.size(); ++i) y[i] = -40.0f + 80.0f * float(i) / float(y.size());
    const std::vector<float> x = y;
    runtime::dnnl_detail::swish_inplace(y.data(), int64_t(y.size()), alpha);
    for (size_t i = 0; i < y.size(); ++i) {
      const double want = double(x[i]) / (1.0 + std::exp(-double(alpha) * double(x[i])));
      ASSERT_NEAR(y[i], want, 1e-6 + 3e-6 * std::fabs(want)) << "alpha " << alpha << " x " << x[i];
    }
  }
  std::vector<float> s = {INFINITY, -INFINITY, NAN, 0.0f, -3e38f, 3e38f, 1.0f};
  runtime::dnnl_detail::swish_inplace(s.data(), int64_t(s.size()), 1.0f);
  EXPECT_EQ(s[0], INFINITY);
  EXPECT_EQ(s[1], 0.0f);
  EXPECT_TRUE(std::isnan(s[2]));
  EXPECT_EQ(s[3], 0.0f);
  EXPECT_EQ(s[4], 0.0f);
  EXPECT_EQ(s[5], 3e38f);
  EXPECT_NEAR(s[6], 0.7310585786, 1e-6);
}

// The residual of a sum post-op becomes the output buffer when the context may take it and nothing else shares
// its storage; the result is the same as with a copy.
TEST(DnnlPostOps, ResidualSumWritesOverADyingAddend) {
  using P = dnnl_ops::PostOp;
  Model m;
  GraphBuilder b(m);
  Value* xv = b.input("x", DType::Float, {1, 16, 6, 6});
  b.output(b.op("Conv", {xv, b.random_constant("w", {32, 16, 1, 1}, 0.2f), b.random_constant("b", {32}, 0.2f)}));
  b.finish();
  const Node& conv = *m.graph->nodes()[0];
  Tensor x = random_tensor(DType::Float, {1, 16, 6, 6}, 1);
  const Tensor& w = m.graph->find_value("w")->constant();
  const Tensor& bias = m.graph->find_value("b")->constant();
  const Tensor residual = random_tensor(DType::Float, {1, 32, 6, 6}, 2);
  const std::vector<P> ops = {P::add(3), P::relu()};
  const Tensor copied = run_fused(conv, {&x, &w, &bias, &residual}, ops);  // no donation allowed
  EXPECT_NE(copied.raw(), residual.raw());
  auto run = [&](const Tensor& r, std::vector<bool> donatable) {
    auto k = dnnl_ops::make_anchor_kernel(conv, ops);
    std::vector<const Tensor*> ins = {&x, &w, &bias, &r};
    std::vector<Tensor> outs(1);
    runtime::KernelContext ctx(conv, ins, outs, Allocator::heap(), &donatable);
    k->run(ctx);
    return outs[0];
  };
  auto same_values = [&](const Tensor& y) {
    ASSERT_EQ(y.numel(), copied.numel());
    for (int64_t i = 0; i < y.numel(); ++i) ASSERT_EQ(y.data<float>()[i], copied.data<float>()[i]) << i;
  };
  Tensor dying = residual.clone();
  Tensor y = run(dying, {false, false, false, true});
  EXPECT_EQ(y.raw(), dying.raw());
  same_values(y);
  // Twins: donation not allowed; storage shared with another tensor (a reshape view).
  Tensor kept = residual.clone();
  EXPECT_NE(run(kept, {false, false, false, false}).raw(), kept.raw());
  Tensor shared = residual.clone();
  Tensor view = shared.reshaped({32, 36});
  Tensor y2 = run(shared, {false, false, false, true});
  EXPECT_NE(y2.raw(), shared.raw());
  same_values(y2);
  for (int64_t i = 0; i < shared.numel(); ++i) ASSERT_EQ(shared.data<float>()[i], residual.data<float>()[i]);
}

TEST(DnnlPostOps, ConvWithResidualAndActivations) {
  check_conv_post_ops({2, 8, 9, 9}, 16, 3);
  check_conv_post_ops({1, 32, 12, 10}, 48, 3);
  check_conv_post_ops({1, 32, 7, 7}, 24, 1);
}

// A channels-last gaf.Conv, x [1, H, W, C] -> [1, OH, OW, M] (k x k, pads k / 2, the stride given), with random
// weights, bias, input and residual, run with each post-op chain against the double reference.
void check_channels_last_chains(int64_t H, int64_t W, int64_t C, int64_t M, int64_t k, int64_t stride, float scale,
                                const std::vector<std::vector<dnnl_ops::PostOp>>& chains) {
  using P = dnnl_ops::PostOp;
  const int64_t pad = k / 2, OH = (H + 2 * pad - k) / stride + 1, OW = (W + 2 * pad - k) / stride + 1;
  Model m;
  GraphBuilder b(m);
  Value* xv = b.input("x", DType::Float, {1, C, H, W});
  b.output(b.op("Conv", {xv, b.random_constant("w", {M, C, k, k}, scale), b.random_constant("b", {M}, 0.5f)},
                {{"pads", Dims{pad, pad, pad, pad}}, {"strides", Dims{stride, stride}}}));
  b.finish();
  Node& conv = *m.graph->nodes()[0];
  conv.domain = "gaf";
  conv.attrs["layout"] = std::string("NHWC");
  const Tensor& w = m.graph->find_value("w")->constant();
  const Tensor& bias = m.graph->find_value("b")->constant();
  Tensor x = random_tensor(DType::Float, {1, H, W, C}, 1, -3.0, 3.0);
  Tensor residual = random_tensor(DType::Float, {1, OH, OW, M}, 2);
  const auto xd = as_double(x), bd = as_double(bias), rd = as_double(residual);
  // ref_conv's NCHW convolution, its input and output through channels-last.
  std::vector<double> xc(xd.size());
  for (int64_t p = 0; p < H * W; ++p)
    for (int64_t c = 0; c < C; ++c) xc[size_t(c * H * W + p)] = xd[size_t(p * C + c)];
  Dims od;
  const auto nchw = ref_conv(xc, {1, C, H, W}, as_double(w), w.dims(), &bd,
                             {{stride, stride}, {pad, pad, pad, pad}, {1, 1}, 1}, &od);
  std::vector<double> base(nchw.size());
  for (int64_t p = 0; p < OH * OW; ++p)
    for (int64_t o = 0; o < M; ++o) base[size_t(p * M + o)] = nchw[size_t(o * OH * OW + p)];
  for (const auto& chain : chains) {
    std::string name;
    for (const P& op : chain) name += std::string(dnnl_ops::post_op_name(op.kind)) + " ";
    SCOPED_TRACE(name);
    Tensor y = run_fused(conv, {&x, &w, &bias, &residual}, chain);
    std::vector<double> want = base;
    for (size_t i = 0; i < want.size(); ++i)
      for (const P& op : chain) want[i] = op.kind == P::Kind::Add ? want[i] + rd[i] : apply_ref(op, want[i]);
    expect_close(y, {1, OH, OW, M}, want, 1e-4, 1e-5);
  }
}

// A channels-last 1x1 convolution takes PointwiseConv's path (16 input channels), the chain as its epilogue
// where PointwiseConv has it: a clamp, then HardSwish or a trailing Swish on the tile in registers, a residual
// after; other orders (an activation after the residual, a clamp after HardSwish) fall back to oneDNN and the
// swish pass.
TEST(DnnlPostOps, ChannelsLastPointwiseActivations) {
  using P = dnnl_ops::PostOp;
  check_channels_last_chains(5, 7, 16, 40, 1, 1, 0.3f,
                             {{P::hard_swish()},
                              {P::swish(1.f)},
                              {P::swish(1.5f)},
                              {P::clip(-1.f, 2.f), P::hard_swish()},
                              {P::relu(), P::swish(1.f)},
                              {P::hard_swish(), P::add(3)},
                              {P::swish(1.f), P::add(3), P::relu()},
                              {P::add(3), P::swish(1.f)},
                              {P::hard_swish(), P::clip(0.f, 1.f)}});
}

// A channels-last convolution of few output pixels and many channels takes DirectConv's path (3x3, 7x7 pixels,
// 64 -> 192 channels, 432 KiB of weights; stride 1 and 2), the chain as its epilogue where DirectConv has it, and
// falls back to oneDNN where it does not (an activation after the residual).
TEST(DnnlPostOps, ChannelsLastDirectConvEpilogues) {
  using P = dnnl_ops::PostOp;
  const std::vector<std::vector<P>> chains = {
      {}, {P::relu()}, {P::add(3), P::relu()}, {P::clip(-1.f, 2.f), P::hard_swish()}, {P::swish(1.f)},
      {P::add(3), P::swish(1.f)}};
  check_channels_last_chains(7, 7, 64, 192, 3, 1, 0.1f, chains);
  check_channels_last_chains(13, 13, 64, 192, 3, 2, 0.1f, chains);
  check_channels_last_chains(7, 7, 64, 160, 3, 1, 0.1f, chains);  // not whole panels: oneDNN's
}

TEST(DnnlPostOps, MatMulAndGemmEpilogues) {
  using P = dnnl_ops::PostOp;
  Model m;
  GraphBuilder b(m);
  Value* a = b.input("a", DType::Float, {3, 5, 12});
  Value* w = b.random_constant("w", {12, 7}, 0.5f);
  b.output(b.op("MatMul", {a, w}));
  Value* ga = b.input("ga", DType::Float, {5, 12});
  Value* gc = b.random_constant("gc", {7}, 0.5f);
  b.output(b.op("Gemm", {ga, w, gc}, {{"alpha", 0.5f}, {"beta", 2.f}}));
  b.finish();
  auto nodes = m.graph->nodes();
  const Node& mm = *nodes[0];
  const Node& gemm = *nodes[1];
  const Tensor& wt = m.graph->find_value("w")->constant();
  Tensor x = random_tensor(DType::Float, {3, 5, 12}, 1);
  Dims od;
  auto base = ref_matmul(as_double(x), x.dims(), as_double(wt), wt.dims(), &od);
  // Addends of every broadcast class: bias [7], full [3,5,7], per-row [5,1] (oneDNN's reference-only
  // broadcast, which the kernel materialises), per-batch [3,1,1] (not foldable into a 2-D product).
  for (Dims ad : {Dims{7}, Dims{3, 5, 7}, Dims{5, 1}, Dims{3, 1, 1}}) {
    SCOPED_TRACE(dims_to_string(ad));
    Tensor add = random_tensor(DType::Float, ad, 2);
    Tensor y = run_fused(mm, {&x, &wt, &add}, {P::add(2), P::gelu_erf()});
    auto av = as_double(add);
    Dims pad(3 - ad.size(), 1);
    pad.insert(pad.end(), ad.begin(), ad.end());
    std::vector<double> want(base.size());
    for (size_t i = 0; i < base.size(); ++i) {
      Dims c = unravel(int64_t(i), od);
      for (int d = 0; d < 3; ++d)
        if (pad[d] == 1) c[d] = 0;
      want[i] = apply_ref(P::gelu_erf(), base[i] + av[ravel(c, pad)]);
    }
    expect_close(y, od, want, 1e-4, 1e-4);
  }
  // Gemm: relu(0.5 * A W + 2 * C) + residual.
  Tensor xa = random_tensor(DType::Float, {5, 12}, 3), res = random_tensor(DType::Float, {5, 7}, 4);
  const Tensor& c = m.graph->find_value("gc")->constant();
  Tensor y = run_fused(gemm, {&xa, &wt, &c, &res}, {P::relu(), P::add(3)});
  auto g = ref_gemm(xa, wt, &c, false, false, 0.5, 2.0, 5, 7, 12);
  auto rv = as_double(res);
  for (size_t i = 0; i < g.size(); ++i) g[i] = std::max(g[i], 0.0) + rv[i];
  expect_close(y, {5, 7}, g, 1e-4, 1e-4);
  // A trailing Swish (a gate's SiLU) runs as a pass over the output after the primitive, for both products.
  Tensor bias = random_tensor(DType::Float, {7}, 5);
  Tensor ys = run_fused(mm, {&x, &wt, &bias}, {P::add(2), P::swish(1.5f)});
  auto bv = as_double(bias);
  std::vector<double> want(base.size());
  for (size_t i = 0; i < base.size(); ++i) want[i] = apply_ref(P::swish(1.5f), base[i] + bv[i % 7]);
  expect_close(ys, od, want, 1e-4, 1e-4);
  // So does a trailing GELU, either form.
  for (const P& gelu : {P::gelu_erf(), P::gelu_tanh()}) {
    Tensor yg = run_fused(mm, {&x, &wt, &bias}, {P::add(2), gelu});
    for (size_t i = 0; i < base.size(); ++i) want[i] = apply_ref(gelu, base[i] + bv[i % 7]);
    expect_close(yg, od, want, 1e-4, 1e-5);
  }
  Tensor gs = run_fused(gemm, {&xa, &wt, &c, &res}, {P::add(3), P::swish()});
  g = ref_gemm(xa, wt, &c, false, false, 0.5, 2.0, 5, 7, 12);
  for (size_t i = 0; i < g.size(); ++i) g[i] = apply_ref(P::swish(), g[i] + rv[i]);
  expect_close(gs, {5, 7}, g, 1e-4, 1e-4);
}

// The epilogue of a few rows against large constant weights (Gemv, then the chain on the result): a classifier
// Gemm's bias, ReLU and a residual.
TEST(DnnlPostOps, FewRowGemmEpilogue) {
  using P = dnnl_ops::PostOp;
  Model m;
  GraphBuilder b(m);
  Value* w = b.random_constant("w", {1000, 128}, 0.5f);
  Value* bias = b.random_constant("bias", {1000}, 0.5f);
  b.output(b.op("Gemm", {b.input("x", DType::Float, {2, 128}), w, bias}, {{"transB", int64_t(1)}, {"alpha", 0.5f}}));
  b.finish();
  const Node& gemm = *m.graph->nodes()[0];
  const Tensor& wt = m.graph->find_value("w")->constant();
  const Tensor& bt = m.graph->find_value("bias")->constant();
  Tensor x = random_tensor(DType::Float, {2, 128}, 1), res = random_tensor(DType::Float, {2, 1000}, 2);
  Tensor y = run_fused(gemm, {&x, &wt, &bt, &res}, {P::relu(), P::add(3)});
  auto g = ref_gemm(x, wt, &bt, false, true, 0.5, 1.0, 2, 1000, 128);
  auto rv = as_double(res);
  for (size_t i = 0; i < g.size(); ++i) g[i] = std::max(g[i], 0.0) + rv[i];
  expect_close(y, {2, 1000}, g, 1e-4, 1e-4);
}

TEST(DnnlPostOps, UnaryAndBinaryEpilogues) {
  using P = dnnl_ops::PostOp;
  Model m;
  GraphBuilder b(m);
  Value* a = b.input("a", DType::Float, {6, 12});
  Value* w = b.random_constant("w", {12, 7}, 0.3f);
  b.output(b.op("MatMul", {a, w}));
  b.finish();
  const Node& mm = *m.graph->nodes()[0];
  const Tensor& wt = m.graph->find_value("w")->constant();
  Tensor x = random_tensor(DType::Float, {6, 12}, 5);
  Dims od;
  auto base = ref_matmul(as_double(x), x.dims(), as_double(wt), wt.dims(), &od);
  // Unary: |y| first keeps Sqrt, Log and Pow defined.
  for (P::Unary f : {P::Unary::Sigmoid, P::Unary::Tanh, P::Unary::Abs, P::Unary::Exp, P::Unary::Sqrt, P::Unary::Log,
                     P::Unary::Elu, P::Unary::Mish, P::Unary::Round, P::Unary::Pow, P::Unary::Softplus}) {
    SCOPED_TRACE(int(f));
    P op = P::unary(f, f == P::Unary::Elu ? 0.7f : 1.0f, f == P::Unary::Pow ? 2.0f : 0.0f);
    Tensor y = run_fused(mm, {&x, &wt}, {P::unary(P::Unary::Abs), P::linear(1.f, 0.25f), op});
    std::vector<double> want(base.size());
    for (size_t i = 0; i < base.size(); ++i) want[i] = apply_ref(op, std::fabs(base[i]) + 0.25);
    expect_close(y, od, want, 1e-4, 1e-4);
  }
  // Binary with a per-column [7] and a full [6,7] operand.
  for (Dims td : {Dims{7}, Dims{6, 7}}) {
    Tensor t = random_tensor(DType::Float, td, 6);
    auto tv = as_double(t);
    for (P::BinaryOp bop : {P::BinaryOp::Mul, P::BinaryOp::Sub, P::BinaryOp::Div, P::BinaryOp::Max, P::BinaryOp::Min}) {
      SCOPED_TRACE(int(bop));
      Tensor y = run_fused(mm, {&x, &wt, nullptr, &t}, {P::binary_op(bop, 3)});
      std::vector<double> want(base.size());
      for (size_t i = 0; i < base.size(); ++i) {
        double v = base[i], u = tv[td.size() == 1 ? i % 7 : i];
        want[i] = bop == P::BinaryOp::Mul ? v * u : bop == P::BinaryOp::Sub ? v - u : bop == P::BinaryOp::Div ? v / u
                  : bop == P::BinaryOp::Max ? std::max(v, u) : std::min(v, u);
      }
      expect_close(y, od, want, 1e-4, 1e-4);
    }
  }
}

TEST(DnnlPostOps, RepeatedEltwiseAlgorithmsMergeOrAreRefused) {
  // oneDNN 2.6 applies one parameter set per eltwise algorithm in a fused chain (MatMul -> *2 -> *3 came out 4x).
  using P = dnnl_ops::PostOp;
  std::vector<P> ops = {P::linear(2.f, 0.f), P::linear(3.f, 1.f), P::relu(), P::clip(-1.f, 5.f), P::clip(0.5f, 2.f)};
  std::string why;
  ASSERT_TRUE(dnnl_ops::normalize_post_ops(ops, &why)) << why;
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[0].kind, P::Kind::Linear);  // 3 (2x) + 1
  EXPECT_EQ(ops[0].alpha, 6.f);
  EXPECT_EQ(ops[0].beta, 1.f);
  EXPECT_EQ(ops[2].kind, P::Kind::Clip);  // clamp(clamp(x, -1, 5), 0.5, 2)
  EXPECT_EQ(ops[2].alpha, 0.5f);
  EXPECT_EQ(ops[2].beta, 2.f);
  std::vector<P> apart = {P::linear(-1.f, 0.f), P::relu(), P::linear(1.f, 1.f)};
  EXPECT_FALSE(dnnl_ops::normalize_post_ops(apart, &why));
  EXPECT_NE(why.find("different parameters"), std::string::npos) << why;
  std::vector<P> same = {P::relu(), P::unary(P::Unary::Tanh), P::relu()};  // repeated with equal parameters
  EXPECT_TRUE(dnnl_ops::normalize_post_ops(same, &why));
  EXPECT_EQ(same.size(), 3u);
  // End to end: fused groups with such epilogues agree with the unfused run (merged, or run op by op).
  for (const char* body : {"c = Constant <value = float {2.0}> () n = Mul(m, c) d = Constant <value = float {3.0}> () "
                           "y = Mul(n, d)",
                           "n = Neg(m) r = Relu(n) c = Constant <value = float {1.0}> () y = Add(r, c)",
                           "c = Constant <value = float {2.0}> () n = Pow(m, c) r = Relu(n) "
                           "d = Constant <value = float {3.0}> () y = Pow(r, d)",
                           // a Gemm's alpha is a Linear in front of its chain too
                           "g = Gemm <alpha = 0.5> (x, w, b) r = Relu(g) c = Constant <value = float {3.0}> () "
                           "y = Mul(r, c)"}) {
    SCOPED_TRACE(body);
    Model mm = onnx_io::parse_model_text(std::string("<ir_version: 8, opset_import: [\"\" : 17]> "
                                                     "g (float[3,11] x, float[11,11] w, float[11] b) => (float[3,11] y) { "
                                                     "m = MatMul(x, w) ") + body + " }");
    tools::FuseOptions opts;
    opts.fusion.opt_level = 3;
    Model f = tools::copy_model(mm);
    tools::fuse_model(f, opts);
    auto in = tools::random_inputs(*mm.graph, 3);
    auto want = runtime::Session(*mm.graph).run(in);
    auto got = runtime::Session(*f.graph).run(in);
    ASSERT_EQ(got.size(), 1u);
    for (int64_t i = 0; i < want[0].numel(); ++i)
      ASSERT_NEAR(got[0].data<float>()[i], want[0].data<float>()[i], 1e-4 * (1 + std::fabs(want[0].data<float>()[i])))
          << "element " << i;
  }
}

TEST(DnnlPostOps, BadChainsAndUnsupportedOps) {
  using P = dnnl_ops::PostOp;
  Model m;
  GraphBuilder b(m);
  Value* a = b.input("a", DType::Float, {3, 4});
  Value* w = b.random_constant("w", {4, 2}, 0.5f);
  b.output(b.op("MatMul", {a, w}));
  b.output(b.op("MaxPool", {b.op("Unsqueeze", {a, b.ints({0})})}, {{"kernel_shape", Dims{2}}}));
  b.finish();
  auto nodes = m.graph->nodes();
  EXPECT_THROW(dnnl_ops::make_anchor_kernel(*nodes[0], {P::add(1)}), Error);  // collides with B
  EXPECT_THROW(dnnl_ops::make_anchor_kernel(*nodes[0], {P::clip(1.f, 0.f)}), Error);
  const Node* pool = nullptr;
  for (const Node* n : nodes)
    if (n->op_type == "MaxPool") pool = n;
  ASSERT_NE(pool, nullptr);
  EXPECT_FALSE(dnnl_ops::supports_post_ops(*pool));
  EXPECT_THROW(dnnl_ops::make_anchor_kernel(*pool, {}), Error);
  // An addend that does not broadcast into the output.
  Tensor x = random_tensor(DType::Float, {3, 4}, 1), bad = random_tensor(DType::Float, {4}, 2);
  const Tensor& wt = m.graph->find_value("w")->constant();
  try {
    run_fused(*nodes[0], {&x, &wt, &bad}, {P::add(2)});
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not broadcast"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gaf

namespace gaf {
namespace {

// A product whose rows are known only at run time, against weights Gemv packs at session start (a decoder's
// prompt): every row count runs on Gemv's copy, 300 and 600 in chunks of 256 rows. Every run gives the plain
// product.
TEST(DnnlMatMul, DynamicRowsRunOnGemvInChunks) {
  constexpr int64_t K = 256, N = 512;
  Graph g;
  Value* a = g.add_input("a", TensorType{DType::Float, Shape{Dim(std::string("rows")), Dim(K)}});
  Tensor w(DType::Float, {K, N});
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = float((i * 7919) % 201 - 100) / 400.f;
  Value* b = g.add_constant("w", w);
  Node* mm = g.add_node("MatMul", {a, b}, {"y"});
  mm->opset = 17;
  mm->output(0)->type = TensorType{DType::Float, Shape{Dim(std::string("rows")), Dim(N)}};
  g.add_output(mm->output(0));
  runtime::Session s(g);
  for (const int64_t M : {64, 300, 600}) {
    Tensor x(DType::Float, {M, K});
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = float((i * 104729) % 97 - 48) / 64.f;
    std::vector<double> want(size_t(M * N), 0.0);
    for (int64_t r = 0; r < M; ++r)
      for (int64_t k = 0; k < K; ++k)
        for (int64_t c = 0; c < N; ++c)
          want[size_t(r * N + c)] += double(x.data<float>()[r * K + k]) * double(w.data<float>()[k * N + c]);
    for (int run = 0; run < 5; ++run) {
      Tensor y = s.run({{"a", x}})[0];
      ASSERT_EQ(y.dims(), (std::vector<int64_t>{M, N}));
      for (int64_t i = 0; i < M * N; ++i)
        ASSERT_NEAR(y.data<float>()[i], want[size_t(i)], 1e-3 + 1e-4 * std::abs(want[size_t(i)]))
            << M << " rows, run " << run;
    }
  }
}

// A batched product whose addend varies per batch ([2, 1, N]) does not fold into one 2-D product, so Gemv does
// not take it: oneDNN reads the model's weights as they are for the first runs of that row count and packs its
// own copy on the third. Every run, before and after, gives the product plus the addend.
TEST(DnnlMatMul, UnfoldedDynamicRowsReadPlainWeightsThenPackThem) {
  using P = dnnl_ops::PostOp;
  constexpr int64_t K = 256, N = 512, M = 40;
  Model m;
  GraphBuilder b(m);
  Value* a = b.input("a", DType::Float, {Dim(int64_t(2)), Dim(std::string("rows")), Dim(K)});
  Value* w = b.random_constant("w", {K, N}, 0.25f);
  b.output(b.op("MatMul", {a, w}));
  b.finish();
  const Node& mm = *m.graph->nodes()[0];
  const Tensor& wt = m.graph->find_value("w")->constant();
  Tensor x = random_tensor(DType::Float, {2, M, K}, 11), t = random_tensor(DType::Float, {2, 1, N}, 12);
  Dims od;
  auto want = ref_matmul(as_double(x), x.dims(), as_double(wt), wt.dims(), &od);
  auto tv = as_double(t);
  for (size_t i = 0; i < want.size(); ++i) want[i] += tv[(i / size_t(M * N)) * N + i % N];
  auto k = dnnl_ops::make_anchor_kernel(mm, {P::add(2)});
  for (int run = 0; run < 5; ++run) {
    SCOPED_TRACE(run);
    std::vector<Tensor> outs(1);
    const std::vector<const Tensor*> in{&x, &wt, &t};
    runtime::KernelContext ctx(mm, in, outs, Allocator::heap());
    k->run(ctx);
    expect_close(outs[0], od, want, 1e-4, 1e-4);
  }
}

double binary_want(const dnnl_ops::PostOp& op, double x, double t) {
  using B = dnnl_ops::PostOp::BinaryOp;
  if (op.kind == dnnl_ops::PostOp::Kind::Add) return x + t;
  switch (op.binary) {
    case B::Mul: return x * t;
    case B::Sub: return x - t;
    case B::Div: return x / t;
    case B::Max: return std::max(x, t);  // x where either is NaN, as ONNX Max(y, t) after the product computes
    case B::Min: return std::min(x, t);
  }
  return x;
}

// The post-op pass (post_op_pass.h) on an output [2, 37, 700] (rows of 700: vectors and a tail), each op against
// the definition: every activation, and operands of every broadcast (full, per row, per column, per batch,
// scalar, fp16), NaN in the output and in the operands. Then a LLaMA-style gate (SiLU, x up) on Gemv's rows,
// a prompt of 37 rows and one of 600 (three chunks of up to 256 rows).
TEST(DnnlPostOps, PassAppliesEveryOpAndBroadcast) {
  using P = dnnl_ops::PostOp;
  const Dims out{2, 37, 700};
  Model m;
  GraphBuilder b(m);
  b.output(b.op("MatMul", {b.input("a", DType::Float, {2, 37, 8}), b.random_constant("w", {8, 700}, 0.5f)}));
  b.finish();
  const Node& mm = *m.graph->nodes()[0];
  Tensor a = random_tensor(DType::Float, {2, 37, 8}, 1), w = random_tensor(DType::Float, {8, 700}, 2);
  std::vector<Tensor> operands;
  for (const Dims& d : {Dims{2, 37, 700}, Dims{700}, Dims{37, 1}, Dims{2, 1, 700}, Dims{1}, Dims{2, 37, 1}})
    operands.push_back(random_tensor(DType::Float, d, uint32_t(10 + operands.size()), 0.5, 2.0));
  operands.push_back(random_tensor(DType::Float16, {37, 700}, 20, 0.5, 2.0));
  operands[0].data<float>()[5] = std::nanf("");
  operands[1].data<float>()[17] = std::nanf("");
  std::vector<const Tensor*> inputs{&a, &w};
  for (const Tensor& t : operands) inputs.push_back(&t);
  std::vector<Tensor> outs(1);
  runtime::KernelContext ctx(mm, inputs, outs, Allocator::heap());
  Tensor y0 = random_tensor(DType::Float, out, 30, -3.0, 3.0);
  for (int64_t i = 0; i < 700; i += 97) y0.data<float>()[700 * 40 + i] = std::nanf("");

  std::vector<std::vector<P>> chains;
  for (const P& op : {P::relu(), P::relu(0.1f), P::gelu_erf(), P::gelu_tanh(), P::swish(), P::swish(1.5f),
                      P::hard_swish(), P::clip(-0.5f, 0.75f), P::clip(0.f, 6.f), P::linear(2.f, -1.f)})
    chains.push_back({op});
  for (P::Unary f : {P::Unary::Sigmoid, P::Unary::Tanh, P::Unary::Abs, P::Unary::Exp, P::Unary::Round})
    chains.push_back({P::unary(f)});
  chains.push_back({P::unary(P::Unary::Abs), P::unary(P::Unary::Sqrt), P::unary(P::Unary::Log)});
  for (P::BinaryOp bop : {P::BinaryOp::Mul, P::BinaryOp::Sub, P::BinaryOp::Div, P::BinaryOp::Max, P::BinaryOp::Min})
    for (int i = 0; i < int(operands.size()); ++i) chains.push_back({P::binary_op(bop, 2 + i)});
  for (int i = 0; i < int(operands.size()); ++i) chains.push_back({P::add(2 + i)});
  chains.push_back(
      {P::swish(), P::binary_op(P::BinaryOp::Mul, 2), P::add(5), P::relu(), P::binary_op(P::BinaryOp::Min, 4)});

  std::vector<std::vector<double>> operand_values;
  for (const Tensor& t : operands) operand_values.push_back(values(t));
  auto operand_at = [&](int input, int64_t i) {
    const Tensor& t = operands[size_t(input - 2)];
    Dims td(out.size() - t.dims().size(), 1);
    td.insert(td.end(), t.dims().begin(), t.dims().end());
    const int64_t c = i % 700, r = (i / 700) % 37, n = i / (700 * 37);
    const int64_t off = ((td[0] == 1 ? 0 : n) * td[1] + (td[1] == 1 ? 0 : r)) * td[2] + (td[2] == 1 ? 0 : c);
    return operand_values[size_t(input - 2)][size_t(off)];
  };
  for (const auto& chain : chains) {
    SCOPED_TRACE(fmt::format("chain of {}, first {} {}", chain.size(), dnnl_ops::post_op_name(chain[0].kind),
                             chain[0].input));
    Tensor y = y0.clone();
    runtime::dnnl_detail::PostOpPass(mm, chain, ctx, out).apply(y.data<float>());
    std::vector<double> want = values(y0);
    for (size_t i = 0; i < want.size(); ++i)
      for (const P& op : chain)
        want[i] = op.takes_input() ? binary_want(op, want[i], operand_at(op.input, int64_t(i)))
                                   : apply_ref(op, want[i]);
    expect_close(y, out, want, 1e-5, 1e-5);
  }

  // The gate on Gemv's rows: a product whose rows come at run time against weights packed at session start.
  Model g;
  GraphBuilder gb(g);
  gb.output(gb.op("MatMul", {gb.input("x", DType::Float, {Dim(std::string("rows")), Dim(int64_t(96))}),
                             gb.random_constant("w", {96, 700}, 0.25f)}));
  gb.finish();
  const Node& gate = *g.graph->nodes()[0];
  const Tensor& gw = g.graph->find_value("w")->constant();
  auto k = dnnl_ops::make_anchor_kernel(gate, {P::swish(), P::binary_op(P::BinaryOp::Mul, 2)});
  for (int64_t rows : {37, 600}) {
    SCOPED_TRACE(rows);
    Tensor x = random_tensor(DType::Float, {rows, 96}, 40), up = random_tensor(DType::Float, {rows, 700}, 41);
    Dims od;
    auto want = ref_matmul(as_double(x), x.dims(), as_double(gw), gw.dims(), &od);
    auto uv = as_double(up);
    for (size_t i = 0; i < want.size(); ++i) want[i] = apply_ref(P::swish(), want[i]) * uv[i];
    std::vector<Tensor> gout(1);
    const std::vector<const Tensor*> gin{&x, &gw, &up};
    runtime::KernelContext gctx(gate, gin, gout, Allocator::heap());
    k->run(gctx);
    expect_close(gout[0], od, want, 1e-4, 1e-5);
  }
}

// A static product on oneDNN: the chain up to its first SiLU/GELU is the primitive's (a bias row first), the
// rest runs as a pass after it, operands included; the result is the chain as defined, a NaN row staying NaN
// through the activation, Clip and the binary ops as the unfused ops keep it.
TEST(DnnlPostOps, ChainFromTheFirstActivationRunsAfterThePrimitive) {
  using P = dnnl_ops::PostOp;
  Model m;
  GraphBuilder b(m);
  b.output(b.op("MatMul", {b.input("a", DType::Float, {64, 96}), b.random_constant("w", {96, 200}, 0.2f)}));
  b.finish();
  const Node& mm = *m.graph->nodes()[0];
  const Tensor& wt = m.graph->find_value("w")->constant();
  Tensor x = random_tensor(DType::Float, {64, 96}, 50);
  for (int64_t k = 0; k < 96; ++k) x.data<float>()[5 * 96 + k] = std::nanf("");
  Tensor bias = random_tensor(DType::Float, {200}, 51), full = random_tensor(DType::Float, {64, 200}, 52);
  Tensor col = random_tensor(DType::Float, {64, 1}, 53), res = random_tensor(DType::Float, {64, 200}, 54);
  Dims od;
  const auto base = ref_matmul(as_double(x), x.dims(), as_double(wt), wt.dims(), &od);
  const auto bv = as_double(bias), fv = as_double(full), cv = as_double(col), rv = as_double(res);
  for (const std::vector<P>& chain :
       {std::vector<P>{P::add(2), P::swish(), P::binary_op(P::BinaryOp::Mul, 3), P::add(5)},
        std::vector<P>{P::gelu_tanh(), P::clip(-0.5f, 0.5f), P::binary_op(P::BinaryOp::Sub, 4)},
        std::vector<P>{P::add(2), P::gelu_erf(), P::relu(), P::binary_op(P::BinaryOp::Max, 3)}}) {
    SCOPED_TRACE(chain.size());
    Tensor y = run_fused(mm, {&x, &wt, &bias, &full, &col, &res}, chain);
    std::vector<double> want(base.size());
    for (size_t i = 0; i < base.size(); ++i) {
      double v = base[i];
      for (const P& op : chain) {
        if (!op.takes_input()) {
          v = apply_ref(op, v);
          continue;
        }
        const double t = op.input == 2 ? bv[i % 200] : op.input == 3 ? fv[i] : op.input == 4 ? cv[i / 200] : rv[i];
        v = binary_want(op, v, t);
      }
      want[i] = v;
    }
    expect_close(y, od, want, 1e-4, 1e-5);
  }
}

}  // namespace
}  // namespace gaf
