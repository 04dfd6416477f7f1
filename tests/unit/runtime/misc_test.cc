// Unit tests of the misc kernel family: what the ONNX conformance data does not cover (16-bit floats, integer
// paths, broadcasting and diagonal corner cases, large tensors on the parallel paths, error messages).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numbers>
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
std::vector<Tensor> run17(const std::string& graph, const std::vector<Tensor>& inputs) {
  return run(model(17, graph), inputs);
}

// Runs and returns the message of the gaf::Error thrown (fails when nothing is thrown).
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

template <class T>
Tensor make(std::vector<int64_t> dims, const std::vector<T>& v) {
  return Tensor::from<T>(std::move(dims), std::span<const T>(v));
}
Tensor f32(std::vector<int64_t> dims, const std::vector<float>& v) { return make<float>(std::move(dims), v); }
Tensor i64(std::vector<int64_t> dims, const std::vector<int64_t>& v) {
  return make<int64_t>(std::move(dims), v);
}

template <class T>
std::vector<T> values(const Tensor& t) {
  const T* p = t.data<T>();
  return std::vector<T>(p, p + t.numel());
}
std::vector<double> as_double(const Tensor& t) {
  std::vector<double> r(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) r[i] = t.get_double(i);
  return r;
}

// Deterministic pseudo-random values: multiples of 1/8 in [-2, 2], so fp32 sums stay exact for small sizes.
std::vector<float> pattern(int64_t n, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t s = seed * 2654435761u + 12345u;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = float(int((s >> 16) % 33) - 16) / 8.f;
  }
  return v;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double rtol = 1e-5,
                  double atol = 1e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], atol + rtol * std::abs(want[i])) << "at element " << i;
}

// ---------------------------------------------------------------------------------------------------------------
// Constant, ConstantOfShape, Shape, Size, Range, EyeLike, Identity, Dropout

TEST(misc_Constant, AttributeKinds) {
  auto outs = run17(R"(g (float[1] x) => (float[3] a, int64[2] b, int64 c, float d, float[1] y) {
      a = Constant<value_floats = [1.0, 2.5, -3.0]>()
      b = Constant<value_ints = [7, -9]>()
      c = Constant<value_int = 42>()
      d = Constant<value_float = 0.25>()
      y = Identity(x) })",
                    {f32({1}, {5})});
  EXPECT_EQ(values<float>(outs[0]), (std::vector<float>{1.0f, 2.5f, -3.0f}));
  EXPECT_EQ(values<int64_t>(outs[1]), (std::vector<int64_t>{7, -9}));
  EXPECT_EQ(outs[2].rank(), 0);
  EXPECT_EQ(values<int64_t>(outs[2]), std::vector<int64_t>{42});
  EXPECT_EQ(values<float>(outs[3]), std::vector<float>{0.25f});
  EXPECT_EQ(values<float>(outs[4]), std::vector<float>{5.f});
}

