// Models the frontend refuses with one clear error rather than importing them into something that runs wrong.
#include <gtest/gtest.h>

#include "gaf/onnx_io.h"

namespace gaf {
namespace {

std::string import_error(const std::string& text) {
  try {
    onnx_io::parse_model_text(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Opset 99 was accepted and its ops given the meaning of the newest opset we know.
TEST(ImportErrors, OpsetBeyondTheNewestSupportedIsRefused) {
  const char* relu = R"(g (float[4] x) => (float[4] y) { y = Relu(x) })";
  std::string e = import_error(std::string(R"(<ir_version: 8, opset_import: ["" : 99]> )") + relu);
  EXPECT_NE(e.find("imports opset 99 of domain 'ai.onnx'"), std::string::npos) << e;
  EXPECT_NE(e.find("the newest this build supports is 20"), std::string::npos) << e;
  EXPECT_EQ(import_error(std::string(R"(<ir_version: 8, opset_import: ["" : 17]> )") + relu), "");
  EXPECT_EQ(import_error(std::string(R"(<ir_version: 8, opset_import: ["" : 20]> )") + relu), "");
  e = import_error(std::string(R"(<ir_version: 8, opset_import: ["" : 21]> )") + relu);
  EXPECT_NE(e.find("opset 21"), std::string::npos) << e;
}

// The ONNX checker's message is one line and names an unnamed node by its first output; the node imported
// from a valid model keeps its empty name.
TEST(ImportErrors, CheckerErrorsAreOneLineNamingTheNode) {
  const std::string header = R"(<ir_version: 8, opset_import: ["" : 17]> )";
  std::string e =
      import_error(header + R"(g (float[2,3] x) => (float[2,3] y) { y = Softmax<axis = "last">(x) })");
  EXPECT_NE(e.find("Name: y OpType: Softmax"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  Model m = onnx_io::parse_model_text(header + R"(g (float[2,3] x) => (float[2,3] y) { y = Softmax(x) })");
  ASSERT_EQ(m.graph->num_nodes(), 1u);
  EXPECT_EQ(m.graph->nodes()[0]->name, "");
}

}  // namespace
}  // namespace gaf
