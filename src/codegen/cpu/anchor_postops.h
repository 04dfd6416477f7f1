#pragma once

#include <optional>
#include <string>

#include "gaf/graph.h"
#include "gaf/kernel.h"

namespace gaf::codegen {

// A kernel running a fused anchor group as one oneDNN primitive with post-ops, or nullopt with `why`.
std::optional<runtime::KernelFactory> anchor_postop_kernel(const Node& fused, std::string* why);

}  // namespace gaf::codegen
