// Constant operands of elementwise ops moved to where they can merge (Swin-T adds its shifted-window mask to a
// 5-D view of the scores, after a relative position bias; with both on the scores, attention fusion sees one
// additive mask):
//
//   Reshape(Op(Reshape(x, s1), c), s2) -> Op(x, c')   s2 gives back x's shape, Op in {Add, Sub, Mul, Div}:
//                                                     c' = c broadcast to s1's shape, read in x's shape
//   Add(Add(x, c1), c2) -> Add(x, c1 + c2)            c1 + c2 broadcast to the output's shape, summed
//
// Elementwise ops commute with a Reshape of all their operands, so the first is exact; the second rounds once
// where it rounded twice (|c1 + c2| <= |c1| + |c2|, -inf and NaN propagate alike). The folded constant is
// shrunk to 1 along every dim it does not vary on where x covers that dim (Swin's mask stays [nW, 1, N, N]
// for its heads). Conditions: fp32 constants, static shapes, the constant not widening x's shape in the first
// rule, the intermediate values read only inside the pattern, at most kMaxElements folded elements.
#include <cstring>
#include <span>

#include "gaf/passes.h"
#include "passes/rewrite_util.h"

namespace gaf {

namespace {

constexpr int64_t kMaxElements = int64_t(1) << 24;

// The values of fp32 `c` broadcast (numpy, right-aligned) to `dims`, row-major.
std::vector<float> broadcast_values(const Tensor& c, const std::vector<int64_t>& dims) {
  const int r = int(dims.size()), cr = c.rank();
  std::vector<int64_t> cstride(size_t(r), 0);
  for (int64_t i = cr - 1, s = 1; i >= 0; --i) {
    if (c.dim(int(i)) != 1) cstride[size_t(r - cr + i)] = s;
    s *= c.dim(int(i));
  }
  const float* src = c.data<float>();
  std::vector<float> out(size_t(numel_of(dims)));
  std::vector<int64_t> idx(size_t(r), 0);
  int64_t off = 0;
  for (float& o : out) {
    o = src[off];
    for (int d = r - 1; d >= 0; --d) {  // next index, row-major
      off += cstride[size_t(d)];
      if (++idx[size_t(d)] < dims[size_t(d)]) break;
      off -= cstride[size_t(d)] * dims[size_t(d)];
      idx[size_t(d)] = 0;
    }
  }
  return out;
}

// `v` (shape `dims`) with every dim d where keep[d] is false and v does not vary (bitwise) along d cut to 1.
Tensor shrink(std::vector<float> v, std::vector<int64_t> dims, const std::vector<bool>& keep) {
  for (size_t d = 0; d < dims.size(); ++d) {
    if (keep[d] || dims[d] == 1) continue;
    const std::span<const int64_t> all(dims);
    const int64_t outer = numel_of(all.first(d)), n = dims[d], inner = numel_of(all.subspan(d + 1));
    bool constant = true;
    for (int64_t o = 0; o < outer && constant; ++o)
      for (int64_t k = 1; k < n && constant; ++k)
        constant = std::memcmp(&v[size_t((o * n + k) * inner)], &v[size_t(o * n * inner)],
                               size_t(inner) * sizeof(float)) == 0;
    if (!constant) continue;
    std::vector<float> cut(size_t(outer * inner));
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(&cut[size_t(o * inner)], &v[size_t(o * n * inner)], size_t(inner) * sizeof(float));
    v = std::move(cut);
    dims[d] = 1;
  }
  return Tensor::from<float>(dims, v);
}

bool static_float(const Value* v) { return v && rewrite::is_float(v) && v->type.has_static_shape(); }

// The constant operand of binary `n` (fp32) and the index of the other operand; nullopt when not exactly one is.
std::optional<std::pair<const Tensor*, int>> constant_operand(const Graph& g, const Node& n) {
  if (n.num_inputs() != 2 || !n.input(0) || !n.input(1)) return std::nullopt;
  const Tensor* a = rewrite::constant_of(g, n.input(0));
  const Tensor* b = rewrite::constant_of(g, n.input(1));
  if (bool(a) == bool(b)) return std::nullopt;
  const Tensor* c = a ? a : b;
  if (c->dtype() != DType::Float) return std::nullopt;
  return std::make_pair(c, a ? 1 : 0);
}

class ConstantOperandFold final : public rewrite::RulePass {
 public:
  std::string_view name() const override { return "constant-operand-fold"; }

