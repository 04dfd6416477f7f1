// Unit tests of the elementwise kernels (unary math, activations, binary/broadcast, variadic, Where, Cast):
// what the ONNX conformance data does not cover — accuracy of the vectorised fp32 math over dense sweeps,
// fp16/bf16 paths, broadcasting corner cases against a naive reference, large tensors on the parallel path,
// integer semantics, legacy (opset < 7) attributes and the errors bad input gets.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "gaf/onnx_io.h"
#include "gaf/op_registry.h"
#include "gaf/session.h"

namespace gaf {
namespace {

// ---- helpers ------------------------------------------------------------------------------------

std::string model_text(int opset, const std::string& graph) {
  return fmt::format("<ir_version: 8, opset_import: [\"\" : {}]> g {}", opset, graph);
}

std::vector<Tensor> run(const std::string& graph, const std::vector<Tensor>& inputs, int opset = 17) {
  Model m = onnx_io::parse_model_text(model_text(opset, graph));
  runtime::Session s(*m.graph);
  return s.run(inputs);
}

Tensor run1(const std::string& graph, const std::vector<Tensor>& inputs, int opset = 17) {
  return run(graph, inputs, opset).at(0);
}

// One node on inputs of unknown shape (so the graph accepts any shape), built without the ONNX checker.
Tensor run_node(const std::string& op, const std::vector<Tensor>& inputs, int opset = 17,
                std::map<std::string, Attribute> attrs = {}) {
  Graph g;
  std::vector<Value*> ins;
  for (size_t i = 0; i < inputs.size(); ++i)
    ins.push_back(g.add_input("x" + std::to_string(i), TensorType{inputs[i].dtype(), std::nullopt}));
  Node* n = g.add_node(op, ins, {"y"});
  n->opset = opset;
  n->attrs = std::move(attrs);
  g.add_output(n->output(0));
  runtime::Session s(g);
  return s.run(inputs).at(0);
}

template <class T>
Tensor make(std::vector<int64_t> dims, const std::vector<T>& v) {
  if (v.empty()) return Tensor(DTypeOf<T>::value, std::move(dims));  // Tensor::from would memcpy from null
  return Tensor::from<T>(std::move(dims), std::span<const T>(v));
}

template <class T>
std::vector<T> values(const Tensor& t) {
  const T* p = t.data<T>();
  return std::vector<T>(p, p + t.numel());
}

Tensor halves(std::vector<int64_t> dims, const std::vector<float>& v) {
  std::vector<Half> h;
  for (float f : v) h.push_back(Half{float_to_half(f)});
  return make<Half>(std::move(dims), h);
}

Tensor bf16s(std::vector<int64_t> dims, const std::vector<float>& v) {
  std::vector<BFloat16> h;
  for (float f : v) h.push_back(BFloat16{float_to_bf16(f)});
  return make<BFloat16>(std::move(dims), h);
}

std::vector<float> half_values(const Tensor& t) {
  std::vector<float> r;
  for (const Half& h : values<Half>(t)) r.push_back(half_to_float(h.bits));
  return r;
}

std::vector<float> random_floats(int64_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Distance in units in the last place of the float nearest to `ref`.
double ulp_error(float y, double ref) {
  if (std::isnan(ref)) return std::isnan(y) ? 0 : 1e9;
  float rf = float(ref);
  if (std::isinf(rf)) return y == rf ? 0 : 1e9;
  float a = std::fabs(rf);
  double u = double(std::nextafter(a, INFINITY)) - a;
  if (std::isinf(std::nextafter(a, INFINITY))) u = a - double(std::nextafter(a, 0.0f));
  return std::fabs(double(y) - ref) / u;
}

// Expects `fn` to throw gaf::Error (not UnsupportedError) with all of `parts` in its message.
template <class F>
void expect_error(F&& fn, std::vector<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown";
  } catch (const UnsupportedError& e) {
    ADD_FAILURE() << "UnsupportedError instead of Error: " << e.what();
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

// Reference numpy broadcasting: element of `in` (dims) read at output linear index i.
int64_t broadcast_index(int64_t i, const std::vector<int64_t>& out, const std::vector<int64_t>& in) {
  int64_t idx = 0, stride = 1;
  int off = int(out.size() - in.size());
  for (int d = int(out.size()) - 1; d >= 0; --d) {
    int64_t c = i % out[d];
    i /= out[d];
    if (d >= off) {
      int64_t n = in[d - off];
      idx += (n == 1 ? 0 : c) * stride;
      stride *= n;
    }
  }
  return idx;
}

// ---- fp32 math accuracy (vectorised paths) ------------------------------------------------------

// Every 512th fp32 bit pattern (8M values: both signs, subnormals, infinities, NaN): large enough to take the
// parallel path, and every value is compared with double-precision libm.
std::vector<float> float_sweep() {
  std::vector<float> v;
  for (uint64_t b = 0; b < (1ull << 32); b += 512) {
    uint32_t bits = uint32_t(b) | 0x155;  // vary the low mantissa bits too
    float f;
    std::memcpy(&f, &bits, 4);
    v.push_back(f);
  }
  for (float f : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1.0f, -1.0f, 88.72f, 88.73f, -103.9f, -104.1f, 4.0f})
    v.push_back(f);
  return v;
}

void check_accuracy(const std::string& op, double (*ref)(double), double max_ulp) {
  static const std::vector<float> xs = float_sweep();
  Tensor y = run_node(op, {make<float>({int64_t(xs.size())}, xs)});
  const float* py = y.data<float>();
  double worst = 0;
  float worst_x = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    double e = ulp_error(py[i], ref(double(xs[i])));
    if (e > worst) worst = e, worst_x = xs[i];
  }
  EXPECT_LE(worst, max_ulp) << op << " worst at x = " << worst_x;
}

TEST(elementwise_math, ExpAccuracy) {
  check_accuracy(
      "Exp", [](double x) { return std::exp(x); }, 1.5);
}
TEST(elementwise_math, LogAccuracy) {
  check_accuracy(
      "Log", [](double x) { return std::log(x); }, 1.5);
}
TEST(elementwise_math, TanhAccuracy) {
  check_accuracy(
      "Tanh", [](double x) { return std::tanh(x); }, 5);
}
// tanh never leaves [-1, 1] (its rational fit, evaluated in fp32, rises 2 ulp above 1 near 8.6) and is exactly
// +-1 from |x| = 8.9 on, infinities included; -0 stays -0, NaN stays NaN.
TEST(elementwise_math, TanhStaysWithinOne) {
  std::vector<float> xs;
  for (float x = 6.0f; x <= 10.0f; x = std::nextafter(x, 11.0f)) xs.push_back(x), xs.push_back(-x);
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {inf, -inf, 1e30f, -0.0f, std::numeric_limits<float>::quiet_NaN()}) xs.push_back(x);
  Tensor y = run_node("Tanh", {make<float>({int64_t(xs.size())}, xs)});
  const float* py = y.data<float>();
  for (size_t i = 0; i + 5 < xs.size(); ++i) {
    ASSERT_LE(std::abs(py[i]), 1.0f) << "tanh(" << xs[i] << ")";
    if (std::abs(xs[i]) >= 8.9f) {
      ASSERT_EQ(py[i], std::copysign(1.0f, xs[i])) << "tanh(" << xs[i] << ")";
    }
  }
  const size_t n = xs.size();
  EXPECT_EQ(py[n - 5], 1.0f);
  EXPECT_EQ(py[n - 4], -1.0f);
  EXPECT_EQ(py[n - 3], 1.0f);
  EXPECT_TRUE(py[n - 2] == 0.0f && std::signbit(py[n - 2]));
  EXPECT_TRUE(std::isnan(py[n - 1]));
}
TEST(elementwise_math, SigmoidAccuracy) {
  check_accuracy(
      "Sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }, 3);
}
TEST(elementwise_math, ErfAccuracy) {
  check_accuracy(
      "Erf", [](double x) { return std::erf(x); }, 3);
}
TEST(elementwise_math, EluAccuracy) {  // expm1 for x < 0
  check_accuracy(
      "Elu", [](double x) { return x < 0 ? std::expm1(x) : x; }, 2);
}
TEST(elementwise_math, SoftplusAccuracy) {  // log1p(exp(-|x|))
  check_accuracy(
      "Softplus", [](double x) { return std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x))); }, 3);
}

