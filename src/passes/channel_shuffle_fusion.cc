// ShuffleNet's channel shuffle of a concatenation, and the even split that often follows, become one copy:
//
//   s = Reshape(Transpose(Reshape(Concat(x_0 .. x_{G-1}, axis a), [.., G, c, ..]), swap a and a + 1), [.., G c, ..])
//   y_k = Slice(s, [k C/K, (k + 1) C/K) along a)   for k < K (the K parts cover s), or y = s (K = 1)
//     ==>   y_0 .. y_{K-1} = gaf.ChannelShuffle<axis = a>(x_0 .. x_{G-1})
//
// S[.., i G + g, ..] = x_g[.., i, ..]: the kernel reads every x_g once and writes every y_k once, where the ops it
// replaces copy the data three times (the concatenation, the transposition, the slices: 2.4 of ShuffleNetV2's
// 6 ms at batch 1). The written model decomposes the op back into those ops (decompose_gaf_ops).
// Conditions: every x_g of one static shape with c along a; the Reshapes exactly split a into [G, c] and merge it
// back; the Concat's, the Reshapes' and the Transpose's results read only by the next op of the pattern and not
// graph outputs; the Slices (opset >= 10, constant starts and ends, step 1, along a) all of s's readers, else the
// op writes s itself.
#include <algorithm>
#include <limits>

#include "gaf/passes.h"
#include "passes/rewrite_util.h"

namespace gaf {

namespace {

using rewrite::constant_of;
using rewrite::is_op;

// The static dims of v, or nullopt.
std::optional<std::vector<int64_t>> dims_of(const Value* v) {
  if (!v || !v->type.has_static_shape()) return std::nullopt;
  return v->type.static_dims();
}

// The integer entries of a constant 1-D tensor, or nullopt.
std::optional<std::vector<int64_t>> ints_of(const Graph& g, const Value* v) {
  const Tensor* t = v ? constant_of(g, v) : nullptr;
  if (!t || t->rank() != 1 || (t->dtype() != DType::Int64 && t->dtype() != DType::Int32)) return std::nullopt;
  return t->to_int_vector();
}

// [start, end) of a Slice of s that takes one range along `axis` with step 1, clamped to [0, len); nullopt for any
// other Slice.
std::optional<std::pair<int64_t, int64_t>> slice_range(const Graph& g, const Node& n, const Value* s, int axis,
                                                       int rank, int64_t len) {
  if (n.opset < 10 || n.num_inputs() < 3 || n.input(0) != s) return std::nullopt;
  for (int i = 1; i < n.num_inputs(); ++i)
    if (n.input(i) == s) return std::nullopt;
  auto starts = ints_of(g, n.input(1)), ends = ints_of(g, n.input(2));
  if (!starts || !ends || starts->size() != 1 || ends->size() != 1) return std::nullopt;
  int64_t a = 0;
  if (n.num_inputs() > 3 && n.input(3)) {
    auto axes = ints_of(g, n.input(3));
    if (!axes || axes->size() != 1) return std::nullopt;
    a = (*axes)[0] < 0 ? (*axes)[0] + rank : (*axes)[0];
  }
  if (a != axis) return std::nullopt;
  if (n.num_inputs() > 4 && n.input(4)) {
    auto steps = ints_of(g, n.input(4));
    if (!steps || *steps != std::vector<int64_t>{1}) return std::nullopt;
  }
  auto clamp = [&](int64_t v) { return std::clamp(v < 0 ? v + len : v, int64_t(0), len); };
  return std::make_pair(clamp((*starts)[0]), clamp((*ends)[0]));
}

class ChannelShuffleFusion final : public rewrite::RulePass {
 public:
  std::string_view name() const override { return "channel-shuffle-fusion"; }

