// The op traits table: the single source of truth for what each op is. Each op family file registers its ops
// here (kind, flags, cost estimator, reference kernel); the passes, the planner, the runtime and codegen all read
// this one table.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace gaf {

class Node;
class Graph;

// Ordered: a group of ops has the max kind of its members (TVM's OpPatternKind).
enum class OpKind : uint8_t { Elementwise, Broadcast, Injective, Reduction, Anchor, Opaque };
std::string_view op_kind_name(OpKind k);

enum OpFlag : uint32_t {
  kNone = 0,
  kStateful = 1u << 0,
  kRandom = 1u << 1,
  kPrecisionSensitive = 1u << 2,  // exp/log/normalisation: keep fp32 under mixed precision
  kMatrixFlops = 1u << 3,         // an opaque op whose flops are products (runs at the matrix peak): attention
  kIndexable = 1u << 4,           // data movement a fused kernel folds into its index arithmetic (Transpose,
                                  // Reshape, Slice, Concat...); other injective ops (Gather, Pad) run alone
};

// A fused kernel computes a Concat along an outer axis by reading every operand at each element and selecting
// one, so only such a Concat of at most this many operands joins a fused group (along the innermost axis it
// loops over the operands in turn: any number).
constexpr int kMaxFusedConcatOperands = 4;

namespace runtime {
class Kernel;
}
using KernelFactory = std::function<std::unique_ptr<runtime::Kernel>(const Node&)>;

struct OpInfo {
  std::string op_type;
  std::string domain;
  OpKind kind = OpKind::Opaque;
  uint32_t flags = kNone;
  // Arithmetic per output element (elementwise-like ops) used by the cost model; anchors give a flops function.
  double flops_per_element = 1.0;
  std::function<double(const Node&)> flops;  // total flops when shapes are known; null: flops_per_element
  KernelFactory kernel;                      // reference CPU kernel; null: no runtime support

  // Fluent setters for registration.
  OpInfo& set_flags(uint32_t f) { flags = f; return *this; }
  OpInfo& set_flops_per_element(double f) { flops_per_element = f; return *this; }
  OpInfo& set_flops(std::function<double(const Node&)> f) { flops = std::move(f); return *this; }
  OpInfo& set_kernel(KernelFactory f) { kernel = std::move(f); return *this; }
};

class OpRegistry {
 public:
  static OpRegistry& instance();  // populated on first use by every op family
  OpInfo& add(std::string op_type, OpKind kind, std::string domain = "");
  const OpInfo* find(std::string_view op_type, std::string_view domain = "") const;
  const std::map<std::pair<std::string, std::string>, OpInfo>& all() const { return ops_; }

 private:
  std::map<std::pair<std::string, std::string>, OpInfo> ops_;
};

const OpInfo* find_op(const Node& n);
OpKind op_kind(const Node& n);  // Opaque when the op is unknown

}  // namespace gaf
