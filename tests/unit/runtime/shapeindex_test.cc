// Unit tests of the data movement and indexing kernels (src/runtime/kernels/shape*.cc, index*.cc): what the
// ONNX conformance data does not cover: large tensors on the parallel and blocked paths (checked against
// naive loops), every element width, strings, fp16/bf16, view semantics, corner cases and error messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <numeric>
#include <random>

#include "gaf/onnx_io.h"
#include "gaf/session.h"

namespace gaf {
namespace {

std::string model(int opset, const std::string& graph) {
  return fmt::format("<ir_version: 8, opset_import: [\"\" : {}]>\n{}", opset, graph);
}

// Parses and runs a one-graph model. Outputs are declared without shapes (the kernels compute them), so shape
// inference is off; opsets newer than the installed ONNX (18) or invalid attributes also skip the checker.
std::vector<Tensor> run(const std::string& text, const std::vector<Tensor>& inputs, bool check = true) {
  onnx_io::ImportOptions opts;
  opts.check = check;
  opts.infer_shapes = false;
  Model m = onnx_io::parse_model_text(text, opts);
  runtime::Session s(*m.graph);
  return s.run(inputs);
}

// The message of the gaf::Error the run throws (a test failure when it does not throw).
std::string error_of(const std::string& text, const std::vector<Tensor>& inputs, bool check = true) {
  try {
    run(text, inputs, check);
  } catch (const UnsupportedError& e) {
    ADD_FAILURE() << "expected a gaf::Error, got UnsupportedError: " << e.what();
    return e.what();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a gaf::Error";
  return "";
}

template <class T>
Tensor make(std::vector<int64_t> dims, std::vector<T> v) {
  return Tensor::from<T>(std::move(dims), std::span<const T>(v));
}
Tensor ints(std::vector<int64_t> v) { return make<int64_t>({int64_t(v.size())}, v); }
Tensor bools(std::vector<int64_t> dims, const std::vector<int>& v) {
  Tensor t(DType::Bool, std::move(dims));
  for (size_t i = 0; i < v.size(); ++i) t.data<bool>()[i] = v[i] != 0;
  return t;
}
Tensor strings(std::vector<int64_t> dims, const std::vector<std::string>& v) {
  Tensor t(DType::String, std::move(dims));
  for (size_t i = 0; i < v.size(); ++i) t.strings()[i] = v[i];
  return t;
}

Tensor random_floats(std::vector<int64_t> dims, uint32_t seed = 1) {
  Tensor t(DType::Float, std::move(dims));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-10.f, 10.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

template <class T>
std::vector<T> values(const Tensor& t) {
  const T* p = t.data<T>();
  return std::vector<T>(p, p + t.numel());
}
std::vector<float> halfs(const Tensor& t) {
  std::vector<float> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(half_to_float(t.data<Half>()[i].bits));
  return v;
}
Tensor half_tensor(std::vector<int64_t> dims, const std::vector<float>& v) {
  Tensor t(DType::Float16, std::move(dims));
  for (size_t i = 0; i < v.size(); ++i) t.data<Half>()[i] = Half{float_to_half(v[i])};
  return t;
}

// Naive reference: element i of the permuted tensor (out dims = in dims[perm]).
Tensor naive_transpose(const Tensor& x, const std::vector<int>& perm) {
  const int r = x.rank();
  std::vector<int64_t> od(r);
  for (int i = 0; i < r; ++i) od[i] = x.dim(perm[i]);
  Tensor y(x.dtype(), od);
  std::vector<int64_t> xs(r, 1);
  for (int i = r - 2; i >= 0; --i) xs[i] = xs[i + 1] * x.dim(i + 1);
  const size_t es = dtype_size(x.dtype());
  for (int64_t lin = 0; lin < y.numel(); ++lin) {
    int64_t rem = lin, off = 0;
    for (int d = r - 1; d >= 0; --d) {
      off += (rem % od[d]) * xs[perm[d]];
      rem /= od[d];
    }
    if (x.dtype() == DType::String)
      y.strings()[lin] = x.strings()[off];
    else
      std::memcpy(static_cast<char*>(y.raw()) + lin * es, static_cast<const char*>(x.raw()) + off * es, es);
  }
  return y;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.dims() != b.dims()) return false;
  if (a.dtype() == DType::String) {
    for (int64_t i = 0; i < a.numel(); ++i)
      if (a.strings()[i] != b.strings()[i]) return false;
    return true;
  }
  return std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

std::string perm_attr(const std::vector<int>& perm) {
  std::string s = "[";
  for (size_t i = 0; i < perm.size(); ++i) s += (i ? "," : "") + std::to_string(perm[i]);
  return s + "]";
}

// ---- Transpose ----

TEST(shapeindex, TransposeEveryPermutationOfEveryWidthMatchesNaive) {
  // Sizes 1 and odd sizes exercise dim dropping and merging; 9x7 inner runs take the blocked path.
  const std::vector<int64_t> dims = {3, 1, 9, 7};
  Tensor f = random_floats(dims, 7);
  Tensor d(DType::Double, dims), h(DType::Float16, dims), i8(DType::Int8, dims), s(DType::String, dims);
  for (int64_t i = 0; i < f.numel(); ++i) {
    d.data<double>()[i] = f.data<float>()[i];
    h.data<Half>()[i] = Half{float_to_half(f.data<float>()[i])};
    i8.data<int8_t>()[i] = int8_t(i);
    s.strings()[i] = "s" + std::to_string(i);
  }
  const std::vector<std::pair<Tensor, std::string>> cases = {
      {f, "float"}, {d, "double"}, {h, "float16"}, {i8, "int8"}, {s, "string"}};
  std::vector<int> perm = {0, 1, 2, 3};
  do {
    for (const auto& [x, ty] : cases) {
      std::string text =
          model(13, fmt::format("g ({0}[a,b,c,d] x) => ({0} y) {{ y = Transpose <perm = {1}> (x) }}", ty,
                                perm_attr(perm)));
      auto out = run(text, {x});
      EXPECT_TRUE(same_bytes(out[0], naive_transpose(x, perm))) << ty << " perm " << perm_attr(perm);
    }
  } while (std::next_permutation(perm.begin(), perm.end()));
}

TEST(shapeindex, TransposeLarge2DAndBatchedTakeParallelBlockedPath) {
  Tensor x = random_floats({1001, 1037}, 3);  // remainders in both tile directions
  auto y = run(model(13, "g (float[a,b] x) => (float y) { y = Transpose(x) }"), {x});
  EXPECT_TRUE(same_bytes(y[0], naive_transpose(x, {1, 0})));
  Tensor z = random_floats({4, 67, 130, 33}, 4);
  for (std::vector<int> perm : {std::vector<int>{0, 3, 1, 2}, {0, 2, 3, 1}, {2, 0, 1, 3}, {3, 2, 1, 0}}) {
    auto out =
        run(model(13, fmt::format("g (float[a,b,c,d] x) => (float y) {{ y = Transpose <perm = {}> (x) }}",
                                  perm_attr(perm))),
            {z});
    EXPECT_TRUE(same_bytes(out[0], naive_transpose(z, perm))) << perm_attr(perm);
  }
}

TEST(shapeindex, TransposeLargeOfEveryWidthUsesRegisterTiles) {
  // 8x8 (2- and 4-byte) and 4x4 (8-byte) register transposes plus scalar edges: odd sizes on both sides.
  Tensor f = random_floats({2, 203, 141}, 21);
  Tensor h(DType::Float16, f.dims()), d(DType::Double, f.dims()), b(DType::UInt8, f.dims());
  for (int64_t i = 0; i < f.numel(); ++i) {
    h.data<Half>()[i] = Half{float_to_half(f.data<float>()[i])};
    d.data<double>()[i] = f.data<float>()[i];
    b.data<uint8_t>()[i] = uint8_t(i * 7);
  }
  for (const auto& [x, ty] : std::vector<std::pair<Tensor, std::string>>{
           {f, "float"}, {h, "float16"}, {d, "double"}, {b, "uint8"}}) {
    auto y = run(
        model(13, fmt::format("g ({0}[a,b,c] x) => ({0} y) {{ y = Transpose <perm = [0, 2, 1]> (x) }}", ty)),
        {x});
    EXPECT_TRUE(same_bytes(y[0], naive_transpose(x, {0, 2, 1}))) << ty;
  }
}

TEST(shapeindex, TransposeDefaultReversesAndOrderKeepingPermIsAView) {
  Tensor x = random_floats({2, 3, 4});
  auto y = run(model(13, "g (float[a,b,c] x) => (float y) { y = Transpose(x) }"), {x});
  EXPECT_TRUE(same_bytes(y[0], naive_transpose(x, {2, 1, 0})));
  Tensor u = random_floats({3, 1, 4});
  auto v = run(model(13, "g (float[a,b,c] x) => (float y) { y = Transpose <perm = [1, 0, 2]> (x) }"), {u});
  EXPECT_EQ(v[0].dims(), (std::vector<int64_t>{1, 3, 4}));
  EXPECT_EQ(v[0].raw(), u.raw());
}

TEST(shapeindex, TransposeBadPermIsAnError) {
  std::string msg =
      error_of(model(13, "g (float[a,b,c] x) => (float y) { y = Transpose <perm = [0, 0, 1]> (x) }"),
               {random_floats({2, 3, 4})},
               /*check=*/false);
  EXPECT_NE(msg.find("node 'y' (Transpose)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not a permutation"), std::string::npos) << msg;
}

// ---- Views ----

TEST(shapeindex, ReshapeSqueezeUnsqueezeFlattenAreZeroCopy) {
  Tensor x = random_floats({2, 1, 6});
  auto out =
      run(model(13, R"(g (float[a,b,c] x, int64[2] s, int64[1] ax) => (float r, float q, float u, float f) {
    r = Reshape(x, s)
    q = Squeeze(x, ax)
    u = Unsqueeze(x, ax)
    f = Flatten <axis = -1> (x)
  })"),
          {x, ints({0, -1}), ints({1})});
  EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(out[1].dims(), (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(out[2].dims(), (std::vector<int64_t>{2, 1, 1, 6}));
  EXPECT_EQ(out[3].dims(), (std::vector<int64_t>{2, 6}));
  for (const Tensor& t : out) EXPECT_EQ(t.raw(), x.raw());
}

TEST(shapeindex, ReshapeAllowzeroAndErrors) {
  const std::string text =
      model(14, "g (float[a,b] x, int64[2] s) => (float y) { y = Reshape <allowzero = 1> (x, s) }");
  auto y = run(text, {Tensor(DType::Float, {0, 4}), ints({4, 0})});
  EXPECT_EQ(y[0].dims(), (std::vector<int64_t>{4, 0}));
  // Without allowzero the 0 copies the input's dim 1 (4): 16 elements from 0.
  std::string msg = error_of(model(14, "g (float[a,b] x, int64[2] s) => (float y) { y = Reshape(x, s) }"),
                             {Tensor(DType::Float, {0, 4}), ints({4, 0})});
  EXPECT_NE(msg.find("cannot reshape [0,4]"), std::string::npos) << msg;
  msg = error_of(model(14, "g (float[a,b] x, int64[2] s) => (float y) { y = Reshape(x, s) }"),
                 {random_floats({3, 4}), ints({5, -1})});
  EXPECT_NE(msg.find("-1 cannot be inferred"), std::string::npos) << msg;
  msg = error_of(model(14, "g (float[a,b] x, int64[2] s) => (float y) { y = Reshape(x, s) }"),
                 {random_floats({3, 4}), ints({-1, -1})});
  EXPECT_NE(msg.find("more than one -1"), std::string::npos) << msg;
}

TEST(shapeindex, SqueezeOfNonUnitAxisAndUnsqueezeOpset11Attribute) {
  std::string msg = error_of(model(13, "g (float[a,b] x, int64[1] ax) => (float y) { y = Squeeze(x, ax) }"),
                             {random_floats({2, 3}), ints({-1})});
  EXPECT_NE(msg.find("node 'y' (Squeeze)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("size is 3, not 1"), std::string::npos) << msg;
  auto y = run(model(11, "g (float[a,b] x) => (float y) { y = Unsqueeze <axes = [0, 3]> (x) }"),
               {random_floats({2, 3})});
  EXPECT_EQ(y[0].dims(), (std::vector<int64_t>{1, 2, 3, 1}));
}

// ---- Concat / Split ----

TEST(shapeindex, ConcatLargeAlongOuterAndInnerAxes) {
  Tensor a = random_floats({600, 1000}, 1), b = random_floats({400, 1000}, 2);
  auto y =
      run(model(13, "g (float[p,n] a, float[q,n] b) => (float y) { y = Concat <axis = 0> (a, b) }"), {a, b});
  ASSERT_EQ(y[0].dims(), (std::vector<int64_t>{1000, 1000}));
  EXPECT_EQ(std::memcmp(y[0].raw(), a.raw(), a.nbytes()), 0);
  EXPECT_EQ(std::memcmp(y[0].data<float>() + a.numel(), b.raw(), b.nbytes()), 0);

  Tensor c = random_floats({30000, 7}, 3), d = random_floats({30000, 5}, 4);
  auto z =
      run(model(13, "g (float[n,p] c, float[n,q] d) => (float y) { y = Concat <axis = -1> (c, d) }"), {c, d});
  ASSERT_EQ(z[0].dims(), (std::vector<int64_t>{30000, 12}));
  bool ok = true;
  for (int64_t r = 0; r < 30000; ++r)
    for (int64_t j = 0; j < 12; ++j)
      ok &= z[0].data<float>()[r * 12 + j] ==
            (j < 7 ? c.data<float>()[r * 7 + j] : d.data<float>()[r * 5 + j - 7]);
  EXPECT_TRUE(ok);
}

TEST(shapeindex, ConcatStringsAndEmptyInputsAndMismatch) {
  auto y = run(
      model(13,
            "g (string[a] x, string[b] e, string[c] z) => (string y) { y = Concat <axis = 0> (x, e, z) }"),
      {strings({2}, {"a", "b"}), Tensor(DType::String, {0}), strings({1}, {"c"})});
  EXPECT_TRUE(same_bytes(y[0], strings({3}, {"a", "b", "c"})));
  std::string msg =
      error_of(model(13, "g (float[a,b] x, float[c,d] z) => (float y) { y = Concat <axis = 0> (x, z) }"),
               {random_floats({2, 3}), random_floats({2, 4})});
  EXPECT_NE(msg.find("node 'y' (Concat)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("does not match"), std::string::npos) << msg;
}

TEST(shapeindex, SplitSizesFromInputAttributeAndNumOutputs) {
  Tensor x = random_floats({4, 10});
  auto a = run(model(13,
                     "g (float[a,b] x, int64[3] s) => (float p, float q, float r) { p, q, r = Split <axis = "
                     "1> (x, s) }"),
               {x, ints({2, 3, 5})});
  auto b = run(model(11,
                     "g (float[a,b] x) => (float p, float q, float r) { p, q, r = Split <axis = 1, split = "
                     "[2, 3, 5]> (x) }"),
               {x});
  for (const auto& out : {a, b}) {
    ASSERT_EQ(out.size(), 3u);
    int64_t col = 0;
    for (int k = 0; k < 3; ++k) {
      const int64_t w = out[k].dim(1);
      for (int64_t r = 0; r < 4; ++r)
        for (int64_t j = 0; j < w; ++j)
          EXPECT_EQ(out[k].data<float>()[r * w + j], x.data<float>()[r * 10 + col + j]);
      col += w;
    }
    EXPECT_EQ(col, 10);
  }
  // Split-18 with num_outputs: ceil(7 / 3) = 3, the last part takes the remaining 1.
  auto c = run(
      model(18, "g (float[a] x) => (float p, float q, float r) { p, q, r = Split <num_outputs = 3> (x) }"),
      {random_floats({7})}, /*check=*/false);
  EXPECT_EQ(c[0].numel(), 3);
  EXPECT_EQ(c[1].numel(), 3);
  EXPECT_EQ(c[2].numel(), 1);
  std::string msg =
      error_of(model(13, "g (float[a] x) => (float p, float q) { p, q = Split (x) }"), {random_floats({7})});
  EXPECT_NE(msg.find("cannot be split into 2 equal parts"), std::string::npos) << msg;
}

// ---- Slice / Expand / Tile ----

TEST(shapeindex, SliceNegativeStepsClampingAndStepZero) {
  Tensor x = random_floats({5, 6});
  const std::string text = model(13,
                                 "g (float[a,b] x, int64[n] s, int64[n] e, int64[n] ax, int64[n] st) => "
                                 "(float y) { y = Slice(x, s, e, ax, st) }");
  // Full reverse of both axes with the INT64 extremes used by exporters.
  auto y = run(text, {x, ints({-1, INT64_MAX}), ints({INT64_MIN, INT64_MIN}), ints({0, 1}), ints({-1, -2})});
  ASSERT_EQ(y[0].dims(), (std::vector<int64_t>{5, 3}));
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 3; ++j)
      EXPECT_EQ(y[0].data<float>()[i * 3 + j], x.data<float>()[(4 - i) * 6 + (5 - 2 * j)]);
  // Starts past the end give an empty axis, not an error.
  auto e = run(text, {x, ints({7}), ints({100}), ints({-1}), ints({1})});
  EXPECT_EQ(e[0].dims(), (std::vector<int64_t>{5, 0}));
  std::string msg = error_of(text, {x, ints({0}), ints({3}), ints({0}), ints({0})});
  EXPECT_NE(msg.find("step for axis 0 is 0"), std::string::npos) << msg;
  // Slice-1: attributes.
  auto a =
      run(model(9, "g (float[a,b] x) => (float y) { y = Slice <starts = [1], ends = [-1], axes = [1]> (x) }"),
          {x});
  ASSERT_EQ(a[0].dims(), (std::vector<int64_t>{5, 4}));
  EXPECT_EQ(a[0].data<float>()[0], x.data<float>()[1]);
}

TEST(shapeindex, SliceLargeStridedMatchesNaive) {
  Tensor x = random_floats({300, 1200}, 9);
  auto y = run(model(13,
                     "g (float[a,b] x, int64[2] s, int64[2] e, int64[2] ax, int64[2] st) => (float y) { y = "
                     "Slice(x, s, e, ax, st) }"),
               {x, ints({3, 1}), ints({299, 1199}), ints({0, 1}), ints({2, 3})});
  ASSERT_EQ(y[0].dims(), (std::vector<int64_t>{148, 400}));
  bool ok = true;
  for (int64_t i = 0; i < 148; ++i)
    for (int64_t j = 0; j < 400; ++j)
      ok &= y[0].data<float>()[i * 400 + j] == x.data<float>()[(3 + 2 * i) * 1200 + 1 + 3 * j];
  EXPECT_TRUE(ok);
}

TEST(shapeindex, SliceIntoOneLongRunIsSplitAcrossThreads) {
  // Leading rows of a matrix merge into one contiguous run; a strided 1-D slice is one long strided run.
  Tensor x = random_floats({1000, 300}, 10);
  const std::string text = model(13,
                                 "g (float[a,b] x, int64[1] s, int64[1] e, int64[1] ax, int64[1] st) => "
                                 "(float y) { y = Slice(x, s, e, ax, st) }");
  auto y = run(text, {x, ints({100}), ints({900}), ints({0}), ints({1})});
  ASSERT_EQ(y[0].dims(), (std::vector<int64_t>{800, 300}));
  EXPECT_EQ(std::memcmp(y[0].raw(), x.data<float>() + 100 * 300, y[0].nbytes()), 0);
  Tensor v = random_floats({300001}, 12);
  auto z = run(model(13,
                     "g (float[a] x, int64[1] s, int64[1] e, int64[1] ax, int64[1] st) => (float y) { y = "
                     "Slice(x, s, e, ax, st) }"),
               {v, ints({-1}), ints({INT64_MIN}), ints({0}), ints({-2})});
  ASSERT_EQ(z[0].dims(), (std::vector<int64_t>{150001}));
  bool ok = true;
  for (int64_t i = 0; i < 150001; ++i) ok &= z[0].data<float>()[i] == v.data<float>()[300000 - 2 * i];
  EXPECT_TRUE(ok);
}

TEST(shapeindex, ExpandBroadcastCornersAndBf16) {
  Tensor x = make<float>({3, 1}, {1, 2, 3});
  const std::string text = model(13, "g (float[a,b] x, int64[n] s) => (float y) { y = Expand(x, s) }");
  auto y = run(text, {x, ints({2, 1, 6})});
  ASSERT_EQ(y[0].dims(), (std::vector<int64_t>{2, 3, 6}));
  for (int64_t i = 0; i < 36; ++i) EXPECT_EQ(y[0].data<float>()[i], float((i / 6) % 3 + 1));
  // A shape of lower rank, and 1s that keep the input dims.
  auto z = run(text, {x, ints({1})});
  EXPECT_EQ(z[0].dims(), (std::vector<int64_t>{3, 1}));
  auto w = run(text, {x, ints({3, 0})});
  EXPECT_EQ(w[0].dims(), (std::vector<int64_t>{3, 0}));
  std::string msg = error_of(text, {x, ints({2, 4})});
  EXPECT_NE(msg.find("node 'y' (Expand)"), std::string::npos) << msg;

  Tensor b(DType::BFloat16, {1, 4});
  for (int i = 0; i < 4; ++i) b.data<BFloat16>()[i] = BFloat16{float_to_bf16(0.5f * i)};
  auto bo = run(model(13, "g (bfloat16[a,b] x, int64[n] s) => (bfloat16 y) { y = Expand(x, s) }"),
                {b, ints({3, 4})});
  ASSERT_EQ(bo[0].dims(), (std::vector<int64_t>{3, 4}));
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(bf16_to_float(bo[0].data<BFloat16>()[i].bits), 0.5f * (i % 4));
}

TEST(shapeindex, TileFp16AndLargeInt64) {
  Tensor h = half_tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  auto y =
      run(model(13, "g (float16[a,b] x, int64[2] r) => (float16 y) { y = Tile(x, r) }"), {h, ints({2, 3})});
  ASSERT_EQ(y[0].dims(), (std::vector<int64_t>{4, 9}));
  auto v = halfs(y[0]);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 9; ++j) EXPECT_EQ(v[i * 9 + j], float((i % 2) * 3 + j % 3 + 1));
  Tensor x(DType::Int64, {3, 700});
  std::iota(x.data<int64_t>(), x.data<int64_t>() + x.numel(), int64_t(0));
  auto t = run(model(13, "g (int64[a,b] x, int64[2] r) => (int64 y) { y = Tile(x, r) }"), {x, ints({40, 3})});
  ASSERT_EQ(t[0].dims(), (std::vector<int64_t>{120, 2100}));
  bool ok = true;
  for (int64_t i = 0; i < 120; ++i)
    for (int64_t j = 0; j < 2100; ++j) ok &= t[0].data<int64_t>()[i * 2100 + j] == (i % 3) * 700 + j % 700;
  EXPECT_TRUE(ok);
}

// ---- Pad ----

TEST(shapeindex, PadReflectBeyondTheEdgeRepeatsLikeNumpy) {
  // np.pad([1, 2, 3], (5, 5), 'reflect')
  auto y = run(model(13, "g (float[a] x, int64[2] p) => (float y) { y = Pad <mode = \"reflect\"> (x, p) }"),
               {make<float>({3}, {1, 2, 3}), ints({5, 5})});
  EXPECT_EQ(values<float>(y[0]), (std::vector<float>{2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3, 2}));
  auto e = run(model(13, "g (float[a] x, int64[2] p) => (float y) { y = Pad <mode = \"edge\"> (x, p) }"),
               {make<float>({3}, {1, 2, 3}), ints({2, 1})});
  EXPECT_EQ(values<float>(e[0]), (std::vector<float>{1, 1, 1, 2, 3, 3}));
}

TEST(shapeindex, PadConstantNegativePadsCropAndTypedValue) {
  Tensor x(DType::Int32, {2, 4});
  std::iota(x.data<int32_t>(), x.data<int32_t>() + 8, 0);  // [[0 1 2 3] [4 5 6 7]]
  auto y = run(model(13, "g (int32[a,b] x, int64[4] p, int32 v) => (int32 y) { y = Pad(x, p, v) }"),
               {x, ints({0, -1, 1, 1}), Tensor::scalar<int32_t>(-7)});
  ASSERT_EQ(y[0].dims(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(values<int32_t>(y[0]), (std::vector<int32_t>{1, 2, 3, -7, 5, 6, 7, -7, -7, -7, -7, -7}));
  std::string msg = error_of(model(13, "g (int32[a,b] x, int64[4] p) => (int32 y) { y = Pad(x, p) }"),
                             {x, ints({0, 0, -3, 0})});
  EXPECT_NE(msg.find("below zero"), std::string::npos) << msg;
  msg = error_of(model(13, "g (int32[a,b] x, int64[2] p) => (int32 y) { y = Pad(x, p) }"), {x, ints({1, 1})});
  EXPECT_NE(msg.find("pads has 2 entries, expected 4"), std::string::npos) << msg;
}

TEST(shapeindex, PadOpset18AxesAndLargeReflect) {
  Tensor x = random_floats({2, 3});
  auto y = run(
      model(18, "g (float[a,b] x, int64[2] p, float v, int64[1] ax) => (float y) { y = Pad(x, p, v, ax) }"),
      {x, ints({1, 2}), Tensor::scalar<float>(9), ints({-1})}, /*check=*/false);
  ASSERT_EQ(y[0].dims(), (std::vector<int64_t>{2, 6}));
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 6; ++j)
      EXPECT_EQ(y[0].data<float>()[i * 6 + j], j >= 1 && j < 4 ? x.data<float>()[i * 3 + j - 1] : 9.f);
  Tensor big = random_floats({3, 200, 300}, 5);
  auto r =
      run(model(13, "g (float[a,b,c] x, int64[6] p) => (float y) { y = Pad <mode = \"reflect\"> (x, p) }"),
          {big, ints({0, 3, 5, 0, 4, 2})});
  ASSERT_EQ(r[0].dims(), (std::vector<int64_t>{3, 207, 307}));
  auto refl = [](int64_t i, int64_t n) { return i < 0 ? -i : i >= n ? 2 * (n - 1) - i : i; };
  bool ok = true;
  for (int64_t a = 0; a < 3; ++a)
    for (int64_t b = 0; b < 207; ++b)
      for (int64_t c = 0; c < 307; ++c)
        ok &= r[0].data<float>()[(a * 207 + b) * 307 + c] ==
              big.data<float>()[(a * 200 + refl(b - 3, 200)) * 300 + refl(c - 5, 300)];
  EXPECT_TRUE(ok);
}

TEST(shapeindex, PadStringsWithConstant) {
  auto y = run(model(13, "g (string[a] x, int64[2] p, string v) => (string y) { y = Pad(x, p, v) }"),
               {strings({2}, {"a", "b"}), ints({1, 2}), strings({}, {"_"})});
  EXPECT_TRUE(same_bytes(y[0], strings({5}, {"_", "a", "b", "_", "_"})));
}

// ---- DepthToSpace / SpaceToDepth / ReverseSequence ----

TEST(shapeindex, DepthToSpaceBothModesMatchSpecAndSpaceToDepthInvertsDcr) {
  const int64_t N = 2, C = 12, H = 3, W = 5, b = 2, Co = C / (b * b);
  Tensor x = random_floats({N, C, H, W}, 11);
  for (std::string mode : {"DCR", "CRD"}) {
    auto y = run(
        model(
            13,
            fmt::format(
                "g (float[n,c,h,w] x) => (float y) {{ y = DepthToSpace <blocksize = 2, mode = \"{}\"> (x) }}",
                mode)),
        {x});
    ASSERT_EQ(y[0].dims(), (std::vector<int64_t>{N, Co, H * b, W * b}));
    bool ok = true;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < Co; ++c)
        for (int64_t h = 0; h < H * b; ++h)
          for (int64_t w = 0; w < W * b; ++w) {
            const int64_t i = h % b, j = w % b;
            const int64_t src_c = mode == "DCR" ? (i * b + j) * Co + c : c * b * b + i * b + j;
            ok &= y[0].data<float>()[((n * Co + c) * H * b + h) * W * b + w] ==
                  x.data<float>()[((n * C + src_c) * H + h / b) * W + w / b];
          }
    EXPECT_TRUE(ok) << mode;
  }
  auto round = run(model(13, R"(g (float[n,c,h,w] x) => (float y) {
    d = DepthToSpace <blocksize = 2> (x)
    y = SpaceToDepth <blocksize = 2> (d)
  })"),
                   {x});
  EXPECT_TRUE(same_bytes(round[0], x));
}

TEST(shapeindex, ReverseSequenceBadLengthIsAnError) {
  std::string msg = error_of(model(13,
                                   "g (float[t,b] x, int64[b] l) => (float y) { y = ReverseSequence "
                                   "<batch_axis = 1, time_axis = 0> (x, l) }"),
                             {random_floats({3, 2}), ints({1, 4})});
  EXPECT_NE(msg.find("sequence_lens[1] = 4 is outside [0, 3]"), std::string::npos) << msg;
}

// ---- Gather family ----

TEST(shapeindex, GatherNegativeIndicesStringsAndOutOfRange) {
  const std::string text =
      model(13, "g (float[a,b] x, int64[n] i) => (float y) { y = Gather <axis = 1> (x, i) }");
  Tensor x = make<float>({2, 3}, {0, 1, 2, 3, 4, 5});
  auto y = run(text, {x, ints({-1, 0, -3})});
  EXPECT_EQ(values<float>(y[0]), (std::vector<float>{2, 0, 0, 5, 3, 3}));
  std::string msg = error_of(text, {x, ints({0, 3})});
  EXPECT_NE(msg.find("node 'y' (Gather)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("index 3 at position 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("axis 1 of size 3"), std::string::npos) << msg;
  EXPECT_NE(error_of(text, {x, ints({-4})}).find("index -4"), std::string::npos);
  auto s = run(model(13, "g (string[a] x, int32[n] i) => (string y) { y = Gather (x, i) }"),
               {strings({3}, {"x", "y", "z"}), make<int32_t>({2}, {2, -3})});
  EXPECT_TRUE(same_bytes(s[0], strings({2}, {"z", "x"})));
}

TEST(shapeindex, GatherLargeInnerAndRowPathsMatchNaive) {
  Tensor x = random_floats({1000, 300}, 13);
  std::vector<int64_t> idx(500);
  for (int64_t i = 0; i < 500; ++i) idx[i] = (i * 37) % 300 - (i % 2 ? 300 : 0);
  auto y = run(model(13, "g (float[a,b] x, int64[n] i) => (float y) { y = Gather <axis = 1> (x, i) }"),
               {x, ints(idx)});
  ASSERT_EQ(y[0].dims(), (std::vector<int64_t>{1000, 500}));
  bool ok = true;
  for (int64_t r = 0; r < 1000; ++r)
    for (int64_t j = 0; j < 500; ++j)
      ok &= y[0].data<float>()[r * 500 + j] == x.data<float>()[r * 300 + (idx[j] + 300) % 300];
  EXPECT_TRUE(ok);
  std::vector<int64_t> rows(3000);
  for (int64_t i = 0; i < 3000; ++i) rows[i] = (i * 7) % 1000;
  auto z = run(model(13, "g (float[a,b] x, int64[n,m] i) => (float y) { y = Gather (x, i) }"),
               {x, make<int64_t>({1000, 3}, rows)});
  ASSERT_EQ(z[0].dims(), (std::vector<int64_t>{1000, 3, 300}));
  ok = true;
  for (int64_t k = 0; k < 3000; ++k)
    ok &= std::memcmp(z[0].data<float>() + k * 300, x.data<float>() + rows[k] * 300, 300 * 4) == 0;
  EXPECT_TRUE(ok);
  // A few slices far longer than a copy grain, cut into pieces across threads (Swin's qkv[i] of a packed
  // projection): a scalar index (the last, counted from the end) and two rows of 3 x 100003 (a short last piece).
  Tensor p = random_floats({3, 100003}, 14);
  auto q = run(model(13, "g (float[a,b] x, int64 i) => (float y) { y = Gather (x, i) }"),
               {p, Tensor::scalar<int64_t>(-1)});
  ASSERT_EQ(q[0].dims(), (std::vector<int64_t>{100003}));
  EXPECT_EQ(std::memcmp(q[0].raw(), p.data<float>() + 2 * 100003, 100003 * 4), 0);
  auto q2 = run(model(13, "g (float[a,b] x, int64[n] i) => (float y) { y = Gather (x, i) }"), {p, ints({2, 0})});
  ASSERT_EQ(q2[0].dims(), (std::vector<int64_t>{2, 100003}));
  EXPECT_EQ(std::memcmp(q2[0].raw(), p.data<float>() + 2 * 100003, 100003 * 4), 0);
  EXPECT_EQ(std::memcmp(q2[0].data<float>() + 100003, p.data<float>(), 100003 * 4), 0);
}

TEST(shapeindex, GatherElementsAndGatherNDBatchDims) {
  Tensor x = make<float>({2, 3}, {0, 1, 2, 3, 4, 5});
  auto ge =
      run(model(13, "g (float[a,b] x, int64[c,d] i) => (float y) { y = GatherElements <axis = 0> (x, i) }"),
          {x, make<int64_t>({1, 3}, {1, -2, 1})});
  EXPECT_EQ(values<float>(ge[0]), (std::vector<float>{3, 1, 5}));
  std::string msg = error_of(
      model(13, "g (float[a,b] x, int64[c,d] i) => (float y) { y = GatherElements <axis = 0> (x, i) }"),
      {x, make<int64_t>({1, 3}, {1, 2, 0})});
  EXPECT_NE(msg.find("index 2 at position 1"), std::string::npos) << msg;

  // batch_dims = 1: data [2,2,2], indices [2,1,2] -> [2,1]
  Tensor d = make<float>({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  const std::string nd =
      model(13, "g (float[a,b,c] x, int64[p,q,r] i) => (float y) { y = GatherND <batch_dims = 1> (x, i) }");
  auto g = run(nd, {d, make<int64_t>({2, 1, 2}, {1, 0, -1, -1})});
  ASSERT_EQ(g[0].dims(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(values<float>(g[0]), (std::vector<float>{2, 7}));
  msg = error_of(nd, {d, make<int64_t>({2, 1, 2}, {1, 0, 0, 2})});
  EXPECT_NE(msg.find("node 'y' (GatherND)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("index 2 at position 3"), std::string::npos) << msg;
}

// ---- Scatter family ----

TEST(shapeindex, ScatterElementsReductionsWithDuplicatesFp16) {
  const std::string add = model(16,
                                "g (float16[a,b] x, int64[c,d] i, float16[c,d] u) => (float16 y) { y = "
                                "ScatterElements <axis = 1, reduction = \"add\"> (x, i, u) }");
  auto y = run(add, {half_tensor({1, 4}, {1, 1, 1, 1}), make<int64_t>({1, 4}, {0, -4, 3, 3}),
                     half_tensor({1, 4}, {0.5, 0.25, 2, 3})});
  EXPECT_EQ(halfs(y[0]), (std::vector<float>{1.75f, 1, 1, 6}));
  const std::string mul = model(16,
                                "g (int32[a] x, int64[c] i, int32[c] u) => (int32 y) { y = ScatterElements "
                                "<reduction = \"mul\"> (x, i, u) }");
  auto m = run(
      mul, {make<int32_t>({3}, {2, 3, 4}), make<int64_t>({3}, {2, 2, 0}), make<int32_t>({3}, {5, -1, 7})});
  EXPECT_EQ(values<int32_t>(m[0]), (std::vector<int32_t>{14, 3, -20}));
  // Opset 18 max/min (checker skipped: the installed ONNX knows opset 17).
  const std::string mx = model(18,
                               "g (float[a] x, int64[c] i, float[c] u) => (float y) { y = ScatterElements "
                               "<reduction = \"max\"> (x, i, u) }");
  auto z = run(mx, {make<float>({3}, {1, 5, 0}), make<int64_t>({3}, {1, 0, 0}), make<float>({3}, {2, 4, -1})},
               false);
  EXPECT_EQ(values<float>(z[0]), (std::vector<float>{4, 5, 0}));
  // Reduction none: the last update at a repeated index wins.
  auto n =
      run(model(13, "g (float[a] x, int64[c] i, float[c] u) => (float y) { y = ScatterElements (x, i, u) }"),
          {make<float>({2}, {0, 0}), make<int64_t>({3}, {1, 1, 1}), make<float>({3}, {1, 2, 3})});
  EXPECT_EQ(values<float>(n[0]), (std::vector<float>{0, 3}));
}

TEST(shapeindex, ScatterOutOfRangeNamesNodeAndIndexAndLeavesNoPartialWrite) {
  std::string msg = error_of(model(13,
                                   "g (float[a,b] x, int64[c,d] i, float[c,d] u) => (float y) { y = "
                                   "ScatterElements <axis = 0> (x, i, u) }"),
                             {random_floats({2, 2}), make<int64_t>({1, 2}, {0, -3}), random_floats({1, 2})});
  EXPECT_NE(msg.find("node 'y' (ScatterElements)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("index -3 at position 1"), std::string::npos) << msg;
  msg = error_of(
      model(13, "g (float[a,b] x, int64[c,d] i, float[c,e] u) => (float y) { y = ScatterND (x, i, u) }"),
      {random_floats({2, 2}), make<int64_t>({1, 1}, {2}), random_floats({1, 2})});
  EXPECT_NE(msg.find("node 'y' (ScatterND)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("index 2"), std::string::npos) << msg;
}

TEST(shapeindex, ScatterNDAddDuplicatesAndStrings) {
  auto y = run(model(16,
                     "g (float[a,b] x, int64[c,d] i, float[c,e] u) => (float y) { y = ScatterND <reduction = "
                     "\"add\"> (x, i, u) }"),
               {make<float>({2, 2}, {1, 1, 1, 1}), make<int64_t>({3, 1}, {1, -1, 0}),
                make<float>({3, 2}, {1, 2, 3, 4, 5, 6})});
  EXPECT_EQ(values<float>(y[0]), (std::vector<float>{6, 7, 5, 7}));
  auto s =
      run(model(13, "g (string[a] x, int64[c,d] i, string[c] u) => (string y) { y = ScatterND (x, i, u) }"),
          {strings({3}, {"a", "b", "c"}), make<int64_t>({1, 1}, {-2}), strings({1}, {"z"})});
  EXPECT_TRUE(same_bytes(s[0], strings({3}, {"a", "z", "c"})));
}

// ---- OneHot / NonZero / Compress / Trilu ----

TEST(shapeindex, OneHotNegativeOutOfRangeAndFractionalIndices) {
  auto y =
      run(model(13, "g (float[n] i, int64 d, int32[2] v) => (int32 y) { y = OneHot <axis = 0> (i, d, v) }"),
          {make<float>({4}, {-1, 1, 7, 1.5f}), Tensor::scalar<int64_t>(3), make<int32_t>({2}, {-1, 9})});
  ASSERT_EQ(y[0].dims(), (std::vector<int64_t>{3, 4}));
  // Columns: -1 -> depth 2; 1 -> 1; 7 and 1.5 are outside / not an index: all off.
  EXPECT_EQ(values<int32_t>(y[0]), (std::vector<int32_t>{-1, -1, -1, -1, -1, 9, -1, -1, 9, -1, -1, -1}));
}

TEST(shapeindex, NonZeroLargeParallelAndFp16NegativeZero) {
  Tensor x(DType::Float, {300, 501});
  std::vector<int64_t> expect_r, expect_c;
  for (int64_t i = 0; i < x.numel(); ++i) {
    bool nz = i % 97 == 3 || i % 1001 == 0;
    x.data<float>()[i] = nz ? 1.f + float(i % 5) : (i % 2 ? -0.f : 0.f);
    if (nz) {
      expect_r.push_back(i / 501);
      expect_c.push_back(i % 501);
    }
  }
  auto y = run(model(13, "g (float[a,b] x) => (int64 y) { y = NonZero(x) }"), {x});
  ASSERT_EQ(y[0].dims(), (std::vector<int64_t>{2, int64_t(expect_r.size())}));
  std::vector<int64_t> got = values<int64_t>(y[0]);
  EXPECT_TRUE(std::equal(expect_r.begin(), expect_r.end(), got.begin()));
  EXPECT_TRUE(std::equal(expect_c.begin(), expect_c.end(), got.begin() + expect_r.size()));
  auto h = run(model(13, "g (float16[a] x) => (int64 y) { y = NonZero(x) }"),
               {half_tensor({4}, {-0.f, 0.f, NAN, 2})});
  EXPECT_EQ(values<int64_t>(h[0]), (std::vector<int64_t>{2, 3}));
}

TEST(shapeindex, CompressShortConditionAndOutOfRangeSelection) {
  const std::string text =
      model(13, "g (float[a,b] x, bool[n] c) => (float y) { y = Compress <axis = 1> (x, c) }");
  Tensor x = make<float>({2, 3}, {0, 1, 2, 3, 4, 5});
  auto y = run(text, {x, bools({2}, {0, 1})});
  EXPECT_EQ(values<float>(y[0]), (std::vector<float>{1, 4}));
  std::string msg = error_of(text, {x, bools({4}, {1, 0, 0, 1})});
  EXPECT_NE(msg.find("selects index 3"), std::string::npos) << msg;
}

TEST(shapeindex, TriluExtremeKAndBatches) {
  Tensor x(DType::Int64, {2, 3, 4});
  std::iota(x.data<int64_t>(), x.data<int64_t>() + 24, int64_t(1));
  const std::string upper = model(14, "g (int64[a,b,c] x, int64 k) => (int64 y) { y = Trilu(x, k) }");
  const std::string lower =
      model(14, "g (int64[a,b,c] x, int64 k) => (int64 y) { y = Trilu <upper = 0> (x, k) }");
  auto zero = [](const Tensor& t) {
    return std::all_of(t.data<int64_t>(), t.data<int64_t>() + t.numel(), [](int64_t v) { return v == 0; });
  };
  EXPECT_TRUE(zero(run(upper, {x, Tensor::scalar<int64_t>(INT64_MAX)})[0]));
  EXPECT_TRUE(zero(run(lower, {x, Tensor::scalar<int64_t>(INT64_MIN)})[0]));
  EXPECT_TRUE(same_bytes(run(upper, {x, Tensor::scalar<int64_t>(INT64_MIN)})[0], x));
  EXPECT_TRUE(same_bytes(run(lower, {x, Tensor::scalar<int64_t>(INT64_MAX)})[0], x));
  auto t = run(upper, {x, Tensor::scalar<int64_t>(1)});
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 4; ++j) {
        int64_t k = (b * 3 + i) * 4 + j;
        EXPECT_EQ(t[0].data<int64_t>()[k], j - i >= 1 ? k + 1 : 0);
      }
}

// ---- CumSum / TopK / Unique ----

TEST(shapeindex, CumSumExclusiveReverseOnBlockedInnerPathAndInt64) {
  Tensor x = random_floats({3, 50, 1100}, 17);
  auto y = run(
      model(14,
            "g (float[a,b,c] x, int32 ax) => (float y) { y = CumSum <exclusive = 1, reverse = 1> (x, ax) }"),
      {x, Tensor::scalar<int32_t>(-2)});
  bool ok = true;
  for (int64_t o = 0; o < 3; ++o)
    for (int64_t j = 0; j < 1100; ++j) {
      double acc = 0;
      for (int64_t a = 49; a >= 0; --a) {
        const int64_t k = (o * 50 + a) * 1100 + j;
        ok &= std::fabs(y[0].data<float>()[k] - acc) <= 1e-3 * (1 + std::fabs(acc));
        acc += x.data<float>()[k];
      }
    }
  EXPECT_TRUE(ok);
  Tensor big = make<int64_t>({3}, {INT64_C(1) << 60, 1, 1});
  auto z = run(model(14, "g (int64[a] x, int64 ax) => (int64 y) { y = CumSum (x, ax) }"),
               {big, Tensor::scalar<int64_t>(0)});
  EXPECT_EQ(values<int64_t>(z[0]),
            (std::vector<int64_t>{INT64_C(1) << 60, (INT64_C(1) << 60) + 1, (INT64_C(1) << 60) + 2}));
  auto h = run(model(14, "g (float16[a] x, int64 ax) => (float16 y) { y = CumSum (x, ax) }"),
               {half_tensor({3}, {0.5f, 0.25f, 1}), Tensor::scalar<int64_t>(0)});
  EXPECT_EQ(halfs(h[0]), (std::vector<float>{0.5f, 0.75f, 1.75f}));
}

TEST(shapeindex, TopKTiesKeepLowerIndexAndFp16AndBadK) {
  const std::string largest =
      model(13, "g (float[n] x, int64[1] k) => (float v, int64 i) { v, i = TopK(x, k) }");
  const std::string smallest =
      model(13, "g (float[n] x, int64[1] k) => (float v, int64 i) { v, i = TopK <largest = 0> (x, k) }");
  Tensor x = make<float>({6}, {3, 1, 3, 2, 3, 1});
  auto a = run(largest, {x, ints({2})});
  EXPECT_EQ(values<float>(a[0]), (std::vector<float>{3, 3}));
  EXPECT_EQ(values<int64_t>(a[1]), (std::vector<int64_t>{0, 2}));
  auto b = run(smallest, {x, ints({3})});
  EXPECT_EQ(values<float>(b[0]), (std::vector<float>{1, 1, 2}));
  EXPECT_EQ(values<int64_t>(b[1]), (std::vector<int64_t>{1, 5, 3}));
  std::string msg = error_of(largest, {x, ints({7})});
  EXPECT_NE(msg.find("k = 7 is out of range"), std::string::npos) << msg;
  // axis 0 of a [4, 3] fp16 matrix (strided slices).
  auto h = run(
      model(13, "g (float16[a,b] x, int64[1] k) => (float16 v, int64 i) { v, i = TopK <axis = 0> (x, k) }"),
      {half_tensor({4, 3}, {1, 8, 0, 5, 8, 0, 2, 9, 0, 5, 1, 0}), ints({2})});
  EXPECT_EQ(halfs(h[0]), (std::vector<float>{5, 9, 0, 5, 8, 0}));
  EXPECT_EQ(values<int64_t>(h[1]), (std::vector<int64_t>{1, 2, 0, 3, 0, 1}));
}

TEST(shapeindex, UniqueStringsUnsortedAndAxis) {
  auto y = run(model(13, R"(g (string[n] x) => (string y, int64 i, int64 inv, int64 c) {
    y, i, inv, c = Unique <sorted = 0> (x)
  })"),
               {strings({5}, {"b", "a", "b", "c", "a"})});
  EXPECT_TRUE(same_bytes(y[0], strings({3}, {"b", "a", "c"})));
  EXPECT_EQ(values<int64_t>(y[1]), (std::vector<int64_t>{0, 1, 3}));
  EXPECT_EQ(values<int64_t>(y[2]), (std::vector<int64_t>{0, 1, 0, 2, 1}));
  EXPECT_EQ(values<int64_t>(y[3]), (std::vector<int64_t>{2, 2, 1}));
  // Columns of [[1, 0, 1], [2, 5, 2]] along axis 1: sorted unique columns (0,5), (1,2).
  auto z = run(model(13, R"(g (int32[a,b] x) => (int32 y, int64 i, int64 inv, int64 c) {
    y, i, inv, c = Unique <axis = 1> (x)
  })"),
               {make<int32_t>({2, 3}, {1, 0, 1, 2, 5, 2})});
  ASSERT_EQ(z[0].dims(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(values<int32_t>(z[0]), (std::vector<int32_t>{0, 1, 5, 2}));
  EXPECT_EQ(values<int64_t>(z[1]), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(values<int64_t>(z[2]), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(values<int64_t>(z[3]), (std::vector<int64_t>{1, 2}));
}

TEST(shapeindex, RegistryKinds) {
  auto kind = [](const char* op) { return OpRegistry::instance().find(op)->kind; };
  for (const char* op : {"Transpose", "Reshape", "Concat", "Slice", "Pad", "Gather", "GatherND", "Trilu"})
    EXPECT_EQ(kind(op), OpKind::Injective) << op;
  for (const char* op : {"OneHot", "NonZero", "TopK", "Compress", "Unique", "ScatterND"})
    EXPECT_EQ(kind(op), OpKind::Opaque) << op;
  EXPECT_EQ(kind("CumSum"), OpKind::Reduction);
  EXPECT_TRUE(OpRegistry::instance().find("CumSum")->flags & kPrecisionSensitive);
}

}  // namespace
}  // namespace gaf
