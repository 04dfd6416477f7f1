#include <mutex>

#include "runtime/kernels/families.h"

namespace gaf::runtime {

void register_all_kernel_families(KernelRegistry& r) {
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
  register_control_flow_ops(r);
  register_sequence_ops(r);
  register_gaf_ops(r);
  register_extra_ops(r);
  register_attention_ops(r);
  register_expand_depthwise_ops(r);
  register_squeeze_excitation_ops(r);
  register_compressed_matmul(r);
}

const KernelRegistry& KernelRegistry::cpu() {
  static KernelRegistry registry;
  static std::once_flag once;
  std::call_once(once, [] { register_all_kernel_families(registry); });
  return registry;
}

KernelRegistry::Entry& KernelRegistry::add(std::string op_type, std::string domain) {
  const OpInfo* op = OpRegistry::instance().find(op_type, domain);
  GAF_ASSERT(op, "a kernel for an op src/ops does not define: " + op_type);
  GAF_ASSERT(!kernels_.count(op), "kernel registered twice: " + op_type);
  return kernels_[op];
}

const KernelFactory* KernelRegistry::find(const OpInfo* op) const {
  auto it = op ? kernels_.find(op) : kernels_.end();
  return it == kernels_.end() || !it->second.make ? nullptr : &it->second.make;
}

const KernelFactory* KernelRegistry::find(std::string_view op_type, std::string_view domain) const {
  return find(OpRegistry::instance().find(op_type, domain));
}

const KernelFactory* KernelRegistry::find(const Node& n) const { return find(find_op(n)); }

}  // namespace gaf::runtime
