// The row shape's printer (lower::RowKernel), both dialects: the stages print alike in C++ and CUDA but for the
// loops over a row (an `omp simd` loop on the CPU, the block's threads striding on CUDA), the totals of a row's
// reductions (CUDA combines each thread's partial over the block), the row buffers (per-thread scratch or the
// output row on the CPU, shared memory on CUDA) and the CPU's whole-vector loops.
#include <fmt/format.h>

#include <map>
#include <optional>
#include <set>
#include <stdexcept>

#include "codegen/cpu/printer.h"
#include "codegen/cuda/printer.h"

namespace gaf::codegen::cpu {

namespace {

using lower::RowArg;
using lower::RowKernel;
using lower::RowRead;
using lower::RowStage;
using lower::RowStageKind;

class RowPrinter {
 public:
  RowPrinter(std::ostream& os, const RowKernel& k, bool cuda, RegionParams& params)
      : os_(os), k_(k), cuda_(cuda), params_(params),
        jl_(cuda ? cuda::row_element_loop() : "for (int64_t j = 0; j < L; ++j)") {}

  void print() {
    const size_t rank = k_.space.size();
    os_ << "  const int64_t L = " << lower::product(k_.space, k_.from, rank) << ";\n"
        << "  const int64_t rows = " << lower::product(k_.space, 0, k_.from) << ";\n"
        << "  if (L == 0 || rows == 0) return;\n";
    if (cuda_) {
      // One block per row: its buffers in dynamic shared memory, which the host sizes from the signature.
      os_ << (k_.scratch_rows == 0 ? "" : "  extern __shared__ float gaf_smem[];\n") << "  {\n    "
          << cuda::row_loop() << " {\n";
    } else {
      // Each thread's scratch rows, one slot per thread of the region's team.
      if (k_.scratch_rows > 0) {
        os_ << "  float* __restrict gaf_rows = static_cast<float*>(gaf_take(scratch_, sizeof(float) * size_t(L) * "
            << k_.scratch_rows << " * size_t(omp_get_max_threads())));\n  if (!gaf_rows) return;\n";
        params_.emplace_back("float* __restrict", "gaf_rows");
      }
      os_ << region_open(params_);
      if (k_.scratch_rows > 0)
        os_ << "    float* scratch = gaf_rows + size_t(L) * " << k_.scratch_rows
            << " * size_t(gaf_team ? omp_get_thread_num() : 0);\n";
      os_ << "#pragma omp for schedule(static)\n    for (int64_t r = 0; r < rows; ++r) {\n";
    }
    for (size_t b = 0; b < k_.buffers.size(); ++b) {
      os_ << ind_ << "float* buf" << b << " = ";
      if (k_.buffers[b].output >= 0) os_ << "out" << k_.buffers[b].output << " + r * L;\n";
      else os_ << (cuda_ ? "gaf_smem" : "scratch") << " + size_t(L) * " << k_.buffers[b].scratch << ";\n";
    }
    for (size_t s = 0; s < k_.stages.size(); ++s) {
      stage(s);
      if (s == 0 && k_.stages.size() > 1) prefetch_next_row();
    }
    // CUDA: rows end at a barrier, so a stage reading row entries other threads wrote could not race with the
    // next row (today each thread reads back only its own).
    if (!cuda_) {
      os_ << "    }\n" << region_close(params_, "rows * L >= 32768");
      return;
    }
    os_ << "      __syncthreads();\n    }\n  }\n";
  }

