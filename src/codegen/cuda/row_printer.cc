// The row form's CUDA printer (lower::RowKernel): one row per block, the row buffers in dynamic shared memory, the
// block's threads striding over a row, a row's totals combined over the block.
#include "codegen/cuda/printer.h"
#include "codegen/lower/c_rows.h"

namespace gaf::codegen::cuda {

namespace {

class CudaRowPrinter final : public lower::RowPrinter {
 public:
  CudaRowPrinter(std::ostream& os, const lower::RowKernel& k) : RowPrinter(os, k, row_element_loop()) {}

 private:
  // One block per row: its buffers in dynamic shared memory, which the host sizes from the signature.
  void open_rows() override {
    os_ << (k_.scratch_rows == 0 ? "" : "  extern __shared__ float gaf_smem[];\n") << "  {\n    " << row_loop()
        << " {\n";
  }
  // Rows end at a barrier, so a stage reading row entries other threads wrote could not race with the next row
  // (today each thread reads back only its own).
  void close_rows() override { os_ << "      __syncthreads();\n    }\n  }\n"; }
  std::string scratch_base() const override { return "gaf_smem"; }
  std::string loop_pragma(const std::string&) const override { return ""; }
  // The block's total of the per-thread partial v, in every thread.
  void block_total(const char* fn, const std::string& v) override {
    os_ << ind_ << v << " = " << fn << "(" << v << ");\n";
  }
  std::string row_scalar_guard() const override { return "if (threadIdx.x == 0) "; }
};

}  // namespace

void print_rows(std::ostream& os, const lower::RowKernel& k) { CudaRowPrinter(os, k).print(); }

}  // namespace gaf::codegen::cuda
