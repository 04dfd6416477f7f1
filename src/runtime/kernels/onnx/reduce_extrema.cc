// ReduceMax, ReduceMin, ReduceProd, ReduceLogSumExp: instantiations of the engine.
#include "runtime/kernels/onnx/reduce_ops.h"

namespace gaf::runtime::rn {

namespace {

template <class T>
void run_typed(ReduceKind kind, const ReduceGeometry& g, const T* x, T* y) {
  using C = compute_t<T>;
  switch (kind) {
    case ReduceKind::Max:
      return run_reduce<MaxOp<C>>(g, x, y);
    case ReduceKind::Min:
      return run_reduce<MinOp<C>>(g, x, y);
    case ReduceKind::Prod:
      return run_reduce<ProdOp<C>>(g, x, y);
    case ReduceKind::LogSumExp: {
      // Shifted by the maximum of each reduced set (see LogSumExpOp).
      std::vector<C> shift(static_cast<size_t>(g.outputs));
      run_reduce<MaxOp<C>>(g, x, shift.data());
      return run_reduce<LogSumExpOp<C>>(g, x, y, shift.data());
    }
    default:
      break;
  }
  GAF_ASSERT(false, "run_extrema_family: not an extremum-like reduction");
}

template <class T>
inline constexpr bool minmax_type_v = std::is_same_v<T, int8_t> || std::is_same_v<T, uint8_t>;

}  // namespace

void run_extrema_family(const Node& node, ReduceKind kind, const ReduceGeometry& g, const Tensor& x,
                        Tensor& y) {
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || is_f16_v<T> ||
                  std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t> || std::is_same_v<T, uint32_t> ||
                  std::is_same_v<T, uint64_t>) {
      run_typed<T>(kind, g, x.data<T>(), y.data<T>());
    } else if constexpr (minmax_type_v<T>) {
      if (kind == ReduceKind::Max) return run_reduce<MaxOp<T>>(g, x.data<T>(), y.data<T>());
      if (kind == ReduceKind::Min) return run_reduce<MinOp<T>>(g, x.data<T>(), y.data<T>());
      unsupported("{}: element type {} is supported by ReduceMax and ReduceMin only", node.describe(),
                  dtype_name(x.dtype()));
    } else {
      unsupported(
          "{}: element type {} is not supported (float, double, float16, bfloat16, int32, int64, uint32, "
          "uint64 are; int8 and uint8 for ReduceMax/ReduceMin)",
          node.describe(), dtype_name(x.dtype()));
    }
  });
}

}  // namespace gaf::runtime::rn
