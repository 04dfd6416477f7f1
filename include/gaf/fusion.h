// The fusion engine: rules, legality, planning and applying a plan.
//
//   FusionRules   the user's JSON rules file (forbid / force patterns, global switches, skip lists)
//   can_fuse      legality of merging two groups, no side effects, a reason code for every "no"
//   plan_fusion   groups + a decision log for every producer->consumer candidate
//   apply_fusion  each group of two or more ops becomes one fused node owning its body subgraph
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gaf/cost.h"
#include "gaf/graph.h"
#include "gaf/op_registry.h"
#include "gaf/passes.h"

namespace gaf {

enum class Reason {
  Fused,
  Cycle,
  OpaqueOp,
  StatefulOrRandom,
  MultipleAnchors,
  ReductionPosition,
  AnchorPosition,  // an anchor takes epilogues only: nothing fuses in front of it or after a reduction into it
  DtypeMismatch,
  ShapeMismatch,   // members do not share one iteration space (a small op would be recomputed per element)
  ShapeUnknown,
  ResourceLimit,
  MaxGroupSize,
  MaxInputs,
  RuleForbid,
  GraphOutputConflict,
  MultiOutput,     // the merge needs a second group output: multi-output fusion is opt level 3
  NegativeBenefit,
  FusionDisabled,
  TargetUnsupported,  // the target has no fast single kernel for this group (e.g. Conv+Clip on oneDNN CPU)
  BackendUnsupported,  // the target's backend cannot build the group's kernel (KernelBackend::cannot_emit)
};
std::string_view reason_name(Reason r);  // "CYCLE", "OPAQUE_OP", ...

struct FusionDecision {
  Reason reason = Reason::Fused;
  std::string detail;
  bool ok() const { return reason == Reason::Fused; }
  static FusionDecision yes() { return {}; }
  static FusionDecision no(Reason r, std::string detail) { return {r, std::move(detail)}; }
};

// A chain pattern: "MatMul -> Add -> Gelu"; a token is an op type, "*" (any op) or "@elementwise" / "@broadcast" /
// "@injective" / "@reduction" / "@anchor" / "@opaque" (a category).
struct Pattern {
  std::string text;
  std::vector<std::string> tokens;
  static Pattern parse(const std::string& text);  // throws on an empty token
  bool token_matches(size_t i, const Node& n) const;
};

struct FusionRule {
  Pattern pattern;
  enum class Action { Forbid, Force } action;
  std::string reason;
};

// fp16_mixed: fp16 regions, precision-sensitive ops kept apart; bf16_mixed / int8_weights: the constant weights of
// large products stored in bf16 / per-output-channel symmetric int8, dequantised inside the product (fp32
// activations and accumulation; weight-compression pass). tf32: products and convolutions on a GPU's tensor cores
// in TF32 (the CPU, which has none, computes fp32).
enum class PrecisionMode { Fp32, Fp16Mixed, Bf16Mixed, Int8Weights, Tf32 };

struct FusionRules {
  bool enable_fusion = true;
  PrecisionMode precision_mode = PrecisionMode::Fp32;
  int max_ops_per_group = 64;
  int max_inputs_per_group = 8;
  int max_rounds = 10;
  double onchip_fraction = 0.8;  // "constraint": onchip_usage < F * onchip_capacity
  bool winograd = true;          // "winograd": false keeps every convolution direct (bit-closer to other runtimes)
  std::vector<FusionRule> rules;
  std::set<std::string> skip_nodes;     // node names never fused
  std::set<std::string> skip_op_types;  // op types never fused
  std::set<std::string> skip_passes;    // rewrite passes not run (their names as in the report's rewrites[])

