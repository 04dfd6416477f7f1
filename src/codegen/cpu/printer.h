// The CPU printer: C++ loops with OpenMP over the lowering IR (src/codegen/lower/kernel_ir.h), on the runtime's
// fp32 vectors (gaf_v: 16 lanes with AVX-512, 8 with AVX2) where every read and write is fp32: parallel regions,
// the steps of vector loops, and each form's loops.
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "codegen/lower/c_text.h"
#include "codegen/lower/kernel_ir.h"

namespace gaf::codegen::cpu {

// A pointer a parallel region takes: its type and name (`const float* __restrict`, `in0`).
using RegionParams = std::vector<std::pair<std::string, std::string>>;

// A parallel loop that costs nothing when its work is small. libgomp enters a parallel region even when its if
// clause is false, 1.2 us a call on this VM (futex wakes), where a 512-element loop takes 10 ns. So the loop is
// an orphaned `omp for` inside a lambda that the kernel calls itself when its condition is false, or from inside
// `#pragma omp parallel` when it is true (the orphaned loop then splits over the team). The kernel's pointers
// are the lambda's __restrict parameters: captured (by reference or by value), they were reloaded per lane
// inside omp simd loops, as gathers (a whole-tensor mean 1.1 -> 9.9 ms). Scalars are captured by value;
// constant tables are static locals, which no capture copies.
// The lambda's last parameter, gaf_team, says whether it runs on the parallel region's team (each thread then
// takes its slot of per-thread scratch by omp_get_thread_num()) or alone on the calling thread (slot 0).
std::string region_open(const RegionParams& params);
// Closes the region region_open opened and runs it: on the team where `cond` holds, else on this thread.
std::string region_close(const RegionParams& params, const std::string& cond);

// The row coordinates q<d> of row r over the outer dims of `space` (all but the innermost), innermost first, from
// `int64_t rem = r` (which they use up), at indent 4.
std::string row_coordinates(const lower::Dims& space);

// Arithmetic per element from which a formula is heavy (an exp or a division counts 10 or more, an add 1).
inline constexpr double kHeavyFlops = 10;
// Vectors per step of a heavy formula: eight chains in flight keep both FMA pipes of an AVX-512 core busy
// where four left it waiting on their latency, and AVX2 gains too although its 16 registers spill (the
// 12-op chain's kernel alone, one thread: AVX-512 12.5-13.5 -> 9.2-9.5 ms, AVX2 29-31 -> 24-25 ms; six
// vectors 10.2-11.2, twelve 13.6-15.9, sixteen 9.8-10.7 ms). Rows too short for eight (a head of 64) take
// kShortUnroll.
inline constexpr int kUnroll = 8;
inline constexpr int kShortUnroll = 4;
// The vector loops' steps (`unroll` vectors a step, then kShortUnroll, then one), and a step's width.
std::vector<int> vector_steps(int unroll);
std::string step_width(int step);

// Kernel k's loops after the kernel's pointer declarations: `n`, the parallel region over blocks (Flat) or rows
// (Rows), whole vectors first where every access is fp32 (kUnroll a step for a heavy formula, then shorter steps),
// then an `omp simd` loop for the rest.
void print_elementwise(std::ostream& os, const lower::ElementwiseKernel& k, const RegionParams& params,
                       lower::Namer& names);

// An indexed loop nest after the kernel's pointer declarations: OpenMP-parallel over rows from 65536 elements,
// `omp simd` over the innermost dim (or one such loop per operand range of a channel Concat).
void print_indexed(std::ostream& os, const lower::IndexedNest& nest, const RegionParams& params);

// Few outputs of a long reduction (a loss's mean over a whole tensor, a pool over a large map): fewer than
// kSplitRows outputs, each folding at least kSplitReduced elements, split their reduced range over the threads.
inline constexpr int64_t kSplitRows = 8, kSplitReduced = 32768;
// An indexed reduction (after the nests before it): its scratch rows for the nests after it (added to
// `params`), then work items of output blocks over the threads.
void print_indexed_reduction(std::ostream& os, const lower::IndexedReduction& red, RegionParams& params);

// Row kernel k after the kernel's pointer declarations: a parallel region over the rows, per-thread scratch rows
// taken from the caller's pool (their pointer added to `params`), whole vectors first (row_printer.cc).
void print_rows(std::ostream& os, const lower::RowKernel& k, RegionParams& params);

}  // namespace gaf::codegen::cpu
