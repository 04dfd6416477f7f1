// One small graph per reason code, each with a "does fuse" twin; every fused graph is also run against its
// unfused original.
#include <gtest/gtest.h>

#include "gaf/codegen.h"
#include "gaf/fusion.h"
#include "test_util.h"

namespace gaf {
namespace {

using testing::count_fused;
using testing::expect_same_outputs;
using testing::fused_copy;
using testing::parse;

const char* kHeader = R"(<ir_version: 8, opset_import: ["" : 17]> )";

struct Fused {
  Model model;
  tools::FuseResult result;
};

Fused fuse(const std::string& body, int opt_level = 2, const std::string& rules_json = "",
           Target target = Target::cpu_host()) {
  Model m = parse(kHeader + body);
  tools::FuseOptions o;
  o.target = target;
  o.fusion.opt_level = opt_level;
  if (!rules_json.empty()) o.fusion.rules = FusionRules::parse(rules_json);
  Fused f;
  f.model = fused_copy(m, o, &f.result);
  if (count_fused(*f.model.graph) > 0) expect_same_outputs(m, f.model);
  return f;
}

const DecisionRecord* decision(const tools::FuseResult& r, const std::string& producer, const std::string& consumer) {
  for (const auto& d : r.decisions)
    if (d.producer == producer && d.consumer == consumer) return &d;
  return nullptr;
}

void expect_reason(const tools::FuseResult& r, const std::string& p, const std::string& c, Reason want) {
  const DecisionRecord* d = decision(r, p, c);
  ASSERT_NE(d, nullptr) << "no decision for " << p << " -> " << c;
  EXPECT_EQ(reason_name(d->reason), reason_name(want)) << d->detail;
  EXPECT_EQ(d->fused, want == Reason::Fused);
  if (want != Reason::Fused) {
    EXPECT_FALSE(d->detail.empty());
  }
}

TEST(FusionDecisions, ElementwiseChainFusesIntoOneKernel) {
  auto f = fuse(R"(g (float[4,8] x, float[4,8] z) => (float[4,8] y) { a = Relu(x) b = Add(a, z) y = Sigmoid(b) })");
  EXPECT_EQ(count_fused(*f.model.graph), 1);
  EXPECT_EQ(f.model.graph->num_nodes(), 1u);
  expect_reason(f.result, "a", "b", Reason::Fused);
  expect_reason(f.result, "b", "y", Reason::Fused);
  EXPECT_LT(f.result.after.bytes, f.result.before.bytes);
}

TEST(FusionDecisions, CycleThroughAnUnfusableNode) {
  const char* g = R"(g (float[4,8] x) => (float[4,8] y) { a = Relu(x) b = Neg(a) y = Add(a, b) })";
  auto f = fuse(g, 2, R"({"global": {"skip_nodes": []}})");
  EXPECT_EQ(f.model.graph->num_nodes(), 1u);  // twin: everything fuses
  // Nodes parsed from text have no names; skip the middle node by op type instead.
  auto blocked = fuse(g, 2, R"({"global": {"skip_op_types": ["Neg"]}})");
  expect_reason(blocked.result, "a", "y", Reason::Cycle);
  expect_reason(blocked.result, "a", "b", Reason::RuleForbid);
}

TEST(FusionDecisions, OpaqueOpStaysAlone) {
  // A symbolic dim keeps Shape from being folded to a constant.
  auto f = fuse(R"(g (float[N,8] x) => (int64[2] s, float[N,8] y) { a = Relu(x) s = Shape(a) y = Neg(a) })", 3);
  expect_reason(f.result, "a", "s", Reason::OpaqueOp);
  expect_reason(f.result, "a", "y", Reason::Fused);
}

TEST(FusionDecisions, DataMovementTheKernelsDoNotIndexStaysAlone) {
  // Pad (like Gather) is not folded into a fused kernel's indexing: a group with it would run op by op.
  auto f = fuse(R"(g (float[4,8] x) => (float[6,8] y) {
      a = Relu(x) p = Constant <value = int64[4] {1, 0, 1, 0}> () c = Pad(a, p) y = Sigmoid(c) })");
  expect_reason(f.result, "a", "c", Reason::OpaqueOp);
  expect_reason(f.result, "c", "y", Reason::OpaqueOp);
  // Twin: a Reshape is index arithmetic, so it fuses with the ops around it.
  auto t = fuse(R"(g (float[4,8] x) => (float[8,4] y) {
      a = Relu(x) s = Constant <value = int64[2] {8, 4}> () c = Reshape(a, s) y = Sigmoid(c) })");
  expect_reason(t.result, "a", "c", Reason::Fused);
  EXPECT_EQ(t.model.graph->num_nodes(), 1u);
}

