// Scalar C++ expressions for the elementwise ops the CPU emitter can inline into a fused loop.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gaf/graph.h"

namespace gaf::codegen {

enum class ScalarType { F32, Bool };

struct ScalarExpr {
  std::string expr;
  ScalarType type = ScalarType::F32;
};

// The expression computing n's (single) output from argument expressions `args` (one per input, "" for an absent
// optional input) whose types are `types`. nullopt with `why` when the op or an attribute value is not handled.
std::optional<ScalarExpr> scalar_expr(const Node& n, const std::vector<std::string>& args,
                                      const std::vector<ScalarType>& types, std::string* why);

// A C++ float literal that reproduces v exactly.
std::string float_literal(double v);

}  // namespace gaf::codegen
