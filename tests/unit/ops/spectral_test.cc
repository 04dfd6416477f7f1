// The spectral kernels (DFT, STFT, MelWeightMatrix) against analytic spectra and a direct O(n^2) DFT written
// here: lengths with several prime factors and prime ones (the FFT's two paths), padding and truncation,
// onesided output, inverse round trips, other axes and element types, and the errors for bad inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <numbers>
#include <string>

#include "gaf/onnx_io.h"
#include "gaf/session.h"
#include "test_util.h"

namespace gaf {
namespace {

using Complex = std::complex<double>;
constexpr double kPi = std::numbers::pi;

std::vector<Tensor> run17(const std::string& graph, const std::vector<Tensor>& inputs) {
  Model m = onnx_io::parse_model_text("<ir_version: 8, opset_import: [\"\" : 17]> " + graph);
  runtime::Session s(*m.graph);
  return s.run(inputs);
}

// The message of the gaf::Error running the graph throws (a test failure when it throws none).
std::string error_of(const std::string& graph, const std::vector<Tensor>& inputs) {
  try {
    run17(graph, inputs);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error thrown";
  return "";
}

Tensor f32(std::vector<int64_t> dims, const std::vector<float>& v) {
  return Tensor::from<float>(std::move(dims), std::span<const float>(v));
}
Tensor f64(std::vector<int64_t> dims, const std::vector<double>& v) {
  return Tensor::from<double>(std::move(dims), std::span<const double>(v));
}

// A [.., 2] tensor's values as complex numbers.
std::vector<Complex> complex_values(const Tensor& t) {
  EXPECT_EQ(t.dim(-1), 2);
  std::vector<Complex> r;
  for (int64_t i = 0; i + 1 < t.numel(); i += 2) r.emplace_back(t.get_double(i), t.get_double(i + 1));
  return r;
}

// Deterministic values in [-1, 1].
std::vector<double> pattern(int64_t n, int seed) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[size_t(i)] = std::sin(0.7 * double(i) + 1.3 * seed) * std::cos(0.11 * double(i));
  return v;
}

// The direct DFT of x, zero-padded or truncated to n (the definition the kernels must match).
std::vector<Complex> direct_dft(const std::vector<Complex>& x, int64_t n, bool inverse = false) {
  std::vector<Complex> y(static_cast<size_t>(n));
  const double sign = inverse ? 1.0 : -1.0;
  for (int64_t k = 0; k < n; ++k) {
    for (int64_t j = 0; j < n && j < int64_t(x.size()); ++j)
      y[size_t(k)] += x[size_t(j)] * std::polar(1.0, sign * 2 * kPi * double(j * k % n) / double(n));
    if (inverse) y[size_t(k)] /= double(n);
  }
  return y;
}

void expect_near(const std::vector<Complex>& got, const std::vector<Complex>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i].real(), want[i].real(), tol) << "at " << i;
    EXPECT_NEAR(got[i].imag(), want[i].imag(), tol) << "at " << i;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// DFT

TEST(SpectralDft, ImpulseAndCosineGiveTheAnalyticSpectrum) {
  // n = 12 (factors 2, 2, 3) and n = 7 (prime): an impulse at m has X[k] = e^(-2 pi i k m / n); a cosine of
  // frequency f has n/2 at bins f and n - f and 0 elsewhere.
  for (int64_t n : {12, 7}) {
    const std::string g = "g (float[1," + std::to_string(n) + ",1] x) => (float[1,N,2] y) { y = DFT(x) }";
    std::vector<float> impulse(size_t(n), 0.f), cosine(static_cast<size_t>(n));
    impulse[2] = 1.f;
    for (int64_t j = 0; j < n; ++j) cosine[size_t(j)] = float(std::cos(2 * kPi * 3 * double(j) / double(n)));
    std::vector<Complex> want_impulse, want_cosine(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k)
      want_impulse.push_back(std::polar(1.0, -2 * kPi * double(2 * k) / double(n)));
    want_cosine[3] = want_cosine[size_t(n - 3)] = double(n) / 2;
    auto out = run17(g, {f32({1, n, 1}, impulse)});
    ASSERT_EQ(out[0].dims(), (std::vector<int64_t>{1, n, 2}));
    expect_near(complex_values(out[0]), want_impulse, 1e-6);
    out = run17(g, {f32({1, n, 1}, cosine)});
    expect_near(complex_values(out[0]), want_cosine, 1e-5);
  }
}

TEST(SpectralDft, MatchesTheDirectSumForManyLengthsAxesAndTypes) {
  // A complex double [2, 3, n, 2] transformed along axis 2 (lines strided by nothing) and a real float
  // [2, n, 3, 1] along axis 1 (lines strided by 3), for lengths with small, large and no prime factors.
  for (int64_t n : {1, 2, 8, 9, 30, 31, 64, 97, 100}) {
    const std::string sn = std::to_string(n);
    const int64_t lines = 6;
    auto v = pattern(lines * n * 2, int(n));
    auto out = run17("g (double[2,3," + sn + ",2] x) => (double[2,3,N,2] y) { y = DFT<axis = 2>(x) }",
                     {f64({2, 3, n, 2}, v)});
    auto got = complex_values(out[0]);
    for (int64_t l = 0; l < lines; ++l) {
      std::vector<Complex> x;
      for (int64_t j = 0; j < n; ++j)
        x.emplace_back(v[size_t((l * n + j) * 2)], v[size_t((l * n + j) * 2 + 1)]);
      std::vector<Complex> line(got.begin() + l * n, got.begin() + (l + 1) * n);
      expect_near(line, direct_dft(x, n), 1e-9 * double(n));
    }
    auto r = pattern(lines * n, int(n) + 1);
    out = run17("g (float[2," + sn + ",3,1] x) => (float[2,N,3,2] y) { y = DFT(x) }",
                {f32({2, n, 3, 1}, std::vector<float>(r.begin(), r.end()))});
    got = complex_values(out[0]);
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t i = 0; i < 3; ++i) {
        std::vector<Complex> x, line;
        for (int64_t j = 0; j < n; ++j) {
          x.emplace_back(double(float(r[size_t((b * n + j) * 3 + i)])));
          line.push_back(got[size_t((b * n + j) * 3 + i)]);
        }
        expect_near(line, direct_dft(x, n), 1e-5 * double(n));
      }
  }
}

