// Unary math and activations: one templated kernel (UnaryKernel<Op>) maps the reference formula of each op of
// ops/unary.h (its operator(), on the compute type: fp32 for fp16/bf16) over contiguous data, for the element
// types the op takes; the op's flops per element set the parallel grain. fp32 exp/log/tanh/sigmoid/erf use
// the vectorisable implementations of ops/fastmath.h; double uses libm. Clip, whose bounds are inputs, has a
// kernel of its own.
#include "ops/unary.h"

#include <cmath>

#include "ops/simd_math.h"

#include "runtime/kernels/onnx/elementwise_util.h"
#include "runtime/kernels/families.h"

namespace gaf::runtime {

namespace {

using namespace ew;

// ---- vector forms ------------------------------------------------------------------------------

// The fp32 ops that run on a vector form of ops/simd_math.h where the build has one: Sin and Cos (libm's sinf
// is a scalar call, about 25x slower than a stream: 51 ms over 16M elements on 2 cores against 2.0 for Abs),
// Sigmoid (simd::logisticv: 5.1 -> 2.4 ms over 16M elements against fastmath::sigmoid as GCC vectorised it),
// Softplus and Mish (GCC left Mish's composition at 10-13% of a stream), Log and the expm1 activations (Elu,
// Selu, Celu: 4.6-5.0 ms as GCC vectorised fastmath's forms). `f(op, x)` takes the op for its attributes.
template <class Op>
struct VectorForm {
  static constexpr bool kHas = false;
};
#if defined(GAF_SIMD)
template <simd::vf (*F)(simd::vf)>
struct VectorFormIs {
  static constexpr bool kHas = true;
  template <class Op>
  static simd::vf f(const Op&, simd::vf x) {
    return F(x);
  }
};
template <>
struct VectorForm<ops::unary::SinOp> : VectorFormIs<simd::sinv> {};
template <>
struct VectorForm<ops::unary::CosOp> : VectorFormIs<simd::cosv> {};
template <>
struct VectorForm<ops::unary::SoftplusOp> : VectorFormIs<simd::softplusv> {};
template <>
struct VectorForm<ops::unary::MishOp> : VectorFormIs<simd::mishv> {};
template <>
struct VectorForm<ops::unary::SigmoidOp> : VectorFormIs<simd::logisticv> {};
template <>
struct VectorForm<ops::unary::LogOp> : VectorFormIs<simd::logv> {};

// The ops' own formulas, pos_part(x) + alpha expm1(neg_part(x) [/ alpha]) (gamma times that for Selu), with
// expm1 by simd::expm1v (fastmath::expm1's value). pos_part / neg_part select on x < 0 / x > 0 as the scalar
// forms do, so NaN and -0 pass through both.
inline simd::vf pos_part(simd::vf x) { return simd::select(simd::lt(x, simd::zero()), simd::zero(), x); }
inline simd::vf neg_part(simd::vf x) { return simd::select(simd::gt(x, simd::zero()), simd::zero(), x); }
template <>
struct VectorForm<ops::unary::EluOp> {
  static constexpr bool kHas = true;
  static simd::vf f(const ops::unary::EluOp& op, simd::vf x) {
    return simd::add(pos_part(x), simd::mul(simd::set1(op.alpha), simd::expm1v(neg_part(x))));
  }
};
template <>
struct VectorForm<ops::unary::SeluOp> {
  static constexpr bool kHas = true;
  static simd::vf f(const ops::unary::SeluOp& op, simd::vf x) {
    const simd::vf e = simd::mul(simd::set1(op.alpha), simd::expm1v(neg_part(x)));
    return simd::mul(simd::set1(op.gamma), simd::add(pos_part(x), e));
  }
};
template <>
struct VectorForm<ops::unary::CeluOp> {
  static constexpr bool kHas = true;
  static simd::vf f(const ops::unary::CeluOp& op, simd::vf x) {
    const simd::vf a = simd::set1(op.alpha);
    return simd::add(pos_part(x), simd::mul(a, simd::expm1v(simd::div(neg_part(x), a))));
  }
};

// Op with a whole-run form for fp32 (unary_range uses `range` where an op has one; double keeps the op's
// formula): whole vectors, then the last lanes masked. (Four vectors a step measured no faster on Mish's
// composition, bound by its ~45 operations per vector, not by their latency.)
template <class Op>
struct WithVectorForm : Op {
  void range(const float* in, float* out, int64_t n) const {
    simd::map(in, out, n, [this](simd::vf x) { return VectorForm<Op>::f(static_cast<const Op&>(*this), x); });
  }
};
#endif

// ---- the kernel ---------------------------------------------------------------------------------

template <class Op>
class UnaryKernel final : public Kernel {
 public:
  explicit UnaryKernel(const Node& n) : op_(make_op<Op>(n)), grain_(grain_for(Op::kFlops)) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.in(0);
    dispatch<Op::kTypes>(x.dtype(), ctx.node(), "input", [&](auto tag) {
      using S = decltype(tag);
      using SO = std::conditional_t<bool_out<Op>(), bool, S>;
      Tensor& y = ctx.allocate_output(0, DTypeOf<SO>::value, x.dims());
      if constexpr (std::is_same_v<Op, ops::unary::SqrtOp>)  // contiguous runs through the SIMD instruction
        unary_map(x.data<S>(), y.data<SO>(), x.numel(), SimdSqrt{}, grain_);
#if defined(GAF_SIMD)
      else if constexpr (VectorForm<Op>::kHas)
        unary_map(x.data<S>(), y.data<SO>(), x.numel(), WithVectorForm<Op>{op_}, grain_);
#endif
      else
        unary_map(x.data<S>(), y.data<SO>(), x.numel(), op_, grain_);
    });
  }

