// CPU code generation: each fused node's body becomes one C++ kernel. A graph's kernels are split into
// translation units of balanced source size, one per core ($GAF_COMPILE_JOBS to choose), compiled in parallel
// with the host compiler ($GAF_CXX, else c++), each cached by its content hash under
// $XDG_CACHE_HOME/graph-autofusion (else
// ~/.cache/graph-autofusion) and loaded with dlopen as a library of its own.
//
// Generated kernels have the C signature
//     void gaf_<group>(const void* const* inputs, void* const* outputs, const int64_t* symbols,
//                      const KernelScratch* scratch);
// where `symbols` holds the run-time values of the symbolic dims (bound from the inputs by the host side), so
// one compiled kernel serves every shape of a dynamic-shape model, and `scratch` lends the kernel its working
// memory (row buffers, partial reductions) from the caller's allocator.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gaf/fusion.h"
#include "gaf/graph.h"

namespace gaf::codegen {

// Where an output dimension comes from: a constant, or symbol `symbol` (an index into the symbols array).
struct DimExpr {
  int64_t value = -1;
  int symbol = -1;
};

// How the host launches a CUDA kernel. Every CUDA kernel uses grid-stride loops, so any grid size is correct;
// block size is always 256 threads (kernels may assume blockDim.x == 256). Element kernels: the host picks
// grid = min(ceil(max output numel / 256), 132 * 16), at least 1.
struct CudaLaunch {
  bool rows = false;                // false: element kernel; true: one row per block (row kernel)
  std::vector<DimExpr> rows_dims;   // rows kernel: rows = product of these
  std::vector<DimExpr> row_length;  // rows kernel: L = product of these
  int row_buffers = 0;              // rows kernel: dynamic shared memory = row_buffers * L * sizeof(float) bytes
};

// A generated kernel's working memory, lent by its caller (the session's buffer pool): take(owner, bytes) returns
// bytes aligned to 64 that stay valid until the kernel returns, or null when they cannot be had; the kernel then
// returns at once and the caller reports why. The kernel never frees what it takes. The prelude declares this
// struct's C twin (GafScratch in src/codegen/cpu/prelude.cc): keep the two alike.
struct KernelScratch {
  void* (*take)(void* owner, size_t bytes);
  void* owner;
};

// Everything the host side needs to call a generated kernel.
struct KernelSignature {
  std::string symbol;                             // exported function name
  std::vector<std::string> original_nodes;        // names of the body nodes, for the header comment / manifest
  std::vector<std::pair<int, int>> symbol_binds;  // symbol i = dim (.second) of input (.first)
  std::vector<std::vector<DimExpr>> input_dims;   // expected input shapes (checked at run time)
  std::vector<std::vector<DimExpr>> output_dims;
  std::vector<DType> output_dtypes;
  CudaLaunch cuda;                                // how the host launches the CUDA dialect's kernel
};

struct EmittedKernel {
  KernelSignature sig;
  std::string source;  // the function (and its constants), without the shared prelude
};

// Cpu: C++ functions with OpenMP loops (the signature above). Cuda: CUDA C++ `__global__` kernels for NVRTC,
//   extern "C" __global__ void __launch_bounds__(256) SYMBOL(const GafArgs args)
// with GafArgs (in cuda_prelude()) holding the same three arrays by value.
enum class Dialect { Cpu, Cuda };

struct EmitOptions {
  bool debug = false;  // node names as variable names, bounds checks
  Dialect dialect = Dialect::Cpu;
};

// Emits the kernel of a fused node, or nullopt with `why_not` set when a member op, dtype or shape is outside
// what the emitter handles (the runtime then runs the body op by op).
std::optional<EmittedKernel> emit_kernel(const Node& fused, const std::string& symbol, const EmitOptions& opts,
                                         std::string* why_not);

// The kernel of `nodes` (a group of graph g, in order) as if they were one fused node, whether or not they are one
// yet: what a backend asks the emitter before the planner merges them, or to run a single node as a kernel.
// `inputs` / `outputs` receive the values of g the kernel's inputs and outputs stand for.
std::optional<EmittedKernel> emit_group(const std::vector<const Node*>& nodes, const Graph& g, const std::string& symbol,
                                        const EmitOptions& opts, std::string* why, std::vector<const Value*>* inputs,
                                        std::vector<const Value*>* outputs);

// Helpers shared with the runtime prelude.
std::string prelude();
// The CUDA translation unit head: types, GafArgs, gaf_* device helpers, block reductions. No #include: it
// compiles under NVRTC without headers.
std::string cuda_prelude();
// The CPU and CUDA backends as the planner sees them (KernelBackend): a group the emitter cannot print in their
// dialect runs apart (BACKEND_UNSUPPORTED).
const KernelBackend& cpu_kernel_backend();
const KernelBackend& cuda_kernel_backend();

struct CompileOptions {
  bool debug = false;  // -O0 -g instead of -O3
  size_t units =
      0;  // compile_kernels: translation units to split into; 0 chooses (compile_jobs, source size)
};

class Library {
 public:
  ~Library();
  void* find(const std::string& symbol) const;
  const std::string& path() const { return path_; }

 private:
  friend std::shared_ptr<Library> load_library(void* handle, std::string path);
  void* handle_ = nullptr;
  std::string path_;
};

// Compiles `source` (a whole translation unit) into a shared object in the cache (or finds it there) and loads
// it. Returns null with `error` set when no compiler is found or compilation fails.
std::shared_ptr<Library> compile_and_load(const std::string& source, const CompileOptions& opts, std::string* error);

// How a graph's kernels were built: the translation units they were split into, how many of those the
// compiler built now (the others came from the cache), and the wall time of finding or building them all.
struct CompileStats {
  size_t units = 0, compiled = 0;
  double seconds = 0;
};

// The translation units of a graph's kernels and the library of each.
struct KernelUnits {
  std::vector<std::vector<size_t>> units;           // per unit: its kernels (indices into the kernels given)
  std::vector<std::shared_ptr<Library>> libraries;  // per unit; null when it failed
  std::vector<std::string> errors;  // per unit: "" or why it failed (naming the unit and kernel)
  CompileStats stats;
};

// Compiler processes to run at once: $GAF_COMPILE_JOBS (a number >= 1; anything else is an error naming it),
// else the cores this process may run on (its CPU affinity).
int compile_jobs();

// `sizes` (the kernels' source sizes) split into `units` shares of balanced total size (the largest kernel
// first into the lightest unit; at most one unit per kernel), each listing its kernels in order.
std::vector<std::vector<size_t>> partition_kernels(const std::vector<size_t>& sizes, size_t units);

// Compiles `kernels` as compile_jobs() translation units, each the prelude and its share of the kernels
// (fewer units when the kernels are too small to pay for another compiler process), each found in or added to
// the cache under its own content hash (the invariants of compile_and_load), the units the cache lacks
// compiled in parallel. A unit that fails leaves its kernels without a library and says why once, naming the
// unit, its kernels and the kernel of the compiler's first error.
KernelUnits compile_kernels(const std::vector<EmittedKernel>& kernels, const CompileOptions& opts);

// Told when the kernel compiler starts on the translation units the cache does not hold (done false, seconds
// 0) and when it has finished them all (done true, the wall seconds it took); `kernels` is how many kernels
// those units define. One observer per process (the CLI's progress lines); an empty function removes it.
using CompileObserver = std::function<void(bool done, size_t kernels, size_t units, double seconds)>;
void set_compile_observer(CompileObserver observer);

std::string cache_dir();

}  // namespace gaf::codegen
