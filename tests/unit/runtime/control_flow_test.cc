// If, Loop and Scan: subgraphs that read values of enclosing graphs, run, fuse inside, and survive export.
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <cmath>

#include "gaf/onnx_io.h"
#include "gaf/passes.h"
#include "gaf/session.h"
#include "gaf/tools.h"
#include "test_util.h"

namespace gaf {
namespace {

using testing::parse;

// h <- tanh(h * x) + h, n times, from h = x; the trace holds every step's h. The body reads x from the main
// graph and a constant w the main graph defines only for the body.
const char* kLoopModel = R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (float[4,16] x, int64 n) => (float[4,16] y, float[N,4,16] trace) {
  t = Constant <value = bool {1}> ()
  w = Constant <value = float {0.5}> ()
  y, trace = Loop (n, t, x) <body = step (int64 i, bool c, float[4,16] h) => (bool c_out, float[4,16] h_out, float[4,16] h_scan) {
    c_out = Identity (c)
    a = Mul (h, x)
    b = Tanh (a)
    d = Mul (b, w)
    h_out = Add (d, h)
    h_scan = Identity (h_out)
  }>
}
)";

Tensor filled(std::vector<int64_t> dims, uint64_t seed) {
  Tensor t(DType::Float, dims);
  uint64_t s = seed;
  for (int64_t i = 0; i < t.numel(); ++i) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    t.data<float>()[i] = float(int64_t(s >> 40) % 2001 - 1000) / 1000.0f;
  }
  return t;
}

// What kLoopModel computes, step by step in plain C++.
std::vector<std::vector<float>> loop_reference(const Tensor& x, int64_t n) {
  std::vector<float> h(x.data<float>(), x.data<float>() + x.numel());
  std::vector<std::vector<float>> steps;
  for (int64_t k = 0; k < n; ++k) {
    for (size_t i = 0; i < h.size(); ++i) h[i] = std::tanh(h[i] * x.data<float>()[i]) * 0.5f + h[i];
    steps.push_back(h);
  }
  return steps;
}

void expect_loop_outputs(const Graph& g, int64_t n) {
  runtime::Session s(g);
  Tensor x = filled({4, 16}, 3);
  std::vector<Tensor> out = s.run({{"x", x}, {"n", Tensor::scalar<int64_t>(n)}});
  ASSERT_EQ(out.size(), 2u);
  auto steps = loop_reference(x, n);
  ASSERT_EQ(out[1].dims(), (std::vector<int64_t>{n, 4, 16}));
  const std::vector<float> last =
      n ? steps.back() : std::vector<float>(x.data<float>(), x.data<float>() + 64);
  for (int64_t i = 0; i < 64; ++i) EXPECT_NEAR(out[0].data<float>()[i], last[size_t(i)], 1e-6) << i;
  for (int64_t k = 0; k < n; ++k)
    for (int64_t i = 0; i < 64; ++i)
      EXPECT_NEAR(out[1].data<float>()[k * 64 + i], steps[size_t(k)][size_t(i)], 1e-6);
}

TEST(ControlFlow, LoopReadsOuterValuesAndStacksItsScanOutput) {
  Model m = parse(kLoopModel);
  // The body's reads of x and w are the Loop's implicit inputs, so the main graph sees them used.
  const Node* loop = m.graph->nodes().back();
  ASSERT_EQ(loop->op_type, "Loop");
  EXPECT_EQ(loop->implicit_inputs, 2);
  EXPECT_EQ(loop->num_explicit_inputs(), 3);
  expect_loop_outputs(*m.graph, 3);
  expect_loop_outputs(*m.graph, 0);  // no iteration: y is x, the trace [0, 4, 16]
}

TEST(ControlFlow, LoopBodyFusesAndSurvivesTheRoundTrip) {
  Model m = parse(kLoopModel);
  tools::FuseOptions opts;
  opts.fusion.opt_level = 3;
  tools::FuseResult r;
  Model fused = testing::fused_copy(m, opts, &r);
  // The body's Mul, Tanh, Mul and Add are one fused group, named and listed with the subgraph it is in.
  ASSERT_EQ(r.groups.size(), 1u) << fused.graph->to_string();
  EXPECT_EQ(fmt::format("{}", fmt::join(r.groups[0].ops, " ")),
            "Mul Tanh Mul Add Identity");  // two body outputs: a copy
  EXPECT_NE(r.groups[0].scope.find("(Loop) body"), std::string::npos) << r.groups[0].scope;
  EXPECT_EQ(r.groups[0].name.rfind("y_body_", 0), 0u) << r.groups[0].name;
  const Node* loop = nullptr;
  for (const Node* n : fused.graph->nodes())
    if (n->op_type == "Loop") loop = n;
  ASSERT_TRUE(loop);
  EXPECT_EQ(testing::count_fused(*loop->subgraph("body")), 1) << fused.graph->to_string();
  expect_loop_outputs(*fused.graph, 5);
  // Written for other runtimes: the outer references are names of the main graph again, and ONNX's checker
  // accepts the model (a subgraph that read an undefined name would fail it).
  onnx_io::check_model(PortableModel(fused));
}