TEST(SpectralDft, InverseUndoesTheForwardTransform) {
  // Along the last signal axis (negative: -2) of a complex [2, 3, 10, 2], and scaled by 1/n: ifft(fft(x)) =
  // x.
  auto v = pattern(2 * 3 * 10 * 2, 5);
  auto out = run17(R"(g (double[2,3,10,2] x) => (double[2,3,10,2] y, double[2,3,10,2] z) {
      y = DFT<axis = -2>(x)
      z = DFT<axis = 2, inverse = 1>(y) })",
                   {f64({2, 3, 10, 2}, v)});
  std::vector<double> back(out[1].numel());
  for (int64_t i = 0; i < out[1].numel(); ++i) back[size_t(i)] = out[1].get_double(i);
  for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(back[i], v[i], 1e-12) << i;
  // The inverse of a constant spectrum is an impulse of height 1 (the 1/n scale).
  out = run17("g (float[1,4,2] x) => (float[1,4,2] y) { y = DFT<inverse = 1>(x) }",
              {f32({1, 4, 2}, {1, 0, 1, 0, 1, 0, 1, 0})});
  expect_near(complex_values(out[0]), {1, 0, 0, 0}, 1e-7);
}

TEST(SpectralDft, OnesidedIsTheFirstHalfOfTheFullSpectrum) {
  for (int64_t n : {10, 9}) {
    const std::string sn = std::to_string(n);
    auto r = pattern(3 * n, int(n));
    const Tensor x = f32({3, n, 1}, std::vector<float>(r.begin(), r.end()));
    auto out = run17("g (float[3," + sn +
                         ",1] x) => (float[3,N,2] full, float[3,H,2] half) {"
                         " full = DFT(x) half = DFT<onesided = 1>(x) }",
                     {x});
    ASSERT_EQ(out[1].dims(), (std::vector<int64_t>{3, n / 2 + 1, 2}));
    auto full = complex_values(out[0]), half = complex_values(out[1]);
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t k = 0; k <= n / 2; ++k)
        EXPECT_EQ(half[size_t(b * (n / 2 + 1) + k)], full[size_t(b * n + k)]) << b << ", " << k;
  }
}

