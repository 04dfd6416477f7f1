#include "gaf/op_registry.h"

#include <cmath>
#include <cstdio>
#include <mutex>

#include "gaf/graph.h"
#include "ops/ops.h"

namespace gaf {

std::string_view op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::Elementwise: return "elementwise";
    case OpKind::Broadcast: return "broadcast";
    case OpKind::Injective: return "injective";
    case OpKind::Reduction: return "reduction";
    case OpKind::Anchor: return "anchor";
    case OpKind::Opaque: return "opaque";
  }
  return "?";
}

std::string float_literal(double v) {
  float f = float(v);
  if (std::isnan(f)) return "__builtin_nanf(\"\")";
  if (std::isinf(f)) return f > 0 ? "__builtin_inff()" : "(-__builtin_inff())";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9gf", double(f));
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s.insert(s.size() - 1, ".0");
  return "(" + s + ")";
}

OpRegistry& OpRegistry::instance() {
  static OpRegistry registry;
  static std::once_flag once;
  std::call_once(once, [] { ops::register_all(registry); });
  return registry;
}

OpInfo& OpRegistry::add(std::string op_type, OpKind kind, std::string domain) {
  auto key = std::make_pair(op_type, domain);
  GAF_ASSERT(!ops_.count(key), "op registered twice: " + op_type);
  OpInfo& info = ops_[key];
  info.op_type = std::move(op_type);
  info.domain = std::move(domain);
  info.kind = kind;
  return info;
}

const OpInfo* OpRegistry::find(std::string_view op_type, std::string_view domain) const {
  if (domain == "ai.onnx") domain = "";
  auto it = ops_.find(std::make_pair(std::string(op_type), std::string(domain)));
  return it == ops_.end() ? nullptr : &it->second;
}

const OpInfo* find_op(const Node& n) {
  // A fused node is named after its ops (MatMul_Add_Gelu_3) but is one kind of op: a body to run.
  if (n.body) return OpRegistry::instance().find("FusedOp", "gaf.fused");
  return OpRegistry::instance().find(n.op_type, n.domain);
}

OpKind op_kind(const Node& n) {
  const OpInfo* info = find_op(n);
  return info ? info->kind : OpKind::Opaque;
}

}  // namespace gaf
