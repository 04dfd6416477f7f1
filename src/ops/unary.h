// The standard unary elementwise ops, one struct each: the whole definition of the op.
//
//   kName, kFlops, kFlags   the op's registry entry (ops/elementwise.cc registers every struct of UnaryOps)
//   kTypes                  the element type classes it takes (ops/scalar_math.h); kBoolOut: boolean result
//   operator()(C x)         the reference formula on the compute type (fp32 for fp16/bf16, double, integers
//   as
//                           they are) that the CPU kernel maps over a tensor (runtime/kernels/onnx/unary.cc)
//   formula(x) / (n, x)     the scalar formula generated kernels print, over the printers' gaf_* helpers;
//   absent:
//                           the op runs as its own kernel
//   Op(const Node&)         reads and validates the attributes once, when the kernel is made
//
// Adding a unary op: one struct here, listed in UnaryOps, and a test; its kernel, its registry entry and the
// fused-against-unfused check of its formula (tests/unit/codegen/elementwise_kernel_test.cc) follow from it.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>

#include "gaf/graph.h"
#include "gaf/op_registry.h"
#include "ops/scalar_math.h"

namespace gaf::ops {

namespace unary {

using X = const std::string&;
constexpr uint32_t P = kPrecisionSensitive;
inline std::string attr(const Node& n, const char* name, double def) {
  return float_literal(n.attr_float(name, float(def)));
}

// ---- math --------------------------------------------------------------------------------

struct AbsOp {
  static constexpr const char* kName = "Abs";
  static constexpr double kFlops = 1;
  static std::string formula(X x) { return "gaf_abs(" + x + ")"; }
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
  static constexpr const char* kName = "Neg";
  static constexpr double kFlops = 1;
  static std::string formula(X x) { return "(-" + x + ")"; }
  static constexpr unsigned kTypes = kTFloating | kTSigned;
  template <class C>
  C operator()(C x) const {
    return neg_wrap(x);
  }
};

// floor / ceil from rint (which vectorises, where std::floor stays a scalar round per element): rint is exact
// for |x| >= 2^23 and keeps -0 and NaN, and the correction only applies when rint rounded the wrong way.
struct FloorOp {
  static constexpr const char* kName = "Floor";
  static constexpr double kFlops = 1;
  static std::string formula(X x) { return "gaf_floor(" + x + ")"; }
  static constexpr unsigned kTypes = kTFloating;
  template <class C>
  C operator()(C x) const {
    C r = std::rint(x);
    return r - (r > x ? C(1) : C(0));
  }
};

struct CeilOp {
  static constexpr const char* kName = "Ceil";
  static constexpr double kFlops = 1;
  static std::string formula(X x) { return "gaf_ceil(" + x + ")"; }
  static constexpr unsigned kTypes = kTFloating;
  template <class C>
  C operator()(C x) const {
    C r = std::rint(x);
    return r + (r < x ? C(1) : C(0));
  }
};

// Halves round to even: rint in the default rounding mode.
struct RoundOp {
  static constexpr const char* kName = "Round";
  static constexpr double kFlops = 1;
  static std::string formula(X x) { return "gaf_round(" + x + ")"; }
  static constexpr unsigned kTypes = kTFloating;
  template <class C>
  C operator()(C x) const {
    return std::rint(x);
  }
};

struct SqrtOp {
  static constexpr const char* kName = "Sqrt";
  static constexpr double kFlops = 4;
  static std::string formula(X x) { return "gaf_sqrt(" + x + ")"; }
  static constexpr unsigned kTypes = kTFloating;
  template <class C>
  C operator()(C x) const {
    return std::sqrt(x);
  }
};

struct ReciprocalOp {
  static constexpr const char* kName = "Reciprocal";
  static constexpr double kFlops = 4;
  static std::string formula(X x) { return "(1.0f / " + x + ")"; }
  static constexpr unsigned kTypes = kTFloating;
  template <class C>
  C operator()(C x) const {
    return C(1) / x;
  }
};

struct ExpOp {
  static constexpr const char* kName = "Exp";
  static constexpr double kFlops = 10;
  static constexpr uint32_t kFlags = P;
  static std::string formula(X x) { return "gaf_exp(" + x + ")"; }
  static constexpr unsigned kTypes = kTFloating;
  template <class C>
  C operator()(C x) const {
    return c_exp(x);
  }
};

struct LogOp {
  static constexpr const char* kName = "Log";
  static constexpr double kFlops = 10;
  static constexpr uint32_t kFlags = P;
  static std::string formula(X x) { return "gaf_log(" + x + ")"; }
  static constexpr unsigned kTypes = kTFloating;
  template <class C>
  C operator()(C x) const {
    return c_log(x);
  }
};

// Integer inputs (allowed since opset 9) compute erf in double and truncate like a cast: 0, or +-1 where erf
// rounds to 1 in double (|x| >= 6).
struct ErfOp {
  static constexpr const char* kName = "Erf";
  static constexpr double kFlops = 20;
  static constexpr uint32_t kFlags = P;
  static std::string formula(X x) { return "gaf_erf(" + x + ")"; }
  static constexpr unsigned kTypes = kTNumeric;
  template <class C>
  C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>)
      return c_erf(x);
    else
      return saturate_cast<C>(std::erf(double(x)));
  }
};

