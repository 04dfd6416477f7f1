// Reductions and the ops built on a row reduction: Reduce*, ArgMax/ArgMin, CumSum, the Softmax family and the
// normalisations. Flops are per output element unless a flop function counts them per input element.
#include "ops/reduction.h"

#include <algorithm>

#include "gaf/tensor.h"
#include "ops/ops.h"

namespace gaf::ops {

namespace {

constexpr uint32_t P = kPrecisionSensitive;

// `per_element` flops per element of input 0 when its shape is static, else 0.
std::function<double(const Node&)> input_flops(double per_element) {
  return [per_element](const Node& n) -> double {
    const Value* x = n.input(0);
    if (!x || !x->type.has_static_shape()) return 0.0;
    return double(numel_of(x->type.static_dims())) * per_element;
  };
}

void reduce(OpRegistry& r, const char* name, double flops, uint32_t flags) {
  r.add(name, OpKind::Reduction).set_flags(flags).set_flops_per_element(flops).set_flops(input_flops(flops));
}

}  // namespace

std::optional<std::vector<int64_t>> reduced_axes(const Node& n, int64_t rank,
                                                 const std::vector<int64_t>* axes_input,
                                                 bool axes_input_known) {
  if (rank < 0) return std::nullopt;
  std::vector<int64_t> axes;
  if (n.has_attr("axes")) {
    axes = n.attr_ints("axes");
  } else if (n.input(1)) {
    if (!axes_input_known || !axes_input) return std::nullopt;
    axes = *axes_input;
  }
  if (axes.empty()) {
    if (n.attr_int("noop_with_empty_axes", 0)) return std::nullopt;
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  }
  for (int64_t& a : axes) {
    if (a < -rank || a >= rank) return std::nullopt;
    if (a < 0) a += rank;
  }
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) return std::nullopt;
  return axes;
}

void register_reduction_ops(OpRegistry& r) {
  // Flops are per input element.
  reduce(r, "ReduceSum", 1, P);
  reduce(r, "ReduceMean", 1, P);
  reduce(r, "ReduceMax", 1, kNone);
  reduce(r, "ReduceMin", 1, kNone);
  reduce(r, "ReduceProd", 1, P);
  reduce(r, "ReduceL1", 2, P);
  reduce(r, "ReduceL2", 2, P);
  reduce(r, "ReduceLogSum", 1, P);
  reduce(r, "ReduceLogSumExp", 13, P);
  reduce(r, "ReduceSumSquare", 2, P);
  reduce(r, "ArgMax", 1, kNone);
  reduce(r, "ArgMin", 1, kNone);
  r.add("CumSum", OpKind::Reduction).set_flags(P).set_flops_per_element(1);

  r.add("Softmax", OpKind::Reduction).set_flags(P).set_flops_per_element(15);
  r.add("LogSoftmax", OpKind::Reduction).set_flags(P).set_flops_per_element(15);
  r.add("Hardmax", OpKind::Reduction).set_flops_per_element(2);

  r.add("LayerNormalization", OpKind::Reduction).set_flags(P).set_flops_per_element(8);
  r.add("InstanceNormalization", OpKind::Reduction).set_flags(P).set_flops_per_element(7);
  r.add("LpNormalization", OpKind::Reduction).set_flags(P).set_flops_per_element(4);
  r.add("MeanVarianceNormalization", OpKind::Reduction).set_flags(P).set_flops_per_element(6);
  r.add("LRN", OpKind::Reduction).set_flags(P).set_flops_per_element(15);
  // Our own domain's (attention fusion's and norm recognition's results).
  r.add("LayerNormalization", OpKind::Reduction, "gaf").set_flags(P).set_flops_per_element(8);
  r.add("RMSNormalization", OpKind::Reduction, "gaf").set_flags(P).set_flops_per_element(5);
}

}  // namespace gaf::ops
