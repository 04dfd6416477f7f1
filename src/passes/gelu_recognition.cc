// GELU as exporters write it, in both of its forms:
//
//   erf:   0.5 * x * (1 + Erf(x / sqrt(2)))                          -> gaf.Gelu(x)
//   tanh:  0.5 * x * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))   -> gaf.Gelu(x, approximate="tanh")
//
// Anchored on the Erf / Tanh. The inner argument is matched exactly (x / sqrt2 or x * 1/sqrt2; x^3 as Pow(x,
// 3), x * (x * x) or (x * x) * x), then `1 + .`, then the product of {x, 0.5, 1 + .} in any association and
// operand order:  ((1 + e) * x) * 0.5,  ((1 + e) * 0.5) * x,  (1 + e) * (x * 0.5). Constants must equal the
// formula's to fp32 precision; every intermediate is read once, inside the pattern. The result is gaf.Gelu
// (ONNX Gelu exists from opset 20 only), whose attribute mirrors opset 20's; fp32 only.
#include <cmath>
#include <numbers>

#include "gaf/passes.h"
#include "passes/rewrite_util.h"

namespace gaf {

namespace {

using rewrite::is_op;
using rewrite::is_scalar;
using rewrite::other_operand;
using rewrite::scalar_operand;
using rewrite::sole_user;

struct Match {
  Value* x = nullptr;
  Value* result = nullptr;
  std::vector<Node*> nodes;
};

// `n` is Mul(v, want) in either operand order, `want` a single-element constant.
bool mul_by(const Graph& g, const Node* n, const Value* v, double want) {
  return is_op(n, "Mul") && is_scalar(g, other_operand(n, v), v, want);
}

// x / sqrt(2) | x * (1 / sqrt(2)), read once by `erf`: x.
Value* erf_argument(const Graph& g, const Node& erf) {
  Value* q = erf.input(0);
  Node* p = q ? q->producer() : nullptr;
  if (!p || sole_user(g, q) != &erf) return nullptr;
  if (is_op(p, "Div") && is_scalar(g, p->input(1), p->input(0), std::numbers::sqrt2)) return p->input(0);
  for (Value* x : {p->input(0), p->input(1)})
    if (mul_by(g, p, x, 1.0 / std::numbers::sqrt2)) return x;
  return nullptr;
}

// x^3 as Pow(x, 3), Mul(x, Mul(x, x)) or Mul(Mul(x, x), x), with inner values read once: adds its nodes.
bool is_cube(const Graph& g, const Value* c, const Value* x, std::vector<Node*>& nodes) {
  Node* p = c->producer();
  if (is_op(p, "Pow") && p->input(0) == x && is_scalar(g, p->input(1), x, 3.0)) {
    nodes.push_back(p);
    return true;
  }
  if (!is_op(p, "Mul")) return false;
  Value* sq = other_operand(p, x);
  Node* s = sq ? sq->producer() : nullptr;
  if (!is_op(s, "Mul") || s->input(0) != x || s->input(1) != x || sole_user(g, sq) != p) return false;
  nodes.insert(nodes.end(), {p, s});
  return true;
}

// sqrt(2/pi) * (x + 0.044715 * x^3), read once by `tanh`: x and the nodes.
Value* tanh_argument(const Graph& g, const Node& tanh, std::vector<Node*>& nodes) {
  Value* u = tanh.input(0);
  Node* scale = u ? u->producer() : nullptr;
  if (!is_op(scale, "Mul") || sole_user(g, u) != &tanh) return nullptr;
  for (Value* w : {scale->input(0), scale->input(1)}) {
    Node* add = w->producer();
    if (!mul_by(g, scale, w, std::sqrt(2.0 / std::numbers::pi)) || !is_op(add, "Add") ||
        sole_user(g, w) != scale)
      continue;
    for (Value* x : {add->input(0), add->input(1)}) {
      Value* t = other_operand(add, x);
      Node* k = t->producer();
      if (!k || sole_user(g, t) != add || !is_op(k, "Mul")) continue;
      for (Value* c : {k->input(0), k->input(1)}) {
        std::vector<Node*> cube;
        if (!mul_by(g, k, c, 0.044715) || sole_user(g, c) != k || !is_cube(g, c, x, cube)) continue;
        nodes.insert(nodes.end(), {scale, add, k});
        nodes.insert(nodes.end(), cube.begin(), cube.end());
        return x;
      }
    }
  }
  return nullptr;
}

// From `act` (Erf or Tanh output): 1 + act, then the product with x and 0.5.
bool match_product(const Graph& g, Value* act, Value* x, Match& m) {
  Node* one = sole_user(g, act);
  if (!is_op(one, "Add") || !is_scalar(g, other_operand(one, act), act, 1.0)) return false;
  Value* a = one->output(0);
  Node* p = sole_user(g, a);
  if (!is_op(p, "Mul")) return false;
  m.nodes.insert(m.nodes.end(), {one, p});
  Value* o = other_operand(p, a);
  Node* h = o->producer();
  if (o == x || mul_by(g, p, a, 0.5)) {
    // (1 + e) * x then * 0.5, or (1 + e) * 0.5 then * x
    Node* q = sole_user(g, p->output(0));
    bool ok =
        o == x ? mul_by(g, q, p->output(0), 0.5) : (is_op(q, "Mul") && other_operand(q, p->output(0)) == x);
    if (!ok) return false;
    m.nodes.push_back(q);
    m.result = q->output(0);
  } else if (h && mul_by(g, h, x, 0.5) && sole_user(g, o) == p) {
    // (1 + e) * (x * 0.5)
    m.nodes.push_back(h);
    m.result = p->output(0);
  } else {
    return false;
  }
  m.x = x;
  return true;
}

class GeluRecognition final : public rewrite::RulePass {
 public:
  std::string_view name() const override { return "gelu-recognition"; }

 private:
  bool rule(rewrite::Rewriter& rw, Node& act) override {
    Graph& g = rw.graph();
    Match m;
    Value* x = nullptr;
    bool tanh = is_op(&act, "Tanh");
    if (is_op(&act, "Erf")) {
      x = erf_argument(g, act);
      if (x) m.nodes.push_back(act.input(0)->producer());
    } else if (tanh) {
      x = tanh_argument(g, act, m.nodes);
    }
    if (!x || !rewrite::is_float(x) || !match_product(g, act.output(0), x, m)) return false;
    m.nodes.push_back(&act);

    Node* gelu = rw.add_node("Gelu", {x}, {m.result}, rewrite::kGafDomain, 1);
    if (tanh) gelu->attrs["approximate"] = std::string("tanh");
    rw.replace(m.result, gelu->output(0));
    rw.erase_unused(m.nodes);
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_gelu_recognition() { return std::make_unique<GeluRecognition>(); }

}  // namespace gaf
