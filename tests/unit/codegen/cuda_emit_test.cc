// The CUDA dialect of the kernel emitter: the fused groups of whole models (fused for the cuda-h200 target)
// and of small graphs of every kernel shape print as CUDA kernels that, with cuda_prelude(), compile with
// nvcc
// (-Werror all-warnings) and with NVRTC (loaded with dlopen, with the options the runtime uses). No GPU is
// needed: nothing is launched. Groups the dialect cannot print say why.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gaf/codegen.h"
#include "models/decoder_exports.h"
#include "test_util.h"

namespace gaf {
namespace {

namespace fs = std::filesystem;

struct Emitted {
  std::string source;  // the kernels, without the prelude
  int kernels = 0, rows = 0;
  std::vector<std::string> refused;  // "node: why"
};

// Every fused node's CUDA kernel (anchor groups, which run as library calls with post-ops, are not emitted).
void emit_all(const Graph& g, Emitted& out) {
  codegen::EmitOptions opts;
  opts.dialect = codegen::Dialect::Cuda;
  for (const Node* n : g.nodes()) {
    if (!n->body) continue;
    bool anchor = false;
    for (const Node* b : n->body->nodes()) anchor |= op_kind(*b) == OpKind::Anchor;
    if (anchor) continue;
    std::string why;
    auto k = codegen::emit_kernel(*n, fmt::format("gaf_cuda_{}", out.kernels + int(out.refused.size())), opts,
                                  &why);
    if (!k) {
      out.refused.push_back(n->describe() + ": " + why);
      continue;
    }
    out.source += k->source + "\n";
    ++out.kernels;
    out.rows += k->sig.cuda.rows;
  }
}

Model fuse_for_cuda(const Model& m) {
  tools::FuseOptions opts;
  opts.fusion.opt_level = 3;
  opts.target = Target::builtin_or_file("cuda-h200");
  return testing::fused_copy(m, opts);
}

std::string nvcc_path() {
  if (const char* e = std::getenv("CUDACXX"); e && *e && fs::exists(e)) return e;
  if (fs::exists("/usr/local/cuda/bin/nvcc")) return "/usr/local/cuda/bin/nvcc";
  if (std::system("command -v nvcc > /dev/null 2>&1") == 0) return "nvcc";
  return "";
}

// Compiles `tu` with nvcc; returns "" on success, else the compiler's output.
std::string nvcc_compile(const std::string& nvcc, const std::string& tu, const std::string& name) {
  fs::path dir = fs::temp_directory_path() / fmt::format("gaf_cuda_emit_{}", ::getpid());
  fs::create_directories(dir);
  fs::path cu = dir / (name + ".cu"), obj = dir / (name + ".o"), log = dir / (name + ".log");
  std::ofstream(cu) << tu;
  std::string cmd = fmt::format("{} -arch=sm_90 -std=c++17 -Werror all-warnings -c {} -o {} > {} 2>&1", nvcc,
                                cu.string(), obj.string(), log.string());
  int rc = std::system(cmd.c_str());
  std::stringstream out;
  out << std::ifstream(log).rdbuf();
  if (rc == 0) fs::remove_all(dir);
  return rc == 0 ? ""
                 : fmt::format("{} failed ({}), source kept at {}:\n{}", cmd, rc, cu.string(), out.str());
}

// NVRTC through its C API, loaded at run time (the test does not link against the toolkit). nullopt: no
// NVRTC;
// "" on success, else the program log.
std::optional<std::string> nvrtc_compile(const std::string& tu) {
  void* lib = nullptr;
  for (const char* p : {"/usr/local/cuda/lib64/libnvrtc.so", "libnvrtc.so"})
    if ((lib = dlopen(p, RTLD_NOW | RTLD_LOCAL))) break;
  if (!lib) return std::nullopt;
  using Prog = void*;
  auto create =
      reinterpret_cast<int (*)(Prog*, const char*, const char*, int, const char* const*, const char* const*)>(
          dlsym(lib, "nvrtcCreateProgram"));
  auto compile = reinterpret_cast<int (*)(Prog, int, const char* const*)>(dlsym(lib, "nvrtcCompileProgram"));
  auto log_size = reinterpret_cast<int (*)(Prog, size_t*)>(dlsym(lib, "nvrtcGetProgramLogSize"));
  auto get_log = reinterpret_cast<int (*)(Prog, char*)>(dlsym(lib, "nvrtcGetProgramLog"));
  auto destroy = reinterpret_cast<int (*)(Prog*)>(dlsym(lib, "nvrtcDestroyProgram"));
  if (!create || !compile || !log_size || !get_log || !destroy) return std::nullopt;
  Prog prog = nullptr;
  if (create(&prog, tu.c_str(), "gaf_kernels.cu", 0, nullptr, nullptr) != 0)
    return "nvrtcCreateProgram failed";
  const char* options[] = {"--gpu-architecture=sm_90", "-default-device", "--std=c++17"};
  const int rc = compile(prog, 3, options);
  size_t n = 0;
  log_size(prog, &n);
  std::string log(n, '\0');
  get_log(prog, log.data());
  destroy(&prog);
  return rc == 0 ? "" : "NVRTC failed:\n" + log;
}

// Compiles prelude + kernels with nvcc and NVRTC (each skipped when absent, saying so).
void expect_compiles(const Emitted& e, const std::string& name) {
  const std::string tu = codegen::cuda_prelude() + e.source;
  const std::string nvcc = nvcc_path();
  if (nvcc.empty())
    GTEST_SKIP() << "no nvcc ($CUDACXX, /usr/local/cuda/bin/nvcc, PATH): the CUDA text is not compiled";
  EXPECT_EQ(nvcc_compile(nvcc, tu, name), "");
  if (auto r = nvrtc_compile(tu))
    EXPECT_EQ(*r, "");
  else
    std::printf("[ info ] no libnvrtc.so: %s compiled with nvcc only\n", name.c_str());
}

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(CudaEmit, DecoderAndTransformerKernelsCompile) {
  testing::DecoderDims dims;
  struct Case {
    const char* name;
    Model model;
    int min_kernels;
    bool rows;  // a row kernel expected (llama's RMSNorms and the demo block's LayerNorms become library
                // calls)
  };
  std::vector<Case> cases;
  cases.push_back({"gpt2", testing::parse(testing::gpt2_decoder(2, dims)), 4, true});
  cases.push_back({"llama", testing::parse(testing::llama_decoder(2, dims)), 4, false});
  cases.push_back({"demo_block", tools::demo_transformer_block(128, 256, 4, 1024), 1, false});
  Emitted all;
  for (Case& c : cases) {
    Model f = fuse_for_cuda(c.model);
    Emitted e;
    emit_all(*f.graph, e);
    for (const std::string& r : e.refused) std::printf("[ info ] %s: not printed: %s\n", c.name, r.c_str());
    EXPECT_GT(e.kernels, c.min_kernels - 1) << c.name << ":\n" << f.graph->to_string();
    if (c.rows) {
      EXPECT_GT(e.rows, 0) << c.name << ": no row kernel (LayerNorm / RMSNorm / softmax)";
    }
    std::printf("[ info ] %s: %d CUDA kernels (%d row kernels), %zu groups not printed\n", c.name, e.kernels,
                e.rows, e.refused.size());
    // Each model's kernels are numbered from 0: a model prefix keeps the symbols apart in one translation
    // unit.
    std::string src = e.source;
    for (size_t p = src.find("gaf_cuda_"); p != std::string::npos; p = src.find("gaf_cuda_", p + 1))
      src.replace(p, 9, fmt::format("gaf_{}_", c.name)), p += std::string(c.name).size();
    all.source += src;
    all.kernels += e.kernels;
    all.rows += e.rows;
  }
  // The LayerNorm / RMSNorm rows are combined over the block; nothing CPU-only is left in the text.
  EXPECT_GT(count(all.source, "gaf_block_sum("), 0);
  EXPECT_EQ(count(all.source, "#pragma omp"), 0);
  EXPECT_EQ(count(all.source, "malloc"), 0);
  EXPECT_EQ(count(all.source, "__restrict "), 0);
  EXPECT_EQ(count(all.source, "static const"), 0);
  std::printf("[ info ] %d CUDA kernels in all\n", all.kernels);
  expect_compiles(all, "models");
}

TEST(CudaEmit, EveryKernelShapeCompiles) {
  // Elementwise (with broadcast operands; flat with an inlined constant), rows (LayerNorm with a per-row
  // output, softmax, max with its NaN flag, log-sum-exp), indexed (transpose, slice/expand, concat along the
  // innermost axis, two nests) and indexed reductions (middle axis, one output element), half storage.
  const char* graphs[] = {
      R"(g (float[4,8,16] x, float[8,1] b) => (float[4,8,16] y) {
          a = Add(x, b)  s = Sigmoid(a)  m = Mul(a, s)
          e = Erf(m)  y = Max(e, x) })",
      R"(g (float[5,3] x) => (float[5,3] y) {
          c = Constant <value = float[3] {0.5, 1.5, -2}> ()  a = Mul(x, c)  y = Tanh(a) })",
      R"(g (float[3,5,8] x, float[1,5,8] pe, float[8] g, float[8] bb) => (float[3,5,8] y, float[3,5,1] mx) {
          a = Add(x, pe)  y = LayerNormalization <axis = -1> (a, g, bb)  mx = ReduceMax <axes = [-1]> (a) })",
      R"(g (float[2,4,33] x) => (float[2,4,33] y, float[2,4,1] l) {
          t = Tanh(x)  y = Softmax <axis = -1> (t)  l = ReduceLogSumExp <axes = [-1]> (t) })",
      R"(g (float16[6,40] x) => (float16[6,40] y) { r = Relu(x)  y = Softmax <axis = -1> (r) })",
      R"(g (float[3,5,7] x, float[7,5] b) => (float[3,5,7] y) {
          t = Transpose <perm = [0, 2, 1]> (x)  u = Mul(t, b)  v = Tanh(u)  y = Transpose <perm = [0, 2, 1]> (v) })",
      R"(g (float[2,5,48] qkv) => (float[2,5,2,8] q, float[2,2,5,8] k, float[2,2,5,8] v) {
          sp = Constant <value = int64[3] {16, 16, 16}> ()  h = Constant <value = int64[4] {2, 5, 2, 8}> ()
          a, b, c = Split <axis = 2> (qkv, sp)
          q = Reshape(a, h)  kr = Reshape(b, h)  k = Transpose <perm = [0, 2, 1, 3]> (kr)
          vr = Reshape(c, h)  v = Transpose <perm = [0, 2, 1, 3]> (vr) })",
      R"(g (float[1,3,3,5] a, float[1,3,3,4] b, float[9] s) => (float[1,3,3,9] y) {
          k = Concat <axis = 3> (a, b)  m = Mul(k, s)  y = Relu(m) })",
      R"(g (float[4,32,50] x) => (float[4,1,50] y) { e = Exp(x)  y = ReduceMean <axes = [1], keepdims = 1> (e) })",
      R"(g (float[6,20,9] x) => (float[9,6] y) {
          t = Transpose <perm = [2, 0, 1]> (x)  n = Neg(t)  y = ReduceMax <axes = [2], keepdims = 0> (n) })",
      R"(g (float[7,9] x) => (float[1,1] y) { n = Neg(x)  y = ReduceSum (n) })",
  };
  Emitted all;
  for (const char* text : graphs) {
    Model f =
        fuse_for_cuda(testing::parse(std::string("<ir_version: 8, opset_import: [\"\" : 17]> ") + text));
    const int before = all.kernels + int(all.refused.size());
    emit_all(*f.graph, all);
    EXPECT_GT(all.kernels + int(all.refused.size()), before) << "no fused group:\n" << f.graph->to_string();
  }
  for (const std::string& r : all.refused) ADD_FAILURE() << "not printed: " << r;
  EXPECT_GE(all.rows, 3);
  for (const char* helper : {"gaf_block_sum(", "gaf_block_max(", "gaf_block_or(", "gaf_load_half(",
                             "gaf_store_half(", "__device__ const float gaf_cuda_"})
    EXPECT_GT(count(all.source, helper), 0) << helper << " not printed:\n" << all.source;
  std::printf("[ info ] %d CUDA kernels (%d row kernels)\n", all.kernels, all.rows);
  expect_compiles(all, "shapes");
}

