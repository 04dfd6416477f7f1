// Ops that return their input unchanged, dropped (exports are full of them once shapes are folded: Swin's
// window padding by 0, its x[:, :H, :W] crops of unpadded maps, dropouts of rate 0 traced in training mode):
//   Identity(x) -> x
//   Dropout(x) -> x            in inference (no training_mode, or a constant false), or at a constant rate 0
//                              (scale 1/(1-0), every element kept); only while its mask output is unread
//   Pad(x, 0...) -> x          every pad a constant 0 (any mode)
//   Slice(x) -> x              the same static shape out, every step a constant > 0 (so start 0, step 1)
//   Expand(x) / Tile(x) -> x   the same static shape out (a broadcast to its own shape, repeats all 1)
//   Concat(x) -> x             a single input
//   Cast(x, to) -> x           to x's own element type
// A graph output keeps its name: such a node stays.
#include <algorithm>

#include "gaf/passes.h"
#include "passes/rewrite_util.h"

namespace gaf {

namespace {

// Whether v is a constant whose every element satisfies pred (false when not constant).
template <typename Pred>
bool constant_all(const Graph& g, const Value* v, Pred pred) {
  const Tensor* t = v ? rewrite::constant_of(g, v) : nullptr;
  if (!t || !is_integer(t->dtype())) return false;
  std::vector<int64_t> xs = t->to_int_vector();
  return std::all_of(xs.begin(), xs.end(), pred);
}

bool same_static_type(const Value* x, const Value* y) {
  return x->type.dtype == y->type.dtype && x->type.has_static_shape() && y->type.has_static_shape() &&
         x->type.static_dims() == y->type.static_dims();
}

bool removable(const Node& n, const Graph& g) {
  if (!n.domain.empty() || !n.input(0) || n.num_outputs() < 1) return false;
  const std::string& op = n.op_type;
  const Value* x = n.input(0);
  const Value* y = n.output(0);
  if (op == "Identity") return true;
  if (op == "Dropout") {
    if (n.num_outputs() > 1 && (!n.output(1)->uses().empty() || g.is_graph_output(n.output(1)))) return false;
    const Value* training = n.input(2);
    if (!training || (training->is_constant() && training->constant().get_int(0) == 0)) return true;
    const Tensor* ratio = n.input(1) ? rewrite::constant_of(g, n.input(1)) : nullptr;
    return ratio && ratio->numel() == 1 && is_floating(ratio->dtype()) && ratio->get_double(0) == 0.0;
  }
  if (n.num_outputs() != 1) return false;
  if (op == "Pad") {
    return constant_all(g, n.input(1), [](int64_t p) { return p == 0; }) && same_static_type(x, y);
  }
  if (op == "Slice") {
    const Value* steps = n.input(4);
    return (!steps || constant_all(g, steps, [](int64_t s) { return s > 0; })) && same_static_type(x, y);
  }
  if (op == "Expand" || op == "Tile") return same_static_type(x, y);
  if (op == "Concat") return n.num_inputs() == 1 && x->type.dtype == y->type.dtype;
  if (op == "Cast") return x->type.dtype != DType::Undefined && n.attr_int("to", 0) == int64_t(x->type.dtype);
  return false;
}

class IdentityElimination final : public Pass {
 public:
  std::string_view name() const override { return "identity-elimination"; }
  bool run(Graph& g, PassContext& ctx) override {
    int count = 0;
    for (Node* n : g.nodes()) {
      if (!removable(*n, g)) continue;
      Value* out = n->output(0);
      // A graph output keeps its name: only drop the node when the output is internal.
      if (g.is_graph_output(out)) continue;
      g.replace_all_uses(out, n->input(0));
      g.remove_node(n);
      ++count;
    }
    if (count) ctx.count(name(), count);
    return count > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> make_identity_elimination() { return std::make_unique<IdentityElimination>(); }

}  // namespace gaf
