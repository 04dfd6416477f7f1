// Reductions and normalisations: what the ONNX conformance data does not cover. Every kernel is compared with
// a naive double-precision reference written here: all axis combinations and keepdims, the lane / column /
// short / split-reduction paths of the reduce engine, 16-bit floats, integers, NaN and infinities, empty
// reductions, large tensors on the parallel paths, and errors for bad input.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "gaf/builder.h"
#include "gaf/onnx_io.h"
#include "gaf/session.h"

namespace gaf {
namespace {

using runtime::Session;

constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- helpers ----

Tensor make_tensor(DType dt, std::vector<int64_t> dims, const std::vector<double>& v) {
  Tensor t(dt, std::move(dims));
  EXPECT_EQ(size_t(t.numel()), v.size());
  visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) p[i] = from_double<T>(v[i]);
  });
  return t;
}

Tensor floats(std::vector<int64_t> dims, const std::vector<double>& v) {
  return make_tensor(DType::Float, std::move(dims), v);
}

std::vector<double> values(const Tensor& t) {
  std::vector<double> v(size_t(t.numel()));
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = to_double(p[i]);
  });
  return v;
}

std::vector<double> random_values(size_t n, double lo, double hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// The values after a round trip through dtype (what the kernel actually reads).
std::vector<double> rounded(const std::vector<double>& v, DType dt) {
  return values(make_tensor(dt, {int64_t(v.size())}, v));
}

// Builds a one-node model; `consts` become 1-D int64 constant inputs after the data inputs.
struct OneNode {
  Model model;
  explicit OneNode(const std::string& op, const std::vector<std::pair<DType, Shape>>& inputs,
                   std::map<std::string, Attribute> attrs = {}, int64_t opset = 17, int num_outputs = 1,
                   const std::vector<std::vector<int64_t>>& int_inputs = {}, bool infer = true) {
    GraphBuilder b(model, opset);
    std::vector<Value*> ins;
    for (size_t i = 0; i < inputs.size(); ++i)
      ins.push_back(b.input("in" + std::to_string(i), inputs[i].first, inputs[i].second));
    for (const auto& v : int_inputs) ins.push_back(b.ints(v));
    auto outs = b.op_n(op, ins, num_outputs, std::move(attrs));
    for (Value* o : outs) b.output(o);
    if (infer) b.finish();
  }
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) {
    Session s(*model.graph);
    return s.run(inputs);
  }
};

Shape shape_of(const std::vector<int64_t>& d) { return Shape(d.begin(), d.end()); }

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double rtol, double atol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " [" << i << "]";
    } else if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << what << " [" << i << "]";
    } else {
      EXPECT_NEAR(got[i], want[i], atol + rtol * std::abs(want[i])) << what << " [" << i << "]";
    }
    if (::testing::Test::HasFailure()) return;  // one message per case is enough
  }
}

// ---- reference reductions ----

enum class Red { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };
const std::pair<Red, const char*> kReductions[] = {{Red::Sum, "ReduceSum"},
                                                   {Red::Mean, "ReduceMean"},
                                                   {Red::Max, "ReduceMax"},
                                                   {Red::Min, "ReduceMin"},
                                                   {Red::Prod, "ReduceProd"},
                                                   {Red::L1, "ReduceL1"},
                                                   {Red::L2, "ReduceL2"},
                                                   {Red::LogSum, "ReduceLogSum"},
                                                   {Red::LogSumExp, "ReduceLogSumExp"},
                                                   {Red::SumSquare, "ReduceSumSquare"}};

// Output index of each input element when the axes in `mask` are reduced.
std::vector<size_t> output_index(const std::vector<int64_t>& dims, const std::vector<bool>& mask,
                                 size_t& n_out) {
  const int r = int(dims.size());
  std::vector<int64_t> odims;
  for (int d = 0; d < r; ++d)
    if (!mask[d]) odims.push_back(dims[d]);
  n_out = 1;
  for (int64_t d : odims) n_out *= size_t(d);
  size_t n = 1;
  for (int64_t d : dims) n *= size_t(d);
  std::vector<size_t> map(n);
  std::vector<int64_t> idx(r, 0);
  for (size_t i = 0; i < n; ++i) {
    size_t o = 0;
    for (int d = 0; d < r; ++d)
      if (!mask[d]) o = o * size_t(dims[d]) + size_t(idx[d]);
    map[i] = o;
    for (int d = r - 1; d >= 0; --d) {
      if (++idx[d] < dims[d]) break;
      idx[d] = 0;
    }
  }
  return map;
}

std::vector<double> ref_reduce(Red op, const std::vector<double>& x, const std::vector<int64_t>& dims,
                               const std::vector<bool>& mask) {
  size_t n_out;
  std::vector<size_t> map = output_index(dims, mask, n_out);
  std::vector<double> acc(n_out, 0.0), mx(n_out, -kInf), mn(n_out, kInf), prod(n_out, 1.0), cnt(n_out, 0.0);
  for (size_t i = 0; i < x.size(); ++i) {
    size_t o = map[i];
    acc[o] += op == Red::SumSquare || op == Red::L2 ? x[i] * x[i] : op == Red::L1 ? std::abs(x[i]) : x[i];
    mx[o] = std::max(mx[o], x[i]);
    mn[o] = std::min(mn[o], x[i]);
    prod[o] *= x[i];
    cnt[o] += 1;
  }
  std::vector<double> out(n_out);
  for (size_t o = 0; o < n_out; ++o) {
    switch (op) {
      case Red::Sum:
      case Red::L1:
      case Red::SumSquare:
        out[o] = acc[o];
        break;
      case Red::Mean:
        out[o] = acc[o] / cnt[o];
        break;
      case Red::Max:
        out[o] = mx[o];
        break;
      case Red::Min:
        out[o] = mn[o];
        break;
      case Red::Prod:
        out[o] = prod[o];
        break;
      case Red::L2:
        out[o] = std::sqrt(acc[o]);
        break;
      case Red::LogSum:
        out[o] = std::log(acc[o]);
        break;
      case Red::LogSumExp:
        out[o] = 0;
        break;
    }
  }
  if (op == Red::LogSumExp) {
    std::vector<double> s(n_out, 0.0);
    for (size_t i = 0; i < x.size(); ++i) s[map[i]] += std::exp(x[i] - mx[map[i]]);
    for (size_t o = 0; o < n_out; ++o) out[o] = std::log(s[o]) + mx[o];
  }
  return out;
}

