// The lowering IR of generated kernels (src/codegen/lower): one lowered kernel, printed by the CPU and the CUDA
// printer, computes the same formulas; each printer chooses its own loops from the IR's facts (the walk, which
// operands are splat, kernel arguments or constant arrays, how heavy the formula is).
#include <sstream>
#include <string>

#include "codegen/cpu/printer.h"
#include "codegen/cuda/printer.h"
#include "codegen/lower/c_text.h"
#include "codegen/lower/kernel_ir.h"
#include "test_util.h"

namespace gaf {
namespace {

namespace lower = codegen::lower;
using lower::ElementwiseKernel;

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// z = f(x * y) over [8, 16] with y [1, 16] (the second operand `y_array`: an argument "in1" or a constant array)
// lowered by hand: x and y operands, the two nodes statements, z stored.
struct Lowered {
  Model model;
  ElementwiseKernel kernel;
};
Lowered lowered(const std::string& f, const std::string& y_array) {
  Lowered l{testing::parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[8,16] x, float[1,16] y) => (float[8,16] z) { a = Mul(x, y)  z = )" + f + "(a) }"),
            {}};
  const Graph& g = *l.model.graph;
  ElementwiseKernel& k = l.kernel;
  k.space = {{8, -1}, {16, -1}};
  k.walk = lower::Walk::Rows;
  k.operands.push_back({g.inputs()[0], "in0", true, DType::Float, k.space});
  k.operands.push_back({g.inputs()[1], y_array, y_array == "in1", DType::Float, {{1, -1}, {16, -1}}});
  k.statements.push_back({g.nodes()[0], {{0, -1}, {1, -1}}, ScalarType::F32});
  k.statements.push_back({g.nodes()[1], {{-1, 0}}, ScalarType::F32});
  k.stores.push_back({0, 1, DType::Float});
  for (const Node* n : g.nodes()) k.flops_per_element += find_op(*n)->flops_per_element;
  return l;
}

std::string cpu_text(const ElementwiseKernel& k) {
  std::ostringstream os;
  lower::Namer names(false);
  codegen::cpu::print_elementwise(os, k, {{"const float* __restrict", "in0"}, {"float* __restrict", "out0"}}, names);
  return os.str();
}
std::string cuda_text(const ElementwiseKernel& k) {
  std::ostringstream os;
  lower::Namer names(false);
  codegen::cuda::print_elementwise(os, k, names);
  return os.str();
}

TEST(LoweringIR, SplatFollowsTheWalk) {
  Lowered l = lowered("Exp", "c0");
  ElementwiseKernel& k = l.kernel;
  // Rows: y [1,16] moves along the row (not splat); a [8,1] operand is one value per row (splat).
  EXPECT_FALSE(lower::splat(k, 0));
  EXPECT_FALSE(lower::splat(k, 1));
  k.operands[1].vdims = {{8, -1}, {1, -1}};
  EXPECT_TRUE(lower::splat(k, 1));
  // Flat: only a single element is splat.
  k.walk = lower::Walk::Flat;
  EXPECT_FALSE(lower::splat(k, 1));
  k.operands[1].vdims = {{1, -1}, {1, -1}};
  EXPECT_TRUE(lower::splat(k, 1));
  EXPECT_TRUE(lower::all_float(k));
  k.stores[0].dtype = DType::Float16;  // 16-bit elements convert a vector at a time
  EXPECT_TRUE(lower::all_float(k));
  k.operands[0].loaded = DType::BFloat16;
  EXPECT_TRUE(lower::all_float(k));
  k.operands[1].loaded = DType::Int64;
  EXPECT_FALSE(lower::all_float(k));
}

