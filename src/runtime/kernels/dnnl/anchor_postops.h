#pragma once

#include <optional>
#include <string>

#include "gaf/graph.h"
#include "gaf/kernel.h"

namespace gaf::runtime {

// A kernel running a fused anchor group as one oneDNN primitive with post-ops, or nullopt with `why`.
std::optional<KernelFactory> anchor_postop_kernel(const Node& fused, std::string* why);

}  // namespace gaf::runtime