TEST(misc_Constant, TensorValueIsSharedAcrossRuns) {
  Model m = onnx_io::parse_model_text(
      model(17, R"(g () => (float[2] c) { c = Constant<value = float[2] {1.5, -2.0}>() })"));
  runtime::Session s(*m.graph);
  auto a = s.run(std::vector<Tensor>{});
  auto b = s.run(std::vector<Tensor>{});
  EXPECT_EQ(values<float>(a[0]), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(a[0].raw(), b[0].raw());  // zero-copy: the same storage every run
}

TEST(misc_ConstantOfShape, TypedValueLargeAndEmpty) {
  auto outs =
      run17(R"(g (int64[2] s) => (int32[300,500] y) { y = ConstantOfShape<value = int32[1] {7}>(s) })",
            {i64({2}, {300, 500})});
  ASSERT_EQ(outs[0].dims(), (std::vector<int64_t>{300, 500}));
  for (int32_t v : values<int32_t>(outs[0])) ASSERT_EQ(v, 7);
  outs = run17(R"(g (int64[3] s) => (float[2,0,3] y) { y = ConstantOfShape(s) })", {i64({3}, {2, 0, 3})});
  EXPECT_EQ(outs[0].numel(), 0);
  EXPECT_EQ(outs[0].dtype(), DType::Float);
  outs = run17(R"(g (int64[0] s) => (float y) { y = ConstantOfShape(s) })", {Tensor(DType::Int64, {0})});
  EXPECT_EQ(outs[0].rank(), 0);
  EXPECT_EQ(values<float>(outs[0]), std::vector<float>{0.f});
  std::string msg = error_of(model(17, R"(g (int64[2] s) => (float[2,3] y) { y = ConstantOfShape(s) })"),
                             {i64({2}, {2, -3})});
  EXPECT_NE(msg.find("negative dimension"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ConstantOfShape"), std::string::npos) << msg;
}

TEST(misc_Shape, StartEndClampAndSize) {
  const char* g = R"(g (float[2,3,4,5] x) => (int64[2] a, int64[0] b, int64[4] c, int64 n) {
      a = Shape<start = -3, end = -1>(x)
      b = Shape<start = 3, end = 1>(x)
      c = Shape<start = -10, end = 10>(x)
      n = Size(x) })";
  auto outs = run(model(15, g), {Tensor(DType::Float, {2, 3, 4, 5})});
  EXPECT_EQ(values<int64_t>(outs[0]), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(outs[1].numel(), 0);
  EXPECT_EQ(values<int64_t>(outs[2]), (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(values<int64_t>(outs[3]), std::vector<int64_t>{120});
}

TEST(misc_Range, TypesCountsAndErrors) {
  const char* gi = R"(g (int64 s, int64 l, int64 d) => (int64[N] y) { y = Range(s, l, d) })";
  auto outs =
      run17(gi, {Tensor::scalar<int64_t>(10), Tensor::scalar<int64_t>(-3), Tensor::scalar<int64_t>(-4)});
  EXPECT_EQ(values<int64_t>(outs[0]), (std::vector<int64_t>{10, 6, 2, -2}));
  outs = run17(gi, {Tensor::scalar<int64_t>(0), Tensor::scalar<int64_t>(5), Tensor::scalar<int64_t>(-1)});
  EXPECT_EQ(outs[0].numel(), 0);
  const char* gd = R"(g (double s, double l, double d) => (double[N] y) { y = Range(s, l, d) })";
  outs = run17(gd, {Tensor::scalar<double>(0.5), Tensor::scalar<double>(2.0), Tensor::scalar<double>(0.5)});
  EXPECT_EQ(values<double>(outs[0]), (std::vector<double>{0.5, 1.0, 1.5}));
  // Large: parallel fill, values start + i * delta.
  const char* gf = R"(g (float s, float l, float d) => (float[N] y) { y = Range(s, l, d) })";
  outs =
      run17(gf, {Tensor::scalar<float>(-1.f), Tensor::scalar<float>(99999.f), Tensor::scalar<float>(0.5f)});
  ASSERT_EQ(outs[0].numel(), 200000);
  EXPECT_EQ(outs[0].data<float>()[123457], -1.f + 123457 * 0.5f);
  std::string msg = error_of(
      model(17, gi), {Tensor::scalar<int64_t>(0), Tensor::scalar<int64_t>(5), Tensor::scalar<int64_t>(0)});
  EXPECT_NE(msg.find("delta must not be zero"), std::string::npos) << msg;
}

TEST(misc_EyeLike, OffsetsAndDtype) {
  auto outs = run17(R"(g (float[3,4] x) => (int32[3,4] a, float[3,4] b) {
      a = EyeLike<k = 1, dtype = 6>(x)
      b = EyeLike<k = -2>(x) })",
                    {Tensor(DType::Float, {3, 4})});
  EXPECT_EQ(values<int32_t>(outs[0]), (std::vector<int32_t>{0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}));
  EXPECT_EQ(values<float>(outs[1]), (std::vector<float>{0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0}));
  outs =
      run17(R"(g (bool[2,2] x) => (bool[2,2] y) { y = EyeLike<k = 5>(x) })", {Tensor(DType::Bool, {2, 2})});
  for (bool v : values<bool>(outs[0])) EXPECT_FALSE(v);
}

TEST(misc_Dropout, InferenceMaskTypesByOpset) {
  Tensor x = f32({2, 3}, pattern(6, 1));
  auto outs = run(model(13, R"(g (float[2,3] x) => (float[2,3] y, bool[2,3] m) {
      r = Constant<value_float = 0.3>()
      t = Constant<value = bool {0}>()
      y, m = Dropout(x, r, t) })"),
                  {x});
  EXPECT_EQ(values<float>(outs[0]), values<float>(x));
  EXPECT_EQ(outs[0].raw(), x.raw());  // zero-copy
  for (bool b : values<bool>(outs[1])) EXPECT_TRUE(b);
  // Dropout-7..9: the mask has the data's type.
  outs =
      run(model(9, R"(g (float[2,3] x) => (float[2,3] y, float[2,3] m) { y, m = Dropout<ratio = 0.2>(x) })"),
          {x});
  for (float v : values<float>(outs[1])) EXPECT_EQ(v, 1.f);
  // Training mode with a non-zero ratio is random: unsupported, not silently wrong.
  std::string msg = error_of<UnsupportedError>(model(13, R"(g (float[2,3] x) => (float[2,3] y) {
          t = Constant<value = bool {1}>()
          y = Dropout(x, , t) })"),
                                               {x});
  EXPECT_NE(msg.find("training-mode"), std::string::npos) << msg;
  // Dropout-6 is in training mode unless is_test is set.
  msg = error_of<UnsupportedError>(model(6, R"(g (float[2,3] x) => (float[2,3] y) { y = Dropout(x) })"), {x});
  EXPECT_NE(msg.find("training-mode"), std::string::npos) << msg;
  outs = run(model(6, R"(g (float[2,3] x) => (float[2,3] y) { y = Dropout<is_test = 1>(x) })"), {x});
  EXPECT_EQ(values<float>(outs[0]), values<float>(x));
}

// ---------------------------------------------------------------------------------------------------------------
// Det, window functions