// Data suited to each reduction: positive for LogSum, near 1 for Prod.
std::vector<double> data_for(Red op, size_t n, uint32_t seed) {
  if (op == Red::LogSum) return random_values(n, 0.1, 2.0, seed);
  if (op == Red::Prod) return random_values(n, 0.9, 1.1, seed);
  return random_values(n, -3.0, 3.0, seed);
}

std::vector<int64_t> axes_of(const std::vector<bool>& mask, bool negative) {
  std::vector<int64_t> axes;
  const int r = int(mask.size());
  for (int d = 0; d < r; ++d)
    if (mask[d]) axes.push_back(negative ? d - r : d);
  return axes;
}

std::vector<int64_t> reduced_dims(const std::vector<int64_t>& dims, const std::vector<bool>& mask,
                                  bool keep) {
  std::vector<int64_t> out;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (!mask[d])
      out.push_back(dims[d]);
    else if (keep)
      out.push_back(1);
  }
  return out;
}

// Runs a Reduce* op through a Session: ReduceSum takes its axes as an input (opset 13), the others as an
// attribute (opset 13). An empty mask means "no axes given".
Tensor run_reduce(Red op, const char* name, const Tensor& x, const std::vector<bool>& mask, bool keepdims,
                  bool negative_axes = false, int64_t noop = 0) {
  std::vector<int64_t> axes = axes_of(mask, negative_axes);
  std::map<std::string, Attribute> attrs{{"keepdims", int64_t(keepdims)}};
  std::vector<std::vector<int64_t>> int_inputs;
  if (op == Red::Sum) {
    attrs["noop_with_empty_axes"] = noop;
    if (!axes.empty()) int_inputs.push_back(axes);
  } else if (!axes.empty()) {
    attrs["axes"] = axes;
  }
  OneNode m(name, {{x.dtype(), shape_of(x.dims())}}, attrs, 13, 1, int_inputs);
  return m.run({x})[0];
}

// ---- Reduce*: every op over every axis subset of several shapes ----

TEST(reducenorm_Reduce, AllOpsAllAxisSubsetsMatchReference) {
  const std::vector<std::vector<int64_t>> shapes = {{7},           {5, 6},       {4, 3, 5}, {2, 3, 4, 5},
                                                    {3, 1, 4, 2},  {40, 33},     {33, 40},  {6, 70, 5},
                                                    {2, 37, 3, 5}, {2, 3, 40, 9}};
  uint32_t seed = 1;
  for (const auto& dims : shapes) {
    const int r = int(dims.size());
    size_t n = 1;
    for (int64_t d : dims) n *= size_t(d);
    for (auto [op, name] : kReductions) {
      std::vector<double> x = rounded(data_for(op, n, seed++), DType::Float);
      Tensor xt = floats(dims, x);
      for (int bits = 1; bits < (1 << r); ++bits) {
        std::vector<bool> mask(r);
        for (int d = 0; d < r; ++d) mask[d] = (bits >> d) & 1;
        for (bool keep : {true, false}) {
          Tensor y = run_reduce(op, name, xt, mask, keep, /*negative_axes=*/bits % 3 == 0);
          std::string what = std::string(name) + " dims " + dims_to_string(dims) + " mask " +
                             std::to_string(bits) + (keep ? " keepdims" : "");
          EXPECT_EQ(y.dims(), reduced_dims(dims, mask, keep)) << what;
          expect_close(values(y), ref_reduce(op, x, dims, mask), 2e-6, 1e-6, what);
          if (HasFailure()) return;
        }
      }
    }
  }
}

TEST(reducenorm_Reduce, DefaultAxesReduceEverything) {
  std::vector<double> x = random_values(24, -1, 1, 7);
  Tensor y = run_reduce(Red::Sum, "ReduceSum", floats({2, 3, 4}, x), {}, true);
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{1, 1, 1}));
  double s = 0;
  for (double v : rounded(x, DType::Float)) s += v;
  EXPECT_NEAR(values(y)[0], s, 1e-5);
  Tensor z = run_reduce(Red::Max, "ReduceMax", floats({2, 3, 4}, x), {}, false);
  EXPECT_EQ(z.rank(), 0);
}

TEST(reducenorm_Reduce, NoopWithEmptyAxesAppliesTheElementwisePart) {
  std::vector<double> x = {-2, -1, 0.5, 3, 4, -6};
  // ReduceSum with noop and no axes: identity.
  Tensor y = run_reduce(Red::Sum, "ReduceSum", floats({2, 3}, x), {}, true, false, /*noop=*/1);
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{2, 3}));
  expect_close(values(y), x, 0, 0, "ReduceSum noop");
  // Without noop the empty axes input reduces everything.
  // (The empty axes are fed at run time: Tensor::from with no values passes memcpy a null pointer.)
  OneNode all("ReduceSum", {{DType::Float, Shape{2, 3}}, {DType::Int64, Shape{0}}},
              {{"keepdims", int64_t(0)}}, 13);
  EXPECT_NEAR(values(all.run({floats({2, 3}, x), Tensor(DType::Int64, {0})})[0])[0], -1.5, 1e-6);
  // Reductions over no axes still apply their elementwise part (ONNX spec, onnx/onnx#7394).
  OneNode sq("ReduceSumSquare", {{DType::Float, Shape{2, 3}}}, {{"noop_with_empty_axes", int64_t(1)}}, 18, 1,
             {},
             /*infer=*/false);
  expect_close(values(sq.run({floats({2, 3}, x)})[0]), {4, 1, 0.25, 9, 16, 36}, 0, 0, "ReduceSumSquare noop");
  OneNode l1("ReduceL1", {{DType::Float, Shape{2, 3}}}, {{"noop_with_empty_axes", int64_t(1)}}, 18, 1, {},
             /*infer=*/false);
  expect_close(values(l1.run({floats({2, 3}, x)})[0]), {2, 1, 0.5, 3, 4, 6}, 0, 0, "ReduceL1 noop");
}

TEST(reducenorm_Reduce, Opset18TakesAxesAsInput) {
  std::vector<double> x = random_values(12, -1, 1, 3);
  OneNode m("ReduceMean", {{DType::Float, Shape{3, 4}}}, {{"keepdims", int64_t(0)}}, 18, 1, {{-1}},
            /*infer=*/false);
  Tensor y = m.run({floats({3, 4}, x)})[0];
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{3}));
  expect_close(values(y), ref_reduce(Red::Mean, rounded(x, DType::Float), {3, 4}, {false, true}), 1e-6, 1e-7,
               "opset 18 ReduceMean");
}

