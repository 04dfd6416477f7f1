// Unary math and activations: one templated kernel (UnaryKernel<Op>) maps an op functor over contiguous data.
// An op functor declares the type classes it accepts (kTypes) and `C operator()(C x)` on the compute type
// (fp32 for fp16/bf16); the op's definition (src/ops/elementwise.cc) gives its flops per element, which set
// the parallel grain. fp32 exp/log/tanh/sigmoid/erf use the vectorisable implementations of
// elementwise_math.h; double uses libm.
#include <cmath>

#include "runtime/kernels/elementwise_math.h"
#include "runtime/kernels/elementwise_util.h"
#include "runtime/kernels/families.h"

namespace gaf::runtime {

namespace {

using namespace ew;
namespace fm = fastmath;

// ---- compute-type math: fastmath for fp32, libm for double --------------------------------------

inline float c_exp(float x) { return fm::exp(x); }
inline double c_exp(double x) { return std::exp(x); }
inline float c_expm1(float x) { return fm::expm1(x); }
inline double c_expm1(double x) { return std::expm1(x); }
inline float c_log(float x) { return fm::log(x); }
inline double c_log(double x) { return std::log(x); }
inline float c_tanh(float x) { return fm::tanh(x); }
inline double c_tanh(double x) { return std::tanh(x); }
inline float c_erf(float x) { return fm::erf(x); }
inline double c_erf(double x) { return std::erf(x); }
inline float c_sigmoid(float x) { return fm::sigmoid(x); }
inline double c_sigmoid(double x) {
  double e = std::exp(-std::fabs(x));
  double s = 1.0 / (1.0 + e);
  return x >= 0 ? s : (x < 0 ? e * s : x);
}
inline float c_softplus(float x) { return fm::softplus(x); }
// log(1 + e^x) without overflow: max(x, 0) + log1p(e^-|x|); NaN propagates through the first term.
inline double c_softplus(double x) { return (x < 0 ? 0.0 : x) + std::log1p(std::exp(-std::fabs(x))); }

// max(x, 0) and min(x, 0) that keep NaN and the sign of zero. The exp-based activations are written as
// pos_part(x) + alpha * expm1(neg_part(x)) (expm1(0) = 0) rather than `x < 0 ? alpha * expm1(x) : x`: GCC
// does not if-convert a conditional arm that does floating-point arithmetic (trapping math), which would
// leave the loop scalar and branchy; selecting between x and a constant vectorises.
template <class C>
inline C pos_part(C x) {
  return x < C(0) ? C(0) : x;
}
template <class C>
inline C neg_part(C x) {
  return x > C(0) ? C(0) : x;
}

// ---- the kernel ---------------------------------------------------------------------------------

template <class Op>
class UnaryKernel final : public Kernel {
 public:
  explicit UnaryKernel(const Node& n)
      : op_(make_op<Op>(n)), grain_(grain_for(find_op(n)->flops_per_element)) {}
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.in(0);
    dispatch<Op::kTypes>(x.dtype(), ctx.node(), "input", [&](auto tag) {
      using S = decltype(tag);
      using SO = std::conditional_t<bool_out<Op>(), bool, S>;
      Tensor& y = ctx.allocate_output(0, DTypeOf<SO>::value, x.dims());
      unary_map(x.data<S>(), y.data<SO>(), x.numel(), op_, grain_);
    });
  }

 private:
  Op op_;
  int64_t grain_;  // from the op's flops per element (src/ops)
};

template <class Op>
void add_unary(KernelRegistry& r, const char* name) {
  r.add(name).set_kernel(
      [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<UnaryKernel<Op>>(n); });
}

// ---- unary math ---------------------------------------------------------------------------------

struct AbsOp {
  static constexpr unsigned kTypes = kTNumeric;
  template <class C>
  C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>)
      return std::fabs(x);
    else if constexpr (std::is_unsigned_v<C>)
      return x;
    else
      return x < 0 ? neg_wrap(x) : x;
  }
};

struct NegOp {
  static constexpr unsigned kTypes = kTFloating | kTSigned;
  template <class C>
  C operator()(C x) const {
    return neg_wrap(x);
  }
};

