#include <algorithm>

#include <gtest/gtest.h>

#include "gaf/codegen.h"
#include "gaf/fusion.h"
#include "gaf/passes.h"

namespace gaf {
namespace {

TEST(Rules, DesignShapeLoads) {
  auto r = FusionRules::parse(R"({ "global": { "enable_fusion": true, "precision_mode": "fp16_mixed",
      "max_ops_per_group": 32, "constraint": "onchip_usage < 0.8 * onchip_capacity" },
    "rules": [ { "pattern": "MatMul -> LayerNormalization", "action": "forbid", "reason": "precision" },
               { "pattern": "MatMul -> Add -> Gelu",        "action": "force",  "reason": "FFN" } ] })");
  EXPECT_TRUE(r.enable_fusion);
  EXPECT_EQ(r.precision_mode, PrecisionMode::Fp16Mixed);
  EXPECT_EQ(r.max_ops_per_group, 32);
  EXPECT_DOUBLE_EQ(r.onchip_fraction, 0.8);
  ASSERT_EQ(r.rules.size(), 2u);
  EXPECT_EQ(r.rules[1].pattern.tokens, (std::vector<std::string>{"MatMul", "Add", "Gelu"}));
  EXPECT_EQ(r.rules[1].action, FusionRule::Action::Force);
}

std::string error_of(const std::string& text) {
  try {
    FusionRules::parse(text, "r.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Rules, UnknownKeysNameTheKeyAndLine) {
  std::string e = error_of("{\n \"global\": {\n  \"enable_fuson\": true\n }\n}");
  EXPECT_NE(e.find("enable_fuson"), std::string::npos) << e;
  EXPECT_NE(e.find("r.json:3"), std::string::npos) << e;
  EXPECT_NE(error_of(R"({"rules": [{"pattern": "MatMul -> Add", "action": "allow"}]})").find("action"), std::string::npos);
  EXPECT_NE(error_of(R"({"rules": [{"pattern": "MatMul -> -> Add", "action": "forbid"}]})").find("empty op"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"rules": [{"pattern": "@elementwse -> Add", "action": "forbid"}]})").find("unknown category"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"global": {"constraint": "usage < 2"}})").find("constraint"), std::string::npos);
  EXPECT_NE(error_of(R"({"global": {"max_ops_per_group": 0}})").find("positive integer"), std::string::npos);
  EXPECT_NE(error_of("{not json").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of(R"({"extra": 1})").find("unknown top-level key"), std::string::npos);
}

// A misspelt op type matched nothing and the rule silently did nothing; now it is an error naming the spelling.
TEST(Rules, UnknownOpTypesAreErrorsNamingTheClosest) {
  std::string e = error_of(R"({"rules": [{"pattern": "Matmul -> Add", "action": "forbid"}]})");
  EXPECT_NE(e.find("'Matmul' is neither an op type nor a category (did you mean 'MatMul'?)"), std::string::npos) << e;
  e = error_of(R"({"rules": [{"pattern": "MatMul -> LayerNorm", "action": "force"}]})");
  EXPECT_NE(e.find("'LayerNorm'"), std::string::npos) << e;
  e = error_of(R"({"global": {"skip_op_types": ["Softmx"]}})");
  EXPECT_NE(e.find("'Softmx' is no op type (did you mean 'Softmax'?)"), std::string::npos) << e;
  e = error_of(R"({"rules": [{"pattern": "Qwertyuiop", "action": "forbid"}]})");
  EXPECT_EQ(e.find("did you mean"), std::string::npos) << "nothing is near: " << e;
  // What is spelt right still loads: op types of every domain we know, *, and categories.
  EXPECT_EQ(error_of(R"({"rules": [{"pattern": "* -> @reduction -> Softmax", "action": "forbid"},
                                   {"pattern": "MatMul -> Gelu", "action": "force"}]})"),
            "");
}