TEST(elementwise_math, MishMatchesDefinition) {  // opset 18: built without the ONNX 1.12 checker
  std::vector<float> x = {-20, -3, -0.5f, 0, 0.25f, 1, 4, 30, NAN};
  auto y = values<float>(run_node("Mish", {make<float>({9}, x)}, 18));
  for (size_t i = 0; i < x.size(); ++i) {
    double r = x[i] * std::tanh(std::log1p(std::exp(double(x[i]))));
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(y[i]));
    } else {
      EXPECT_LE(ulp_error(y[i], r), 4) << x[i];
    }
  }
}

TEST(elementwise_math, RoundIsHalfToEven) {
  auto y = values<float>(run_node("Round", {make<float>({7}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.4f, 2.6f})}));
  EXPECT_EQ(y, (std::vector<float>{0, 2, 2, -0.0f, -2, 2, 3}));
  EXPECT_TRUE(std::signbit(y[3]));
}

TEST(elementwise_math, SignAndSpecialValues) {
  auto y = values<float>(run_node("Sign", {make<float>({4}, {-2.f, 0.f, 3.f, NAN})}));
  EXPECT_EQ(y[0], -1);
  EXPECT_EQ(y[1], 0);
  EXPECT_EQ(y[2], 1);
  EXPECT_TRUE(std::isnan(y[3]));
  auto r = values<float>(run_node("Relu", {make<float>({3}, {-1.f, NAN, 2.f})}));
  EXPECT_EQ(r[0], 0);
  EXPECT_TRUE(std::isnan(r[1]));  // NaN propagates
  auto inf = values<bool>(run_node("IsInf", {make<float>({4}, {INFINITY, -INFINITY, 1.f, NAN})}, 17,
                                   {{"detect_positive", int64_t(0)}}));
  EXPECT_EQ(inf, (std::vector<bool>{false, true, false, false}));
}

TEST(elementwise_math, IntegerErfTruncates) {
  auto y = values<int32_t>(run_node("Erf", {make<int32_t>({5}, {-7, -1, 0, 5, 6})}));
  EXPECT_EQ(y, (std::vector<int32_t>{-1, 0, 0, 0, 1}));
}

