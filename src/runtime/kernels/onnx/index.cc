// Indexing family: Gather*, Scatter*, OneHot, NonZero, Compress, Trilu, CumSum, TopK, Unique (index_*.cc).
#include "runtime/kernels/families.h"
#include "runtime/kernels/onnx/shape_util.h"

namespace gaf::runtime {

void register_index_ops(KernelRegistry& r) {
  register_index_gather_ops(r);
  register_index_scatter_ops(r);
  register_index_select_ops(r);
  register_index_sort_ops(r);
}

}  // namespace gaf::runtime
