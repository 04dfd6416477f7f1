// A graph's generated kernels as runtime kernels: the code generator emits and compiles every fused node's
// kernel (gaf/codegen.h), and each exported function, or a oneDNN primitive with post-ops for an anchor group,
// becomes a Kernel the Session runs.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gaf/codegen.h"
#include "gaf/graph.h"
#include "gaf/kernel.h"

namespace gaf::runtime {

// Factories for the fused nodes that got a kernel, reasons for those that did not.
struct GraphKernels {
  std::map<const Node*, KernelFactory> factories;
  std::map<const Node*, std::string> fallbacks;  // node -> why it runs op by op
  std::vector<codegen::EmittedKernel> kernels;
  codegen::CompileStats compile;  // their translation units, how many were compiled now and how long it took
};
GraphKernels build_graph_kernels(const Graph& g, const codegen::EmitOptions& emit,
                                 const codegen::CompileOptions& compile);

}  // namespace gaf::runtime
