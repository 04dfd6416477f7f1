// Legality of merging two groups into one kernel. No side effects and no cost model: every "no" carries a reason
// code and a sentence saying which node and why. The checks, cheapest first:
//
//   switches/rules -> op traits (opaque, stateful) -> anchors -> positions (epilogue-only anchors, reductions
//   in row-compatible chains) -> dtypes/shapes -> size limits -> on-chip working set -> cycle (a path that
//   leaves the merged set).
#include "fusion/legality.h"

#include <algorithm>

#include "analysis/row_signature.h"

namespace gaf::fusion_detail {

namespace {

using D = FusionDecision;

bool is_sensitive_low_precision(const Node& n) {
  const OpInfo* info = find_op(n);
  if (!info || !(info->flags & kPrecisionSensitive)) return false;
  for (const Value* v : n.inputs())
    if (v && (v->type.dtype == DType::Float16 || v->type.dtype == DType::BFloat16)) return true;
  return false;
}

// Nodes of m reachable from `root` through edges inside m (root included).
std::set<const Node*> descendants_in(const Node* root, const std::set<const Node*>& m) {
  std::set<const Node*> seen{root};
  std::vector<const Node*> stack{root};
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    for (const Value* o : n->outputs())
      for (const Use& u : o->uses())
        if (m.count(u.node) && seen.insert(u.node).second) stack.push_back(u.node);
  }
  return seen;
}

// The element count of a shape key as a comparable number: symbolic dims as large distinct factors, the product
// taken modulo 2^64 (three symbols already exceed int64).
int64_t numel_key(const std::vector<int64_t>& k) {
  uint64_t n = 1;
  for (int64_t d : k) n *= d < 0 ? uint64_t(1000003) + uint64_t(-d) : uint64_t(d);
  return int64_t(n);
}

bool chain_from(const Pattern& p, size_t i, const Node& n, const std::set<const Node*>* scope,
                const Node* must_a, const Node* must_b, bool seen_edge) {
  if (!p.token_matches(i, n)) return false;
  if (scope && !scope->count(&n)) return false;
  if (i + 1 == p.tokens.size()) return seen_edge;
  for (const Value* o : n.outputs())
    for (const Use& u : o->uses())
      if (chain_from(p, i + 1, *u.node, scope, must_a, must_b, seen_edge || (&n == must_a && u.node == must_b)))
        return true;
  return false;
}

}  // namespace

bool edge_on_match(const Pattern& p, const Node& producer, const Node& consumer,
                   const std::set<const Node*>* scope) {
  if (p.tokens.size() < 2) return false;
  // Start from every node that can reach the producer within |tokens| steps: walk back from the producer.
  std::vector<const Node*> starts{&producer};
  std::vector<const Node*> frontier{&producer};
  for (size_t step = 1; step < p.tokens.size(); ++step) {
    std::vector<const Node*> next;
    for (const Node* n : frontier)
      for (const Value* v : n->inputs())
        if (v && v->producer()) next.push_back(v->producer());
    starts.insert(starts.end(), next.begin(), next.end());
    frontier = std::move(next);
  }
  std::sort(starts.begin(), starts.end());
  starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
  for (const Node* s : starts)
    if (chain_from(p, 0, *s, scope, &producer, &consumer, false)) return true;
  return false;
}

