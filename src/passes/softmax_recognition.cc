// Softmax written by hand:
//
//   e = Exp(x - ReduceMax(x, axes=[a], keepdims))
//   y = e / ReduceSum(e, axes=[a], keepdims)          -> Softmax(x, axis=a)
//
// Anchored on the Exp. Both reductions are over the same single axis; before opset 13 Softmax flattens from
// its axis on, which is the same only for the last axis, so then a must be the last. The max-subtracted form
// only: Exp(x) / ReduceSum(Exp(x)) overflows where Softmax does not, so rewriting it would change results.
// Every intermediate is read only inside the pattern (e by the sum and the division).
#include "gaf/passes.h"
#include "passes/rewrite_util.h"

namespace gaf {

namespace {

using rewrite::is_op;
using rewrite::sole_user;

// The single axis `reduce` reduces over `x` with keepdims.
std::optional<int64_t> single_axis(const Graph& g, const Node& reduce, const Value* x) {
  auto axes = rewrite::reduce_axes(g, reduce, rewrite::rank_of(x));
  if (!axes || axes->size() != 1 || !rewrite::keeps_dims(reduce)) return std::nullopt;
  return axes->front();
}

class SoftmaxRecognition final : public rewrite::RulePass {
 public:
  std::string_view name() const override { return "softmax-recognition"; }

 private:
  // Exp(x - ReduceMax(x)) / ReduceSum(Exp(x - ReduceMax(x))) -> Softmax(x)
  bool rule(rewrite::Rewriter& rw, Node& exp) override {
    Graph& g = rw.graph();
    if (!is_op(&exp, "Exp")) return false;
    Node* sub = rewrite::producer_op(exp.input(0), "Sub");
    if (!sub || sole_user(g, exp.input(0)) != &exp) return false;
    Value* x = sub->input(0);
    Node* max = rewrite::producer_op(sub->input(1), "ReduceMax");
    if (!max || max->input(0) != x || sole_user(g, sub->input(1)) != sub || !is_floating(x->type.dtype))
      return false;
    auto axis = single_axis(g, *max, x);
    Value* e = exp.output(0);
    Node* sum = nullptr;
    for (const Use& u : e->uses())
      if (is_op(u.node, "ReduceSum") && u.index == 0) sum = u.node;
    if (!axis || !sum || single_axis(g, *sum, x) != axis) return false;
    Node* div = sole_user(g, sum->output(0));
    if (!is_op(div, "Div") || div->input(0) != e || div->input(1) != sum->output(0)) return false;
    if (!rewrite::used_only_by(g, e, {sum, div})) return false;
    if (exp.opset < 13 && *axis != rewrite::rank_of(x) - 1) return false;

    Node* softmax = rw.add_node("Softmax", {x}, {div->output(0)}, "", exp.opset);
    softmax->attrs["axis"] = *axis;
    rw.replace(div->output(0), softmax->output(0));
    rw.erase_unused({div, sum, &exp, sub, max});
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_softmax_recognition() { return std::make_unique<SoftmaxRecognition>(); }

}  // namespace gaf