 private:
  // CPU: the next row of every operand read in whole rows, asked for after the row's first stage (which reads
  // this row of them) so that memory works while the later stages compute on rows in cache. The stages of a row
  // otherwise run one after another with memory idle in all but the first (scale -> Softmax rows [4096, 768],
  // the kernel alone on two threads, median ms over three alternations: 0.52-0.56 -> 0.49-0.52; spreading the
  // prefetches over the exponentials' loop measured the same).
  void prefetch_next_row() {
    if (cuda_) return;
    std::set<std::string> arrays;
    for (const lower::RowOperand& op : k_.operands)
      if (op.read == RowRead::Whole && arrays.insert(op.array).second)
        os_ << ind_ << "if (r + 1 < rows) { const char* next = reinterpret_cast<const char*>(" << op.array
            << " + (r + 1) * L); for (int64_t p = 0; p < L * int64_t(sizeof(*" << op.array
            << ")); p += 64) __builtin_prefetch(next + p); }\n";
  }
  std::string omp(const std::string& clause) const { return cuda_ ? "" : ind_ + "#pragma omp " + clause + "\n"; }
  // CUDA: the block's total of a per-thread partial `v`, in every thread.
  void block_total(const char* fn, const std::string& v) {
    if (cuda_) os_ << ind_ << v << " = " << fn << "(" << v << ");\n";
  }
  // A per-row output: one thread writes it in the CUDA dialect.
  void store_row_scalar(int output, const std::string& v) {
    os_ << ind_ << (cuda_ ? "if (threadIdx.x == 0) " : "") << "out" << output << "[r] = "
        << lower::store(k_.output_dtypes[size_t(output)], v) << ";\n";
  }
  // A staged row the group returns, staged apart from its output row: that store of element j.
  std::string also_store(const RowStage& st, const std::string& v) const {
    if (st.output < 0 || k_.buffers[size_t(st.buffer)].output >= 0) return "";
    return fmt::format(" out{}[r * L + j] = {};", st.output, lower::store(k_.output_dtypes[size_t(st.output)], v));
  }
  bool stored_apart(const RowStage& st) const { return st.output >= 0 && k_.buffers[size_t(st.buffer)].output < 0; }

  // Operand o's index in row r at element j.
  std::string index(int o) const {
    const lower::RowOperand& op = k_.operands[size_t(o)];
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
          coord[d] = fmt::format("(r / ({})) % {}", lower::product(k_.space, d + 1, k_.from),
                                 lower::text(k_.space[d]));
        const std::string row = lower::ravel(coord, op.vdims, 0, k_.from);
        return op.read == RowRead::OuterWhole ? fmt::format("({}) * L + j", row) : row;
      }
    }
    return "";
  }
  // Argument a's expression at row element j (or the per-row scalar), and its type.
  std::string arg(const RowArg& a, ScalarType& t) const {
    switch (a.kind) {
      case RowArg::None: t = ScalarType::F32; return "";
      case RowArg::Scalar: t = k_.stages[size_t(a.index)].type; return scalar_.at(a.index);
      case RowArg::Buffer: t = ScalarType::F32; return fmt::format("buf{}[j]", a.index);
      case RowArg::Inline: t = k_.stages[size_t(a.index)].type; return inline_.at(a.index);
      case RowArg::Operand: {
        const lower::RowOperand& op = k_.operands[size_t(a.index)];
        t = lower::scalar_type(op.value->type.dtype);
        return lower::load(op.loaded, op.array + "[" + index(a.index) + "]");
      }
    }
    return "";
  }
  // The vector form of argument a (vector u of a step, j its first element) for the CPU's vector loops; nullopt
  // where it is not read as fp32.
  std::optional<std::string> vector_arg(const RowArg& a, int u) const {
    switch (a.kind) {
      case RowArg::None: return std::string();
      case RowArg::Scalar:
        if (k_.stages[size_t(a.index)].type != ScalarType::F32) return std::nullopt;
        return fmt::format("gaf_vec({})", scalar_.at(a.index));
      case RowArg::Buffer: return fmt::format("gaf_vload(buf{} + {})", a.index, lower::vector_at("j", u));
      case RowArg::Inline: return std::nullopt;
      case RowArg::Operand: {
        const lower::RowOperand& op = k_.operands[size_t(a.index)];
        if (op.loaded != DType::Float) return std::nullopt;
        const std::string idx = index(a.index);
        if (idx.ends_with("j")) return fmt::format("gaf_vload({} + ({}))", op.array, lower::vector_at(idx, u));
        return fmt::format("gaf_vec({}[{}])", op.array, idx);
      }
    }
    return std::nullopt;
  }

