// Anchor groups (MatMul / Gemm / Conv + an elementwise epilogue) run as one oneDNN primitive with post-ops: the
// epilogue is applied to each output block while it is in cache, so the anchor's result never round-trips DRAM.
//
// The epilogue must be a chain from the anchor's output to the group's single output, each link one of:
//   Add(y, t) / Add(t, y)              -> binary add of t (bias, residual; numpy-broadcast)
//   Add/Sub/Mul/Div(y, scalar c)       -> linear
//   Relu, LeakyRelu, Clip(consts), HardSwish, Max/Min(y, scalar c) -> clip; Neg -> linear; Pow(y, c) -> pow
//   HardSigmoid                        -> linear then clip to [0, 1]
//   Sigmoid, Tanh, Abs, Exp, Sqrt, Log, Elu, Mish, Round, Softplus   -> the oneDNN eltwise of that name
//   Mul/Max/Min(y, t), Sub/Div(y, t)    -> binary with tensor t (y on the left for Sub and Div)
//   Mul(y, Sigmoid(y))                 -> swish
//   Div(y, sqrt2) -> Erf -> Add 1 -> Mul y -> Mul 0.5   (and gaf.Gelu / Gelu)   -> gelu_erf
// Anything else is left to the op-by-op fallback, with the reason.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "gaf/op_registry.h"
#include "runtime/kernels/dnnl/anchor_postops.h"
#include "runtime/kernels/dnnl/dnnl_ops.h"

namespace gaf::runtime {

namespace {

using dnnl_ops::PostOp;

std::optional<double> scalar_constant(const Value* v) {
  if (!v || !v->is_constant() || v->constant().numel() != 1) return std::nullopt;
  return v->constant().get_double(0);
}

bool near(double a, double b) { return std::abs(a - b) <= 1e-6 * std::max(1.0, std::abs(b)); }

// The single consumer of v inside the body, or null.
const Node* only_use(const Value* v) { return v->uses().size() == 1 ? v->uses()[0].node : nullptr; }

// The operand of binary node n that is not v (null when both are v).
const Value* other(const Node* n, const Value* v) {
  if (n->num_inputs() != 2) return nullptr;
  if (n->input(0) == v && n->input(1) != v) return n->input(1);
  if (n->input(1) == v && n->input(0) != v) return n->input(0);
  return nullptr;
}

// 0.5 * y * (1 + erf(y / sqrt2)) starting at y; returns the value it produces.
const Value* match_gelu(const Value* y) {
  const Node* div = nullptr;
  const Node* mul_y = nullptr;
  for (const Use& u : y->uses()) {
    const Node* n = u.node;
    if (n->op_type == "Div" && n->input(0) == y && scalar_constant(n->input(1)) &&
        near(*scalar_constant(n->input(1)), std::sqrt(2.0)))
      div = n;
    else if (n->op_type == "Mul" && n->input(0) != n->input(1)) mul_y = n;
  }
  if (!div || !mul_y || y->uses().size() != 2) return nullptr;
  const Node* erf = only_use(div->output(0));
  if (!erf || erf->op_type != "Erf") return nullptr;
  const Node* add = only_use(erf->output(0));
  if (!add || add->op_type != "Add") return nullptr;
  auto one = scalar_constant(other(add, erf->output(0)));
  if (!one || *one != 1.0) return nullptr;
  if (only_use(add->output(0)) != mul_y || other(mul_y, y) != add->output(0)) return nullptr;
  const Node* half = only_use(mul_y->output(0));
  if (!half || half->op_type != "Mul") return nullptr;
  auto h = scalar_constant(other(half, mul_y->output(0)));
  if (!h || *h != 0.5) return nullptr;
  return half->output(0);
}

class AnchorPostOpKernel final : public Kernel {
 public:
  struct Source {
    int fused_input = -1;            // index into the fused node's inputs
    const Tensor* constant = nullptr;  // or a body constant
  };
  // `graph` owns `anchor`: a copy of the body's anchor whose weight inputs are constants again, so oneDNN
  // reorders the weights once at compile time.
  AnchorPostOpKernel(std::shared_ptr<Graph> graph, const Node& anchor, std::vector<PostOp> ops,
                     std::vector<Source> sources)
      : graph_(std::move(graph)), anchor_(anchor), sources_(std::move(sources)),
        inner_(dnnl_ops::make_anchor_kernel(anchor, std::move(ops))) {}