 private:
  bool rule(rewrite::Rewriter& rw, Node& t) override {
    Graph& g = rw.graph();
    if (!is_op(&t, "Transpose")) return false;
    // The Transpose swaps two adjacent axes a and a + 1 of the split tensor.
    const auto perm = rewrite::transpose_perm(t);
    if (!perm) return false;
    int a = -1;
    for (int i = 0; i < int(perm->size()); ++i) {
      if ((*perm)[size_t(i)] == i) continue;
      if (a >= 0 || i + 1 >= int(perm->size()) || (*perm)[size_t(i)] != i + 1 || (*perm)[size_t(i + 1)] != i)
        return false;
      a = i++;
    }
    if (a < 0) return false;

    // Backwards: Reshape splitting axis a of the Concat's result into [G, c].
    Value* split = t.input(0);
    Node* r1 = rewrite::producer_op(split, "Reshape");
    if (!r1 || !rewrite::used_only_by(g, split, {&t}) || g.is_graph_output(split)) return false;
    Value* cat = r1->input(0);
    Node* concat = rewrite::producer_op(cat, "Concat");
    if (!concat || !rewrite::used_only_by(g, cat, {r1}) || g.is_graph_output(cat)) return false;
    const auto cat_dims = dims_of(cat), split_dims = dims_of(split);
    if (!cat_dims || !split_dims || split_dims->size() != cat_dims->size() + 1) return false;
    const int rank = int(cat_dims->size());
    int64_t axis = concat->attr_int("axis", 0);
    if (axis < 0) axis += rank;
    if (axis != a) return false;
    const int64_t groups = concat->num_inputs(), c = (*split_dims)[size_t(a + 1)];
    if (groups < 2 || (*split_dims)[size_t(a)] != groups) return false;
    for (int i = 0; i < rank; ++i)
      if (i != a && (*split_dims)[size_t(i < a ? i : i + 1)] != (*cat_dims)[size_t(i)]) return false;
    for (int i = 0; i < concat->num_inputs(); ++i) {
      auto d = dims_of(concat->input(i));
      if (!d || d->size() != cat_dims->size() || (*d)[size_t(a)] != c) return false;
    }

    // Forwards: Reshape merging the two axes back.
    Value* shuffled = t.output(0);
    Node* r2 = rewrite::sole_user(g, shuffled);
    if (!is_op(r2, "Reshape") || r2->input(0) != shuffled || g.is_graph_output(shuffled) ||
        dims_of(r2->output(0)) != cat_dims)
      return false;
    Value* s = r2->output(0);

    // The Slices cutting s into K equal parts along a, or s itself.
    const int64_t len = (*cat_dims)[size_t(a)];
    std::vector<std::pair<std::pair<int64_t, int64_t>, Node*>> parts;  // ([start, end), Slice), by start
    for (const Use& u : s->uses()) {
      auto range = is_op(u.node, "Slice") ? slice_range(g, *u.node, s, a, rank, len) : std::nullopt;
      if (!range) {
        parts.clear();
        break;
      }
      parts.emplace_back(*range, u.node);
    }
    std::sort(parts.begin(), parts.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    const int64_t k = int64_t(parts.size());
    bool cover = k > 1 && !g.is_graph_output(s) && len % k == 0;
    for (int64_t i = 0; cover && i < k; ++i)
      cover = parts[size_t(i)].first == std::make_pair(i * len / k, (i + 1) * len / k);
    std::vector<Value*> outs;
    if (cover)
      for (const auto& p : parts) outs.push_back(p.second->output(0));
    else
      outs.push_back(s);

    std::vector<Value*> ins(concat->inputs().begin(), concat->inputs().end());
    Node* fused = rw.add_node("ChannelShuffle", ins, std::vector<const Value*>(outs.begin(), outs.end()),
                              rewrite::kGafDomain, 1);
    fused->attrs["axis"] = int64_t(a);
    for (size_t i = 0; i < outs.size(); ++i) rw.replace(outs[i], fused->output(int(i)));
    std::vector<Node*> pattern;
    if (cover)
      for (const auto& p : parts) pattern.push_back(p.second);
    pattern.insert(pattern.end(), {r2, &t, r1, concat});
    rw.erase_unused(pattern);
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_channel_shuffle_fusion() { return std::make_unique<ChannelShuffleFusion>(); }

}  // namespace gaf