// The fused node of a one-group graph.
const Node& only_fused(const Model& f) {
  for (const Node* n : f.graph->nodes())
    if (n->body) return *n;
  throw std::runtime_error("no fused node:\n" + f.graph->to_string());
}

TEST(CudaEmit, RefusesGroupsThatNeedScratchOrAGridBarrier) {
  // x - mean(x over a middle axis): the CPU kernel materialises the mean in a malloc'd buffer that a second
  // loop nest reads back; one CUDA kernel cannot wait for another block's nest. (Fused for the CPU: planning for
  // cuda-h200 asks the CUDA dialect first and never forms this group, BACKEND_UNSUPPORTED.)
  tools::FuseOptions opts;
  opts.fusion.opt_level = 3;
  Model f = testing::fused_copy(testing::parse(
      R"(<ir_version: 8, opset_import: ["" : 17]> g (float[2,16,30] x) => (float[2,16,30] y, float[2,16,30] r) {
      r = Relu(x)  m = ReduceMean <axes = [1], keepdims = 1> (r)  d = Sub(r, m)  h = Constant <value = float {0.5}> ()
      y = Mul(d, h) })"), opts);
  const Node& n = only_fused(f);
  std::string why;
  EXPECT_TRUE(codegen::emit_kernel(n, "gaf_cpu", {}, &why)) << why;
  codegen::EmitOptions cuda;
  cuda.dialect = codegen::Dialect::Cuda;
  why.clear();
  EXPECT_FALSE(codegen::emit_kernel(n, "gaf_cuda", cuda, &why));
  EXPECT_NE(why.find("grid-wide barrier"), std::string::npos) << why;
}

