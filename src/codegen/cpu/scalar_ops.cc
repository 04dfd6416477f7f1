// One line per op: the scalar formula the fused loop computes. Transcendentals call helpers from the prelude
// (gaf_exp, gaf_erf, ...) that GCC vectorises (libmvec or polynomial), so fused loops stay SIMD.
#include "codegen/cpu/scalar_ops.h"

#include <cmath>
#include <cstdio>

namespace gaf::codegen {

std::string float_literal(double v) {
  float f = float(v);
  if (std::isnan(f)) return "__builtin_nanf(\"\")";
  if (std::isinf(f)) return f > 0 ? "__builtin_inff()" : "(-__builtin_inff())";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9gf", double(f));
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s.insert(s.size() - 1, ".0");
  return "(" + s + ")";
}

std::optional<ScalarExpr> scalar_expr(const Node& n, const std::vector<std::string>& a,
                                      const std::vector<ScalarType>& types, std::string* why) {
  const std::string& op = n.op_type;
  auto f = [&](const std::string& e) { return ScalarExpr{e, ScalarType::F32}; };
  auto b = [&](const std::string& e) { return ScalarExpr{e, ScalarType::Bool}; };
  auto lit = [](double v) { return float_literal(v); };
  auto attr = [&](const char* name, double def) { return lit(n.attr_float(name, float(def))); };
  size_t na = a.size();
  // Our own domain's activations (rewrite results for opsets that lack them).
  if (n.domain == "gaf" && na >= 1) {
    const std::string& x = a[0];
    if (op == "Gelu" && n.attr_string("approximate", "none") == "none")
      return f("(0.5f * " + x + " * (1.0f + gaf_erf(" + x + " * 0.707106781186547524f)))");
    if (op == "Gelu")
      return f("(0.5f * " + x + " * (1.0f + gaf_tanh(0.797884560802865356f * (" + x + " + 0.044715f * " + x + " * " +
               x + " * " + x + "))))");
    if (op == "Silu") return f("(" + x + " * gaf_sigmoid(" + x + "))");
    if (op == "HardSwish") return f("(" + x + " * gaf_max(0.0f, gaf_min(1.0f, " + x + " * (1.0f / 6.0f) + 0.5f)))");
  }
  if (!n.domain.empty()) {
    *why = fmt::format("op {}.{} has no scalar form", n.domain, op);
    return std::nullopt;
  }
  // Arithmetic.
  if (op == "Add" && na == 2) return f("(" + a[0] + " + " + a[1] + ")");
  if (op == "Sub" && na == 2) return f("(" + a[0] + " - " + a[1] + ")");
  if (op == "Mul" && na == 2) return f("(" + a[0] + " * " + a[1] + ")");
  if (op == "Div" && na == 2) return f("(" + a[0] + " / " + a[1] + ")");
  if (op == "Pow" && na == 2) {
    // Exponents that are constants in the graph arrive as literals: strength-reduce the common ones.
    const Value* e = n.input(1);
    if (e && e->is_constant() && e->constant().numel() == 1) {
      double p = e->constant().get_double(0);
      if (p == 2) return f("(" + a[0] + " * " + a[0] + ")");
      if (p == 3) return f("(" + a[0] + " * " + a[0] + " * " + a[0] + ")");
      if (p == 1) return f(a[0]);
      if (p == 0.5) return f("gaf_sqrt(" + a[0] + ")");
      if (p == -1) return f("(1.0f / " + a[0] + ")");
    }
    return f("gaf_pow(" + a[0] + ", " + a[1] + ")");
  }
  if ((op == "Max" || op == "Min" || op == "Sum" || op == "Mean") && na >= 1) {
    std::string e = a[0];
    for (size_t i = 1; i < na; ++i) {
      if (op == "Max") e = "gaf_max_op(" + e + ", " + a[i] + ")";
      else if (op == "Min") e = "gaf_min_op(" + e + ", " + a[i] + ")";
      else e = "(" + e + " + " + a[i] + ")";
    }
    if (op == "Mean") e = "(" + e + " * " + lit(1.0 / double(na)) + ")";
    return f(e);
  }
  if (op == "Mod" && na == 2 && n.attr_int("fmod", 0) == 1) return f("gaf_fmod(" + a[0] + ", " + a[1] + ")");
  // Unary math.
  if (na >= 1) {
    const std::string& x = a[0];
    if (op == "Neg") return f("(-" + x + ")");
    if (op == "Abs") return f("gaf_abs(" + x + ")");
    if (op == "Relu") return f("gaf_max(" + x + ", 0.0f)");
    if (op == "Sqrt") return f("gaf_sqrt(" + x + ")");
    if (op == "Reciprocal") return f("(1.0f / " + x + ")");
    if (op == "Exp") return f("gaf_exp(" + x + ")");
    if (op == "Log") return f("gaf_log(" + x + ")");
    if (op == "Erf") return f("gaf_erf(" + x + ")");
    if (op == "Tanh") return f("gaf_tanh(" + x + ")");
    if (op == "Sigmoid") return f("gaf_sigmoid(" + x + ")");
    if (op == "Floor") return f("gaf_floor(" + x + ")");
    if (op == "Ceil") return f("gaf_ceil(" + x + ")");
    if (op == "Round") return f("gaf_round(" + x + ")");
    if (op == "Sign") return f("gaf_sign(" + x + ")");
    if (op == "Sin") return f("gaf_sin(" + x + ")");
    if (op == "Cos") return f("gaf_cos(" + x + ")");
    if (op == "Softsign") return f("(" + x + " / (1.0f + gaf_abs(" + x + ")))");
    if (op == "Softplus") return f("gaf_softplus(" + x + ")");
    if (op == "Mish") return f("(" + x + " * gaf_tanh(gaf_softplus(" + x + ")))");
    if (op == "LeakyRelu")
      return f("(" + x + " >= 0.0f ? " + x + " : " + x + " * " + attr("alpha", 0.01) + ")");
    if (op == "ThresholdedRelu")  // NaN stays NaN
      return f("(" + x + " > " + attr("alpha", 1.0) + " ? " + x + " : (" + x + " == " + x + " ? 0.0f : " + x + "))");
    if (op == "Elu")
      return f("(" + x + " >= 0.0f ? " + x + " : " + attr("alpha", 1.0) + " * gaf_expm1(" + x + "))");
    if (op == "Celu") {
      std::string al = attr("alpha", 1.0);
      return f("(gaf_max(" + x + ", 0.0f) + gaf_min(0.0f, " + al + " * gaf_expm1(" + x + " / " + al + ")))");
    }
    if (op == "Selu")
      return f("(" + attr("gamma", 1.05070102214813232421875) + " * (" + x + " > 0.0f ? " + x + " : " +
               attr("alpha", 1.67326319217681884765625) + " * gaf_expm1(" + x + ")))");
    if (op == "HardSigmoid")
      return f("gaf_max_op(0.0f, gaf_min_op(1.0f, " + attr("alpha", 0.2) + " * " + x + " + " + attr("beta", 0.5) +
               "))");  // NaN stays NaN
    if (op == "HardSwish")
      return f("(" + x + " * gaf_max(0.0f, gaf_min(1.0f, " + x + " * (1.0f / 6.0f) + 0.5f)))");
    if (op == "PRelu" && na == 2) return f("(" + x + " < 0.0f ? " + x + " * " + a[1] + " : " + x + ")");
    if (op == "Identity" || (op == "Dropout" && (na < 3 || a[2].empty()))) return ScalarExpr{x, types[0]};
    if (op == "Clip") {
      std::string e = x;
      if (n.opset < 11) {
        e = "gaf_min(gaf_max(" + x + ", " + attr("min", -3.402823466e38) + "), " + attr("max", 3.402823466e38) + ")";
      } else {
        if (na > 1 && !a[1].empty()) e = "gaf_max(" + e + ", " + a[1] + ")";
        if (na > 2 && !a[2].empty()) e = "gaf_min(" + e + ", " + a[2] + ")";
      }
      return f(e);
    }
    if (op == "Not") return b("(!" + x + ")");
    if (op == "IsNaN") return b("(" + x + " != " + x + ")");
    if (op == "Cast" || op == "CastLike") {
      DType to = op == "Cast" ? DType(n.attr_int("to", 1)) : n.input(1)->type.dtype;
      if (to == DType::Bool) return b(types[0] == ScalarType::Bool ? x : "(" + x + " != 0.0f)");
      std::string v = types[0] == ScalarType::Bool ? "(" + x + " ? 1.0f : 0.0f)" : x;
      if (to == DType::Float) return f(v);
      if (to == DType::Float16) return f("gaf_round_half(" + v + ")");
      if (to == DType::BFloat16) return f("gaf_round_bf16(" + v + ")");
    }
  }
  if (na == 2) {
    if (op == "Equal") return b("(" + a[0] + " == " + a[1] + ")");
    if (op == "Less") return b("(" + a[0] + " < " + a[1] + ")");
    if (op == "LessOrEqual") return b("(" + a[0] + " <= " + a[1] + ")");
    if (op == "Greater") return b("(" + a[0] + " > " + a[1] + ")");
    if (op == "GreaterOrEqual") return b("(" + a[0] + " >= " + a[1] + ")");
    if (op == "And") return b("(" + a[0] + " && " + a[1] + ")");
    if (op == "Or") return b("(" + a[0] + " || " + a[1] + ")");
    if (op == "Xor") return b("(" + a[0] + " != " + a[1] + ")");
  }
  if (op == "Where" && na == 3) return f("(" + a[0] + " ? " + a[1] + " : " + a[2] + ")");
  *why = fmt::format("op {} has no scalar form in the CPU emitter", op);
  return std::nullopt;
}

}  // namespace gaf::codegen