  void run(KernelContext& ctx) override {
    // The inner context's vectors are members, reused by every run (a kernel runs one call at a time, like the
    // shape cache of the oneDNN kernel inside).
    ins_.clear();
    donatable_.clear();
    for (const Source& s : sources_) {
      ins_.push_back(s.fused_input >= 0 ? ctx.input(s.fused_input) : s.constant);
      // A fused input read by two operands (Conv(x) + x) is not given away.
      const bool once = std::count_if(sources_.begin(), sources_.end(),
                                      [&](const Source& o) { return o.fused_input == s.fused_input; }) == 1;
      donatable_.push_back(s.fused_input >= 0 && once && ctx.may_donate(s.fused_input));
    }
    outs_.assign(size_t(anchor_.num_outputs()), Tensor());
    KernelContext sub(anchor_, ins_, outs_, ctx.allocator(), &donatable_);
    inner_->run(sub);
    ctx.set_output(0, std::move(outs_[0]));
    outs_.clear();
  }

  // A weight of the fused node's the anchor keeps in a form of its own, read by nothing else of the group.
  bool keeps_own_copy(int i) const override {
    bool any = false;
    for (size_t j = 0; j < sources_.size(); ++j)
      if (sources_[j].fused_input == i) {
        if (!inner_->keeps_own_copy(int(j))) return false;
        any = true;
      }
    return any;
  }
  void release_constant(int i) override {
    if (!keeps_own_copy(i)) return;
    for (size_t j = 0; j < sources_.size(); ++j)
      if (sources_[j].fused_input == i) {
        inner_->release_constant(int(j));
        if (Value* w = anchor_.input(int(j))) w->drop_constant_data();  // the anchor's own graph held it too
      }
  }