// floor / ceil from rint (which vectorises, where std::floor stays a scalar round per element): rint is exact
// for |x| >= 2^23 and keeps -0 and NaN, and the correction only applies when rint rounded the wrong way.
struct FloorOp {
  static constexpr unsigned kTypes = kTFloating;
  template <class C>
  C operator()(C x) const {
    C r = std::rint(x);
    return r - (r > x ? C(1) : C(0));
  }
};

struct CeilOp {
  static constexpr unsigned kTypes = kTFloating;
  template <class C>
  C operator()(C x) const {
    C r = std::rint(x);
    return r + (r < x ? C(1) : C(0));
  }
};

// Halves round to even: rint in the default rounding mode.
struct RoundOp {
  static constexpr unsigned kTypes = kTFloating;
  template <class C>
  C operator()(C x) const {
    return std::rint(x);
  }
};

struct SqrtOp {
  static constexpr unsigned kTypes = kTFloating;
  template <class C>
  C operator()(C x) const {
    return std::sqrt(x);
  }
  template <class C>
  void range(const C* in, C* out, int64_t n) const {
    sqrt_range(in, out, n);
  }
};

struct ReciprocalOp {
  static constexpr unsigned kTypes = kTFloating;
  template <class C>
  C operator()(C x) const {
    return C(1) / x;
  }
};

struct ExpOp {
  static constexpr unsigned kTypes = kTFloating;
  template <class C>
  C operator()(C x) const {
    return c_exp(x);
  }
};

struct LogOp {
  static constexpr unsigned kTypes = kTFloating;
  template <class C>
  C operator()(C x) const {
    return c_log(x);
  }
};

// Integer inputs (allowed since opset 9) compute erf in double and truncate like a cast: 0, or +-1 where erf
// rounds to 1 in double (|x| >= 6).
struct ErfOp {
  static constexpr unsigned kTypes = kTNumeric;
  template <class C>
  C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>)
      return c_erf(x);
    else
      return saturate_cast<C>(std::erf(double(x)));
  }
};

// Trigonometric and hyperbolic functions: libm (scalar), so a smaller parallel grain through a higher cost.
#define GAF_LIBM_OP(Name, fn)                      \
  struct Name {                                    \
    static constexpr unsigned kTypes = kTFloating; \
    template <class C>                             \
    C operator()(C x) const {                      \
      return std::fn(x);                           \
    }                                              \
  };
GAF_LIBM_OP(SinOp, sin)
GAF_LIBM_OP(CosOp, cos)
GAF_LIBM_OP(TanOp, tan)
GAF_LIBM_OP(AsinOp, asin)
GAF_LIBM_OP(AcosOp, acos)
GAF_LIBM_OP(AtanOp, atan)
GAF_LIBM_OP(SinhOp, sinh)
GAF_LIBM_OP(CoshOp, cosh)
GAF_LIBM_OP(AsinhOp, asinh)
GAF_LIBM_OP(AcoshOp, acosh)
GAF_LIBM_OP(AtanhOp, atanh)
#undef GAF_LIBM_OP

// -1, 0 or 1; NaN stays NaN.
struct SignOp {
  static constexpr unsigned kTypes = kTNumeric;
  template <class C>
  C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>)
      return x > C(0) ? C(1) : (x < C(0) ? C(-1) : x);
    else if constexpr (std::is_unsigned_v<C>)
      return C(x != 0);
    else
      return C((x > 0) - (x < 0));
  }
};

struct NotOp {
  static constexpr unsigned kTypes = kTBool;
  bool operator()(bool x) const { return !x; }
};

struct IsNaNOp {
  static constexpr unsigned kTypes = kTFloating;
  static constexpr bool kBoolOut = true;
  template <class C>
  bool operator()(C x) const {
    return x != x;
  }
};

struct IsInfOp {
  static constexpr unsigned kTypes = kTFloating;
  static constexpr bool kBoolOut = true;
  bool neg = true, pos = true;
  IsInfOp() = default;
  explicit IsInfOp(const Node& n)
      : neg(n.attr_int("detect_negative", 1) != 0), pos(n.attr_int("detect_positive", 1) != 0) {}
  template <class C>
  bool operator()(C x) const {
    constexpr C inf = std::numeric_limits<C>::infinity();
    return ((x == inf) & pos) | ((x == -inf) & neg);  // no short-circuit: vectorises
  }
};

