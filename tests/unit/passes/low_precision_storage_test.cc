// low-precision-storage: products and the ops between them on bfloat16 / float16, sensitive and fp32-only ops
// kept float, casts at the boundaries; numerically the CPU runtime running the rewritten graph against fp32.
#include <cmath>

#include "gaf/builder.h"
#include "gaf/codegen.h"
#include "pass_test_util.h"

namespace gaf {
namespace {

const char* kPass = "low-precision-storage";

// The fp32-only set of the CUDA backend's library kernels, as a test predicate.
bool gather_is_float_only(const Node& n) { return n.domain.empty() && n.op_type == "Gather"; }

StoragePolicy policy() {
  StoragePolicy p;
  p.float_only = gather_is_float_only;
  return p;
}

testing::Rewritten store(const Model& m, DType t) {
  std::vector<std::unique_ptr<Pass>> passes;
  passes.push_back(make_low_precision_storage(t, policy()));
  return testing::rewrite(m, std::move(passes));
}

DType type_of(const Graph& g, const std::string& value) {
  const Value* v = g.find_value(value);
  return v ? v->type.dtype : DType::Undefined;
}

// max |after - before| over max |before|, the worst output.
double worst_relative_error(const Model& before, const Model& after) {
  runtime::Session a(*before.graph), b(*after.graph);
  auto inputs = tools::random_inputs(*before.graph, 11, 3);
  auto want = a.run(inputs), got = b.run(inputs);
  double worst = 0;
  for (size_t o = 0; o < want.size(); ++o) {
    EXPECT_EQ(got[o].dtype(), want[o].dtype());
    double d = 0, scale = 0;
    for (int64_t i = 0; i < want[o].numel(); ++i) {
      d = std::max(d, std::fabs(got[o].get_double(i) - want[o].get_double(i)));
      scale = std::max(scale, std::fabs(want[o].get_double(i)));
    }
    worst = std::max(worst, d / scale);
  }
  return worst;
}

void named_output(GraphBuilder& b, Value* v, const std::string& name) {
  b.graph().rename(v, name);
  b.output(v);
}

// x [64, 256] -> MatMul -> + bias -> Relu -> MatMul -> + residual x.
Model mlp_block() {
  Model m;
  GraphBuilder b(m, 17);
  Value* x = b.input("x", DType::Float, {64, 256});
  Value* h = b.op("MatMul", {x, b.random_constant("w1", {256, 512}, 0.06f, 1)});
  h = b.op("Relu", {b.op("Add", {h, b.random_constant("b1", {512}, 0.1f, 2)})});
  h = b.op("MatMul", {h, b.random_constant("w2", {512, 256}, 0.04f, 3)});
  named_output(b, b.op("Add", {h, x}), "y");
  b.finish();
  return m;
}

TEST(LowPrecisionStorage, ProductsAndTheOpsBetweenThemStoreBf16) {
  Model m = mlp_block();
  auto r = store(m, DType::BFloat16);
  const Graph& g = *r.after.graph;
  int products = 0;
  for (const Node* n : g.nodes()) {
    if (n->op_type == "MatMul") {
      ++products;
      for (const Value* v : n->inputs()) EXPECT_EQ(v->type.dtype, DType::BFloat16) << r.dump();
    }
    if (n->op_type == "Relu" || n->op_type == "Add") {
      EXPECT_EQ(n->output(0)->type.dtype, DType::BFloat16) << r.dump();
    }
  }
  EXPECT_EQ(products, 2);
  // The input is cast once on the way in (the first product and the residual share it), the output once on the
  // way out under its own name and type.
  EXPECT_EQ(r.ops()["Cast"], 2) << r.dump();
  EXPECT_EQ(type_of(g, "y"), DType::Float);
  EXPECT_EQ(g.outputs()[0]->producer()->op_type, "Cast");
  EXPECT_GT(r.count(kPass), 0);
  // bfloat16 keeps 8 bits: within 2e-2 of the output's scale, and not the fp32 result (the rounding happened).
  const double err = worst_relative_error(r.before, r.after);
  EXPECT_LT(err, 2e-2);
  EXPECT_GT(err, 1e-5);
}

TEST(LowPrecisionStorage, Fp16IsCloserThanBf16) {
  Model m = mlp_block();
  const double e16 = worst_relative_error(m, store(m, DType::Float16).after);
  const double ebf = worst_relative_error(m, store(m, DType::BFloat16).after);
  EXPECT_LT(e16, 5e-3);
  EXPECT_LT(e16, ebf);
}

// Softmax is precision-sensitive: it reads fp32 (a Cast in front), returns fp32, and the product after it casts
// back; the scores' product stays bf16.
TEST(LowPrecisionStorage, SensitiveOpsKeepFp32) {
  Model m;
  GraphBuilder b(m, 17);
  Value* q = b.input("q", DType::Float, {32, 64});
  Value* s = b.op("MatMul", {q, b.random_constant("k", {64, 48}, 0.2f, 4)});
  Value* p = b.op("Softmax", {s}, {{"axis", int64_t(-1)}});
  named_output(b, b.op("MatMul", {p, b.random_constant("v", {48, 64}, 0.5f, 5)}), "o");
  b.finish();
  auto r = store(m, DType::BFloat16);
  for (const Node* n : r.after.graph->nodes())
    if (n->op_type == "Softmax") {
      EXPECT_EQ(n->input(0)->type.dtype, DType::Float) << r.dump();
      EXPECT_EQ(n->input(0)->producer()->op_type, "Cast") << r.dump();
      EXPECT_EQ(n->output(0)->type.dtype, DType::Float) << r.dump();
    }
  EXPECT_LT(worst_relative_error(r.before, r.after), 2e-2);
}

// Values computed in fp32 stay fp32 where they meet a product's bf16 result (a position or mask, here x * 3 +
// 1 from an input), while data from an fp32-only library kernel (Gather) joins it in bf16.
TEST(LowPrecisionStorage, ComputedFloatsStayFp32AndLibraryDataJoinsBf16) {
  Model m;
  GraphBuilder b(m, 17);
  Value* ids = b.input("ids", DType::Int64, {16});
  Value* pos = b.input("pos", DType::Float, {16, 32});
  Value* emb = b.op("Gather", {b.random_constant("table", {100, 32}, 1.0f, 6), ids}, {{"axis", int64_t(0)}});
  Value* h = b.op("MatMul", {emb, b.random_constant("w", {32, 32}, 0.2f, 7)});
  Value* with_emb = b.op("Add", {h, emb});                                 // bf16: emb is gathered data
  Value* shifted = b.op("Add", {b.op("Mul", {pos, b.op("Exp", {pos})}), b.scalar(1.0f)});  // fp32: computed
  named_output(b, b.op("Add", {with_emb, shifted}), "y");
  b.finish();
  auto r = store(m, DType::BFloat16);
  const Graph& g = *r.after.graph;
  for (const Node* n : g.nodes()) {
    if (n->op_type == "Gather") {
      EXPECT_EQ(n->output(0)->type.dtype, DType::Float) << r.dump();
    }
    if (n->op_type == "Exp" || n->op_type == "Mul") {
      EXPECT_EQ(n->output(0)->type.dtype, DType::Float) << r.dump();
    }
  }
  int bf16_adds = 0, float_adds = 0;
  for (const Node* n : g.nodes())
    if (n->op_type == "Add") (n->output(0)->type.dtype == DType::BFloat16 ? bf16_adds : float_adds)++;
  EXPECT_EQ(bf16_adds, 1) << r.dump();   // the product plus the embeddings
  EXPECT_EQ(float_adds, 2) << r.dump();  // the computed value, and the sum that reads it
  EXPECT_LT(worst_relative_error(r.before, r.after), 2e-2);
}

// The CUDA backend's own policy: its pools and gather follow their input's storage. A pool between
// convolutions and the global pool before the classifier run on bf16 (no casts around them; the kernels sum in
// fp32); a pool of the model's input stays fp32, and its result is data that joins a bf16 operand in bf16.
TEST(LowPrecisionStorage, CudaPoolsFollowTheirInputsStorage) {
  Model m;
  GraphBuilder b(m, 17);
  Value* x = b.input("x", DType::Float, {1, 8, 16, 16});
  Value* c1 = b.op("Relu", {b.op("Conv", {x, b.random_constant("w1", {8, 8, 3, 3}, 0.2f, 3)},
                                   {{"pads", std::vector<int64_t>{1, 1, 1, 1}}})});
  Value* p1 = b.op("MaxPool", {c1}, {{"kernel_shape", std::vector<int64_t>{2, 2}},
                                     {"strides", std::vector<int64_t>{2, 2}}});
  Value* px = b.op("AveragePool", {x}, {{"kernel_shape", std::vector<int64_t>{2, 2}},
                                        {"strides", std::vector<int64_t>{2, 2}}});
  Value* c2 = b.op("Conv", {b.op("Add", {p1, px}), b.random_constant("w2", {8, 8, 1, 1}, 0.3f, 4)});
  Value* g = b.op("Flatten", {b.op("GlobalAveragePool", {c2})});
  named_output(b, b.op("Gemm", {g, b.random_constant("fc", {4, 8}, 0.3f, 5)}, {{"transB", int64_t(1)}}), "y");
  b.finish();
  auto r = testing::rewrite(m, codegen::cuda_kernel_backend().precision_passes(PrecisionMode::Bf16Mixed));
  const Graph& after = *r.after.graph;
  int casts = 0;
  for (const Node* n : after.nodes()) {
    if (n->op_type == "MaxPool" || n->op_type == "GlobalAveragePool") {
      EXPECT_EQ(n->output(0)->type.dtype, DType::BFloat16) << n->describe() << r.dump();
    }
    if (n->op_type == "AveragePool") {
      EXPECT_EQ(n->output(0)->type.dtype, DType::Float) << r.dump();
    }
    casts += n->op_type == "Cast";
  }
  // x to bf16 for the first convolution, the input pool's result to bf16 for the Add, y back to float.
  EXPECT_EQ(casts, 3) << r.dump();
  EXPECT_LT(worst_relative_error(r.before, r.after), 2e-2);
}

// An op the backend runs on narrow operands with fp32 math inside (the CUDA flash attention): its Q, K, V in
// bf16 though it is precision-sensitive, the mask fp32, its result bf16; the CPU runtime widens them the same way.
TEST(LowPrecisionStorage, AttentionReadsNarrowOperandsAndKeepsItsMaskFp32) {
  Model m;
  GraphBuilder b(m, 17);
  Value* x = b.input("x", DType::Float, {2, 64, 32});
  Value* mask = b.input("mask", DType::Float, {64, 64});
  Value* q = b.op("MatMul", {x, b.random_constant("wq", {32, 32}, 0.3f, 8)});
  Value* k = b.op("MatMul", {x, b.random_constant("wk", {32, 32}, 0.3f, 9)});
  Value* v = b.op("MatMul", {x, b.random_constant("wv", {32, 32}, 0.3f, 10)});
  Node* a = b.graph().add_node("Attention", {q, k, v, mask}, {"att"}, "att");
  a->domain = "gaf";
  a->attrs["scale"] = 0.17677669f;
  a->output(0)->type = q->type;
  named_output(b, b.op("MatMul", {a->output(0), b.random_constant("wo", {32, 32}, 0.3f, 11)}), "y");
  m.opsets["gaf"] = 1;
  b.finish();
  StoragePolicy p = policy();
  p.narrow_inputs = [](const Node& n) {
    return n.domain == "gaf" && n.op_type == "Attention" ? std::vector<int>{0, 1, 2} : std::vector<int>{};
  };
  std::vector<std::unique_ptr<Pass>> passes;
  passes.push_back(make_low_precision_storage(DType::BFloat16, std::move(p)));
  auto r = testing::rewrite(m, std::move(passes));
  bool seen = false;
  for (const Node* n : r.after.graph->nodes())
    if (n->op_type == "Attention") {
      seen = true;
      for (int i = 0; i < 3; ++i) EXPECT_EQ(n->input(i)->type.dtype, DType::BFloat16) << r.dump();
      EXPECT_EQ(n->input(3)->type.dtype, DType::Float) << r.dump();
      EXPECT_EQ(n->output(0)->type.dtype, DType::BFloat16) << r.dump();
    }
  EXPECT_TRUE(seen);
  EXPECT_EQ(r.ops()["Cast"], 2) << r.dump();  // x in, y out: nothing between the products and attention
  const double err = worst_relative_error(r.before, r.after);
  EXPECT_LT(err, 2e-2);
  EXPECT_GT(err, 1e-5);
}

// Does not fire: no product, nothing stored narrower (the pass changes nothing and counts nothing).
TEST(LowPrecisionStorage, WithoutProductsNothingChanges) {
  Model m = testing::parse(testing::header(17) + R"(g (float[8,16] x, float[8,16] y) => (float[8,16] z) {
      s = Add(x, y)
      z = Relu(s)
    })");
  auto r = store(m, DType::BFloat16);
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Add", 1}, {"Relu", 1}})) << r.dump();
  EXPECT_EQ(r.count(kPass), 0);
  EXPECT_EQ(type_of(*r.after.graph, "s"), DType::Float);
}

TEST(LowPrecisionStorage, StoresOnlySixteenBitFloats) {
  EXPECT_THROW(make_low_precision_storage(DType::Float, policy()), Error);
  EXPECT_THROW(make_low_precision_storage(DType::BFloat16, StoragePolicy{}), Error);
}

// The backends' answer to a precision mode: the CPU compresses constant weights and keeps activations fp32;
// CUDA stores bf16 / fp16 through this pass, and has no int8 products (one error naming the mode).
TEST(LowPrecisionStorage, EachBackendSaysWhatAPrecisionModeMeans) {
  const KernelBackend& cpu = codegen::cpu_kernel_backend();
  const KernelBackend& gpu = codegen::cuda_kernel_backend();
  EXPECT_EQ(cpu.weight_precision(PrecisionMode::Bf16Mixed), "bf16");
  EXPECT_EQ(cpu.weight_precision(PrecisionMode::Int8Weights), "int8");
  EXPECT_TRUE(cpu.precision_passes(PrecisionMode::Bf16Mixed).empty());
  EXPECT_EQ(gpu.weight_precision(PrecisionMode::Bf16Mixed), "");
  for (PrecisionMode mode : {PrecisionMode::Bf16Mixed, PrecisionMode::Fp16Mixed}) {
    auto passes = gpu.precision_passes(mode);
    ASSERT_EQ(passes.size(), 1u);
    EXPECT_EQ(passes[0]->name(), kPass);
  }
  EXPECT_TRUE(gpu.precision_passes(PrecisionMode::Fp32).empty());
  EXPECT_TRUE(gpu.precision_passes(PrecisionMode::Tf32).empty());
  try {
    gpu.weight_precision(PrecisionMode::Int8Weights);
    ADD_FAILURE() << "int8_weights on CUDA should be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("int8_weights"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gaf