 private:
  std::shared_ptr<Graph> graph_;
  const Node& anchor_;
  std::vector<Source> sources_;
  std::unique_ptr<Kernel> inner_;
  std::vector<const Tensor*> ins_;
  std::vector<bool> donatable_;
  std::vector<Tensor> outs_;
};

// Unary ONNX ops oneDNN has an eltwise post-op for.
std::optional<PostOp::Unary> unary_form(const std::string& op, const std::string& domain) {
  if (!domain.empty()) return std::nullopt;
  static const std::map<std::string, PostOp::Unary> forms = {
      {"Sigmoid", PostOp::Unary::Sigmoid}, {"Tanh", PostOp::Unary::Tanh},   {"Abs", PostOp::Unary::Abs},
      {"Exp", PostOp::Unary::Exp},         {"Sqrt", PostOp::Unary::Sqrt},   {"Log", PostOp::Unary::Log},
      {"Elu", PostOp::Unary::Elu},         {"Mish", PostOp::Unary::Mish},   {"Round", PostOp::Unary::Round},
      {"Softplus", PostOp::Unary::Softplus}};
  auto it = forms.find(op);
  return it == forms.end() ? std::nullopt : std::optional(it->second);
}

// Binary ONNX ops with a tensor operand oneDNN has a binary post-op for; Sub and Div only with the anchor's
// value on the left.
std::optional<PostOp::BinaryOp> binary_form(const std::string& op, bool anchor_first) {
  if (op == "Mul") return PostOp::BinaryOp::Mul;
  if (op == "Max") return PostOp::BinaryOp::Max;
  if (op == "Min") return PostOp::BinaryOp::Min;
  if (op == "Sub" && anchor_first) return PostOp::BinaryOp::Sub;
  if (op == "Div" && anchor_first) return PostOp::BinaryOp::Div;
  return std::nullopt;
}

}  // namespace

std::optional<KernelFactory> anchor_postop_kernel(const Node& fused, std::string* why) {
  const Graph& body = *fused.body;
  auto nodes = body.nodes();
  const Node* anchor = nullptr;
  for (const Node* n : nodes)
    if (op_kind(*n) == OpKind::Anchor) anchor = n;
  if (!anchor) {
    *why = "no anchor";
    return std::nullopt;
  }
  if (!dnnl_ops::supports_post_ops(*anchor)) {
    *why = fmt::format("{} takes no oneDNN post-ops", anchor->describe());
    return std::nullopt;
  }
  if (body.outputs().size() != 1) {
    *why = "anchor groups with several outputs are not supported";
    return std::nullopt;
  }
  auto input_index = [&](const Value* v) {
    const auto& ins = body.inputs();
    auto it = std::find(ins.begin(), ins.end(), v);
    return it == ins.end() ? -1 : int(it - ins.begin());
  };
  std::vector<AnchorPostOpKernel::Source> sources;
  auto source_of = [&](const Value* v) -> std::optional<AnchorPostOpKernel::Source> {
    if (!v) return AnchorPostOpKernel::Source{};
    if (v->is_constant()) return AnchorPostOpKernel::Source{-1, &v->constant()};
    int i = input_index(v);
    if (i < 0) return std::nullopt;
    return AnchorPostOpKernel::Source{i, nullptr};
  };
  for (int i = 0; i < anchor->num_inputs(); ++i) {
    auto s = source_of(anchor->input(i));
    if (!s) {
      *why = fmt::format("input {} of {} is computed inside the group", i, anchor->describe());
      return std::nullopt;
    }
    sources.push_back(*s);
  }
  // Addends come after the anchor's full input list (Conv and Gemm: 3, the bias optional; MatMul: 2).
  const size_t fixed = anchor->op_type == "MatMul" ? 2 : 3;
  while (sources.size() < fixed) sources.push_back(AnchorPostOpKernel::Source{});
  std::vector<PostOp> ops;
  const Value* cur = anchor->output(0);
  size_t consumed = 1;
  while (cur != body.outputs()[0]) {
    if (const Value* g = match_gelu(cur)) {
      ops.push_back(PostOp::gelu_erf());
      cur = g;
      consumed += 5;
      continue;
    }
    const Node* n = only_use(cur);
    if (!n) {
      // Mul(y, Sigmoid(y)): swish.
      if (cur->uses().size() == 2) {
        const Node* sig = nullptr;
        const Node* mul = nullptr;
        for (const Use& u : cur->uses()) {
          if (u.node->op_type == "Sigmoid") sig = u.node;
          if (u.node->op_type == "Mul") mul = u.node;
        }
        if (sig && mul && other(mul, cur) == sig->output(0)) {
          ops.push_back(PostOp::swish());
          cur = mul->output(0);
          consumed += 2;
          continue;
        }
      }
      *why = fmt::format("'{}' feeds several epilogue ops", cur->name());
      return std::nullopt;
    }
    const std::string& op = n->domain.empty() || n->domain == "gaf" ? n->op_type : "";
    const Value* o = other(n, cur);
    auto c = scalar_constant(o);
    bool first = n->num_inputs() >= 1 && n->input(0) == cur;
    if (op == "Add" && c) ops.push_back(PostOp::linear(1.f, float(*c)));
    else if (op == "Add" && o) {
      auto s = source_of(o);
      if (!s) {
        *why = fmt::format("the addend of {} is computed inside the group", n->describe());
        return std::nullopt;
      }
      ops.push_back(PostOp::add(int(sources.size())));
      sources.push_back(*s);
    } else if (op == "Sub" && c && first) ops.push_back(PostOp::linear(1.f, float(-*c)));
    else if (op == "Sub" && c) ops.push_back(PostOp::linear(-1.f, float(*c)));
    else if (op == "Mul" && c) ops.push_back(PostOp::linear(float(*c), 0.f));
    else if (op == "Div" && c && first) ops.push_back(PostOp::linear(float(1.0 / *c), 0.f));
    else if (op == "Relu") ops.push_back(PostOp::relu());
    else if (op == "LeakyRelu") ops.push_back(PostOp::relu(n->attr_float("alpha", 0.01f)));
    else if (op == "HardSwish") ops.push_back(PostOp::hard_swish());
    else if (op == "HardSigmoid" && n->domain.empty()) {  // max(0, min(1, alpha y + beta))
      ops.push_back(PostOp::linear(n->attr_float("alpha", 0.2f), n->attr_float("beta", 0.5f)));
      ops.push_back(PostOp::clip(0.f, 1.f));
    }
    else if (op == "Silu" && n->domain == "gaf") ops.push_back(PostOp::swish());
    else if (op == "Gelu" && n->attr_string("approximate", "none") == "none") ops.push_back(PostOp::gelu_erf());
    else if (op == "Gelu") ops.push_back(PostOp::gelu_tanh());
    else if (auto u = unary_form(op, n->domain)) ops.push_back(PostOp::unary(*u, op == "Elu" ? n->attr_float("alpha", 1.f) : 0.f));
    else if (op == "Neg") ops.push_back(PostOp::linear(-1.f, 0.f));
    else if (op == "Pow" && c && first) ops.push_back(PostOp::unary(PostOp::Unary::Pow, 1.f, float(*c)));
    else if (op == "Max" && c && n->num_inputs() == 2) ops.push_back(PostOp::clip(float(*c), 3.402823466e38f));
    else if (op == "Min" && c && n->num_inputs() == 2) ops.push_back(PostOp::clip(-3.402823466e38f, float(*c)));
    else if (auto bop = binary_form(op, first); bop && o && !c && n->num_inputs() == 2) {
      // x (op) t with t a tensor of the group's inputs: a binary post-op (x on the left for Sub and Div).
      auto s = source_of(o);
      if (!s) {
        *why = fmt::format("the operand of {} is computed inside the group", n->describe());
        return std::nullopt;
      }
      ops.push_back(PostOp::binary_op(*bop, int(sources.size())));
      sources.push_back(*s);
    }
    else if (op == "Clip") {
      float lo = -3.402823466e38f, hi = 3.402823466e38f;
      if (n->opset < 11) {
        lo = n->attr_float("min", lo);
        hi = n->attr_float("max", hi);
      } else {
        auto mn = scalar_constant(n->input(1));
        auto mx = scalar_constant(n->input(2));
        if ((n->input(1) && !mn) || (n->input(2) && !mx)) {
          *why = fmt::format("{} has non-constant bounds", n->describe());
          return std::nullopt;
        }
        if (mn) lo = float(*mn);
        if (mx) hi = float(*mx);
      }
      // Whether an NCHW Conv should take a Clip epilogue at all is the planner's call (Target::conv_clip_epilogue:
      // cpu-host says no, measured); a group that has one runs it as a post-op.
      ops.push_back(PostOp::clip(lo, hi));
    } else {
      *why = fmt::format("{} has no oneDNN post-op form", n->describe());
      return std::nullopt;
    }
    cur = n->output(0);
    ++consumed;
  }
  if (consumed != nodes.size()) {
    *why = "the epilogue is not a single chain from the anchor";
    return std::nullopt;
  }
  if (!cur->type.shape || !anchor->output(0)->type.shape || !(*cur->type.shape == *anchor->output(0)->type.shape)) {
    *why = "the epilogue changes the anchor's output shape";
    return std::nullopt;
  }
  if (!dnnl_ops::normalize_post_ops(ops, why)) return std::nullopt;
  if (anchor->op_type == "Gemm" && anchor->attr_float("alpha", 1.f) != 1.f) {
    // The Gemm kernel puts its alpha in front as a Linear (then beta C as an Add): that one must not repeat.
    std::vector<PostOp> probe = {PostOp::linear(anchor->attr_float("alpha", 1.f), 0.f), PostOp::add(-1)};
    probe.insert(probe.end(), ops.begin(), ops.end());
    if (!dnnl_ops::normalize_post_ops(probe, why)) return std::nullopt;
  }
  const Node* a = anchor;
  const Node* outer = &fused;
  return KernelFactory([a, outer, ops, sources](const Node&) -> std::unique_ptr<Kernel> {
    // The anchor alone in a graph of its own, inputs that are weights of the model bound as constants.
    auto g = std::make_shared<Graph>();
    std::vector<Value*> ins;
    for (int i = 0; i < a->num_inputs(); ++i) {
      const Value* v = a->input(i);
      if (!v) {
        ins.push_back(nullptr);
        continue;
      }
      const AnchorPostOpKernel::Source& s = sources[size_t(i)];
      const Value* outer_v = s.fused_input >= 0 ? outer->input(s.fused_input) : nullptr;
      if (s.constant) ins.push_back(g->add_constant(v->name(), *s.constant));
      else if (outer_v && outer_v->is_constant()) ins.push_back(g->add_constant(v->name(), outer_v->constant()));
      else ins.push_back(g->add_input(v->name(), v->type));
      ins.back()->type = v->type;
    }
    std::vector<std::string> outs;
    for (const Value* o : a->outputs()) outs.push_back(o->name());
    Node* copy = g->add_node(a->op_type, ins, outs, a->name);
    copy->domain = a->domain;
    copy->opset = a->opset;
    copy->attrs = a->attrs;
    for (int k = 0; k < a->num_outputs(); ++k) copy->output(k)->type = a->output(k)->type;
    return std::make_unique<AnchorPostOpKernel>(g, *copy, ops, sources);
  });
}

}  // namespace gaf::runtime