TEST(misc_Det, ValuesBatchesAndHalf) {
  // [[2,0,1],[1,3,2],[1,1,1]] -> det = 2*(3-2) - 0 + 1*(1-3) = 0; [[4,3],[6,3]] etc. in a batch.
  auto outs = run17(R"(g (float[2,3,3] x) => (float[2] y) { y = Det(x) })",
                    {f32({2, 3, 3}, {2, 0, 1, 1, 3, 2, 1, 1, 1, /**/ 0, 2, 0, 3, 0, 0, 0, 0, 5})});
  expect_close(as_double(outs[0]), {0.0, -30.0});
  // Many small matrices (parallel path) in fp16: det of [[a, b], [c, d]] = ad - bc.
  const int64_t n = 20000;
  auto v = pattern(n * 4, 7);
  std::vector<Half> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = Half{float_to_half(v[i])};
  outs =
      run17(R"(g (float16[20000,2,2] x) => (float16[20000] y) { y = Det(x) })", {make<Half>({n, 2, 2}, h)});
  ASSERT_EQ(outs[0].dtype(), DType::Float16);
  for (int64_t i = 0; i < n; ++i) {
    const float* m = &v[size_t(i * 4)];
    ASSERT_FLOAT_EQ(half_to_float(outs[0].data<Half>()[i].bits), m[0] * m[3] - m[1] * m[2]) << i;
  }
  std::string msg =
      error_of(model(17, R"(g (float[2,3] x) => (float y) { y = Det(x) })"), {Tensor(DType::Float, {2, 3})});
  EXPECT_NE(msg.find("square"), std::string::npos) << msg;
}

TEST(misc_Window, FormulasPeriodicSymmetricAndTypes) {
  auto outs = run17(R"(g (int64 n) => (float[N] a, double[N] b, float[N] c) {
      a = HannWindow(n)
      b = HammingWindow<periodic = 0, output_datatype = 11>(n)
      c = BlackmanWindow(n) })",
                    {Tensor::scalar<int64_t>(10)});
  const double pi = std::numbers::pi;
  std::vector<double> hann, hamming, blackman;
  for (int i = 0; i < 10; ++i) {
    hann.push_back(0.5 - 0.5 * std::cos(2 * pi * i / 10));
    hamming.push_back(25.0 / 46 - 21.0 / 46 * std::cos(2 * pi * i / 9));
    blackman.push_back(0.42 - 0.5 * std::cos(2 * pi * i / 10) + 0.08 * std::cos(4 * pi * i / 10));
  }
  expect_close(as_double(outs[0]), hann, 1e-6, 1e-7);
  ASSERT_EQ(outs[1].dtype(), DType::Double);
  expect_close(as_double(outs[1]), hamming, 1e-12, 1e-14);
  expect_close(as_double(outs[2]), blackman, 1e-6, 1e-7);
  outs = run17(R"(g (int32 n) => (float[N] a) { a = HannWindow<periodic = 0>(n) })",
               {Tensor::scalar<int32_t>(1)});
  EXPECT_EQ(values<float>(outs[0]), std::vector<float>{1.f});
  std::string msg = error_of(model(17, R"(g (int64 n) => (float[N] a) { a = HannWindow(n) })"),
                             {Tensor::scalar<int64_t>(-2)});
  EXPECT_NE(msg.find("negative"), std::string::npos) << msg;
}

// ---------------------------------------------------------------------------------------------------------------
// QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear

TEST(misc_Quantize, RoundHalfEvenAndSaturation) {
  auto outs = run17(R"(g (float[8] x, float s, uint8 z) => (uint8[8] y) { y = QuantizeLinear(x, s, z) })",
                    {f32({8}, {2.5f, 3.5f, -2.5f, 1000.f, -1000.f, 0.f, 254.4f, -0.5f}),
                     Tensor::scalar<float>(1.f), Tensor::scalar<uint8_t>(10)});
  EXPECT_EQ(values<uint8_t>(outs[0]), (std::vector<uint8_t>{12, 14, 8, 255, 0, 10, 255, 10}));
  outs = run17(
      R"(g (float[5] x, float s, int8 z) => (int8[5] y) { y = QuantizeLinear(x, s, z) })",
      {f32({5}, {1.f, -1.f, 300.f, -300.f, 0.75f}), Tensor::scalar<float>(0.5f), Tensor::scalar<int8_t>(-3)});
  EXPECT_EQ(values<int8_t>(outs[0]), (std::vector<int8_t>{-1, -5, 127, -128, -1}));
}

