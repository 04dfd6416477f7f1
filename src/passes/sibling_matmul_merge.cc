// Sibling MatMul merge (opt level 3): MatMuls that read the same input with constant 2-D weights (the Q/K/V
// projections of attention) become one wider MatMul and a Split:
//
//   x -> MatMul(W1 [K,N1]) [-> Add b1]          x -> MatMul([W1|W2|W3] [K, N1+N2+N3]) [-> Add [b1|b2|b3]]
//   x -> MatMul(W2 [K,N2]) [-> Add b2]   ==>      -> Split(axis=-1, [N1, N2, N3]) -> y1, y2, y3
//   x -> MatMul(W3 [K,N3]) [-> Add b3]
//
// One kernel streams x once instead of three times and fills the machine better. The bias Adds merge too when
// every sibling has one: its only reader, adding a constant [N_i] (or [1, .., N_i] not raising the rank). The
// weights are concatenated, so the result is bit-identical per output column. Siblings must agree on K and
// the element type; x is the first operand of each. Aggressive (weights are copied, the originals dropped
// when no longer read), hence level 3 only.
//
// When it pays, on the target's figures (x of static shape; an unknown one merges):
//   (n - 1) * launch + (n - 1) * bytes(x) / bandwidth  >  2 * bytes(y1..yn) / bandwidth
// x streams once instead of n times and n - 1 launches go, but the Split writes the products once more and
// reads them back. A single-token projection merges; a [512, 768] sequence into three 768-wide projections
// does not (measured on the attention-layer bench case: 7.67 ms merged against 7.52 ms apart).
#include <cstring>
#include <map>

#include "gaf/passes.h"
#include "passes/rewrite_util.h"

namespace gaf {

namespace {

using rewrite::is_op;

// Concatenates constants along their last axis (all of one dtype, equal leading dims).
Tensor concat_last(const std::vector<const Tensor*>& parts) {
  std::vector<int64_t> dims = parts[0]->dims();
  int64_t rows = parts[0]->numel() / dims.back(), total = 0;
  for (const Tensor* p : parts) total += p->dims().back();
  dims.back() = total;
  Tensor out(parts[0]->dtype(), dims, Allocator::weights());
  size_t es = dtype_size(out.dtype());
  auto* dst = static_cast<char*>(out.raw());
  int64_t offset = 0;
  for (const Tensor* p : parts) {
    int64_t n = p->dims().back();
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(dst + (r * total + offset) * es, static_cast<const char*>(p->raw()) + r * n * es, n * es);
    offset += n;
  }
  return out;
}

struct Sibling {
  Node* matmul;
  Node* add = nullptr;  // the bias Add, when it merges
};

class SiblingMatMulMerge final : public Pass {
 public:
  std::string_view name() const override { return "sibling-matmul-merge"; }
  bool run(Graph& g, PassContext& ctx) override {
    rewrite::Rewriter rw(g);
    std::map<const Value*, bool> done;
    const Target target = ctx.target ? *ctx.target : Target::cpu_host();
    int count = rw.run([&](Node& n) {
      if (!is_op(&n, "MatMul") || done[n.input(0)]) return false;
      done[n.input(0)] = true;
      return merge(rw, n.input(0), target);
    });
    if (count) ctx.count(name(), count);
    return count > 0;
  }

 private:
  // The constant weight of MatMul(x, W) when it is [K, N] of x's element type.
  static const Tensor* weight(const Graph& g, const Node& mm, const Value* x) {
    const Tensor* w = rewrite::constant_of(g, mm.input(1));
    if (!w || w->rank() != 2 || w->dtype() != x->type.dtype || !is_floating(w->dtype())) return nullptr;
    return w;
  }

  // The constant bias of Add(y, b) reading MatMul output y, when it is [.., N] with only 1s before N.
  static const Tensor* bias(const Graph& g, const Node& mm, int64_t n) {
    Value* y = mm.output(0);
    Node* add = rewrite::sole_user(g, y);
    if (!is_op(add, "Add")) return nullptr;
    const Tensor* b = rewrite::constant_of(g, rewrite::other_operand(add, y));
    if (!b || b->rank() < 1 || b->rank() > rewrite::rank_of(y) || b->dims().back() != n) return nullptr;
    if (b->dtype() != y->type.dtype || b->numel() != n) return nullptr;
    return b;
  }

