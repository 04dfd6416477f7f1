// The fuse summary and report say which symbolic dims their estimates take as 1.
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace gaf {
namespace {

tools::FuseResult fuse_text(const std::string& text, const std::string& rules = "{}") {
  Model m = testing::parse(R"(<ir_version: 8, opset_import: ["" : 17]> )" + text);
  tools::FuseOptions opts;
  opts.fusion.opt_level = 3;
  opts.fusion.rules = FusionRules::parse(rules);
  return tools::fuse_model(m, opts);
}

TEST(FuseReport, NamesTheSymbolicDimsCostedAsOne) {
  auto r = fuse_text(R"(g (float[batch,seq,8] x, float[8] b) => (float[batch,seq,8] y) {
      a = Add(x, b)  y = Relu(a) })");
  EXPECT_EQ(r.before.dims_costed_as_1, (std::vector<std::string>{"batch", "seq"}));
  EXPECT_NE(r.summary_line().find("symbolic dims batch, seq as 1"), std::string::npos) << r.summary_line();
  auto j = nlohmann::json::parse(r.report_json("m", Target::cpu_host(), 3));
  EXPECT_EQ(j["after"]["dims_costed_as_1"], nlohmann::json({"batch", "seq"}));
}

TEST(FuseReport, StaticModelsHaveNoSymbolicDims) {
  auto r = fuse_text(R"(g (float[2,3,8] x, float[8] b) => (float[2,3,8] y) { a = Add(x, b)  y = Relu(a) })");
  EXPECT_TRUE(r.before.dims_costed_as_1.empty());
  EXPECT_TRUE(r.after.dims_costed_as_1.empty());
  EXPECT_EQ(r.summary_line().find("symbolic"), std::string::npos) << r.summary_line();
}

// The rules' skip_passes leaves a rewrite out; a name that is no pass is an error listing the known ones.
TEST(FuseReport, RulesSkipPassesByName) {
  const std::string silu = R"(g (float[2,8] x) => (float[2,8] y) { s = Sigmoid(x)  y = Mul(x, s) })";
  EXPECT_EQ(fuse_text(silu).rewrites["silu-recognition"], 1);
  auto skipped = fuse_text(silu, R"({"global": {"skip_passes": ["silu-recognition"]}})");
  EXPECT_EQ(skipped.rewrites.count("silu-recognition"), 0u);
  try {
    fuse_text(silu, R"({"global": {"skip_passes": ["silu-recognitoin"]}})");
    ADD_FAILURE() << "an unknown pass name was accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'silu-recognitoin'"), std::string::npos) << m;
    EXPECT_NE(m.find("silu-recognition"), std::string::npos) << m;  // among the known
  }
  EXPECT_THROW(FusionRules::parse(R"({"global": {"skip_passes": "silu-recognition"}})"), Error);  // not a list
}

}  // namespace
}  // namespace gaf