TEST(LoweringIR, BothPrintersComputeTheStatementsFormulas) {
  Lowered l = lowered("Exp", "c0");
  const ElementwiseKernel& k = l.kernel;
  std::string why;
  const std::string product = lower::formula(*k.statements[0].node, {"a0", "a1"}, {ScalarType::F32, ScalarType::F32},
                                             &why).expr;
  ASSERT_FALSE(product.empty());
  for (const std::string& text : {cpu_text(k), cuda_text(k)}) {
    // The scalar form of the product (the last loop), and the exponential of its result.
    const size_t scalar = text.rfind(" = " + product + ";");
    ASSERT_NE(scalar, std::string::npos) << text;
    const size_t at = text.rfind("const float t", scalar);
    ASSERT_NE(at, std::string::npos) << text;
    const std::string t = text.substr(at + 12, text.find(' ', at + 12) - at - 12);
    EXPECT_NE(text.find(lower::formula(*k.statements[1].node, {t}, {ScalarType::F32}, &why).expr), std::string::npos)
        << t << "\n" << text;
    EXPECT_NE(text.find("out0["), std::string::npos) << text;
    // Rows walk: y read at its row base plus the column, x at its own.
    EXPECT_NE(text.find("const int64_t b1 = 0;"), std::string::npos) << text;
    EXPECT_NE(text.find("in0[b0 + j]"), std::string::npos) << text;
    EXPECT_NE(text.find("c0[b1 + j]"), std::string::npos) << text;
  }
}

TEST(LoweringIR, TheCpuPrinterStepsHeavyFormulasEightVectorsAtATime) {
  Lowered heavy = lowered("Exp", "c0"), light = lowered("Relu", "c0");
  ASSERT_GE(heavy.kernel.flops_per_element, codegen::cpu::kHeavyFlops);
  ASSERT_LT(light.kernel.flops_per_element, codegen::cpu::kHeavyFlops);
  const std::string h = cpu_text(heavy.kernel), s = cpu_text(light.kernel);
  // Steps of 8, 4 and 1 vectors, each statement printed for every vector of its step, then the scalar loop.
  EXPECT_EQ(count(h, "jv += 8 * gaf_vw"), 1) << h;
  EXPECT_EQ(count(h, "jv += 4 * gaf_vw"), 1) << h;
  EXPECT_EQ(count(h, "jv += gaf_vw)"), 1) << h;
  EXPECT_EQ(count(h, "const auto t"), 8 * 2 + 4 * 2 + 2) << h;
  EXPECT_EQ(count(h, "#pragma omp simd"), 1) << h;
  EXPECT_EQ(count(s, "* gaf_vw"), 0) << s;
  EXPECT_EQ(count(s, "jv += gaf_vw)"), 1) << s;
  // A 16-bit store: whole vectors converted by gaf_vstore's 16-bit form, the tail one element at a time; an
  // integer operand: no vector loop at all.
  Lowered half = lowered("Exp", "c0");
  half.kernel.stores[0].dtype = DType::Float16;
  const std::string f = cpu_text(half.kernel);
  EXPECT_EQ(count(f, "jv += 8 * gaf_vw"), 1) << f;
  EXPECT_EQ(count(f, "), false);"), 8 + 4 + 1) << f;
  EXPECT_NE(f.find("gaf_store_half("), std::string::npos) << f;
  Lowered integer = lowered("Exp", "c0");
  integer.kernel.operands[0].loaded = DType::Int64;
  const std::string i = cpu_text(integer.kernel);
  EXPECT_EQ(count(i, "gaf_vw"), 0) << i;
}

TEST(LoweringIR, TheCudaPrinterTakesFourElementsWhereEveryOperandIsAnArgument) {
  Lowered args = lowered("Exp", "in1"), constant = lowered("Exp", "c0");
  for (Lowered* l : {&args, &constant}) {
    l->kernel.walk = lower::Walk::Flat;
    l->kernel.operands[1].vdims = l->kernel.space;
  }
  const std::string a = cuda_text(args.kernel), c = cuda_text(constant.kernel);
  EXPECT_NE(a.find("const int64_t n4 = n / 4;"), std::string::npos) << a;
  EXPECT_EQ(count(a, "out0[i] ="), 2) << a;  // the four-element loop and the tail
  EXPECT_EQ(c.find("n4"), std::string::npos) << c;
  EXPECT_EQ(count(c, "out0[i] ="), 1) << c;
  EXPECT_EQ(count(c, "#pragma omp"), 0) << c;
}

