// Removes nodes none of whose outputs is read or returned, then unused values and initializers.
#include "gaf/passes.h"

namespace gaf {

namespace {

class DeadCodeElimination final : public Pass {
 public:
  std::string_view name() const override { return "dead-code-elimination"; }
  bool run(Graph& g, PassContext& ctx) override {
    int count = 0;
    auto nodes = g.nodes();
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
      Node* n = *it;
      bool live = false;
      for (const Value* o : n->outputs()) live |= !o->uses().empty() || g.is_graph_output(o);
      if (live) continue;
      g.remove_node(n);
      ++count;
    }
    size_t before = g.initializers().size();
    g.remove_dead_values();
    if (count) ctx.count(name(), count);
    return count > 0 || g.initializers().size() != before;
  }
};

}  // namespace

std::unique_ptr<Pass> make_dead_code_elimination() { return std::make_unique<DeadCodeElimination>(); }

}  // namespace gaf
