// I/O binding (Session::run with outputs, Tensor::wrap): inputs read from the caller's memory and outputs written
// into the caller's buffers by the kernels that produce them, fused or not; outputs a kernel hands out as views are
// copied in; a buffer of the wrong shape or a name that is not an output is refused by name.
#include <gtest/gtest.h>

#include "gaf/session.h"
#include "test_util.h"

namespace gaf {
namespace {

constexpr const char* kModel = R"(
  <ir_version: 8, opset_import: ["" : 17]>
  g (float[2, 8] x, float[8, 4] w) => (float[2, 4] y, float[8, 2] r, float[2, 8] same) {
    m = MatMul(x, w)
    b = Constant <value = float[4] {0.5, -1, 2, 0}> ()
    a = Add(m, b)
    y = Relu(a)
    shape = Constant <value = int64[2] {8, 2}> ()
    r = Reshape(x, shape)
    same = Identity(x)
  }
)";

std::vector<float> ramp(size_t n, float scale, float offset) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(i % 7) * scale + offset;
  return v;
}

TEST(IoBinding, WritesIntoTheCallersBuffersFusedAndUnfused) {
  Model m = testing::parse(kModel);
  tools::FuseOptions opts;
  opts.fusion.opt_level = 3;
  Model fused = testing::fused_copy(m, opts);
  std::vector<float> x = ramp(16, 0.25f, -0.5f), w = ramp(32, -0.125f, 0.375f);
  for (const Model* model : {&m, &fused}) {
    runtime::Session s(*model->graph);
    const std::map<std::string, Tensor> in = {{"x", Tensor::wrap(DType::Float, {2, 8}, x.data())},
                                              {"w", Tensor::wrap(DType::Float, {8, 4}, w.data())}};
    std::vector<Tensor> expected = s.run(in);
    std::vector<float> y(8, -7.0f), r(16, -7.0f), same(16, -7.0f);
    std::vector<Tensor> got = s.run(in, {{"y", Tensor::wrap(DType::Float, {2, 4}, y.data())},
                                         {"r", Tensor::wrap(DType::Float, {8, 2}, r.data())},
                                         {"same", Tensor::wrap(DType::Float, {2, 8}, same.data())}});
    EXPECT_EQ(got[0].raw(), y.data());
    EXPECT_EQ(got[1].raw(), r.data());  // Reshape hands out a view of x: copied into the buffer
    EXPECT_EQ(got[2].raw(), same.data());
    for (size_t i = 0; i < y.size(); ++i) EXPECT_EQ(y[i], expected[0].data<float>()[i]) << i;
    for (size_t i = 0; i < r.size(); ++i) EXPECT_EQ(r[i], x[i]) << i;
    for (size_t i = 0; i < same.size(); ++i) EXPECT_EQ(same[i], x[i]) << i;
    // Partly bound: the rest comes back as usual.
    std::vector<float> y2(8);
    got = s.run(in, {{"y", Tensor::wrap(DType::Float, {2, 4}, y2.data())}});
    EXPECT_EQ(got[0].raw(), y2.data());
    EXPECT_EQ(y2, y);
    EXPECT_NE(got[1].raw(), r.data());
  }
}

TEST(IoBinding, RefusesBuffersThatDoNotFit) {
  Model m = testing::parse(kModel);
  runtime::Session s(*m.graph);
  std::vector<float> x(16, 1.0f), w(32, 1.0f), small(4);
  const std::map<std::string, Tensor> in = {{"x", Tensor::wrap(DType::Float, {2, 8}, x.data())},
                                            {"w", Tensor::wrap(DType::Float, {8, 4}, w.data())}};
  auto expect_error = [&](const std::map<std::string, Tensor>& out, const std::string& part) {
    try {
      s.run(in, out);
      ADD_FAILURE() << "no error; expected one with '" << part << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_error({{"y", Tensor::wrap(DType::Float, {1, 4}, small.data())}}, "output 'y' is float[2,4] but the buffer");
  expect_error({{"r", Tensor::wrap(DType::Float, {2, 2}, small.data())}}, "output 'r' is float[8,2] but the buffer");
  expect_error({{"m", Tensor::wrap(DType::Float, {2, 4}, small.data())}}, "'m' is not an output");
  Tensor base(DType::Float, {2, 8});
  expect_error({{"y", Tensor::view(base, {2, 4}, {8, 1})}}, "contiguous");
  EXPECT_THROW(Tensor::wrap(DType::Float, {4}, nullptr), Error);
  EXPECT_NO_THROW(Tensor::wrap(DType::Float, {0}, nullptr));
}

}  // namespace
}  // namespace gaf