TEST(reducenorm_Reduce, EmptyReductionsGiveTheIdentity) {
  Tensor x(DType::Float, {2, 0, 3});
  auto one = [&](Red op, const char* name) {
    return values(run_reduce(op, name, x, {false, true, false}, false));
  };
  EXPECT_EQ(one(Red::Sum, "ReduceSum"), std::vector<double>(6, 0.0));
  EXPECT_EQ(one(Red::Prod, "ReduceProd"), std::vector<double>(6, 1.0));
  EXPECT_EQ(one(Red::Max, "ReduceMax"), std::vector<double>(6, -kInf));
  EXPECT_EQ(one(Red::Min, "ReduceMin"), std::vector<double>(6, kInf));
  EXPECT_EQ(one(Red::LogSum, "ReduceLogSum"), std::vector<double>(6, -kInf));
  EXPECT_EQ(one(Red::LogSumExp, "ReduceLogSumExp"), std::vector<double>(6, -kInf));
  EXPECT_EQ(one(Red::L2, "ReduceL2"), std::vector<double>(6, 0.0));
  EXPECT_TRUE(std::isnan(one(Red::Mean, "ReduceMean")[0]));
  Tensor xi(DType::Int32, {0, 4});
  EXPECT_EQ(values(run_reduce(Red::Max, "ReduceMax", xi, {true, false}, true)),
            std::vector<double>(4, double(std::numeric_limits<int32_t>::lowest())));
  EXPECT_EQ(values(run_reduce(Red::Min, "ReduceMin", xi, {true, false}, true)),
            std::vector<double>(4, double(std::numeric_limits<int32_t>::max())));
  // A zero-size kept axis: empty output.
  Tensor e = run_reduce(Red::Sum, "ReduceSum", Tensor(DType::Float, {0, 5}), {false, true}, true);
  EXPECT_EQ(e.dims(), (std::vector<int64_t>{0, 1}));
}

TEST(reducenorm_Reduce, NaNAndInfinities) {
  const double nan = std::nan("");
  std::vector<double> x(100, 1.0);
  x[87] = nan;  // row 1
  for (auto [op, name] : kReductions) {
    Tensor y = run_reduce(op, name, floats({2, 50}, x), {false, true}, false);
    std::vector<double> v = values(y);
    EXPECT_FALSE(std::isnan(v[0])) << name;
    EXPECT_TRUE(std::isnan(v[1])) << name << " must propagate NaN";
  }
  // LogSumExp with infinities: a +inf gives +inf, all -inf gives -inf, no NaN.
  std::vector<double> w = {1, kInf, 2, -kInf, -kInf, -kInf, 1000, 1000, -kInf};
  Tensor y = run_reduce(Red::LogSumExp, "ReduceLogSumExp", floats({3, 3}, w), {false, true}, false);
  expect_close(values(y), {kInf, -kInf, 1000 + std::log(2.0)}, 1e-6, 0, "LogSumExp infinities");
}

TEST(reducenorm_Reduce, SixteenBitFloatsAccumulateInFloat) {
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    // 3000 values of 1 + small: an fp16 accumulator would stall at 2048.
    std::vector<double> x = rounded(random_values(2 * 3000, 0.9, 1.1, 11), dt);
    Tensor xt = make_tensor(dt, {2, 3000}, x);
    for (auto [op, name] : {kReductions[0], kReductions[1], kReductions[2], kReductions[6], kReductions[8]}) {
      Tensor y = run_reduce(op, name, xt, {false, true}, true);
      ASSERT_EQ(y.dtype(), dt);
      // The result itself is rounded to the 16-bit type.
      const double tol = dt == DType::Float16 ? 1e-3 : 8e-3;
      expect_close(values(y), ref_reduce(op, x, {2, 3000}, {false, true}), tol, 0,
                   std::string(name) + " " + std::string(dtype_name(dt)));
    }
    // The column path converts too.
    Tensor y = run_reduce(Red::Sum, "ReduceSum", make_tensor(dt, {3000, 2}, x), {true, false}, false);
    expect_close(values(y), ref_reduce(Red::Sum, x, {3000, 2}, {true, false}),
                 dt == DType::Float16 ? 1e-3 : 8e-3, 0, "column sum 16-bit");
  }
}

TEST(reducenorm_Reduce, IntegersWrapLikeNumpyAndMeanTruncates) {
  Tensor x = make_tensor(DType::Int32, {2, 3}, {2147483647, 1, 0, -7, 2, 0});
  expect_close(values(run_reduce(Red::Sum, "ReduceSum", x, {false, true}, false)),
               {double(std::numeric_limits<int32_t>::lowest()), -5}, 0, 0, "int32 sum wraps");
  expect_close(values(run_reduce(Red::Mean, "ReduceMean", make_tensor(DType::Int64, {2, 2}, {7, 0, -7, 0}),
                                 {false, true}, false)),
               {3, -3}, 0, 0, "int64 mean truncates");
  expect_close(
      values(run_reduce(Red::Prod, "ReduceProd", make_tensor(DType::Int64, {3}, {-3, 5, 7}), {true}, false)),
      {-105}, 0, 0, "int64 prod");
  expect_close(
      values(run_reduce(Red::L1, "ReduceL1", make_tensor(DType::Int32, {3}, {-3, 5, -7}), {true}, false)),
      {15}, 0, 0, "int32 L1");
  Tensor u8 = make_tensor(DType::UInt8, {2, 2}, {200, 3, 7, 255});
  expect_close(values(run_reduce(Red::Max, "ReduceMax", u8, {true, false}, false)), {200, 255}, 0, 0,
               "uint8 max");
  expect_close(values(run_reduce(Red::Min, "ReduceMin", u8, {false, true}, false)), {3, 7}, 0, 0,
               "uint8 min");
}