  // The modeled benefit of merging `sibs` reading x (see the header); true when x's size is unknown.
  static bool pays(const Value* x, const std::vector<Sibling>& sibs, const Target& t) {
    const double n = double(sibs.size());
    auto bytes = [](const Value* v) {
      if (!v->type.has_static_shape()) return -1.0;
      double e = double(dtype_size(v->type.dtype));
      for (int64_t d : v->type.static_dims()) e *= double(d);
      return e;
    };
    double xb = bytes(x), yb = 0;
    for (const Sibling& s : sibs) yb += bytes(s.matmul->output(0));
    if (xb < 0 || yb < 0) return true;
    return (n - 1) * t.launch_overhead_s + (n - 1) * xb / t.dram_bandwidth > 2 * yb / t.dram_bandwidth;
  }

  static bool merge(rewrite::Rewriter& rw, Value* x, const Target& target) {
    Graph& g = rw.graph();
    if (!x || rewrite::rank_of(x) < 1) return false;
    std::vector<Sibling> sibs;
    std::vector<const Tensor*> weights;
    for (const Use& u : x->uses()) {
      const Tensor* w = u.index == 0 && is_op(u.node, "MatMul") ? weight(g, *u.node, x) : nullptr;
      if (!w || (!weights.empty() && w->dim(0) != weights[0]->dim(0))) continue;
      if (rewrite::rank_of(u.node->output(0)) < 1) continue;
      sibs.push_back({u.node});
      weights.push_back(w);
    }
    if (sibs.size() < 2 || !pays(x, sibs, target)) return false;

    std::vector<const Tensor*> biases;
    for (size_t i = 0; i < sibs.size(); ++i) {
      const Tensor* b = bias(g, *sibs[i].matmul, weights[i]->dim(1));
      if (b && (biases.empty() || b->rank() == biases[0]->rank())) biases.push_back(b);
    }
    bool with_bias = biases.size() == sibs.size();
    if (with_bias)
      for (Sibling& s : sibs) s.add = rewrite::sole_user(g, s.matmul->output(0));

    // MatMul(x, W1..Wn) [+ b1..bn] -> Split(MatMul(x, [W1|..|Wn]) [+ [b1|..|bn]], [N1..Nn])
    Node* first = sibs[0].matmul;
    std::vector<Value*> results;
    std::vector<int64_t> sizes;
    int64_t total = 0;
    for (size_t i = 0; i < sibs.size(); ++i) {
      results.push_back((with_bias ? sibs[i].add : sibs[i].matmul)->output(0));
      sizes.push_back(weights[i]->dim(1));
      total += sizes.back();
    }
    Shape wide_shape = first->output(0)->type.shape.value();  // x.shape[:-1] + [N1 + .. + Nn]
    wide_shape.back() = Dim(total);
    TensorType wide{first->output(0)->type.dtype, std::move(wide_shape)};
    Value* w = rw.add_constant(first->input(1)->name() + "__merged", concat_last(weights));
    Node* mm = rw.add_node("MatMul", {x, w}, {first->output(0)}, "", first->opset);
    Value* y = mm->output(0);
    y->type = wide;
    if (with_bias) {
      Value* b = rw.add_constant(results[0]->name() + "__merged_bias", concat_last(biases));
      y = rw.add_node("Add", {y, b}, {y}, "", sibs[0].add->opset)->output(0);
    }
    std::vector<Value*> split_inputs{y};
    if (first->opset >= 13)
      split_inputs.push_back(
          rw.add_constant(x->name() + "__split", Tensor::from<int64_t>({int64_t(sizes.size())}, sizes)));
    Node* split = rw.add_node("Split", split_inputs, {results.begin(), results.end()}, "", first->opset);
    split->attrs["axis"] = int64_t(-1);
    if (first->opset < 13) split->attrs["split"] = sizes;
    std::vector<Node*> pattern;
    std::vector<Value*> parts;  // the weights now merged
    for (const Sibling& s : sibs) parts.push_back(s.matmul->input(1));
    for (size_t i = 0; i < sibs.size(); ++i) {
      rw.replace(results[i], split->output(int(i)));
      pattern.push_back(sibs[i].matmul);
      if (sibs[i].add) pattern.push_back(sibs[i].add);
    }
    rw.erase_unused(pattern);
    for (Value* p : parts) rw.drop_if_unused(p);  // a decoder's Q, K and V weights not held beside their merge
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_sibling_matmul_merge() { return std::make_unique<SiblingMatMulMerge>(); }

}  // namespace gaf
