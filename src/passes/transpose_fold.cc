// Transpose folding: a Transpose is a full copy of its tensor, so fold it away wherever something else can
// absorb the permutation.
//
//   Transpose(x, identity)                 -> x
//   Transpose(Transpose(x, p1), p2)        -> Transpose(x, p1 o p2)   (-> x when that is the identity)
//   Transpose(constant c)                  -> constant c^T            (c read only here, so no copy is kept)
//   Gemm(Transpose(A), B)                  -> Gemm(A, B, transA = !transA)     (B likewise)
//   MatMul(Transpose(A), B), all 2-D       -> Gemm(A, B, transA = 1)           (B likewise; opset >= 11)
//   f(Transpose(a, p), Transpose(b, p), s) -> Transpose(f(a, b, s), p)  f elementwise or broadcast (a and b of the
//                                             output's rank), s scalar constants or other constants (padded
//                                             with leading 1s to the output's rank, then Transpose(s, p^-1),
//                                             folded to a constant): moves the
//                                             Transpose down (k of them become one) until it meets its inverse;
//                                             an operand b with a Transpose(b, p^-1) elsewhere reads that instead
//   Concat(Transpose(a, p), Transpose(b, p), axis k) -> Transpose(Concat(a, b, axis p[k]), p)
//                                             (channel concatenations of channels-last branches: SqueezeNet's Fire
//                                             modules, Inception blocks, DenseNet layers stay channels-last)
//   Reshape(Transpose(x, p), shape)        -> Transpose(Reshape(x, shape'), p')  when each group of dims the
//                                             reshape splits or merges is dims of x adjacent in order; when a
//                                             merged group is adjacent in x but reordered, that reorder stays a
//                                             Transpose above (ShuffleNet's channel shuffle becomes a swap of two
//                                             channels-last axes; the NHWC <-> NCHW move goes on down)
//   Slice(Transpose(x, p), axes a)         -> Transpose(Slice(x, axes p[a]), p)
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
    if (is_op(&n, "Reshape") || is_op(&n, "Flatten") || is_op(&n, "Squeeze") || is_op(&n, "Unsqueeze"))
      return through_reshape(rw, n);
    if (is_op(&n, "Slice")) return through_slice(rw, n);
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
      if (c && c->rank() < rank) {
        // A constant of lower rank broadcasts right-aligned: the same constant with leading 1s (ConvNeXt's layer
        // scale [C, 1, 1] against [N, C, H, W]), which the equal-rank case below then permutes.
        std::vector<int64_t> padded(size_t(rank - c->rank()), 1);
        padded.insert(padded.end(), c->dims().begin(), c->dims().end());
        v = rw.add_constant(v->name(), c->reshaped(padded));
        c = &v->constant();
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
    bool one_goes = false;  // some input Transpose is read by Concats only
    for (int i = 0; i < n.num_inputs(); ++i) {
      Value* v = n.input(i);
      Node* t = v ? rewrite::producer_op(v, "Transpose") : nullptr;
      if (!t) return false;
      auto p = rewrite::transpose_perm(*t);
      if (!p || int(p->size()) != rank || (perm && *p != *perm) || g.is_graph_output(v)) return false;
      // Read by Concats only (DenseNet concatenates each layer's output into every later layer's input): each of
      // them moves the Transpose down too, so it goes once the last one has. One read by something else as well
      // stays for that reader (DenseNet's block input, also its first layer's input: that reader then takes the
      // Transpose down in turn); unless at least one input's Transpose can go, the rule does not pay.
      one_goes = one_goes || std::all_of(v->uses().begin(), v->uses().end(),
                                         [](const Use& u) { return is_op(u.node, "Concat"); });
      perm = p;
      if (std::find(transposes.begin(), transposes.end(), t) == transposes.end()) transposes.push_back(t);
      ins.push_back(t->input(0));
    }
    if (!one_goes) return false;
    Node* c = rw.add_node("Concat", ins, {y}, n.domain, n.opset);
    c->attrs = n.attrs;
    c->attrs["axis"] = (*perm)[size_t(axis)];
    transpose_after(rw, n, *c, *perm, transposes);
    return true;
  }

  // Reshape(Transpose(x, p)) -> Transpose(Reshape(x, shape'), p'). The transposed dims Y and the reshaped dims Z
  // split into blocks of equal product (a block of Y dims merged and split into its block of Z dims); a block
  // whose Y dims are dims of x adjacent and in order (p[i + 1] = p[i] + 1) reshapes x the same way, so
  // shape' lists the blocks' Z dims in x's block order and p' moves whole blocks as p did. A block whose dims
  // are adjacent in x but reordered first gets that order from Transpose(x, r) (r reorders within blocks only),
  // whose blocks are then in order: Transpose(x, p) = Transpose(Transpose(x, r), q), q = r^-1 o p.
  static bool through_reshape(rewrite::Rewriter& rw, Node& n) {
    Graph& g = rw.graph();
    Value* v = n.input(0);
    Node* t = v ? rewrite::producer_op(v, "Transpose") : nullptr;
    Value* z = n.output(0);
    if (!t || !rewrite::used_only_by(g, v, {&n}) || g.is_graph_output(v) || !v->type.has_static_shape() ||
        !z->type.has_static_shape())
      return false;
    auto perm = rewrite::transpose_perm(*t);
    const std::vector<int64_t> ydims = v->type.static_dims(), zdims = z->type.static_dims();
    auto runs = reshape_runs(ydims, zdims);
    if (!perm || perm->size() != ydims.size() || !runs) return false;
    struct Block {
      std::vector<int64_t> ys, zdims;  // Y axes (in Y order) and the Z dims they become
    };
    std::vector<Block> blocks;
    for (const auto& [y0, y1, z0, z1] : *runs) {
      if (y0 == y1) return false;  // trailing unit dims of Z that come from no dim of Y
      Block b;
      for (size_t i = y0; i < y1; ++i) b.ys.push_back(int64_t(i));
      b.zdims.assign(zdims.begin() + ptrdiff_t(z0), zdims.begin() + ptrdiff_t(z1));
      blocks.push_back(std::move(b));
    }
    const std::vector<int64_t>& p = *perm;
    auto in_order = [&](const Block& b, const std::vector<int64_t>& q) {
      for (size_t k = 1; k < b.ys.size(); ++k)
        if (q[size_t(b.ys[k])] != q[size_t(b.ys[k - 1])] + 1) return false;
      return true;
    };
    Value* x = t->input(0);
    std::vector<int64_t> q = p;
    if (!std::all_of(blocks.begin(), blocks.end(), [&](const Block& b) { return in_order(b, p); })) {
      // r: the blocks in x's order (by their first dim of x), each one's dims in Y order
      std::vector<std::pair<int64_t, const Block*>> by_x;  // (first dim of x, block)
      for (const Block& b : blocks) {
        auto [lo, hi] = std::minmax_element(b.ys.begin(), b.ys.end(), [&](int64_t a, int64_t c) {
          return p[size_t(a)] < p[size_t(c)];
        });
        if (p[size_t(*hi)] - p[size_t(*lo)] + 1 != int64_t(b.ys.size())) return false;  // not adjacent in x
        by_x.emplace_back(p[size_t(*lo)], &b);
      }
      std::sort(by_x.begin(), by_x.end());
      std::vector<int64_t> r, rinv(p.size());
      for (const auto& [first, b] : by_x)
        for (int64_t y : b->ys) r.push_back(p[size_t(y)]);
      for (size_t k = 0; k < r.size(); ++k) rinv[size_t(r[k])] = int64_t(k);
      for (size_t k = 0; k < p.size(); ++k) q[k] = rinv[size_t(p[k])];
      if (is_identity(q) || r == p) return false;  // nothing would move below the reshape
      Node* tr = rw.add_node("Transpose", {x}, {v}, "", t->opset);
      tr->attrs["perm"] = r;
      const std::vector<int64_t> xd = x->type.static_dims();
      Shape rs;
      for (int64_t a : r) rs.push_back(Dim(xd[size_t(a)]));
      tr->output(0)->type.shape = rs;
      x = tr->output(0);
    }
    // x's dims in order, block by block: each block's Z dims at the place of its first dim of x
    std::vector<int64_t> order(blocks.size());
    std::iota(order.begin(), order.end(), size_t(0));
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t c) {
      return q[size_t(blocks[size_t(a)].ys[0])] < q[size_t(blocks[size_t(c)].ys[0])];
    });
    std::vector<int64_t> shape, start(blocks.size());
    for (int64_t b : order) {
      start[size_t(b)] = int64_t(shape.size());
      for (int64_t d : blocks[size_t(b)].zdims) shape.push_back(d);
    }
    std::vector<int64_t> pz;
    for (size_t b = 0; b < blocks.size(); ++b)
      for (size_t k = 0; k < blocks[b].zdims.size(); ++k) pz.push_back(start[b] + int64_t(k));
    Value* sv = rw.add_constant(z->name() + "__shape", Tensor::from<int64_t>({int64_t(shape.size())}, shape));
    Node* reshape = rw.add_node("Reshape", {x, sv}, {z}, "", std::max(n.opset, 5));
    transpose_after(rw, n, *reshape, pz, {t});
    return true;
  }

  // Slice(Transpose(x, p), starts, ends, axes a, steps) -> Transpose(Slice(x, starts, ends, p[a], steps), p): dim
  // k of Transpose(x, p) is dim p[k] of x. Like Concat, a Transpose read only by Slices (a channel split into
  // halves) moves below each of them and goes with the last.
  static bool through_slice(rewrite::Rewriter& rw, Node& n) {
    Graph& g = rw.graph();
    Value* v = n.input(0);
    Node* t = v ? rewrite::producer_op(v, "Transpose") : nullptr;
    const int rank = rewrite::rank_of(v);
    if (!t || n.opset < 10 || n.num_inputs() < 3 || rank < 1 || g.is_graph_output(v)) return false;
    for (const Use& u : v->uses())
      if (!is_op(u.node, "Slice") || u.index != 0) return false;
    auto perm = rewrite::transpose_perm(*t);
    if (!perm || int(perm->size()) != rank) return false;
    std::vector<int64_t> axes;
    if (n.num_inputs() > 3 && n.input(3)) {
      const Tensor* a = rewrite::constant_of(g, n.input(3));
      if (!a || a->rank() != 1) return false;
      for (int64_t i = 0; i < a->numel(); ++i) axes.push_back(a->get_int(i));
    } else {
      const Tensor* st = rewrite::constant_of(g, n.input(1));
      if (!st || st->rank() != 1) return false;
      axes.resize(size_t(st->numel()));
      std::iota(axes.begin(), axes.end(), int64_t(0));
    }
    for (int64_t& a : axes) {
      if (a < 0) a += rank;
      if (a < 0 || a >= rank) return false;
      a = (*perm)[size_t(a)];
    }
    Value* av = rw.add_constant(n.output(0)->name() + "__axes", Tensor::from<int64_t>({int64_t(axes.size())}, axes));
    std::vector<Value*> ins{t->input(0), n.input(1), n.input(2), av};
    if (n.num_inputs() > 4) ins.push_back(n.input(4));
    Node* slice = rw.add_node("Slice", ins, {n.output(0)}, n.domain, n.opset);
    transpose_after(rw, n, *slice, *perm, {t});
    return true;
  }

  bool fold_transpose(rewrite::Rewriter& rw, Node& t) const {
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
        value = rewrite::evaluate(context(), g, t);
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