TEST(elementwise_math, IntegerAbsNegWrap) {
  int32_t mn = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(values<int32_t>(run_node("Abs", {make<int32_t>({3}, {-5, 7, mn})})),
            (std::vector<int32_t>{5, 7, mn}));
  EXPECT_EQ(values<int8_t>(run_node("Neg", {make<int8_t>({3}, {-128, 5, 0})})),
            (std::vector<int8_t>{-128, -5, 0}));
  EXPECT_EQ(values<int64_t>(run_node("Relu", {make<int64_t>({2}, {-3, 4})})), (std::vector<int64_t>{0, 4}));
}

// ---- 16-bit floats ------------------------------------------------------------------------------

// The vectorised fp16 <-> fp32 conversions agree with gaf::half_to_float / float_to_half on every value.
TEST(elementwise_f16, CastConversionsMatchScalarReference) {
  std::vector<Half> all(65536);
  for (int i = 0; i < 65536; ++i) all[i].bits = uint16_t(i);
  Tensor f = run_node("Cast", {make<Half>({65536}, all)}, 17, {{"to", int64_t(DType::Float)}});
  auto fv = values<float>(f);
  for (int i = 0; i < 65536; ++i) {
    float r = half_to_float(uint16_t(i));
    if (std::isnan(r)) {
      EXPECT_TRUE(std::isnan(fv[i])) << i;
    } else {
      EXPECT_EQ(std::memcmp(&fv[i], &r, 4), 0) << i;
    }
  }
  // fp32 -> fp16 on a sweep that crosses every rounding boundary, subnormals and overflow.
  std::vector<float> xs;
  for (uint64_t b = 0; b < (1ull << 32); b += 4093) {
    uint32_t bits = uint32_t(b);
    float x;
    std::memcpy(&x, &bits, 4);
    xs.push_back(x);
  }
  auto hv =
      values<Half>(run_node("Cast", {make<float>({int64_t(xs.size())}, xs)}, 17, {{"to", int64_t(10)}}));
  for (size_t i = 0; i < xs.size(); ++i) {
    uint16_t r = float_to_half(xs[i]);
    if (std::isnan(xs[i])) {
      EXPECT_TRUE(std::isnan(half_to_float(hv[i].bits)));
    } else {
      EXPECT_EQ(hv[i].bits, r) << xs[i];
    }
  }
}

TEST(elementwise_f16, HalfArithmeticIsFp32RoundedOnce) {
  // [3,1,5] + [4,1]: both operands broadcast; enough elements for several blocks of the widening loop.
  auto a = random_floats(15, -4, 4, 1), b = random_floats(4, -4, 4, 2);
  Tensor ta = halves({3, 1, 5}, a), tb = halves({4, 1}, b);
  Tensor y = run_node("Add", {ta, tb});
  ASSERT_EQ(y.dtype(), DType::Float16);
  ASSERT_EQ(y.dims(), (std::vector<int64_t>{3, 4, 5}));
  auto yv = values<Half>(y);
  auto av = values<Half>(ta), bv = values<Half>(tb);
  for (int64_t i = 0; i < 60; ++i) {
    float r = half_to_float(av[broadcast_index(i, {3, 4, 5}, {3, 1, 5})].bits) +
              half_to_float(bv[broadcast_index(i, {3, 4, 5}, {4, 1})].bits);
    EXPECT_EQ(yv[i].bits, float_to_half(r)) << i;
  }
}

TEST(elementwise_f16, HalfUnaryLargeTensor) {
  const int64_t n = 300000;  // parallel path, many blocks, a tail
  auto x = random_floats(n, -8, 8, 3);
  Tensor tx = halves({n}, x);
  auto y = values<Half>(run_node("Sigmoid", {tx}));
  auto xv = values<Half>(tx);
  for (int64_t i = 0; i < n; ++i) {
    double r = 1 / (1 + std::exp(-double(half_to_float(xv[i].bits))));
    EXPECT_NEAR(half_to_float(y[i].bits), r, 1e-3 * r + 1e-7) << i;
  }
  auto nan = values<bool>(run_node("IsNaN", {halves({3}, {1.f, NAN, INFINITY})}));
  EXPECT_EQ(nan, (std::vector<bool>{false, true, false}));
}

TEST(elementwise_f16, BFloat16MulAndCastRoundToNearestEven) {
  Tensor x = bf16s({4}, {1.0f, 2.5f, -3.0f, 0.1f});
  auto y = values<BFloat16>(run_node("Mul", {x, bf16s({}, {3.0f})}));
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(y[i].bits, float_to_bf16(bf16_to_float(values<BFloat16>(x)[i].bits) * 3.0f));
  // 1 + 2^-8 is halfway between two bf16 values: ties to even (1.0); 1 + 3*2^-8 rounds up.
  auto c = values<BFloat16>(run_node("Cast", {make<float>({2}, {1.0f + 1.0f / 256, 1.0f + 3.0f / 256})}, 17,
                                     {{"to", int64_t(16)}}));
  EXPECT_EQ(bf16_to_float(c[0].bits), 1.0f);
  EXPECT_EQ(bf16_to_float(c[1].bits), 1.0f + 4.0f / 256);
}

