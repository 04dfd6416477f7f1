// Helpers shared by the pattern-rewrite passes: constant and scalar queries, use counts, reduction axes, node
// evaluation on the runtime, and the Rewriter that walks a snapshot of the nodes while rewrites erase some of
// them.
//
// Invariants every rewrite keeps (checked by the Rewriter's callers, relied on by the PassManager):
//   * a value the pattern deletes is read only inside the pattern and is not a graph output;
//   * a graph output keeps its name: the value replacing it takes the name over;
//   * after the walk the graph is topologically sorted again and dead values are gone.
#pragma once

#include <fmt/format.h>

#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "gaf/graph.h"
#include "gaf/passes.h"

namespace gaf::rewrite {

// The domain of the ops our rewrites produce when the model's opset has no standard op for them.
inline constexpr std::string_view kGafDomain = "gaf";

// The data of `v` when it is a constant the caller cannot override: an initializer that is not a graph input.
const Tensor* constant_of(const Graph& g, const Value* v);
// The value of a constant with a single element whose shape broadcasts into `into` without changing its shape
// (every dim 1, rank at most that of `into`; a rank-0 constant when `into`'s rank is unknown).
std::optional<double> scalar_operand(const Graph& g, const Value* v, const Value* into);
// Whether `v` equals `want` within a relative 1e-6: the fp32 nearest of a decimal constant and its spellings.
bool near(double v, double want);
// scalar_operand(v, into) is near `want`.
bool is_scalar(const Graph& g, const Value* v, const Value* into, double want);

// Every entry of v (an ints attribute: strides, dilations, pads) is `want`; true for none.
bool all_equal(const std::vector<int64_t>& v, int64_t want);

int rank_of(const Value* v);    // -1 when unknown
bool same_shape(const Value* a, const Value* b);  // both shapes known and equal (symbols by name)
bool is_float(const Value* v);  // fp32: the element type the recognition passes handle

// `n` is the ai.onnx op `op`.
bool is_op(const Node* n, std::string_view op);
// The producer of `v` when it is the ai.onnx op `op`, else nullptr.
Node* producer_op(const Value* v, std::string_view op);
// The only node reading `v` (once) when `v` is not a graph output; nullptr otherwise.
Node* sole_user(const Graph& g, const Value* v);
// Every read of `v` is by one of `nodes`, and `v` is not a graph output.
bool used_only_by(const Graph& g, const Value* v, const std::vector<const Node*>& nodes);
// The operand of the binary node `n` that is not `v` (nullptr when `v` is not an operand of `n`).
Value* other_operand(const Node* n, const Value* v);

// Reduced axes of a Reduce* node (attribute, or constant input from opset 18), in [0, rank), sorted; nullopt
// when unknown or when the node reduces nothing (noop_with_empty_axes).
std::optional<std::vector<int64_t>> reduce_axes(const Graph& g, const Node& n, int rank);
bool keeps_dims(const Node& reduce);

// An activation a fused convolution kernel applies after its sum: a clamp (Relu, Clip) or a named one.
struct Stage {
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  std::string act;  // "Silu", "HardSwish" or empty
};
// The Stage of a Relu, a Clip with constant (or absent) bounds, a gaf.Silu or a HardSwish (either domain);
// nullopt for anything else.
std::optional<Stage> stage_of(const Graph& g, const Node* n);

// The permutation of the Transpose `t` when valid and known (no perm attribute: the dims reversed).
std::optional<std::vector<int64_t>> transpose_perm(const Node& t);
// The [start, end) dims a Shape node returns of an input of rank `rank` (opset 15's start/end, clamped; start >
// end gives an empty range).
std::pair<int64_t, int64_t> shape_range(const Node& shape, int64_t rank);

// A per-channel affine map y' = y * s[c] + t[c] on axis 1 of a value (the channels of a Conv output, the columns
// of a 2-D product): what Conv/Gemm + BatchNormalization folding puts into the weights and bias.
using Affine = std::pair<std::vector<double>, std::vector<double>>;  // (s, t) per channel
// The per-channel values of constant `c` broadcast against a value of rank `rank` with `m` channels on axis 1;
// nullopt when c varies along another axis or would raise the rank.
std::optional<std::vector<double>> per_channel(const Tensor& c, int rank, int64_t m);
// Inference BatchNormalization(y, scale, bias, mean, var) with constant statistics of `m` channels and no other
// output read: s = scale / sqrt(var + eps), t = bias - mean * s.
std::optional<Affine> batch_norm_affine(const Graph& g, const Node& bn, int64_t m);
// Mul(y, c) -> (c, 0); Add(y, c) -> (1, c), for c constant per channel of the rank-`rank` value y.
std::optional<Affine> elementwise_affine(const Graph& g, const Node& n, const Value* y, int rank, int64_t m);
// Applying an affine map to a product's weights and bias (float or double, computed in double, rounded once):
// `w` with every slice along `axis` multiplied by s[slice]; and the bias s * beta * b + t ([m]; b absent: 0, one
// element: broadcast).
Tensor scale_along(const Tensor& w, const std::vector<double>& s, int axis);
Tensor affine_bias(const Tensor* b, double beta, const Affine& a, DType dtype);

// n's outputs computed by the context's evaluator from the constant data of its inputs. Throws gaf::Error
// (UnsupportedError when there is no evaluator or it has no kernel for n).
std::vector<Tensor> evaluate(const PassContext& ctx, const Graph& g, const Node& n);

class Rewriter {
 public:
  explicit Rewriter(Graph& g) : g_(g) {}
  Graph& graph() { return g_; }