TEST(reducenorm_Reduce, LongSumsKeepDoublePrecision) {
  // 4M copies of float(0.1): a float accumulator is off by ~1e-3 relative; the engine accumulates in double.
  const int64_t n = int64_t(1) << 22;
  Tensor x(DType::Float, {n});
  std::fill(x.data<float>(), x.data<float>() + n, 0.1f);
  const double exact = double(0.1f) * double(n);
  Tensor y = run_reduce(Red::Sum, "ReduceSum", x, {true}, false);
  EXPECT_NEAR(values(y)[0], exact, exact * 1e-7);
  Tensor m = run_reduce(Red::Mean, "ReduceMean", x.reshaped({1024, 4096}), {true, false}, false);
  for (double v : values(m)) ASSERT_NEAR(v, double(0.1f), 1e-7);
}

TEST(reducenorm_Reduce, LargeTensorsOnEveryPathMatchReference) {
  struct Case {
    std::vector<int64_t> dims;
    std::vector<bool> mask;
  };
  const std::vector<Case> cases = {
      {{3, 40000}, {true, true}},             // one output: split reduction, lanes
      {{40000, 3}, {true, false}},            // K = 3 lane mode, split
      {{300, 600}, {false, true}},            // row reduce, parallel pieces
      {{64, 100, 48}, {false, true, false}},  // column mode, K = 48, parallel pieces
      {{100000, 5}, {false, true}},           // short reduction, many outputs
      {{9, 500, 70}, {true, true, false}},    // column mode, one piece: split
      {{8, 49, 2048}, {false, true, false}},  // column mode, 16 pieces of 1024: parallel pieces
      {{5, 49, 1100}, {false, true, false}},  // column mode, 10 pieces of 1024 and 76
      {{20, 40, 30, 20}, {true, false, true, false}}};
  uint32_t seed = 100;
  for (const auto& c : cases) {
    size_t n = 1;
    for (int64_t d : c.dims) n *= size_t(d);
    for (auto [op, name] : {kReductions[0], kReductions[2], kReductions[6], kReductions[8]}) {
      std::vector<double> x = rounded(data_for(op, n, seed++), DType::Float);
      Tensor y = run_reduce(op, name, floats(c.dims, x), c.mask, false);
      expect_close(values(y), ref_reduce(op, x, c.dims, c.mask), 2e-6, 1e-5,
                   std::string(name) + " " + dims_to_string(c.dims));
    }
  }
}

TEST(reducenorm_Reduce, ResultsDoNotDependOnTheThreadCount) {
  std::vector<double> x = random_values(3 * 200000, -1, 1, 42);
  Tensor xt = floats({3, 200000}, x);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  std::vector<double> one = values(run_reduce(Red::Sum, "ReduceSum", xt, {true, true}, false));
  omp_set_num_threads(std::max(2, saved));
  std::vector<double> many = values(run_reduce(Red::Sum, "ReduceSum", xt, {true, true}, false));
  omp_set_num_threads(saved);
  EXPECT_EQ(one, many);
}

// ---- ArgMax / ArgMin ----

int64_t ref_arg(const std::vector<double>& row, bool is_max, bool last) {
  int64_t best = 0;
  for (int64_t i = 1; i < int64_t(row.size()); ++i) {
    double v = row[i], b = row[best];
    bool take;
    if (std::isnan(b))
      take = last && std::isnan(v);
    else if (std::isnan(v))
      take = true;
    else
      take = is_max ? (last ? v >= b : v > b) : (last ? v <= b : v < b);
    if (take) best = i;
  }
  return best;
}

std::vector<int64_t> run_arg(bool is_max, bool last, const Tensor& x, int64_t axis, bool keepdims = false) {
  OneNode m(is_max ? "ArgMax" : "ArgMin", {{x.dtype(), shape_of(x.dims())}},
            {{"axis", axis}, {"keepdims", int64_t(keepdims)}, {"select_last_index", int64_t(last)}}, 13);
  Tensor y = m.run({x})[0];
  EXPECT_EQ(y.dtype(), DType::Int64);
  return std::vector<int64_t>(y.data<int64_t>(), y.data<int64_t>() + y.numel());
}

TEST(reducenorm_Arg, RowsWithTiesAndNaNMatchNumpy) {
  const double nan = std::nan("");
  // Values drawn from a few levels so maxima repeat; rows long enough for the lane path.
  for (int64_t n : {5, 130, 1000}) {
    std::mt19937 rng(static_cast<unsigned>(n));
    std::uniform_int_distribution<int> level(0, 5);
    std::vector<double> x(size_t(8 * n));
    for (auto& v : x) v = level(rng);
    x[size_t(2 * n + n / 2)] = nan;  // row 2: one NaN
    x[size_t(3 * n + 1)] = nan;      // row 3: two NaNs
    x[size_t(3 * n + n - 1)] = nan;
    for (int64_t i = 0; i < n; ++i) x[size_t(5 * n + i)] = 1.0;  // row 5: all equal
    for (bool is_max : {true, false})
      for (bool last : {false, true}) {
        std::vector<int64_t> got = run_arg(is_max, last, floats({8, n}, x), 1);
        for (int r = 0; r < 8; ++r) {
          std::vector<double> row(x.begin() + r * n, x.begin() + (r + 1) * n);
          EXPECT_EQ(got[r], ref_arg(row, is_max, last))
              << (is_max ? "ArgMax" : "ArgMin") << (last ? " last" : "") << " n=" << n << " row " << r;
        }
      }
  }
}

TEST(reducenorm_Arg, ColumnsIntegersAndSixteenBit) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> level(-3, 3);
  std::vector<double> x(6 * 50 * 7);
  for (auto& v : x) v = level(rng);
  for (DType dt : {DType::Float, DType::Int32, DType::Float16, DType::Int8}) {
    for (bool last : {false, true}) {
      std::vector<int64_t> got = run_arg(true, last, make_tensor(dt, {6, 50, 7}, x), 1, true);
      ASSERT_EQ(got.size(), 42u);
      for (int o = 0; o < 6; ++o)
        for (int j = 0; j < 7; ++j) {
          std::vector<double> col(50);
          for (int i = 0; i < 50; ++i) col[i] = x[size_t((o * 50 + i) * 7 + j)];
          EXPECT_EQ(got[o * 7 + j], ref_arg(col, true, last))
              << dtype_name(dt) << " column " << o << "," << j;
        }
    }
  }
}

TEST(reducenorm_Arg, EmptyAxisIsAnError) {
  OneNode m("ArgMax", {{DType::Float, Shape{3, 0}}}, {{"axis", int64_t(1)}}, 13);
  try {
    m.run({Tensor(DType::Float, {3, 0})});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ArgMax"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("size 0"), std::string::npos) << e.what();
  }
}