TEST(FusionDecisions, ConcatFusesUnlessItHasManyOperandsAlongAnOuterAxis) {
  // A fused Concat along an outer axis reads every operand per element: up to kMaxFusedConcatOperands (4).
  auto few = fuse(R"(g (float[4,8] x, float[4,8] z) => (float[8,8] y) { c = Concat <axis = 0> (x, z) y = Sigmoid(c) })");
  expect_reason(few.result, "c", "y", Reason::Fused);
  auto many = fuse(R"(g (float[1,8] a, float[1,8] b, float[1,8] c, float[1,8] d, float[1,8] e) => (float[5,8] y) {
      k = Concat <axis = 0> (a, b, c, d, e) y = Sigmoid(k) })");
  expect_reason(many.result, "k", "y", Reason::OpaqueOp);
  // Along the innermost axis the kernel loops over the operands in turn: any number fuses.
  auto inner = fuse(R"(g (float[8,1] a, float[8,1] b, float[8,1] c, float[8,1] d, float[8,1] e) => (float[8,5] y) {
      k = Concat <axis = -1> (a, b, c, d, e) y = Sigmoid(k) })");
  expect_reason(inner.result, "k", "y", Reason::Fused);
  // Data movement after a Concat (a channel shuffle: in four groups of two operands, which channel-shuffle-fusion
  // leaves alone) would gather every operand per element: the Concat stays on its own, the shuffle's Reshape /
  // Transpose / Reshape fuse with each other.
  auto shuffle = fuse(R"(g (float[1,2,3,6] a, float[1,2,3,6] b) => (float[1,2,3,12] y) {
      k = Concat <axis = 3> (a, b)
      s1 = Constant <value = int64[5] {1, 2, 3, 4, 3}> ()  r1 = Reshape(k, s1)
      t = Transpose <perm = [0, 1, 2, 4, 3]> (r1)
      s2 = Constant <value = int64[4] {1, 2, 3, 12}> ()  r2 = Reshape(t, s2)  y = Relu(r2) })");
  expect_reason(shuffle.result, "k", "r1", Reason::OpaqueOp);
  expect_reason(shuffle.result, "r1", "t", Reason::Fused);
}

TEST(FusionDecisions, MultipleAnchors) {
  auto f = fuse(R"(g (float[64,64] x, float[64,64] w, float[64,64] v) => (float[64,64] y) {
      a = MatMul(x, w) b = Relu(a) y = MatMul(b, v) })");
  expect_reason(f.result, "a", "b", Reason::Fused);  // twin: an epilogue joins its anchor
  expect_reason(f.result, "b", "y", Reason::MultipleAnchors);
}

TEST(FusionDecisions, AnchorTakesEpiloguesOnly) {
  auto f = fuse(R"(g (float[64,64] x, float[64,64] w) => (float[64,64] y) { a = Relu(x) y = MatMul(a, w) })");
  expect_reason(f.result, "a", "y", Reason::AnchorPosition);
}

TEST(FusionDecisions, ReductionsMustShareTheirRow) {
  auto f = fuse(R"(g (float[32,64] x) => (float[1,1] y) {
      a = ReduceMax <axes = [1], keepdims = 1> (x) y = ReduceMin <axes = [0], keepdims = 1> (a) })");
  expect_reason(f.result, "a", "y", Reason::ReductionPosition);
  // Twin: a layer-norm shaped row (reduce -> broadcast -> elementwise -> reduce over the same row) is one group.
  auto ln = fuse(R"(g (float[32,64] x) => (float[32,64] y) {
      m = ReduceMean <axes = [-1]> (x) d = Sub(x, m) s = Mul(d, d) v = ReduceMean <axes = [-1]> (s)
      y = Div(d, v) })");
  EXPECT_EQ(ln.model.graph->num_nodes(), 1u) << ln.model.graph->to_string();
  expect_reason(ln.result, "s", "v", Reason::Fused);
}

