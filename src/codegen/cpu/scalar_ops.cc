#include "codegen/cpu/scalar_ops.h"

#include <fmt/format.h>

namespace gaf::codegen {

std::optional<ScalarExpr> scalar_expr(const Node& n, const std::vector<std::string>& args,
                                      const std::vector<ScalarType>& types, std::string* why) {
  const OpInfo* info = find_op(n);
  const std::string op = n.domain.empty() ? n.op_type : n.domain + "." + n.op_type;
  if (!info || !info->scalar || args.empty()) {
    *why = fmt::format("op {} has no scalar formula for generated kernels", op);
    return std::nullopt;
  }
  std::optional<ScalarExpr> e = info->scalar(n, args, types, why);
  if (!e && why->empty()) *why = fmt::format("op {} has no scalar formula for this node's attributes or inputs", op);
  return e;
}

}  // namespace gaf::codegen