// y = Softmax(x) over rows of 64: one operand read whole, one stage, y staged in `buffer`.
struct LoweredRows {
  Model model;
  lower::RowKernel kernel;
};
// The graph `body` over x [8, 64] -> y [8, 64] as a row kernel of rows of 64, x its first operand (in0, read in
// whole rows); the caller adds the rest.
LoweredRows rows_over_x(const std::string& body) {
  LoweredRows l{testing::parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[8,64] x) => (float[8,64] y) )" + body),
                {}};
  lower::RowKernel& k = l.kernel;
  k.space = {{8, -1}, {64, -1}};
  k.from = 1;
  k.output_dtypes = {DType::Float};
  k.operands.push_back({l.model.graph->inputs()[0], "in0", DType::Float, k.space, lower::RowRead::Whole});
  return l;
}
LoweredRows softmax_rows(lower::RowBuffer buffer) {
  LoweredRows l = rows_over_x("{ y = Softmax(x) }");
  const Graph& g = *l.model.graph;
  lower::RowKernel& k = l.kernel;
  buffer.value = g.outputs()[0];
  k.buffers.push_back(buffer);
  k.scratch_rows = buffer.scratch >= 0 ? 1 : 0;
  lower::RowStage st;
  st.node = g.nodes()[0];
  st.kind = lower::RowStageKind::Softmax;
  st.args = {{lower::RowArg::Operand, 0}};
  st.buffer = 0;
  st.output = 0;
  k.stages.push_back(st);
  return l;
}
std::string rows_text(const lower::RowKernel& k, bool cuda) {
  std::ostringstream os;
  codegen::cpu::RegionParams params = {{"const float* __restrict", "in0"}, {"float* __restrict", "out0"}};
  if (cuda)
    codegen::cuda::print_rows(os, k);
  else
    codegen::cpu::print_rows(os, k, params);
  return os.str();
}

TEST(LoweringIR, TheRowPrinterStagesWhereTheLoweringPutTheRow) {
  // In the output's own row: no scratch, the softmax scaled in place, nothing stored twice.
  const std::string in_output = rows_text(softmax_rows({nullptr, 0, -1}).kernel, false);
  EXPECT_NE(in_output.find("float* buf0 = out0 + r * L;"), std::string::npos) << in_output;
  EXPECT_EQ(in_output.find("gaf_take"), std::string::npos) << in_output;
  EXPECT_EQ(in_output.find("out0[r * L + j] ="), std::string::npos) << in_output;
  // The operand is fp32 in memory: the exponentials' sum runs on whole vectors first.
  EXPECT_NE(in_output.find("gaf_exp_nonpos(gaf_vload(in0 + (r * L + j)) - mv)"), std::string::npos) << in_output;
  // In a scratch row: taken from the caller's pool per thread, and the result stored to the output as well.
  LoweredRows scratch = softmax_rows({nullptr, -1, 0});
  const std::string cpu = rows_text(scratch.kernel, false);
  EXPECT_NE(cpu.find("gaf_take(scratch_"), std::string::npos) << cpu;
  EXPECT_NE(cpu.find("float* buf0 = scratch + size_t(L) * 0;"), std::string::npos) << cpu;
  EXPECT_NE(cpu.find("out0[r * L + j] = y;"), std::string::npos) << cpu;
  EXPECT_NE(cpu.find("gaf_region(in0, out0, gaf_rows, true)"), std::string::npos) << cpu;
  // The same kernel for CUDA: shared memory, block totals of the row's maximum and sum, no OpenMP.
  const std::string gpu = rows_text(scratch.kernel, true);
  EXPECT_NE(gpu.find("extern __shared__ float gaf_smem[];"), std::string::npos) << gpu;
  EXPECT_NE(gpu.find("m0 = gaf_block_max(m0);"), std::string::npos) << gpu;
  EXPECT_NE(gpu.find("s0 = gaf_block_sum(s0);"), std::string::npos) << gpu;
  EXPECT_EQ(gpu.find("#pragma omp"), std::string::npos) << gpu;
  EXPECT_EQ(gpu.find("gaf_vload"), std::string::npos) << gpu;
}