 private:
  bool rule(rewrite::Rewriter& rw, Node& n) override {
    if (rewrite::is_op(&n, "Reshape")) return reshape_sandwich(rw, n);
    if (rewrite::is_op(&n, "Add")) return add_chain(rw, n);
    return false;
  }

  // Reshape(Op(Reshape(x, s1), c), s2) -> Op(x, c')
  static bool reshape_sandwich(rewrite::Rewriter& rw, Node& r2) {
    Graph& g = rw.graph();
    Node* op = r2.input(0) ? r2.input(0)->producer() : nullptr;
    if (!op || !op->domain.empty() ||
        (op->op_type != "Add" && op->op_type != "Sub" && op->op_type != "Mul" && op->op_type != "Div"))
      return false;
    auto c = constant_operand(g, *op);
    if (!c || rewrite::sole_user(g, op->output(0)) != &r2) return false;
    Node* r1 = rewrite::producer_op(op->input(c->second), "Reshape");
    if (!r1 || rewrite::sole_user(g, r1->output(0)) != op) return false;
    Value* x = r1->input(0);
    if (!static_float(x) || !static_float(r2.output(0)) || !static_float(op->output(0)) ||
        !static_float(r1->output(0)))
      return false;
    const std::vector<int64_t> xd = x->type.static_dims(), s1 = r1->output(0)->type.static_dims();
    if (r2.output(0)->type.static_dims() != xd || op->output(0)->type.static_dims() != s1) return false;
    if (numel_of(s1) > kMaxElements || !rw.can_replace(r2.output(0), x)) return false;
    Tensor folded = shrink(broadcast_values(*c->first, s1), xd, std::vector<bool>(xd.size(), false));
    Value* cv = rw.add_constant(op->output(0)->name() + "_folded", std::move(folded));
    std::vector<Value*> ins = c->second == 0 ? std::vector<Value*>{x, cv} : std::vector<Value*>{cv, x};
    Node* m = rw.add_node(op->op_type, ins, {r2.output(0)}, "", op->opset);
    rw.replace(r2.output(0), m->output(0));
    rw.erase_unused({&r2, op, r1});
    return true;
  }

  // Add(Add(x, c1), c2) -> Add(x, c1 + c2)
  static bool add_chain(rewrite::Rewriter& rw, Node& outer) {
    Graph& g = rw.graph();
    auto c2 = constant_operand(g, outer);
    if (!c2) return false;
    Node* inner = rewrite::producer_op(outer.input(c2->second), "Add");
    if (!inner || rewrite::sole_user(g, inner->output(0)) != &outer) return false;
    auto c1 = constant_operand(g, *inner);
    if (!c1) return false;
    Value* x = inner->input(c1->second);
    if (!static_float(x) || !static_float(outer.output(0))) return false;
    const std::vector<int64_t> od = outer.output(0)->type.static_dims(), xd = x->type.static_dims();
    if (numel_of(od) > kMaxElements || xd.size() > od.size()) return false;
    std::vector<float> sum = broadcast_values(*c1->first, od);
    const std::vector<float> b = broadcast_values(*c2->first, od);
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += b[i];
    // A dim of the output that x does not cover must stay in the constant: it is what widens the result.
    std::vector<bool> keep(od.size(), true);
    for (size_t i = 0; i < xd.size(); ++i) keep[od.size() - xd.size() + i] = xd[i] != od[od.size() - xd.size() + i];
    Value* cv = rw.add_constant(outer.output(0)->name() + "_folded", shrink(std::move(sum), od, keep));
    Node* m = rw.add_node("Add", {x, cv}, {outer.output(0)}, "", outer.opset);
    rw.replace(outer.output(0), m->output(0));
    rw.erase_unused({&outer, inner});
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_constant_operand_fold() { return std::make_unique<ConstantOperandFold>(); }

}  // namespace gaf