// ---- Softmax family ----

// Softmax / LogSoftmax of one strided lane of values.
std::vector<double> ref_softmax(const std::vector<double>& x, int64_t outer, int64_t n, int64_t inner,
                                bool log) {
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      auto at = [&](int64_t i) { return size_t((o * n + i) * inner + j); };
      double m = -kInf;
      for (int64_t i = 0; i < n; ++i) m = std::max(m, x[at(i)]);
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += std::exp(x[at(i)] - m);
      for (int64_t i = 0; i < n; ++i)
        y[at(i)] = log ? x[at(i)] - m - std::log(s) : std::exp(x[at(i)] - m) / s;
    }
  return y;
}

TEST(reducenorm_Softmax, OpsetsBefore13CoerceTo2D) {
  std::vector<double> x = rounded(random_values(2 * 3 * 4, -3, 3, 9), DType::Float);
  for (bool log : {false, true}) {
    const char* op = log ? "LogSoftmax" : "Softmax";
    OneNode old(op, {{DType::Float, Shape{2, 3, 4}}}, {{"axis", int64_t(1)}}, 11);
    expect_close(values(old.run({floats({2, 3, 4}, x)})[0]), ref_softmax(x, 2, 12, 1, log), 1e-5, 1e-7,
                 std::string(op) + " opset 11");
    OneNode now(op, {{DType::Float, Shape{2, 3, 4}}}, {{"axis", int64_t(1)}}, 13);
    expect_close(values(now.run({floats({2, 3, 4}, x)})[0]), ref_softmax(x, 2, 3, 4, log), 1e-5, 1e-7,
                 std::string(op) + " opset 13");
    OneNode def(op, {{DType::Float, Shape{2, 3, 4}}}, {}, 13);
    expect_close(values(def.run({floats({2, 3, 4}, x)})[0]), ref_softmax(x, 6, 4, 1, log), 1e-5, 1e-7,
                 std::string(op) + " default axis");
  }
}

TEST(reducenorm_Softmax, RowsColumnsAndLongRowsMatchReference) {
  struct Case {
    std::vector<int64_t> dims;
    int64_t axis;
    int64_t outer, n, inner;
  };
  const std::vector<Case> cases = {{{64, 1000}, -1, 64, 1000, 1},       // rows, parallel
                                   {{3, 40000}, 1, 3, 40000, 1},        // rows longer than the in-cache path
                                   {{500, 37}, 0, 1, 500, 37},          // columns
                                   {{4, 300, 1500}, 1, 4, 300, 1500}};  // columns in several chunks
  uint32_t seed = 20;
  for (const auto& c : cases) {
    size_t total = size_t(c.outer * c.n * c.inner);
    std::vector<double> x = rounded(random_values(total, -20, 20, seed++), DType::Float);
    for (bool log : {false, true}) {
      const char* op = log ? "LogSoftmax" : "Softmax";
      OneNode m(op, {{DType::Float, shape_of(c.dims)}}, {{"axis", c.axis}}, 13);
      expect_close(values(m.run({floats(c.dims, x)})[0]), ref_softmax(x, c.outer, c.n, c.inner, log), 1e-5,
                   1e-7, std::string(op) + " " + dims_to_string(c.dims));
    }
  }
}

TEST(reducenorm_Softmax, MaskedAndExtremeValues) {
  const double nan = std::nan("");
  // Row 0: -inf masks give exact zeros. Row 1: huge values stay finite. Row 2: all -inf is NaN (as numpy).
  std::vector<double> x = {0, -kInf, 1, -kInf, 1e30, 1e30 - 1e25, -1e30, 0, -kInf, -kInf, -kInf, -kInf};
  for (int64_t axis : {1, 0}) {
    // axis 0 runs the same data through the column path (transposed layout).
    std::vector<double> xt = x;
    std::vector<int64_t> dims = {3, 4};
    if (axis == 0) {
      dims = {4, 3};
      for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 4; ++c) xt[c * 3 + r] = x[r * 4 + c];
    }
    OneNode m("Softmax", {{DType::Float, shape_of(dims)}}, {{"axis", axis}}, 13);
    std::vector<double> y = values(m.run({floats(dims, xt)})[0]);
    auto at = [&](int r, int c) { return axis == 1 ? y[r * 4 + c] : y[c * 3 + r]; };
    EXPECT_EQ(at(0, 1), 0.0);
    EXPECT_EQ(at(0, 3), 0.0);
    EXPECT_NEAR(at(0, 2), 1 / (1 + std::exp(-1.0)), 1e-6);
    EXPECT_NEAR(at(1, 0) + at(1, 1), 1.0, 1e-6);
    EXPECT_EQ(at(1, 2), 0.0);
    for (int c = 0; c < 4; ++c) EXPECT_TRUE(std::isnan(at(2, c))) << "axis " << axis;
  }
  // A NaN poisons its row only.
  OneNode m("LogSoftmax", {{DType::Float, Shape{2, 3}}}, {}, 13);
  std::vector<double> y = values(m.run({floats({2, 3}, {1, nan, 2, 1, 2, 3})})[0]);
  for (int c = 0; c < 3; ++c) EXPECT_TRUE(std::isnan(y[c]));
  EXPECT_NEAR(y[5], -std::log(1 + std::exp(-1.0) + std::exp(-2.0)), 1e-6);
}

TEST(reducenorm_Softmax, SixteenBitFloats) {
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    std::vector<double> x = rounded(random_values(6 * 300, -4, 4, 31), dt);
    const double tol = dt == DType::Float16 ? 2e-3 : 1e-2;
    OneNode rows("Softmax", {{dt, Shape{6, 300}}}, {}, 13);
    Tensor y = rows.run({make_tensor(dt, {6, 300}, x)})[0];
    ASSERT_EQ(y.dtype(), dt);
    expect_close(values(y), ref_softmax(x, 6, 300, 1, false), tol, 1e-4, "softmax rows 16-bit");
    OneNode cols("LogSoftmax", {{dt, Shape{300, 6}}}, {{"axis", int64_t(0)}}, 13);
    expect_close(values(cols.run({make_tensor(dt, {300, 6}, x)})[0]), ref_softmax(x, 1, 300, 6, true), tol,
                 1e-2, "logsoftmax columns 16-bit");
  }
}

