// HardSwish as exporters write it, in both of its forms:
//
//   x * HardSigmoid(x, alpha = 1/6, beta = 0.5)
//   x * Relu6(x + 3) / 6          Relu6 = Clip(., 0, 6); "/ 6" as Div 6 or Mul 1/6, before or after the "* x"
//
// becomes HardSwish(x) = x * max(0, min(1, x / 6 + 0.5)): the standard op from opset 14, gaf.HardSwish (same
// semantics, CPU kernel in runtime/kernels/onnx/gaf_ops.cc) before. Anchored on the HardSigmoid / Clip; constants
// must equal the formula's to fp32 precision, intermediates be read once inside the pattern; fp32 only.
#include "gaf/passes.h"
#include "passes/rewrite_util.h"

namespace gaf {

namespace {

using rewrite::is_op;
using rewrite::is_scalar;
using rewrite::near;
using rewrite::other_operand;
using rewrite::scalar_operand;
using rewrite::sole_user;

// `n` divides `v` by 6 (Div(v, 6) or Mul(v, 1/6) in either order).
bool divides_by_6(const Graph& g, const Node* n, const Value* v) {
  if (is_op(n, "Div")) return n->input(0) == v && is_scalar(g, n->input(1), v, 6.0);
  return is_op(n, "Mul") && is_scalar(g, other_operand(n, v), v, 1.0 / 6.0);
}

// Clip(x + 3, 0, 6), with x + 3 read once by the Clip: x.
Value* relu6_of_x_plus_3(const Graph& g, const Node& clip) {
  if (!is_op(&clip, "Clip")) return nullptr;
  Node* add = clip.input(0) ? clip.input(0)->producer() : nullptr;
  if (!is_op(add, "Add") || sole_user(g, clip.input(0)) != &clip) return nullptr;
  if (clip.opset >= 11) {
    auto lo = scalar_operand(g, clip.input(1), clip.input(0)),
         hi = scalar_operand(g, clip.input(2), clip.input(0));
    if (lo != 0.0 || hi != 6.0) return nullptr;
  } else if (clip.attr_float("min", -1) != 0.0f || clip.attr_float("max", -1) != 6.0f) {
    return nullptr;
  }
  for (Value* x : {add->input(0), add->input(1)})
    if (is_scalar(g, other_operand(add, x), x, 3.0)) return x;
  return nullptr;
}

class HardSwishRecognition final : public rewrite::RulePass {
 public:
  std::string_view name() const override { return "hard-swish-recognition"; }

 private:
  bool rule(rewrite::Rewriter& rw, Node& act) override {
    Graph& g = rw.graph();
    Value* x = nullptr;
    Value* result = nullptr;
    std::vector<Node*> nodes{&act};
    Value* r = act.output(0);
    Node* u = sole_user(g, r);
    if (is_op(&act, "HardSigmoid")) {
      // x * HardSigmoid(x, 1/6, 0.5) -> HardSwish(x)
      x = act.input(0);
      if (!near(act.attr_float("alpha", 0.2f), 1.0 / 6.0) || act.attr_float("beta", 0.5f) != 0.5f)
        return false;
      if (!is_op(u, "Mul") || other_operand(u, r) != x) return false;
      nodes.push_back(u);
      result = u->output(0);
    } else if ((x = relu6_of_x_plus_3(g, act))) {
      nodes.push_back(act.input(0)->producer());
      Node* v = u ? sole_user(g, u->output(0)) : nullptr;
      // (x * Relu6(x + 3)) / 6 -> HardSwish(x)
      bool times_x_first = is_op(u, "Mul") && other_operand(u, r) == x && divides_by_6(g, v, u->output(0));
      // x * (Relu6(x + 3) / 6) -> HardSwish(x)
      bool divided_first = divides_by_6(g, u, r) && is_op(v, "Mul") && other_operand(v, u->output(0)) == x;
      if (!times_x_first && !divided_first) return false;
      nodes.insert(nodes.end(), {u, v});
      result = v->output(0);
    }
    if (!result || !rewrite::is_float(x)) return false;
    bool standard = act.opset >= 14;
    Node* hs = rw.add_node("HardSwish", {x}, {result}, standard ? "" : rewrite::kGafDomain,
                           standard ? act.opset : 1);
    rw.replace(result, hs->output(0));
    rw.erase_unused(nodes);
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_hard_swish_recognition() { return std::make_unique<HardSwishRecognition>(); }

}  // namespace gaf