// y = x + bias below -lambd, x - bias above lambd, 0 between (integers compute in double, saturating back).
struct ShrinkOp {
  static constexpr unsigned kTypes = kTNumeric;
  float lambd = 0.5f, bias = 0.0f;
  ShrinkOp() = default;
  explicit ShrinkOp(const Node& n) : lambd(n.attr_float("lambd", 0.5f)), bias(n.attr_float("bias", 0.0f)) {}
  template <class C>
  C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>) {
      C l = C(lambd), b = C(bias);
      // (x + shift) * keep: the arms are constants, so the loop vectorises; NaN propagates through the
      // product.
      C shift = x < -l ? b : (x > l ? -b : C(0));
      C keep = (x < -l || x > l) ? C(1) : C(0);
      return (x + shift) * keep;
    } else {
      double v = double(x), l = lambd, b = bias;
      return saturate_cast<C>(v < -l ? v + b : (v > l ? v - b : 0.0));
    }
  }
};

// ---- activations --------------------------------------------------------------------------------

// max(x, 0); NaN propagates.
struct ReluOp {
  static constexpr unsigned kTypes = kTFloating | kTInt;
  template <class C>
  C operator()(C x) const {
    if constexpr (std::is_unsigned_v<C>)
      return x;
    else
      return x < C(0) ? C(0) : x;
  }
};

struct LeakyReluOp {
  static constexpr unsigned kTypes = kTFloating;
  float alpha = 0.01f;
  LeakyReluOp() = default;
  explicit LeakyReluOp(const Node& n) : alpha(n.attr_float("alpha", 0.01f)) {}
  template <class C>
  C operator()(C x) const {
    return x * C(x < C(0) ? alpha : 1.0f);  // select on the float attribute, convert unconditionally
  }
};

struct EluOp {
  static constexpr unsigned kTypes = kTFloating;
  float alpha = 1.0f;
  EluOp() = default;
  explicit EluOp(const Node& n) : alpha(n.attr_float("alpha", 1.0f)) {}
  template <class C>
  C operator()(C x) const {
    return pos_part(x) + C(alpha) * c_expm1(neg_part(x));
  }
};

struct SeluOp {
  static constexpr unsigned kTypes = kTFloating;
  float alpha = 1.67326319217681884765625f, gamma = 1.05070102214813232421875f;
  SeluOp() = default;
  explicit SeluOp(const Node& n)
      : alpha(n.attr_float("alpha", 1.67326319217681884765625f)),
        gamma(n.attr_float("gamma", 1.05070102214813232421875f)) {}
  template <class C>
  C operator()(C x) const {
    return C(gamma) * (pos_part(x) + C(alpha) * c_expm1(neg_part(x)));
  }
};

// max(0, x) + min(0, alpha (exp(x / alpha) - 1)).
struct CeluOp {
  static constexpr unsigned kTypes = kTFloating;
  float alpha = 1.0f;
  CeluOp() = default;
  explicit CeluOp(const Node& n) : alpha(n.attr_float("alpha", 1.0f)) {
    GAF_CHECK(alpha != 0.0f, "{}: alpha must not be 0", n.describe());
  }
  template <class C>
  C operator()(C x) const {
    return pos_part(x) + C(alpha) * c_expm1(neg_part(x) / C(alpha));
  }
};

struct SigmoidOp {
  static constexpr unsigned kTypes = kTFloating;
  template <class C>
  C operator()(C x) const {
    return c_sigmoid(x);
  }
};

// max(0, min(1, alpha x + beta)); NaN propagates.
struct HardSigmoidOp {
  static constexpr unsigned kTypes = kTFloating;
  float alpha = 0.2f, beta = 0.5f;
  HardSigmoidOp() = default;
  explicit HardSigmoidOp(const Node& n)
      : alpha(n.attr_float("alpha", 0.2f)), beta(n.attr_float("beta", 0.5f)) {}
  template <class C>
  C operator()(C x) const {
    C v = C(alpha) * x + C(beta);
    return v < C(0) ? C(0) : (v > C(1) ? C(1) : v);
  }
};