TEST(reducenorm_Softmax, HardmaxPicksTheFirstMaximum) {
  OneNode m("Hardmax", {{DType::Float, Shape{3, 4}}}, {}, 13);
  std::vector<double> y = values(m.run({floats({3, 4}, {1, 3, 3, 0, -1, -1, -1, -1, 0, 0, 0, 5})})[0]);
  EXPECT_EQ(y, (std::vector<double>{0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1}));
  OneNode c("Hardmax", {{DType::Float, Shape{3, 2}}}, {{"axis", int64_t(0)}}, 13);
  EXPECT_EQ(values(c.run({floats({3, 2}, {1, 7, 4, 7, 4, 0})})[0]), (std::vector<double>{0, 1, 1, 0, 0, 0}));
}

// ---- LayerNormalization, InstanceNormalization, BatchNormalization ----

struct Moments {
  std::vector<double> mean, inv;
};
Moments ref_moments(const std::vector<double>& x, int64_t rows, int64_t n, double eps) {
  Moments m{std::vector<double>(rows), std::vector<double>(rows)};
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0, q = 0;
    for (int64_t i = 0; i < n; ++i) s += x[size_t(r * n + i)];
    m.mean[r] = s / double(n);
    for (int64_t i = 0; i < n; ++i) q += std::pow(x[size_t(r * n + i)] - m.mean[r], 2);
    m.inv[r] = 1 / std::sqrt(q / double(n) + eps);
  }
  return m;
}

TEST(reducenorm_LayerNorm, AxesStatisticsAndScaleBroadcast) {
  const std::vector<int64_t> dims = {4, 6, 10};
  std::vector<double> x = rounded(random_values(240, -2, 5, 41), DType::Float);
  for (int64_t axis : {-1, 1, 0}) {
    const int a = int(axis < 0 ? axis + 3 : axis);
    int64_t rows = 1, n = 1;
    for (int d = 0; d < 3; ++d) (d < a ? rows : n) *= dims[d];
    std::vector<int64_t> norm(dims.begin() + a, dims.end());
    std::vector<double> sc = rounded(random_values(size_t(n), 0.5, 1.5, 42), DType::Float);
    std::vector<double> bs = rounded(random_values(size_t(n), -1, 1, 43), DType::Float);
    OneNode m(
        "LayerNormalization",
        {{DType::Float, shape_of(dims)}, {DType::Float, shape_of(norm)}, {DType::Float, shape_of(norm)}},
        {{"axis", axis}, {"epsilon", 1e-3f}}, 17, 3);
    auto outs = m.run({floats(dims, x), floats(norm, sc), floats(norm, bs)});
    Moments mo = ref_moments(x, rows, n, double(1e-3f));
    std::vector<double> want(x.size());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < n; ++i)
        want[size_t(r * n + i)] = (x[size_t(r * n + i)] - mo.mean[r]) * mo.inv[r] * sc[i] + bs[i];
    const std::string what = "axis " + std::to_string(axis);
    expect_close(values(outs[0]), want, 1e-5, 1e-5, "Y " + what);
    std::vector<int64_t> stat(dims.begin(), dims.begin() + a);
    stat.resize(3, 1);
    EXPECT_EQ(outs[1].dims(), stat);
    EXPECT_EQ(outs[1].dtype(), DType::Float);
    expect_close(values(outs[1]), mo.mean, 1e-6, 1e-6, "Mean " + what);
    expect_close(values(outs[2]), mo.inv, 1e-5, 1e-6, "InvStdDev " + what);
  }
  // Scale of shape [6, 1] broadcast over the normalised shape [4, 6, 10]; no bias; only Y requested.
  std::vector<double> sc = {2, -1, 0.5, 1, 3, -2};
  OneNode m("LayerNormalization", {{DType::Float, Shape{4, 6, 10}}, {DType::Float, Shape{6, 1}}},
            {{"axis", int64_t(0)}}, 17, 1, {}, /*infer=*/false);
  std::vector<double> y = values(m.run({floats(dims, x), floats({6, 1}, sc)})[0]);
  Moments mo = ref_moments(x, 1, 240, double(1e-5f));
  for (size_t i = 0; i < 240; ++i)
    ASSERT_NEAR(y[i], (x[i] - mo.mean[0]) * mo.inv[0] * sc[(i / 10) % 6], 1e-5) << i;
}

TEST(reducenorm_LayerNorm, LargeRowsAndSixteenBit) {
  // 4096 x 768 runs the parallel path.
  std::vector<double> x = rounded(random_values(4096 * 768, -3, 3, 51), DType::Float);
  std::vector<double> ones(768, 1.0), zeros(768, 0.0);
  OneNode m("LayerNormalization",
            {{DType::Float, Shape{4096, 768}}, {DType::Float, Shape{768}}, {DType::Float, Shape{768}}}, {},
            17);
  std::vector<double> y =
      values(m.run({floats({4096, 768}, x), floats({768}, ones), floats({768}, zeros)})[0]);
  Moments mo = ref_moments(x, 4096, 768, 1e-5);
  for (int64_t r = 0; r < 4096; r += 97)
    for (int64_t i = 0; i < 768; i += 13)
      ASSERT_NEAR(y[size_t(r * 768 + i)], (x[size_t(r * 768 + i)] - mo.mean[r]) * mo.inv[r], 2e-5);
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    std::vector<double> xs = rounded(random_values(8 * 64, -3, 3, 52), dt);
    OneNode h("LayerNormalization", {{dt, Shape{8, 64}}, {dt, Shape{64}}}, {}, 17);
    Tensor yt = h.run({make_tensor(dt, {8, 64}, xs), make_tensor(dt, {64}, std::vector<double>(64, 1.0))})[0];
    ASSERT_EQ(yt.dtype(), dt);
    Moments ms = ref_moments(xs, 8, 64, 1e-5);
    std::vector<double> want(xs.size());
    for (size_t i = 0; i < xs.size(); ++i) want[i] = (xs[i] - ms.mean[i / 64]) * ms.inv[i / 64];
    expect_close(values(yt), want, dt == DType::Float16 ? 2e-3 : 1e-2, 1e-2, "16-bit layernorm");
  }
}

