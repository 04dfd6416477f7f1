// Transpose folding: a Transpose is a full copy of its tensor, so fold it away wherever something else can
// absorb the permutation.
//
//   Transpose(x, identity)                 -> x
//   Transpose(Transpose(x, p1), p2)        -> Transpose(x, p1 o p2)   (-> x when that is the identity)
//   Transpose(constant c)                  -> constant c^T            (c read only here, so no copy is kept)
//   Gemm(Transpose(A), B)                  -> Gemm(A, B, transA = !transA)     (B likewise)
//   MatMul(Transpose(A), B), all 2-D       -> Gemm(A, B, transA = 1)           (B likewise; opset >= 11)
//   f(Transpose(a, p), Transpose(b, p), s) -> Transpose(f(a, b, s), p)  f elementwise or broadcast (a and b of the
//                                             output's rank), s scalar constants or constants of the output's
//                                             rank (then Transpose(s, p^-1), folded to a constant): moves the
//                                             Transpose down (k of them become one) until it meets its inverse;
//                                             an operand b with a Transpose(b, p^-1) elsewhere reads that instead
//   Concat(Transpose(a, p), Transpose(b, p), axis k) -> Transpose(Concat(a, b, axis p[k]), p)
//                                             (channel concatenations of channels-last branches: SqueezeNet's Fire
//                                             modules, Inception blocks, DenseNet layers stay channels-last)
//
// A folded Transpose still read elsewhere stays for those readers. Perms are validated; a Transpose without a
// perm attribute reverses the dims, which needs the input rank.
#include <algorithm>
#include <numeric>

#include "gaf/op_registry.h"
#include "gaf/passes.h"
#include "passes/rewrite_util.h"

namespace gaf {

namespace {

using rewrite::is_op;

bool is_identity(const std::vector<int64_t>& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != int64_t(i)) return false;
  return true;
}

// The Transpose producing `v` when it swaps the two dims of a 2-D tensor.
Node* transpose_2d(const Value* v) {
  Node* t = rewrite::producer_op(v, "Transpose");
  if (!t) return nullptr;
  auto p = rewrite::transpose_perm(*t);
  return p && *p == std::vector<int64_t>{1, 0} ? t : nullptr;
}

class TransposeFold final : public rewrite::RulePass {
 public:
  std::string_view name() const override { return "transpose-fold"; }

 private:
  bool rule(rewrite::Rewriter& rw, Node& n) override {
    if (is_op(&n, "Transpose")) return fold_transpose(rw, n);
    if (is_op(&n, "Gemm")) return into_gemm(rw, n);
    if (is_op(&n, "MatMul")) return matmul_to_gemm(rw, n);
    if (is_op(&n, "Concat")) return through_concat(rw, n);
    if (op_kind(n) <= OpKind::Broadcast) return push_down(rw, n);
    return false;
  }

