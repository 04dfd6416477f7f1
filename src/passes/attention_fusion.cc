// Scaled dot-product attention as one node:
//
//   O = MatMul(Softmax(MatMul(Q, Kt) * c [+ mask], last axis), V)   -> gaf.Attention(Q, K, V, [mask], scale = c)
//
// Anchored on the Softmax. The scale c is the product of every multiplication or division by a scalar constant
// on the scores or on the Q / Kt operands (PyTorch divides Q by sqrt(d); others scale the scores); an additive
// float mask is added after scaling and must not widen the scores' shape. The head Transposes feeding Q, Kt
// and V and a Transpose reading O become the node's q_perm / k_perm / v_perm / out_perm: the kernel reads and
// writes through strides, so those copies disappear (a Transpose still read elsewhere stays for its readers).
// K itself is Kt with its last two dims swapped, so k_perm is Kt's perm composed with that swap.
// The scores, their scaled and masked copies and the probabilities must be read only inside the pattern; Q, K
// and V are read through their scalings and Transpose wherever else those are read. fp32 only.
#include <numeric>

#include "gaf/passes.h"
#include "passes/rewrite_util.h"

namespace gaf {

namespace {

using rewrite::is_op;
using rewrite::sole_user;

// An operand of the pattern traced back through scalings by a scalar constant and at most one Transpose.
struct Operand {
  Value* v = nullptr;
  std::optional<std::vector<int64_t>> perm;  // logical operand = Transpose(v, perm)
  double scale = 1;
  std::vector<Node*> nodes;  // the nodes peeled off, consumer first
};

Operand peel(const Graph& g, Value* x, bool allow_transpose) {
  Operand o{x, std::nullopt, 1, {}};
  while (Node* p = o.v->producer()) {
    Value* next = p->input(0);
    if (is_op(p, "Mul") || is_op(p, "Div")) {
      std::optional<double> c = rewrite::scalar_operand(g, p->input(1), p->input(0));
      if (!c && is_op(p, "Mul")) c = rewrite::scalar_operand(g, p->input(0), p->input(1)), next = p->input(1);
      if (!c || *c == 0 || !rewrite::is_float(next)) break;
      o.scale *= is_op(p, "Div") ? 1.0 / *c : *c;
    } else if (is_op(p, "Transpose") && allow_transpose && !o.perm) {
      o.perm = rewrite::transpose_perm(*p);
      if (!o.perm) break;
    } else {
      break;
    }
    o.nodes.push_back(p);
    o.v = next;
  }
  return o;
}

std::vector<int64_t> identity(int rank) {
  std::vector<int64_t> p(static_cast<size_t>(rank));
  std::iota(p.begin(), p.end(), int64_t(0));
  return p;
}

class AttentionFusion final : public rewrite::RulePass {
 public:
  std::string_view name() const override { return "attention-fusion"; }

 private:
  bool rule(rewrite::Rewriter& rw, Node& softmax) override {
    Graph& g = rw.graph();
    if (!is_op(&softmax, "Softmax")) return false;
    Value* s = softmax.input(0);
    const int rank = rewrite::rank_of(s);
    if (rank < 2 || !rewrite::is_float(s)) return false;
    int64_t axis = softmax.attr_int("axis", softmax.opset >= 13 ? -1 : 1);
    if (axis < 0) axis += rank;
    if (axis != rank - 1) return false;

    // Softmax -> MatMul(P, V)
    Node* pv = sole_user(g, softmax.output(0));
    if (!is_op(pv, "MatMul") || pv->input(0) != softmax.output(0) || rewrite::rank_of(pv->input(1)) < 2) return false;

    // Scores: [Add mask] <- [scale] <- MatMul(Q, Kt), each read only by the next.
    std::vector<Node*> pattern = {pv, &softmax};
    Value* mask = nullptr;
    Value* cur = s;
    if (Node* add = rewrite::producer_op(cur, "Add"); add && sole_user(g, cur) == &softmax) {
      for (int i : {0, 1}) {
        Value* other = add->input(1 - i);
        Node* p = add->input(i)->producer();
        if (p && (is_op(p, "MatMul") || is_op(p, "Mul") || is_op(p, "Div")) &&
            rewrite::same_shape(add->input(i), cur) &&
            rewrite::is_float(other) && rewrite::rank_of(other) >= 0 && rewrite::rank_of(other) <= rank) {
          mask = other;
          cur = add->input(i);
          pattern.push_back(add);
          break;
        }
      }
      if (!mask) return false;
    }
    if (cur != s && sole_user(g, cur) != pattern.back()) return false;
    Operand scores = peel(g, cur, false);
    Node* qk = scores.v->producer();
    if (!is_op(qk, "MatMul") || !sole_user(g, scores.v)) return false;
    for (const Node* p : scores.nodes)
      if (!sole_user(g, p->output(0))) return false;
    if (rewrite::rank_of(qk->input(0)) < 2 || rewrite::rank_of(qk->input(1)) < 2) return false;

    Operand q = peel(g, qk->input(0), true);
    Operand kt = peel(g, qk->input(1), true);
    Operand v = peel(g, pv->input(1), true);
    for (const Operand* o : {&q, &kt, &v})
      if (rewrite::rank_of(o->v) < 2 || !rewrite::is_float(o->v)) return false;
    const double scale = scores.scale * q.scale * kt.scale;
    if (v.scale != 1.0 || !std::isfinite(scale)) return false;  // a scaled V: leave it (rare, keeps c simple)

    // K = Transpose(Kt, swap of the last two dims) = Transpose(kt.v, kt.perm o swap)
    const int krank = rewrite::rank_of(kt.v);
    std::vector<int64_t> swap = identity(krank);
    std::swap(swap[size_t(krank - 2)], swap[size_t(krank - 1)]);
    std::vector<int64_t> kperm(swap.size());
    for (size_t j = 0; j < swap.size(); ++j) kperm[j] = kt.perm ? (*kt.perm)[size_t(swap[j])] : swap[j];

    // A Transpose reading O alone becomes out_perm.
    Value* result = pv->output(0);
    std::optional<std::vector<int64_t>> out_perm;
    if (Node* t = sole_user(g, result); is_op(t, "Transpose")) {
      if (auto p = rewrite::transpose_perm(*t); p && rw.can_replace(t->output(0), result)) {
        out_perm = p;
        pattern.insert(pattern.begin(), t);
        result = t->output(0);
      }
    }

    std::vector<Value*> inputs = {q.v, kt.v, v.v};
    if (mask) inputs.push_back(mask);
    Node* att = rw.add_node("Attention", inputs, {result}, rewrite::kGafDomain, 1);
    att->attrs["scale"] = float(scale);
    if (q.perm) att->attrs["q_perm"] = *q.perm;
    att->attrs["k_perm"] = kperm;
    if (v.perm) att->attrs["v_perm"] = *v.perm;
    if (out_perm) att->attrs["out_perm"] = *out_perm;
    rw.replace(result, att->output(0));
    // The pattern, consumers first; the peeled Transposes and scalings still read elsewhere stay.
    std::vector<Node*> erase = pattern;
    erase.insert(erase.end(), scores.nodes.begin(), scores.nodes.end());
    erase.push_back(qk);
    for (const Operand* o : {&q, &kt, &v}) erase.insert(erase.end(), o->nodes.begin(), o->nodes.end());
    rw.erase_unused(erase);
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_attention_fusion() { return std::make_unique<AttentionFusion>(); }

}  // namespace gaf
