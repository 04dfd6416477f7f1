// The body a gaf.fused node runs op by op when no generated kernel exists for it.
#pragma once

#include <memory>

#include "gaf/graph.h"

namespace gaf::runtime {

// A copy of `fused`'s body in which every body input that the call site binds to a constant of the outer graph
// (weights, biases) reads a constant instead: kernels prepare constants once (a Conv or MatMul packs constant
// weights into its preferred layout when built) but treat fed inputs anew on every run. The inputs stay inputs,
// unused, so the body takes the same feeds.
std::unique_ptr<Graph> body_with_bound_constants(const Node& fused);

}  // namespace gaf::runtime
