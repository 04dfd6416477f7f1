// A squeeze-excitation block becomes one op, where it was five kernels that each move almost no data (EfficientNet,
// MobileNetV3, RegNetY: a global average, two 1x1 convolutions on one pixel, the gate, a broadcast Mul):
//
//   m = GlobalAveragePool(x) | ReduceMean<the spatial axes, keepdims>(x)
//   g = gate(Conv1x1(act(Conv1x1(m, W1, B1)), W2, B2))          gate: Sigmoid or HardSigmoid
//   y = Mul(x, g)
//     ==>   y = gaf.SqueezeExcitation<layout, min, max, activation, gate, alpha, beta>(x, W1, B1, W2, B2)
//
// act is Relu, Clip with constant bounds, gaf.Silu, HardSwish or nothing. Where g is not read by exactly one
// Mul(x, g) (channel-scale-fold, which runs first, moved the scale into the projection's weights), the op
// computes the gates alone: g = gaf.SqueezeExcitation<..., gate_only = 1>(x, ...).
// mean_p(x)[c] is the same sum whichever way the spatial axes are reduced, and the convolutions are 1x1 on a 1x1
// map: matrix-vector products, which the runtime kernel (squeeze_excitation.h) computes in place.
// Conditions: both convolutions NCHW Conv or channels-last gaf.Conv (the same for both), group 1, every kernel,
// stride and dilation 1, no padding; W1 [R, C, 1...] and W2 [C, R, 1...] constant fp32, biases constant or absent;
// x fp32 of known rank >= 3; every intermediate read only by the next op of the pattern and not a graph output.
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gaf/passes.h"
#include "passes/rewrite_util.h"

namespace gaf {

namespace {

using rewrite::constant_of;
using rewrite::sole_user;

// A constant fp32 tensor [rows, cols, 1...] of the given rank.
const Tensor* weights_of(const Graph& g, const Value* v, int rank) {
  const Tensor* t = v ? constant_of(g, v) : nullptr;
  if (!t || t->dtype() != DType::Float || t->rank() != rank) return nullptr;
  for (int a = 2; a < rank; ++a)
    if (t->dim(a) != 1) return nullptr;
  return t;
}

// A 1x1 convolution on x's rank in the given layout with plain attributes, reading `in`; its weights [out, in]
// when constant, else null.
const Tensor* pointwise(const Graph& g, const Node* n, const Value* in, bool nhwc, int rank) {
  if (!n || n->op_type != "Conv" || n->input(0) != in || !n->input(1)) return nullptr;
  if (nhwc ? n->domain != rewrite::kGafDomain || n->attr_string("layout", "") != "NHWC" || n->has_attr("algorithm")
           : !n->domain.empty())
    return nullptr;
  if (n->attr_int("group", 1) != 1 || n->attr_string("auto_pad", "NOTSET") != "NOTSET") return nullptr;
  for (const char* a : {"strides", "dilations"})
    if (!rewrite::all_equal(n->attr_ints(a, {}), 1)) return nullptr;
  if (!rewrite::all_equal(n->attr_ints("pads", {}), 0)) return nullptr;
  const Tensor* w = weights_of(g, n->input(1), rank);
  if (!w) return nullptr;
  if (n->input(2)) {
    const Tensor* b = constant_of(g, n->input(2));
    if (!b || b->dtype() != DType::Float || b->numel() != w->dim(0)) return nullptr;
  }
  return w;
}

// m is the per-channel mean of x over its spatial axes in this layout, keeping them as 1s.
bool spatial_mean(const Graph& g, const Node* m, bool nhwc, int rank) {
  if (rewrite::is_op(m, "GlobalAveragePool")) return !nhwc;
  if (!rewrite::is_op(m, "ReduceMean") || !rewrite::keeps_dims(*m)) return false;
  const auto axes = rewrite::reduce_axes(g, *m, rank);
  if (!axes || int(axes->size()) != rank - 2) return false;
  for (int a = 0; a < rank - 2; ++a)
    if ((*axes)[size_t(a)] != a + (nhwc ? 1 : 2)) return false;
  return true;
}

class SqueezeExcitationFusion final : public rewrite::RulePass {
 public:
  std::string_view name() const override { return "squeeze-excitation-fusion"; }

