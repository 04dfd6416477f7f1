// gaf.fused nodes: a fused group owns its body subgraph. Until a generated kernel exists for it, the reference
// kernel runs the body through a nested Session, so fused and unfused graphs give identical results.
#include "gaf/session.h"
#include "runtime/kernels/common.h"
#include "runtime/kernels/families.h"
#include "runtime/kernels/fused_body.h"

namespace gaf::runtime {

std::unique_ptr<Graph> body_with_bound_constants(const Node& fused) {
  GAF_CHECK(fused.body, "{}: a fused node has no body graph", fused.describe());
  std::unique_ptr<Graph> body = fused.body->clone();
  const std::vector<Value*> inputs = body->inputs();
  for (size_t i = 0; i < inputs.size() && int(i) < fused.num_inputs(); ++i) {
    const Value* outer = fused.input(int(i));
    if (!outer || !outer->is_constant()) continue;
    Value* c = body->add_constant(body->unique_name(inputs[i]->name() + "__bound"), outer->constant());
    body->replace_all_uses(inputs[i], c);
  }
  return body;
}

namespace {

class FusedBodyKernel final : public Kernel {
 public:
  // Outer constants bound into the body: MobileNetV3's squeeze-excitation 1x1 convolutions run op by op measured
  // 3.5x slower with their weights re-packed on every run.
  explicit FusedBodyKernel(const Node& node) {
    body_ = body_with_bound_constants(node);
    session_ = std::make_unique<Session>(*body_);
  }
  void run(KernelContext& ctx) override {
    const Graph& body = session_->graph();
    std::map<std::string, Tensor> feeds;
    GAF_CHECK(ctx.num_inputs() == int(body.inputs().size()), "{}: {} inputs for a body of {}",
              ctx.node().describe(), ctx.num_inputs(), body.inputs().size());
    for (int i = 0; i < ctx.num_inputs(); ++i) feeds[body.inputs()[i]->name()] = ctx.in(i);
    std::vector<Tensor> outs = session_->run(feeds);
    for (size_t i = 0; i < outs.size(); ++i) ctx.set_output(int(i), std::move(outs[i]));
  }

 private:
  std::unique_ptr<Graph> body_;
  std::unique_ptr<Session> session_;
};

}  // namespace

void register_fused_ops(KernelRegistry& r) {
  r.add("FusedOp", "gaf.fused").set_kernel([](const Node& n) -> std::unique_ptr<Kernel> {
    return std::make_unique<FusedBodyKernel>(n);
  });
}

}  // namespace gaf::runtime