TEST(FusionDecisions, DtypeMismatch) {
  auto f = fuse(R"(g (float[4,8] x) => (string[4,8] y) { a = Relu(x) y = Cast <to = 8> (a) })");
  expect_reason(f.result, "a", "y", Reason::DtypeMismatch);
  auto ok = fuse(R"(g (float[4,8] x) => (float16[4,8] y) { a = Relu(x) y = Cast <to = 10> (a) })");
  expect_reason(ok.result, "a", "y", Reason::Fused);
}

TEST(FusionDecisions, ShapeMismatchKeepsSmallOpsOutOfBigLoops) {
  auto f = fuse(R"(g (float[128,64] x, float[64] w) => (float[128,64] y) { a = Relu(w) y = Add(x, a) })");
  expect_reason(f.result, "a", "y", Reason::ShapeMismatch);
  auto ok = fuse(R"(g (float[128,64] x, float[64] w) => (float[128,64] y) { a = Add(x, w) y = Relu(a) })");
  expect_reason(ok.result, "a", "y", Reason::Fused);
}

TEST(FusionDecisions, UnknownShapeBlocksButSymbolicDimsFuse) {
  Model m;
  auto& g = *m.graph;
  Value* x = g.add_input("x", TensorType{DType::Float, std::nullopt});
  Node* a = g.add_node("Relu", {x}, {"a"});
  Node* y = g.add_node("Neg", {a->output(0)}, {"y"});
  g.add_output(y->output(0));
  a->output(0)->type = TensorType{DType::Float, std::nullopt};
  y->output(0)->type = TensorType{DType::Float, std::nullopt};
  tools::FuseOptions o;
  auto r = tools::fuse_model(m, o);
  expect_reason(r, "a", "y", Reason::ShapeUnknown);

  auto sym = fuse(R"(g (float[N,8] x) => (float[N,8] y) { a = Relu(x) y = Neg(a) })");
  expect_reason(sym.result, "a", "y", Reason::Fused);
}

TEST(FusionDecisions, IntegerSizeArithmeticRunsOnItsOwn) {
  // The causal mask's start, Sub(L, T) then Unsqueeze, on int64 sizes: not fused. Twin: the same on floats.
  auto f = fuse(R"(g (int64 l, int64 t) => (int64[1] y) {
      a = Sub(l, t)  ax = Constant <value = int64[1] {0}> ()  y = Unsqueeze(a, ax) })");
  expect_reason(f.result, "a", "y", Reason::DtypeMismatch);
  auto ok = fuse(R"(g (float[4] l, float[4] t) => (float[1,4] y) {
      a = Sub(l, t)  ax = Constant <value = int64[1] {0}> ()  y = Unsqueeze(a, ax) })");
  expect_reason(ok.result, "a", "y", Reason::Fused);
}

TEST(FusionDecisions, DimsOnlyValuesGiveKeepTheirProducerApart) {
  // A causal mask cut from a buffer at a computed length: its dim min(L,16) is no input's, so the Slice does not
  // join the Equal after it (a kernel sizes its loops from its inputs). Twin: a constant length fuses.
  auto f = fuse(R"(g (float[1,16] c, float[B,L] x) => (bool[1,?] y) {
      s = Shape(x)  i = Constant <value = int64[1] {1}> ()  l = Gather(s, i)
      z = Constant <value = int64[1] {0}> ()  a = Slice(c, z, l, i)
      zero = Constant <value = float {0.0}> ()  y = Equal(a, zero) })",
                3);
  expect_reason(f.result, "a", "y", Reason::ShapeUnknown);
  EXPECT_NE(decision(f.result, "a", "y")->detail.find("min(L,16)"), std::string::npos);
  auto ok = fuse(R"(g (float[1,16] c) => (bool[1,5] y) {
      i = Constant <value = int64[1] {1}> ()  z = Constant <value = int64[1] {0}> ()
      e = Constant <value = int64[1] {5}> ()  a = Slice(c, z, e, i)
      zero = Constant <value = float {0.0}> ()  y = Equal(a, zero) })",
                 3);
  expect_reason(ok.result, "a", "y", Reason::Fused);
}

TEST(FusionDecisions, ResourceLimitOnHugeRows) {
  auto f = fuse(R"(g (float[2,1048576] x) => (float[2,1048576] y) { a = Relu(x) y = Softmax(a) })");
  expect_reason(f.result, "a", "y", Reason::ResourceLimit);
  auto ok = fuse(R"(g (float[64,1024] x) => (float[64,1024] y) { a = Relu(x) y = Softmax(a) })");
  expect_reason(ok.result, "a", "y", Reason::Fused);
}

