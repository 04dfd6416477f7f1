// A graph's kernels split into translation units (codegen::compile_kernels): shares of balanced source size,
// each unit a cache entry of its own, the units compiled in parallel. Split kernels compute bit for bit what
// the same kernels compute as one unit; a damaged unit is rebuilt alone; a compile error names its unit and
// kernel.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "gaf/codegen.h"
#include "passes/pass_test_util.h"

namespace gaf::codegen {
namespace {

namespace fs = std::filesystem;

using KernelFn = void (*)(const void* const*, void* const*, const int64_t*, const KernelScratch*);

class KernelUnitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* var : {"XDG_CACHE_HOME", "GAF_COMPILE_JOBS"})
      if (const char* old = std::getenv(var)) saved_[var] = old;
    root_ = fs::temp_directory_path() /
            fmt::format("gaf_units_{}_{}", getpid(),
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    setenv("XDG_CACHE_HOME", root_.c_str(), 1);
  }
  void TearDown() override {
    for (const char* var : {"XDG_CACHE_HOME", "GAF_COMPILE_JOBS"}) {
      if (saved_.count(var))
        setenv(var, saved_[var].c_str(), 1);
      else
        unsetenv(var);
    }
    fs::remove_all(root_);
  }

  std::vector<fs::path> files_named(const std::string& part) const {
    std::vector<fs::path> out;
    for (const auto& e : fs::recursive_directory_iterator(root_))
      if (e.is_regular_file() && e.path().filename().string().find(part) != std::string::npos)
        out.push_back(e.path());
    return out;
  }

  fs::path root_;
  std::map<std::string, std::string> saved_;
};

// The kernels of a model with six fused groups of different ops and shapes (static: every dim is known).
std::vector<EmittedKernel> six_kernels() {
  Model m = testing::parse(R"(
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[4, 8] a, float[16, 3] b, float[2, 5, 7] c, float[9] d, float[3, 3] e, float[64] f)
        => (float[4, 8] ya, float[16, 3] yb, float[2, 5, 7] yc, float[9] yd, float[3, 3] ye, float[64] yf) {
      a1 = Relu(a)  a2 = Sigmoid(a1)  ya = Mul(a1, a2)
      b1 = Tanh(b)  b2 = Exp(b1)  yb = Add(b1, b2)
      c1 = Neg(c)  c2 = Abs(c1)  yc = Sub(c2, c)
      d1 = Exp(d)  d2 = Log(d1)  yd = Div(d2, d1)
      e1 = Sqrt(e)  e2 = Mul(e1, e1)  ye = Max(e2, e)
      f1 = Sigmoid(f)  f2 = Tanh(f1)  yf = Min(f2, f)
    })");
  tools::FuseOptions opts;
  opts.fusion.opt_level = 2;
  tools::fuse_model(m, opts);
  std::vector<EmittedKernel> out;
  int i = 0;
  for (const Node* n : m.graph->nodes()) {
    if (!n->body) continue;
    std::string why;
    auto k = emit_kernel(*n, fmt::format("gaf_unit_test_{}", i++), {}, &why);
    EXPECT_TRUE(k) << why;
    if (k) out.push_back(std::move(*k));
  }
  return out;
}

// Runs every kernel on seeded inputs and returns all outputs' bytes, kernel after kernel.
std::vector<std::vector<float>> run_all(const std::vector<EmittedKernel>& kernels, const KernelUnits& built) {
  std::vector<std::vector<float>> results;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(0.1f, 2.0f);
  for (size_t unit = 0; unit < built.units.size(); ++unit) {
    EXPECT_TRUE(built.libraries[unit]) << built.errors[unit];
    if (!built.libraries[unit]) continue;
    for (size_t k : built.units[unit]) {
      const KernelSignature& sig = kernels[k].sig;
      auto fn = reinterpret_cast<KernelFn>(built.libraries[unit]->find(sig.symbol));
      EXPECT_TRUE(fn) << sig.symbol;
      if (!fn) continue;
      auto numel = [](const std::vector<DimExpr>& dims) {
        int64_t n = 1;
        for (const DimExpr& d : dims) n *= d.value;
        return size_t(n);
      };
      std::vector<std::vector<float>> in, out;
      for (const auto& dims : sig.input_dims) {
        in.emplace_back(numel(dims));
        for (float& x : in.back()) x = u(rng);
      }
      for (const auto& dims : sig.output_dims) out.emplace_back(numel(dims));
      std::vector<const void*> ip;
      std::vector<void*> op;
      for (auto& v : in) ip.push_back(v.data());
      for (auto& v : out) op.push_back(v.data());
      // Elementwise kernels take no working memory.
      const KernelScratch none{[](void*, size_t) -> void* {
                                 ADD_FAILURE() << "an elementwise kernel asked for scratch";
                                 return nullptr;
                               },
                               nullptr};
      fn(ip.data(), op.data(), nullptr, &none);
      results.insert(results.end(), out.begin(), out.end());
    }
  }
  return results;
}

