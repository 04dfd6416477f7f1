// The CUDA backend. Without a GPU (CI, development machines) only the refusal is checked and the rest skips
// with the reason; on a GPU the fused models must match the CPU runtime.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <cmath>
#include <fstream>
#include <tuple>

#include "gaf/codegen.h"
#include "gaf/cuda.h"
#include "gaf/tools.h"

#ifdef GAF_HAVE_CUDA
#include "backends/cuda/library_kernels.h"
#include "backends/cuda/nvrtc.h"
#endif
#include "test_util.h"

namespace gaf {
namespace {

#define SKIP_WITHOUT_GPU()                                            \
  do {                                                                \
    if (std::string why = cuda::unavailable_reason(); !why.empty()) { \
      GTEST_SKIP() << "needs a CUDA device: " << why;                 \
    }                                                                 \
  } while (0)

TEST(CudaSession, WithoutADeviceSaysWhyInOneError) {
  const std::string why = cuda::unavailable_reason();
  if (why.empty()) GTEST_SKIP() << "a CUDA device is present";
  Model m = tools::demo_transformer_block(16, 32, 2, 64);
  try {
    cuda::Session s(*m.graph);
    FAIL() << "a session was built without a device";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), why);
    EXPECT_NE(why.find("CUDA"), std::string::npos) << why;
  }
}

#ifdef GAF_HAVE_CUDA

// The CUBIN cache loads nothing it has not verified: a CUBIN whose bytes no longer match its entry, or a link
// put in its place, is compiled again (and the entry rewritten to match), never loaded.
TEST(CudaSession, CubinCacheVerifiesBeforeUse) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / fmt::format("gaf_cubin_cache_{}", getpid());
  fs::remove_all(root);
  const char* old = std::getenv("XDG_CACHE_HOME");
  const std::string old_value = old ? old : "";
  setenv("XDG_CACHE_HOME", root.c_str(), 1);
  const std::string src = codegen::cuda_prelude() + cuda::library_kernels_source();
  const std::string first = cuda::compile_cubin(src, 9, 0);
  ASSERT_EQ(first.compare(0, 4,
                          "\x7f"
                          "ELF"),
            0);
  fs::path cubin;
  for (const auto& e : fs::directory_iterator(root / "graph-autofusion" / "cuda"))
    if (e.path().extension() == ".cubin") cubin = e.path();
  ASSERT_FALSE(cubin.empty());
  EXPECT_EQ(cuda::compile_cubin(src, 9, 0), first);  // from the cache

  std::string damaged = first;
  damaged[damaged.size() / 2] ^= 0x5a;  // same size, still an ELF header: only the hash tells
  std::ofstream(cubin, std::ios::binary | std::ios::trunc) << damaged;
  const std::string rebuilt = cuda::compile_cubin(src, 9, 0);
  EXPECT_NE(rebuilt, damaged);
  EXPECT_EQ(rebuilt.compare(0, 4,
                            "\x7f"
                            "ELF"),
            0);

  const fs::path elsewhere = root / "elsewhere.cubin";
  fs::rename(cubin, elsewhere);
  fs::create_symlink(elsewhere, cubin);
  EXPECT_EQ(cuda::compile_cubin(src, 9, 0), rebuilt);
  EXPECT_FALSE(fs::is_symlink(cubin)) << "the link was not replaced by a compiled CUBIN";

  if (old)
    setenv("XDG_CACHE_HOME", old_value.c_str(), 1);
  else
    unsetenv("XDG_CACHE_HOME");
  fs::remove_all(root);
}
// A dry run plans without a device: every node a step with the way it runs, the generated and library kernels
// compiled by NVRTC for sm_90 as a session on an H200 compiles them (source NVRTC rejects fails here, not on
// the first machine with a GPU). The fused transformer block: attention on the flash kernel, products on
// cuBLASLt with their bias folded in, LayerNorm as a row kernel, the QKV head split as an indexed kernel.
TEST(CudaSession, DryRunPlansTheFusedBlock) {
  Model m = tools::demo_transformer_block(128, 256, 4, 1024);
  tools::FuseOptions opts;
  opts.target = Target::builtin_or_file("cuda-h200");
  tools::fuse_model(m, opts);
  cuda::Options o;
  o.dry_run = true;
  cuda::Session s(*m.graph, o);
  std::string plan;
  for (const cuda::Step& st : s.steps()) plan += st.node + ": " + st.how + "\n";
  EXPECT_NE(plan.find("flash attention fp32 (128 x 128 x 64, batch 4)"), std::string::npos) << plan;
  EXPECT_NE(plan.find("+bias"), std::string::npos) << plan;
  EXPECT_NE(plan.find("(LayerNormalization)"), std::string::npos) << plan;
  EXPECT_GT(s.generated_kernels(), 2u) << plan;
  EXPECT_THROW(s.run({}), Error);
}