// A reduction that nothing in its group reads back folds its input as it streams by: a loss over a 2 MB tensor
// (one row of the whole tensor) is one kernel on the CPU. The CUDA dialect folds each output on one thread, so
// there the reduction stays apart with the backend's reason. The twin: the mean broadcast back over the tensor
// holds the row, over the budget.
TEST(FusionDecisions, AReductionNothingReadsBackStreams) {
  const char* loss = R"(g (float[512,1024] x, float[512,1024] t) => (float y) {
      d = Sub(x, t)  s = Mul(d, d)  y = ReduceMean <keepdims = 0> (s) })";
  auto cpu = fuse(loss);
  EXPECT_EQ(count_fused(*cpu.model.graph), 1);
  EXPECT_EQ(cpu.model.graph->num_nodes(), 1u);
  expect_reason(cpu.result, "s", "y", Reason::Fused);
  auto cuda = fuse(loss, 2, "", Target::builtin_or_file("cuda-h200"));
  expect_reason(cuda.result, "s", "y", Reason::BackendUnsupported);
  EXPECT_NE(decision(cuda.result, "s", "y")->detail.find("one thread"), std::string::npos);
  auto back = fuse(R"(g (float[512,1024] x) => (float[512,1024] y) {
      a = Relu(x)  m = ReduceMean <keepdims = 1> (a)  y = Sub(a, m) })");
  expect_reason(back.result, "m", "y", Reason::ResourceLimit);
}

// The CPU backend answers for its emitter: ReduceLogSumExp over a middle axis has no printed form (not a trailing
// row, no indexed form), so instead of one fused node running op by op the Relu stays apart with the emitter's
// reason. The twin over the trailing axis is a row kernel.
TEST(FusionDecisions, TheCpuBackendRefusesWhatItsEmitterCannotPrint) {
  auto f = fuse(R"(g (float[8,16,32] x) => (float[8,1,32] y) {
      a = Relu(x)  y = ReduceLogSumExp <axes = [1]> (a) })");
  expect_reason(f.result, "a", "y", Reason::BackendUnsupported);
  EXPECT_NE(decision(f.result, "a", "y")->detail.find("the cpu backend: node 'y' (ReduceLogSumExp) does not reduce"),
            std::string::npos);
  EXPECT_EQ(count_fused(*f.model.graph), 0);
  // Dropout's mask returned: the emitter writes a node's first output only, so the group is not formed (it had
  // formed and failed at session build on a missing variable).
  auto mask = fuse(R"(g (float[64,256] x) => (float[64,256] y, bool[64,256] m) {
      a = Relu(x)  d, m = Dropout(a)  y = Neg(d) })",
                   3);
  expect_reason(mask.result, "a", "d", Reason::BackendUnsupported);
  EXPECT_NE(decision(mask.result, "a", "d")->detail.find("its output 1 ('m') is read or returned"), std::string::npos);
  auto rows = fuse(R"(g (float[8,16,32] x) => (float[8,16,1] y) {
      a = Relu(x)  y = ReduceLogSumExp <axes = [2]> (a) })");
  expect_reason(rows.result, "a", "y", Reason::Fused);
  runtime::Session s(*rows.model.graph);
  EXPECT_EQ(s.generated_kernels(), 1u);
  EXPECT_TRUE(s.codegen_fallbacks().empty());
}

// A streaming elementwise chain holds a few values per tile at a time, however long it is: the issue's 12-op
// chain over two inputs is one kernel on every target, its working set well inside the smallest on-chip
// budget.
TEST(FusionDecisions, ALongElementwiseChainFitsEveryTargetsBudget) {
  const char* chain = R"(g (float[1024,1024] x, float[1024,1024] z) => (float[1024,1024] y) {
      a = Add(x, z) b = Relu(a) c = Mul(b, z) d = Sigmoid(c) e = Tanh(d) f = Sub(e, x) h = Mul(f, z) i = Add(h, b)
      j = Abs(i) k = Neg(j) l = Exp(k) lo = Constant <value = float {-1.0}> () hi = Constant <value = float {1.0}> ()
      y = Clip(l, lo, hi) })";
  for (const char* target : {"cpu-host", "cuda-h200", "ascend910b"}) {
    auto f = fuse(chain, 2, "", Target::builtin_or_file(target));
    EXPECT_EQ(count_fused(*f.model.graph), 1) << target;
    for (const auto& d : f.result.decisions)
      EXPECT_NE(d.reason, Reason::ResourceLimit) << target << ": " << d.detail;
  }
  // The does-not-fire twin: a budget below one tile of the live values still splits it.
  Target tiny = Target::cpu_host();
  tiny.onchip_bytes = 16 * 1024;
  auto split = fuse(chain, 2, "", tiny);
  bool limited = false;
  for (const auto& d : split.result.decisions) limited |= d.reason == Reason::ResourceLimit;
  EXPECT_TRUE(limited);
}