TEST(reducenorm_LayerNorm, BadScaleShapeIsAnError) {
  OneNode m("LayerNormalization", {{DType::Float, Shape{2, 3}}, {DType::Float, Shape{4}}}, {}, 17, 1, {},
            /*infer=*/false);
  try {
    m.run({floats({2, 3}, std::vector<double>(6, 1.0)), floats({4}, std::vector<double>(4, 1.0))});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Scale"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("LayerNormalization"), std::string::npos) << e.what();
  }
}

TEST(reducenorm_InstanceNorm, MatchesReference) {
  const std::vector<int64_t> dims = {3, 5, 7, 9};
  std::vector<double> x = rounded(random_values(3 * 5 * 63, -2, 4, 61), DType::Float);
  std::vector<double> sc = {1, 2, -1, 0.5, 3}, bs = {0, 1, 2, 3, 4};
  OneNode m("InstanceNormalization",
            {{DType::Float, shape_of(dims)}, {DType::Float, Shape{5}}, {DType::Float, Shape{5}}},
            {{"epsilon", 1e-2f}}, 6);
  std::vector<double> y = values(m.run({floats(dims, x), floats({5}, sc), floats({5}, bs)})[0]);
  Moments mo = ref_moments(x, 15, 63, double(1e-2f));
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t row = i / 63, c = row % 5;
    ASSERT_NEAR(y[i], (x[i] - mo.mean[row]) * mo.inv[row] * sc[c] + bs[c], 1e-5) << i;
  }
}

TEST(reducenorm_BatchNorm, InferenceTrainingAndPerActivation) {
  const std::vector<int64_t> dims = {4, 3, 5, 6};
  std::vector<double> x = rounded(random_values(4 * 3 * 30, -2, 4, 71), DType::Float);
  std::vector<double> sc = {1, 2, -1}, bs = {0.5, 1, 2}, mean = {0.1, -0.2, 0.3}, var = {1, 0.5, 2};
  auto ins = [&]() {
    return std::vector<Tensor>{floats(dims, x), floats({3}, sc), floats({3}, bs), floats({3}, mean),
                               floats({3}, var)};
  };
  std::vector<std::pair<DType, Shape>> types = {{DType::Float, shape_of(dims)},
                                                {DType::Float, Shape{3}},
                                                {DType::Float, Shape{3}},
                                                {DType::Float, Shape{3}},
                                                {DType::Float, Shape{3}}};
  // Inference.
  OneNode inf("BatchNormalization", types, {{"epsilon", 1e-3f}}, 15);
  std::vector<double> y = values(inf.run(ins())[0]);
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t c = (i / 30) % 3;
    ASSERT_NEAR(y[i], (x[i] - mean[c]) / std::sqrt(var[c] + double(1e-3f)) * sc[c] + bs[c], 1e-5) << i;
  }
  // Training mode: batch statistics normalise, running statistics are updated.
  OneNode tr("BatchNormalization", types, {{"training_mode", int64_t(1)}, {"momentum", 0.8f}}, 15, 3);
  auto outs = tr.run(ins());
  std::vector<double> bm(3, 0), bv(3, 0);
  for (size_t i = 0; i < x.size(); ++i) bm[(i / 30) % 3] += x[i] / 120;
  for (size_t i = 0; i < x.size(); ++i) bv[(i / 30) % 3] += std::pow(x[i] - bm[(i / 30) % 3], 2) / 120;
  std::vector<double> yt = values(outs[0]);
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t c = (i / 30) % 3;
    ASSERT_NEAR(yt[i], (x[i] - bm[c]) / std::sqrt(bv[c] + 1e-5) * sc[c] + bs[c], 1e-5) << i;
  }
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(values(outs[1])[c], mean[c] * 0.8 + bm[c] * 0.2, 1e-5);
    EXPECT_NEAR(values(outs[2])[c], var[c] * 0.8 + bv[c] * 0.2, 1e-5);
  }
  // Opset 7, spatial = 0: one parameter per activation (C x H x W).
  std::vector<double> pa = random_values(90, 0.5, 1.5, 72);
  std::vector<std::pair<DType, Shape>> ptypes = {{DType::Float, shape_of(dims)},
                                                 {DType::Float, Shape{3, 5, 6}},
                                                 {DType::Float, Shape{3, 5, 6}},
                                                 {DType::Float, Shape{3, 5, 6}},
                                                 {DType::Float, Shape{3, 5, 6}}};
  OneNode per("BatchNormalization", ptypes, {{"spatial", int64_t(0)}}, 7, 1, {}, /*infer=*/false);
  Tensor p = floats({3, 5, 6}, rounded(pa, DType::Float));
  std::vector<double> yp = values(per.run({floats(dims, x), p, p, p, p})[0]);
  std::vector<double> pr = rounded(pa, DType::Float);
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = pr[i % 90];
    ASSERT_NEAR(yp[i], (x[i] - v) / std::sqrt(v + 1e-5) * v + v, 1e-5) << i;
  }
}

TEST(reducenorm_BatchNorm, WrongParameterSizeIsAnError) {
  OneNode m("BatchNormalization",
            {{DType::Float, Shape{2, 3, 4}},
             {DType::Float, Shape{2}},
             {DType::Float, Shape{3}},
             {DType::Float, Shape{3}},
             {DType::Float, Shape{3}}},
            {}, 15, 1, {}, /*infer=*/false);
  std::vector<double> three(3, 1.0);
  try {
    m.run({floats({2, 3, 4}, std::vector<double>(24, 1.0)), floats({2}, {1, 1}), floats({3}, three),
           floats({3}, three), floats({3}, three)});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("scale"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("one per channel"), std::string::npos) << e.what();
  }
}

// ---- LpNormalization, MeanVarianceNormalization, LRN ----

TEST(reducenorm_LpNorm, RowsColumnsAndZeroVectors) {
  std::vector<double> x = rounded(random_values(4 * 5 * 6, -2, 2, 81), DType::Float);
  for (int i = 0; i < 6; ++i) x[size_t(i)] = 0;  // the first row (axis -1) is all zero
  for (int64_t p : {1, 2})
    for (int64_t axis : {-1, 1}) {
      OneNode m("LpNormalization", {{DType::Float, Shape{4, 5, 6}}}, {{"axis", axis}, {"p", p}}, 1);
      std::vector<double> y = values(m.run({floats({4, 5, 6}, x)})[0]);
      const int64_t n = axis == -1 ? 6 : 5, inner = axis == -1 ? 1 : 6, outer = axis == -1 ? 20 : 4;
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < inner; ++j) {
          double norm = 0;
          for (int64_t i = 0; i < n; ++i) {
            double v = x[size_t((o * n + i) * inner + j)];
            norm += p == 1 ? std::abs(v) : v * v;
          }
          if (p == 2) norm = std::sqrt(norm);
          for (int64_t i = 0; i < n; ++i) {
            const size_t k = size_t((o * n + i) * inner + j);
            ASSERT_NEAR(y[k], norm > 0 ? x[k] / norm : 0.0, 1e-6) << "p " << p << " axis " << axis;
          }
        }
    }
  EXPECT_THROW(OneNode("LpNormalization", {{DType::Float, Shape{2}}}, {{"p", int64_t(3)}}, 1, 1, {}, false)
                   .run({floats({2}, {1, 2})}),
               Error);
}

