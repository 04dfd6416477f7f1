#include "runtime/kernels/families.h"

namespace gaf::runtime {

void register_all_op_families(OpRegistry& r) {
  register_unary_ops(r);
  register_binary_ops(r);
  register_reduce_ops(r);
  register_normalization_ops(r);
  register_shape_ops(r);
  register_index_ops(r);
  register_dnnl_ops(r);
  register_misc_ops(r);
  register_random_ops(r);
  register_fused_ops(r);
  register_gaf_ops(r);
  register_extra_ops(r);
  register_attention_ops(r);
  register_expand_depthwise_ops(r);
  register_squeeze_excitation_ops(r);
  register_compressed_matmul(r);
}

}  // namespace gaf::runtime