// bf16_mixed / fp16_mixed plan the block's products on 16-bit operands (tensor cores, fp32 accumulation) and the
// kernels between them on 16-bit storage, attention kept fp32 (the flash kernel reads fp32): every kernel, with its
// 16-bit loads and stores, compiled by NVRTC. The same fused graph run by the CPU runtime (its products also
// accumulate rounded operands in fp32) is within the mode's tolerance of the fp32 block, which is what verify
// --device cuda then holds the device to.
TEST(CudaSession, DryRunPlansSixteenBitStorage) {
  for (const auto& [mode, name, tol] : {std::tuple{PrecisionMode::Bf16Mixed, "bfloat16", 2e-2},
                                        std::tuple{PrecisionMode::Fp16Mixed, "float16", 1e-2}}) {
    Model original = tools::demo_transformer_block(128, 256, 4, 1024);
    Model m = tools::copy_model(original);
    tools::FuseOptions opts;
    opts.target = Target::builtin_or_file("cuda-h200");
    opts.fusion.rules.precision_mode = mode;
    tools::FuseResult fr = tools::fuse_model(m, opts);
    EXPECT_GT(fr.rewrites["low-precision-storage"], 0);
    ASSERT_FALSE(fr.precision_changes.empty());  // the report names each product that went 16-bit
    EXPECT_NE(fr.precision_changes[0].find(std::string(name) + " operands"), std::string::npos)
        << fr.precision_changes[0];
    cuda::Options o;
    o.dry_run = true;
    cuda::Session s(*m.graph, o);
    std::string plan;
    for (const cuda::Step& st : s.steps()) plan += st.node + ": " + st.how + "\n";
    EXPECT_NE(plan.find(std::string("cuBLASLt ") + name), std::string::npos) << plan;
    EXPECT_NE(plan.find(std::string("flash attention ") + name + " I/O, fp32 math"), std::string::npos) << plan;
    EXPECT_GT(s.generated_kernels(), 2u) << plan;
    for (const Value* v : m.graph->outputs()) EXPECT_EQ(v->type.dtype, DType::Float) << v->name();

    runtime::Session want(*original.graph), got(*m.graph);
    auto inputs = tools::random_inputs(*original.graph, 5);
    auto a = want.run(inputs), b = got.run(inputs);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      double d = 0, scale = 0;
      for (int64_t k = 0; k < a[i].numel(); ++k) {
        d = std::max(d, std::fabs(a[i].get_double(k) - b[i].get_double(k)));
        scale = std::max(scale, std::fabs(a[i].get_double(k)));
      }
      EXPECT_LT(d, tol * scale) << name << " output " << i;
      EXPECT_GT(d, 1e-6 * scale) << name << " output " << i << ": no rounding happened";
    }
  }
}

// A softmax over a 32000-word vocabulary: one row buffer of 125 KiB, over the 48 KiB a block gets by default and
// within what an H200 block may opt in to: one row kernel (the session opts it in once compiled).
TEST(CudaSession, DryRunPlansRowsBeyondTheDefaultSharedMemory) {
  Model m = testing::parse(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[2,32000] x) => (float[2,32000] y) {
      y = Softmax <axis = -1> (x)
    })");
  cuda::Options o;
  o.dry_run = true;
  cuda::Session s(*m.graph, o);
  ASSERT_EQ(s.steps().size(), 1u);
  EXPECT_NE(s.steps()[0].how.find("generated kernel"), std::string::npos) << s.steps()[0].how;
}

