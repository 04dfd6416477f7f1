// Scaled dot-product attention as one node:
//
//   O = MatMul(Softmax(MatMul(Q, Kt) * c [+ mask], last axis), V)   -> gaf.Attention(Q, K, V, [mask], scale = c)
//   O = MatMul(Softmax(Where(b, f, MatMul(Q, Kt) * c)), V)         -> gaf.Attention(Q, K, V, Where(b, f, 0), c)
//
// A boolean mask (masked_fill: Where(b, f, s), or Where(b, s, f) keeping where b holds) becomes the additive
// mask Where(b, f, 0): exact for f = -inf (exp gives 0 either way, a fully masked row NaN either way) and for
// f <= -1e30 (s + f rounds to f for any score below 1e22). A finite f above that (-1e9, -1e4: s + f is not f)
// only when b is a constant with no fully masked row: masked scores then contribute exp(f - max) = 0 in both
// forms. A constant b gives a constant mask; otherwise a Where node computes it.
//
// Anchored on the Softmax. The scale c is the product of every multiplication or division by a scalar constant
// on the scores or on the Q / Kt operands (PyTorch divides Q by sqrt(d); others scale the scores); an additive
// float mask is added after scaling and must not widen the scores' shape. The head Transposes feeding Q, Kt
// and V and a Transpose reading O become the node's q_perm / k_perm / v_perm / out_perm: the kernel reads and
// writes through strides, so those copies disappear (a Transpose still read elsewhere stays for its readers).
// K itself is Kt with its last two dims swapped, so k_perm is Kt's perm composed with that swap.
// The scores, their scaled and masked copies and the probabilities must be read only inside the pattern; Q, K
// and V are read through their scalings and Transpose wherever else those are read. fp32 only.
#include <cmath>
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

// A boolean mask on the scores: Where(cond, fill, x) (fill where cond holds) or Where(cond, x, fill).
struct BoolMask {
  Node* where = nullptr;
  Value* scores = nullptr;  // x
  Value* cond = nullptr;
  double fill = 0;
  bool fill_when_true = true;
};

// Sets *why when `where` is not such a mask.
std::optional<BoolMask> bool_mask(const Graph& g, Node* where, std::string* why) {
  if (where->input(0)->type.dtype != DType::Bool) {
    *why = fmt::format("the condition of {} is not boolean", where->describe());
    return std::nullopt;
  }
  *why = fmt::format("{} does not select between the scores and a scalar constant fill of the scores' shape "
                     "(its output is {})", where->describe(), where->output(0)->type.to_string());
  for (int i : {1, 2}) {
    Value* x = where->input(3 - i);
    std::optional<double> f = rewrite::scalar_operand(g, where->input(i), x);
    if (!f || !rewrite::is_float(x) || !rewrite::same_shape(x, where->output(0))) continue;
    BoolMask m{where, x, where->input(0), *f, i == 1};
    if (std::isinf(m.fill) && m.fill < 0) return m;
    *why = fmt::format("{} fills {}: a mask fill must be -inf, at most -1e30, or at most -1e4 with a constant "
                       "condition that leaves every row a key",
                       where->describe(), m.fill);
    if (!(m.fill <= -1e4)) return std::nullopt;
    if (m.fill <= -1e30) return m;
    // A finite fill: exact when no row is fully masked, which only a constant condition tells.
    const Tensor* c = rewrite::constant_of(g, m.cond);
    if (!c || c->rank() < 1 || c->dim(-1) != (*x->type.shape).back().value()) return std::nullopt;
    const int64_t row = c->dim(-1);
    const bool* cb = c->data<bool>();
    for (int64_t r = 0; r < c->numel() / std::max<int64_t>(row, 1); ++r) {
      bool open = false;
      for (int64_t j = 0; j < row && !open; ++j) open = cb[r * row + j] != m.fill_when_true;
      if (!open) return std::nullopt;
    }
    return m;
  }
  return std::nullopt;
}

// The additive form of `m`: fill where masked, 0 elsewhere; a constant when the condition is one.
Value* additive_mask(rewrite::Rewriter& rw, const BoolMask& m) {
  const float fill = float(m.fill), keep = 0.0f;
  if (const Tensor* c = rewrite::constant_of(rw.graph(), m.cond)) {
    Tensor t(DType::Float, c->dims());
    const bool* cb = c->data<bool>();
    for (int64_t i = 0; i < c->numel(); ++i) t.data<float>()[i] = cb[i] == m.fill_when_true ? fill : keep;
    return rw.add_constant(m.where->output(0)->name() + "_mask", std::move(t));
  }
  Value* f = rw.add_constant(m.where->output(0)->name() + "_fill", Tensor::scalar<float>(fill));
  Value* z = rw.add_constant(m.where->output(0)->name() + "_keep", Tensor::scalar<float>(keep));
  Node* w = rw.add_node("Where", {m.cond, m.fill_when_true ? f : z, m.fill_when_true ? z : f}, {m.where->output(0)},
                        "", m.where->opset);
  TensorType t{DType::Float, m.cond->type.shape};
  w->output(0)->type = t;
  return w->output(0);
}

