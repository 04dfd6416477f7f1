#include "codegen/lower/c_text.h"

#include <fmt/format.h>

#include <cctype>
#include <map>

namespace gaf::codegen::lower {

std::string text(const DimExpr& d) {
  return d.value >= 0 ? fmt::format("int64_t({})", d.value) : fmt::format("sym[{}]", d.symbol);
}

std::string product(const Dims& dims, size_t from, size_t to) {
  std::string s;
  for (size_t i = from; i < to; ++i) s += (s.empty() ? "" : " * ") + text(dims[i]);
  return s.empty() ? "int64_t(1)" : s;
}

std::string ravel(const std::vector<std::string>& idx, const Dims& dims, size_t from, size_t to) {
  std::string lin;
  for (size_t k = from; k < to; ++k) {
    if (dims[k].value == 1) continue;
    lin = lin.empty() ? idx[k] : fmt::format("({}) * {} + {}", lin, text(dims[k]), idx[k]);
  }
  return lin.empty() ? "0" : lin;
}

std::string c_type(DType t) {
  switch (t) {
    case DType::Int64: return "int64_t";
    case DType::Int32: return "int32_t";
    case DType::Float: return "float";
    case DType::Float16:
    case DType::BFloat16: return "uint16_t";
    case DType::Bool: return "bool";
    default: return "void";
  }
}
std::string load(DType t, const std::string& e) {
  if (t == DType::Int64 || t == DType::Int32) return "float(" + e + ")";
  if (t == DType::Float16) return "gaf_load_half(" + e + ")";
  if (t == DType::BFloat16) return "gaf_load_bf16(" + e + ")";
  return e;
}
std::string store(DType t, const std::string& e) {
  if (t == DType::Float16) return "gaf_store_half(" + e + ")";
  if (t == DType::BFloat16) return "gaf_store_bf16(" + e + ")";
  return e;
}
std::string decl(ScalarType t) { return t == ScalarType::Bool ? "const bool" : "const float"; }

std::string Namer::operator()(const Value* v) {
  if (debug_) {
    std::string s = "v_";
    for (char c : v->name()) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    return s + fmt::format("_{}", counter_++);
  }
  return fmt::format("t{}", counter_++);
}

std::vector<std::string> print_row_bases(std::ostream& os, const ElementwiseKernel& k) {
  const size_t rank = k.space.size();
  std::vector<std::string> index(k.operands.size());
  for (size_t o = 0; o < k.operands.size(); ++o) {
    const Dims& vd = k.operands[o].vdims;
    std::string base;
    for (size_t d = 0; d + 1 < rank; ++d) {
      if (is_one(vd[d]) && !is_one(k.space[d])) continue;
      base += fmt::format(" + q{} * ({})", d, product(vd, d + 1, rank));
    }
    os << fmt::format("    const int64_t b{} = 0{};\n", o, base);
    index[o] = splat(k, o) ? fmt::format("b{}", o) : fmt::format("b{} + j", o);
  }
  return index;
}

std::string vector_kind(DType t) { return t == DType::BFloat16 ? ", true" : t == DType::Float16 ? ", false" : ""; }
std::string vector_load(DType t, const std::string& array, const std::string& at) {
  return fmt::format("gaf_vload({} + ({}){})", array, at, vector_kind(t));
}

std::string vector_at(const std::string& idx, int u) { return u ? fmt::format("{} + {} * gaf_vw", idx, u) : idx; }

void print_element(std::ostream& os, const ElementwiseKernel& k, const std::vector<std::string>& index,
                   const std::string& out_index, const std::string& ind, Namer& names, int vectors) {
  const bool vec = vectors > 0;
  const int lanes = vec ? vectors : 1;
  auto named = [&](const std::string& name, int u) { return lanes > 1 ? fmt::format("{}_{}", name, u) : name; };
  std::map<int, std::string> loaded;           // operand -> its name
  std::vector<std::string> result(k.statements.size());
  for (size_t s = 0; s < k.statements.size(); ++s) {
    const Statement& st = k.statements[s];
    std::vector<std::string> args;
    std::vector<ScalarType> types;
    for (const Arg& a : st.args) {
      if (a.statement >= 0) {
        args.push_back(result[size_t(a.statement)]);
        types.push_back(k.statements[size_t(a.statement)].type);
        continue;
      }
      if (a.operand < 0) {
        args.emplace_back();
        types.push_back(ScalarType::F32);
        continue;
      }
      const Operand& op = k.operands[size_t(a.operand)];
      if (!loaded.count(a.operand)) {
        const std::string name = fmt::format("a{}", a.operand);
        const std::string& at = index[size_t(a.operand)];
        for (int u = 0; u < lanes; ++u) {
          if (vec)
            os << ind << "const gaf_v " << named(name, u) << " = "
               << (splat(k, size_t(a.operand)) ? "gaf_vec(" + load(op.loaded, op.array + "[" + at + "]") + ")"
                                               : vector_load(op.loaded, op.array, vector_at(at, u)))
               << ";\n";
          else
            os << ind << decl(scalar_type(op.value->type.dtype)) << " " << name << " = "
               << load(op.loaded, op.array + "[" + at + "]") << ";\n";
        }
        loaded[a.operand] = name;
      }
      args.push_back(loaded[a.operand]);
      types.push_back(scalar_type(op.value->type.dtype));
    }
    const std::string name = names(st.node->output(0));
    for (int u = 0; u < lanes; ++u) {
      std::vector<std::string> lane_args = args;
      for (std::string& a : lane_args)
        if (!a.empty()) a = named(a, u);
      const ScalarExpr e = formula_of(*st.node, lane_args, types);
      os << ind << (vec ? "const auto" : decl(e.type)) << " " << named(name, u) << " = " << e.expr << ";\n";
    }
    result[s] = name;
  }
  for (const Store& st : k.stores)
    for (int u = 0; u < lanes; ++u) {
      const std::string v = named(result[size_t(st.statement)], u);
      if (vec)
        os << ind << "gaf_vstore(out" << st.output << " + (" << vector_at(out_index, u) << "), gaf_vec(" << v << ")"
           << vector_kind(st.dtype) << ");\n";
      else
        os << ind << "out" << st.output << "[" << out_index << "] = " << store(st.dtype, v) << ";\n";
    }
}

void print_statements(std::ostream& os, const std::vector<IndexedStatement>& body, const std::string& ind) {
  for (const IndexedStatement& st : body) {
    switch (st.kind) {
      // An index a size-1 dim's load then does not read is no warning under nvcc -Werror.
      case IndexedStatement::Index:
        os << ind << "[[maybe_unused]] const int64_t " << st.name << " = " << st.expr << ";\n";
        break;
      case IndexedStatement::Load:
        os << ind << decl(st.type) << " " << st.name << " = " << load(st.loaded, st.array + "[" + st.expr + "]")
           << ";\n";
        break;
      case IndexedStatement::Compute: {
        const ScalarExpr e = formula_of(*st.node, st.args, st.types);
        os << ind << decl(e.type) << " " << st.name << " = " << e.expr << ";\n";
        break;
      }
      case IndexedStatement::Select: {
        std::string e = st.args.back();
        for (size_t k = st.args.size() - 1; k-- > 0;)
          e = fmt::format("({} < ({}) ? {} : {})", st.at, st.ends[k], st.args[k], e);
        os << ind << decl(st.type) << " " << st.name << " = " << e << ";\n";
        break;
      }
      case IndexedStatement::Store:
        os << ind << "out" << st.output << "[i] = " << store(st.stored, st.expr) << ";\n";
        break;
    }
  }
}

std::string reduced_count(const IndexedReduction& r) {
  std::string count = "1.0";
  for (size_t a = 0; a < r.input.size(); ++a)
    if (r.reduced[a]) count += " * double(" + text(r.input[a]) + ")";
  return count;
}

std::string reduce_finish(const IndexedReduction& r, size_t k, const std::string& a, const std::string& i,
                          const std::string& ind) {
  const IndexedReduction::Reduce& red = r.reduces[k];
  std::string result = "float(" + a + ")";
  if (red.op == "ReduceMean") result = "float(" + a + " / (" + reduced_count(r) + "))";
  else if (red.op == "ReduceL2") result = "float(__builtin_sqrt(" + a + "))";
  else if (red.op == "ReduceLogSum") result = "gaf_log(float(" + a + "))";
  std::string s;
  if (red.scratch) s += ind + fmt::format("redbuf{}[{}] = {};\n", k, i, result);
  if (red.output >= 0)
    s += ind + fmt::format("out{}[{}] = {};\n", red.output, i, store(red.node->output(0)->type.dtype, result));
  return s;
}

}  // namespace gaf::codegen::lower