TEST(misc_Quantize, PerAxisHalfInputAndLarge) {
  // [2,3,2] per-axis on axis 1 (the default), fp16 input.
  std::vector<float> xv = {1, 2, 3, 4, 5, 6, -1, -2, -3, -4, -5, -6};
  std::vector<Half> xh;
  for (float f : xv) xh.push_back(Half{float_to_half(f)});
  auto outs = run17(
      R"(g (float16[2,3,2] x, float[3] s, int8[3] z) => (int8[2,3,2] y) { y = QuantizeLinear(x, s, z) })",
      {make<Half>({2, 3, 2}, xh), f32({3}, {1.f, 2.f, 4.f}), make<int8_t>({3}, {0, 1, -1})});
  EXPECT_EQ(values<int8_t>(outs[0]), (std::vector<int8_t>{1, 2, 3, 3, 0, 1, -1, -2, -1, -1, -2, -3}));
  // Dequantize back per axis (axis 1 of [2,3,2]).
  outs = run17(
      R"(g (int8[2,3,2] q, float[3] s, int8[3] z) => (float[2,3,2] y) { y = DequantizeLinear(q, s, z) })",
      {outs[0], f32({3}, {1.f, 2.f, 4.f}), make<int8_t>({3}, {0, 1, -1})});
  EXPECT_EQ(values<float>(outs[0]), (std::vector<float>{1, 2, 4, 4, 4, 8, -1, -2, -4, -4, -4, -8}));
  // Large per-axis tensor on axis 0 (parallel path crossing channel boundaries inside chunks).
  const int64_t C = 7, I = 50001;
  auto big = pattern(C * I, 3);
  std::vector<float> scales = {0.5f, 0.25f, 1.f, 2.f, 0.125f, 4.f, 1.5f};
  std::vector<uint8_t> zps = {0, 10, 128, 255, 3, 100, 50};
  outs = run17(
      R"(g (float[7,50001] x, float[7] s, uint8[7] z) => (uint8[7,50001] y) { y = QuantizeLinear<axis = 0>(x, s, z) })",
      {f32({C, I}, big), f32({C}, scales), make<uint8_t>({C}, zps)});
  const uint8_t* q = outs[0].data<uint8_t>();
  for (int64_t c = 0; c < C; ++c)
    for (int64_t i = 0; i < I; ++i) {
      float v = std::nearbyint(big[size_t(c * I + i)] / scales[c]) + zps[c];
      ASSERT_EQ(q[c * I + i], uint8_t(std::clamp(v, 0.f, 255.f))) << c << "," << i;
    }
  std::string msg =
      error_of(model(17, R"(g (float[2,3] x, float[2] s) => (uint8[2,3] y) { y = QuantizeLinear(x, s) })"),
               {Tensor(DType::Float, {2, 3}), f32({2}, {1.f, 1.f})});
  EXPECT_NE(msg.find("axis 1"), std::string::npos) << msg;
}

TEST(misc_Dequantize, Int32AndPerTensor) {
  auto outs = run17(R"(g (int32[3] x, float s) => (float[3] y) { y = DequantizeLinear(x, s) })",
                    {make<int32_t>({3}, {-1000000, 0, 7}), Tensor::scalar<float>(0.5f)});
  EXPECT_EQ(values<float>(outs[0]), (std::vector<float>{-500000.f, 0.f, 3.5f}));
  outs = run17(R"(g (uint8[3] x, float s, uint8 z) => (float[3] y) { y = DequantizeLinear(x, s, z) })",
               {make<uint8_t>({3}, {0, 128, 255}), Tensor::scalar<float>(2.f), Tensor::scalar<uint8_t>(128)});
  EXPECT_EQ(values<float>(outs[0]), (std::vector<float>{-256.f, 0.f, 254.f}));
}

TEST(misc_DynamicQuantize, ZerosAndLarge) {
  auto outs =
      run17(R"(g (float[4] x) => (uint8[4] y, float s, uint8 z) { y, s, z = DynamicQuantizeLinear(x) })",
            {f32({4}, {0, 0, 0, 0})});
  EXPECT_EQ(values<uint8_t>(outs[0]), (std::vector<uint8_t>{0, 0, 0, 0}));
  EXPECT_EQ(values<uint8_t>(outs[2]), std::vector<uint8_t>{0});
  // Large input: the parallel min / max must match a serial scan.
  const int64_t n = 1 << 20;
  auto v = pattern(n, 11);
  v[777777] = -9.f;
  v[12345] = 5.f;
  outs = run17(
      R"(g (float[1048576] x) => (uint8[1048576] y, float s, uint8 z) { y, s, z = DynamicQuantizeLinear(x) })",
      {f32({n}, v)});
  const float scale = 14.f / 255.f;
  EXPECT_FLOAT_EQ(outs[1].data<float>()[0], scale);
  const uint8_t zp = uint8_t(std::nearbyint(9.f / scale));
  EXPECT_EQ(outs[2].data<uint8_t>()[0], zp);
  const uint8_t* y = outs[0].data<uint8_t>();
  for (int64_t i = 0; i < n; i += 997)
    ASSERT_EQ(y[i], uint8_t(std::clamp(std::nearbyint(v[i] / scale) + zp, 0.f, 255.f))) << i;
}

// ---------------------------------------------------------------------------------------------------------------
// Resize, Upsample

TEST(misc_Resize, NearestLargeParallelMatchesIndexing) {
  const int64_t N = 2, C = 3, H = 61, W = 97;
  auto v = pattern(N * C * H * W, 5);
  auto outs = run17(
      R"(g (float[2,3,61,97] x, float[4] s) => (float[2,3,122,291] y) { y = Resize<mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor">(x, , s) })",
      {f32({N, C, H, W}, v), f32({4}, {1, 1, 2, 3})});
  ASSERT_EQ(outs[0].dims(), (std::vector<int64_t>{N, C, 2 * H, 3 * W}));
  const float* y = outs[0].data<float>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t h = 0; h < 2 * H; ++h)
        for (int64_t w = 0; w < 3 * W; ++w)
          ASSERT_EQ(y[((n * C + c) * 2 * H + h) * 3 * W + w],
                    v[size_t(((n * C + c) * H + h / 2) * W + w / 3)]);
}