  // f(Transpose(a, p), ..., scalars) -> Transpose(f(a, ...), p)
  static bool push_down(rewrite::Rewriter& rw, Node& n) {
    Graph& g = rw.graph();
    if ((!n.domain.empty() && n.domain != "gaf") || n.num_outputs() != 1 || n.op_type == "BatchNormalization" ||
        n.has_attr("broadcast"))
      return false;
    Value* y = n.output(0);
    const int rank = rewrite::rank_of(y);
    if (rank < 2) return false;
    std::optional<std::vector<int64_t>> perm;
    std::vector<Node*> transposes;
    std::vector<Value*> ins(size_t(n.num_inputs()), nullptr);
    for (int i = 0; i < n.num_inputs(); ++i) {
      Value* v = n.input(i);
      Node* t = v ? rewrite::producer_op(v, "Transpose") : nullptr;
      if (!t) continue;
      auto p = rewrite::transpose_perm(*t);
      // Equal ranks broadcast dim by dim, so permuting every operand alike permutes the broadcast result.
      if (!p || int(p->size()) != rank || (perm && *p != *perm) || !rewrite::used_only_by(g, v, {&n}) ||
          rewrite::rank_of(v) != rank)
        return false;
      perm = p;
      transposes.push_back(t);
      ins[size_t(i)] = t->input(0);
    }
    if (!perm) return false;
    std::vector<int64_t> inverse(perm->size());
    for (size_t j = 0; j < perm->size(); ++j) inverse[size_t((*perm)[j])] = int64_t(j);
    for (int i = 0; i < n.num_inputs(); ++i) {
      Value* v = n.input(i);
      if (!v || ins[size_t(i)]) continue;
      const Tensor* c = rewrite::constant_of(g, v);
      if (c && c->numel() == 1 && c->rank() <= rank) {  // scalars broadcast the same either way
        ins[size_t(i)] = v;
        continue;
      }
      if (c && c->rank() == rank) {  // a constant of equal rank (per-channel scales, biases): permuted by p^-1
        Node* tc = rw.add_node("Transpose", {v}, {v}, "", transposes[0]->opset);
        tc->attrs["perm"] = inverse;
        Shape cs(static_cast<size_t>(rank));
        for (int j = 0; j < rank; ++j) cs[size_t(j)] = c->dim(int(inverse[size_t(j)]));
        tc->output(0)->type.shape = cs;
        ins[size_t(i)] = tc->output(0);
        continue;
      }
      // v = Transpose(Transpose(v, inverse), perm): reuse an inverse Transpose of v another reader already has.
      if (!rewrite::same_shape(v, y)) return false;
      for (const Use& u : v->uses())
        if (is_op(u.node, "Transpose") && u.node != &n && rewrite::transpose_perm(*u.node) == inverse)
          ins[size_t(i)] = u.node->output(0);
      if (!ins[size_t(i)]) return false;
    }
    Node* f = rw.add_node(n.op_type, ins, {y}, n.domain, n.opset);
    f->attrs = n.attrs;
    transpose_after(rw, n, *f, *perm, transposes);
    return true;
  }

  // `f` (a new node computing n's output in the untransposed layout) followed by Transpose(perm) replaces n; n and
  // the input Transposes go when nothing else reads them.
  static void transpose_after(rewrite::Rewriter& rw, Node& n, Node& f, const std::vector<int64_t>& perm,
                              const std::vector<Node*>& transposes) {
    Value* y = n.output(0);
    Shape s(perm.size());
    for (size_t j = 0; j < perm.size(); ++j) s[size_t(perm[j])] = (*y->type.shape)[j];
    f.output(0)->type.shape = s;
    Node* t = rw.add_node("Transpose", {f.output(0)}, {y}, "", transposes[0]->opset);
    t->attrs["perm"] = perm;
    rw.replace(y, t->output(0));
    std::vector<Node*> erase = {&n};
    erase.insert(erase.end(), transposes.begin(), transposes.end());
    rw.erase_unused(erase);
  }

  // Concat(Transpose(a_i, p), axis k) -> Transpose(Concat(a_i, axis p[k]), p): the k-th dim of Transpose(a, p)
  // is dim p[k] of a.
  static bool through_concat(rewrite::Rewriter& rw, Node& n) {
    Graph& g = rw.graph();
    Value* y = n.output(0);
    const int rank = rewrite::rank_of(y);
    if (rank < 2 || n.num_inputs() < 1 || !n.has_attr("axis")) return false;
    int64_t axis = n.attr_int("axis", 0);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return false;
    std::optional<std::vector<int64_t>> perm;
    std::vector<Node*> transposes;
    std::vector<Value*> ins;
    for (int i = 0; i < n.num_inputs(); ++i) {
      Value* v = n.input(i);
      Node* t = v ? rewrite::producer_op(v, "Transpose") : nullptr;
      if (!t) return false;
      auto p = rewrite::transpose_perm(*t);
      if (!p || int(p->size()) != rank || (perm && *p != *perm) || g.is_graph_output(v)) return false;
      // Read by Concats only (DenseNet concatenates each layer's output into every later layer's input): each of
      // them moves the Transpose down too, so it goes once the last one has.
      for (const Use& u : v->uses())
        if (!is_op(u.node, "Concat")) return false;
      perm = p;
      if (std::find(transposes.begin(), transposes.end(), t) == transposes.end()) transposes.push_back(t);
      ins.push_back(t->input(0));
    }
    Node* c = rw.add_node("Concat", ins, {y}, n.domain, n.opset);
    c->attrs = n.attrs;
    c->attrs["axis"] = (*perm)[size_t(axis)];
    transpose_after(rw, n, *c, *perm, transposes);
    return true;
  }

