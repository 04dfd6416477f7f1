// The row form's CPU printer (lower::RowKernel): a parallel region over the rows, each thread's scratch rows from
// the caller's pool, whole-vector loops over a row where its values read as fp32, and the next row asked for while
// a row's later stages compute.
#include <fmt/format.h>

#include <optional>
#include <set>

#include "codegen/cpu/printer.h"
#include "codegen/lower/c_rows.h"

namespace gaf::codegen::cpu {

namespace {

using lower::RowArg;
using lower::RowKernel;
using lower::RowRead;
using lower::RowStage;

class CpuRowPrinter final : public lower::RowPrinter {
 public:
  CpuRowPrinter(std::ostream& os, const RowKernel& k, RegionParams& params)
      : RowPrinter(os, k, "for (int64_t j = 0; j < L; ++j)"), params_(params) {}

 private:
  void open_rows() override {
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
  void close_rows() override { os_ << "    }\n" << region_close(params_, "rows * L >= 32768"); }
  std::string scratch_base() const override { return "scratch"; }
  std::string loop_pragma(const std::string& clause) const override { return ind_ + "#pragma omp " + clause + "\n"; }
  // One thread takes a row.
  void block_total(const char*, const std::string&) override {}
  std::string row_scalar_guard() const override { return ""; }

  // The next row of every operand read in whole rows, asked for after the row's first stage (which reads
  // this row of them) so that memory works while the later stages compute on rows in cache. The stages of a row
  // otherwise run one after another with memory idle in all but the first (scale -> Softmax rows [4096, 768],
  // the kernel alone on two threads, median ms over three alternations: 0.52-0.56 -> 0.49-0.52; spreading the
  // prefetches over the exponentials' loop measured the same).
  void after_first_stage() override {
    std::set<std::string> arrays;
    for (const lower::RowOperand& op : k_.operands)
      if (op.read == RowRead::Whole && arrays.insert(op.array).second)
        os_ << ind_ << "if (r + 1 < rows) { const char* next = reinterpret_cast<const char*>(" << op.array
            << " + (r + 1) * L); for (int64_t p = 0; p < L * int64_t(sizeof(*" << op.array
            << ")); p += 64) __builtin_prefetch(next + p); }\n";
  }
  // The vector form of argument a (vector u of a step, j its first element) for the CPU's vector loops; nullopt
  // where it is not read as a float type (fp16 and bf16 operands convert a vector at a time).
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
        if (!lower::vector_type(op.loaded)) return std::nullopt;
        const std::string idx = index(a.index);
        if (idx.ends_with("j")) return lower::vector_load(op.loaded, op.array, lower::vector_at(idx, u));
        return "gaf_vec(" + lower::load(op.loaded, op.array + "[" + idx + "]") + ")";
      }
    }
    return std::nullopt;
  }

  // Whole vectors over the row (kUnroll per step for a heavy formula, then shorter steps, as in the elementwise
  // kernel); none where an input or the output is not fp32.
  bool leading_loops(const RowStage& st, double flops) override {
    if (st.node->output(0)->type.dtype != DType::Float) return false;
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
      os_ << ind_ << "for (; jv + " << width << " <= L; jv += " << width << ") {\n"
          << ind_ << "  const int64_t j = jv;\n";
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

  // Argument xa as whole vectors from element j where it is a row buffer or an fp32 operand read along the row
  // (vector_arg's load); nullopt otherwise.
  std::optional<std::string> row_vector(const RowArg& xa) const {
    const bool along_row =
        xa.kind == RowArg::Buffer || (xa.kind == RowArg::Operand && index(xa.index).ends_with("j"));
    return along_row ? vector_arg(xa, 0) : std::nullopt;
  }

  // Where x reads as whole vectors, those first (gaf_exp_nonpos on gaf_v, partial sums per lane).
  std::string exp_sum_leading_loops(const RowArg& xa, const std::string& mx, const std::string& sum,
                                    const std::string& buf) override {
    const std::optional<std::string> vx = row_vector(xa);
    if (!vx) return jl_;
    const std::string jv = "j" + sum;
    os_ << ind_ << "int64_t " << jv << " = 0;\n#if defined(GAF_VECTOR)\n"
        << ind_ << "{ gaf_v acc = gaf_vec(0.0f); const gaf_v mv = gaf_vec(" << mx << ");\n"
        << ind_ << "  for (; " << jv << " + gaf_vw <= L; " << jv << " += gaf_vw) { const int64_t j = " << jv
        << "; const gaf_v e = gaf_exp_nonpos(" << *vx << " - mv); "
        << (buf.empty() ? "" : "gaf_vstore(" + buf + " + j, e); ") << "acc += e; }\n"
        << ind_ << "  " << sum << " = gaf::simd::reduce_add(acc); }\n#endif\n";
    return fmt::format("for (int64_t j = {}; j < L; ++j)", jv);
  }

  // Where x reads as whole vectors, those first: GCC leaves the scalar `v > m ? v : m` loop unvectorised in some
  // kernels (the max of a staged Erf row before its Softmax, [2, 65536], the kernel alone on one thread: 252-257
  // us with the scalar loop, 46-47 with this). simd::max(v, acc) is `v > acc ? v : acc` lane by lane (acc where v
  // is NaN), as the scalar loop takes each element, so no lane becomes NaN and the lanes' extreme is the row's
  // (of a row of zeros of both signs, either zero).
  std::string extreme_leading_loops(const RowArg& xa, const std::string& ext, bool hi,
                                    const std::string& nan) override {
    const std::optional<std::string> vx = row_vector(xa);
    if (!vx) return jl_;
    const std::string jv = "j" + ext;
    const char* fn = hi ? "max" : "min";
    os_ << ind_ << "int64_t " << jv << " = 0;\n#if defined(GAF_VECTOR)\n"
        << ind_ << "{ gaf_v acc = gaf_vec(" << ext << ");" << (nan.empty() ? "" : " gaf_v nv = gaf_vec(0.0f);") << "\n"
        << ind_ << "  for (; " << jv << " + gaf_vw <= L; " << jv << " += gaf_vw) { const int64_t j = " << jv
        << "; const gaf_v v = " << *vx << "; acc = gaf::simd::" << fn << "(v, acc);"
        << (nan.empty() ? "" : " nv = v != v ? gaf_vec(1.0f) : nv;") << " }\n"
        << ind_ << "  " << ext << " = " << (hi ? "gaf::simd::reduce_max(acc)" : "-gaf::simd::reduce_max(-acc)") << ";"
        << (nan.empty() ? "" : fmt::format(" {} = gaf::simd::reduce_max(nv) > 0.0f;", nan)) << " }\n#endif\n";
    return fmt::format("for (int64_t j = {}; j < L; ++j)", jv);
  }

  RegionParams& params_;
};

}  // namespace

void print_rows(std::ostream& os, const lower::RowKernel& k, RegionParams& params) {
  CpuRowPrinter(os, k, params).print();
}

}  // namespace gaf::codegen::cpu