// A row's maximum (a softmax's) and a ReduceMax / ReduceMin with its NaN flag run whole vectors first on the CPU,
// the scalar loop taking the rest from where they stopped; CUDA's threads stride the row as before.
TEST(LoweringIR, TheCpuRowPrinterTakesRowExtremesInWholeVectors) {
  const std::string softmax = rows_text(softmax_rows({nullptr, 0, -1}).kernel, false);
  EXPECT_EQ(count(softmax, "acc = gaf::simd::max(v, acc);"), 1) << softmax;
  EXPECT_EQ(count(softmax, "m0 = gaf::simd::reduce_max(acc);"), 1) << softmax;
  EXPECT_EQ(count(softmax, "for (int64_t j = jm0; j < L; ++j) { const float v = in0[r * L + j]; m0 = v > m0"), 1)
      << softmax;
  for (const char* op : {"ReduceMax", "ReduceMin"}) {
    LoweredRows l = rows_over_x(fmt::format("{{ m = {} <axes = [1]> (x)  y = Sub(x, m) }}", op));
    const Graph& g = *l.model.graph;
    lower::RowKernel& k = l.kernel;
    k.output_dtypes = {DType::Float};
    lower::RowStage reduce;
    reduce.node = g.nodes()[0];
    reduce.kind = lower::RowStageKind::Reduce;
    reduce.args = {{lower::RowArg::Operand, 0}};
    k.stages = {reduce};
    const std::string cpu = rows_text(k, false), gpu = rows_text(k, true);
    const bool hi = std::string(op) == "ReduceMax";
    EXPECT_EQ(count(cpu, hi ? "acc = gaf::simd::max(v, acc); nv = v != v ? gaf_vec(1.0f) : nv;"
                            : "acc = gaf::simd::min(v, acc); nv = v != v ? gaf_vec(1.0f) : nv;"),
              1)
        << cpu;
    EXPECT_EQ(count(cpu, hi ? "s1 = gaf::simd::reduce_max(acc); s2 = gaf::simd::reduce_max(nv) > 0.0f;"
                            : "s1 = -gaf::simd::reduce_max(-acc); s2 = gaf::simd::reduce_max(nv) > 0.0f;"),
              1)
        << cpu;
    EXPECT_EQ(count(cpu, "for (int64_t j = js1; j < L; ++j)"), 1) << cpu;
    EXPECT_EQ(gpu.find("gaf::simd"), std::string::npos) << gpu;
  }
}

TEST(LoweringIR, TheCpuRowPrinterAsksForTheNextRowWhileLaterStagesCompute) {
  // a = x * 0.5 staged, then y = Softmax(a): after the first stage the next row of x (read in whole rows) is
  // prefetched, not the scalar; a single stage has no later stages to overlap; CUDA has no such step.
  LoweredRows l = rows_over_x("<float s = {0.5}> { a = Mul(x, s)  y = Softmax(a) }");
  const Graph& g = *l.model.graph;
  lower::RowKernel& k = l.kernel;
  k.operands.push_back({g.initializers()[0], "c0", DType::Float, {{1, -1}, {1, -1}}, lower::RowRead::Scalar});
  k.buffers = {{g.nodes()[0]->output(0), -1, 0}, {g.outputs()[0], 0, -1}};
  k.scratch_rows = 1;
  lower::RowStage mul;
  mul.node = g.nodes()[0];
  mul.kind = lower::RowStageKind::Staged;
  mul.args = {{lower::RowArg::Operand, 0}, {lower::RowArg::Operand, 1}};
  mul.buffer = 0;
  lower::RowStage softmax;
  softmax.node = g.nodes()[1];
  softmax.kind = lower::RowStageKind::Softmax;
  softmax.args = {{lower::RowArg::Buffer, 0}};
  softmax.buffer = 1;
  softmax.output = 0;
  k.stages = {mul, softmax};
  const std::string cpu = rows_text(k, false), gpu = rows_text(k, true);
  const std::string next = "if (r + 1 < rows) { const char* next = reinterpret_cast<const char*>(in0 + (r + 1) * L);";
  EXPECT_EQ(count(cpu, next), 1) << cpu;
  EXPECT_EQ(count(cpu, "__builtin_prefetch"), 1) << cpu;
  EXPECT_LT(cpu.find("buf0[j] = v;"), cpu.find(next)) << cpu;
  EXPECT_LT(cpu.find(next), cpu.find("float m0 = -__builtin_inff();")) << cpu;
  EXPECT_EQ(gpu.find("__builtin_prefetch"), std::string::npos) << gpu;
  const std::string single = rows_text(softmax_rows({nullptr, 0, -1}).kernel, false);
  EXPECT_EQ(single.find("__builtin_prefetch"), std::string::npos) << single;
}

