#include "codegen/cuda/printer.h"

#include <fmt/format.h>

namespace gaf::codegen::cuda {

std::string kernel_head(const std::string& symbol) {
  return "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(kBlockSize) + ") " + symbol +
         "(const GafArgs args) {\n"
         "  [[maybe_unused]] const void* const* in_ = args.in; [[maybe_unused]] void* const* out_ = "
         "args.out;\n"
         "  [[maybe_unused]] const int64_t* sym = args.sym;\n";
}

std::string element_loop() {
  return "for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * "
         "blockDim.x)";
}

std::string row_loop() { return "for (int64_t r = blockIdx.x; r < rows; r += gridDim.x)"; }

std::string row_element_loop() { return "for (int64_t j = threadIdx.x; j < L; j += blockDim.x)"; }

std::string element_row_loop(const lower::Dims& space) {
  using lower::text;
  const size_t rank = space.size();
  std::string s = "  const int64_t inner = " + text(space[rank - 1]) + ";\n  " + element_loop() + " {\n" +
                  "    int64_t rem = i / inner;\n    [[maybe_unused]] const int64_t j = i - rem * inner;\n";
  for (int d = int(rank) - 2; d >= 0; --d)
    s += fmt::format("    [[maybe_unused]] const int64_t q{} = rem % {};\n    rem /= {};\n", d,
                     text(space[size_t(d)]), text(space[size_t(d)]));
  return s;
}

void print_elementwise(std::ostream& os, const lower::ElementwiseKernel& k, lower::Namer& names) {
  const size_t rank = k.space.size();
  os << "  const int64_t n = " << lower::product(k.space, 0, rank) << ";\n  if (n == 0) return;\n";
  std::vector<std::string> index(k.operands.size());
  if (k.walk == lower::Walk::Flat) {
    for (size_t o = 0; o < k.operands.size(); ++o) index[o] = lower::splat(k, o) ? "0" : "i";
    // Whole-space operands all kernel arguments (aligned bases, no constant arrays): four consecutive elements
    // per thread and step, which the compiler turns into 16-byte accesses (a quarter of the load instructions,
    // four times the bytes in flight), then the last n % 4 one by one.
    bool vector = rank > 0;
    for (size_t o = 0; o < k.operands.size(); ++o) vector &= lower::splat(k, o) || k.operands[o].argument;
    if (vector) {
      os << "  const int64_t n4 = n / 4;\n"
         << "  for (int64_t v = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; v < n4; v += int64_t(gridDim.x) * "
            "blockDim.x) {\n"
         << "#pragma unroll\n    for (int l = 0; l < 4; ++l) {\n      const int64_t i = v * 4 + l;\n";
      lower::print_element(os, k, index, "i", "      ", names);
      os << "    }\n  }\n"
         << "  for (int64_t i = n4 * 4 + blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += "
            "int64_t(gridDim.x) * blockDim.x) {\n";
      lower::print_element(os, k, index, "i", "    ", names);
      os << "  }\n";
      return;
    }
    os << "  " << element_loop() << " {\n";
  } else {
    os << element_row_loop(k.space);
    index = lower::print_row_bases(os, k);
  }
  lower::print_element(os, k, index, "i", "    ", names);
  os << "  }\n";
}

void open_space(std::ostream& os, const lower::Dims& space) {
  const size_t rank = space.size();
  os << "  {\n  const int64_t n = " << lower::product(space, 0, rank) << ";\n  if (n > 0) {\n";
  if (rank == 0) {
    os << "  if (blockIdx.x == 0 && threadIdx.x == 0) {\n    const int64_t i = 0;\n";
    return;
  }
  if (rank == 1)
    os << "  " << element_loop() << " {\n    [[maybe_unused]] const int64_t j = i;\n";
  else
    os << element_row_loop(space);
}

void close_space(std::ostream& os) { os << "  }\n  }\n  }\n"; }

void print_indexed(std::ostream& os, const lower::IndexedNest& nest) {
  open_space(os, nest.space);
  lower::print_statements(os, nest.body, "    ");
  close_space(os);
}

void print_indexed_reduction(std::ostream& os, const lower::IndexedReduction& red) {
  const lower::IndexedReduction::Reduce& r = red.reduces.at(0);
  open_space(os, red.space);
  std::string ind = "    ";
  os << ind << lower::reduce_acc_type(r.op) << " acc0 = " << lower::reduce_init(r.op) << ";\n";
  const int rank = int(red.input.size());
  for (int a = 0; a < rank; ++a)
    if (red.reduced[size_t(a)]) {
      os << ind << fmt::format("for (int64_t k{0} = 0; k{0} < {1}; ++k{0}) {{\n", a, lower::text(red.input[size_t(a)]));
      ind += "  ";
    }
  lower::print_statements(os, r.at, ind);
  const std::string& x = r.value;
  if (lower::reduce_squares(r.op))
    os << ind << "acc0 += double(" << x << ") * double(" << x << ");\n";
  else
    os << ind
       << lower::reduce_fold(r.op, "acc0",
                             lower::reduce_sums(r.op) ? "double(" + lower::reduce_term(r.op, x) + ")" : x)
       << "\n";
  for (int a = rank - 1; a >= 0; --a)
    if (red.reduced[size_t(a)]) {
      ind.resize(ind.size() - 2);
      os << ind << "}\n";
    }
  os << lower::reduce_finish(red, 0, "acc0", "i", ind);
  close_space(os);
}

}  // namespace gaf::codegen::cuda
