// The CUDA backend's answer to the planner (KernelBackend): whether the CUDA dialect prints a would-be group.
#include "fusion/group_util.h"
#include "gaf/codegen.h"
#include "gaf/op_registry.h"

namespace gaf::codegen {

std::optional<EmittedKernel> emit_group(const std::vector<const Node*>& nodes, const Graph& g,
                                        const std::string& symbol, const EmitOptions& opts, std::string* why,
                                        std::vector<const Value*>* inputs,
                                        std::vector<const Value*>* outputs) {
  std::unique_ptr<Graph> body = fusion_detail::group_body(nodes, g, symbol, inputs, outputs);
  Graph holder;
  std::vector<Value*> ins;
  for (const Value* v : *inputs) ins.push_back(holder.add_input(v->name(), v->type));
  std::vector<std::string> outs;
  for (const Value* v : *outputs) outs.push_back(holder.unique_name(v->name() + "__k"));
  Node* fused = holder.add_node(symbol, ins, outs, symbol);
  fused->domain = "gaf.fused";
  fused->opset = 1;
  fused->body = std::move(body);
  return emit_kernel(*fused, symbol, opts, why);
}

namespace {

class CudaKernelBackend final : public KernelBackend {
 public:
  std::string_view name() const override { return "cuda"; }
  std::string cannot_emit(const std::vector<const Node*>& nodes, const Graph& g) const override {
    // An anchor-led group is a library call, then its epilogue as one kernel or node by node: it always runs.
    if (op_kind(*nodes.front()) == OpKind::Anchor) return "";
    EmitOptions opts;
    opts.dialect = Dialect::Cuda;
    std::string why;
    std::vector<const Value*> inputs, outputs;
    return emit_group(nodes, g, "gaf_probe", opts, &why, &inputs, &outputs) ? "" : why;
  }
};

}  // namespace

const KernelBackend& cuda_kernel_backend() {
  static const CudaKernelBackend backend;
  return backend;
}

}  // namespace gaf::codegen