// y = Transpose(x) + 1 as an indexed nest over [4, 6] (x is [6, 4]): an index variable, a load through it, the
// Add's formula, the store.
struct LoweredNest {
  Model model;
  lower::IndexedNest nest;
};
LoweredNest transposed_add() {
  LoweredNest l{testing::parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[6,4] x) => (float[4,6] y) <float one = {1.0}> { t = Transpose(x)  y = Add(t, one) })"),
                {}};
  const Graph& g = *l.model.graph;
  using S = lower::IndexedStatement;
  lower::IndexedNest& nest = l.nest;
  nest.space = {{4, -1}, {6, -1}};
  S index;
  index.kind = S::Index;
  index.name = "x0";
  index.expr = "(j) * int64_t(4) + q0";
  S load;
  load.kind = S::Load;
  load.name = "l0";
  load.array = "in0";
  load.expr = "x0";
  S add;
  add.kind = S::Compute;
  add.name = "t0";
  add.node = g.nodes()[1];
  add.args = {"l0", "1.0f"};
  add.types = {ScalarType::F32, ScalarType::F32};
  S store;
  store.kind = S::Store;
  store.output = 0;
  store.expr = "t0";
  nest.body = {index, load, add, store};
  return l;
}

TEST(LoweringIR, BothPrintersWriteTheSameStatementsOfAnIndexedNest) {
  LoweredNest l = transposed_add();
  std::ostringstream statements, cpu, gpu;
  lower::print_statements(statements, l.nest.body, "");
  const std::string text = statements.str();
  std::string why;
  const std::string add = lower::formula(*l.nest.body[2].node, {"l0", "1.0f"}, {ScalarType::F32, ScalarType::F32},
                                         &why).expr;
  EXPECT_EQ(text, "[[maybe_unused]] const int64_t x0 = (j) * int64_t(4) + q0;\nconst float l0 = in0[x0];\n"
                  "const float t0 = " +
                      add + ";\nout0[i] = t0;\n");
  codegen::cpu::print_indexed(cpu, l.nest, {{"const float* __restrict", "in0"}, {"float* __restrict", "out0"}});
  codegen::cuda::print_indexed(gpu, l.nest);
  // Each printer opens its loops and writes the statements at its indent, the same lines.
  auto indented = [&](const std::string& ind) {
    std::string s;
    for (size_t a = 0, b; a < text.size(); a = b + 1) {
      b = text.find('\n', a);
      s += ind + text.substr(a, b - a + 1);
    }
    return s;
  };
  EXPECT_NE(cpu.str().find(indented("      ")), std::string::npos) << cpu.str();
  EXPECT_NE(cpu.str().find("#pragma omp for schedule(static)"), std::string::npos) << cpu.str();
  EXPECT_NE(gpu.str().find(indented("    ")), std::string::npos) << gpu.str();
  EXPECT_NE(gpu.str().find("const int64_t q0 = rem % int64_t(4);"), std::string::npos) << gpu.str();
  EXPECT_EQ(gpu.str().find("#pragma"), std::string::npos) << gpu.str();
}

TEST(LoweringIR, TheCpuPrinterRunsOneInnerLoopPerSegment) {
  LoweredNest l = transposed_add();
  l.nest.segments = {{0, 2, l.nest.body}, {2, 6, l.nest.body}};
  std::ostringstream cpu;
  codegen::cpu::print_indexed(cpu, l.nest, {{"const float* __restrict", "in0"}, {"float* __restrict", "out0"}});
  const std::string text = cpu.str();
  EXPECT_NE(text.find("for (int64_t j = 0; j < 2; ++j)"), std::string::npos) << text;
  EXPECT_NE(text.find("for (int64_t j = 2; j < 6; ++j)"), std::string::npos) << text;
  EXPECT_EQ(text.find("j < inner"), std::string::npos) << text;
  EXPECT_EQ(count(text, "out0[i] = t0;"), 2) << text;
}