TEST(FusionDecisions, MaxGroupSize) {
  const char* g = R"(g (float[64,64] x) => (float[64,64] y) { a = Relu(x) b = Neg(a) c = Abs(b) d = Neg(c) y = Relu(d) })";
  auto f = fuse(g, 2, R"({"global": {"max_ops_per_group": 3}})");
  bool hit = false;
  for (const auto& d : f.result.decisions) hit |= d.reason == Reason::MaxGroupSize;
  EXPECT_TRUE(hit);
  for (const Node* n : f.model.graph->nodes()) EXPECT_LE(n->body ? n->body->num_nodes() : 1u, 3u);
  EXPECT_EQ(fuse(g).model.graph->num_nodes(), 1u);
}

TEST(FusionDecisions, MaxInputs) {
  const char* g = R"(g (float[64] a, float[64] b, float[64] c, float[64] d) => (float[64] y) {
      s1 = Add(a, b) s2 = Add(s1, c) y = Add(s2, d) })";
  auto f = fuse(g, 2, R"({"global": {"max_inputs_per_group": 3}})");
  expect_reason(f.result, "s2", "y", Reason::MaxInputs);
  EXPECT_EQ(fuse(g).model.graph->num_nodes(), 1u);
}

TEST(FusionDecisions, RuleForbidAndForce) {
  const char* g = R"(g (float[64,64] x) => (float[64,64] y) { a = Relu(x) y = Neg(a) })";
  auto f = fuse(g, 2, R"({"rules": [{"pattern": "Relu -> @elementwise", "action": "forbid", "reason": "test"}]})");
  expect_reason(f.result, "a", "y", Reason::RuleForbid);
  EXPECT_NE(decision(f.result, "a", "y")->detail.find("test"), std::string::npos);
  EXPECT_EQ(fuse(g).model.graph->num_nodes(), 1u);
}

TEST(FusionDecisions, GraphOutputConflictAndMultiOutput) {
  const char* g = R"(g (float[64,64] x) => (float[64,64] a, float[64,64] y) { a = Relu(x) y = Neg(a) })";
  expect_reason(fuse(g, 2).result, "a", "y", Reason::GraphOutputConflict);
  auto f3 = fuse(g, 3);
  expect_reason(f3.result, "a", "y", Reason::Fused);
  ASSERT_EQ(f3.model.graph->num_nodes(), 1u);
  EXPECT_EQ(f3.model.graph->nodes()[0]->num_outputs(), 2);

  const char* mo = R"(g (float[N,64] x) => (int64[2] s, float[N,64] y) { a = Relu(x) y = Neg(a) s = Shape(a) })";
  expect_reason(fuse(mo, 2).result, "a", "y", Reason::MultiOutput);
  expect_reason(fuse(mo, 3).result, "a", "y", Reason::Fused);
}

TEST(FusionDecisions, AnchorGroupsWriteOneOutput) {
  // The MatMul's biased output is also a graph output: at opt level 3 the bias joins the MatMul, but the Relu
  // after it does not (a primitive with post-ops writes one value: the group would run op by op), and every
  // group is generated.
  const char* g = R"(g (float[64,64] x, float[64,64] w, float[64] b) => (float[64,64] a, float[64,64] y) {
      m = MatMul(x, w) a = Add(m, b) y = Relu(a) })";
  auto f = fuse(g, 3);
  expect_reason(f.result, "m", "a", Reason::Fused);
  expect_reason(f.result, "a", "y", Reason::MultiOutput);
  EXPECT_NE(decision(f.result, "a", "y")->detail.find("writes one"), std::string::npos);
  runtime::Session s(*f.model.graph);
  for (const auto& [node, why] : s.codegen_fallbacks()) ADD_FAILURE() << node << " runs op by op: " << why;
  // Twin: with only the Relu's output read outside, the whole chain is one anchor group.
  auto twin = fuse(R"(g (float[64,64] x, float[64,64] w, float[64] b) => (float[64,64] y) {
      m = MatMul(x, w) a = Add(m, b) y = Relu(a) })", 3);
  expect_reason(twin.result, "a", "y", Reason::Fused);
  EXPECT_EQ(count_fused(*twin.model.graph), 1);
}

