// What a Reduce* op reduces: its one definition, read by the rewrites, the planner, shape inference and the
// emitter (the CPU kernel validates the same rules at run time, with an error for each).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "gaf/graph.h"

namespace gaf::ops {

// The axes a Reduce* node reduces over an input of rank `rank`, normalised to [0, rank) and sorted: the
// `axes` attribute (older opsets), else `axes_input`, the value of its axes input (from opset 13 / 18; null
// when the node has no such input). No axes reduce every axis, unless noop_with_empty_axes is set. nullopt:
// the node has an axes input whose value is not known (`axes_input_known` false), reduces nothing, or lists
// an axis out of range or twice.
std::optional<std::vector<int64_t>> reduced_axes(const Node& n, int64_t rank,
                                                 const std::vector<int64_t>* axes_input,
                                                 bool axes_input_known = true);

}  // namespace gaf::ops
