// The indexed reduction's CPU schedule (lower::IndexedReduction): work items of output blocks, chunks of a
// split reduced axis folded into partial states, fp32 partial sums, vector lanes along a reduced innermost axis.
#include <fmt/format.h>

#include "codegen/cpu/printer.h"

namespace gaf::codegen::cpu {

void print_indexed_reduction(std::ostream& os, const lower::IndexedReduction& red, RegionParams& params) {
  using Reduce = lower::IndexedReduction::Reduce;
  using lower::product;
  using lower::text;
  const auto& reds = red.reduces;
  const lower::Dims& id = red.input;
  const lower::Dims& space = red.space;
  const int rank = int(id.size());
  const size_t orank = space.size();
  for (size_t k = 0; k < reds.size(); ++k)
    if (reds[k].scratch) {
      os << "  float* __restrict redbuf" << k << " = static_cast<float*>(gaf_take(scratch_, sizeof(float) * size_t(1 + "
         << product(space, 0, orank) << ")));\n  if (!redbuf" << k << ") return;\n";
      params.emplace_back("float* __restrict", fmt::format("redbuf{}", k));
    }
  const std::string count = lower::reduced_count(red);
  // Work items are blocks of up to W consecutive output elements along the innermost output dim, each with its
  // own accumulators: the reduced loops run outside an omp simd loop over the block, so column reductions (NHWC
  // global pooling: [1, H, W, C] -> [1, 1, 1, C]) vectorise across contiguous channels and split over the
  // threads even when the output is one row. Each output element still accumulates its inputs in the same
  // order, whatever W is. W is the widest of the block (1024; 4096 for columns), its halves, ..., 64 that still
  // gives each thread of this run kRedItemsPerThread items (and is not twice the row): wide blocks read longer
  // contiguous runs of each reduced step ([4096, 4096] over axis 0: 3.1-3.3 ms with W = 64, 2.3-2.6 with 1024),
  // narrow ones keep the threads busy on a short row. Parallel from 16384 elements read: a reduction's element
  // costs a load, a conversion and an add on one thread, about 1 ns on an input another core wrote (ResNet-18's
  // NHWC global pool, [1, 7, 7, 512]: 28 us on one thread, 11 on two; the op-by-op Relu and ReduceMean took 11).
  //
  // Sums of fp32 values (ReduceSum, ReduceMean, ReduceL1, ReduceLogSum) add kRedPartial steps of the innermost
  // reduced loop in fp32 and each such partial into the double accumulator: converting every element to double
  // and adding it there bound the loop by arithmetic ([4096, 4096] over axis 0: 2.42 -> 1.85 ms with partials of
  // 64, 6e-8 apart). Squares (ReduceSumSquare, ReduceL2) stay in double: fp32 squares overflow from 1.8e19.
  //
  // Lanes (the innermost input axis reduced, no ReduceProd): per output element, the innermost reduced loop is
  // an omp simd reduction over kRedLanePartial steps at a time, each partial folded into the accumulator.
  //
  // Column reductions read whole rows: blocks of up to kRedColumnBlock, and where fewer than kSplitRows such
  // blocks span the output, the outermost reduced axis splits into that many chunks instead of the blocks
  // narrowing, so each item streams whole rows rather than stretches a page apart ([4096, 4096] over axis 0, the
  // kernel alone on two threads, medians of three alternations: 1.39-1.60 ms with blocks of 1024, 1.18-1.29 with
  // the 8 chunks of whole rows, 1.12-1.17 with 4).
  constexpr int kRedBlock = 1024, kRedColumnBlock = 4096, kRedItemsPerThread = 2, kRedPartial = 64;
  constexpr int kRedLanePartial = 1024, kRedChunks = 64;
  bool lanes = rank > 0 && red.reduced[size_t(rank - 1)];
  for (const Reduce& r : reds) lanes &= r.op != "ReduceProd";
  const int block = lanes ? kRedBlock : kRedColumnBlock;
  bool blocked = lanes;  // the innermost reduced loop runs in blocks
  std::vector<bool> partial(reds.size());  // summed kRedPartial steps at a time in fp32, then into the accumulator
  for (size_t k = 0; k < reds.size(); ++k) {
    const std::string& op = reds[k].op;
    partial[k] = !lanes && reds[k].input == DType::Float &&
                 (op == "ReduceSum" || op == "ReduceMean" || op == "ReduceL1" || op == "ReduceLogSum");
    blocked |= partial[k];
  }
  int split_axis = -1;  // the reduced axis chunks split
  for (int a = 0; a < rank; ++a)
    if (red.reduced[size_t(a)] && (split_axis < 0 || lower::is_one(id[size_t(split_axis)]))) split_axis = a;
  const size_t states_from = params.size();  // the partial states are local to the reduction's block
  os << "  {\n  const int64_t n = " << product(space, 0, orank) << ";\n  if (n > 0) {\n"
     << "  const int64_t inner = " << (orank ? text(space[orank - 1]) : std::string("1")) << ";\n"
     << "  const int64_t rows = n / inner;\n"
     << "  const double work = double(n) * (" << count << ");\n";
  if (split_axis >= 0) {
    os << "  const int64_t extent = " << text(id[size_t(split_axis)]) << ";\n"
       << "  int64_t chunks = 1;\n"
       << "  if (rows * ((inner + 63) / 64) < 8) {\n"
       << "    chunks = int64_t(work / " << kSplitReduced << ".0);\n"
       << "    if (chunks > " << kRedChunks << ") chunks = " << kRedChunks << ";\n"
       << "  }";
    if (!lanes) {
      const std::string wide = fmt::format("rows * ((inner + {}) / {})", block - 1, block);
      os << " else if (" << wide << " < " << kSplitRows << ") {\n"
         << "    chunks = (" << kSplitRows << " + " << wide << " - 1) / (" << wide << ");\n"
         << "    if (double(chunks) > work / " << kSplitReduced << ".0) chunks = int64_t(work / " << kSplitReduced
         << ".0);\n"
         << "  }";
    }
    os << "\n  if (chunks > extent) chunks = extent;\n"
       << "  if (chunks < 1) chunks = 1;\n";
  } else {
    os << "  const int64_t chunks = 1;\n";
  }
  for (size_t k = 0; k < reds.size(); ++k) {
    const std::string acc_t = lower::reduce_acc_type(reds[k].op);
    os << "  " << acc_t << "* __restrict states" << k << " = chunks > 1 ? static_cast<" << acc_t
       << "*>(gaf_take(scratch_, sizeof(" << acc_t << ") * size_t(chunks * n))) : nullptr;\n"
       << "  if (chunks > 1 && !states" << k << ") return;\n";
    params.emplace_back(acc_t + "* __restrict", fmt::format("states{}", k));
  }
  os << "  const int64_t items = " << kRedItemsPerThread << " * int64_t(omp_get_max_threads());\n"
     << "  int64_t W = " << block << ";\n"
     << "  while (W > 64 && (W >= 2 * inner || chunks * rows * ((inner + W - 1) / W) < items)) W /= 2;\n"
     << "  const int64_t nblk = (inner + W - 1) / W;\n"
     << "  const int64_t blocks = rows * nblk;\n"
     << region_open(params) << "#pragma omp for schedule(static)\n"
     << "  for (int64_t item = 0; item < chunks * blocks; ++item) {\n"
     << "    const int64_t c = item / blocks, r = item % blocks / nblk, j0 = item % nblk * W;\n"
     << "    const int64_t jn = inner - j0 < W ? inner - j0 : W;\n"
     << "    (void)c;\n"
     << "    int64_t rem = r;\n" << row_coordinates(space) << "    (void)rem;\n";
  for (size_t k = 0; k < reds.size(); ++k) {
    os << "    " << lower::reduce_acc_type(reds[k].op) << " acc" << k << "[" << block << "];\n"
       << "    for (int64_t jj = 0; jj < jn; ++jj) acc" << k << "[jj] = " << lower::reduce_init(reds[k].op) << ";\n";
    if (partial[k]) os << "    float part" << k << "[" << block << "];\n";
  }
  std::string ind = "    ";
  // The element loop over the block: vectorised across outputs here, or (lanes) a plain loop outside the reduced
  // loops.
  auto open_block = [&](bool simd) {
    os << (simd ? "#pragma omp simd\n" : "") << ind << "for (int64_t jj = 0; jj < jn; ++jj) {\n"
       << ind << "  const int64_t j = j0 + jj;\n" << ind << "  const int64_t i = r * inner + j;\n"
       << ind << "  (void)j;\n" << ind << "  (void)i;\n";
    ind += "  ";
  };
  auto close = [&] {
    ind.resize(ind.size() - 2);
    os << ind << "}\n";
  };
  // Axis a's range: its chunk's on the split axis.
  auto lo = [&](int a) { return a == split_axis ? std::string("extent * c / chunks") : std::string("0"); };
  auto hi = [&](int a) { return a == split_axis ? std::string("extent * (c + 1) / chunks") : text(id[size_t(a)]); };
  auto acc = [&](size_t k) { return "acc" + std::to_string(k) + "[jj]"; };
  int last_reduced = -1;
  for (int a = 0; a < rank; ++a)
    if (red.reduced[size_t(a)]) last_reduced = a;
  if (lanes) open_block(false);
  for (int a = 0; a < rank; ++a)
    if (red.reduced[size_t(a)]) {
      if (blocked && a == last_reduced) {  // blocks summed in fp32 (lanes: any op) into part<k> / p<k>
        const int step = lanes ? kRedLanePartial : kRedPartial;
        os << ind << fmt::format("for (int64_t b{0} = {1}; b{0} < {2}; b{0} += {3}) {{\n", a, lo(a), hi(a), step)
           << ind << fmt::format("  const int64_t e{0} = b{0} + {1} < {2} ? b{0} + {1} : {2};\n", a, step, hi(a));
        ind += "  ";
        std::string clauses;
        for (size_t k = 0; k < reds.size(); ++k) {
          const Reduce& r = reds[k];
          if (partial[k]) {
            os << ind << "for (int64_t jj = 0; jj < jn; ++jj) part" << k << "[jj] = 0.0f;\n";
          } else if (lanes && lower::reduce_sums(r.op)) {
            os << ind << (lower::reduce_squares(r.op) ? "double" : "float") << " p" << k << " = 0.0f;\n";
            clauses += fmt::format(" reduction(+:p{})", k);
          } else if (lanes) {
            const bool high = r.op == "ReduceMax";
            os << ind << "float p" << k << " = " << (high ? "-__builtin_inff()" : "__builtin_inff()") << ";\n"
               << ind << "int nan" << k << " = 0;\n";
            clauses += fmt::format(" reduction({}:p{}) reduction(|:nan{})", high ? "max" : "min", k, k);
          }
        }
        if (lanes) os << "#pragma omp simd" << clauses << "\n";
        os << ind << fmt::format("for (int64_t k{0} = b{0}; k{0} < e{0}; ++k{0}) {{\n", a);
      } else {
        os << ind << fmt::format("for (int64_t k{0} = {1}; k{0} < {2}; ++k{0}) {{\n", a, lo(a), hi(a));
      }
      ind += "  ";
    }
  if (!lanes) open_block(true);
  for (size_t k = 0; k < reds.size(); ++k) {
    const Reduce& r = reds[k];
    lower::print_statements(os, r.at, ind);
    const std::string& x = r.value;
    const std::string term = lower::reduce_term(r.op, x);
    if (lanes && !lower::reduce_sums(r.op))
      os << ind << fmt::format("p{0} = {1} {2} p{0} ? {1} : p{0};\n", k, x, r.op == "ReduceMax" ? ">" : "<")
         << ind << fmt::format("nan{} |= {} != {};\n", k, x, x);
    else if (lower::reduce_squares(r.op))
      os << ind << (lanes ? fmt::format("p{}", k) : acc(k)) << " += double(" << x << ") * double(" << x << ");\n";
    else if (lanes)
      os << ind << "p" << k << " += " << term << ";\n";
    else if (partial[k])
      os << ind << "part" << k << "[jj] += " << term << ";\n";
    else
      os << ind << lower::reduce_fold(r.op, acc(k), lower::reduce_sums(r.op) ? "double(" + term + ")" : x) << "\n";
  }
  if (!lanes) close();
  for (int a = rank - 1; a >= 0; --a)
    if (red.reduced[size_t(a)]) {
      close();
      if (blocked && a == last_reduced) {
        for (size_t k = 0; k < reds.size(); ++k) {
          const Reduce& r = reds[k];
          if (partial[k])
            os << "#pragma omp simd\n"
               << ind << "for (int64_t jj = 0; jj < jn; ++jj) acc" << k << "[jj] += double(part" << k << "[jj]);\n";
          else if (lanes && lower::reduce_sums(r.op))
            os << ind << acc(k) << " += double(p" << k << ");\n";
          else if (lanes)
            os << ind << "if (nan" << k << ") " << acc(k) << " = __builtin_nanf(\"\");\n"
               << ind << lower::reduce_fold(r.op, acc(k), fmt::format("p{}", k)) << "\n";
        }
        close();
      }
    }
  if (lanes) close();
  os << "    if (chunks > 1) {\n      for (int64_t jj = 0; jj < jn; ++jj) {\n";
  for (size_t k = 0; k < reds.size(); ++k)
    os << "        states" << k << "[c * n + r * inner + j0 + jj] = acc" << k << "[jj];\n";
  os << "      }\n      continue;\n    }\n"
     << "#pragma omp simd\n    for (int64_t jj = 0; jj < jn; ++jj) {\n      const int64_t i = r * inner + j0 + jj;\n";
  for (size_t k = 0; k < reds.size(); ++k) os << lower::reduce_finish(red, k, acc(k), "i", "      ");
  os << "    }\n  }\n" << region_close(params, "work >= 16384.0");
  params.resize(states_from);
  os << "  if (chunks > 1) {\n    for (int64_t i = 0; i < n; ++i) {\n";
  for (size_t k = 0; k < reds.size(); ++k) {
    const std::string acc_t = lower::reduce_acc_type(reds[k].op);
    os << "      {\n        " << acc_t << " a = states" << k << "[i];\n"
       << "        for (int64_t c = 1; c < chunks; ++c) { const " << acc_t << " s = states" << k << "[c * n + i]; "
       << lower::reduce_fold(reds[k].op, "a", "s") << " }\n" << lower::reduce_finish(red, k, "a", "i", "        ")
       << "      }\n";
  }
  os << "    }\n";
  os << "  }\n  }\n  }\n";
}

}  // namespace gaf::codegen::cpu
