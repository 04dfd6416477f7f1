// The CPU runtime runs every op the op definitions (src/ops) define, and only those.
#include <fmt/format.h>

#include "gaf/kernel.h"
#include "gaf/op_registry.h"
#include "test_util.h"

namespace gaf {
namespace {

TEST(KernelRegistry, EveryDefinedOpHasACpuKernel) {
  std::vector<std::string> missing;
  for (const auto& [key, info] : OpRegistry::instance().all())
    if (!runtime::KernelRegistry::cpu().find(key.first, key.second))
      missing.push_back(key.second.empty() ? key.first : key.second + "." + key.first);
  EXPECT_TRUE(missing.empty()) << fmt::format("{}", fmt::join(missing, ", "));
  EXPECT_EQ(runtime::KernelRegistry::cpu().all().size(), OpRegistry::instance().all().size());
}

TEST(KernelRegistry, FindsByNodeAndDomain) {
  Model m = testing::parse(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[4] x) => (float[4] y) { a = Relu(x)  y = Neg(a) })");
  const Node* relu = m.graph->nodes().front();
  EXPECT_NE(runtime::KernelRegistry::cpu().find(*relu), nullptr);
  EXPECT_NE(runtime::KernelRegistry::cpu().find("Relu", "ai.onnx"),
            nullptr);  // the default domain's long name
  EXPECT_EQ(runtime::KernelRegistry::cpu().find("NoSuchOp"), nullptr);
  EXPECT_EQ(runtime::KernelRegistry::cpu().find("Relu", "com.example"), nullptr);
}

}  // namespace
}  // namespace gaf
