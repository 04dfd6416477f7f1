// Identity(x) -> x; Dropout(x) in inference -> x (when its mask output is unused and training_mode is not set).
#include "gaf/passes.h"

namespace gaf {

namespace {

bool removable(const Node& n, const Graph& g) {
  if (!n.domain.empty() || !n.input(0)) return false;
  if (n.op_type == "Identity") return true;
  if (n.op_type != "Dropout") return false;
  if (n.num_outputs() > 1 && (!n.output(1)->uses().empty() || g.is_graph_output(n.output(1)))) return false;
  const Value* training = n.input(2);
  return !training || (training->is_constant() && training->constant().get_int(0) == 0);
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
