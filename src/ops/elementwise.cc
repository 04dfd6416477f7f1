// Elementwise and broadcast ops: one entry per op with its flops per output element, its flags and the scalar
// formula a generated kernel inlines into its loop (the standard unary ops: one struct each in ops/unary.h).
// Transcendentals call the printers' helpers (gaf_exp, gaf_erf, ...) that vectorise (CPU: libmvec or
// polynomial; CUDA: the device math library), so fused loops stay SIMD.
#include <fmt/format.h>

#include "gaf/graph.h"
#include "ops/ops.h"
#include "ops/unary.h"

namespace gaf::ops {

namespace {

using Args = std::vector<std::string>;
using Types = std::vector<ScalarType>;
using unary::attr;  // a float attribute as a literal of the printed code
using unary::P;
using unary::X;

ScalarExpr f32(std::string e) { return {std::move(e), ScalarType::F32}; }
ScalarExpr boolean(std::string e) { return {std::move(e), ScalarType::Bool}; }

// An activation of our own domain whose formula reads only the operand.
void activation(OpRegistry& r, const char* name, double flops, uint32_t flags, std::string (*formula)(X x),
                const char* domain) {
  r.add(name, OpKind::Elementwise, domain)
      .set_flops_per_element(flops)
      .set_flags(flags)
      .set_scalar([formula](const Node&, const Args& a, const Types&,
                            std::string*) -> std::optional<ScalarExpr> { return f32(formula(a[0])); });
}
// A broadcast op of two operands: `op` an infix operator, or null for none.
void binary(OpRegistry& r, const char* name, double flops, uint32_t flags, const char* op,
            bool boolean_result) {
  OpInfo& info = r.add(name, OpKind::Broadcast).set_flops_per_element(flops).set_flags(flags);
  if (op)
    info.set_scalar([op, boolean_result](const Node&, const Args& a, const Types&,
                                         std::string*) -> std::optional<ScalarExpr> {
      if (a.size() != 2) return std::nullopt;
      std::string e = "(" + a[0] + " " + op + " " + a[1] + ")";
      return boolean_result ? boolean(e) : f32(e);
    });
}
// Max / Min / Sum / Mean of any number of operands: `fn` folds two (a helper name), or null for `+`.
void variadic(OpRegistry& r, const char* name, double flops, uint32_t flags, const char* fn, bool mean) {
  r.add(name, OpKind::Broadcast)
      .set_flops_per_element(flops)
      .set_flags(flags)
      .set_scalar(
          [fn, mean](const Node&, const Args& a, const Types&, std::string*) -> std::optional<ScalarExpr> {
            if (a.empty()) return std::nullopt;
            std::string e = a[0];
            for (size_t i = 1; i < a.size(); ++i)
              e = fn ? std::string(fn) + "(" + e + ", " + a[i] + ")" : "(" + e + " + " + a[i] + ")";
            if (mean) e = "(" + e + " * " + float_literal(1.0 / double(a.size())) + ")";
            return f32(e);
          });
}

std::string gelu_erf(X x) {
  return "(0.5f * " + x + " * (1.0f + gaf_erf(" + x + " * 0.707106781186547524f)))";
}
std::string gelu_tanh(X x) {
  return "(0.5f * " + x + " * (1.0f + gaf_tanh(0.797884560802865356f * (" + x + " + 0.044715f * " + x +
         " * " + x + " * " + x + "))))";
}
std::string silu(X x) { return "(" + x + " * gaf_sigmoid(" + x + "))"; }

// A standard unary op from its struct (ops/unary.h).
template <class Op>
void define_unary(OpRegistry& r) {
  uint32_t flags = kNone;
  if constexpr (requires { Op::kFlags; }) flags = Op::kFlags;
  OpInfo& info = r.add(Op::kName, OpKind::Elementwise).set_flops_per_element(Op::kFlops).set_flags(flags);
  [[maybe_unused]] constexpr ScalarType type = [] {
    if constexpr (requires { Op::kBoolOut; }) return Op::kBoolOut ? ScalarType::Bool : ScalarType::F32;
    return Op::kTypes == kTBool ? ScalarType::Bool : ScalarType::F32;
  }();
  if constexpr (requires(X x) { Op::formula(x); })
    info.set_scalar([](const Node&, const Args& a, const Types&, std::string*) -> std::optional<ScalarExpr> {
      return ScalarExpr{Op::formula(a[0]), type};
    });
  else if constexpr (requires(const Node& n, X x) { Op::formula(n, x); })
    info.set_scalar(
        [](const Node& n, const Args& a, const Types&, std::string*) -> std::optional<ScalarExpr> {
          return ScalarExpr{Op::formula(n, a[0]), type};
        });
}

void register_unary(OpRegistry& r) {
  for_each_unary_op([&](auto op) { define_unary<decltype(op)>(r); });
  r.add("Clip", OpKind::Elementwise)
      .set_flops_per_element(2)
      .set_scalar([](const Node& n, const Args& a, const Types&, std::string*) -> std::optional<ScalarExpr> {
        std::string e = a[0];
        if (n.opset < 11) {
          e = "gaf_min(gaf_max(" + a[0] + ", " + attr(n, "min", -3.402823466e38) + "), " +
              attr(n, "max", 3.402823466e38) + ")";
        } else {
          if (a.size() > 1 && !a[1].empty()) e = "gaf_max(" + e + ", " + a[1] + ")";
          if (a.size() > 2 && !a[2].empty()) e = "gaf_min(" + e + ", " + a[2] + ")";
        }
        return f32(e);
      });

  // Our own domain's activations (rewrite results for opsets that lack them).
  r.add("Gelu", OpKind::Elementwise, "gaf")
      .set_flops_per_element(12)
      .set_flags(P)
      .set_scalar([](const Node& n, const Args& a, const Types&, std::string*) -> std::optional<ScalarExpr> {
        return f32(n.attr_string("approximate", "none") == "none" ? gelu_erf(a[0]) : gelu_tanh(a[0]));
      });
  activation(r, "Silu", 4, P, silu, "gaf");
  activation(r, "HardSwish", 4, kNone, unary::HardSwishOp::formula, "gaf");
}

void register_binary(OpRegistry& r) {
  binary(r, "Add", 1, kNone, "+", false);
  binary(r, "Sub", 1, kNone, "-", false);
  binary(r, "Mul", 1, kNone, "*", false);
  binary(r, "Div", 1, kNone, "/", false);
  r.add("Mod", OpKind::Broadcast)
      .set_flops_per_element(4)
      .set_scalar([](const Node& n, const Args& a, const Types&, std::string*) -> std::optional<ScalarExpr> {
        if (a.size() != 2 || n.attr_int("fmod", 0) != 1)
          return std::nullopt;  // integer Mod: no float formula
        return f32("gaf_fmod(" + a[0] + ", " + a[1] + ")");
      });
  binary(r, "Equal", 1, kNone, "==", true);
  binary(r, "Less", 1, kNone, "<", true);
  binary(r, "LessOrEqual", 1, kNone, "<=", true);
  binary(r, "Greater", 1, kNone, ">", true);
  binary(r, "GreaterOrEqual", 1, kNone, ">=", true);
  binary(r, "And", 1, kNone, "&&", true);
  binary(r, "Or", 1, kNone, "||", true);
  binary(r, "Xor", 1, kNone, "!=", true);
  binary(r, "BitShift", 1, kNone, nullptr, false);
  r.add("Pow", OpKind::Broadcast)
      .set_flops_per_element(20)
      .set_flags(P)
      .set_scalar([](const Node& n, const Args& a, const Types&, std::string*) -> std::optional<ScalarExpr> {
        if (a.size() != 2) return std::nullopt;
        // Exponents that are constants in the graph arrive as literals: strength-reduce the common ones.
        const Value* e = n.input(1);
        if (e && e->is_constant() && e->constant().numel() == 1) {
          double p = e->constant().get_double(0);
          if (p == 2) return f32("(" + a[0] + " * " + a[0] + ")");
          if (p == 3) return f32("(" + a[0] + " * " + a[0] + " * " + a[0] + ")");
          if (p == 1) return f32(a[0]);
          if (p == 0.5) return f32("gaf_sqrt(" + a[0] + ")");
          if (p == -1) return f32("(1.0f / " + a[0] + ")");
        }
        return f32("gaf_pow(" + a[0] + ", " + a[1] + ")");
      });
  r.add("PRelu", OpKind::Broadcast)
      .set_flops_per_element(2)
      .set_scalar([](const Node&, const Args& a, const Types&, std::string*) -> std::optional<ScalarExpr> {
        if (a.size() != 2) return std::nullopt;
        return f32("(" + a[0] + " < 0.0f ? " + a[0] + " * " + a[1] + " : " + a[0] + ")");
      });
  variadic(r, "Max", 1, kNone, "gaf_max_op", false);
  variadic(r, "Min", 1, kNone, "gaf_min_op", false);
  variadic(r, "Sum", 1, P, nullptr, false);
  variadic(r, "Mean", 2, P, nullptr, true);
  r.add("Where", OpKind::Broadcast)
      .set_scalar([](const Node&, const Args& a, const Types&, std::string*) -> std::optional<ScalarExpr> {
        if (a.size() != 3) return std::nullopt;
        return f32("(" + a[0] + " ? " + a[1] + " : " + a[2] + ")");
      });
}

void register_conversions(OpRegistry& r) {
  auto cast = [](const Node& n, const Args& a, const Types& types,
                 std::string*) -> std::optional<ScalarExpr> {
    DType to = n.op_type == "Cast" ? DType(n.attr_int("to", 1)) : n.input(1)->type.dtype;
    const std::string& x = a[0];
    if (to == DType::Bool) return boolean(types[0] == ScalarType::Bool ? x : "(" + x + " != 0.0f)");
    std::string v = types[0] == ScalarType::Bool ? "(" + x + " ? 1.0f : 0.0f)" : x;
    if (to == DType::Float) return f32(v);
    if (to == DType::Float16) return f32("gaf_round_half(" + v + ")");
    if (to == DType::BFloat16) return f32("gaf_round_bf16(" + v + ")");
    return std::nullopt;  // integer and double targets are not fp32 values
  };
  r.add("Cast", OpKind::Elementwise).set_scalar(cast);
  r.add("CastLike", OpKind::Elementwise).set_scalar(cast);
  // Identity, and Dropout in inference (no mask output wanted).
  r.add("Identity", OpKind::Elementwise)
      .set_flops_per_element(0)
      .set_scalar(
          [](const Node&, const Args& a, const Types& types, std::string*) -> std::optional<ScalarExpr> {
            return ScalarExpr{a[0], types[0]};
          });
  r.add("Dropout", OpKind::Elementwise)
      .set_flops_per_element(0)
      .set_scalar(
          [](const Node&, const Args& a, const Types& types, std::string*) -> std::optional<ScalarExpr> {
            if (a.size() >= 3 && !a[2].empty()) return std::nullopt;  // training_mode given at run time
            return ScalarExpr{a[0], types[0]};
          });
  r.add("QuantizeLinear", OpKind::Elementwise).set_flops_per_element(3);
  r.add("DequantizeLinear", OpKind::Elementwise).set_flops_per_element(2);
  r.add("BatchNormalization", OpKind::Broadcast).set_flops_per_element(3).set_flags(P);
}

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
  register_unary(r);
  register_binary(r);
  register_conversions(r);
}

}  // namespace gaf::ops
