// graph-autofusion opt: named passes over ONNX text, the result printed as ONNX text that parses back.
#include <gtest/gtest.h>

#include <sstream>

#include "gaf/onnx_io.h"
#include "gaf/passes.h"
#include "gaf/tools.h"
#include "test_util.h"

namespace gaf {
namespace {

const char* kModel = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2,8] x) => (float[2,8] y) {
  one = Constant <value = float {1.0}> ()
  two = Constant <value = float {2.0}> ()
  s = Add(one, two)
  a = Mul(x, s)
  y = Add(a, one)
})";

// Folding Add(1, 2): the printed model holds the constant 3, no Add of constants, and parses back to a model
// that prints the same and computes the same.
TEST(Opt, FoldedModelPrintsAsTextThatParsesBack) {
  Model m = testing::parse(kModel);
  std::ostringstream dumps;
  EXPECT_EQ(tools::run_passes(m, {"constant-to-initializer", "constant-folding"}, "", dumps), 0);
  EXPECT_TRUE(dumps.str().empty());
  const std::string text = tools::model_text(m);
  EXPECT_NE(text.find("float {3}"), std::string::npos) << text;
  EXPECT_EQ(text.find("Add(one, two)"), std::string::npos) << text;
  Model back = onnx_io::parse_model_text(text);
  EXPECT_EQ(tools::model_text(back), text);
  testing::expect_same_outputs(testing::parse(kModel), back);
}

// --dump-after: the model after each run of that pass which changed it; a pass that finds nothing to do
// prints nothing (the "does not fire" twin).
TEST(Opt, DumpAfterPrintsOnlyWhereThePassChangedTheModel) {
  Model m = testing::parse(kModel);
  std::ostringstream dumps;
  EXPECT_EQ(tools::run_passes(m, {"constant-to-initializer", "constant-folding"}, "constant-folding", dumps),
            1);
  EXPECT_NE(dumps.str().find("# after constant-folding\n<ir_version"), std::string::npos) << dumps.str();
  std::ostringstream none;
  Model again = testing::parse(kModel);
  EXPECT_EQ(tools::run_passes(again, {"gelu-recognition"}, "gelu-recognition", none), 0);
  EXPECT_TRUE(none.str().empty());
  std::ostringstream all;
  Model third = testing::parse(kModel);
  EXPECT_GE(tools::run_passes(third, {"constant-to-initializer", "constant-folding"}, "all", all), 2);
}

// Every pass of the pipeline can be named; a misspelt one is an error listing the known ones.
TEST(Opt, PassesByNameAndUnknownNames) {
  for (const std::string& name : PassManager::known_passes()) {
    auto p = PassManager::make_pass(name);
    ASSERT_TRUE(p) << name;
    EXPECT_EQ(p->name(), name);
  }
  EXPECT_FALSE(PassManager::make_pass("constant-foldin"));
  Model m = testing::parse(kModel);
  std::ostringstream dumps;
  try {
    tools::run_passes(m, {"constant-foldin"}, "", dumps);
    FAIL() << "an unknown pass ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'constant-foldin' is no pass (known: constant-to-initializer"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(tools::run_passes(m, {"constant-folding"}, "no-such-pass", dumps), Error);
}

// A recognition pass text-in, text-out: the hand-written attention of an encoder becomes one gaf.Attention.
TEST(Opt, AttentionFusionShowsItsOp) {
  Model m = testing::parse(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2,4,8,16] q, float[2,4,8,16] k, float[2,4,8,16] v) => (float[2,4,8,16] o) {
  kt = Transpose <perm = [0, 1, 3, 2]> (k)
  s = MatMul(q, kt)
  c = Constant <value = float {0.25}> ()
  z = Mul(s, c)
  p = Softmax <axis = -1> (z)
  o = MatMul(p, v)
})");
  std::ostringstream dumps;
  tools::run_passes(m, {"constant-to-initializer", "softmax-recognition", "attention-fusion"}, "", dumps);
  const std::string text = tools::model_text(m);
  EXPECT_NE(text.find("Attention"), std::string::npos) << text;
  EXPECT_EQ(text.find("Softmax"), std::string::npos) << text;
}

}  // namespace
}  // namespace gaf