TEST(Rules, EnvironmentVariablesAreSeedCompatible) {
  std::string path = ::testing::TempDir() + "/rules_env.json";
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs(R"({"global": {"max_ops_per_group": 5}})", f);
  std::fclose(f);
  setenv("ASCEND_FUSION_CONFIG", path.c_str(), 1);
  EXPECT_EQ(FusionRules::from_env_or_file("").max_ops_per_group, 5);
  unsetenv("ASCEND_FUSION_CONFIG");
  EXPECT_EQ(FusionRules::from_env_or_file("").max_ops_per_group, 64);
}

TEST(Targets, BuiltinsAndFiles) {
  EXPECT_EQ(Target::builtin_or_file("cuda-h200").cores, 132);
  EXPECT_GT(Target::builtin_or_file("ascend910b").dram_bandwidth, 1e12);
  EXPECT_THROW(Target::builtin_or_file("tpu-v9"), Error);
  std::string path = ::testing::TempDir() + "/target.json";
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs(R"({"name": "mine", "dram_bandwidth": 1e11, "bogus": 1})", f);
  std::fclose(f);
  try {
    Target::builtin_or_file(path);
    FAIL() << "unknown key accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bogus"), std::string::npos);
  }
}

// tf32 selects TF32 products on a GPU; a misspelt mode names the known ones, tf32 among them.
TEST(Rules, PrecisionModeTf32) {
  EXPECT_EQ(FusionRules::parse(R"({"global": {"precision_mode": "tf32"}})").precision_mode, PrecisionMode::Tf32);
  try {
    FusionRules::parse(R"({"global": {"precision_mode": "tf16"}})");
    FAIL() << "tf16 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"tf32\""), std::string::npos) << e.what();
  }
}

// The layout passes are the CPU backend's: it adds them to the pipeline from opt level 2 unless the target keeps
// NCHW; the CUDA backend adds none (cuDNN takes NCHW as it is), and the common pipeline holds none.
TEST(Targets, ChannelsLastIsTheCpuBackendsLayout) {
  EXPECT_TRUE(Target::cpu_host().channels_last);
  EXPECT_FALSE(Target::builtin_or_file("cuda-h200").channels_last);
  auto has_layout = [](int level, const KernelBackend* backend, const Target& t) {
    auto names = PassManager::for_opt_level(level, backend ? backend->pipeline_passes(level, t)
                                                           : std::vector<std::unique_ptr<Pass>>{})
                     .names();
    return std::find(names.begin(), names.end(), "layout-nhwc") != names.end();
  };
  const KernelBackend& cpu = codegen::cpu_kernel_backend();
  const KernelBackend& cuda = codegen::cuda_kernel_backend();
  Target nchw = Target::cpu_host();
  nchw.channels_last = false;
  EXPECT_TRUE(has_layout(2, &cpu, Target::cpu_host()));
  EXPECT_TRUE(has_layout(3, &cpu, Target::cpu_host()));
  EXPECT_FALSE(has_layout(1, &cpu, Target::cpu_host()));
  EXPECT_FALSE(has_layout(2, &cpu, nchw));
  EXPECT_FALSE(has_layout(3, &cuda, Target::cpu_host()));
  EXPECT_FALSE(has_layout(3, nullptr, Target::cpu_host()));
  // Every pass of a backend's has a name `opt --passes` and the rules' skip_passes know.
  const std::vector<std::string> known = PassManager::known_passes();
  for (const auto& p : cpu.pipeline_passes(3, Target::cpu_host()))
    EXPECT_NE(std::find(known.begin(), known.end(), p->name()), known.end()) << p->name();
  std::string path = ::testing::TempDir() + "/target_nchw.json";
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs(R"({"name": "mine", "channels_last": false})", f);
  std::fclose(f);
  EXPECT_FALSE(Target::builtin_or_file(path).channels_last);
}

}  // namespace
}  // namespace gaf
