// gaf.fused nodes: a fused group owns its body subgraph. Until a generated kernel exists for it, the reference
// kernel runs the body through a nested Session, so fused and unfused graphs give identical results.
#include "gaf/session.h"
#include "runtime/kernels/common.h"
#include "runtime/kernels/families.h"

namespace gaf::runtime {

namespace {

class FusedBodyKernel final : public Kernel {
 public:
  explicit FusedBodyKernel(const Node& node) {
    GAF_CHECK(node.body, "{}: a fused node has no body graph", node.describe());
    session_ = std::make_unique<Session>(*node.body);
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
  std::unique_ptr<Session> session_;
};

}  // namespace

void register_fused_ops(OpRegistry& r) {
  r.add("FusedOp", OpKind::Opaque, "gaf.fused").set_kernel([](const Node& n) -> std::unique_ptr<Kernel> {
    return std::make_unique<FusedBodyKernel>(n);
  });
}

}  // namespace gaf::runtime
