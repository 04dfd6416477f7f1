// The scalar formula of an op for a generated kernel's loop, from its definition (src/ops: OpInfo::scalar).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gaf/graph.h"
#include "gaf/op_registry.h"

namespace gaf::codegen {

// The expression computing n's (single) output from argument expressions `args` (one per input, "" for an absent
// optional input) whose types are `types`. nullopt with `why` when the op has no scalar formula or its formula
// does not cover this node's attributes or inputs.
std::optional<ScalarExpr> scalar_expr(const Node& n, const std::vector<std::string>& args,
                                      const std::vector<ScalarType>& types, std::string* why);

}  // namespace gaf::codegen