TEST(misc_Resize, LinearIsExactOnARampLargeAndHalf) {
  // Bilinear interpolation reproduces an affine function exactly: x[h, w] = 3h - 2w + 1.
  const int64_t H = 40, W = 50, Ho = 157, Wo = 211;
  std::vector<float> v(static_cast<size_t>(H * W));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t w = 0; w < W; ++w) v[size_t(h * W + w)] = float(3 * h - 2 * w + 1);
  auto outs = run17(
      R"(g (float[1,1,40,50] x, int64[4] s) => (float[1,1,157,211] y) { y = Resize<mode = "linear", coordinate_transformation_mode = "align_corners">(x, , , s) })",
      {f32({1, 1, H, W}, v), i64({4}, {1, 1, Ho, Wo})});
  const float* y = outs[0].data<float>();
  for (int64_t h = 0; h < Ho; ++h)
    for (int64_t w = 0; w < Wo; ++w) {
      double hs = double(h) * (H - 1) / (Ho - 1), ws = double(w) * (W - 1) / (Wo - 1);
      ASSERT_NEAR(y[h * Wo + w], 3 * hs - 2 * ws + 1, 1e-3) << h << "," << w;
    }
  // The same in fp16 and bf16 (computed in fp32, rounded once).
  for (const char* type : {"float16", "bfloat16"}) {
    const bool half = std::string(type) == "float16";
    std::vector<uint16_t> bits(v.size());
    for (size_t i = 0; i < v.size(); ++i) bits[i] = half ? float_to_half(v[i]) : float_to_bf16(v[i]);
    Tensor x(half ? DType::Float16 : DType::BFloat16, {1, 1, H, W});
    std::memcpy(x.raw(), bits.data(), bits.size() * 2);
    auto o = run17(
        std::string("g (") + type + "[1,1,40,50] x, int64[4] s) => (" + type +
            R"([1,1,157,211] y) { y = Resize<mode = "linear", coordinate_transformation_mode = "align_corners">(x, , , s) })",
        {x, i64({4}, {1, 1, Ho, Wo})});
    ASSERT_EQ(o[0].dtype(), x.dtype());
    auto got = as_double(o[0]);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], double(y[i]), half ? 0.07 : 0.6) << type << " " << i;
  }
}

TEST(misc_Resize, Linear3DHalfPixelClampsCoordinates) {
  // Trilinear on an affine function, with up- and downscaled axes: f at the clamped source coordinates.
  const std::vector<int64_t> in = {4, 5, 6};
  const std::vector<float> sc = {1.5f, 2.f, 0.5f};
  std::vector<float> v;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j)
      for (int k = 0; k < 6; ++k) v.push_back(float(2 * i - 3 * j + 0.5 * k));
  auto outs =
      run17(R"(g (float[4,5,6] x, float[3] s) => (float[6,10,3] y) { y = Resize<mode = "linear">(x, , s) })",
            {f32(in, v), f32({3}, sc)});
  ASSERT_EQ(outs[0].dims(), (std::vector<int64_t>{6, 10, 3}));
  auto src = [&](int64_t x, int a) { return std::clamp((x + 0.5) / sc[a] - 0.5, 0.0, double(in[a] - 1)); };
  std::vector<double> want;
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 10; ++j)
      for (int k = 0; k < 3; ++k) want.push_back(2 * src(i, 0) - 3 * src(j, 1) + 0.5 * src(k, 2));
  expect_close(as_double(outs[0]), want, 1e-5, 1e-5);
}

TEST(misc_Resize, CubicOnIntegersRoundsAndSaturates) {
  // A 0 -> 255 step: cubic overshoots past both ends; uint8 must clamp, not wrap.
  std::vector<uint8_t> v = {0, 0, 0, 255, 255, 255};
  auto outs =
      run17(R"(g (uint8[1,6] x, float[2] s) => (uint8[1,24] y) { y = Resize<mode = "cubic">(x, , s) })",
            {make<uint8_t>({1, 6}, v), f32({2}, {1.f, 4.f})});
  auto got = values<uint8_t>(outs[0]);
  // Reference: the same interpolation in float, then rounded and clamped.
  auto ref =
      run17(R"(g (float[1,6] x, float[2] s) => (float[1,24] y) { y = Resize<mode = "cubic">(x, , s) })",
            {f32({1, 6}, {0, 0, 0, 255, 255, 255}), f32({2}, {1.f, 4.f})});
  bool overshoot = false;
  for (size_t i = 0; i < got.size(); ++i) {
    float r = ref[0].data<float>()[i];
    overshoot = overshoot || r < 0 || r > 255;
    EXPECT_EQ(got[i], uint8_t(std::clamp(std::nearbyint(r), 0.f, 255.f))) << i;
  }
  EXPECT_TRUE(overshoot);
}

TEST(misc_Resize, CropAndResizeExtrapolatesPerAxis) {
  // roi past the input on the last axis: those columns get extrapolation_value, in nearest mode too.
  auto outs = run17(
      R"(g (float[2,4] x, float[4] roi, int64[2] s) => (float[2,3] y) { y = Resize<mode = "nearest", coordinate_transformation_mode = "tf_crop_and_resize", extrapolation_value = -7.0>(x, roi, , s) })",
      {f32({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}), f32({4}, {0, 0, 1, 2}), i64({2}, {2, 3})});
  // Columns: x = 0 -> 0, 1 -> 3, 2 -> 6 (outside [0, 3]).
  EXPECT_EQ(values<float>(outs[0]), (std::vector<float>{1, 4, -7, 5, 8, -7}));
}