  // Staged stage st on the CPU: opens `{ int64_t jv = 0;` and prints the vector loops over the row (kUnroll
  // vectors per step for a heavy formula, then shorter steps); returns false, printing nothing, where an input or
  // the output is not fp32. The caller's scalar loop starts at jv and closes the brace.
  bool row_vector_loops(const RowStage& st, double flops) {
    if (cuda_ || st.node->output(0)->type.dtype != DType::Float) return false;
    const int lanes = flops >= kHeavyFlops ? kUnroll : 1;
    std::vector<std::vector<std::string>> loads(static_cast<size_t>(lanes));
    for (int u = 0; u < lanes; ++u)
      for (const RowArg& a : st.args) {
        std::optional<std::string> v = vector_arg(a, u);
        if (!v) return false;
        loads[size_t(u)].push_back(*v);
      }
    std::vector<ScalarType> types(st.args.size(), ScalarType::F32);
    os_ << ind_ << "{ int64_t jv = 0;\n#if defined(GAF_VECTOR)\n";
    for (int step : vector_steps(lanes)) {
      const std::string width = step_width(step);
      os_ << ind_ << "for (; jv + " << width << " <= L; jv += " << width << ") {\n" << ind_ << "  const int64_t j = jv;\n";
      std::vector<std::string> results;
      for (int u = 0; u < step; ++u) {
        std::vector<std::string> args;
        for (size_t i = 0; i < st.args.size(); ++i) {
          if (loads[size_t(u)][i].empty()) {
            args.emplace_back();
            continue;
          }
          args.push_back(fmt::format("a{}_{}", i, u));
          os_ << ind_ << "  const gaf_v " << args.back() << " = " << loads[size_t(u)][i] << ";\n";
        }
        const ScalarExpr e = lower::formula_of(*st.node, args, types);
        results.push_back(fmt::format("y_{}", u));
        os_ << ind_ << "  const gaf_v " << results.back() << " = gaf_vec(" << e.expr << ");\n";
      }
      for (int u = 0; u < step; ++u) {
        const std::string at = lower::vector_at("j", u);
        os_ << ind_ << "  gaf_vstore(buf" << st.buffer << " + " << at << ", " << results[size_t(u)] << ");\n";
        if (stored_apart(st))
          os_ << ind_ << "  gaf_vstore(out" << st.output << " + r * L + " << at << ", " << results[size_t(u)] << ");\n";
      }
      os_ << ind_ << "}\n";
    }
    os_ << "#endif\n";
    return true;
  }

  // Declares `sum` = the sum over the row of exp(x - mx) (x the row's element j, mx its maximum), each term
  // stored to `buf`[j] when `buf` is named: a softmax's or log-sum-exp's heaviest loop. On the CPU, where x is
  // a row buffer or an fp32 operand, whole vectors first (gaf_exp_nonpos on gaf_v, partial sums per lane), then
  // the rest.
  void exp_sum(const RowArg& xa, const std::string& x, const std::string& mx, const std::string& sum,
               const std::string& buf) {
    const std::string store = buf.empty() ? "" : buf + "[j] = e; ";
    std::string loop = jl_;
    const bool vector = !cuda_ && (xa.kind == RowArg::Buffer ||
                                   (xa.kind == RowArg::Operand && k_.operands[size_t(xa.index)].loaded == DType::Float));
    os_ << ind_ << "float " << sum << " = 0.0f;\n";
    if (vector) {
      // x is `array[index]`: its vector load is gaf_vload(array + (index)).
      const size_t open = x.find('[');
      const std::string vx =
          fmt::format("gaf_vload({} + ({}))", x.substr(0, open), x.substr(open + 1, x.size() - open - 2));
      const std::string jv = "j" + sum;
      os_ << ind_ << "int64_t " << jv << " = 0;\n#if defined(GAF_VECTOR)\n"
          << ind_ << "{ gaf_v acc = gaf_vec(0.0f); const gaf_v mv = gaf_vec(" << mx << ");\n"
          << ind_ << "  for (; " << jv << " + gaf_vw <= L; " << jv << " += gaf_vw) { const int64_t j = " << jv
          << "; const gaf_v e = gaf_exp_nonpos(" << vx << " - mv); "
          << (buf.empty() ? "" : "gaf_vstore(" + buf + " + j, e); ") << "acc += e; }\n"
          << ind_ << "  " << sum << " = gaf::simd::reduce_add(acc); }\n#endif\n";
      loop = fmt::format("for (int64_t j = {}; j < L; ++j)", jv);
    }
    os_ << omp("simd reduction(+:" + sum + ")") << ind_ << loop << " { const float e = gaf_exp_nonpos(" << x
        << " - " << mx << "); " << store << sum << " += e; }\n";
  }

