// ReduceSum, ReduceMean, ReduceSumSquare, ReduceL1, ReduceL2, ReduceLogSum: instantiations of the engine.
#include "runtime/kernels/onnx/reduce_ops.h"

namespace gaf::runtime::rn {

namespace {

template <class T>
void run_typed(ReduceKind kind, const ReduceGeometry& g, const T* x, T* y) {
  using C = compute_t<T>;
  switch (kind) {
    case ReduceKind::Sum:
      return run_reduce<SumOp<C>>(g, x, y);
    case ReduceKind::Mean:
      return run_reduce<MeanOp<C>>(g, x, y);
    case ReduceKind::SumSquare:
      return run_reduce<SumSquareOp<C>>(g, x, y);
    case ReduceKind::L1:
      return run_reduce<L1Op<C>>(g, x, y);
    case ReduceKind::L2:
      return run_reduce<L2Op<C>>(g, x, y);
    case ReduceKind::LogSum:
      return run_reduce<LogSumOp<C>>(g, x, y);
    default:
      break;
  }
  GAF_ASSERT(false, "run_sum_family: not a sum-like reduction");
}

}  // namespace

void run_sum_family(const Node& node, ReduceKind kind, const ReduceGeometry& g, const Tensor& x, Tensor& y) {
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || is_f16_v<T> ||
                  std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t> || std::is_same_v<T, uint32_t> ||
                  std::is_same_v<T, uint64_t>) {
      run_typed<T>(kind, g, x.data<T>(), y.data<T>());
    } else {
      unsupported(
          "{}: element type {} is not supported (float, double, float16, bfloat16, int32, int64, "
          "uint32, uint64 are)",
          node.describe(), dtype_name(x.dtype()));
    }
  });
}

}  // namespace gaf::runtime::rn
