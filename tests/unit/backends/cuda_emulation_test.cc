// The CUDA backend's kernels checked for their numbers without a GPU: the generated kernels (the emitter's
// CUDA dialect with cuda_prelude()) and the hand-written library kernels (flash attention, pooling, gather)
// run on the CPU emulator (cuda_emulator.h) with the launch configuration the CUDA session uses, and must
// give what the CPU runtime gives for the same node (a fused node alone, its body run op by op).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <random>

#include "backends/cuda/library_kernels.h"
#include "backends/cuda_emulator.h"
#include "codegen/cuda/printer.h"
#include "gaf/codegen.h"
#include "gaf/op_registry.h"
#include "gaf/session.h"
#include "gaf/tools.h"
#include "test_util.h"

// Without the CUDA toolkit the backend's sources are not part of the library; the library kernels' source and
// argument builders are plain C++, compiled into the test then.
#ifndef GAF_HAVE_CUDA
#include "backends/cuda/library_kernels.cc"
#endif

namespace gaf {
namespace {

using testing::CudaEmulator;
using testing::EmuDim;

constexpr unsigned kBlock = unsigned(codegen::cuda::kBlockSize);
constexpr int64_t kMaxGrid = 132 * 16;  // an H200's SMs times 16, as the session clamps

// GafArgs as the host fills it (cuda_prelude(): same arrays, same order).
struct HostGafArgs {
  const void* in[codegen::cuda::kMaxInputs];
  void* out[codegen::cuda::kMaxOutputs];
  int64_t sym[codegen::cuda::kMaxSymbols];
};

unsigned clamp_grid(int64_t work) { return unsigned(std::clamp<int64_t>(work, 1, kMaxGrid)); }

// An output buffer for a kernel: NaN bytes (unwritten float elements stay NaN) between guard zones that must
// come back untouched (a write outside the tensor fails the check instead of corrupting the heap).
class Guarded {
 public:
  Guarded(DType dtype, std::vector<int64_t> dims) : tensor_(dtype, std::move(dims)) {
    bytes_ = tensor_.nbytes();
    buf_.assign(bytes_ + 2 * kPad, kGuardByte);
    std::memset(buf_.data() + kPad, 0xff, bytes_);
  }
  void* data() { return buf_.data() + kPad; }
  float* floats() { return static_cast<float*>(data()); }
  // The result as a tensor; a guard byte changed is a failure.
  Tensor take() {
    for (size_t i = 0; i < kPad; ++i) {
      EXPECT_EQ(buf_[i], kGuardByte) << "a write " << kPad - i << " bytes before the output";
      EXPECT_EQ(buf_[kPad + bytes_ + i], kGuardByte) << "a write " << i << " bytes past the output";
      if (buf_[i] != kGuardByte || buf_[kPad + bytes_ + i] != kGuardByte) break;
    }
    std::memcpy(tensor_.raw(), data(), bytes_);
    return tensor_;
  }