// Results in kernel order whatever the units: run_all goes unit by unit.
std::vector<std::vector<float>> by_kernel(const std::vector<EmittedKernel>& kernels,
                                          const KernelUnits& built) {
  KernelUnits one_by_one = built;
  std::vector<std::vector<float>> out(kernels.size());
  for (size_t unit = 0; unit < built.units.size(); ++unit)
    for (size_t k : built.units[unit]) {
      one_by_one.units = {{k}};
      one_by_one.libraries = {built.libraries[unit]};
      one_by_one.errors = {""};
      auto r = run_all(kernels, one_by_one);
      std::vector<float> flat;
      for (auto& v : r) flat.insert(flat.end(), v.begin(), v.end());
      out[k] = flat;
    }
  return out;
}

TEST(KernelPartition, BalancedSharesInKernelOrder) {
  const std::vector<size_t> sizes = {10, 50, 20, 30, 40, 5, 45};
  for (size_t units : {1, 2, 3, 4, 7, 12}) {
    auto parts = partition_kernels(sizes, units);
    ASSERT_EQ(parts.size(), std::min(units, sizes.size()));
    std::vector<int> seen(sizes.size(), 0);
    size_t lightest = SIZE_MAX, heaviest = 0;
    for (const auto& p : parts) {
      ASSERT_FALSE(p.empty());
      EXPECT_TRUE(std::is_sorted(p.begin(), p.end()));
      size_t load = 0;
      for (size_t k : p) ++seen[k], load += sizes[k];
      lightest = std::min(lightest, load), heaviest = std::max(heaviest, load);
    }
    for (int s : seen) EXPECT_EQ(s, 1);
    // Largest first into the lightest unit: no unit exceeds another by more than the largest kernel.
    EXPECT_LE(heaviest - lightest, 50u) << units << " units";
  }
  // 50 45 40 30 20 10 5 in turn to the lighter unit.
  EXPECT_EQ(partition_kernels(sizes, 2), (std::vector<std::vector<size_t>>{{1, 2, 3}, {0, 4, 5, 6}}));
}

TEST_F(KernelUnitsTest, JobsComeFromTheEnvironmentOrTheCores) {
  unsetenv("GAF_COMPILE_JOBS");
  EXPECT_GE(compile_jobs(), 1);
  setenv("GAF_COMPILE_JOBS", "3", 1);
  EXPECT_EQ(compile_jobs(), 3);
  for (const char* bad : {"0", "two", "2x", "-1"}) {
    setenv("GAF_COMPILE_JOBS", bad, 1);
    try {
      compile_jobs();
      ADD_FAILURE() << "GAF_COMPILE_JOBS=" << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("GAF_COMPILE_JOBS"), std::string::npos) << e.what();
    }
  }
}