FusionDecision can_fuse_indexed(const Group& a, const Group& b, const GraphIndex& index, const FusionOptions& opts,
                                const Target& target) {
  const FusionRules& rules = opts.rules;
  const Graph& g = index.graph();
  if (!rules.enable_fusion) return D::no(Reason::FusionDisabled, "fusion is disabled by the rules file");
  if (opts.opt_level < 2) return D::no(Reason::FusionDisabled, fmt::format("opt level {} does not fuse", opts.opt_level));
  std::set<const Node*> m = members(a, b);
  const std::vector<const Node*> nodes = ordered(m, index);

  // Rules that name nodes or op types, and op traits.
  int anchors = 0;
  const Node* anchor = nullptr;
  std::vector<const Node*> reductions;
  for (const Node* n : nodes) {
    if (rules.skip_nodes.count(n->name))
      return D::no(Reason::RuleForbid, fmt::format("{} is in skip_nodes", n->describe()));
    if (rules.skip_op_types.count(n->op_type))
      return D::no(Reason::RuleForbid, fmt::format("op type {} is in skip_op_types", n->op_type));
    const OpInfo* info = find_op(*n);
    if (!info || info->kind == OpKind::Opaque)
      return D::no(Reason::OpaqueOp, fmt::format("{} is opaque to fusion", n->describe()));
    if (n->has_non_tensor_values())
      return D::no(Reason::OpaqueOp,
                   fmt::format("{} passes on a sequence or an optional: fused kernels compute tensors",
                               n->describe()));
    // The fused kernels fold Transpose, Reshape, Slice... into their indexing; a group with other data movement
    // (Concat, Gather, Pad) would run op by op, each op its own kernel: leave those ops alone instead.
    if (info->kind == OpKind::Injective && !(info->flags & kIndexable) && nodes.size() > 1)
      return D::no(Reason::OpaqueOp, fmt::format("{} moves data in a way fused kernels do not index: it runs as its "
                                                 "own kernel", n->describe()));
    // A fused Concat reads every operand at every element and selects one, except along the innermost axis,
    // where the kernel loops over each operand's channels in turn: with many operands and another axis its own
    // kernel, which copies each operand once, is cheaper.
    if (n->op_type == "Concat" && n->num_inputs() > kMaxFusedConcatOperands && nodes.size() > 1) {
      const auto& shape = n->output(0)->type.shape;
      const int rank = shape ? int(shape->size()) : -1;
      int64_t axis = n->attr_int("axis", 0);
      if (rank < 0 || (axis < 0 ? axis + rank : axis) != rank - 1)
        return D::no(Reason::OpaqueOp, fmt::format("{} concatenates {} operands along an outer axis, more than the "
                                                   "{} a fused kernel reads per element: it runs as its own kernel",
                                                   n->describe(), n->num_inputs(), kMaxFusedConcatOperands));
    }
    if (info->flags & (kStateful | kRandom))
      return D::no(Reason::StatefulOrRandom, fmt::format("{} is stateful or random", n->describe()));
    if (rules.precision_mode == PrecisionMode::Fp16Mixed && is_sensitive_low_precision(*n))
      return D::no(Reason::RuleForbid,
                   fmt::format("precision_mode fp16_mixed keeps precision-sensitive {} unfused", n->describe()));
    if (info->kind == OpKind::Anchor) {
      ++anchors;
      anchor = n;
    }
    if (info->kind == OpKind::Reduction) reductions.push_back(n);
  }
  if (anchors > 1) return D::no(Reason::MultipleAnchors, "a kernel holds at most one anchor (MatMul/Gemm/Conv/...)");
  // Data movement after a Concat (ShuffleNet's channel shuffle of a concatenation) makes the kernel read every
  // operand at a gathered index per element: measured 6% slower on ShuffleNetV2 than the Concat on its own.
  for (const Node* n : nodes)
    if (n->op_type == "Concat") {
      const std::set<const Node*> down = descendants_in(n, m);
      for (const Node* d : nodes)  // in graph order, so that the reason names the same node every time
        if (d != n && down.count(d) && op_kind(*d) == OpKind::Injective)
          return D::no(Reason::OpaqueOp, fmt::format("{} after {} would read the concatenated operands at a gathered "
                                                     "index: the Concat runs as its own kernel", d->describe(),
                                                     n->describe()));
    }

  // Positions. An anchor takes epilogues only: every other member must be downstream of it.
  if (anchor) {
    if (!reductions.empty())
      return D::no(Reason::ReductionPosition,
                   fmt::format("{} cannot share a kernel with anchor {}", reductions[0]->describe(), anchor->describe()));
    auto down = descendants_in(anchor, m);
    for (const Node* n : nodes) {
      if (down.count(n)) continue;
      return D::no(Reason::AnchorPosition, fmt::format("{} would run in front of anchor {}: anchors take epilogues only",
                                                       n->describe(), anchor->describe()));
    }
    for (const Node* n : nodes)
      if (n != anchor && op_kind(*n) > OpKind::Broadcast)
        return D::no(Reason::AnchorPosition,
                     fmt::format("{} is not an elementwise epilogue of {}", n->describe(), anchor->describe()));
    if (anchor->op_type == "Conv" && anchor->domain.empty() && !target.conv_clip_epilogue)
      for (const Node* n : nodes)
        if (n->op_type == "Clip" && n->domain.empty())
          return D::no(Reason::TargetUnsupported,
                       fmt::format("{} after {}: target {} runs a convolution with a clip epilogue slower than the "
                                   "two kernels", n->describe(), anchor->describe(), target.name));
  }
  // Reductions: other members elementwise/broadcast; several reductions only over the same trailing row.
  if (!reductions.empty()) {
    auto sig0 = analysis::row_signature(*reductions[0]);
    if (!sig0) return D::no(Reason::ShapeUnknown, fmt::format("reduced axes of {} are unknown", reductions[0]->describe()));
    for (const Node* r : reductions) {
      auto s = analysis::row_signature(*r);
      if (!s) return D::no(Reason::ShapeUnknown, fmt::format("reduced axes of {} are unknown", r->describe()));
      if (reductions.size() > 1 && (!(*s == *sig0) || !s->trailing))
        return D::no(Reason::ReductionPosition,
                     fmt::format("{} and {} do not reduce the same trailing row", reductions[0]->describe(), r->describe()));
    }
    for (const Node* n : nodes)
      if (op_kind(*n) == OpKind::Injective)
        return D::no(Reason::ReductionPosition,
                     fmt::format("{} (data movement) cannot share a kernel with reduction {}", n->describe(),
                                 reductions[0]->describe()));
  }

  // Types and shapes of everything the group computes.
  std::set<int64_t> sizes;
  for (const Node* n : nodes) {
    for (const Value* o : n->outputs()) {
      if (o->absent_output) continue;
      if (o->type.dtype == DType::Undefined || o->type.dtype == DType::String)
        return D::no(Reason::DtypeMismatch,
                     fmt::format("'{}' has element type {}, which fused kernels do not handle", o->name(),
                                 dtype_name(o->type.dtype)));
      auto k = analysis::shape_key(o);
      if (!k) return D::no(Reason::ShapeUnknown, fmt::format("the shape of '{}' is unknown", o->name()));
      sizes.insert(numel_key(*k));
    }
  }
  // Integer values are sizes and indices (Shape arithmetic, Range): fused kernels compute in floating point, and a
  // scalar's own kernel costs what a fused one would.
  for (const Node* n : nodes)
    for (const Value* o : n->outputs())
      if (!o->absent_output && is_integer(o->type.dtype))
        return D::no(Reason::DtypeMismatch, fmt::format("'{}' is {} (size or index arithmetic): it runs as its own "
                                                        "kernel", o->name(), dtype_name(o->type.dtype)));
  // A kernel sizes its loops from its inputs' dims. A dim only a value computed at run time gives (a Slice by
  // computed starts, an Expand to a computed shape) leaves its producer to run as its own kernel.
  {
    std::set<std::string> bound;
    for (const Value* v : external_inputs(nodes))
      if (v->type.shape)
        for (const Dim& d : *v->type.shape)
          if (d.is_symbol()) bound.insert(d.symbol());
    for (const Node* n : nodes)
      for (const Value* o : n->outputs())
        if (!o->absent_output)
          for (const Dim& d : *o->type.shape)
            if (d.is_symbol() && !bound.count(d.symbol()))
              return D::no(Reason::ShapeUnknown,
                           fmt::format("dim {} of '{}' comes from values computed at run time, not from the shapes "
                                       "of the group's inputs", d.symbol(), o->name()));
  }
  // One iteration space: all members produce the same element count, except around reductions (row and reduced
  // sizes) and at an anchor (its output space).
  size_t allowed = reductions.empty() ? 1 : 2;
  if (sizes.size() > allowed) {
    return D::no(Reason::ShapeMismatch, fmt::format("members produce {} different element counts: a small op "
                                                    "would be recomputed for every element of a larger one",
                                                    sizes.size()));
  }

  int ops = 0;
  for (const Node* n : nodes) ops += n->body ? int(n->body->num_nodes()) : 1;
  if (ops > rules.max_ops_per_group)
    return D::no(Reason::MaxGroupSize, fmt::format("{} ops exceed max_ops_per_group {}", ops, rules.max_ops_per_group));
  int inputs = 0;
  for (const Value* v : external_inputs(nodes))
    if (!is_inlined_constant(v)) ++inputs;
  if (inputs > rules.max_inputs_per_group)
    return D::no(Reason::MaxInputs, fmt::format("{} inputs exceed max_inputs_per_group {}", inputs,
                                                rules.max_inputs_per_group));

  std::set<const Node*> sa(a.nodes.begin(), a.nodes.end()), sb(b.nodes.begin(), b.nodes.end());
  if (index.path_outside(sa, sb) || index.path_outside(sb, sa))
    return D::no(Reason::Cycle, "another path between the two groups would make the fused graph cyclic");

  auto outs = escaping_outputs(nodes, g);
  // An anchor group runs as one library call whose epilogue applies the chain on the way out: the backend says
  // how many values that writes (without one: a single value, as oneDNN's post-ops).
  const size_t anchor_outputs = opts.backend ? size_t(opts.backend->anchor_group_outputs()) : 1;
  if (anchor && outs.size() > anchor_outputs)
    return D::no(Reason::MultiOutput,
                 fmt::format("the group would have {} outputs; a group with anchor {} writes {} (its epilogue runs "
                             "as {})", outs.size(), anchor->describe(), anchor_outputs == 1 ? "one" :
                             std::to_string(anchor_outputs), opts.backend ? opts.backend->anchor_epilogue() :
                             std::string_view("post-ops")));
  if (outs.size() > 1 && opts.opt_level < 3) {
    // A conflict proper: an intermediate the group also consumes is returned by the graph.
    for (const Value* o : outs)
      if (g.is_graph_output(o) && std::any_of(o->uses().begin(), o->uses().end(),
                                              [&](const Use& u) { return m.count(u.node) > 0; }))
        return D::no(Reason::GraphOutputConflict,
                     fmt::format("'{}' is a graph output inside the group; keeping it needs multi-output fusion "
                                 "(opt level 3)", o->name()));
    return D::no(Reason::MultiOutput, fmt::format("the group would have {} outputs; multi-output fusion is opt level 3",
                                                  outs.size()));
  }

  KernelStats ks = group_stats(nodes, g);
  double budget = rules.onchip_fraction * target.onchip_bytes;
  if (ks.working_set > budget)
    return D::no(Reason::ResourceLimit, fmt::format("working set per tile {:.0f} KB exceeds {:.0f} KB on chip",
                                                    ks.working_set / 1024, budget / 1024));

  for (const FusionRule& r : rules.rules) {
    if (r.action != FusionRule::Action::Forbid) continue;
    for (const Node* p : a.nodes)
      for (const Value* o : p->outputs())
        for (const Use& u : o->uses())
          if (m.count(u.node) && !std::count(a.nodes.begin(), a.nodes.end(), u.node) &&
              edge_on_match(r.pattern, *p, *u.node, &m))
            return D::no(Reason::RuleForbid, fmt::format("rule \"{}\" forbids it{}{}", r.pattern.text,
                                                         r.reason.empty() ? "" : ": ", r.reason));
  }
  // Last: the backend's answer costs a kernel print.
  if (opts.backend)
    if (std::string why = opts.backend->cannot_emit(nodes, g); !why.empty())
      return D::no(Reason::BackendUnsupported, fmt::format("the {} backend: {}", opts.backend->name(), why));
  return D::yes();
}

}  // namespace gaf::fusion_detail

