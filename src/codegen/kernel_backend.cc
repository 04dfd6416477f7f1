// The kernel backends' answer to the planner (KernelBackend): whether the emitter's dialect (CPU C++, CUDA) prints
// a would-be group. A group it cannot print would run op by op inside its fused node, no faster than unfused, so
// the planner does not form it and `explain` says why (BACKEND_UNSUPPORTED).
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

// What both dialects' backends answer alike: a group is formed when the emitter prints it.
class EmitterBackend : public KernelBackend {
 public:
  EmitterBackend(std::string_view name, Dialect dialect) : name_(name) { opts_.dialect = dialect; }
  std::string_view name() const override { return name_; }
  std::string cannot_emit(const std::vector<const Node*>& nodes, const Graph& g) const override {
    // An anchor-led group is a library call (oneDNN, cuBLASLt, cuDNN) with its epilogue folded in or as a kernel
    // of its own; legality knows the libraries' limits.
    for (const Node* n : nodes)
      if (op_kind(*n) == OpKind::Anchor) return "";
    std::string why;
    std::vector<const Value*> inputs, outputs;
    return emit_group(nodes, g, "gaf_probe", opts_, &why, &inputs, &outputs) ? "" : why;
  }
  // oneDNN's post-ops (CPU) and cuBLASLt's epilogues and cuDNN's fused activations (CUDA) apply the chain on the
  // way out and write its last value only: an intermediate read outside would leave the group to run op by op.
  int anchor_group_outputs() const override { return 1; }

 private:
  std::string_view name_;
  EmitOptions opts_;
};

class CpuBackend final : public EmitterBackend {
 public:
  CpuBackend() : EmitterBackend("cpu", Dialect::Cpu) {}
  std::string_view anchor_epilogue() const override { return "oneDNN post-ops"; }
  // The CPU runtime's convolutions (oneDNN's and ours) run channels-last; a target may keep NCHW
  // (Target::channels_last false).
  std::vector<std::unique_ptr<Pass>> pipeline_passes(int opt_level, const Target& target) const override {
    if (opt_level < 2 || !target.channels_last) return {};
    return make_channels_last_passes();
  }
  // Products read compressed constant weights (gaf.CompressedMatMul); activations stay fp32.
  std::string weight_precision(PrecisionMode mode) const override {
    return mode == PrecisionMode::Bf16Mixed ? "bf16" : mode == PrecisionMode::Int8Weights ? "int8" : "";
  }
  std::vector<std::unique_ptr<Pass>> precision_passes(PrecisionMode) const override { return {}; }
};

class CudaBackend final : public EmitterBackend {
 public:
  CudaBackend() : EmitterBackend("cuda", Dialect::Cuda) {}
  std::string_view anchor_epilogue() const override { return "cuBLASLt / cuDNN epilogue"; }
  // cuDNN takes the model's NCHW as it is.
  std::vector<std::unique_ptr<Pass>> pipeline_passes(int, const Target&) const override { return {}; }
  // bf16_mixed / fp16_mixed: products on tensor cores from 16-bit operands (fp32 accumulation) and 16-bit values
  // between kernels; the pools and gather of src/backends/cuda follow their input's type.
  std::string weight_precision(PrecisionMode mode) const override {
    if (mode == PrecisionMode::Int8Weights)
      fail("precision_mode int8_weights: the CUDA backend has no int8 products; use bf16_mixed or fp16_mixed");
    return "";
  }
  std::vector<std::unique_ptr<Pass>> precision_passes(PrecisionMode mode) const override {
    std::vector<std::unique_ptr<Pass>> out;
    if (mode != PrecisionMode::Bf16Mixed && mode != PrecisionMode::Fp16Mixed) return out;
    StoragePolicy policy;
    policy.float_only = [](const Node&) { return false; };
    policy.follows_storage = [](const Node& n) { return library_kernel_any_float(n); };
    // The flash attention kernel reads Q, K, V and writes its output in 16 bits, the softmax in fp32; the
    // additive mask stays fp32.
    policy.narrow_inputs = [](const Node& n) {
      return n.domain == "gaf" && n.op_type == "Attention" ? std::vector<int>{0, 1, 2} : std::vector<int>{};
    };
    out.push_back(make_low_precision_storage(mode == PrecisionMode::Bf16Mixed ? DType::BFloat16 : DType::Float16,
                                             std::move(policy)));
    return out;
  }

 private:
  // The CUDA session's library kernels for pools and gather read and write fp32, bfloat16 or float16 (sums in
  // fp32, one rounding).
  static bool library_kernel_any_float(const Node& n) {
    if (!n.domain.empty()) return false;
    return n.op_type == "MaxPool" || n.op_type == "AveragePool" || n.op_type == "GlobalAveragePool" ||
           n.op_type == "GlobalMaxPool" || n.op_type == "Gather";
  }
};

}  // namespace

const KernelBackend& cpu_kernel_backend() {
  static const CpuBackend backend;
  return backend;
}

const KernelBackend& cuda_kernel_backend() {
  static const CudaBackend backend;
  return backend;
}

}  // namespace gaf::codegen
