// The passes' ConstantEvaluator on the CPU runtime: the node is copied into a one-node graph whose inputs are
// constants and run there by a Session, so constant folding computes with the kernels inference would.
#include <fmt/format.h>

#include "gaf/kernel.h"
#include "gaf/passes.h"
#include "gaf/session.h"

namespace gaf::runtime {

namespace {

class SessionEvaluator final : public ConstantEvaluator {
 public:
  bool can_evaluate(const Node& n) const override { return KernelRegistry::cpu().find(n) != nullptr; }

  std::vector<Tensor> evaluate(const Node& n, const std::vector<const Tensor*>& inputs) const override {
    Graph one;
    one.name = "evaluate";
    std::vector<Value*> ins;
    for (size_t i = 0; i < inputs.size(); ++i)
      ins.push_back(inputs[i] ? one.add_constant(fmt::format("in{}", i), *inputs[i]) : nullptr);
    std::vector<std::string> names;
    for (int i = 0; i < n.num_outputs(); ++i) names.push_back(fmt::format("out{}", i));
    Node* c = one.add_node(n.op_type, ins, names, n.name);
    c->domain = n.domain;
    c->opset = n.opset;
    c->attrs = n.attrs;
    c->implicit_inputs = n.implicit_inputs;
    for (int i = 0; i < n.num_outputs(); ++i) {
      c->output(i)->type = n.output(i)->type;
      c->output(i)->absent_output = n.output(i)->absent_output;
      one.add_output(c->output(i));
    }
    Session s(one);
    return s.run(std::map<std::string, Tensor>{});
  }
};

}  // namespace

const ConstantEvaluator& constant_evaluator() {
  static const SessionEvaluator evaluator;
  return evaluator;
}

}  // namespace gaf::runtime