TEST(SpectralDft, DftLengthZeroPadsOrTruncates) {
  auto r = pattern(10, 3);
  const Tensor x = f32({1, 10, 1}, std::vector<float>(r.begin(), r.end()));
  std::vector<Complex> xs;
  for (double v : r) xs.emplace_back(double(float(v)));
  for (int64_t n : {16, 7}) {
    auto out = run17("g (float[1,10,1] x, int64 n) => (float[1,N,2] y) { y = DFT(x, n) }",
                     {x, Tensor::scalar<int64_t>(n)});
    ASSERT_EQ(out[0].dims(), (std::vector<int64_t>{1, n, 2}));
    expect_near(complex_values(out[0]), direct_dft(xs, n), 1e-5);
    // With onesided, the length's nonredundant bins; an int32 length works the same.
    out = run17("g (float[1,10,1] x, int32 n) => (float[1,N,2] y) { y = DFT<onesided = 1>(x, n) }",
                {x, Tensor::scalar<int32_t>(int32_t(n))});
    auto want = direct_dft(xs, n);
    want.resize(size_t(n / 2 + 1));
    expect_near(complex_values(out[0]), want, 1e-5);
  }
}

TEST(SpectralDft, Float16ComputesInDoubleAndRoundsOnce) {
  std::vector<Half> h;
  for (int j = 0; j < 8; ++j) h.push_back(Half{float_to_half(float(j))});
  auto out = run17("g (float16[1,8,1] x) => (float16[1,8,2] y) { y = DFT(x) }",
                   {Tensor::from<Half>({1, 8, 1}, std::span<const Half>(h))});
  ASSERT_EQ(out[0].dtype(), DType::Float16);
  std::vector<Complex> x;
  for (int j = 0; j < 8; ++j) x.emplace_back(j);
  auto want = direct_dft(x, 8);
  auto got = complex_values(out[0]);
  for (size_t k = 0; k < want.size(); ++k) {
    EXPECT_EQ(got[k].real(), double(half_to_float(float_to_half(float(want[k].real()))))) << k;
    EXPECT_EQ(got[k].imag(), double(half_to_float(float_to_half(float(want[k].imag()))))) << k;
  }
}

TEST(SpectralDft, BadInputsNameTheNodeAndTheFix) {
  // Last dim 3: neither real nor complex.
  std::string msg =
      error_of("g (float[1,4,3] x) => (float[1,4,2] y) { y = DFT(x) }", {Tensor(DType::Float, {1, 4, 3})});
  EXPECT_NE(msg.find("'y' (DFT)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("last dim of 1 (real) or 2 (complex"), std::string::npos) << msg;
  // The axis must be a signal dim, not the re/im one.
  msg = error_of("g (float[1,4,2] x) => (float[1,4,2] y) { y = DFT<axis = 2>(x) }",
                 {Tensor(DType::Float, {1, 4, 2})});
  EXPECT_NE(msg.find("axis 2 does not name a signal dim"), std::string::npos) << msg;
  // dft_length must be a positive integer scalar.
  msg = error_of("g (float[1,4,1] x, int64 n) => (float[1,N,2] y) { y = DFT(x, n) }",
                 {Tensor(DType::Float, {1, 4, 1}), Tensor::scalar<int64_t>(0)});
  EXPECT_NE(msg.find("dft_length must be positive"), std::string::npos) << msg;
}

// ---------------------------------------------------------------------------------------------------------------
// STFT

// STFT of signal [batch, length, channels] by the direct DFT of every frame, windowed, all bins.
std::vector<Complex> direct_stft(const std::vector<double>& s, int64_t batch, int64_t length,
                                 int64_t channels, int64_t step, const std::vector<double>& window) {
  const int64_t fl = int64_t(window.size()), frames = (length - fl) / step + 1;
  std::vector<Complex> r;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t f = 0; f < frames; ++f) {
      std::vector<Complex> x;
      for (int64_t j = 0; j < fl; ++j) {
        const size_t at = size_t((b * length + f * step + j) * channels);
        x.push_back(Complex(s[at], channels == 2 ? s[at + 1] : 0.0) * window[size_t(j)]);
      }
      auto y = direct_dft(x, fl);
      r.insert(r.end(), y.begin(), y.end());
    }
  return r;
}

TEST(SpectralStft, RectangularWindowIsPerFrameDfts) {
  // [2, 50] real, frames of 12 every 5: (50 - 12) / 5 + 1 = 8 frames, 7 onesided bins. A window of ones and
  // no window with frame_length give the same per-frame DFTs.
  auto r = pattern(2 * 50, 9);
  std::vector<double> s(r.begin(), r.end());
  for (double& v : s) v = double(float(v));
  const Tensor signal = f32({2, 50, 1}, std::vector<float>(s.begin(), s.end()));
  auto out = run17(
      R"(g (float[2,50,1] s, int64 step, float[12] w, int64 len) => (float[2,F,K,2] a, float[2,F,K,2] b) {
      a = STFT(s, step, w)
      b = STFT(s, step, , len) })",
      {signal, Tensor::scalar<int64_t>(5), f32({12}, std::vector<float>(12, 1.f)),
       Tensor::scalar<int64_t>(12)});
  ASSERT_EQ(out[0].dims(), (std::vector<int64_t>{2, 8, 7, 2}));
  ASSERT_EQ(out[1].dims(), out[0].dims());
  auto full = direct_stft(s, 2, 50, 1, 5, std::vector<double>(12, 1.0));
  std::vector<Complex> want;
  for (size_t frame = 0; frame < 16; ++frame)
    want.insert(want.end(), full.begin() + long(frame * 12), full.begin() + long(frame * 12 + 7));
  expect_near(complex_values(out[0]), want, 1e-5);
  expect_near(complex_values(out[1]), want, 1e-5);
}