// x * max(0, min(1, x / 6 + 1/2)).
struct HardSwishOp {
  static constexpr unsigned kTypes = kTFloating;
  template <class C>
  C operator()(C x) const {
    C v = x * C(1.0 / 6.0) + C(0.5);
    return x * (v < C(0) ? C(0) : (v > C(1) ? C(1) : v));
  }
};

struct TanhOp {
  static constexpr unsigned kTypes = kTFloating;
  template <class C>
  C operator()(C x) const {
    return c_tanh(x);
  }
};

struct SoftplusOp {
  static constexpr unsigned kTypes = kTFloating;
  template <class C>
  C operator()(C x) const {
    return c_softplus(x);
  }
};

// x * tanh(softplus(x)).
struct MishOp {
  static constexpr unsigned kTypes = kTFloating;
  template <class C>
  C operator()(C x) const {
    return x * c_tanh(c_softplus(x));
  }
};

struct SoftsignOp {
  static constexpr unsigned kTypes = kTFloating;
  template <class C>
  C operator()(C x) const {
    return x / (C(1) + std::fabs(x));
  }
};

struct ThresholdedReluOp {
  static constexpr unsigned kTypes = kTFloating;
  float alpha = 1.0f;
  ThresholdedReluOp() = default;
  explicit ThresholdedReluOp(const Node& n) : alpha(n.attr_float("alpha", 1.0f)) {}
  template <class C>
  C operator()(C x) const {
    return x > C(alpha) ? x : (x == x ? C(0) : x);
  }
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
  add_unary<AbsOp>(r, "Abs");
  add_unary<NegOp>(r, "Neg");
  add_unary<FloorOp>(r, "Floor");
  add_unary<CeilOp>(r, "Ceil");
  add_unary<RoundOp>(r, "Round");
  add_unary<SqrtOp>(r, "Sqrt");
  add_unary<ReciprocalOp>(r, "Reciprocal");
  add_unary<ExpOp>(r, "Exp");
  add_unary<LogOp>(r, "Log");
  add_unary<ErfOp>(r, "Erf");
  add_unary<SinOp>(r, "Sin");
  add_unary<CosOp>(r, "Cos");
  add_unary<TanOp>(r, "Tan");
  add_unary<AsinOp>(r, "Asin");
  add_unary<AcosOp>(r, "Acos");
  add_unary<AtanOp>(r, "Atan");
  add_unary<SinhOp>(r, "Sinh");
  add_unary<CoshOp>(r, "Cosh");
  add_unary<AsinhOp>(r, "Asinh");
  add_unary<AcoshOp>(r, "Acosh");
  add_unary<AtanhOp>(r, "Atanh");
  add_unary<SignOp>(r, "Sign");
  add_unary<NotOp>(r, "Not");
  add_unary<IsNaNOp>(r, "IsNaN");
  add_unary<IsInfOp>(r, "IsInf");
  add_unary<ShrinkOp>(r, "Shrink");

  add_unary<ReluOp>(r, "Relu");
  add_unary<LeakyReluOp>(r, "LeakyRelu");
  add_unary<EluOp>(r, "Elu");
  add_unary<SeluOp>(r, "Selu");
  add_unary<CeluOp>(r, "Celu");
  add_unary<SigmoidOp>(r, "Sigmoid");
  add_unary<HardSigmoidOp>(r, "HardSigmoid");
  add_unary<HardSwishOp>(r, "HardSwish");
  add_unary<TanhOp>(r, "Tanh");
  add_unary<SoftplusOp>(r, "Softplus");
  add_unary<MishOp>(r, "Mish");
  add_unary<SoftsignOp>(r, "Softsign");
  add_unary<ThresholdedReluOp>(r, "ThresholdedRelu");
  r.add("Clip").set_kernel(
      [](const Node& n) { return std::unique_ptr<Kernel>(std::make_unique<ClipKernel>(n)); });
}

}  // namespace gaf::runtime
