#include "runtime/kernels/onnx/reduce_engine.h"

namespace gaf::runtime::rn {

ReduceGeometry make_reduce_geometry(const std::vector<int64_t>& dims, const std::vector<bool>& reduce,
                                    bool keepdims, const Node& node) {
  GAF_ASSERT(dims.size() == reduce.size(), "reduce mask does not match the rank");
  ReduceGeometry g;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (reduce[i]) {
      g.reduced *= dims[i];
      if (keepdims) g.out_dims.push_back(1);
    } else {
      g.outputs *= dims[i];
      g.out_dims.push_back(dims[i]);
    }
  }
  if (g.outputs == 0 || g.reduced == 0) return g;  // nothing to walk

  // Collapse: drop size-1 dims, merge neighbours of the same kind.
  std::vector<int64_t> gd;
  std::vector<bool> gr;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    if (!gd.empty() && gr.back() == reduce[i])
      gd.back() *= dims[i];
    else {
      gd.push_back(dims[i]);
      gr.push_back(reduce[i]);
    }
  }
  std::vector<int64_t> strides(gd.size(), 1);
  for (int i = int(gd.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * gd[i + 1];
  size_t n = gd.size();
  if (n > 0 && !gr[n - 1]) {
    g.K = gd[n - 1];
    --n;
  }
  for (size_t i = 0; i < n; ++i) {
    if (gr[i]) {
      g.rdims.push_back(gd[i]);
      g.rstrides.push_back(strides[i]);
    } else {
      g.kdims.push_back(gd[i]);
      g.kstrides.push_back(strides[i]);
    }
  }
  if (g.rdims.size() > 16 || g.kdims.size() > 16)
    unsupported(
        "{}: reductions alternating between more than 16 groups of reduced and kept axes are not "
        "supported",
        node.describe());
  return g;
}

}  // namespace gaf::runtime::rn