TEST(ControlFlow, IfRunsTheBranchItsConditionPicks) {
  Model m = parse(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (bool c, float[3] a, float[3] b) => (float[3] y) {
  y = If (c) <then_branch = yes () => (float[3] r) { r = Add (a, b) },
              else_branch = no () => (float[3] r2) { r2 = Sub (a, b) }>
}
)");
  const Node* n = m.graph->nodes().back();
  EXPECT_EQ(n->implicit_inputs, 2);
  runtime::Session s(*m.graph);
  Tensor a = Tensor::from<float>({3}, std::vector<float>{1, 2, 3});
  Tensor b = Tensor::from<float>({3}, std::vector<float>{10, 20, 30});
  for (bool c : {true, false}) {
    Tensor y = s.run({{"c", Tensor::scalar<bool>(c)}, {"a", a}, {"b", b}})[0];
    for (int i = 0; i < 3; ++i)
      EXPECT_FLOAT_EQ(y.data<float>()[i],
                      c ? a.data<float>()[i] + b.data<float>()[i] : a.data<float>()[i] - b.data<float>()[i]);
  }
}

// A running sum over dim 1, scanned backwards, its partial sums stacked along dim 1 of the output.
TEST(ControlFlow, ScanFollowsItsAxesAndDirections) {
  Model m = parse(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (float[2] s0, float[2,4] x) => (float[2] s, float[2,4] partial) {
  s, partial = Scan (s0, x) <num_scan_inputs = 1, scan_input_axes = [1], scan_input_directions = [1],
                             scan_output_axes = [1],
                             body = sum (float[2] acc, float[2] col) => (float[2] acc_out, float[2] seen) {
    acc_out = Add (acc, col)
    seen = Identity (acc_out)
  }>
}
)");
  runtime::Session s(*m.graph);
  Tensor x = Tensor::from<float>({2, 4}, std::vector<float>{1, 2, 3, 4, 10, 20, 30, 40});
  std::vector<Tensor> out = s.run({{"s0", Tensor::from<float>({2}, std::vector<float>{0, 100})}, {"x", x}});
  EXPECT_FLOAT_EQ(out[0].data<float>()[0], 10);
  EXPECT_FLOAT_EQ(out[0].data<float>()[1], 200);
  ASSERT_EQ(out[1].dims(), (std::vector<int64_t>{2, 4}));
  // Iterations visit columns 3, 2, 1, 0; output column t holds iteration t's sum.
  const std::vector<float> want{4, 7, 9, 10, 140, 170, 190, 200};
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(out[1].data<float>()[i], want[size_t(i)]) << i;
}

// An If inside a Loop body reads a value of the main graph: the Loop captures it for the body, the If for its
// branch, and export writes both back as the main graph's name.
TEST(ControlFlow, NestedSubgraphsCaptureThroughEveryLevel) {
  Model m = parse(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (float[2] x, float[2] k, int64 n) => (float[2] y) {
  t = Constant <value = bool {1}> ()
  y = Loop (n, t, x) <body = step (int64 i, bool c, float[2] h) => (bool c_out, float[2] h_out) {
    c_out = Identity (c)
    zero = Constant <value = int64 {0}> ()
    two = Constant <value = int64 {2}> ()
    r = Mod (i, two)
    even = Equal (r, zero)
    h_out = If (even) <then_branch = a () => (float[2] p) { p = Add (h, k) },
                       else_branch = b () => (float[2] q) { q = Mul (h, k) }>
  }>
}
)");
  auto run = [](const Model& model) {
    runtime::Session s(*model.graph);
    return s.run({{"x", Tensor::from<float>({2}, std::vector<float>{1, 2})},
                  {"k", Tensor::from<float>({2}, std::vector<float>{3, 4})},
                  {"n", Tensor::scalar<int64_t>(3)}})[0];
  };
  // i = 0: h + k, i = 1: h * k, i = 2: h + k.
  Tensor y = run(m);
  EXPECT_FLOAT_EQ(y.data<float>()[0], (1 + 3) * 3 + 3);
  EXPECT_FLOAT_EQ(y.data<float>()[1], (2 + 4) * 4 + 4);
  Model back = onnx_io::import_model(onnx_io::export_model(m));
  onnx_io::check_model(back);
  Tensor y2 = run(back);
  EXPECT_FLOAT_EQ(y2.data<float>()[0], y.data<float>()[0]);
  EXPECT_FLOAT_EQ(y2.data<float>()[1], y.data<float>()[1]);
}

TEST(ControlFlow, AScanOutputThatChangesShapeIsAnErrorNamingIt) {
  Model m = parse(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (int64 n) => (int64[N,M] all) {
  t = Constant <value = bool {1}> ()
  all = Loop (n, t) <body = step (int64 i, bool c) => (bool c_out, int64[M] r) {
    c_out = Identity (c)
    zero = Constant <value = int64 {0}> ()
    one = Constant <value = int64 {1}> ()
    r = Range (zero, i, one)
  }>
}
)");
  runtime::Session s(*m.graph);
  try {
    s.run({{"n", Tensor::scalar<int64_t>(3)}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("scan output 'r' is int64[1] at iteration 1 but int64[0] at the first"),
        std::string::npos)
        << e.what();
  }
}

TEST(ControlFlow, ALoopThatCouldNeverEndIsRefused) {
  Model m = parse(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (float[2] x, int64 n, bool t) => (float[2] y) {
  y = Loop (n, t, x) <body = step (int64 i, bool c, float[2] h) => (bool c_out, float[2] h_out) {
    c_out = Identity (c)
    h_out = Neg (h)
  }>
}
)");
  Node* loop = m.graph->nodes().back();
  loop->set_input(0, nullptr);  // ONNX text cannot leave an input out
  loop->set_input(1, nullptr);
  try {
    runtime::Session s(*m.graph);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("neither a trip count (input 0) nor a condition (input 1)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace gaf