TEST(elementwise_f16, HalfComparisonAndVariadicMean) {
  auto lt = values<bool>(run_node("Less", {halves({3}, {1, 2, 3}), halves({1}, {2})}));
  EXPECT_EQ(lt, (std::vector<bool>{true, false, false}));
  // Mean of three fp16 inputs accumulates in fp32 and rounds once.
  Tensor m = run_node("Mean", {halves({2}, {1000, 0.1f}), halves({2}, {1, 0.2f}), halves({1}, {0.5f})});
  auto mv = half_values(m);
  EXPECT_EQ(mv[0], half_to_float(float_to_half((1000 + 1 + 0.5f) / 3)));
  EXPECT_NEAR(mv[1], (0.1f + 0.2f + 0.5f) / 3, 1e-3);
}

// ---- broadcasting -------------------------------------------------------------------------------

// Random shapes of rank 0..4 with broadcast dims (and zero-size ones) against a naive reference.
TEST(elementwise_broadcast, RandomShapesMatchReference) {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 300; ++iter) {
    int rank = int(rng() % 5);
    std::vector<int64_t> out(rank), ad, bd;
    // Mostly small dims (short inner runs: the grouped-rows path), sometimes one long one (the run path).
    for (auto& d : out) d = 1 + rng() % 4;
    if (rank && rng() % 3 == 0) out[rng() % rank] = 33 + rng() % 8;
    if (rank && rng() % 20 == 0) out[rng() % rank] = 0;
    int ra = rank ? int(rng() % (rank + 1)) : 0, rb = rank ? int(rng() % (rank + 1)) : 0;
    if (rank) (rng() % 2 ? ra : rb) = rank;
    for (int i = rank - ra; i < rank; ++i) ad.push_back(rng() % 3 == 0 ? 1 : out[i]);
    for (int i = rank - rb; i < rank; ++i) bd.push_back(rng() % 3 == 0 ? 1 : out[i]);
    std::vector<int64_t> expect_out(rank);
    for (int i = 0; i < rank; ++i) {
      int64_t a = i >= rank - ra ? ad[i - (rank - ra)] : 1, b = i >= rank - rb ? bd[i - (rank - rb)] : 1;
      expect_out[i] = a == 1 ? b : a;
    }
    auto av = random_floats(numel_of(ad), -5, 5, iter), bv = random_floats(numel_of(bd), -5, 5, iter + 1000);
    Tensor y = run_node("Sub", {make<float>(ad, av), make<float>(bd, bv)});
    ASSERT_EQ(y.dims(), expect_out) << dims_to_string(ad) << " - " << dims_to_string(bd);
    auto yv = values<float>(y);
    for (int64_t i = 0; i < y.numel(); ++i)
      ASSERT_EQ(yv[i], av[broadcast_index(i, expect_out, ad)] - bv[broadcast_index(i, expect_out, bd)])
          << dims_to_string(ad) << " - " << dims_to_string(bd) << " at " << i;
    // Where with the same shapes plus a condition of its own.
    std::vector<int64_t> cd(expect_out.begin() + (rank ? rng() % (rank + 1) : 0), expect_out.end());
    for (auto& d : cd)
      if (rng() % 2) d = 1;
    std::vector<uint8_t> cv(numel_of(cd));
    for (auto& c : cv) c = rng() % 2;
    Tensor ct(DType::Bool, cd);
    for (size_t i = 0; i < cv.size(); ++i) ct.data<bool>()[i] = cv[i];
    Tensor w = run_node("Where", {ct, make<float>(ad, av), make<float>(bd, bv)});
    ASSERT_EQ(w.dims(), expect_out);
    auto wv = values<float>(w);
    for (int64_t i = 0; i < w.numel(); ++i) {
      bool c = cv[broadcast_index(i, expect_out, cd)];
      float r = c ? av[broadcast_index(i, expect_out, ad)] : bv[broadcast_index(i, expect_out, bd)];
      ASSERT_EQ(wv[i], r) << i;
    }
  }
}

// Large operands take the parallel path through each specialised row kernel: flat, scalar, row, channel.
TEST(elementwise_broadcast, LargeTensorsParallelPaths) {
  const int64_t N = 64, C = 48, HW = 1031;  // odd inner size: runs split across chunk boundaries
  auto x = random_floats(N * C * HW, -3, 3, 11);
  Tensor tx = make<float>({N, C, HW}, x);
  auto scal = values<float>(run_node("Mul", {tx, make<float>({}, {2.5f})}));
  auto row = values<float>(run_node("Add", {tx, make<float>({HW}, random_floats(HW, -1, 1, 12))}));
  auto chan_v = random_floats(C, -1, 1, 13);
  auto chan = values<float>(run_node("Div", {tx, make<float>({C, 1}, chan_v)}));
  auto flat_v = random_floats(N * C * HW, 1, 2, 14);
  auto flat = values<float>(run_node("Max", {tx, make<float>({N, C, HW}, flat_v)}));
  auto row_v = random_floats(HW, -1, 1, 12);
  for (int64_t i = 0; i < N * C * HW; i += 7) {
    ASSERT_EQ(scal[i], x[i] * 2.5f);
    ASSERT_EQ(row[i], x[i] + row_v[i % HW]);
    ASSERT_EQ(chan[i], x[i] / chan_v[(i / HW) % C]);
    ASSERT_EQ(flat[i], std::max(x[i], flat_v[i]));
  }
  // Short rows on the parallel path: a repeated row, and a per-row column.
  const int64_t R = 200003;
  auto rows = random_floats(R * 3, -3, 3, 15), r3 = random_floats(3, -1, 1, 16),
       col = random_floats(R, -1, 1, 17);
  auto rowsum = values<float>(run_node("Add", {make<float>({R, 3}, rows), make<float>({3}, r3)}));
  auto colmul = values<float>(run_node("Mul", {make<float>({R, 1}, col), make<float>({R, 3}, rows)}));
  for (int64_t i = 0; i < R * 3; ++i) {
    ASSERT_EQ(rowsum[i], rows[i] + r3[i % 3]) << i;
    ASSERT_EQ(colmul[i], col[i / 3] * rows[i]) << i;
  }
  // Scalar first operand (stride 0 on the left).
  auto rsub = values<float>(run_node("Sub", {make<float>({1}, {1.0f}), tx}));
  for (int64_t i = 0; i < N * C * HW; i += 5) ASSERT_EQ(rsub[i], 1.0f - x[i]);
}