 private:
  static constexpr size_t kPad = 16384;
  static constexpr unsigned char kGuardByte = 0xa5;
  Tensor tensor_;
  size_t bytes_ = 0;
  std::vector<unsigned char> buf_;
};

Model parse17(const std::string& text) {
  return testing::parse(std::string("<ir_version: 8, opset_import: [\"\" : 17]> ") + text);
}

// ---------------------------------------------------------------------------------------------------------------
// Generated kernels

// A graph holding one fused node (inputs as graph inputs, constants as initializers), like verify's
// run_group_alone.
struct Alone {
  std::unique_ptr<Graph> g = std::make_unique<Graph>();
  Node* node = nullptr;
  std::string what;  // for messages
  codegen::EmittedKernel kernel;
};

Value* outer_value(Graph& g, const Value* v, const Tensor* constant) {
  if (Value* found = g.find_value(v->name())) return found;
  return constant ? g.add_constant(v->name(), *constant) : g.add_input(v->name(), v->type);
}

void finish_alone(Alone& a, const Node& like, std::unique_ptr<Graph> body, const std::vector<Value*>& ins) {
  std::vector<std::string> names;
  for (const Value* o : like.outputs()) names.push_back(o->name());
  a.node = a.g->add_node(like.op_type.empty() ? "fused" : like.op_type, ins, names, like.name);
  a.node->domain = "gaf.fused";
  a.node->opset = 1;
  a.node->body = std::move(body);
  for (int i = 0; i < a.node->num_outputs(); ++i) {
    a.node->output(i)->type = like.output(i)->type;
    a.g->add_output(a.node->output(i));
  }
}

// A fused node of a fused model, alone.
Alone alone_fused(const Node& fused) {
  Alone a;
  std::vector<Value*> ins;
  for (const Value* v : fused.inputs())
    ins.push_back(outer_value(*a.g, v, v->is_constant() ? &v->constant() : nullptr));
  finish_alone(a, fused, fused.body->clone(), ins);
  a.what = fmt::format("fused node '{}' ({} ops)", fused.name, fused.body->num_nodes());
  return a;
}

// The constant behind v: an initializer or a Constant node's value.
const Tensor* constant_of(const Value* v) {
  if (!v) return nullptr;
  if (v->is_constant()) return &v->constant();
  if (v->producer() && v->producer()->op_type == "Constant") return v->producer()->attr_tensor("value");
  return nullptr;
}

// One op of an unfused model wrapped as a one-node fused body (as fusion/apply.cc builds bodies: constants of
// up to 16 elements copied in, other inputs as body inputs).
std::optional<Alone> alone_single(const Node& n) {
  if (n.op_type == "Constant" || n.body || !n.domain.empty()) return std::nullopt;
  for (const Value* o : n.outputs())
    if (!o->type.has_static_shape()) return std::nullopt;
  Alone a;
  auto body = std::make_unique<Graph>();
  body->name = "single_" + n.op_type;
  std::vector<Value*> body_ins, outer_ins;
  for (const Value* v : n.inputs()) {
    if (!v) {
      body_ins.push_back(nullptr);
      continue;
    }
    const Tensor* c = constant_of(v);
    if (Value* seen = body->find_value(v->name())) {
      body_ins.push_back(seen);
    } else if (c && c->numel() <= 16) {
      body_ins.push_back(body->add_constant(v->name(), *c));
    } else {
      Value* bi = body->add_input(v->name(), v->type);
      if (c) bi->type = TensorType{c->dtype(), Shape(c->dims().begin(), c->dims().end())};
      body_ins.push_back(bi);
      outer_ins.push_back(outer_value(*a.g, bi, c));
    }
  }
  std::vector<std::string> outs;
  for (const Value* o : n.outputs()) outs.push_back(o->name());
  Node* c = body->add_node(n.op_type, body_ins, outs, n.name);
  c->opset = n.opset;
  c->attrs = n.attrs;
  for (int i = 0; i < n.num_outputs(); ++i) {
    c->output(i)->type = n.output(i)->type;
    body->add_output(c->output(i));
  }
  finish_alone(a, n, std::move(body), outer_ins);
  a.node->op_type = "single_" + n.op_type;
  a.what = fmt::format("single op {} '{}'", n.op_type, n.name);
  return a;
}

enum class Kind { Rows, Element, Indexed };
const char* kind_name(Kind k) {
  return k == Kind::Rows ? "rows" : k == Kind::Element ? "element" : "indexed";
}

Kind kind_of(const Alone& a) {
  if (a.kernel.sig.cuda.rows) return Kind::Rows;
  for (const Node* n : a.node->body->nodes()) {
    const OpKind k = op_kind(*n);
    if (k == OpKind::Injective || k == OpKind::Reduction) return Kind::Indexed;
  }
  return Kind::Element;
}

struct Tally {
  int rows = 0, element = 0, indexed = 0, refused = 0;
  void add(Kind k) { (k == Kind::Rows ? rows : k == Kind::Element ? element : indexed) += 1; }
};

// Runs `a`'s kernel on the emulator (the session's grid, then a grid of 2 blocks that makes every block
// stride) and compares each output with the CPU runtime running the fused node's body op by op.
void check_alone(CudaEmulator& emu, Alone& a, uint64_t seed) {
  const codegen::EmittedKernel& k = a.kernel;
  SCOPED_TRACE(a.what + " as " + k.sig.symbol + " (" + kind_name(kind_of(a)) + " kernel)");
  std::vector<Tensor> inputs = tools::random_inputs(*a.g, seed);
  runtime::SessionOptions so;
  so.codegen = false;  // the body op by op: the reference owes nothing to the emitter
  runtime::Session ref(*a.g, so);
  const std::vector<Tensor> expected = ref.run(inputs);

  HostGafArgs args{};
  std::vector<std::vector<int64_t>> in_dims;
  size_t next = 0;
  for (int i = 0; i < a.node->num_inputs(); ++i) {
    const Value* v = a.node->input(i);
    const Tensor& t = v->is_constant() ? v->constant() : inputs.at(next++);
    args.in[i] = t.raw();
    in_dims.push_back(t.dims());
  }
  for (size_t s = 0; s < k.sig.symbol_binds.size(); ++s)
    args.sym[s] = in_dims.at(size_t(k.sig.symbol_binds[s].first)).at(size_t(k.sig.symbol_binds[s].second));
  auto value = [&](const codegen::DimExpr& e) { return e.symbol >= 0 ? args.sym[e.symbol] : e.value; };
  auto product = [&](const std::vector<codegen::DimExpr>& ds) {
    int64_t p = 1;
    for (const auto& e : ds) p *= value(e);
    return p;
  };
  int64_t work = 0;
  size_t smem = 0;
  if (k.sig.cuda.rows) {
    work = product(k.sig.cuda.rows_dims);
    smem = size_t(k.sig.cuda.row_buffers) * size_t(product(k.sig.cuda.row_length)) * sizeof(float);
  } else {
    for (const auto& od : k.sig.output_dims) work = std::max(work, product(od));
    work = (work + kBlock - 1) / kBlock;
  }
  std::vector<unsigned> grids = {clamp_grid(work)};
  if (grids[0] > 2) grids.push_back(2);
  for (unsigned grid : grids) {
    std::vector<Guarded> bufs;
    bufs.reserve(k.sig.output_dims.size());
    for (size_t o = 0; o < k.sig.output_dims.size(); ++o) {
      std::vector<int64_t> dims;
      for (const auto& e : k.sig.output_dims[o]) dims.push_back(value(e));
      bufs.emplace_back(k.sig.output_dtypes[o], dims);
      args.out[o] = bufs.back().data();
    }
    try {
      emu.launch(k.sig.symbol, &args, sizeof args, EmuDim{grid, 1}, kBlock, smem);
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what() << "\n" << k.source;
      return;
    }
    ASSERT_EQ(bufs.size(), expected.size());
    std::vector<Tensor> outs;
    for (Guarded& b : bufs) outs.push_back(b.take());
    for (size_t o = 0; o < outs.size(); ++o) {
      const bool half = expected[o].dtype() == DType::Float16 || expected[o].dtype() == DType::BFloat16;
      tools::Comparison c = tools::compare(outs[o], expected[o], half ? 1e-2 : 1e-4, half ? 1e-3 : 1e-5);
      EXPECT_TRUE(c.ok) << "output " << o << " ('" << a.node->output(int(o))->name() << "') with grid "
                        << grid << ": " << c.message << "\nkernel:\n"
                        << testing::numbered(k.source) << "\nbody:\n"
                        << a.node->body->to_string();
    }
  }
}

// Every fused node of `model` fused for cuda-h200, and (with `singles`) every op of the unfused model as a
// one-node body, that the CUDA dialect prints (anchor groups run as library calls: not printed), appended to
// `cases` with their kernels (symbols numbered on from cases.size()) and `source`.
void collect(const std::string& name, const Model& model, bool singles, std::vector<Alone>& cases,
             std::string& source, Tally& tally) {
  tools::FuseOptions opts;
  opts.fusion.opt_level = 3;
  opts.target = Target::builtin_or_file("cuda-h200");
  Model fused = testing::fused_copy(model, opts);
  std::vector<Alone> found;
  for (const Node* n : fused.graph->nodes())
    if (n->body) found.push_back(alone_fused(*n));
  if (singles)
    for (const Node* n : model.graph->nodes())
      if (auto a = alone_single(*n)) found.push_back(std::move(*a));
  codegen::EmitOptions eo;
  eo.dialect = codegen::Dialect::Cuda;
  int printed = 0;
  for (Alone& a : found) {
    bool anchor = false;
    for (const Node* b : a.node->body->nodes()) anchor |= op_kind(*b) == OpKind::Anchor;
    if (anchor) continue;
    std::string why;
    auto k = codegen::emit_kernel(*a.node, fmt::format("gaf_emu_k{}", cases.size()), eo, &why);
    if (!k) {
      ++tally.refused;
      std::printf("[ info ] %s: %s not printed: %s\n", name.c_str(), a.what.c_str(), why.c_str());
      continue;
    }
    a.kernel = std::move(*k);
    a.what = name + ": " + a.what;
    source += a.kernel.source + "\n";
    cases.push_back(std::move(a));
    ++printed;
  }
  EXPECT_GT(printed, 0) << name << ": no kernel printed";
}

TEST(CudaEmulation, GeneratedKernelsMatchTheCpu) {
  const auto t0 = std::chrono::steady_clock::now();
  Tally tally;
  std::vector<Alone> cases;
  std::string source = codegen::cuda_prelude();
  collect("demo_transformer_block", tools::demo_transformer_block(32, 64, 4, 128), true, cases, source,
          tally);
  struct Case {
    const char* name;
    const char* text;
  };
  const Case graphs[] = {
      {"elementwise chain, broadcast",
       R"(g (float[4,8,40] x, float[8,1] b, float[40] c) => (float[4,8,40] y) {
            a = Add(x, b)  s = Sigmoid(a)  m = Mul(a, s)  d = Sub(m, c)  e = Erf(d)  t = Tanh(e)  y = Max(t, x) })"},
      {"elementwise, flat: four elements per thread step, 35 = 8 x 4 + a tail of 3",
       R"(g (float[5,7] x, float[5,7] z) => (float[5,7] y) { a = Mul(x, z)  s = Sigmoid(a)  y = Add(s, x) })"},
      {"softmax, last axis, rows longer than a block",
       R"(g (float[3,300] x) => (float[3,300] y) { t = Mul(x, x)  y = Softmax <axis = -1> (t) })"},
      {"softmax, short rows",
       R"(g (float[2,4,33] x) => (float[2,4,33] y, float[2,4,1] l) {
            t = Tanh(x)  y = Softmax <axis = -1> (t)  l = ReduceLogSumExp <axes = [-1]> (t) })"},
      {"layer norm with scale and bias",
       R"(g (float[3,5,96] x, float[1,5,96] pe, float[96] g, float[96] bb) => (float[3,5,96] y, float[3,5,1] mx) {
            a = Add(x, pe)  y = LayerNormalization <axis = -1> (a, g, bb)  mx = ReduceMax <axes = [-1]> (a) })"},
      {"transpose, reshape, add",
       R"(g (float[2,3,4,5] x, float[12] b) => (float[2,5,12] y) {
            t = Transpose <perm = [0, 3, 1, 2]> (x)  sh = Constant <value = int64[3] {2, 5, 12}> ()
            r = Reshape(t, sh)  a = Add(r, b)  y = Relu(a) })"},
      {"reduce mean, keepdims, last axis",
       R"(g (float[4,6,50] x) => (float[4,6,1] y) { e = Exp(x)  y = ReduceMean <axes = [-1], keepdims = 1> (e) })"},
      {"reduce mean, middle axis",
       R"(g (float[4,32,50] x) => (float[4,1,50] y) { e = Exp(x)  y = ReduceMean <axes = [1], keepdims = 1> (e) })"},
      {"transposed reduce max",
       R"(g (float[6,20,9] x) => (float[9,6] y) {
            t = Transpose <perm = [2, 0, 1]> (x)  n = Neg(t)  y = ReduceMax <axes = [2], keepdims = 0> (n) })"},
      {"concat",
       R"(g (float[2,3,5] a, float[2,3,4] b, float[2,2,9] c) => (float[2,5,9] y) {
            k = Concat <axis = 2> (a, b)  m = Concat <axis = 1> (k, c)  y = Relu(m) })"},
      {"split heads",
       R"(g (float[2,5,48] qkv) => (float[2,5,2,8] q, float[2,2,5,8] k, float[2,2,5,8] v) {
            sp = Constant <value = int64[3] {16, 16, 16}> ()  h = Constant <value = int64[4] {2, 5, 2, 8}> ()
            a, b, c = Split <axis = 2> (qkv, sp)
            q = Reshape(a, h)  kr = Reshape(b, h)  k = Transpose <perm = [0, 2, 1, 3]> (kr)
            vr = Reshape(c, h)  v = Transpose <perm = [0, 2, 1, 3]> (vr) })"},
      {"half softmax",
       R"(g (float16[6,40] x) => (float16[6,40] y) { r = Relu(x)  y = Softmax <axis = -1> (r) })"},
  };
  for (const Case& c : graphs) collect(c.name, parse17(c.text), true, cases, source, tally);
  // All kernels in one translation unit: one compile.
  std::unique_ptr<CudaEmulator> emu;
  try {
    emu = std::make_unique<CudaEmulator>(source);
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  uint64_t seed = 11;
  for (Alone& a : cases) {
    tally.add(kind_of(a));
    check_alone(*emu, a, seed++);
  }
  std::printf(
      "[ info ] emulated %d rows, %d element and %d indexed kernels (%d groups not printed) in %.1f s\n",
      tally.rows, tally.element, tally.indexed, tally.refused,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  EXPECT_GT(tally.rows, 0);
  EXPECT_GT(tally.element, 0);
  EXPECT_GT(tally.indexed, 0);
  EXPECT_NE(source.find("const int64_t n4 = n / 4;"), std::string::npos) << "no flat kernel took the vector loop";
}

// ---------------------------------------------------------------------------------------------------------------
// Library kernels

std::string library_source() { return codegen::cuda_prelude() + cuda::library_kernels_source(); }

CudaEmulator& library_emulator() {
  static CudaEmulator emu(library_source());
  return emu;
}

void expect_close(const Tensor& got, const Tensor& want, double rtol, double atol, const std::string& what) {
  tools::Comparison c = tools::compare(got, want, rtol, atol);
  EXPECT_TRUE(c.ok) << what << ": " << c.message;
}

Tensor random_tensor(std::vector<int64_t> dims, uint64_t seed, float scale = 1.0f) {
  Tensor t(DType::Float, std::move(dims));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

Value* input_of(Graph& g, const std::string& name, const std::vector<int64_t>& dims) {
  return g.add_input(name, TensorType{DType::Float, Shape(dims.begin(), dims.end())});
}

struct AttentionCase {
  std::vector<int64_t> q, k, v, mask, out;  // stored shapes (mask empty: none)
  std::vector<int64_t> q_perm, k_perm, v_perm, out_perm;
  float scale = 0;  // 0: the default 1/sqrt(d)
};

// `t` (float) in `dtype`, rounded to nearest even.
Tensor narrowed(const Tensor& t, DType dtype) {
  if (dtype == DType::Float) return t;
  Tensor r(dtype, t.dims());
  auto* bits = static_cast<uint16_t*>(r.raw());
  for (int64_t i = 0; i < t.numel(); ++i)
    bits[i] = dtype == DType::BFloat16 ? float_to_bf16(t.data<float>()[i]) : float_to_half(t.data<float>()[i]);
  return r;
}

// gaf.Attention alone: the CPU runtime's kernel against the emulated flash kernel the session launches for it
// (cuda::attention_launch: the tensor-core kernel for 16-bit operands of depths that are multiples of 16), on
// `mask` (values by index), Q, K, V and the output in `io`. fp32 to 1e-4; 16-bit operands within 1% (bfloat16)
// or 0.2% (float16) of the outputs' scale: P is rounded to the operands' type for P V, and both sides round
// their output once.
void check_attention(const AttentionCase& c, const std::function<float(int64_t)>& mask_value,
                     const std::string& what, DType io = DType::Float, bool tensor_cores = false) {
  SCOPED_TRACE(what);
  Graph g;
  auto input = [&](const std::string& name, const std::vector<int64_t>& dims) {
    return g.add_input(name, TensorType{io, Shape(dims.begin(), dims.end())});
  };
  std::vector<Value*> ins = {input("q", c.q), input("k", c.k), input("v", c.v)};
  if (!c.mask.empty()) ins.push_back(input_of(g, "mask", c.mask));
  Node* n = g.add_node("Attention", ins, {"y"}, "attention");
  n->domain = "gaf";
  n->opset = 1;
  if (c.scale != 0) n->attrs["scale"] = c.scale;
  if (!c.q_perm.empty()) n->attrs["q_perm"] = c.q_perm;
  if (!c.k_perm.empty()) n->attrs["k_perm"] = c.k_perm;
  if (!c.v_perm.empty()) n->attrs["v_perm"] = c.v_perm;
  if (!c.out_perm.empty()) n->attrs["out_perm"] = c.out_perm;
  n->output(0)->type = TensorType{io, Shape(c.out.begin(), c.out.end())};
  g.add_output(n->output(0));
  std::vector<Tensor> inputs = {narrowed(random_tensor(c.q, 1), io), narrowed(random_tensor(c.k, 2), io),
                                narrowed(random_tensor(c.v, 3), io)};
  if (!c.mask.empty()) {
    Tensor m(DType::Float, c.mask);
    for (int64_t i = 0; i < m.numel(); ++i) m.data<float>()[i] = mask_value(i);
    inputs.push_back(m);
  }
  runtime::Session s(g);
  const std::vector<Tensor> expected = s.run(inputs);

  int64_t nbatch = 0;
  cuda::AttnArgs a = cuda::attention_args(*n, &nbatch);
  a.q = inputs[0].raw(), a.k = inputs[1].raw(), a.v = inputs[2].raw();
  a.mask = c.mask.empty() ? nullptr : inputs[3].data<float>();
  Guarded out(io, c.out);
  a.o = out.data();
  const cuda::AttentionLaunch how = cuda::attention_launch(a);
  EXPECT_EQ(how.tensor_cores, tensor_cores) << how.kernel;
  const EmuDim grid{unsigned((a.lq + how.rows_per_block - 1) / how.rows_per_block), unsigned(nbatch)};
  library_emulator().launch(how.kernel, &a, sizeof a, grid, 128, how.smem);
  const double tol = io == DType::Float ? 1e-4 : io == DType::BFloat16 ? 1e-2 : 2e-3;
  expect_close(out.take(), expected[0], tol, io == DType::Float ? 1e-5 : tol, what);
}

TEST(CudaEmulation, FlashAttentionMatchesTheCpu) {
  const float inf = std::numeric_limits<float>::infinity();
  // [B, L, H, D] storage read through q_perm / out_perm, K stored transposed (k_perm swaps its last two
  // dims), 37 queries (not a multiple of 4), 45 keys (a full and a partial 32-key tile), a causal -inf mask
  // shifted so every key tile is partly live, and query 5 masked entirely (NaN, as the unfused softmax
  // gives).
  AttentionCase c;
  c.q = {2, 37, 3, 16}, c.k = {2, 3, 16, 45}, c.v = {2, 3, 45, 16}, c.mask = {37, 45}, c.out = {2, 37, 3, 16};
  c.q_perm = {0, 2, 1, 3}, c.k_perm = {0, 1, 3, 2}, c.out_perm = {0, 2, 1, 3};
  check_attention(
      c,
      [&](int64_t i) {
        const int64_t r = i / 45, j = i % 45;
        return r == 5 || j > r + 8 ? -inf : 0.0f;
      },
      "causal, permuted, depth 16");
  // Depth 64, value depth 48 (not a multiple of 32), K and V broadcast over the heads, a per-batch padding
  // mask of finite and infinite fills broadcast over heads and queries, an explicit scale.
  AttentionCase d;
  d.q = {2, 2, 70, 64}, d.k = {2, 1, 33, 64}, d.v = {2, 1, 33, 48}, d.mask = {2, 1, 1, 33},
  d.out = {2, 2, 70, 48};
  d.scale = 0.3f;
  check_attention(
      d, [&](int64_t i) { return i % 33 >= 30 ? (i < 33 ? -1e9f : -inf) : 0.1f * float(i % 5); },
      "padding, broadcast heads, depth 64");
  // No mask, plain layout, depth 64.
  AttentionCase e;
  e.q = {1, 2, 9, 64}, e.k = {1, 2, 64, 64}, e.v = {1, 2, 64, 64}, e.out = {1, 2, 9, 64};
  check_attention(e, {}, "no mask, depth 64");
}

// The tensor-core kernel (16-bit Q, K, V), its mma emulated by warp shuffles from the fragment layout the
// device instruction defines: two 64-row query blocks (the second partial), 130 keys (two full 64-key tiles
// and a partial one), the permuted layouts and a causal mask with a fully masked row (bfloat16); depth 128
// with value depth 32 and a padding mask (float16); depth 16 without a mask.
TEST(CudaEmulation, TensorCoreAttentionMatchesTheCpu) {
  const float inf = std::numeric_limits<float>::infinity();
  AttentionCase c;
  c.q = {1, 70, 1, 64}, c.k = {1, 1, 64, 130}, c.v = {1, 1, 130, 64}, c.mask = {70, 130}, c.out = {1, 70, 1, 64};
  c.q_perm = {0, 2, 1, 3}, c.k_perm = {0, 1, 3, 2}, c.out_perm = {0, 2, 1, 3};
  auto causal = [&](int64_t i) {
    const int64_t r = i / 130, j = i % 130;
    return r == 5 || j > r + 60 ? -inf : 0.0f;
  };
  check_attention(c, causal, "bfloat16, causal, permuted, depth 64", DType::BFloat16, true);
  AttentionCase d;
  d.q = {2, 1, 20, 128}, d.k = {2, 1, 40, 128}, d.v = {2, 1, 40, 32}, d.mask = {2, 1, 1, 40},
  d.out = {2, 1, 20, 32};
  d.scale = 0.05f;
  check_attention(
      d, [&](int64_t i) { return i % 40 >= 35 ? -inf : 0.1f * float(i % 7); }, "float16, padding, depth 128",
      DType::Float16, true);
  AttentionCase e;
  e.q = {1, 3, 17, 16}, e.k = {1, 3, 23, 16}, e.v = {1, 3, 23, 16}, e.out = {1, 3, 17, 16};
  check_attention(e, {}, "bfloat16, no mask, depth 16", DType::BFloat16, true);
  // Depth 48 with value depth 40 (not a multiple of 16): the CUDA-core kernel.
  AttentionCase f;
  f.q = {1, 1, 9, 48}, f.k = {1, 1, 12, 48}, f.v = {1, 1, 12, 40}, f.out = {1, 1, 9, 40};
  check_attention(f, {}, "bfloat16, value depth 40", DType::BFloat16, false);
}

// The CPU runtime's outputs of a one-op model.
std::vector<Tensor> cpu_outputs(const Model& m, const std::vector<Tensor>& inputs) {
  runtime::Session s(*m.graph);
  return s.run(inputs);
}

const Node& only_node(const Model& m) {
  for (const Node* n : m.graph->nodes())
    if (n->op_type != "Constant") return *n;
  throw std::runtime_error("no node");
}

void check_pool(CudaEmulator& emu, const char* text, uint64_t seed) {
  SCOPED_TRACE(text);
  Model m = parse17(text);
  const Node& n = only_node(m);
  std::vector<Tensor> in = {random_tensor(m.graph->inputs()[0]->type.static_dims(), seed)};
  const std::vector<Tensor> want = cpu_outputs(m, in);
  cuda::PoolArgs a = cuda::pool_args(n);
  for (unsigned grid : {clamp_grid((a.nc * a.oh * a.ow + kBlock - 1) / kBlock), 2u}) {
    Guarded y(DType::Float, want[0].dims());
    a.x = in[0].data<float>(), a.y = y.floats();
    emu.launch("gaf_pool2d", &a, sizeof a, EmuDim{grid, 1}, kBlock, 0);
    expect_close(y.take(), want[0], 1e-5, 1e-6, fmt::format("{} with grid {}", n.op_type, grid));
  }
}

TEST(CudaEmulation, PoolingAndGatherMatchTheCpu) {
  CudaEmulator& emu = library_emulator();
  const char* pools[] = {
      R"(g (float[2,3,9,11] x) => (float[2,3,5,6] y) {
           y = MaxPool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]> (x) })",
      R"(g (float[2,3,9,11] x) => (float[2,3,5,6] y) {
           y = AveragePool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], count_include_pad = 0> (x) })",
      R"(g (float[2,3,9,11] x) => (float[2,3,5,6] y) {
           y = AveragePool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], count_include_pad = 1> (x) })",
      R"(g (float[1,2,9,10] x) => (float[1,2,5,6] y) {
           y = AveragePool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], count_include_pad = 0, ceil_mode = 1> (x) })",
      R"(g (float[1,2,9,10] x) => (float[1,2,5,6] y) {
           y = MaxPool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], ceil_mode = 1> (x) })",
      R"(g (float[1,4,9,7] x) => (float[1,4,4,3] y) {
           y = MaxPool <kernel_shape = [2, 2], strides = [2, 2], dilations = [2, 2]> (x) })",
  };
  uint64_t seed = 100;
  for (const char* text : pools) check_pool(emu, text, seed++);
  // 15 planes: not a multiple of the block's 8 warps (the last block's warps run different trip counts, and
  // with one block every warp strides).
  const char* globals[] = {
      R"(g (float[3,5,7,9] x) => (float[3,5,1,1] y) { y = GlobalAveragePool (x) })",
      R"(g (float[3,5,7,9] x) => (float[3,5,1,1] y) { y = GlobalMaxPool (x) })",
  };
  for (const char* text : globals) {
    SCOPED_TRACE(text);
    Model m = parse17(text);
    const Node& n = only_node(m);
    std::vector<Tensor> in = {random_tensor({3, 5, 7, 9}, seed++)};
    const std::vector<Tensor> want = cpu_outputs(m, in);
    cuda::GlobalPoolArgs a = cuda::global_pool_args(n);
    for (unsigned grid : {clamp_grid((a.rows + 7) / 8), 1u}) {
      Guarded y(DType::Float, want[0].dims());
      a.x = in[0].data<float>(), a.y = y.floats();
      emu.launch("gaf_global_pool", &a, sizeof a, EmuDim{grid, 1}, kBlock, 0);
      expect_close(y.take(), want[0], 1e-5, 1e-6, fmt::format("{} with grid {}", n.op_type, grid));
    }
  }
  struct GatherCase {
    const char* text;
    std::vector<int64_t> idx_dims, idx;
  };
  const GatherCase gathers[] = {
      {R"(g (float[5,4,6] d, int64[2,3] i) => (float[2,3,4,6] y) { y = Gather <axis = 0> (d, i) })",
       {2, 3},
       {0, -1, 4, 2, -5, 1}},
      {R"(g (float[5,4,6] d, int64[3] i) => (float[5,3,6] y) { y = Gather <axis = 1> (d, i) })",
       {3},
       {3, -4, 1}},
      {R"(g (float[5,4,70] d, int64[2] i) => (float[5,4,2] y) { y = Gather <axis = -1> (d, i) })",
       {2},
       {-70, 69}},
  };
  for (const GatherCase& c : gathers) {
    SCOPED_TRACE(c.text);
    Model m = parse17(c.text);
    const Node& n = only_node(m);
    Tensor idx = Tensor::from<int64_t>(c.idx_dims, std::span<const int64_t>(c.idx));
    std::vector<Tensor> in = {random_tensor(m.graph->inputs()[0]->type.static_dims(), seed++), idx};
    const std::vector<Tensor> want = cpu_outputs(m, in);
    cuda::GatherArgs a = cuda::gather_args(n);
    for (unsigned grid : {clamp_grid((a.outer * a.nidx * a.len + kBlock - 1) / kBlock), 1u}) {
      Guarded y(DType::Float, want[0].dims());
      a.data = in[0].data<float>(), a.idx = reinterpret_cast<const long long*>(idx.data<int64_t>());
      a.y = y.floats();
      emu.launch("gaf_gather", &a, sizeof a, EmuDim{grid, 1}, kBlock, 0);
      expect_close(y.take(), want[0], 0, 0,
                   fmt::format("Gather axis {} with grid {}", n.attr_int("axis", 0), grid));
    }
  }
}