  void stage(size_t s) {
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
    const ScalarExpr e = lower::formula_of(*st.node, args, types);
    if (st.kind == RowStageKind::PerRow) {
      const std::string name = fmt::format("s{}", sv_++);
      os_ << ind_ << lower::decl(e.type) << " " << name << " = " << e.expr << ";\n";
      scalar_[int(s)] = name;
      if (st.output >= 0) store_row_scalar(st.output, name);
      return;
    }
    if (st.kind == RowStageKind::Inline) {
      inline_[int(s)] = "(" + e.expr + ")";
      return;
    }
    // On the CPU, where every input reads as fp32 (and an output is fp32), whole vectors first, as in the
    // elementwise kernel (kUnroll per step for a heavy formula); the scalar loop takes the rest of the row.
    const OpInfo* info = find_op(n);
    std::string loop = jl_;
    if (row_vector_loops(st, info ? info->flops_per_element : 0)) loop = "for (int64_t j = jv; j < L; ++j)";
    os_ << omp("simd") << ind_ << loop << " { const float v = " << e.expr << "; buf" << st.buffer << "[j] = v;"
        << also_store(st, "v") << " }\n";
    if (loop != jl_) os_ << ind_ << "}\n";
  }

  void softmax(const RowStage& st) {
    ScalarType t;
    const std::string x = arg(st.args[0], t);
    const bool soft = st.kind == RowStageKind::Softmax;
    const int b = st.buffer;
    std::string mx = fmt::format("m{}", sv_), sum = fmt::format("s{}", sv_++);
    os_ << ind_ << "float " << mx << " = -__builtin_inff();\n" << omp("simd reduction(max:" + mx + ")") << ind_ << jl_
        << " { const float v = " << x << "; " << mx << " = v > " << mx << " ? v : " << mx << "; }\n";
    block_total("gaf_block_max", mx);
    exp_sum(st.args[0], x, mx, sum, soft ? fmt::format("buf{}", b) : "");
    block_total("gaf_block_sum", sum);
    if (soft && st.output >= 0) {  // scale and store in one pass
      os_ << ind_ << "{ const float inv = 1.0f / " << sum << ";\n" << omp("simd") << ind_ << jl_
          << " { const float y = buf" << b << "[j] * inv; buf" << b << "[j] = y;" << also_store(st, "y") << " } }\n";
      return;
    }
    if (soft)
      os_ << ind_ << "{ const float inv = 1.0f / " << sum << ";\n" << omp("simd") << ind_ << jl_ << " buf" << b
          << "[j] *= inv; }\n";
    else
      // (x - max) - log(sum): x - (max + log(sum)) would lose log(sum) to max's rounding for large logits.
      os_ << ind_ << "{ const float ls = gaf_log(" << sum << ");\n" << omp("simd") << ind_ << jl_ << " buf" << b
          << "[j] = (" << x << " - " << mx << ") - ls; }\n";
    if (stored_apart(st))
      os_ << omp("simd") << ind_ << jl_ << " out" << st.output << "[r * L + j] = "
          << lower::store(k_.output_dtypes[size_t(st.output)], fmt::format("buf{}[j]", b)) << ";\n";
  }