TEST(elementwise_broadcast, EmptyAndScalarShapes) {
  Tensor y = run_node("Add", {Tensor(DType::Float, {0, 3}), make<float>({3}, {1, 2, 3})});
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{0, 3}));
  Tensor s = run_node("Mul", {make<float>({}, {3}), make<float>({}, {4})});
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(values<float>(s)[0], 12);
  Tensor e = run_node("Equal", {make<int64_t>({2, 1}, {1, 2}), make<int64_t>({1, 3}, {1, 2, 3})});
  EXPECT_EQ(values<bool>(e), (std::vector<bool>{true, false, false, false, true, false}));
}

TEST(elementwise_broadcast, IncompatibleShapesAreAnError) {
  expect_error(
      [] {
        run_node("Add", {make<float>({2, 3}, std::vector<float>(6)), make<float>({4}, {1, 2, 3, 4})});
      },
      {"node 'y' (Add)", "broadcast"});
  expect_error(
      [] {
        run_node("PRelu",
                 {make<float>({2, 3}, std::vector<float>(6)), make<float>({2, 3, 1}, std::vector<float>(6))});
      },
      {"node 'y' (PRelu)", "slope"});
  expect_error(
      [] {
        run_node("Add", {make<float>({2}, {1, 2}), make<double>({2}, {1, 2})});
      },
      {"node 'y' (Add)", "float", "double"});
}

// ---- legacy attributes --------------------------------------------------------------------------