TEST(SpectralStft, WindowedComplexSignalTwoSided) {
  // A complex double signal of 40 samples, a Hann window of 9 (prime factors 3, 3), step 4, onesided = 0.
  auto s = pattern(40 * 2, 4);
  std::vector<double> w;
  for (int j = 0; j < 9; ++j) w.push_back(0.5 - 0.5 * std::cos(2 * kPi * j / 9));
  auto out = run17(R"(g (double[1,40,2] s, int32 step, double[9] w) => (double[1,F,9,2] y) {
      y = STFT<onesided = 0>(s, step, w) })",
                   {f64({1, 40, 2}, s), Tensor::scalar<int32_t>(4), f64({9}, w)});
  ASSERT_EQ(out[0].dims(), (std::vector<int64_t>{1, 8, 9, 2}));
  expect_near(complex_values(out[0]), direct_stft(s, 1, 40, 2, 4, w), 1e-12);
}

TEST(SpectralStft, BadInputsNameTheNodeAndTheFix) {
  const std::string g = R"(g (float[1,8,1] s, int64[N] step, int64 len) => (float[1,F,K,2] y) {
      y = STFT(s, step, , len) })";
  const Tensor signal(DType::Float, {1, 8, 1}, Allocator::heap(), /*zero=*/true);
  // A frame longer than the signal.
  std::string msg =
      error_of(g, {signal, Tensor::from<int64_t>({1}, std::vector<int64_t>{2}), Tensor::scalar<int64_t>(9)});
  EXPECT_NE(msg.find("'y' (STFT)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("frame_length 9 is longer than the signal (8 samples)"), std::string::npos) << msg;
  // A frame_step that is not a scalar.
  msg = error_of(
      g, {signal, Tensor::from<int64_t>({2}, std::vector<int64_t>{2, 3}), Tensor::scalar<int64_t>(4)});
  EXPECT_NE(msg.find("'frame_step' must be a scalar"), std::string::npos) << msg;
  // A signal whose last dim is neither 1 nor 2.
  msg = error_of(
      R"(g (float[1,8,3] s, int64 step, int64 len) => (float[1,F,K,2] y) { y = STFT(s, step, , len) })",
      {Tensor(DType::Float, {1, 8, 3}), Tensor::scalar<int64_t>(2), Tensor::scalar<int64_t>(4)});
  EXPECT_NE(msg.find("last dim of 1 (real) or 2 (complex"), std::string::npos) << msg;
  // Neither a window nor a frame_length.
  msg = error_of(R"(g (float[1,8,1] s, int64 step) => (float[1,F,K,2] y) { y = STFT(s, step) })",
                 {signal, Tensor::scalar<int64_t>(2)});
  EXPECT_NE(msg.find("give a window or a frame_length"), std::string::npos) << msg;
  // A window and a frame_length that disagree.
  msg = error_of(R"(g (float[1,8,1] s, int64 step, float[N] w, int64 len) => (float[1,F,K,2] y) {
      y = STFT(s, step, w, len) })",
                 {signal, Tensor::scalar<int64_t>(2), f32({3}, {1, 1, 1}), Tensor::scalar<int64_t>(4)});
  EXPECT_NE(msg.find("the window has 3 values but frame_length is 4"), std::string::npos) << msg;
}

