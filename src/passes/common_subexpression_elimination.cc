// Common-subexpression elimination. Two nodes with the same op, domain, opset, attributes and the very same
// input values compute the same outputs; the later one is dropped and its readers read the earlier one.
// Identical constants (same element type, dims and bytes) are merged first, so exporters' repeated scalars
// make their consumers identical too.
//
//   a = Relu(x)          a = Relu(x)
//   b = Relu(x)   ==>    c = Add(a, a)
//   c = Add(a, b)
//
// One sweep in topological order reaches a fixed point: by the time a node is looked at, its inputs have been
// merged already. Random and stateful ops and ops unknown to the registry are never merged (two draws are not
// one), nor fused nodes. The earlier node comes first in topological order, so the order stays valid.
#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>

#include "gaf/op_registry.h"
#include "gaf/passes.h"
#include "passes/rewrite_util.h"

namespace gaf {

namespace {

bool same_tensor(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.dims() != b.dims()) return false;
  if (a.dtype() != DType::String) return std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    if (a.strings()[i] != b.strings()[i]) return false;
  return true;
}

bool same_attr(const Attribute& a, const Attribute& b) {
  if (a.index() != b.index()) return false;
  return std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        const T& y = std::get<T>(b);
        if constexpr (std::is_same_v<T, Tensor>)
          return same_tensor(x, y);
        else if constexpr (std::is_same_v<T, OpaqueAttr>)
          return x.proto == y.proto;
        else if constexpr (std::is_same_v<T, GraphAttr>)
          return x.graph == y.graph;  // the same subgraph object (two subgraphs are not compared)
        // Floats compare bitwise: NaN equals NaN, 0.0 differs from -0.0.
        else if constexpr (std::is_same_v<T, float>)
          return std::memcmp(&x, &y, sizeof(float)) == 0;
        else if constexpr (std::is_same_v<T, std::vector<float>>)
          return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
        else
          return x == y;
      },
      a);
}

bool same_attrs(const Node& a, const Node& b) {
  if (a.attrs.size() != b.attrs.size()) return false;
  for (auto ia = a.attrs.begin(), ib = b.attrs.begin(); ia != a.attrs.end(); ++ia, ++ib)
    if (ia->first != ib->first || !same_attr(ia->second, ib->second)) return false;
  return true;
}

bool mergeable(const Node& n) {
  if (n.body) return false;
  const OpInfo* info = find_op(n);
  return info && !(info->flags & (kRandom | kStateful));
}

class CommonSubexpressionElimination final : public Pass {
 public:
  std::string_view name() const override { return "common-subexpression-elimination"; }
  bool run(Graph& g, PassContext& ctx) override {
    rewrite::Rewriter rw(g);
    int count = merge_constants(rw);
    using Key = std::tuple<std::string, std::string, int, std::vector<const Value*>>;
    std::map<Key, std::vector<Node*>> seen;
    count += rw.run([&](Node& n) {
      if (!mergeable(n)) return false;
      Key key{n.op_type, n.domain, n.opset, {n.inputs().begin(), n.inputs().end()}};
      auto& candidates = seen[key];
      for (Node* earlier : candidates)
        if (merge(rw, *earlier, n)) return true;
      candidates.push_back(&n);
      return false;
    });
    if (count) ctx.count(name(), count);
    return count > 0;
  }

 private:
  // Outputs of `later` -> outputs of `earlier`, when both compute the same.
  static bool merge(rewrite::Rewriter& rw, Node& earlier, Node& later) {
    if (earlier.num_outputs() != later.num_outputs() || !same_attrs(earlier, later)) return false;
    for (int i = 0; i < later.num_outputs(); ++i) {
      const Value* o = later.output(i);
      bool read = !o->uses().empty() || rw.graph().is_graph_output(o);
      if (read && (earlier.output(i)->absent_output || !rw.can_replace(o, earlier.output(i)))) return false;
    }
    for (int i = 0; i < later.num_outputs(); ++i)
      if (!later.output(i)->uses().empty() || rw.graph().is_graph_output(later.output(i)))
        rw.replace(later.output(i), earlier.output(i), false);
    rw.erase_unused({&later});
    return true;
  }

  // A sample of a tensor's bytes (at most 64 words spread over it): tensors that differ in it never compare.
  // Without it the many equally shaped weights of a deep model (every layer's) compared pairwise.
  static uint64_t sample_hash(const Tensor& t) {
    if (t.dtype() == DType::String) return 0;
    const auto* p = static_cast<const unsigned char*>(t.raw());
    const size_t n = t.nbytes(), words = n / 8, step = std::max<size_t>(1, words / 64);
    uint64_t h = 1469598103934665603ull;
    auto mix = [&](uint64_t x) { h = (h ^ x) * 1099511628211ull; };
    for (size_t w = 0; w < words; w += step) {
      uint64_t x;
      std::memcpy(&x, p + w * 8, 8);
      mix(x);
    }
    for (size_t i = words * 8; i < n; ++i) mix(p[i]);
    return h;
  }

  // Identical initializers -> the first of them.
  static int merge_constants(rewrite::Rewriter& rw) {
    Graph& g = rw.graph();
    std::map<std::tuple<DType, std::vector<int64_t>, size_t, uint64_t>, std::vector<Value*>> by_shape;
    int count = 0;
    for (Value* v : std::vector<Value*>(g.initializers())) {
      const Tensor* t = rewrite::constant_of(g, v);
      if (!t || v->uses().empty()) continue;
      auto& same = by_shape[{t->dtype(), t->dims(), t->nbytes(), sample_hash(*t)}];
      auto it = std::find_if(same.begin(), same.end(), [&](const Value* c) {
        return same_tensor(c->constant(), *t) && rw.can_replace(v, c);
      });
      if (it == same.end()) {
        same.push_back(v);
        continue;
      }
      rw.replace(v, *it, false);
      ++count;
    }
    if (count) g.remove_dead_values();
    return count;
  }
};

}  // namespace

std::unique_ptr<Pass> make_common_subexpression_elimination() {
  return std::make_unique<CommonSubexpressionElimination>();
}

}  // namespace gaf