// The count comes from the backend: one whose library epilogue wrote two values would take the group legality
// refuses the CPU and CUDA backends (their post-ops and epilogues write one).
TEST(FusionDecisions, TheBackendSaysHowManyValuesAnAnchorGroupWrites) {
  struct TwoOutputs final : KernelBackend {
    std::string_view name() const override { return "two-outputs"; }
    std::string cannot_emit(const std::vector<const Node*>&, const Graph&) const override { return ""; }
    int anchor_group_outputs() const override { return 2; }
    std::string_view anchor_epilogue() const override { return "a two-output epilogue"; }
    std::vector<std::unique_ptr<Pass>> pipeline_passes(int, const Target&) const override { return {}; }
    std::string weight_precision(PrecisionMode) const override { return ""; }
    std::vector<std::unique_ptr<Pass>> precision_passes(PrecisionMode) const override { return {}; }
  };
  Model m = parse(std::string(kHeader) + R"(g (float[64,64] x, float[64,64] w, float[64] b)
      => (float[64,64] a, float[64,64] y, float[64,64] z) { m = MatMul(x, w) a = Add(m, b) y = Relu(a) z = Neg(y) })");
  const Graph& g = *m.graph;
  const auto& nodes = g.nodes();
  Group matmul_add{0, {nodes[0], nodes[1]}, OpKind::Anchor, 1, false}, relu{1, {nodes[2]}, OpKind::Elementwise, 0,
                                                                             false};
  Group matmul_add_relu{0, {nodes[0], nodes[1], nodes[2]}, OpKind::Anchor, 1, false},
      neg{1, {nodes[3]}, OpKind::Elementwise, 0, false};
  FusionOptions opts;
  opts.opt_level = 3;
  for (const KernelBackend* cpu : {&codegen::cpu_kernel_backend(), &codegen::cuda_kernel_backend()}) {
    opts.backend = cpu;
    const FusionDecision d = can_fuse(matmul_add, relu, g, opts, Target::cpu_host());
    EXPECT_EQ(reason_name(d.reason), reason_name(Reason::MultiOutput)) << cpu->name() << ": " << d.detail;
    EXPECT_NE(d.detail.find(cpu->anchor_epilogue()), std::string::npos) << d.detail;
  }
  TwoOutputs two;
  opts.backend = &two;
  EXPECT_TRUE(can_fuse(matmul_add, relu, g, opts, Target::cpu_host()).ok());
  // Three values (a, y and z's input) are more than it writes.
  const FusionDecision three = can_fuse(matmul_add_relu, neg, g, opts, Target::cpu_host());
  EXPECT_EQ(reason_name(three.reason), reason_name(Reason::MultiOutput)) << three.detail;
  EXPECT_NE(three.detail.find("writes 2 (its epilogue runs as a two-output epilogue)"), std::string::npos)
      << three.detail;
}

TEST(FusionDecisions, OptLevelsBelowTwoDoNotFuse) {
  const char* g = R"(g (float[64,64] x) => (float[64,64] y) { a = Relu(x) y = Neg(a) })";
  EXPECT_EQ(fuse(g, 1).model.graph->num_nodes(), 2u);
  EXPECT_EQ(fuse(g, 0).model.graph->num_nodes(), 2u);
  auto off = fuse(g, 2, R"({"global": {"enable_fusion": false}})");
  expect_reason(off.result, "a", "y", Reason::FusionDisabled);
}

TEST(FusionDecisions, Fp16MixedKeepsSensitiveOpsUnfused) {
  const char* g = R"(g (float16[64,64] x) => (float16[64,64] y) { a = Relu(x) y = Exp(a) })";
  auto f = fuse(g, 2, R"({"global": {"precision_mode": "fp16_mixed"}})");
  expect_reason(f.result, "a", "y", Reason::RuleForbid);
  expect_reason(fuse(g).result, "a", "y", Reason::Fused);
}

}  // namespace
}  // namespace gaf