TEST(SpectralStft, ConstantFrameInputsGiveTheRightShapeToFuseAfter) {
  // ONNX 1.12's STFT inference, given a constant frame_step and frame_length, took onesided as 0 and gave
  // [1, 15, 16, 2]; the Abs -> Neg kernel fused after it was then built for that shape and refused the real
  // [1, 15, 9, 2]. Ours (frontend/onnx/guarded_schemas.cc) gives the real one, and fused equals unfused.
  Model m = testing::parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[1,128,1] s, int64 step = {8}, int64 len = {16}) => (float[1,F,K,2] y) {
        t = STFT(s, step, , len)
        u = Abs(t)
        y = Neg(u) })");
  const Value* t = m.graph->find_value("t");
  ASSERT_TRUE(t->type.has_static_shape()) << m.graph->to_string();
  EXPECT_EQ(t->type.static_dims(), (std::vector<int64_t>{1, 15, 9, 2}));
  tools::FuseOptions opts;
  opts.fusion.opt_level = 3;
  Model fused = testing::fused_copy(m, opts);
  EXPECT_EQ(testing::count_fused(*fused.graph), 1) << fused.graph->to_string();
  testing::expect_same_outputs(m, fused);
  // A window gives the frame length; onesided = 0 keeps every bin; frames of 10 every 3 from 20 samples: 4.
  m = testing::parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[2,20,2] s, int32 step = {3}, float[10] w) => (float[2,F,K,2] y) {
        y = STFT<onesided = 0>(s, step, w) })");
  ASSERT_TRUE(m.graph->outputs()[0]->type.has_static_shape()) << m.graph->to_string();
  EXPECT_EQ(m.graph->outputs()[0]->type.static_dims(), (std::vector<int64_t>{2, 4, 10, 2}));
}