namespace gaf {

std::string_view reason_name(Reason r) {
  switch (r) {
    case Reason::Fused: return "FUSED";
    case Reason::Cycle: return "CYCLE";
    case Reason::OpaqueOp: return "OPAQUE_OP";
    case Reason::StatefulOrRandom: return "STATEFUL_OR_RANDOM";
    case Reason::MultipleAnchors: return "MULTIPLE_ANCHORS";
    case Reason::ReductionPosition: return "REDUCTION_POSITION";
    case Reason::AnchorPosition: return "ANCHOR_POSITION";
    case Reason::DtypeMismatch: return "DTYPE_MISMATCH";
    case Reason::ShapeMismatch: return "SHAPE_MISMATCH";
    case Reason::ShapeUnknown: return "SHAPE_UNKNOWN";
    case Reason::ResourceLimit: return "RESOURCE_LIMIT";
    case Reason::MaxGroupSize: return "MAX_GROUP_SIZE";
    case Reason::MaxInputs: return "MAX_INPUTS";
    case Reason::RuleForbid: return "RULE_FORBID";
    case Reason::GraphOutputConflict: return "GRAPH_OUTPUT_CONFLICT";
    case Reason::MultiOutput: return "MULTI_OUTPUT";
    case Reason::NegativeBenefit: return "NEGATIVE_BENEFIT";
    case Reason::FusionDisabled: return "FUSION_DISABLED";
    case Reason::TargetUnsupported: return "TARGET_UNSUPPORTED";
    case Reason::BackendUnsupported: return "BACKEND_UNSUPPORTED";
  }
  return "?";
}

FusionDecision can_fuse(const Group& a, const Group& b, const Graph& g, const FusionOptions& opts,
                        const Target& target) {
  fusion_detail::GraphIndex index(g);
  return fusion_detail::can_fuse_indexed(a, b, index, opts, target);
}

}  // namespace gaf