// Values that are never alive together share arena bytes: a chain of 8 elementwise ops on 1 MiB values needs
// about two of them at a time, not eight (the output and the input stay alive to the end).
TEST(CudaSession, ArenaReusesTheBytesOfDeadValues) {
  Model m = testing::parse(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[512,512] x) => (float[512,512] y) {
      a = Relu(x)
      b = Neg(a)
      c = Abs(b)
      d = Sqrt(c)
      e = Exp(d)
      f = Neg(e)
      h = Abs(f)
      y = Relu(h)
    })");
  cuda::Options o;
  o.dry_run = true;
  cuda::Session s(*m.graph, o);  // unfused: every op its own kernel and value
  EXPECT_EQ(s.steps().size(), 8u);
  const size_t value = 512 * 512 * 4;
  EXPECT_GE(s.arena_bytes(), 3 * value);
  EXPECT_LE(s.arena_bytes(), 4 * value) << "8 values of " << value << " bytes";
}

// Does not fire: a node with no CUDA kernel is one UnsupportedError naming it and BACKEND_UNSUPPORTED; a
// dynamic shape is refused naming the value.
TEST(CudaSession, NodesWithoutAKernelAreRefusedByName) {
  Model m = testing::parse(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[4,4] x) => (float[4,4] y) {
      y = Hardmax(x)
    })");
  cuda::Options o;
  o.dry_run = true;
  try {
    cuda::Session s(*m.graph, o);
    FAIL() << "Hardmax has no CUDA kernel";
  } catch (const UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("Hardmax"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("BACKEND_UNSUPPORTED"), std::string::npos) << e.what();
  }
  Model d = testing::parse(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[N,4] x) => (float[N,4] y) {
      y = Relu(x)
    })");
  EXPECT_THROW(
      {
        try {
          cuda::Session s(*d.graph, o);
        } catch (const UnsupportedError& e) {
          EXPECT_NE(std::string(e.what()).find("static shapes"), std::string::npos) << e.what();
          throw;
        }
      },
      UnsupportedError);
}
#endif

// The transformer block fused for the GPU: attention as the flash kernel, products on cuBLASLt with their
// bias epilogues, LayerNorm and GELU as generated kernels; every output within fp32 rounding of the CPU's.
TEST(CudaSession, FusedTransformerBlockMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  Model m = tools::demo_transformer_block(128, 256, 4, 1024);
  tools::FuseOptions opts;
  opts.target = Target::builtin_or_file("cuda-h200");
  tools::CudaVerifyResult r = tools::verify_cuda(m, opts, {});
  EXPECT_TRUE(r.ok) << r.text();
  bool attention = false, generated = false, lt = false;
  for (const std::string& p : r.plan) {
    attention |= p.find("flash attention") != std::string::npos;
    generated |= p.find("generated kernel") != std::string::npos;
    lt |= p.find("cuBLASLt") != std::string::npos;
  }
  EXPECT_TRUE(attention && generated && lt) << r.text();
}

// The same block in bf16_mixed on the device: 16-bit products and storage within 2e-2 of the CPU's fp32.
TEST(CudaSession, Bf16MixedBlockMatchesTheCpuWithinItsTolerance) {
  SKIP_WITHOUT_GPU();
  Model m = tools::demo_transformer_block(128, 256, 4, 1024);
  tools::FuseOptions opts;
  opts.target = Target::builtin_or_file("cuda-h200");
  opts.fusion.rules.precision_mode = PrecisionMode::Bf16Mixed;
  tools::CudaVerifyResult r = tools::verify_cuda(m, opts, {});
  EXPECT_TRUE(r.ok) << r.text();
  EXPECT_NE(r.tolerance.find("bf16_mixed"), std::string::npos) << r.tolerance;
}

// The same block op by op and fused, in and out of a CUDA graph: one result, fewer steps fused.
TEST(CudaSession, FusedAndUnfusedAgreeOnTheDevice) {
  SKIP_WITHOUT_GPU();
  Model m = tools::demo_transformer_block(64, 128, 4, 512);
  tools::FuseOptions opts;
  opts.target = Target::builtin_or_file("cuda-h200");
  tools::CudaBenchResult b = tools::bench_cuda(m, opts, {}, 5);
  EXPECT_LT(b.max_rel_err, 1e-4) << b.text();
  EXPECT_LT(b.fused_steps, b.unfused_steps) << b.text();
  EXPECT_GT(b.generated, 0u) << b.text();
}

}  // namespace
}  // namespace gaf
