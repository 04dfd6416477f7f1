// Constant(value=T) -> initializer T. Constants then look like every other weight to later passes, the planner
// (small ones are copied into fused bodies) and the runtime (no kernel launch).
#include <optional>

#include "gaf/passes.h"

namespace gaf {

namespace {

// The tensor a Constant node defines, or nothing for forms we leave alone (sparse values).
std::optional<Tensor> constant_value(const Node& n) {
  if (const Tensor* t = n.attr_tensor("value")) return *t;
  if (n.has_attr("value_float")) return Tensor::scalar<float>(n.attr_float("value_float", 0));
  if (n.has_attr("value_int")) return Tensor::scalar<int64_t>(n.attr_int("value_int", 0));
  if (n.has_attr("value_floats")) {
    auto v = n.attr_floats("value_floats");
    return Tensor::from<float>({int64_t(v.size())}, v);
  }
  if (n.has_attr("value_ints")) {
    auto v = n.attr_ints("value_ints");
    return Tensor::from<int64_t>({int64_t(v.size())}, v);
  }
  return std::nullopt;
}

class ConstantToInitializer final : public Pass {
 public:
  std::string_view name() const override { return "constant-to-initializer"; }
  bool run(Graph& g, PassContext& ctx) override {
    int count = 0;
    for (Node* n : g.nodes()) {
      if (n->op_type != "Constant" || !n->domain.empty()) continue;
      auto value = constant_value(*n);
      if (!value) continue;
      Value* out = n->output(0);
      std::string name = out->name();
      Value* c = g.add_constant(g.unique_name(name + "__const"), *value);
      c->type.shape = Shape(value->dims().begin(), value->dims().end());
      g.replace_all_uses(out, c);  // graph outputs included
      g.remove_node(n);
      // The initializer takes the name, also when it is a graph output (which callers fetch by name).
      g.rename(out, g.unique_name(name + "__dead"));
      g.rename(c, name);
      ++count;
    }
    if (count) {
      g.remove_dead_values();
      ctx.count(name(), count);
    }
    return count > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> make_constant_to_initializer() { return std::make_unique<ConstantToInitializer>(); }

}  // namespace gaf