struct SinOp {
  static constexpr const char* kName = "Sin";
  static constexpr double kFlops = 20;
  static constexpr uint32_t kFlags = P;
  static constexpr unsigned kTypes = kTFloating;
  static std::string formula(X x) { return "gaf_sin(" + x + ")"; }
  template <class C>
  C operator()(C x) const {
    return std::sin(x);
  }
};

struct CosOp {
  static constexpr const char* kName = "Cos";
  static constexpr double kFlops = 20;
  static constexpr uint32_t kFlags = P;
  static constexpr unsigned kTypes = kTFloating;
  static std::string formula(X x) { return "gaf_cos(" + x + ")"; }
  template <class C>
  C operator()(C x) const {
    return std::cos(x);
  }
};

// The other trigonometric and hyperbolic functions: libm (scalar), so a smaller parallel grain through a
// higher cost; no formula for generated kernels.
#define GAF_LIBM_OP(Name, op, fn)                  \
  struct Name {                                    \
    static constexpr const char* kName = op;       \
    static constexpr double kFlops = 20;           \
    static constexpr uint32_t kFlags = P;          \
    static constexpr unsigned kTypes = kTFloating; \
    template <class C>                             \
    C operator()(C x) const {                      \
      return std::fn(x);                           \
    }                                              \
  };
GAF_LIBM_OP(TanOp, "Tan", tan)
GAF_LIBM_OP(AsinOp, "Asin", asin)
GAF_LIBM_OP(AcosOp, "Acos", acos)
GAF_LIBM_OP(AtanOp, "Atan", atan)
GAF_LIBM_OP(SinhOp, "Sinh", sinh)
GAF_LIBM_OP(CoshOp, "Cosh", cosh)
GAF_LIBM_OP(AsinhOp, "Asinh", asinh)
GAF_LIBM_OP(AcoshOp, "Acosh", acosh)
GAF_LIBM_OP(AtanhOp, "Atanh", atanh)
#undef GAF_LIBM_OP

// -1, 0 or 1; NaN stays NaN.
struct SignOp {
  static constexpr const char* kName = "Sign";
  static constexpr double kFlops = 1;
  static std::string formula(X x) { return "gaf_sign(" + x + ")"; }
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
  static constexpr const char* kName = "Not";
  static constexpr double kFlops = 1;
  static std::string formula(X x) { return "(!" + x + ")"; }
  static constexpr unsigned kTypes = kTBool;
  bool operator()(bool x) const { return !x; }
};

struct IsNaNOp {
  static constexpr const char* kName = "IsNaN";
  static constexpr double kFlops = 1;
  static std::string formula(X x) { return "(" + x + " != " + x + ")"; }
  static constexpr unsigned kTypes = kTFloating;
  static constexpr bool kBoolOut = true;
  template <class C>
  bool operator()(C x) const {
    return x != x;
  }
};

struct IsInfOp {
  static constexpr const char* kName = "IsInf";
  static constexpr double kFlops = 1;
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
  static constexpr const char* kName = "Shrink";
  static constexpr double kFlops = 2;
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
  static constexpr const char* kName = "Relu";
  static constexpr double kFlops = 1;
  static std::string formula(X x) { return "gaf_max(" + x + ", 0.0f)"; }
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
  static constexpr const char* kName = "LeakyRelu";
  static constexpr double kFlops = 2;
  static std::string formula(const Node& n, X x) {
    return "(" + x + " >= 0.0f ? " + x + " : " + x + " * " + attr(n, "alpha", 0.01) + ")";
  }
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
  static constexpr const char* kName = "Elu";
  static constexpr double kFlops = 10;
  static constexpr uint32_t kFlags = P;
  static std::string formula(const Node& n, X x) {
    return "(" + x + " >= 0.0f ? " + x + " : " + attr(n, "alpha", 1.0) + " * gaf_expm1(" + x + "))";
  }
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
  static constexpr const char* kName = "Selu";
  static constexpr double kFlops = 10;
  static constexpr uint32_t kFlags = P;
  static std::string formula(const Node& n, X x) {
    return "(" + attr(n, "gamma", 1.05070102214813232421875) + " * (" + x + " > 0.0f ? " + x + " : " +
           attr(n, "alpha", 1.67326319217681884765625) + " * gaf_expm1(" + x + ")))";
  }
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
  static constexpr const char* kName = "Celu";
  static constexpr double kFlops = 12;
  static constexpr uint32_t kFlags = P;
  static std::string formula(const Node& n, X x) {
    return "(gaf_max(" + x + ", 0.0f) + gaf_min(0.0f, " + attr(n, "alpha", 1.0) + " * gaf_expm1(" + x +
           " / " + attr(n, "alpha", 1.0) + ")))";
  }
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
  static constexpr const char* kName = "Sigmoid";
  static constexpr double kFlops = 12;
  static constexpr uint32_t kFlags = P;
  static std::string formula(X x) { return "gaf_sigmoid(" + x + ")"; }
  static constexpr unsigned kTypes = kTFloating;
  template <class C>
  C operator()(C x) const {
    return c_sigmoid(x);
  }
};