  // Calls `rule` on each node of a snapshot of the graph in order, skipping nodes erased meanwhile; returns
  // how many calls rewrote (returned true). When any did: re-sorts topologically and drops dead values.
  int run(const std::function<bool(Node&)>& rule);

  // Whether `to` may replace `from`: when `from` is a graph output, `to` must be free to take its name.
  bool can_replace(const Value* from, const Value* to) const;
  // Redirects every read of `from` to `to`. `to` takes `from`'s name when `from` is a graph output, or when
  // `take_name` is set and `to` is free to (a fresh value replacing a pattern keeps the readable name).
  void replace(Value* from, Value* to, bool take_name = true);
  // Removes the nodes of `pattern` whose outputs are no longer read, consumers first.
  void erase_unused(const std::vector<Node*>& pattern);
  // Drops the data of constant v when nothing reads it any more (the round's end removes the value): a weight a
  // rule replaced by a merged or compressed copy is not held beside it until then.
  void drop_if_unused(Value* v);

  // A new node with outputs typed like `like` (one per element), named after them.
  Node* add_node(const std::string& op_type, const std::vector<Value*>& inputs,
                 const std::vector<const Value*>& like, std::string_view domain = "", int opset = 0);
  // A new constant named after `base`.
  Value* add_constant(const std::string& base, Tensor t);

 private:
  bool free_name(const Value* v) const;
  Graph& g_;
  std::unordered_set<const Node*> erased_;
};

// A pass that is one rule tried on every node (Rewriter::run over a snapshot), its rewrites counted under the
// pass's name in the report.
class RulePass : public Pass {
 public:
  bool run(Graph& g, PassContext& ctx) final {
    ctx_ = &ctx;
    if (!enabled(ctx)) return false;
    Rewriter rw(g);
    int count = rw.run([&](Node& n) {
      std::string anchor = n.describe();
      const bool done = rule(rw, n);
      if (done) ctx.near_misses.erase({std::string(name()), anchor});
      return done;
    });
    if (count) ctx.count(name(), count);
    return count > 0;
  }

 protected:
  virtual bool rule(Rewriter& rw, Node& n) = 0;
  // Whether the pass applies under these options (target capabilities, rules switches).
  virtual bool enabled(const PassContext&) const { return true; }
  // The options of the run in progress, for rules that depend on them.
  const PassContext& context() const { return *ctx_; }
  // Records that the pattern anchored at `anchor` failed `check` (see NearMiss); returns false for the rule to
  // return.
  template <class... A>
  bool miss(const Node& anchor, fmt::format_string<A...> check, A&&... args) {
    ctx_->near_miss(name(), anchor, fmt::format(check, std::forward<A>(args)...));
    return false;
  }

 private:
  PassContext* ctx_ = nullptr;
};

}  // namespace gaf::rewrite
