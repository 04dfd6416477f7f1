// Targets and the cost model.
//
//   time(kernel) = max(bytes / dram_bandwidth, flops / peak) + spill + launch_overhead
//   benefit(merge A+B) = time(A) + time(B) - time(A+B)
//
// where bytes counts each distinct value a kernel reads or writes in DRAM once: intermediates internal to a fused
// group cost nothing, which is the whole point of fusing. Nothing is charged for recomputation because a group
// recomputes nothing: legality refuses members of different element counts (SHAPE_MISMATCH), so no small op is
// evaluated once per element of a larger one; a reduction's per-row values are computed once per row. (Generated
// row kernels may evaluate a cheap row-shaped value inside each reduction that reads it instead of buffering it:
// their own choice, made where it is cheaper.)
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gaf/graph.h"

namespace gaf {

struct Target {
  std::string name;
  double dram_bandwidth = 35e9;       // bytes/s
  double onchip_bytes = 1 << 20;      // fast memory per core (CPU: L2; GPU: shared memory/L1 per SM)
  double launch_overhead_s = 2e-6;    // per kernel dispatch
  double vector_flops = 100e9;        // elementwise arithmetic peak, flop/s
  double matrix_flops = 210e9;        // GEMM/conv peak, flop/s
  // The cores (GPU: SMs) the rates above were measured over, as calibrate records them. The model takes the
  // whole machine's rates and no per-core figure: charging a kernel of fewer rows than cores for the idle ones
  // made it refuse fusions that measured faster (docs/performance.md, row extremes).
  int cores = 2;
  // Whether a convolution can end in a Clip (ReLU6) inside one kernel at full speed. oneDNN 2.6 on the CPU: no
  // (its gemm-based 1x1 convolutions apply the bounded-relu post-op ~7x slower than the convolution itself).
  bool conv_clip_epilogue = true;
  // Whether 3x3 stride-1 convolutions may run as Winograd convolutions (fewer multiplies, fp32 throughout, a
  // rounding difference of the order of the summation-order one). The CPU runtime: oneDNN's AVX-512 kernels.
  bool conv_winograd = false;
  // Whether an expansion 1x1 convolution and the depthwise convolution reading it may run as one kernel that keeps
  // the expanded activation in cache (gaf.ExpandDepthwiseConv). The CPU runtime: AVX-512 builds.
  bool conv_expand_depthwise = false;
  // With conv_expand_depthwise: fuse every block the kernel runs, also those where it measured slower than the
  // two convolutions apart (stride 2 with a 5x5 window or SiLU/HardSwish); for measuring them (gaf_block_bench).
  bool conv_expand_depthwise_everywhere = false;
  // Whether convolutions run channels-last (NHWC): the CPU backend adds its layout passes to the pipeline only
  // where this holds (KernelBackend::pipeline_passes); false keeps a CPU target's convolutions NCHW. The CUDA
  // backend adds none whatever this says (cuDNN takes the model's NCHW as it is).
  bool channels_last = true;
  // The backend that runs the plan: "cpu" (the CPU runtime) or "cuda" (the planner asks it whether it prints each
  // group it would form: codegen::cuda_kernel_backend()).
  std::string backend = "cpu";

  // "cpu-host", "cuda-h200", "ascend910b", or a JSON file with these fields. Throws naming the bad field.
  static Target builtin_or_file(const std::string& name_or_path);
  // A target JSON's text (what builtin_or_file reads from a file); `source` names it in errors.
  static Target parse(const std::string& json_text, const std::string& source = "target");
  static Target cpu_host();
  std::string to_json() const;
};

// What the cost model needs to know about a would-be kernel (a single node or a fused group).
struct KernelStats {
  double bytes = 0;        // DRAM traffic: distinct external inputs + outputs
  double flops = 0;        // arithmetic on vector units
  double matrix_flops = 0; // arithmetic on matrix units (anchors)
  double working_set = 0;  // bytes that must stay on chip per tile for the kernel to stream once
  int num_ops = 0;
};

class CostModel {
 public:
  explicit CostModel(Target t) : target_(std::move(t)) {}
  virtual ~CostModel() = default;
  const Target& target() const { return target_; }
  // Modeled time of one kernel; virtual so tests can substitute a mock.
  virtual double kernel_time(const KernelStats& k) const;

 protected:
  Target target_;
};

// Per-node and per-group statistics from value types and the op registry. Values with symbolic dims are
// costed with `dynamic_dim` in place of each unknown dimension.
double value_bytes(const Value* v, int64_t dynamic_dim = 1);
KernelStats node_stats(const Node& n);
// Stats of a set of nodes run as one kernel: external inputs and escaping outputs count, internal values do not.
KernelStats group_stats(const std::vector<const Node*>& nodes, const Graph& g);

// Modeled totals over a whole graph (each node one kernel; fused nodes one kernel).
struct GraphCost {
  size_t nodes = 0, kernels = 0;
  double bytes = 0, time_s = 0;
  double peak_memory_bytes = 0;  // liveness simulation of intermediate values in schedule order
  // Symbolic dims costed as 1: the graph inputs' named dims, and "?" when some value has a dim known by no name
  // (sorted). The estimates of a model exported with dynamic axes are those of size 1 along them.
  std::vector<std::string> dims_costed_as_1;
};
// Of g and, once each, the subgraphs of its control-flow nodes (a Loop's trip count is known at run time
// only).
GraphCost graph_cost(const Graph& g, const CostModel& cm);

// True for nodes that launch no kernel at run time (constants).
bool is_free_node(const Node& n);

}  // namespace gaf