// max(0, min(1, alpha x + beta)); NaN propagates.
struct HardSigmoidOp {
  static constexpr const char* kName = "HardSigmoid";
  static constexpr double kFlops = 3;
  static std::string formula(const Node& n, X x) {
    return "gaf_max_op(0.0f, gaf_min_op(1.0f, " + attr(n, "alpha", 0.2) + " * " + x + " + " +
           attr(n, "beta", 0.5) + "))";
  }
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
  static constexpr const char* kName = "HardSwish";
  static constexpr double kFlops = 4;
  static std::string formula(X x) {
    return "(" + x + " * gaf_max(0.0f, gaf_min(1.0f, " + x + " * (1.0f / 6.0f) + 0.5f)))";
  }
  static constexpr unsigned kTypes = kTFloating;
  template <class C>
  C operator()(C x) const {
    C v = x * C(1.0 / 6.0) + C(0.5);
    return x * (v < C(0) ? C(0) : (v > C(1) ? C(1) : v));
  }
};

struct TanhOp {
  static constexpr const char* kName = "Tanh";
  static constexpr double kFlops = 15;
  static constexpr uint32_t kFlags = P;
  static std::string formula(X x) { return "gaf_tanh(" + x + ")"; }
  static constexpr unsigned kTypes = kTFloating;
  template <class C>
  C operator()(C x) const {
    return c_tanh(x);
  }
};

struct SoftplusOp {
  static constexpr const char* kName = "Softplus";
  static constexpr double kFlops = 20;
  static constexpr uint32_t kFlags = P;
  static std::string formula(X x) { return "gaf_softplus(" + x + ")"; }
  static constexpr unsigned kTypes = kTFloating;
  template <class C>
  C operator()(C x) const {
    return c_softplus(x);
  }
};

// x * tanh(softplus(x)); generated kernels and the fp32 vector form compute it in closed form, gaf_mish:
// x n (n + 2) / (n (n + 2) + 2), n = e^x.
struct MishOp {
  static constexpr const char* kName = "Mish";
  static constexpr double kFlops = 20;
  static constexpr uint32_t kFlags = P;
  static std::string formula(X x) { return "gaf_mish(" + x + ")"; }
  static constexpr unsigned kTypes = kTFloating;
  template <class C>
  C operator()(C x) const {
    return x * c_tanh(c_softplus(x));
  }
};

struct SoftsignOp {
  static constexpr const char* kName = "Softsign";
  static constexpr double kFlops = 3;
  static std::string formula(X x) { return "(" + x + " / (1.0f + gaf_abs(" + x + ")))"; }
  static constexpr unsigned kTypes = kTFloating;
  template <class C>
  C operator()(C x) const {
    return x / (C(1) + std::fabs(x));
  }
};

struct ThresholdedReluOp {
  static constexpr const char* kName = "ThresholdedRelu";
  static constexpr double kFlops = 1;
  static std::string formula(const Node& n, X x) {
    return "(" + x + " > " + attr(n, "alpha", 1.0) + " ? " + x + " : (" + x + " == " + x + " ? 0.0f : " + x +
           "))";
  }
  static constexpr unsigned kTypes = kTFloating;
  float alpha = 1.0f;
  ThresholdedReluOp() = default;
  explicit ThresholdedReluOp(const Node& n) : alpha(n.attr_float("alpha", 1.0f)) {}
  template <class C>
  C operator()(C x) const {
    return x > C(alpha) ? x : (x == x ? C(0) : x);
  }
};

}  // namespace unary

using UnaryOps =
    std::tuple<unary::AbsOp, unary::NegOp, unary::FloorOp, unary::CeilOp, unary::RoundOp, unary::SqrtOp,
               unary::ReciprocalOp, unary::ExpOp, unary::LogOp, unary::ErfOp, unary::SinOp, unary::CosOp,
               unary::TanOp, unary::AsinOp, unary::AcosOp, unary::AtanOp, unary::SinhOp, unary::CoshOp,
               unary::AsinhOp, unary::AcoshOp, unary::AtanhOp, unary::SignOp, unary::NotOp, unary::IsNaNOp,
               unary::IsInfOp, unary::ShrinkOp, unary::ReluOp, unary::LeakyReluOp, unary::EluOp,
               unary::SeluOp, unary::CeluOp, unary::SigmoidOp, unary::HardSigmoidOp, unary::HardSwishOp,
               unary::TanhOp, unary::SoftplusOp, unary::MishOp, unary::SoftsignOp, unary::ThresholdedReluOp>;

// Calls f(Op{}) for every struct of UnaryOps.
template <class F>
void for_each_unary_op(F&& f) {
  std::apply([&](auto... op) { (f(op), ...); }, UnaryOps{});
}

}  // namespace gaf::ops