// `op` over axis `axis` of x [64, 32] (keepdims), x read by one load at the input index.
struct LoweredReduction {
  Model model;
  lower::IndexedReduction reduction;
};
LoweredReduction reduction_over(const std::string& op, int axis) {
  const std::string out = axis == 0 ? "[1,32]" : "[64,1]";
  LoweredReduction l{testing::parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[64,32] x) => (float)" + out + " y) { y = " + op + "<axes=[" + std::to_string(axis) + "]>(x) }"),
                     {}};
  lower::IndexedReduction& r = l.reduction;
  r.input = {{64, -1}, {32, -1}};
  r.space = axis == 0 ? lower::Dims{{1, -1}, {32, -1}} : lower::Dims{{64, -1}, {1, -1}};
  r.reduced = {axis == 0, axis == 1};
  lower::IndexedReduction::Reduce red;
  red.node = l.model.graph->nodes()[0];
  red.op = op;
  red.output = 0;
  lower::IndexedStatement load;
  load.kind = lower::IndexedStatement::Load;
  load.name = "l0";
  load.array = "in0";
  load.expr = axis == 0 ? "(k0) * int64_t(32) + j" : "(q0) * int64_t(32) + k1";
  red.at = {load};
  red.value = "l0";
  r.reduces.push_back(red);
  return l;
}

TEST(LoweringIR, EachPrinterSchedulesTheSameIndexedReduction) {
  LoweredReduction columns = reduction_over("ReduceMean", 0), lanes = reduction_over("ReduceMax", 1);
  codegen::cpu::RegionParams params = {{"const float* __restrict", "in0"}, {"float* __restrict", "out0"}};
  std::ostringstream cpu_columns, cpu_lanes, gpu_columns;
  codegen::cpu::print_indexed_reduction(cpu_columns, columns.reduction, params);
  EXPECT_EQ(params.size(), size_t(2)) << "the partial states' pointers are the reduction's own";
  codegen::cpu::print_indexed_reduction(cpu_lanes, lanes.reduction, params);
  codegen::cuda::print_indexed_reduction(gpu_columns, columns.reduction);
  // CPU, a column mean: the reduced axis splits into chunks of partial states, fp32 partial sums across the block.
  EXPECT_NE(cpu_columns.str().find("const int64_t extent = int64_t(64);"), std::string::npos) << cpu_columns.str();
  EXPECT_NE(cpu_columns.str().find("part0[jj] += l0;"), std::string::npos) << cpu_columns.str();
  EXPECT_NE(cpu_columns.str().find("const float l0 = in0[(k0) * int64_t(32) + j];"), std::string::npos)
      << cpu_columns.str();
  // CPU, a maximum along the innermost axis: vector lanes with their NaN flags.
  EXPECT_NE(cpu_lanes.str().find("reduction(max:p0) reduction(|:nan0)"), std::string::npos) << cpu_lanes.str();
  // CUDA: one thread per output element runs the reduced loop; the same statement, sum and mean, no schedule.
  const std::string gpu = gpu_columns.str();
  EXPECT_NE(gpu.find("double acc0 = 0.0;"), std::string::npos) << gpu;
  EXPECT_NE(gpu.find("for (int64_t k0 = 0; k0 < int64_t(64); ++k0) {"), std::string::npos) << gpu;
  EXPECT_NE(gpu.find("const float l0 = in0[(k0) * int64_t(32) + j];"), std::string::npos) << gpu;
  EXPECT_NE(gpu.find("acc0 += double(l0);"), std::string::npos) << gpu;
  EXPECT_NE(gpu.find("out0[i] = float(acc0 / (1.0 * double(int64_t(64))));"), std::string::npos) << gpu;
  EXPECT_EQ(gpu.find("chunks"), std::string::npos) << gpu;
  EXPECT_EQ(gpu.find("#pragma"), std::string::npos) << gpu;
}

}  // namespace
}  // namespace gaf