  static bool fold_transpose(rewrite::Rewriter& rw, Node& t) {
    Graph& g = rw.graph();
    Value* x = t.input(0);
    auto perm = rewrite::transpose_perm(t);
    if (!x || !perm) return false;
    Value* y = t.output(0);
    if (is_identity(*perm)) {
      // Transpose(x, identity) -> x
      if (!rw.can_replace(y, x)) return false;
      rw.replace(y, x, false);
    } else if (Node* inner = rewrite::producer_op(x, "Transpose")) {
      // Transpose(Transpose(x, p1), p2) -> Transpose(x, p1 o p2)
      auto p1 = rewrite::transpose_perm(*inner);
      if (!p1 || p1->size() != perm->size()) return false;
      std::vector<int64_t> composed(perm->size());
      for (size_t i = 0; i < perm->size(); ++i) composed[i] = (*p1)[(*perm)[i]];
      if (is_identity(composed)) {
        if (!rw.can_replace(y, inner->input(0))) return false;
        rw.replace(y, inner->input(0), false);
      } else {
        t.set_input(0, inner->input(0));
        t.attrs["perm"] = composed;
      }
      rw.erase_unused({&t, inner});
      return true;
    } else if (rewrite::constant_of(g, x) && x->uses().size() == 1 && !g.is_graph_output(x)) {
      // Transpose(c) -> c^T
      std::vector<Tensor> value;
      try {
        value = rewrite::evaluate(g, t);
      } catch (const Error&) {
        return false;
      }
      rw.replace(y, rw.add_constant(x->name() + "__transposed", value[0]));
    } else {
      return false;
    }
    rw.erase_unused({&t});
    return true;
  }

  // Gemm(Transpose(A), Transpose(B)) -> Gemm(A, B) with flipped transA / transB
  static bool into_gemm(rewrite::Rewriter& rw, Node& gemm) {
    bool changed = false;
    for (int i = 0; i < 2; ++i) {
      Node* t = transpose_2d(gemm.input(i));
      if (!t) continue;
      const char* flag = i == 0 ? "transA" : "transB";
      gemm.attrs[flag] = int64_t(gemm.attr_int(flag, 0) == 0);
      gemm.set_input(i, t->input(0));
      rw.erase_unused({t});
      changed = true;
    }
    return changed;
  }

  // MatMul(Transpose(A), Transpose(B)) on 2-D -> Gemm(A, B, transA, transB)
  static bool matmul_to_gemm(rewrite::Rewriter& rw, Node& mm) {
    Value* a = mm.input(0);
    Value* b = mm.input(1);
    if (mm.opset < 11 || rewrite::rank_of(a) != 2 || rewrite::rank_of(b) != 2) return false;
    if (!is_floating(mm.output(0)->type.dtype)) return false;
    Node* ta = transpose_2d(a);
    Node* tb = transpose_2d(b);
    if (!ta && !tb) return false;
    Node* gemm =
        rw.add_node("Gemm", {ta ? ta->input(0) : a, tb ? tb->input(0) : b}, {mm.output(0)}, "", mm.opset);
    if (ta) gemm->attrs["transA"] = int64_t(1);
    if (tb) gemm->attrs["transB"] = int64_t(1);
    rw.replace(mm.output(0), gemm->output(0));
    std::vector<Node*> pattern{&mm};
    if (ta) pattern.push_back(ta);
    if (tb) pattern.push_back(tb);
    rw.erase_unused(pattern);
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_transpose_fold() { return std::make_unique<TransposeFold>(); }

}  // namespace gaf