// With ceil_mode = 1 the last window runs past the padded input: an average counting padding divides by the
// window's elements inside the padded input (6 here), as the CPU runtime and ONNX Runtime do, not by kh * kw
// (9).
// `t` (bfloat16 or float16) as float, exactly.
Tensor widened(const Tensor& t) {
  Tensor r(DType::Float, t.dims());
  const auto* bits = static_cast<const uint16_t*>(t.raw());
  for (int64_t i = 0; i < t.numel(); ++i)
    r.data<float>()[i] = t.dtype() == DType::BFloat16 ? bf16_to_float(bits[i]) : half_to_float(bits[i]);
  return r;
}

// The pools and gather on 16-bit data (what bf16_mixed / fp16_mixed plans run): the CPU's fp32 result on the
// same values (the input rounded to the type first), maxima and gathered values exactly, averages within the
// type's one rounding (the kernels sum in fp32).
TEST(CudaEmulation, SixteenBitPoolsAndGatherMatchTheCpu) {
  CudaEmulator& emu = library_emulator();
  uint64_t seed = 300;
  for (DType io : {DType::BFloat16, DType::Float16}) {
    SCOPED_TRACE(dtype_name(io));
    const int code = io == DType::BFloat16 ? 1 : 2;
    const double tol = io == DType::BFloat16 ? 8e-3 : 1e-3;
    const char* pools[] = {
        R"(g (float[2,3,9,11] x) => (float[2,3,5,6] y) {
             y = MaxPool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]> (x) })",
        R"(g (float[2,3,9,11] x) => (float[2,3,5,6] y) {
             y = AveragePool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], count_include_pad = 0> (x) })",
    };
    for (const char* text : pools) {
      Model m = parse17(text);
      const Node& n = only_node(m);
      const Tensor x = narrowed(random_tensor({2, 3, 9, 11}, seed++), io);
      const std::vector<Tensor> want = cpu_outputs(m, {widened(x)});
      cuda::PoolArgs a = cuda::pool_args(n);
      a.io = code;
      Guarded y(io, want[0].dims());
      a.x = x.raw(), a.y = y.data();
      emu.launch("gaf_pool2d", &a, sizeof a, EmuDim{clamp_grid((a.nc * a.oh * a.ow + kBlock - 1) / kBlock), 1},
                 kBlock, 0);
      const double t = a.mode == 0 ? 0 : tol;
      expect_close(widened(y.take()), want[0], t, t, n.op_type);
    }
    for (const char* text : {R"(g (float[3,5,7,9] x) => (float[3,5,1,1] y) { y = GlobalAveragePool (x) })",
                             R"(g (float[3,5,7,9] x) => (float[3,5,1,1] y) { y = GlobalMaxPool (x) })"}) {
      Model m = parse17(text);
      const Node& n = only_node(m);
      const Tensor x = narrowed(random_tensor({3, 5, 7, 9}, seed++), io);
      const std::vector<Tensor> want = cpu_outputs(m, {widened(x)});
      cuda::GlobalPoolArgs a = cuda::global_pool_args(n);
      a.io = code;
      Guarded y(io, want[0].dims());
      a.x = x.raw(), a.y = y.data();
      emu.launch("gaf_global_pool", &a, sizeof a, EmuDim{clamp_grid((a.rows + 7) / 8), 1}, kBlock, 0);
      const double t = a.max ? 0 : tol;
      expect_close(widened(y.take()), want[0], t, t, n.op_type);
    }
    Model m = parse17(R"(g (float[5,4,6] d, int64[2,3] i) => (float[2,3,4,6] y) { y = Gather <axis = 0> (d, i) })");
    const Node& n = only_node(m);
    const std::vector<int64_t> ids = {0, -1, 4, 2, -5, 1};
    const Tensor idx = Tensor::from<int64_t>({2, 3}, std::span<const int64_t>(ids));
    const Tensor d = narrowed(random_tensor({5, 4, 6}, seed++), io);
    const std::vector<Tensor> want = cpu_outputs(m, {widened(d), idx});
    cuda::GatherArgs a = cuda::gather_args(n);
    a.io = code;
    Guarded y(io, want[0].dims());
    a.data = d.raw(), a.idx = reinterpret_cast<const long long*>(idx.data<int64_t>()), a.y = y.data();
    emu.launch("gaf_gather", &a, sizeof a, EmuDim{clamp_grid((a.outer * a.nidx * a.len + kBlock - 1) / kBlock), 1},
               kBlock, 0);
    expect_close(widened(y.take()), want[0], 0, 0, "Gather");
  }
}