TEST(misc_Resize, UpsampleAttributeScalesAndIntegers) {
  auto outs = run(model(7, R"(g (int32[1,2] x) => (int32[2,4] y) { y = Upsample<scales = [2.0, 2.0]>(x) })"),
                  {make<int32_t>({1, 2}, {5, -6})});
  EXPECT_EQ(values<int32_t>(outs[0]), (std::vector<int32_t>{5, 5, -6, -6, 5, 5, -6, -6}));
  outs = run(
      model(9, R"(g (float[1,2] x, float[2] s) => (float[1,4] y) { y = Upsample<mode = "linear">(x, s) })"),
      {f32({1, 2}, {0, 8}), f32({2}, {1, 2})});
  EXPECT_EQ(values<float>(outs[0]), (std::vector<float>{0, 4, 8, 8}));
}

TEST(misc_Resize, Errors) {
  std::string msg = error_of(
      model(13, R"(g (float[1,4] x, float[2] s, int64[2] z) => (float[1,8] y) { y = Resize(x, , s, z) })"),
      {Tensor(DType::Float, {1, 4}), f32({2}, {1, 2}), i64({2}, {1, 8})});
  EXPECT_NE(msg.find("not both"), std::string::npos) << msg;
  msg = error_of(model(13, R"(g (float[1,4] x, float[3] s) => (float[1,8] y) { y = Resize(x, , s) })"),
                 {Tensor(DType::Float, {1, 4}), f32({3}, {1, 2, 1})});
  EXPECT_NE(msg.find("3 scales for an input of rank 2"), std::string::npos) << msg;
  msg = error_of<UnsupportedError>(
      model(13, R"(g (float[1,4] x, float[2] s) => (float[1,8] y) { y = Resize<mode = "area">(x, , s) })"),
      {Tensor(DType::Float, {1, 4}), f32({2}, {1, 2})});
  EXPECT_NE(msg.find("mode 'area'"), std::string::npos) << msg;
  msg = error_of(model(13, R"(g (float[1,4] x, float[2] s) => (float[1,8] y) { y = Resize(x, , s) })"),
                 {Tensor(DType::Float, {1, 4}), f32({2}, {1, -2})});
  EXPECT_NE(msg.find("positive"), std::string::npos) << msg;
}

// ---------------------------------------------------------------------------------------------------------------
// Einsum

// Naive reference: explicit letter equation; an operand dimension of size 1 under a larger label broadcasts.
std::vector<double> ref_einsum(const std::string& eq, const std::vector<std::vector<int64_t>>& dims,
                               const std::vector<std::vector<double>>& data, std::vector<int64_t>& out_dims) {
  auto arrow = eq.find("->");
  std::vector<std::string> terms;
  std::string lhs = eq.substr(0, arrow), out = eq.substr(arrow + 2);
  for (size_t s = 0;;) {
    size_t c = lhs.find(',', s);
    terms.push_back(lhs.substr(s, c - s));
    if (c == std::string::npos) break;
    s = c + 1;
  }
  std::map<char, int64_t> size;
  for (size_t k = 0; k < terms.size(); ++k)
    for (size_t d = 0; d < terms[k].size(); ++d) size[terms[k][d]] = std::max(size[terms[k][d]], dims[k][d]);
  std::string all = out;
  for (auto& [c, s] : size)
    if (out.find(c) == std::string::npos) all += c;
  out_dims.clear();
  for (char c : out) out_dims.push_back(size[c]);
  std::vector<double> r(static_cast<size_t>(numel_of(out_dims)), 0.0);
  std::map<char, int64_t> at;
  for (char c : all) at[c] = 0;
  for (char c : all)
    if (size[c] == 0) return r;
  while (true) {
    double p = 1;
    for (size_t k = 0; k < terms.size(); ++k) {
      int64_t off = 0;
      for (size_t d = 0; d < terms[k].size(); ++d)
        off = off * dims[k][d] + (dims[k][d] == 1 ? 0 : at[terms[k][d]]);
      p *= data[k][size_t(off)];
    }
    int64_t o = 0;
    for (char c : out) o = o * size[c] + at[c];
    r[size_t(o)] += p;
    int i = int(all.size()) - 1;
    for (; i >= 0; --i) {
      if (++at[all[i]] < size[all[i]]) break;
      at[all[i]] = 0;
    }
    if (i < 0) break;
  }
  return r;
}

