// Helpers for pass tests: parse a text graph, run passes on a copy, read the op histogram, and check the
// result is a verified graph that is also a valid ONNX model.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gaf/onnx_io.h"
#include "gaf/passes.h"
#include "gaf/tools.h"
#include "test_util.h"

namespace gaf::testing {

inline std::string header(int opset = 17) {
  return "<ir_version: 8, opset_import: [\"\" : " + std::to_string(opset) + "]> ";
}

// n comma-separated deterministic values in [-11/div, 11/div] (salt varies them): weights for ONNX text tensors.
inline std::string test_values(int64_t n, int salt, double div) {
  std::string w;
  for (int64_t i = 0; i < n; ++i) w += (i ? "," : "") + std::to_string(double((i * 37 + salt) % 23 - 11) / div);
  return w;
}

// "Relu" for ai.onnx ops, "gaf.Gelu" for others; fused nodes included as themselves.
inline std::map<std::string, int> histogram(const Graph& g) {
  std::map<std::string, int> h;
  for (const Node* n : g.nodes()) ++h[n->domain.empty() ? n->op_type : n->domain + "." + n->op_type];
  return h;
}

struct Rewritten {
  Model before, after;
  PassContext ctx;
  std::map<std::string, int> ops() const { return histogram(*after.graph); }
  int count(const std::string& pass) const {
    auto it = ctx.rewrites.find(pass);
    return it == ctx.rewrites.end() ? 0 : it->second;
  }
  std::string dump() const { return "after:\n" + after.graph->to_string(); }
};

// Runs Constant-to-initializer and then `passes` to a fixed point on a copy of `m` (options in `ctx`; the runtime's
// constant evaluator unless ctx names one). The result must verify, keep the graph outputs' names and pass the ONNX
// checker (with domain "gaf" imported when it is used).
inline Rewritten rewrite(const Model& m, std::vector<std::unique_ptr<Pass>> passes, PassContext ctx = {}) {
  Rewritten r;
  r.ctx = std::move(ctx);
  if (!r.ctx.evaluator) r.ctx.evaluator = &runtime::constant_evaluator();  // as the driver installs it
  r.before = tools::copy_model(m);
  r.after = tools::copy_model(m);
  PassManager pm;
  pm.add(make_constant_to_initializer());
  for (auto& p : passes) pm.add(std::move(p));
  pm.run(*r.after.graph, r.ctx);
  verify(*r.after.graph);
  const auto& outs_before = r.before.graph->outputs();
  const auto& outs_after = r.after.graph->outputs();
  EXPECT_EQ(outs_before.size(), outs_after.size());
  for (size_t i = 0; i < std::min(outs_before.size(), outs_after.size()); ++i)
    EXPECT_EQ(outs_before[i]->name(), outs_after[i]->name());
  for (const Node* n : r.after.graph->nodes())
    if (n->domain == "gaf") r.after.opsets["gaf"] = 1;
  onnx_io::check_model(PortableModel(r.after));
  return r;
}

inline Rewritten rewrite(const std::string& text, std::unique_ptr<Pass> pass) {
  std::vector<std::unique_ptr<Pass>> passes;
  passes.push_back(std::move(pass));
  return rewrite(parse(text), std::move(passes));
}

}  // namespace gaf::testing
