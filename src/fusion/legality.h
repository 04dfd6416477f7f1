#pragma once

#include "fusion/group_util.h"

namespace gaf::fusion_detail {

// can_fuse with a prebuilt index (the planner calls this many times on one graph).
FusionDecision can_fuse_indexed(const Group& a, const Group& b, const GraphIndex& index, const FusionOptions& opts,
                                const Target& target);

// Whether producer->consumer lies on a chain matching the pattern, every node of the chain in `scope` (or in the
// whole graph when scope is null).
bool edge_on_match(const Pattern& p, const Node& producer, const Node& consumer,
                   const std::set<const Node*>* scope);

}  // namespace gaf::fusion_detail
