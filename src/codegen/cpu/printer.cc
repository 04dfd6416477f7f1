#include "codegen/cpu/printer.h"

#include <fmt/format.h>

namespace gaf::codegen::cpu {

using lower::text;

std::string region_open(const RegionParams& params) {
  std::string s = "  {\n  const auto gaf_region = [=](";
  for (const auto& [type, name] : params) s += type + " " + name + ", ";
  return s + "[[maybe_unused]] const bool gaf_team) {\n";
}

std::string region_close(const RegionParams& params, const std::string& cond) {
  std::string args;
  for (const auto& [type, name] : params) args += name + ", ";
  return "  };\n  if (" + cond + ") {\n#pragma omp parallel\n    gaf_region(" + args + "true);\n" +
         "  } else {\n    gaf_region(" + args + "false);\n  }\n  }\n";
}

std::string row_coordinates(const lower::Dims& space) {
  std::string s;
  for (int d = int(space.size()) - 2; d >= 0; --d)
    s += fmt::format("    const int64_t q{} = rem % {};\n    rem /= {};\n", d, text(space[size_t(d)]),
                     text(space[size_t(d)]));
  return s;
}

namespace {

// The parallel loop over the rows of `space` (rank >= 1, after `n`), opened with the row's coordinates q<d>.
std::string row_loop_head(const lower::Dims& space, const RegionParams& params) {
  return "  const int64_t inner = " + text(space.back()) + ";\n  const int64_t rows = n / inner;\n" +
         region_open(params) + "#pragma omp for schedule(static)\n  for (int64_t r = 0; r < rows; ++r) {\n" +
         "    int64_t rem = r;\n" + row_coordinates(space);
}

}  // namespace

std::vector<int> vector_steps(int unroll) {
  if (unroll <= 1) return {1};
  if (unroll > kShortUnroll) return {unroll, kShortUnroll, 1};
  return {unroll, 1};
}

std::string step_width(int step) { return step > 1 ? fmt::format("{} * gaf_vw", step) : "gaf_vw"; }

void print_elementwise(std::ostream& os, const lower::ElementwiseKernel& k, const RegionParams& params,
                       lower::Namer& names) {
  const size_t rank = k.space.size();
  os << "  const int64_t n = " << lower::product(k.space, 0, rank) << ";\n  if (n == 0) return;\n";
  std::vector<std::string> index(k.operands.size());
  // Where every operand and output is a float type (fp32, fp16, bf16), the inner loop first runs on whole
  // vectors (gaf_v, the prelude's vector forms of the formulas), then the scalar loop finishes the last elements.
  const bool vector = lower::all_float(k);
  // A formula heavy in transcendentals is bound by the latency of its chain of dependent instructions (an
  // exp's polynomial, a division), not by memory: kUnroll vectors per step, each statement written for all of
  // them before the next, give the core independent chains to overlap (the 12-op chain of fusion_bench, 16M
  // fp32, 2 threads, four vectors a step against one: 15.3 -> 8.5 ms with AVX-512, 36 -> 20 ms with AVX2).
  // Shorter steps finish what is left, then the scalar loop. Light formulas stream at the copy rate either
  // way and keep one vector.
  const int unroll = vector && k.flops_per_element >= kHeavyFlops ? kUnroll : 1;
  auto vector_loop = [&](const char* var, const char* from, const char* to, const char* element) {
    os << fmt::format("    int64_t {} = {};\n#if defined(GAF_VECTOR)\n", var, from);
    for (int u : vector_steps(unroll)) {
      const std::string step = step_width(u);
      os << fmt::format("    for (; {} + {} <= {}; {} += {}) {{\n      {};\n", var, step, to, var, step, element);
      lower::print_element(os, k, index, "i", "      ", names, u);
      os << "    }\n";
    }
    os << "#endif\n";
  };
  if (k.walk == lower::Walk::Flat) {
    os << "  const int64_t blocks = (n + 16383) / 16384;\n" << region_open(params)
       << "#pragma omp for schedule(static)\n"
          "  for (int64_t blk = 0; blk < blocks; ++blk) {\n"
          "    const int64_t lo = blk * 16384, hi = lo + 16384 < n ? lo + 16384 : n;\n";
    for (size_t o = 0; o < k.operands.size(); ++o) index[o] = lower::splat(k, o) ? "0" : "i";
    if (vector) vector_loop("iv", "lo", "hi", "const int64_t i = iv");
    os << "#pragma omp simd\n    for (int64_t i = " << (vector ? "iv" : "lo") << "; i < hi; ++i) {\n";
  } else {
    os << row_loop_head(k.space, params);
    index = lower::print_row_bases(os, k);
    if (vector) vector_loop("jv", "0", "inner", "const int64_t j = jv, i = r * inner + j");
    os << "#pragma omp simd\n    for (int64_t j = " << (vector ? "jv" : "0") << "; j < inner; ++j) {\n";
    os << "      const int64_t i = r * inner + j;\n";
  }
  lower::print_element(os, k, index, "i", "      ", names);
  os << "    }\n  }\n" << region_close(params, "n >= 65536");
}

namespace {

constexpr int64_t kIndexedParallelFrom = 65536;

std::string parallel_cond() { return fmt::format("n >= {}", kIndexedParallelFrom); }

// Opens the nest up to its inner loop (rank >= 1): the parallel row loop with the row's index q<d> per outer dim.
void open_rows(std::ostream& os, const lower::Dims& space, const RegionParams& params) {
  os << "  {\n  const int64_t n = " << lower::product(space, 0, space.size()) << ";\n  if (n > 0) {\n"
     << row_loop_head(space, params);
}

}  // namespace

void print_indexed(std::ostream& os, const lower::IndexedNest& nest, const RegionParams& params) {
  const size_t rank = nest.space.size();
  if (rank == 0) {
    os << "  {\n  const int64_t n = " << lower::product(nest.space, 0, 0) << ";\n  if (n > 0) {\n"
       << "  {\n    const int64_t i = 0;\n";
    lower::print_statements(os, nest.body, "    ");
    os << "  }\n  }\n  }\n";
    return;
  }
  open_rows(os, nest.space, params);
  if (nest.segments.empty()) {
    os << "#pragma omp simd\n    for (int64_t j = 0; j < inner; ++j) {\n      const int64_t i = r * inner + j;\n";
    lower::print_statements(os, nest.body, "      ");
    os << "    }\n  }\n" << region_close(params, parallel_cond()) << "  }\n  }\n";
    return;
  }
  for (const lower::IndexedNest::Segment& s : nest.segments) {
    os << "#pragma omp simd\n    for (int64_t j = " << s.begin << "; j < " << s.end
       << "; ++j) {\n      const int64_t i = r * inner + j;\n";
    lower::print_statements(os, s.body, "      ");
    os << "    }\n";
  }
  os << "  }\n" << region_close(params, parallel_cond()) << "  }\n  }\n";
}

}  // namespace gaf::codegen::cpu