 private:
  bool rule(rewrite::Rewriter& rw, Node& gate) override {
    Graph& g = rw.graph();
    if (!rewrite::is_op(&gate, "Sigmoid") && !rewrite::is_op(&gate, "HardSigmoid")) return false;
    // Backwards from the gate: the excitation convolution, the activation, the squeeze convolution, the mean.
    Node* conv2 = gate.input(0) ? gate.input(0)->producer() : nullptr;
    if (!conv2 || conv2->op_type != "Conv" || !conv2->input(0)) return false;
    const bool nhwc = !conv2->domain.empty();
    Value* h = conv2->input(0);
    Node* act = h->producer();
    std::optional<rewrite::Stage> stage = rewrite::stage_of(g, act);
    Value* s = h;
    if (stage) {
      s = act->input(0);
    } else {
      act = nullptr;
      stage = rewrite::Stage{};
    }
    Node* conv1 = s ? s->producer() : nullptr;
    Value* m = conv1 ? conv1->input(0) : nullptr;
    Node* mean = m ? m->producer() : nullptr;
    Value* x = mean ? mean->input(0) : nullptr;
    const int rank = rewrite::rank_of(x);
    if (!rewrite::is_float(x) || rank < 3 || !spatial_mean(g, mean, nhwc, rank)) return false;
    const Tensor* w1 = pointwise(g, conv1, m, nhwc, rank);
    const Tensor* w2 = pointwise(g, conv2, h, nhwc, rank);
    if (!w1 || !w2 || w2->dim(0) != w1->dim(1) || w2->dim(1) != w1->dim(0)) return false;
    const int64_t c = w1->dim(1);
    const Dim& xc = (*x->type.shape)[size_t(nhwc ? rank - 1 : 1)];
    if (xc.is_static() && xc.value() != c) return false;
    // The intermediates: each read only by the next op.
    const std::vector<std::pair<const Value*, const Node*>> chain = {
        {m, conv1}, {s, act ? act : conv2}, {h, conv2}, {conv2->output(0), &gate}};
    for (const auto& [v, next] : chain)
      if (sole_user(g, v) != next) return false;

    // Forwards: the Mul that scales x by the gates joins, when it is the gates' only reader.
    Value* gates = gate.output(0);
    Node* mul = sole_user(g, gates);
    const bool scales_x = rewrite::is_op(mul, "Mul") && rewrite::other_operand(mul, gates) == x &&
                          rewrite::same_shape(mul->output(0), x);
    Value* result = scales_x ? mul->output(0) : gates;

    std::vector<Value*> ins = {x, conv1->input(1), conv1->input(2), conv2->input(1), conv2->input(2)};
    while (!ins.back()) ins.pop_back();  // an absent B2 (and then B1) is left off
    Node* se = rw.add_node("SqueezeExcitation", ins, {result}, rewrite::kGafDomain, 1);
    se->attrs["layout"] = std::string(nhwc ? "NHWC" : "NCHW");
    if (std::isfinite(stage->lo)) se->attrs["min"] = stage->lo;
    if (std::isfinite(stage->hi)) se->attrs["max"] = stage->hi;
    if (!stage->act.empty()) se->attrs["activation"] = stage->act;
    se->attrs["gate"] = gate.op_type;
    if (gate.op_type == "HardSigmoid") {
      se->attrs["alpha"] = gate.attr_float("alpha", 0.2f);
      se->attrs["beta"] = gate.attr_float("beta", 0.5f);
    }
    if (!scales_x) se->attrs["gate_only"] = int64_t(1);
    rw.replace(result, se->output(0));
    std::vector<Node*> pattern = {&gate, conv2, conv1, mean};
    if (act) pattern.push_back(act);
    if (scales_x) pattern.insert(pattern.begin(), mul);
    rw.erase_unused(pattern);
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_squeeze_excitation_fusion() { return std::make_unique<SqueezeExcitationFusion>(); }

}  // namespace gaf