std::string type_str(const std::string& t, const std::vector<int64_t>& d) {
  if (d.empty()) return t;
  std::string s = t + "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

// Runs Einsum(equation) on fp32 inputs and compares with ref_einsum(ref_equation).
void check_einsum(const std::string& equation, const std::string& ref_equation,
                  const std::vector<std::vector<int64_t>>& dims, double rtol = 1e-5) {
  std::string sig, args;
  std::vector<Tensor> inputs;
  std::vector<std::vector<double>> data;
  for (size_t k = 0; k < dims.size(); ++k) {
    sig += (k ? ", " : "") + type_str("float", dims[k]) + " x" + std::to_string(k);
    args += (k ? ", x" : "x") + std::to_string(k);
    auto v = pattern(numel_of(dims[k]), uint32_t(k + 1));
    inputs.push_back(f32(dims[k], v));
    data.emplace_back(v.begin(), v.end());
  }
  std::vector<int64_t> od;
  auto want = ref_einsum(ref_equation, dims, data, od);
  auto outs = run17("g (" + sig + ") => (" + type_str("float", od) + " y) { y = Einsum<equation = \"" +
                        equation + "\">(" + args + ") }",
                    inputs);
  ASSERT_EQ(outs[0].dims(), od) << equation;
  SCOPED_TRACE(equation);
  expect_close(as_double(outs[0]), want, rtol, 1e-5);
}

TEST(misc_Einsum, ContractionsTransposesAndDiagonals) {
  check_einsum("ij,jk->ik", "ij,jk->ik", {{5, 7}, {7, 3}});
  check_einsum("ji,jk->ki", "ji,jk->ki", {{7, 5}, {7, 3}});  // transposed operand, transposed output
  check_einsum("bij,bkj->bik", "bij,bkj->bik", {{4, 5, 6}, {4, 3, 6}});
  check_einsum("ib,bj->bij", "ib,bj->bij", {{5, 4}, {4, 6}});  // batch label in the middle
  check_einsum("i,j->ij", "i,j->ij", {{5}, {6}});              // outer product (K = 1)
  check_einsum("ij,ij->", "ij,ij->", {{5, 6}, {5, 6}});        // full contraction
  check_einsum("ijk,jl->ilk", "ijk,jl->ilk", {{3, 4, 5}, {4, 2}});
  check_einsum("ij,kl->", "ij,kl->", {{3, 4}, {2, 5}});         // labels summed on one side only
  check_einsum("ii->i", "ii->i", {{5, 5}});                     // diagonal
  check_einsum("ii", "ii->", {{5, 5}});                         // implicit: trace
  check_einsum("bii,bi->b", "bii,bi->b", {{3, 4, 4}, {3, 4}});  // diagonal inside a contraction
  check_einsum("iij->j", "iij->j", {{3, 3, 4}});
  check_einsum("ij->ji", "ij->ji", {{6, 7}});
  check_einsum("ijk->", "ijk->", {{3, 4, 5}});
  check_einsum("ijk->j", "ijk->j", {{3, 40, 5}});
  check_einsum("ij,jk,kl->il", "ij,jk,kl->il", {{3, 4}, {4, 5}, {5, 2}});
  check_einsum("ij,jk,kl", "ij,jk,kl->il", {{3, 4}, {4, 5}, {5, 2}});  // implicit, three operands
  check_einsum("i,i,i->i", "i,i,i->i", {{6}, {6}, {6}});
  check_einsum("ba,ca", "ba,ca->bc", {{3, 4}, {2, 4}});  // implicit output sorted: 'bc'
  check_einsum("Ab,bA->", "Ab,bA->", {{3, 4}, {4, 3}});  // upper-case labels
  check_einsum("i -> i", "i->i", {{4}});                 // spaces
}

TEST(misc_Einsum, EllipsisBroadcasting) {
  check_einsum("...ij,...jk->...ik", "abij,bjk->abik", {{2, 1, 3, 4}, {5, 4, 2}});
  check_einsum("...ij,...jk", "abij,bjk->abik", {{2, 1, 3, 4}, {5, 4, 2}});  // implicit keeps '...' first
  check_einsum("i...,i...->...", "iab,ib->ab", {{3, 2, 4}, {3, 4}});
  check_einsum("...ii->...i", "abii->abi", {{2, 3, 4, 4}});
  check_einsum("...,...->...", "ab,ab->ab", {{3, 1}, {1, 4}});
  check_einsum("...ij->ij", "aij->ij", {{3, 2, 2}});  // explicit output without '...': summed
}

TEST(misc_Einsum, LargeBatchedMatmulAndLongSums) {
  check_einsum("bmk,bkn->bmn", "bmk,bkn->bmn", {{6, 64, 48}, {6, 48, 80}}, 1e-4);
  check_einsum("bkm,bnk->bnm", "bkm,bnk->bnm", {{300, 8, 6}, {300, 5, 8}},
               1e-4);                                 // many small: parallel batches
  check_einsum("ij->", "ij->", {{700, 1000}}, 1e-4);  // split reduction
  check_einsum("ij->j", "ij->j", {{3000, 100}}, 1e-4);
  check_einsum("ij->i", "ij->i", {{3000, 100}}, 1e-4);
  check_einsum("ij->j", "ij->j", {{200000, 3}}, 1e-4);  // few outputs, strided sum: split
  check_einsum("ij->j", "ij->j", {{20000, 40}}, 1e-4);  // few rows, contiguous accumulation: split
  // Transpositions: tiled when the contiguous source dimension is not the last output dimension.
  check_einsum("ij->ji", "ij->ji", {{300, 200}});
  check_einsum("abc->cab", "abc->cab", {{5, 40, 33}});
  check_einsum("abc->acb", "abc->acb", {{7, 45, 50}});
  check_einsum("abc->bca", "abc->bca", {{3, 9, 70}});
}

TEST(misc_Einsum, TypesHalfIntDouble) {
  // fp16 / bf16 compute in fp32; compare with the fp32 result rounded once.
  std::vector<float> a = pattern(4 * 6, 1), b = pattern(6 * 3, 2);
  auto ref = run17(
      R"(g (float[4,6] a, float[6,3] b) => (float[4,3] y) { y = Einsum<equation = "ij,jk->ik">(a, b) })",
      {f32({4, 6}, a), f32({6, 3}, b)});
  for (const char* type : {"float16", "bfloat16"}) {
    const bool half = std::string(type) == "float16";
    auto conv = [&](const std::vector<float>& v, std::vector<int64_t> d) {
      Tensor t(half ? DType::Float16 : DType::BFloat16, std::move(d));
      auto* p = static_cast<uint16_t*>(t.raw());
      for (size_t i = 0; i < v.size(); ++i) p[i] = half ? float_to_half(v[i]) : float_to_bf16(v[i]);
      return t;
    };
    auto o = run17(std::string("g (") + type + "[4,6] a, " + type + "[6,3] b) => (" + type +
                       R"([4,3] y) { y = Einsum<equation = "ij,jk->ik">(a, b) })",
                   {conv(a, {4, 6}), conv(b, {6, 3})});
    ASSERT_EQ(o[0].dtype(), half ? DType::Float16 : DType::BFloat16);
    expect_close(as_double(o[0]), as_double(ref[0]), half ? 1e-3 : 1e-2, 1e-2);
  }
  // int32 wraps like the type; int8 sums wrap mod 256.
  auto o = run17(
      R"(g (int32[2,3] a, int32[3,2] b) => (int32[2,2] y) { y = Einsum<equation = "ij,jk->ik">(a, b) })",
      {make<int32_t>({2, 3}, {1, 2, 3, 4, 5, 6}), make<int32_t>({3, 2}, {7, 8, 9, 10, 11, 12})});
  EXPECT_EQ(values<int32_t>(o[0]), (std::vector<int32_t>{58, 64, 139, 154}));
  o = run17(R"(g (int8[4] a) => (int8 y) { y = Einsum<equation = "i->">(a) })",
            {make<int8_t>({4}, {100, 100, 100, -1})});
  EXPECT_EQ(values<int8_t>(o[0]), std::vector<int8_t>{int8_t(299 - 256)});
  o = run17(R"(g (double[2,2] a) => (double y) { y = Einsum<equation = "ii">(a) })",
            {make<double>({2, 2}, {1e-17, 5, 6, 1})});
  EXPECT_EQ(values<double>(o[0]), std::vector<double>{1 + 1e-17});
  // Empty dimension: a contraction over nothing is zero.
  o = run17(
      R"(g (float[2,0] a, float[0,3] b) => (float[2,3] y) { y = Einsum<equation = "ij,jk->ik">(a, b) })",
      {Tensor(DType::Float, {2, 0}), Tensor(DType::Float, {0, 3})});
  EXPECT_EQ(values<float>(o[0]), std::vector<float>(6, 0.f));
}

TEST(misc_Einsum, BadEquationsNameTheProblem) {
  auto msg = error_of(
      model(
          17,
          R"(g (float[2,3] a, float[4,5] b) => (float[2,5] y) { y = Einsum<equation = "ij,jk->ik">(a, b) })"),
      {Tensor(DType::Float, {2, 3}), Tensor(DType::Float, {4, 5})});
  EXPECT_NE(msg.find("subscript 'j' has size 4"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Einsum"), std::string::npos) << msg;
  auto build_error = [](const std::string& text) -> std::string {
    try {
      onnx_io::ImportOptions opts;
      opts.check = false;
      opts.infer_shapes = false;
      Model mm = onnx_io::parse_model_text(text, opts);
      runtime::Session s(*mm.graph);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  msg = build_error(model(17, R"(g (float[2,3] a) => (float[3] y) { y = Einsum<equation = "i1->i">(a) })"));
  EXPECT_NE(msg.find("'1' is not a valid subscript"), std::string::npos) << msg;
  msg = build_error(model(17, R"(g (float[2,3] a) => (float[3] y) { y = Einsum<equation = "ij->k">(a) })"));
  EXPECT_NE(msg.find("'k' does not appear"), std::string::npos) << msg;
  msg =
      build_error(model(17, R"(g (float[2,3] a) => (float[3] y) { y = Einsum<equation = "ij,jk->ik">(a) })"));
  EXPECT_NE(msg.find("2 input terms"), std::string::npos) << msg;
  msg = build_error(model(17, R"(g (float[2,3] a) => (float[3] y) { y = Einsum<equation = "ij->jj">(a) })"));
  EXPECT_NE(msg.find("appears twice"), std::string::npos) << msg;
  msg = error_of(model(17, R"(g (float[2,3,4] a) => (float[3] y) { y = Einsum<equation = "ij->j">(a) })"),
                 {Tensor(DType::Float, {2, 3, 4})});
  EXPECT_NE(msg.find("rank 3"), std::string::npos) << msg;
}

}  // namespace
}  // namespace gaf