namespace gaf {
namespace {

TEST(FusionDecisions, RandomOpsNeverFuse) {
  auto f = fuse(R"(g (float[4,8] x) => (float[4,8] y) { a = Relu(x) y = RandomUniformLike <seed = 1.0> (a) })");
  expect_reason(f.result, "a", "y", Reason::StatefulOrRandom);
}

// The target's backend has the last word: a mean over a middle axis and the subtraction reading it need a grid-wide
// barrier as one CUDA kernel, so the cuda backend refuses the group (with the emitter's reason); the CPU runtime
// runs it as one kernel (the twin). Both models compute the same.
TEST(FusionDecisions, BackendUnsupportedWhenTheCudaDialectCannotPrintTheGroup) {
  const std::string body = R"(g (float[4,64,32] x) => (float[4,64,32] y) {
      m = ReduceMean <axes = [1], keepdims = 1> (x)  y = Sub(x, m) })";
  auto gpu = fuse(body, 2, "", Target::builtin_or_file("cuda-h200"));
  expect_reason(gpu.result, "m", "y", Reason::BackendUnsupported);
  const DecisionRecord* d = decision(gpu.result, "m", "y");
  ASSERT_TRUE(d);
  EXPECT_NE(d->detail.find("the cuda backend: "), std::string::npos) << d->detail;
  EXPECT_EQ(count_fused(*gpu.model.graph), 0);
  auto cpu = fuse(body);
  expect_reason(cpu.result, "m", "y", Reason::Fused);
  EXPECT_EQ(count_fused(*cpu.model.graph), 1);
  // An elementwise chain prints in the CUDA dialect: the cuda backend lets it fuse.
  auto chain = fuse(R"(g (float[4,8] x) => (float[4,8] y) { a = Relu(x) y = Exp(a) })", 2, "",
                    Target::builtin_or_file("cuda-h200"));
  expect_reason(chain.result, "a", "y", Reason::Fused);
}

TEST(FusionDecisions, TargetUnsupportedConvClip) {
  // ReLU6 after a convolution: the CPU target keeps two kernels (oneDNN's clip post-op is slower than both).
  const std::string conv = R"(g (float[1,8,10,10] x, float[16,8,1,1] w) => (float[1,16,10,10] y) {
      c = Conv(x, w)  lo = Constant <value = float {0}> ()  hi = Constant <value = float {6}> () )";
  auto f = fuse(conv + "y = Clip(c, lo, hi) }");
  expect_reason(f.result, "c", "y", Reason::TargetUnsupported);
  EXPECT_EQ(count_fused(*f.model.graph), 0);
  // Twins: a ReLU epilogue fuses, and a target that declares the clip epilogue fast fuses the Clip.
  auto relu = fuse(conv + "y = Relu(c) }");
  expect_reason(relu.result, "c", "y", Reason::Fused);
  Target gpu = Target::builtin_or_file("cuda-h200");
  auto clip_ok = fuse(conv + "y = Clip(c, lo, hi) }", 2, "", gpu);
  expect_reason(clip_ok.result, "c", "y", Reason::Fused);
}

TEST(FusionDecisions, CycleThroughAnotherGroup) {
  // Found by selftest (seed 8, graph 1115), where the first group was an anchor's. Groups
  //   G2 = {Min (m) -> Abs -> Mul -> Max (y)}   and   G1 = {Sqrt -> Abs -> Add (a)}, which y also reads,
  // with G1 about to gain d = Div(m, a): no path leads from a to d through single nodes, but G1 -> y in G2 ->
  // (G2 is one kernel) m -> d. The path check has to treat another group as one node. The rules keep G1 and G2
  // apart.
  auto f = fuse(R"(g (float[3,5,4] x0, float[3,5,4] x1, float one) => (float[3,5,4] y, float[3,5,4] d) {
      m = Min(x0, x0)  p = Sqrt(x1)  ap = Abs(p)  a = Add(ap, one)  d = Div(m, a)
      am = Abs(m)  b = Mul(am, one)  y = Max(b, a) })",
                3, R"({"rules": [{"pattern": "Min -> Div", "action": "forbid"}, {"pattern": "Add -> Max", "action": "forbid"}]})");
  expect_reason(f.result, "a", "d", Reason::Cycle);
  EXPECT_EQ(count_fused(*f.model.graph), 2);
  bool cycle = false;
  for (const auto& dec : f.result.decisions) cycle |= dec.reason == Reason::Cycle;
  EXPECT_TRUE(cycle);
  verify(*f.model.graph);
}

}  // namespace
}  // namespace gaf