TEST(reducenorm_MVN, DefaultAndCustomAxes) {
  const std::vector<int64_t> dims = {3, 4, 5, 6};
  std::vector<double> x = rounded(random_values(360, -2, 5, 91), DType::Float);
  for (std::vector<int64_t> axes : {std::vector<int64_t>{0, 2, 3}, std::vector<int64_t>{1, -1}}) {
    std::map<std::string, Attribute> attrs;
    if (axes.size() == 2) attrs["axes"] = axes;
    OneNode m("MeanVarianceNormalization", {{DType::Float, shape_of(dims)}}, attrs, 13);
    std::vector<double> y = values(m.run({floats(dims, x)})[0]);
    std::vector<bool> mask(4, false);
    for (int64_t a : axes) mask[size_t(a < 0 ? a + 4 : a)] = true;
    size_t n_out;
    std::vector<size_t> map = output_index(dims, mask, n_out);
    std::vector<double> mean = ref_reduce(Red::Mean, x, dims, mask), sq(n_out, 0), cnt(n_out, 0);
    for (size_t i = 0; i < x.size(); ++i) {
      sq[map[i]] += std::pow(x[i] - mean[map[i]], 2);
      cnt[map[i]] += 1;
    }
    for (size_t i = 0; i < x.size(); ++i) {
      const size_t o = map[i];
      ASSERT_NEAR(y[i], (x[i] - mean[o]) / (std::sqrt(sq[o] / cnt[o]) + 1e-9), 1e-5) << i;
    }
  }
}

TEST(reducenorm_LRN, MatchesReference) {
  const std::vector<int64_t> dims = {2, 7, 3, 4};
  std::vector<double> x = rounded(random_values(2 * 7 * 12, -2, 2, 101), DType::Float);
  for (int64_t size : {1, 3, 4})
    for (float beta : {0.75f, 0.6f}) {
      const float alpha = 0.01f, bias = 1.5f;
      OneNode m("LRN", {{DType::Float, shape_of(dims)}},
                {{"size", size}, {"alpha", alpha}, {"beta", beta}, {"bias", bias}}, 13);
      std::vector<double> y = values(m.run({floats(dims, x)})[0]);
      for (int64_t n = 0; n < 2; ++n)
        for (int64_t c = 0; c < 7; ++c)
          for (int64_t s = 0; s < 12; ++s) {
            double sq = 0;
            for (int64_t cc = std::max<int64_t>(0, c - (size - 1) / 2);
                 cc <= std::min<int64_t>(6, c + size / 2); ++cc)
              sq += std::pow(x[size_t((n * 7 + cc) * 12 + s)], 2);
            const size_t k = size_t((n * 7 + c) * 12 + s);
            const double want =
                x[k] / std::pow(double(bias) + double(alpha) / double(size) * sq, double(beta));
            ASSERT_NEAR(y[k], want, 1e-5 * std::max(1.0, std::abs(want)))
                << "size " << size << " beta " << beta;
          }
    }
}

// ---- errors ----

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UnsupportedError& e) {
    return std::string("unsupported: ") + e.what();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(reducenorm_Errors, BadAxesAndTypesGiveClearMessages) {
  Tensor x = floats({2, 3}, std::vector<double>(6, 1.0));
  // Axes given at run time are validated by the kernel.
  std::string msg = error_of([&] {
    OneNode m("ReduceSum", {{DType::Float, Shape{2, 3}}, {DType::Int64, Shape{1}}}, {}, 13, 1, {}, false);
    m.run({x, make_tensor(DType::Int64, {1}, {2})});
  });
  EXPECT_NE(msg.find("ReduceSum"), std::string::npos) << msg;
  EXPECT_NE(msg.find("axis 2 is out of range"), std::string::npos) << msg;
  msg = error_of([&] {
    OneNode m("ReduceSum", {{DType::Float, Shape{2, 3}}, {DType::Int64, Shape{2}}}, {}, 13, 1, {}, false);
    m.run({x, make_tensor(DType::Int64, {2}, {1, -1})});
  });
  EXPECT_NE(msg.find("listed twice"), std::string::npos) << msg;
  msg = error_of([&] {
    OneNode m("ReduceMax", {{DType::Float, Shape{2, 3}}}, {{"axes", std::vector<int64_t>{-3}}}, 13, 1, {},
              false);
    m.run({x});
  });
  EXPECT_NE(msg.find("out of range"), std::string::npos) << msg;
  msg = error_of([&] {
    OneNode m("Softmax", {{DType::Float, Shape{2, 3}}}, {{"axis", int64_t(2)}}, 13, 1, {}, false);
    m.run({x});
  });
  EXPECT_NE(msg.find("Softmax"), std::string::npos) << msg;
  EXPECT_NE(msg.find("out of range"), std::string::npos) << msg;
  // Valid types the kernels do not implement are reported as unsupported.
  msg = error_of([&] {
    OneNode m("ReduceSum", {{DType::Int16, Shape{2}}}, {}, 13, 1, {}, false);
    m.run({make_tensor(DType::Int16, {2}, {1, 2})});
  });
  EXPECT_EQ(msg.rfind("unsupported: ", 0), 0u) << msg;
  EXPECT_NE(msg.find("int16"), std::string::npos) << msg;
  msg = error_of([&] {
    OneNode m("Softmax", {{DType::Int32, Shape{2}}}, {}, 13, 1, {}, false);
    m.run({make_tensor(DType::Int32, {2}, {1, 2})});
  });
  EXPECT_EQ(msg.rfind("unsupported: ", 0), 0u) << msg;
}

}  // namespace
}  // namespace gaf