TEST(SpectralDft, Opset20TransformsTheLastSignalAxisByDefault) {
  // From opset 20 the axis is an input defaulting to -2 (opset 17's attribute defaulted to 1): the onesided
  // bins are along dim 2, at run time and in the inferred shape.
  Model m = testing::parse(R"(<ir_version: 8, opset_import: ["" : 20]>
      g (float[2,6,10,1] x, int64 n = {12}) => (float[A,B,C,2] y, float[D,E,F,2] z) {
        y = DFT<onesided = 1>(x)
        z = DFT(x, n) })");
  EXPECT_EQ(m.graph->outputs()[0]->type.static_dims(), (std::vector<int64_t>{2, 6, 6, 2}));
  EXPECT_EQ(m.graph->outputs()[1]->type.static_dims(), (std::vector<int64_t>{2, 6, 12, 2}));
  std::vector<float> x(2 * 6 * 10);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 7) - 3.f;
  runtime::Session s(*m.graph);
  auto out = s.run({f32({2, 6, 10, 1}, x)});
  ASSERT_EQ(out[0].dims(), (std::vector<int64_t>{2, 6, 6, 2}));
  ASSERT_EQ(out[1].dims(), (std::vector<int64_t>{2, 6, 12, 2}));
  auto half = complex_values(out[0]), padded = complex_values(out[1]);
  for (int64_t line = 0; line < 12; ++line) {
    std::vector<Complex> xs(x.begin() + line * 10, x.begin() + (line + 1) * 10);
    auto want = direct_dft(xs, 10);
    want.resize(6);
    expect_near({half.begin() + line * 6, half.begin() + (line + 1) * 6}, want, 1e-4);
    expect_near({padded.begin() + line * 12, padded.begin() + (line + 1) * 12}, direct_dft(xs, 12), 1e-4);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// MelWeightMatrix

TEST(SpectralMel, ReferenceExampleAndOutputType) {
  // The ONNX reference's example: 8 mel bins of a 16-point DFT at 8192 Hz over [0, 4096] Hz; its bins come
  // out as 0 0 0 1 1 2 3 4 5 6, so filters 0, 2 have an empty rising edge (1 at the centre) and the rest are
  // one bin wide.
  const std::string g = R"(g (int32 m, int32 n, int32 rate, float lo, float hi) => (T[K,M] w) {
      w = MelWeightMatrix<output_datatype = DT>(m, n, rate, lo, hi) })";
  const std::vector<Tensor> in = {Tensor::scalar<int32_t>(8), Tensor::scalar<int32_t>(16),
                                  Tensor::scalar<int32_t>(8192), Tensor::scalar<float>(0.f),
                                  Tensor::scalar<float>(4096.f)};
  std::vector<double> want(9 * 8, 0.0);
  const std::vector<std::pair<int, int>> ones = {{0, 0}, {0, 1}, {1, 2}, {1, 3},
                                                 {2, 4}, {3, 5}, {4, 6}, {5, 7}};
  for (auto [row, col] : ones) want[size_t(row * 8 + col)] = 1.0;
  const std::vector<std::pair<std::string, int>> types = {{"float", 1}, {"double", 11}};
  for (const auto& [type, dt] : types) {
    std::string text = g;
    text.replace(text.find("T[K,M]"), 1, type);
    text.replace(text.find("DT"), 2, std::to_string(dt));
    auto out = run17(text, in);
    ASSERT_EQ(out[0].dtype(), DType(dt));
    ASSERT_EQ(out[0].dims(), (std::vector<int64_t>{9, 8}));
    for (int64_t i = 0; i < 72; ++i) EXPECT_EQ(out[0].get_double(i), want[size_t(i)]) << type << " at " << i;
  }
}

TEST(SpectralMel, TrianglesRiseAndFallLinearly) {
  // 4 mel bins of a 256-point DFT at 16 kHz over [100, 8000] Hz: wide filters, so the ramps have interior
  // values. Each column rises from 0 to a peak of 1 and falls back, with values in [0, 1] and one peak.
  auto out = run17(R"(g (int64 m, int64 n, int64 rate, float lo, float hi) => (float[K,M] w) {
      w = MelWeightMatrix(m, n, rate, lo, hi) })",
                   {Tensor::scalar<int64_t>(4), Tensor::scalar<int64_t>(256), Tensor::scalar<int64_t>(16000),
                    Tensor::scalar<float>(100.f), Tensor::scalar<float>(8000.f)});
  ASSERT_EQ(out[0].dims(), (std::vector<int64_t>{129, 4}));
  for (int64_t col = 0; col < 4; ++col) {
    int peaks = 0, interior = 0;
    for (int64_t row = 0; row < 129; ++row) {
      const double v = out[0].get_double(row * 4 + col);
      EXPECT_GE(v, 0.0);
      EXPECT_LE(v, 1.0);
      peaks += v == 1.0;
      interior += v > 0.0 && v < 1.0;
    }
    EXPECT_EQ(peaks, 1) << "column " << col;
    EXPECT_GT(interior, 2) << "column " << col;
  }
  std::string msg =
      error_of(R"(g (int64 m, int64 n, int64 rate, float lo, float hi) => (float[K,M] w) {
      w = MelWeightMatrix(m, n, rate, lo, hi) })",
               {Tensor::scalar<int64_t>(4), Tensor::scalar<int64_t>(256), Tensor::scalar<int64_t>(0),
                Tensor::scalar<float>(0.f), Tensor::scalar<float>(8000.f)});
  EXPECT_NE(msg.find("(MelWeightMatrix): dft_length and sample_rate must be positive"), std::string::npos)
      << msg;
}

}  // namespace
}  // namespace gaf
