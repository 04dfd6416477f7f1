// Variadic Max, Min, Sum, Mean (1..N inputs, numpy broadcasting of all of them). The output is folded
// pairwise in place: out = op(x0, x1), then out = op(out, xk). fp16/bf16 inputs are widened to fp32 first so
// that the intermediate results are not rounded to 16 bits at every step; the output is rounded once.
#include <cmath>

#include "runtime/kernels/onnx/elementwise_util.h"

namespace gaf::runtime::ew {

namespace {

// NaN propagates (numpy.maximum / numpy.minimum).
struct MaxOp {
  static constexpr unsigned kTypes = kTNumeric;
  static constexpr bool kMean = false;
  template <class C>
  C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>)
      return (a > b || a != a) ? a : b;
    else
      return a > b ? a : b;
  }
};

struct MinOp {
  static constexpr unsigned kTypes = kTNumeric;
  static constexpr bool kMean = false;
  template <class C>
  C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>)
      return (a < b || a != a) ? a : b;
    else
      return a < b ? a : b;
  }
};

struct SumOp {
  static constexpr unsigned kTypes = kTFloating;
  static constexpr bool kMean = false;
  template <class C>
  C operator()(C a, C b) const {
    return a + b;
  }
};

struct MeanOp : SumOp {
  static constexpr bool kMean = true;
};

template <class C>
struct DivideBy {
  C n;
  C operator()(C x) const { return x / n; }
};

// Folds inputs (compute type C, each read in its own dims) into out (dims odims).
template <class C, class Op>
void fold(const std::vector<const C*>& ins, const std::vector<std::vector<int64_t>>& dims, C* out,
          const std::vector<int64_t>& odims, int64_t numel, const Op& op) {
  const int64_t grain = grain_for(1);
  binary_broadcast(ins[0], dims[0], ins[1], dims[1], out, odims, op, grain);
  for (size_t k = 2; k < ins.size(); ++k)
    binary_broadcast(out, odims, ins[k], dims[k], out, odims, op, grain);
  if constexpr (Op::kMean) unary_map(out, out, numel, DivideBy<C>{C(ins.size())}, grain);
}

template <class Op>
void variadic_kernel(KernelContext& ctx) {
  const Node& n = ctx.node();
  const int count = ctx.num_inputs();
  GAF_CHECK(count >= 1, "{}: needs at least one input", n.describe());
  std::vector<std::vector<int64_t>> dims;
  const DType dt = ctx.in(0).dtype();
  for (int i = 0; i < count; ++i) {
    const Tensor& t = ctx.in(i);
    GAF_CHECK(t.dtype() == dt, "{}: input {} is {} but input 0 is {}", n.describe(), i, dtype_name(t.dtype()),
              dtype_name(dt));
    dims.push_back(t.dims());
  }
  dispatch<Op::kTypes>(dt, n, "input", [&](auto tag) {
    using S = decltype(tag);
    if (count == 1) {  // the identity: share the input's storage
      ctx.set_output(0, ctx.in(0));
      return;
    }
    std::vector<int64_t> odims = broadcast_shape(std::span<const std::vector<int64_t>>(dims), n);
    Tensor& out = ctx.allocate_output(0, dt, odims);
    if constexpr (is_f16_v<S>) {
      std::vector<Tensor> wide;
      std::vector<const float*> ptrs;
      for (int i = 0; i < count; ++i) {
        const Tensor& t = ctx.in(i);
        wide.emplace_back(DType::Float, t.dims(), ctx.allocator());
        const S* src = t.data<S>();
        float* dst = wide.back().template data<float>();
        parallel_for(t.numel(), 32768, [&](int64_t b, int64_t e) { to_float(src + b, dst + b, e - b); });
        ptrs.push_back(dst);
      }
      Tensor acc(DType::Float, odims, ctx.allocator());
      fold(ptrs, dims, acc.data<float>(), odims, acc.numel(), Op{});
      const float* pa = acc.data<float>();
      S* po = out.data<S>();
      parallel_for(out.numel(), 32768, [&](int64_t b, int64_t e) { from_float(pa + b, po + b, e - b); });
    } else {
      std::vector<const S*> ptrs;
      for (int i = 0; i < count; ++i) ptrs.push_back(ctx.in(i).template data<S>());
      fold(ptrs, dims, out.data<S>(), odims, out.numel(), Op{});
    }
  });
}

}  // namespace

void register_variadic_ops(KernelRegistry& r) {
  r.add("Max").set_kernel(fn_kernel(variadic_kernel<MaxOp>));
  r.add("Min").set_kernel(fn_kernel(variadic_kernel<MinOp>));
  r.add("Sum").set_kernel(fn_kernel(variadic_kernel<SumOp>));
  r.add("Mean").set_kernel(fn_kernel(variadic_kernel<MeanOp>));
}

}  // namespace gaf::runtime::ew
