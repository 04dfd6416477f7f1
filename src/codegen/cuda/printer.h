// The CUDA printer: kernels of the lowering IR (src/codegen/lower/kernel_ir.h) for NVRTC: grid-stride loops, a
// block per row, a thread per reduced output; the kernel head, the loop headers of the CUDA kernel shapes, and the
// limits they assume.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "codegen/lower/c_text.h"
#include "codegen/lower/kernel_ir.h"

namespace gaf::codegen::cuda {

// The sizes of GafArgs' arrays (cuda_prelude()): a group with more inputs, outputs or symbols is not printed.
inline constexpr int kMaxInputs = 32, kMaxOutputs = 16, kMaxSymbols = 16;
// Threads per block, for every kernel (the block reductions in the prelude are written for it).
inline constexpr int kBlockSize = 256;
// The dynamic shared memory a row kernel may ask for: a Hopper block's opt-in maximum (227 KiB) less room for the
// block reductions' scratch. Above 48 KiB the host opts in (cudaFuncSetAttribute), after checking the device
// allows that much (sharedMemPerBlockOptin).
inline constexpr int64_t kMaxRowSharedBytes = 224 * 1024;

// `extern "C" __global__ ... SYMBOL(const GafArgs args) {` and the in_ / out_ / sym locals the body reads.
std::string kernel_head(const std::string& symbol);
// Grid-stride loop header over the linear output index i in [0, n).
std::string element_loop();
// Grid-stride loop header over rows r in [0, rows), one row per block.
std::string row_loop();
// The block's threads over a row, j in [0, L). Every row loop uses this one header, so each thread reads back
// only the row-buffer entries it wrote itself and needs no barrier between loops.
std::string row_element_loop();
// A grid-stride loop over the linear index i of `space` (rank >= 2), opened with the column j and the row
// coordinates q<d> derived from i, as the CPU row loops name them (some may go unread).
std::string element_row_loop(const lower::Dims& space);

// A loop nest over `space` as one grid-stride loop over its linear index i, with j and the q<d> unravelled from it
// (a rank-0 space: thread 0 of block 0), the dims' indices named as lower::nest_index names them. Its body goes
// at indent 4; close_space closes it.
void open_space(std::ostream& os, const lower::Dims& space);
void close_space(std::ostream& os);
// An indexed loop nest after the kernel's pointer declarations.
void print_indexed(std::ostream& os, const lower::IndexedNest& nest);

// An indexed reduction: one thread per output element running the reduced loops (one reduction, an output of
// the group: the lowering refuses the rest).
void print_indexed_reduction(std::ostream& os, const lower::IndexedReduction& red);

// Row kernel k after the kernel's pointer declarations: one row per block, the row buffers in shared memory, the
// block's threads over a row (src/codegen/cuda/row_printer.cc).
void print_rows(std::ostream& os, const lower::RowKernel& k);

// Kernel k's loops after the kernel's pointer declarations: `n`, then one grid-stride loop over i (the Rows walk's
// row coordinates and column derived from it); a Flat kernel whose operands are all arguments or single elements
// takes four consecutive elements per thread and step.
void print_elementwise(std::ostream& os, const lower::ElementwiseKernel& k, lower::Namer& names);

}  // namespace gaf::codegen::cuda