 private:
  // Sqrt with a whole-run form (unary_range uses `range` where an op has one).
  struct SimdSqrt : ops::unary::SqrtOp {
    template <class C>
    void range(const C* in, C* out, int64_t n) const {
      sqrt_range(in, out, n);
    }
  };
  Op op_;
  int64_t grain_;  // from the op's flops per element
};

// ---- Clip ---------------------------------------------------------------------------------------

// y = min(max(x, lo), hi). Opset < 11: float attributes min/max; from 11: optional scalar inputs of x's type.
// NaN propagates; lo > hi gives hi everywhere (numpy's clip).
template <class C>
struct ClipOp {
  C lo, hi;
  C operator()(C x) const {
    C v = x < lo ? lo : x;
    return v > hi ? hi : v;
  }
};

class ClipKernel final : public Kernel {
 public:
  explicit ClipKernel(const Node& n) {
    if (n.opset < 11) {
      attr_min_ = n.attr_float("min", -std::numeric_limits<float>::infinity());
      attr_max_ = n.attr_float("max", std::numeric_limits<float>::infinity());
    }
  }
  void run(KernelContext& ctx) override {
    const Node& n = ctx.node();
    const Tensor& x = ctx.in(0);
    constexpr unsigned kTypes = kTNumeric;
    dispatch<kTypes>(x.dtype(), n, "input", [&](auto tag) {
      using S = decltype(tag);
      using C = compute_t<S>;
      C lo, hi;
      if (n.opset < 11) {
        if constexpr (std::is_floating_point_v<C>) {
          lo = C(attr_min_);
          hi = C(attr_max_);
        } else {
          unsupported("{}: Clip before opset 11 takes floating-point input, got {}", n.describe(),
                      dtype_name(x.dtype()));
        }
      } else {
        constexpr bool kFloat = std::is_floating_point_v<C>;
        using L = std::numeric_limits<C>;
        lo = bound<S>(ctx, 1, "min", kFloat ? -L::infinity() : L::lowest());
        hi = bound<S>(ctx, 2, "max", kFloat ? L::infinity() : L::max());
      }
      Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
      unary_map(x.data<S>(), y.data<S>(), x.numel(), ClipOp<C>{lo, hi}, grain_for(2));
    });
  }

 private:
  template <class S>
  static compute_t<S> bound(KernelContext& ctx, int i, const char* name, compute_t<S> def) {
    const Tensor* t = ctx.input(i);
    if (!t) return def;
    const Node& n = ctx.node();
    GAF_CHECK(t->dtype() == ctx.in(0).dtype(), "{}: '{}' has element type {} but the input is {}",
              n.describe(), name, dtype_name(t->dtype()), dtype_name(ctx.in(0).dtype()));
    GAF_CHECK(t->numel() == 1, "{}: '{}' must be a scalar, got shape {}", n.describe(), name,
              dims_to_string(t->dims()));
    return load_c(t->data<S>()[0]);
  }
  float attr_min_ = 0, attr_max_ = 0;
};

}  // namespace

void register_unary_ops(KernelRegistry& r) {
  ops::for_each_unary_op([&](auto op) {
    using Op = decltype(op);
    r.add(Op::kName).set_kernel(
        [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<UnaryKernel<Op>>(n); });
  });
  r.add("Clip").set_kernel(
      [](const Node& n) { return std::unique_ptr<Kernel>(std::make_unique<ClipKernel>(n)); });
}

}  // namespace gaf::runtime