  // y = (x - mean) / sqrt(var + eps) * scale + bias over the row (RMS: no centring, no bias).
  void norm(const RowStage& st) {
    const Node& n = *st.node;
    const bool centre = n.op_type == "LayerNormalization";
    ScalarType t;
    const std::string x = arg(st.args[0], t);
    // Row statistics in double, as the runtime's kernel keeps them: fp32 squares overflow from 1.8e19.
    std::string mean = fmt::format("s{}", sv_++), var = fmt::format("s{}", sv_++);
    os_ << ind_ << "double " << mean << " = 0.0;\n";
    if (centre) {
      os_ << omp("simd reduction(+:" + mean + ")") << ind_ << jl_ << " " << mean << " += double(" << x << ");\n";
      block_total("gaf_block_sum", mean);
      os_ << ind_ << mean << " /= double(L);\n";
    }
    os_ << ind_ << "double " << var << " = 0.0;\n" << omp("simd reduction(+:" + var + ")") << ind_ << jl_
        << " { const double d = double(" << x << ") - " << mean << "; " << var << " += d * d; }\n";
    block_total("gaf_block_sum", var);
    os_ << ind_ << "{ const float rstd = float(1.0 / __builtin_sqrt(" << var << " / double(L) + "
        << float_literal(n.attr_float("epsilon", 1e-5f)) << ")), mf = float(" << mean << ");\n";
    // LayerNormalization's Mean and InvStdDev, where the group returns them: one value per row.
    for (const auto& [k, output] : st.stats) store_row_scalar(output, k == 1 ? "mf" : "rstd");
    os_ << omp("simd") << ind_ << jl_ << " { float v = (" << x << " - mf) * rstd;";
    if (st.args.size() > 1 && st.args[1].kind != RowArg::None) os_ << " v *= " << arg(st.args[1], t) << ";";
    if (centre && st.args.size() > 2 && st.args[2].kind != RowArg::None) os_ << " v += " << arg(st.args[2], t) << ";";
    os_ << " buf" << st.buffer << "[j] = v;" << also_store(st, "v") << " } }\n";
  }

  void reduce(size_t s) {
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
      os_ << ind_ << acc_t << " " << acc << " = " << init << ";\n" << omp("simd reduction(+:" + acc + ")") << ind_
          << jl_ << " " << acc << " += " << step << ";\n";
      block_total("gaf_block_sum", acc);
    } else {
      // Max / min over the row (a NaN anywhere makes it NaN, as the runtime's reductions give); LogSumExp:
      // max + log(sum exp(x - max)), the row's infinite maximum itself (an all -inf row gives -inf).
      const bool hi = combine != 'm';
      std::string ext = fmt::format("s{}", sv_++), nan = fmt::format("s{}", sv_++);
      os_ << ind_ << "float " << ext << " = " << (hi ? "-__builtin_inff()" : "__builtin_inff()") << ";\n"
          << ind_ << "int " << nan << " = 0;\n"
          << omp(fmt::format("simd reduction({}:{}) reduction(|:{})", hi ? "max" : "min", ext, nan)) << ind_ << jl_
          << " { const float v = " << x << "; " << ext << " = v " << (hi ? ">" : "<") << " " << ext << " ? v : "
          << ext << "; " << nan << " |= v != v; }\n";
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

  std::ostream& os_;
  const RowKernel& k_;
  bool cuda_;
  RegionParams& params_;
  const std::string jl_;  // every j-loop over the row has this header (see cuda::row_element_loop())
  const std::string ind_ = "      ";
  std::map<int, std::string> scalar_;  // a per-row scalar's name, by stage
  std::map<int, std::string> inline_;  // an inlined row value's formula, parenthesised, by stage
  int sv_ = 0;
};

}  // namespace

void print_rows(std::ostream& os, const lower::RowKernel& k, bool cuda, RegionParams& params) {
  RowPrinter(os, k, cuda, params).print();
}

}  // namespace gaf::codegen::cpu
