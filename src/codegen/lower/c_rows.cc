// The row form's stages as the C-family dialects print them alike (see c_rows.h).
#include "codegen/lower/c_rows.h"

#include <fmt/format.h>

#include <stdexcept>
#include <utility>

namespace gaf::codegen::lower {

RowPrinter::RowPrinter(std::ostream& os, const RowKernel& k, std::string element_loop)
    : os_(os), k_(k), jl_(std::move(element_loop)) {}

void RowPrinter::print() {
  const size_t rank = k_.space.size();
  os_ << "  const int64_t L = " << product(k_.space, k_.from, rank) << ";\n"
      << "  const int64_t rows = " << product(k_.space, 0, k_.from) << ";\n"
      << "  if (L == 0 || rows == 0) return;\n";
  open_rows();
  for (size_t b = 0; b < k_.buffers.size(); ++b) {
    // A buffer some stages end up not reading (a value the row kept in a register) is no warning under nvcc -Werror.
    os_ << ind_ << "[[maybe_unused]] float* buf" << b << " = ";
    if (k_.buffers[b].output >= 0) os_ << "out" << k_.buffers[b].output << " + r * L;\n";
    else os_ << scratch_base() << " + size_t(L) * " << k_.buffers[b].scratch << ";\n";
  }
  for (size_t s = 0; s < k_.stages.size(); ++s) {
    stage(s);
    if (s == 0 && k_.stages.size() > 1) after_first_stage();
  }
  close_rows();
}

bool RowPrinter::leading_loops(const RowStage&, double) { return false; }

std::string RowPrinter::exp_sum_leading_loops(const RowArg&, const std::string&, const std::string&,
                                              const std::string&) {
  return jl_;
}

std::string RowPrinter::extreme_leading_loops(const RowArg&, const std::string&, bool, const std::string&) {
  return jl_;
}

bool RowPrinter::stored_apart(const RowStage& st) const {
  return st.output >= 0 && k_.buffers[size_t(st.buffer)].output < 0;
}

// Declares `sum` = the sum over the row of exp(x - mx) (x the row's element j, mx its maximum), each term stored
// to `buf`[j] when `buf` is named: a softmax's or log-sum-exp's heaviest loop, after the dialect's leading loops.
void RowPrinter::exp_sum(const RowArg& xa, const std::string& x, const std::string& mx, const std::string& sum,
                         const std::string& buf) {
  const std::string keep = buf.empty() ? "" : buf + "[j] = e; ";
  os_ << ind_ << "float " << sum << " = 0.0f;\n";
  const std::string loop = exp_sum_leading_loops(xa, mx, sum, buf);
  os_ << loop_pragma("simd reduction(+:" + sum + ")") << ind_ << loop << " { const float e = gaf_exp_nonpos(" << x
      << " - " << mx << "); " << keep << sum << " += e; }\n";
}

// Operand o's index in row r at element j.
std::string RowPrinter::index(int o) const {
  const RowOperand& op = k_.operands[size_t(o)];
  switch (op.read) {
    case RowRead::Whole: return "r * L + j";
    case RowRead::Scalar: return "0";
    case RowRead::Weight: return "j";
    case RowRead::PerRow: return "r";
    case RowRead::OuterWhole:
    case RowRead::OuterPerRow: {
      // The operand's row is r's coordinates with its size-1 dims dropped.
      std::vector<std::string> coord(k_.from);
      for (size_t d = 0; d < k_.from; ++d)
        coord[d] = fmt::format("(r / ({})) % {}", product(k_.space, d + 1, k_.from),
                               text(k_.space[d]));
      const std::string row = ravel(coord, op.vdims, 0, k_.from);
      return op.read == RowRead::OuterWhole ? fmt::format("({}) * L + j", row) : row;
    }
  }
  return "";
}

// Argument a's expression at row element j (or the per-row scalar), and its type.
std::string RowPrinter::arg(const RowArg& a, ScalarType& t) const {
  switch (a.kind) {
    case RowArg::None: t = ScalarType::F32; return "";
    case RowArg::Scalar: t = k_.stages[size_t(a.index)].type; return scalar_.at(a.index);
    case RowArg::Buffer: t = ScalarType::F32; return fmt::format("buf{}[j]", a.index);
    case RowArg::Inline: t = k_.stages[size_t(a.index)].type; return inline_.at(a.index);
    case RowArg::Operand: {
      const RowOperand& op = k_.operands[size_t(a.index)];
      t = scalar_type(op.value->type.dtype);
      return load(op.loaded, op.array + "[" + index(a.index) + "]");
    }
  }
  return "";
}

// A per-row output, written by one thread where several share the row (row_scalar_guard).
void RowPrinter::store_row_scalar(int output, const std::string& v) {
  os_ << ind_ << row_scalar_guard() << "out" << output << "[r] = "
      << store(k_.output_dtypes[size_t(output)], v) << ";\n";
}
// A staged row the group returns, staged apart from its output row: that store of element j.
std::string RowPrinter::also_store(const RowStage& st, const std::string& v) const {
  if (st.output < 0 || k_.buffers[size_t(st.buffer)].output >= 0) return "";
  return fmt::format(" out{}[r * L + j] = {};", st.output, store(k_.output_dtypes[size_t(st.output)], v));
}


void RowPrinter::stage(size_t s) {
  const RowStage& st = k_.stages[s];
  const Node& n = *st.node;
  switch (st.kind) {
    case RowStageKind::Softmax:
    case RowStageKind::LogSoftmax: softmax(st); return;
    case RowStageKind::Norm: norm(st); return;
    case RowStageKind::Reduce: reduce(s); return;
    default: break;
  }
  // Elementwise node: per-row scalar, inlined or staged row value.
  std::vector<std::string> args;
  std::vector<ScalarType> types;
  for (const RowArg& a : st.args) {
    ScalarType t;
    args.push_back(arg(a, t));
    types.push_back(t);
  }
  const ScalarExpr e = formula_of(*st.node, args, types);
  if (st.kind == RowStageKind::PerRow) {
    const std::string name = fmt::format("s{}", sv_++);
    os_ << ind_ << decl(e.type) << " " << name << " = " << e.expr << ";\n";
    scalar_[int(s)] = name;
    if (st.output >= 0) store_row_scalar(st.output, name);
    return;
  }
  if (st.kind == RowStageKind::Inline) {
    inline_[int(s)] = "(" + e.expr + ")";
    return;
  }
  // The dialect's leading loops first (the CPU's whole vectors, where every input reads as fp32), then one loop
  // over the rest of the row.
  const OpInfo* info = find_op(n);
  std::string loop = jl_;
  if (leading_loops(st, info ? info->flops_per_element : 0)) loop = "for (int64_t j = jv; j < L; ++j)";
  os_ << loop_pragma("simd") << ind_ << loop << " { const float v = " << e.expr << "; buf" << st.buffer << "[j] = v;"
      << also_store(st, "v") << " }\n";
  if (loop != jl_) os_ << ind_ << "}\n";
}

void RowPrinter::softmax(const RowStage& st) {
  ScalarType t;
  const std::string x = arg(st.args[0], t);
  const bool soft = st.kind == RowStageKind::Softmax;
  const int b = st.buffer;
  std::string mx = fmt::format("m{}", sv_), sum = fmt::format("s{}", sv_++);
  os_ << ind_ << "float " << mx << " = -__builtin_inff();\n";
  const std::string max_loop = extreme_leading_loops(st.args[0], mx, true, "");
  os_ << loop_pragma("simd reduction(max:" + mx + ")") << ind_ << max_loop << " { const float v = " << x << "; "
      << mx << " = v > " << mx << " ? v : " << mx << "; }\n";
  block_total("gaf_block_max", mx);
  exp_sum(st.args[0], x, mx, sum, soft ? fmt::format("buf{}", b) : "");
  block_total("gaf_block_sum", sum);
  if (soft && st.output >= 0) {  // scale and store in one pass
    os_ << ind_ << "{ const float inv = 1.0f / " << sum << ";\n" << loop_pragma("simd") << ind_ << jl_
        << " { const float y = buf" << b << "[j] * inv; buf" << b << "[j] = y;" << also_store(st, "y") << " } }\n";
    return;
  }
  if (soft)
    os_ << ind_ << "{ const float inv = 1.0f / " << sum << ";\n" << loop_pragma("simd") << ind_ << jl_ << " buf" << b
        << "[j] *= inv; }\n";
  else
    // (x - max) - log(sum): x - (max + log(sum)) would lose log(sum) to max's rounding for large logits.
    os_ << ind_ << "{ const float ls = gaf_log(" << sum << ");\n" << loop_pragma("simd") << ind_ << jl_ << " buf" << b
        << "[j] = (" << x << " - " << mx << ") - ls; }\n";
  if (stored_apart(st))
    os_ << loop_pragma("simd") << ind_ << jl_ << " out" << st.output << "[r * L + j] = "
        << store(k_.output_dtypes[size_t(st.output)], fmt::format("buf{}[j]", b)) << ";\n";
}

// y = (x - mean) / sqrt(var + eps) * scale + bias over the row (RMS: no centring, no bias).
void RowPrinter::norm(const RowStage& st) {
  const Node& n = *st.node;
  const bool centre = n.op_type == "LayerNormalization";
  ScalarType t;
  const std::string x = arg(st.args[0], t);
  // Row statistics in double, as the runtime's kernel keeps them: fp32 squares overflow from 1.8e19.
  std::string mean = fmt::format("s{}", sv_++), var = fmt::format("s{}", sv_++);
  os_ << ind_ << "double " << mean << " = 0.0;\n";
  if (centre) {
    os_ << loop_pragma("simd reduction(+:" + mean + ")") << ind_ << jl_ << " " << mean << " += double(" << x << ");\n";
    block_total("gaf_block_sum", mean);
    os_ << ind_ << mean << " /= double(L);\n";
  }
  os_ << ind_ << "double " << var << " = 0.0;\n" << loop_pragma("simd reduction(+:" + var + ")") << ind_ << jl_
      << " { const double d = double(" << x << ") - " << mean << "; " << var << " += d * d; }\n";
  block_total("gaf_block_sum", var);
  os_ << ind_ << "{ const float rstd = float(1.0 / __builtin_sqrt(" << var << " / double(L) + "
      << float_literal(n.attr_float("epsilon", 1e-5f)) << ")), mf = float(" << mean << ");\n";
  // LayerNormalization's Mean and InvStdDev, where the group returns them: one value per row.
  for (const auto& [k, output] : st.stats) store_row_scalar(output, k == 1 ? "mf" : "rstd");
  os_ << loop_pragma("simd") << ind_ << jl_ << " { float v = (" << x << " - mf) * rstd;";
  if (st.args.size() > 1 && st.args[1].kind != RowArg::None) os_ << " v *= " << arg(st.args[1], t) << ";";
  if (centre && st.args.size() > 2 && st.args[2].kind != RowArg::None) os_ << " v += " << arg(st.args[2], t) << ";";
  os_ << " buf" << st.buffer << "[j] = v;" << also_store(st, "v") << " } }\n";
}

void RowPrinter::reduce(size_t s) {
  const RowStage& st = k_.stages[s];
  ScalarType t;
  const std::string x = arg(st.args[0], t);
  const std::string& op = st.node->op_type;
  std::string acc = fmt::format("s{}", sv_++);
  std::string init = "0.0f", step, finish = acc, acc_t = "float";
  char combine = '+';
  if (op == "ReduceSum") step = x;
  else if (op == "ReduceMean") { step = x; finish = acc + " / float(L)"; }
  else if (op == "ReduceSumSquare" || op == "ReduceL2") {  // squares in double: fp32 overflows from 1.8e19
    step = "double(" + x + ") * double(" + x + ")";
    acc_t = "double";
    finish = op == "ReduceL2" ? "float(__builtin_sqrt(" + acc + "))" : "float(" + acc + ")";
  }
  else if (op == "ReduceL1") step = "gaf_abs(" + x + ")";
  else if (op == "ReduceLogSum") { step = x; finish = "gaf_log(" + acc + ")"; }
  else if (op == "ReduceMax") { init = "-__builtin_inff()"; combine = 'M'; }
  else if (op == "ReduceMin") { init = "__builtin_inff()"; combine = 'm'; }
  else if (op == "ReduceLogSumExp") combine = 'L';
  else throw std::logic_error(op + " has no row form");  // lowering checked the op
  if (combine == '+') {
    os_ << ind_ << acc_t << " " << acc << " = " << init << ";\n" << loop_pragma("simd reduction(+:" + acc + ")") << ind_
        << jl_ << " " << acc << " += " << step << ";\n";
    block_total("gaf_block_sum", acc);
  } else {
    // Max / min over the row (a NaN anywhere makes it NaN, as the runtime's reductions give); LogSumExp:
    // max + log(sum exp(x - max)), the row's infinite maximum itself (an all -inf row gives -inf).
    const bool hi = combine != 'm';
    std::string ext = fmt::format("s{}", sv_++), nan = fmt::format("s{}", sv_++);
    os_ << ind_ << "float " << ext << " = " << (hi ? "-__builtin_inff()" : "__builtin_inff()") << ";\n"
        << ind_ << "int " << nan << " = 0;\n";
    const std::string loop = extreme_leading_loops(st.args[0], ext, hi, nan);
    os_ << loop_pragma(fmt::format("simd reduction({}:{}) reduction(|:{})", hi ? "max" : "min", ext, nan)) << ind_
        << loop << " { const float v = " << x << "; " << ext << " = v " << (hi ? ">" : "<") << " " << ext
        << " ? v : " << ext << "; " << nan << " |= v != v; }\n";
    block_total(hi ? "gaf_block_max" : "gaf_block_min", ext);
    block_total("gaf_block_or", nan);
    if (combine == 'L') {
      std::string sum = fmt::format("s{}", sv_++);
      exp_sum(st.args[0], x, ext, sum, "");
      block_total("gaf_block_sum", sum);
      os_ << ind_ << "const float " << acc << " = " << nan << " ? __builtin_nanf(\"\") : (" << ext << " - " << ext
          << " != 0.0f ? " << ext << " : " << ext << " + gaf_log(" << sum << "));\n";
    } else {
      os_ << ind_ << "const float " << acc << " = " << nan << " ? __builtin_nanf(\"\") : " << ext << ";\n";
    }
  }
  std::string fin = fmt::format("s{}", sv_++);
  os_ << ind_ << "const float " << fin << " = " << finish << ";\n";
  scalar_[int(s)] = fin;
  if (st.output >= 0) store_row_scalar(st.output, fin);
}

}  // namespace gaf::codegen::lower