TEST_F(KernelUnitsTest, SplitUnitsComputeWhatOneUnitDoes) {
  const std::vector<EmittedKernel> kernels = six_kernels();
  ASSERT_EQ(kernels.size(), 6u);
  CompileOptions one, three;
  one.units = 1;
  three.units = 3;
  KernelUnits a = compile_kernels(kernels, one);
  ASSERT_EQ(a.units.size(), 1u);
  EXPECT_EQ(a.stats.units, 1u);
  EXPECT_EQ(a.stats.compiled, 1u);
  KernelUnits b = compile_kernels(kernels, three);
  ASSERT_EQ(b.units.size(), 3u);
  EXPECT_EQ(b.stats.compiled, 3u);
  EXPECT_EQ(files_named(".entry").size(), 4u);  // one entry per unit
  std::set<std::string> paths;
  for (const auto& lib : b.libraries) paths.insert(lib ? lib->path() : "");
  EXPECT_EQ(paths.size(), 3u) << "each unit its own library";
  const auto want = by_kernel(kernels, a);
  const auto got = by_kernel(kernels, b);
  ASSERT_EQ(want.size(), got.size());
  for (size_t k = 0; k < want.size(); ++k) {
    ASSERT_FALSE(want[k].empty()) << kernels[k].sig.symbol;
    EXPECT_EQ(std::memcmp(want[k].data(), got[k].data(), want[k].size() * sizeof(float)), 0)
        << kernels[k].sig.symbol;
  }
  // Warm: every unit from the cache, the same libraries.
  KernelUnits c = compile_kernels(kernels, three);
  EXPECT_EQ(c.stats.units, 3u);
  EXPECT_EQ(c.stats.compiled, 0u);
  for (size_t u = 0; u < 3; ++u) EXPECT_EQ(c.libraries[u]->path(), b.libraries[u]->path());
}

TEST_F(KernelUnitsTest, DamagedUnitIsRebuiltAlone) {
  const std::vector<EmittedKernel> kernels = six_kernels();
  CompileOptions three;
  three.units = 3;
  fs::path damaged;
  {
    KernelUnits a = compile_kernels(kernels, three);
    ASSERT_TRUE(a.libraries[1]) << a.errors[1];
    damaged = a.libraries[1]->path();
  }  // unloaded before the damage
  fs::resize_file(damaged, fs::file_size(damaged) / 2);
  ::testing::internal::CaptureStderr();
  KernelUnits b = compile_kernels(kernels, three);
  const std::string warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(b.stats.compiled, 1u) << "only the damaged unit is compiled again";
  EXPECT_NE(warnings.find("is damaged"), std::string::npos) << warnings;
  EXPECT_EQ(std::count(warnings.begin(), warnings.end(), '\n'), 1) << warnings;
  for (size_t u = 0; u < 3; ++u) EXPECT_TRUE(b.libraries[u]) << b.errors[u];
  EXPECT_EQ(by_kernel(kernels, b).size(), kernels.size());
}

TEST_F(KernelUnitsTest, CompileErrorNamesItsUnitAndKernel) {
  std::vector<EmittedKernel> kernels(5);
  for (int i = 0; i < 5; ++i) {
    kernels[size_t(i)].sig.symbol = fmt::format("gaf_probe_{}", i);
    kernels[size_t(i)].source = fmt::format("extern \"C\" int gaf_probe_{0}() {{\n  return {0};\n}}\n", i);
  }
  kernels[3].source = "extern \"C\" int gaf_probe_3() {\n  return not_declared;\n}\n";
  CompileOptions two;
  two.units = 2;
  KernelUnits r = compile_kernels(kernels, two);
  ASSERT_EQ(r.units.size(), 2u);
  int failed = 0;
  for (size_t u = 0; u < 2; ++u) {
    const bool has_bad = std::count(r.units[u].begin(), r.units[u].end(), 3u) > 0;
    EXPECT_EQ(!r.libraries[u], has_bad) << r.errors[u];
    if (!has_bad) continue;
    ++failed;
    const std::string& e = r.errors[u];
    EXPECT_NE(e.find(fmt::format("translation unit {} of 2", u + 1)), std::string::npos) << e;
    EXPECT_NE(e.find("compiling generated kernels failed"), std::string::npos) << e;
    EXPECT_NE(e.find("the first error is in kernel gaf_probe_3"), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << "one line: " << e;
  }
  EXPECT_EQ(failed, 1);
  EXPECT_EQ(files_named(".tmp.").size(), 0u);
}

}  // namespace
}  // namespace gaf::codegen
