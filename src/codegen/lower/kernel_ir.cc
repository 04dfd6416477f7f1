#include "codegen/lower/kernel_ir.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace gaf::codegen::lower {

bool same(const DimExpr& a, const DimExpr& b) { return a.value == b.value && a.symbol == b.symbol; }
bool same(const Dims& a, const Dims& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](auto& x, auto& y) { return same(x, y); });
}
bool is_one(const DimExpr& d) { return d.value == 1; }
ScalarType scalar_type(DType t) { return t == DType::Bool ? ScalarType::Bool : ScalarType::F32; }

bool splat(const ElementwiseKernel& k, size_t operand) {
  const Dims& vd = k.operands[operand].vdims;
  if (k.walk == Walk::Flat) return std::all_of(vd.begin(), vd.end(), is_one);
  return is_one(vd.back()) && !is_one(k.space.back());
}

bool vector_type(DType t) { return t == DType::Float || t == DType::Float16 || t == DType::BFloat16; }

bool all_float(const ElementwiseKernel& k) {
  for (const Operand& o : k.operands)
    if (!vector_type(o.loaded)) return false;
  for (const Store& s : k.stores)
    if (!vector_type(s.dtype)) return false;
  return true;
}

std::string reduce_acc_type(const std::string& op) { return reduce_sums(op) ? "double" : "float"; }
std::string reduce_init(const std::string& op) {
  return op == "ReduceMax"    ? "-__builtin_inff()"
         : op == "ReduceMin"  ? "__builtin_inff()"
         : op == "ReduceProd" ? "1.0f"
                              : "0.0";
}
bool reduce_sums(const std::string& op) { return op != "ReduceMax" && op != "ReduceMin" && op != "ReduceProd"; }
bool reduce_squares(const std::string& op) { return op == "ReduceSumSquare" || op == "ReduceL2"; }
std::string reduce_term(const std::string& op, const std::string& x) {
  return op == "ReduceL1" ? "gaf_abs(" + x + ")" : x;
}
std::string reduce_fold(const std::string& op, const std::string& a, const std::string& x) {
  if (op == "ReduceMax") return fmt::format("{} = ({} > {} || {} != {}) ? {} : {};", a, x, a, x, x, x, a);
  if (op == "ReduceMin") return fmt::format("{} = ({} < {} || {} != {}) ? {} : {};", a, x, a, x, x, x, a);
  if (op == "ReduceProd") return fmt::format("{} *= {};", a, x);
  return fmt::format("{} += {};", a, x);
}

ScalarExpr formula(const Node& n, const std::vector<std::string>& args, const std::vector<ScalarType>& types,
                   std::string* why) {
  if (n.op_type == "BatchNormalization" && n.domain.empty()) {
    if ((n.num_outputs() > 1 && !n.output(1)->absent_output) || n.attr_int("training_mode", 0)) {
      *why = fmt::format("{}: training-mode batch statistics", n.describe());
      return {};
    }
    std::string eps = float_literal(n.attr_float("epsilon", 1e-5f));
    return {fmt::format("(({} - {}) / gaf_sqrt({} + {}) * {} + {})", args[0], args[3], args[4], eps, args[1], args[2]),
            ScalarType::F32};
  }
  const OpInfo* info = find_op(n);
  const std::string op = n.domain.empty() ? n.op_type : n.domain + "." + n.op_type;
  if (!info || !info->scalar || args.empty()) {
    *why = fmt::format("op {} has no scalar formula for generated kernels", op);
    return {};
  }
  std::optional<ScalarExpr> e = info->scalar(n, args, types, why);
  if (!e) {
    if (why->empty()) *why = fmt::format("op {} has no scalar formula for this node's attributes or inputs", op);
    return {};
  }
  for (int k = 1; k < n.num_outputs(); ++k)
    if (!n.output(k)->absent_output && !n.output(k)->uses().empty()) {
      *why = fmt::format("{}: only its first output can be fused", n.describe());
      return {};
    }
  return *e;
}

ScalarExpr formula_of(const Node& n, const std::vector<std::string>& args, const std::vector<ScalarType>& types) {
  std::string why;
  ScalarExpr e = formula(n, args, types, &why);
  if (e.expr.empty()) throw std::logic_error(why);
  return e;
}

std::vector<std::string> nest_index(size_t rank) {
  std::vector<std::string> idx;
  for (size_t d = 0; d + 1 < rank; ++d) idx.push_back(fmt::format("q{}", d));
  if (rank) idx.push_back("j");
  return idx;
}

}  // namespace gaf::codegen::lower