  // Parses the JSON rules file; unknown keys and bad values are errors naming the key and line.
  static FusionRules parse(const std::string& json_text, const std::string& source = "rules");
  static FusionRules load(const std::string& path);
  // --rules FILE, else $GAF_FUSION_CONFIG, else $ASCEND_FUSION_CONFIG, else defaults.
  static FusionRules from_env_or_file(const std::string& path);
};

// The planner's view of the backend that will run the plan (the seam of issue #25): before two groups merge it asks
// whether the backend builds the merged group's kernel, and a "no" is the decision BACKEND_UNSUPPORTED with the
// backend's reason. Implemented by the backends (the CUDA one: codegen::cuda_kernel_backend()).
class KernelBackend {
 public:
  virtual ~KernelBackend() = default;
  virtual std::string_view name() const = 0;
  // "" when the backend runs `nodes` (a would-be group of graph g, in order) as one kernel, or as one library call
  // and one kernel for its epilogue; else why not.
  virtual std::string cannot_emit(const std::vector<const Node*>& nodes, const Graph& g) const = 0;
  // The most values a group led by an anchor (a library call) may return; the library's epilogue (post-ops)
  // decides it.
  virtual int anchor_group_outputs() const = 0;
  // What writes an anchor group's outputs, for the reason given when a group would return more.
  virtual std::string_view anchor_epilogue() const = 0;
  // The rewrites this backend adds to the pipeline at `opt_level` for `target` (PassManager::for_opt_level): the
  // layouts and algorithms its kernels want, which the graph then shows (the CPU: channels-last convolutions,
  // Winograd, expansion + depthwise blocks; CUDA: none, cuDNN takes the model's NCHW).
  virtual std::vector<std::unique_ptr<Pass>> pipeline_passes(int opt_level, const Target& target) const = 0;
  // What the rules' precision_mode means on this backend. `weight_precision`: the form the pipeline's
  // weight-compression gives constant product weights ("bf16", "int8"; "" none: PassContext::weight_precision).
  // `precision_passes`: rewrites run once after the pipeline, before planning (CUDA: bf16 / fp16 storage). A mode
  // the backend cannot run is an error naming it.
  virtual std::string weight_precision(PrecisionMode mode) const = 0;
  virtual std::vector<std::unique_ptr<Pass>> precision_passes(PrecisionMode mode) const = 0;
};

struct FusionOptions {
  int opt_level = 2;  // 0 none, 1 rewrites only, 2 + fusion, 3 + multi-output / horizontal / aggressive
  FusionRules rules;
  const KernelBackend* backend = nullptr;  // tools::fuse_model installs the target's (codegen::cpu_kernel_backend)
};

// A group under construction: member nodes in topological order.
struct Group {
  int id = -1;
  std::vector<const Node*> nodes;
  OpKind kind = OpKind::Elementwise;
  int anchors = 0;
  bool horizontal = false;  // formed by sibling fusion
};

struct DecisionRecord {
  std::string producer, consumer;  // node names
  std::string value;               // the value on the edge ("" for horizontal candidates)
  bool fused = false;
  Reason reason = Reason::Fused;
  double benefit_s = 0;
  std::string detail;
};

struct GroupSummary {
  std::string name;
  std::string scope;  // "" in the main graph; in a subgraph, where it is: "node 'loop' (Loop) body"
  std::vector<std::string> ops, nodes;
  double bytes_saved = 0, benefit_s = 0;
  // The cost model's time of the members run one kernel each and of the group as one kernel (benefit_s is
  // their difference).
  double modeled_unfused_s = 0, modeled_fused_s = 0;
};

struct FusionPlan {
  std::vector<Group> groups;  // every node in exactly one group (singletons included)
  std::vector<DecisionRecord> decisions;
  size_t candidates = 0;
  std::string to_string() const;
};

// Legality of merging a and b (as one kernel) in g. Reads only; the cost model is not consulted here.
FusionDecision can_fuse(const Group& a, const Group& b, const Graph& g, const FusionOptions& opts,
                        const Target& target);

FusionPlan plan_fusion(const Graph& g, const CostModel& cm, const FusionOptions& opts);

// Rewrites g: each group of two or more nodes becomes one fused node (domain "gaf.fused", op type named after
// its ops, after `name_prefix`: a subgraph's groups are named after the node and attribute holding it, so
// names stay unique in the model) owning its body. Returns the summaries of the fused groups.
std::vector<GroupSummary> apply_fusion(Graph& g, const FusionPlan& plan, const CostModel& cm,
                                       const std::string& name_prefix = "");

}  // namespace gaf
