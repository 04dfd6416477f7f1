#include "codegen/cuda/printer.h"

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

}  // namespace gaf::codegen::cuda