TEST(elementwise_legacy, Opset6BroadcastAxis) {
  // B [3] aligned at axis 1 of A [2,3,2]: B varies along dimension 1, not the last one.
  Tensor y =
      run1("(float[2,3,2] a, float[3] b) => (float[2,3,2] c) { c = Add<broadcast = 1, axis = 1>(a, b) }",
           {make<float>({2, 3, 2}, std::vector<float>(12, 0.0f)), make<float>({3}, {1, 2, 3})}, 6);
  EXPECT_EQ(values<float>(y), (std::vector<float>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  // Without broadcast=1 the shapes must be equal.
  expect_error(
      [] {
        run_node("Mul", {make<float>({2, 3}, std::vector<float>(6)), make<float>({3}, {1, 2, 3})}, 6);
      },
      {"node 'y' (Mul)", "broadcast=1"});
}

TEST(elementwise_legacy, Opset6PReluChannelSlope) {
  std::vector<float> x = {-1, -1, -1, -1, -1, -1, 2, 2, -1, -1, 2, 2};
  Tensor y = run_node("PRelu", {make<float>({1, 3, 4}, x), make<float>({3}, {0.5f, 1, 2})}, 6);
  EXPECT_EQ(values<float>(y), (std::vector<float>{-0.5f, -0.5f, -0.5f, -0.5f, -1, -1, 2, 2, -2, -2, 2, 2}));
}

TEST(elementwise_legacy, ClipAttributesBeforeOpset11) {
  Tensor y = run_node("Clip", {make<float>({4}, {-3, 0.2f, 3, NAN})}, 6, {{"min", -1.0f}, {"max", 1.0f}});
  auto v = values<float>(y);
  EXPECT_EQ(v[0], -1);
  EXPECT_EQ(v[1], 0.2f);
  EXPECT_EQ(v[2], 1);
  EXPECT_TRUE(std::isnan(v[3]));
}

// ---- integer semantics --------------------------------------------------------------------------

TEST(elementwise_int, DivModSemantics) {
  auto a = make<int32_t>({6}, {7, -7, 7, -7, std::numeric_limits<int32_t>::min(), 5});
  auto b = make<int32_t>({6}, {2, 2, -2, -2, -1, 7});
  EXPECT_EQ(values<int32_t>(run_node("Div", {a, b})),
            (std::vector<int32_t>{3, -3, -3, 3, std::numeric_limits<int32_t>::min(), 0}));
  EXPECT_EQ(values<int32_t>(run_node("Mod", {a, b})), (std::vector<int32_t>{1, 1, -1, -1, 0, 5}));
  EXPECT_EQ(values<int32_t>(run_node("Mod", {a, b}, 17, {{"fmod", int64_t(1)}})),
            (std::vector<int32_t>{1, -1, 1, -1, 0, 5}));
  auto f = values<float>(
      run_node("Mod", {make<float>({2}, {-7.5f, 7.5f}), make<float>({1}, {2})}, 17, {{"fmod", int64_t(1)}}));
  EXPECT_EQ(f, (std::vector<float>{-1.5f, 1.5f}));
}

TEST(elementwise_int, DivisionByZeroIsAnError) {
  const int64_t n = 100000;  // raised inside the parallel loop, reported after it
  std::vector<int64_t> b(n, 3);
  b[n - 10] = 0;
  expect_error(
      [&] {
        run_node("Div", {make<int64_t>({n}, std::vector<int64_t>(n, 1)), make<int64_t>({n}, b)});
      },
      {"node 'y' (Div)", "division by zero"});
  expect_error(
      [] {
        run_node("Mod", {make<uint8_t>({2}, {1, 2}), make<uint8_t>({1}, {0})});
      },
      {"node 'y' (Mod)", "modulo by zero"});
  expect_error([] { run_node("Mod", {make<float>({2}, {1, 2}), make<float>({1}, {3})}); }, {"fmod=1"});
}

TEST(elementwise_int, OverflowWrapsAndShifts) {
  auto big = make<int32_t>({2}, {std::numeric_limits<int32_t>::max(), 65536});
  EXPECT_EQ(values<int32_t>(run_node("Add", {big, make<int32_t>({}, {1})}))[0],
            std::numeric_limits<int32_t>::min());
  EXPECT_EQ(values<int32_t>(run_node("Mul", {big, big}))[1], 0);
  EXPECT_EQ(
      values<uint16_t>(run_node("Mul", {make<uint16_t>({1}, {65535}), make<uint16_t>({1}, {65535})}))[0], 1);
  auto sh = values<uint8_t>(run_node("BitShift",
                                     {make<uint8_t>({4}, {1, 1, 255, 16}), make<uint8_t>({4}, {3, 8, 1, 2})},
                                     17, {{"direction", std::string("LEFT")}}));
  EXPECT_EQ(sh, (std::vector<uint8_t>{8, 0, 254, 64}));
  auto rs = values<uint64_t>(run_node("BitShift",
                                      {make<uint64_t>({2}, {1ull << 63, 5}), make<uint64_t>({2}, {63, 64})},
                                      17, {{"direction", std::string("RIGHT")}}));
  EXPECT_EQ(rs, (std::vector<uint64_t>{1, 0}));
  expect_error(
      [] {
        run_node("BitShift", {make<uint8_t>({1}, {1}), make<uint8_t>({1}, {1})}, 17,
                 {{"direction", std::string("left")}});
      },
      {"direction"});
}

TEST(elementwise_int, PowTypes) {
  // Exact int64 powers (beyond 2^53), negative exponents, mixed base/exponent types.
  auto p = values<int64_t>(
      run_node("Pow", {make<int64_t>({4}, {3, 2, -1, 1}), make<int64_t>({4}, {39, -1, -3, -5})}));
  EXPECT_EQ(p, (std::vector<int64_t>{4052555153018976267LL, 0, -1, 1}));
  auto q = values<int32_t>(run_node("Pow", {make<int32_t>({2}, {2, 9}), make<float>({2}, {3.0f, 0.5f})}));
  EXPECT_EQ(q, (std::vector<int32_t>{8, 3}));
  auto r = values<float>(run_node("Pow", {make<float>({2}, {2, 4}), make<uint8_t>({1}, {3})}));
  EXPECT_EQ(r, (std::vector<float>{8, 64}));
  expect_error(
      [] {
        run_node("Pow", {make<int32_t>({1}, {0}), make<int32_t>({1}, {-2})});
      },
      {"negative power"});
}

TEST(elementwise_int, PowScalarExponentFastPaths) {
  std::vector<float> x = {-0.0f, -INFINITY, 4.0f, NAN, -2.0f, 0.5f};
  Tensor tx = make<float>({6}, x);
  for (float e : {0.0f, 1.0f, 2.0f, 3.0f, 0.5f, -1.0f, 1.5f}) {
    auto y = values<float>(run_node("Pow", {tx, make<float>({}, {e})}));
    for (size_t i = 0; i < x.size(); ++i) {
      float r = std::pow(x[i], e);
      if (std::isnan(r)) {
        EXPECT_TRUE(std::isnan(y[i])) << x[i] << "^" << e;
      } else if (r == 0 || std::isinf(r)) {
        EXPECT_EQ(y[i], r) << x[i] << "^" << e;
      } else {
        EXPECT_LE(ulp_error(y[i], std::pow(double(x[i]), double(e))), 1.0) << x[i] << "^" << e;
      }
      if (r == 0) {
        EXPECT_EQ(std::signbit(y[i]), std::signbit(r)) << x[i] << "^" << e;
      }
    }
  }
}

// ---- Clip, Where, variadic ----------------------------------------------------------------------

TEST(elementwise_misc, ClipInputs) {
  auto y = values<int8_t>(run1("(int8[4] x, int8 hi) => (int8[4] y) { y = Clip(x, , hi) }",
                               {make<int8_t>({4}, {-128, 0, 5, 127}), make<int8_t>({}, {3})}));
  EXPECT_EQ(y, (std::vector<int8_t>{-128, 0, 3, 3}));
  // min > max gives max everywhere (numpy).
  auto z = values<float>(
      run_node("Clip", {make<float>({2}, {0, 10}), make<float>({}, {5}), make<float>({}, {1})}));
  EXPECT_EQ(z, (std::vector<float>{1, 1}));
  expect_error(
      [] {
        run_node("Clip", {make<float>({2}, {0, 10}), make<float>({2}, {1, 2})});
      },
      {"node 'y' (Clip)", "scalar"});
}

TEST(elementwise_misc, WhereStringsAndBool) {
  Tensor x(DType::String, {2}), y(DType::String, {1});
  x.strings()[0] = "a";
  x.strings()[1] = "b";
  y.strings()[0] = "z";
  Tensor c(DType::Bool, {2});
  c.data<bool>()[0] = true;
  c.data<bool>()[1] = false;
  Tensor w = run_node("Where", {c, x, y});
  EXPECT_EQ(w.strings()[0], "a");
  EXPECT_EQ(w.strings()[1], "z");
  expect_error([&] { run_node("Where", {make<float>({2}, {1, 0}), x, y}); }, {"condition must be bool"});
}

TEST(elementwise_misc, VariadicOps) {
  Tensor a = make<float>({2, 1}, {1, NAN}), b = make<float>({3}, {0, 5, 2}), c = make<float>({}, {1.5f});
  auto mx = values<float>(run_node("Max", {a, b, c}));
  ASSERT_EQ(mx.size(), 6u);
  EXPECT_EQ(mx[0], 1.5f);
  EXPECT_EQ(mx[1], 5);
  EXPECT_EQ(mx[2], 2);
  for (int i = 3; i < 6; ++i) EXPECT_TRUE(std::isnan(mx[i]));  // NaN propagates
  auto mn = values<int32_t>(run_node("Min", {make<int32_t>({3}, {4, -2, 9}), make<int32_t>({3}, {1, 3, 9})}));
  EXPECT_EQ(mn, (std::vector<int32_t>{1, -2, 9}));
  auto sum = values<double>(
      run_node("Sum", {make<double>({2}, {1, 2}), make<double>({2}, {3, 4}), make<double>({1}, {10})}));
  EXPECT_EQ(sum, (std::vector<double>{14, 16}));
  Tensor one = make<float>({3}, {1, 2, 3});
  Tensor same = run_node("Mean", {one});
  EXPECT_EQ(values<float>(same), (std::vector<float>{1, 2, 3}));
}

// ---- Cast ---------------------------------------------------------------------------------------

TEST(elementwise_cast, FloatToIntSaturatesAndNaNIsZero) {
  auto y = values<int32_t>(run_node("Cast", {make<float>({6}, {1.9f, -1.9f, 3e10f, -3e10f, NAN, -0.0f})}, 17,
                                    {{"to", int64_t(DType::Int32)}}));
  EXPECT_EQ(y, (std::vector<int32_t>{1, -1, std::numeric_limits<int32_t>::max(),
                                     std::numeric_limits<int32_t>::min(), 0, 0}));
  auto u = values<uint8_t>(
      run_node("Cast", {make<double>({3}, {-5, 300, 7.5})}, 17, {{"to", int64_t(DType::UInt8)}}));
  EXPECT_EQ(u, (std::vector<uint8_t>{0, 255, 7}));
  auto w =
      values<int8_t>(run_node("Cast", {make<int32_t>({2}, {200, -129})}, 17, {{"to", int64_t(DType::Int8)}}));
  EXPECT_EQ(w, (std::vector<int8_t>{-56, 127}));  // integers wrap
  auto b = values<bool>(
      run_node("Cast", {make<float>({3}, {0, -0.0f, 0.1f})}, 17, {{"to", int64_t(DType::Bool)}}));
  EXPECT_EQ(b, (std::vector<bool>{false, false, true}));
}

TEST(elementwise_cast, Strings) {
  Tensor s = run_node("Cast", {make<float>({6}, {1.0f, 0.1f, 1e-5f, NAN, -INFINITY, 123.25f})}, 17,
                      {{"to", int64_t(DType::String)}});
  std::vector<std::string> sv(s.strings(), s.strings() + 6);
  EXPECT_EQ(sv, (std::vector<std::string>{"1.0", "0.1", "1e-05", "nan", "-inf", "123.25"}));
  Tensor i8 = run_node("Cast", {make<int8_t>({2}, {-5, 100})}, 17, {{"to", int64_t(DType::String)}});
  EXPECT_EQ(i8.strings()[0], "-5");
  EXPECT_EQ(i8.strings()[1], "100");
  Tensor u8 = run_node("Cast", {make<uint8_t>({1}, {200})}, 17, {{"to", int64_t(DType::String)}});
  EXPECT_EQ(u8.strings()[0], "200");
  Tensor h = run_node("Cast", {halves({2}, {0.1f, 2.0f})}, 17, {{"to", int64_t(DType::String)}});
  EXPECT_EQ(h.strings()[0], "0.1");
  EXPECT_EQ(h.strings()[1], "2.0");

  Tensor in(DType::String, {5});
  for (int i = 0; i < 5; ++i)
    in.strings()[i] = std::vector<std::string>{"9007199254740993", " +12 ", "-3", "1e3", "7"}[i];
  auto iv = values<int64_t>(run_node("Cast", {in}, 17, {{"to", int64_t(DType::Int64)}}));
  EXPECT_EQ(iv, (std::vector<int64_t>{9007199254740993LL, 12, -3, 1000, 7}));
  Tensor bs(DType::String, {3});
  bs.strings()[0] = "True";
  bs.strings()[1] = "false";
  bs.strings()[2] = "0";
  EXPECT_EQ(values<bool>(run_node("Cast", {bs}, 17, {{"to", int64_t(DType::Bool)}})),
            (std::vector<bool>{true, false, false}));
  Tensor fs(DType::String, {3});
  fs.strings()[0] = "-INF";
  fs.strings()[1] = "nan";
  fs.strings()[2] = "2.5e-1";
  auto hv = half_values(run_node("Cast", {fs}, 17, {{"to", int64_t(DType::Float16)}}));
  EXPECT_EQ(hv[0], -INFINITY);
  EXPECT_TRUE(std::isnan(hv[1]));
  EXPECT_EQ(hv[2], 0.25f);
  Tensor bad(DType::String, {1});
  bad.strings()[0] = "12abc";
  expect_error(
      [&] {
        run_node("Cast", {bad}, 17, {{"to", int64_t(DType::Float)}});
      },
      {"node 'y' (Cast)", "12abc", "float"});
}

TEST(elementwise_cast, FromBool) {
  Tensor b(DType::Bool, {3});
  b.data<bool>()[0] = true;
  b.data<bool>()[1] = false;
  b.data<bool>()[2] = true;
  EXPECT_EQ(values<float>(run_node("Cast", {b}, 17, {{"to", int64_t(DType::Float)}})),
            (std::vector<float>{1, 0, 1}));
  EXPECT_EQ(half_values(run_node("Cast", {b}, 17, {{"to", int64_t(DType::Float16)}})),
            (std::vector<float>{1, 0, 1}));
  EXPECT_EQ(values<int64_t>(run_node("Cast", {b}, 17, {{"to", int64_t(DType::Int64)}})),
            (std::vector<int64_t>{1, 0, 1}));
  Tensor s = run_node("Cast", {b}, 17, {{"to", int64_t(DType::String)}});
  EXPECT_EQ(s.strings()[0], "True");
  EXPECT_EQ(s.strings()[1], "False");
}

TEST(elementwise_cast, Opset1StringTarget) {
  auto y =
      values<int32_t>(run_node("Cast", {make<float>({2}, {2.7f, -1.5f})}, 1, {{"to", std::string("INT32")}}));
  EXPECT_EQ(y, (std::vector<int32_t>{2, -1}));
  EXPECT_THROW(run_node("Cast", {make<float>({1}, {1})}, 1, {{"to", std::string("COMPLEX64")}}),
               UnsupportedError);
}

TEST(elementwise_cast, CastLikeAndIdentity) {
  Tensor x = make<int64_t>({3}, {1, 2, 3});
  Tensor y = run_node("CastLike", {x, make<double>({1}, {0})}, 15);
  EXPECT_EQ(values<double>(y), (std::vector<double>{1, 2, 3}));
  Tensor same = run_node("Cast", {x}, 17, {{"to", int64_t(DType::Int64)}});
  EXPECT_EQ(same.raw(), x.raw());  // no conversion: the input's storage is shared
}

// ---- errors, classification ---------------------------------------------------------------------

TEST(elementwise_errors, UnsupportedDtypeNamesNodeAndTypes) {
  try {
    run_node("Log", {make<int32_t>({1}, {1})});
    ADD_FAILURE() << "no error";
  } catch (const UnsupportedError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("node 'y' (Log)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("int32"), std::string::npos) << msg;
    EXPECT_NE(msg.find("float16"), std::string::npos) << msg;
  }
  EXPECT_THROW(run_node("Cast", {make<float>({1}, {1})}, 17, {{"to", int64_t(14)}}), UnsupportedError);
  EXPECT_THROW(run_node("Not", {make<float>({1}, {1})}), UnsupportedError);
}

TEST(elementwise_registry, KindsAndFlags) {
  auto& reg = OpRegistry::instance();
  auto kind = [&](const char* op) { return reg.find(op)->kind; };
  auto sensitive = [&](const char* op) { return (reg.find(op)->flags & kPrecisionSensitive) != 0; };
  for (const char* op :
       {"Relu", "Exp", "Erf", "Sigmoid", "Clip", "Cast", "CastLike", "Not", "IsNaN", "Shrink"})
    EXPECT_EQ(kind(op), OpKind::Elementwise) << op;
  for (const char* op : {"Add", "Div", "Pow", "Mod", "Equal", "And", "Where", "Max", "Sum", "Mean", "PRelu"})
    EXPECT_EQ(kind(op), OpKind::Broadcast) << op;
  for (const char* op : {"Exp", "Log", "Pow", "Erf", "Tanh", "Sigmoid", "Softplus", "Mish", "Sum", "Mean"})
    EXPECT_TRUE(sensitive(op)) << op;
  for (const char* op : {"Add", "Relu", "Cast", "Where"}) EXPECT_FALSE(sensitive(op)) << op;
  EXPECT_GT(reg.find("Erf")->flops_per_element, reg.find("Add")->flops_per_element);
}

}  // namespace
}  // namespace gaf
