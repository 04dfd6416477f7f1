// Constant folding: a node whose inputs are all constants is run once, now, by the context's ConstantEvaluator
// (the driver installs the CPU runtime's: a one-node graph in a runtime::Session, so folding uses exactly the
// kernels inference would), and its outputs become initializers.
//
//   c1 --+
//        Add -> y   ==>   y = initializer (c1 + c2)
//   c2 --+
//
// Left alone: random or stateful ops (folding would freeze a draw), fused nodes, ops the evaluator cannot run,
// nodes without inputs, and outputs over kMaxElements elements (folding would grow the model). Graph inputs
// that have an initializer are overridable, so they are not constants here. Walking in topological order
// folds whole constant chains (Shape -> Gather -> Concat -> ...) in one sweep.
#include "gaf/op_registry.h"
#include "gaf/passes.h"
#include "passes/rewrite_util.h"

namespace gaf {

namespace {

constexpr int64_t kMaxElements = int64_t(1) << 20;

// DequantizeLinear or Cast of stored weights read as a product's B: folding would store them as fp32 (four or
// two times the bytes); weight-compression gives the product the stored form.
bool decompresses_weights(const Node& n) {
  if (!n.domain.empty() || (n.op_type != "DequantizeLinear" && n.op_type != "Cast")) return false;
  const Value* out = n.output(0);
  if (out->uses().empty()) return false;
  for (const auto& use : out->uses())
    if (!use.node->domain.empty() || (use.node->op_type != "MatMul" && use.node->op_type != "Gemm") ||
        use.index != 1)
      return false;
  return n.op_type == "DequantizeLinear" || n.input(0)->type.dtype == DType::BFloat16;
}

bool foldable(const Graph& g, const Node& n, const ConstantEvaluator* evaluator) {
  if (n.num_inputs() == 0 || n.body || (n.domain.empty() && n.op_type == "Constant")) return false;
  if (n.has_non_tensor_values()) return false;  // a constant is a tensor
  if (decompresses_weights(n)) return false;
  for (const Value* v : n.inputs())
    if (v && !rewrite::constant_of(g, v)) return false;
  const OpInfo* info = find_op(n);
  if (!info || (info->flags & (kRandom | kStateful)) || !evaluator || !evaluator->can_evaluate(n)) return false;
  for (const Value* o : n.outputs())
    if (o->type.has_static_shape() && numel_of(o->type.static_dims()) > kMaxElements) return false;
  return true;
}

class ConstantFolding final : public rewrite::RulePass {
 public:
  std::string_view name() const override { return "constant-folding"; }

 private:
  bool rule(rewrite::Rewriter& rw, Node& n) override {
    const Graph& g = rw.graph();
    if (!foldable(g, n, context().evaluator)) return false;
    std::vector<Tensor> values;
    try {
      values = rewrite::evaluate(context(), g, n);
    } catch (const Error&) {
      return false;  // the kernel rejects these inputs: leave the node for inference to report
    }
    for (size_t i = 0; i < values.size(); ++i)
      if (!n.output(int(i))->absent_output && values[i].numel() > kMaxElements) return false;
    for (size_t i = 0; i < values.size(); ++i) {
      Value* out = n.output(int(i));
      if (out->absent_output) continue;
      rw.replace(out, rw.add_constant(out->name() + "__folded", values[i]));
    }
    rw.erase_unused({&n});
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_constant_folding() { return std::make_unique<ConstantFolding>(); }

}  // namespace gaf