// a + b: the two masks as one (its shape is left to shape inference, which the pipeline runs again after).
Value* add_masks(rewrite::Rewriter& rw, Value* a, Value* b, int opset) {
  Node* add = rw.add_node("Add", {a, b}, {b}, "", opset);
  add->output(0)->type = TensorType{DType::Float, std::nullopt};
  return add->output(0);
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
    if (!is_op(pv, "MatMul") || pv->input(0) != softmax.output(0)) return false;  // not attention-shaped at all
    if (rewrite::rank_of(pv->input(1)) < 2) return miss(softmax, "V ('{}') has rank below 2", pv->input(1)->name());

    // Scores: a boolean mask (Where) and an additive one (Add), each optional, in either order, on the scaled
    // MatMul(Q, Kt), each read only by the next.
    std::vector<Node*> pattern = {pv, &softmax};
    Value* mask = nullptr;
    Value* cur = s;
    std::optional<BoolMask> bmask;
    bool where_outside = false;  // Where(b, f, s + m) rather than Where(b, f, s) + m
    while (sole_user(g, cur) == pattern.back()) {
      if (Node* where = rewrite::producer_op(cur, "Where"); where && !bmask) {
        std::string why;
        bmask = bool_mask(g, where, &why);
        if (!bmask) return miss(softmax, "{}", why);
        where_outside = !mask;
        pattern.push_back(where);
        cur = bmask->scores;
      } else if (Node* add = rewrite::producer_op(cur, "Add"); add && !mask) {
        for (int i : {0, 1}) {
          Value* other = add->input(1 - i);
          Node* p = add->input(i)->producer();
          if (p && (is_op(p, "MatMul") || is_op(p, "Mul") || is_op(p, "Div") || is_op(p, "Where")) &&
              rewrite::same_shape(add->input(i), cur) &&
              rewrite::is_float(other) && rewrite::rank_of(other) >= 0 && rewrite::rank_of(other) <= rank) {
            mask = other;
            cur = add->input(i);
            pattern.push_back(add);
            break;
          }
        }
        if (!mask)
          return miss(softmax, "{} is not scores {} plus a float mask of no higher rank (operands {} and {})",
                      add->describe(), cur->type.to_string(), add->input(0)->type.to_string(),
                      add->input(1)->type.to_string());
      } else {
        break;
      }
    }
    // Both masks become one additive mask Where(b, f, 0) + m. Exact for Where(b, f, s) + m when f is -inf or at
    // most -1e30 (s + f rounds to f, then f + m is what the scores get either way); for Where(b, f, s + m) only
    // when f is -inf (with f = finfo.min, f + m overflows to -inf where m is finfo.min too, and a row that b
    // masks entirely would no longer be uniform).
    if (bmask && mask && !(bmask->fill <= -1e30 && (!where_outside || std::isinf(bmask->fill))))
      return miss(softmax, "{} (fill {}) and an additive mask do not combine exactly into one additive mask",
                  bmask->where->describe(), bmask->fill);
    if (cur != s && sole_user(g, cur) != pattern.back())
      return miss(softmax, "the scores '{}' are also read outside the attention", cur->name());
    Operand scores = peel(g, cur, false);
    Node* qk = scores.v->producer();
    if (!is_op(qk, "MatMul"))
      return miss(softmax, "the scores '{}' come from {}, not from a MatMul of Q and K^T (after scalings by a "
                  "constant)", scores.v->name(), qk ? qk->describe() : "a graph input");
    if (!sole_user(g, scores.v)) return miss(softmax, "Q K^T ('{}') is also read outside the attention", scores.v->name());
    for (const Node* p : scores.nodes)
      if (!sole_user(g, p->output(0)))
        return miss(softmax, "the scaled scores '{}' are also read outside the attention", p->output(0)->name());
    if (rewrite::rank_of(qk->input(0)) < 2 || rewrite::rank_of(qk->input(1)) < 2)
      return miss(softmax, "an operand of {} has rank below 2 (or an unknown rank)", qk->describe());

    Operand q = peel(g, qk->input(0), true);
    Operand kt = peel(g, qk->input(1), true);
    Operand v = peel(g, pv->input(1), true);
    for (const Operand* o : {&q, &kt, &v})
      if (rewrite::rank_of(o->v) < 2 || !rewrite::is_float(o->v))
        return miss(softmax, "'{}' is {}: Q, K and V must be float32 of rank 2 or more", o->v->name(),
                    o->v->type.to_string());
    const double scale = scores.scale * q.scale * kt.scale;
    if (v.scale != 1.0) return miss(softmax, "V ('{}') is scaled by {}", v.v->name(), v.scale);
    if (!std::isfinite(scale)) return miss(softmax, "the scale of the scores is not finite");

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

    if (bmask) {
      Value* bm = additive_mask(rw, *bmask);
      mask = mask ? add_masks(rw, bm, mask, softmax.opset) : bm;
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