TEST(CudaEmit, RefusesRowsBeyondSharedMemory) {
  // Softmax of Tanh over 32768-element rows: two row buffers of 128 KiB each do not fit a block's 224 KiB.
  // (The cuda-h200 cost model keeps such rows apart; the CPU target fuses them.)
  tools::FuseOptions opts;
  opts.fusion.opt_level = 3;
  Model f = testing::fused_copy(
      testing::parse(R"(<ir_version: 8, opset_import: ["" : 17]> g (float[2,32768] x) => (float[2,32768] y) {
      t = Tanh(x)  y = Softmax <axis = -1> (t) })"),
      opts);
  codegen::EmitOptions cuda;
  cuda.dialect = codegen::Dialect::Cuda;
  std::string why;
  EXPECT_FALSE(codegen::emit_kernel(only_fused(f), "gaf_cuda", cuda, &why));
  EXPECT_NE(why.find("shared memory"), std::string::npos) << why;
}

TEST(CudaEmit, CpuDialectIsUnchangedByTheOption) {
  // The default options print the CPU kernel: OpenMP loops, no CUDA launch data.
  Model f = fuse_for_cuda(testing::parse(
      R"(<ir_version: 8, opset_import: ["" : 17]> g (float[3,5,8] x, float[8] g) => (float[3,5,8] y) {
      e = Exp(x)  y = LayerNormalization <axis = -1> (e, g) })"));
  std::string why;
  auto cpu = codegen::emit_kernel(only_fused(f), "gaf_k", {}, &why);
  ASSERT_TRUE(cpu) << why;
  EXPECT_NE(cpu->source.find("#pragma omp"), std::string::npos);
  EXPECT_EQ(cpu->source.find("gaf_block_sum"), std::string::npos);
  EXPECT_FALSE(cpu->sig.cuda.rows);
  codegen::EmitOptions cuda;
  cuda.dialect = codegen::Dialect::Cuda;
  auto gpu = codegen::emit_kernel(only_fused(f), "gaf_k", cuda, &why);
  ASSERT_TRUE(gpu) << why;
  EXPECT_TRUE(gpu->sig.cuda.rows);
  EXPECT_EQ(gpu->sig.cuda.rows_dims.size(), 2u);
  EXPECT_EQ(gpu->sig.cuda.row_length.size(), 1u);
  EXPECT_EQ(gpu->sig.cuda.row_buffers, 2);
}

}  // namespace
}  // namespace gaf
