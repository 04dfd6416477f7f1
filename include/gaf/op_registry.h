// The op definitions table: the single source of truth for what each op is. The op families of src/ops define
// every op here (kind, flags, flop count, the scalar formula generated kernels compute); the passes, the planner,
// the cost model and the emitters all read this one table. Kernels are not ops: each backend keeps its own
// registry of kernels for these ops (the CPU runtime's is runtime::KernelRegistry).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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
  kView = 1u << 5,                // the input's elements in the same order under new dims (Reshape, Flatten,
                                  // Squeeze, Unsqueeze): run alone, a contiguous input is taken as is, no copy
};

// A fused kernel computes a Concat along an outer axis by reading every operand at each element and selecting
// one, so only such a Concat of at most this many operands joins a fused group (along the innermost axis it
// loops over the operands in turn: any number).
constexpr int kMaxFusedConcatOperands = 4;

// The scalar formula of an elementwise op, as an expression the emitters print into a generated kernel: operands
// are expressions too, and the vocabulary is the helper functions every printer's prelude defines (gaf_exp,
// gaf_erf, gaf_sigmoid, gaf_max, ...: codegen/cpu/prelude.cc, codegen/cuda/prelude.cc), so the CPU and GPU
// kernels compute the same formula.
enum class ScalarType { F32, Bool };
struct ScalarExpr {
  std::string expr;
  ScalarType type = ScalarType::F32;
};
// n's (single) output from argument expressions `args` (one per input, "" for an absent optional input) whose
// types are `types`; nullopt with `why` set when an attribute value or an input form is not handled.
using ScalarFormula = std::function<std::optional<ScalarExpr>(
    const Node& n, const std::vector<std::string>& args, const std::vector<ScalarType>& types, std::string* why)>;
// A C++ float literal that reproduces v exactly (also valid CUDA).
std::string float_literal(double v);

struct OpInfo {
  std::string op_type;
  std::string domain;
  OpKind kind = OpKind::Opaque;
  uint32_t flags = kNone;
  // Arithmetic per output element (elementwise-like ops) used by the cost model; anchors give a flops function.
  double flops_per_element = 1.0;
  std::function<double(const Node&)> flops;  // total flops when shapes are known; null: flops_per_element
  ScalarFormula scalar;                      // elementwise ops a generated kernel can inline; null: none

  // Fluent setters for registration.
  OpInfo& set_flags(uint32_t f) { flags = f; return *this; }
  OpInfo& set_flops_per_element(double f) { flops_per_element = f; return *this; }
  OpInfo& set_flops(std::function<double(const Node&)> f) { flops = std::move(f); return *this; }
  OpInfo& set_scalar(ScalarFormula f) { scalar = std::move(f); return *this; }
};

class OpRegistry {
 public:
  static OpRegistry& instance();  // populated on first use by every op family (src/ops)
  OpInfo& add(std::string op_type, OpKind kind, std::string domain = "");
  const OpInfo* find(std::string_view op_type, std::string_view domain = "") const;
  const std::map<std::pair<std::string, std::string>, OpInfo>& all() const { return ops_; }

 private:
  std::map<std::pair<std::string, std::string>, OpInfo> ops_;
};

const OpInfo* find_op(const Node& n);
OpKind op_kind(const Node& n);  // Opaque when the op is unknown

}  // namespace gaf