TEST(CudaEmulation, AveragePoolCeilModeCountingPaddingMatchesTheCpu) {
  check_pool(library_emulator(), R"(g (float[1,2,9,10] x) => (float[1,2,5,6] y) {
      y = AveragePool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], count_include_pad = 1,
                       ceil_mode = 1> (x) })",
             7);
}

// ---------------------------------------------------------------------------------------------------------------
// The emulator itself: what it must catch, so that the checks above can fail.

TEST(CudaEmulation, EmulatorCatchesBrokenKernels) {
  const std::string src = codegen::cuda_prelude() + R"(
struct ToyArgs { float* y; int n; };
// A block sum over the block (gaf_block_sum): every thread writes the total of thread indices.
extern "C" __global__ void __launch_bounds__(256) toy_sum(const ToyArgs a) {
  const float t = gaf_block_sum(float(threadIdx.x));
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += gridDim.x * blockDim.x) a.y[i] = t;
}
// Dynamic shared memory written by one thread, read by another after a barrier.
extern "C" __global__ void __launch_bounds__(256) toy_dyn(const ToyArgs a) {
  extern __shared__ float sm[];
  sm[threadIdx.x] = float(threadIdx.x);
  __syncthreads();
  if (threadIdx.x < 32) a.y[blockIdx.x * 32 + threadIdx.x] = sm[255 - threadIdx.x];
}
// Writes past its dynamic shared memory.
extern "C" __global__ void __launch_bounds__(256) toy_overflow(const ToyArgs a) {
  extern __shared__ float sm[];
  sm[threadIdx.x + 1] = 1.0f;
  (void)a;
}
// A barrier only some threads reach.
extern "C" __global__ void __launch_bounds__(256) toy_divergent(const ToyArgs a) {
  if (threadIdx.x >= 64) return;
  __syncthreads();
  a.y[threadIdx.x] = 1.0f;
}
// Warps of different trip counts shuffling (as gaf_global_pool does), and an OR over the block.
extern "C" __global__ void __launch_bounds__(256) toy_warps(const ToyArgs a) {
  const int warp = threadIdx.x >> 5;
  float v = 0.0f;
  for (int k = 0; k <= warp; ++k) v += __shfl_xor_sync(0xffffffffu, float(threadIdx.x & 31u), k & 31);
  const int any = __syncthreads_or(threadIdx.x == 77);
  if ((threadIdx.x & 31u) == 0) a.y[warp] = v + (any ? 1000.0f : 0.0f);
}
)";
  CudaEmulator emu(src);
  struct ToyArgs {
    float* y;
    int n;
  };
  std::vector<float> y(600, -1.0f);
  ToyArgs a{y.data(), 600};
  emu.launch("toy_sum", &a, sizeof a, EmuDim{2, 1}, 256, 0);
  for (float f : y) ASSERT_EQ(f, 255.0f * 256.0f / 2.0f);
  emu.launch("toy_dyn", &a, sizeof a, EmuDim{3, 1}, 256, 256 * sizeof(float));
  for (int i = 0; i < 96; ++i) ASSERT_EQ(y[size_t(i)], float(255 - i % 32)) << i;
  EXPECT_THROW(emu.launch("toy_overflow", &a, sizeof a, EmuDim{1, 1}, 256, 256 * sizeof(float)),
               std::runtime_error);
  EXPECT_THROW(emu.launch("toy_divergent", &a, sizeof a, EmuDim{1, 1}, 256, 0), std::runtime_error);
  EXPECT_THROW(emu.launch("toy_sum", &a, sizeof a - 1, EmuDim{1, 1}, 256, 0), std::runtime_error);
  EXPECT_THROW(emu.launch("toy_sum", &a, sizeof a, EmuDim{1, 1}, 512, 0), std::runtime_error);
  EXPECT_THROW(emu.launch("no_such_kernel", &a, sizeof a, EmuDim{1, 1}, 256, 0), std::runtime_error);
  emu.launch("toy_warps", &a, sizeof a, EmuDim{1, 1}, 256, 0);
  for (int w = 0; w < 8; ++w) {
    // Lane 0 of warp w adds lane k's index (0 ^ k) for k = 0..w.
    EXPECT_EQ(y[size_t(w)], float(w * (w + 1) / 2) + 1000.0f) << w;
  }
  // The host struct layouts of the library kernels match the device ones (sizes checked at each launch).
  CudaEmulator& lib = library_emulator();
  cuda::GlobalPoolArgs g{};
  EXPECT_THROW(lib.launch("gaf_attention", &g, sizeof g, EmuDim{1, 1}, 128, 0), std::runtime_error);
}

}  // namespace
}  // namespace gaf
