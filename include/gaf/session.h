// runtime::Session: compiles a Graph once (kernels created, schedule and value lifetimes computed) and runs it
// many times. Buffers come from a pool and go back to it after a value's last use (liveness), so peak memory
// stays close to the largest live set; the peak is reported in RunStats.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gaf/codegen.h"
#include "gaf/graph.h"
#include "gaf/kernel.h"

namespace gaf {
class ConstantEvaluator;
}

namespace gaf::runtime {

struct SessionOptions {
  bool profile = false;  // record per-node times
  bool codegen = true;   // run fused nodes as generated kernels (else: their bodies op by op)
  bool debug = false;    // generated kernels built with -O0 -g
  // The most memory a run may need, in bytes: the model's weights plus the intermediate tensors live at once,
  // as the session's plan counts them from the shapes (Session::memory_plan) before the run allocates
  // anything. A run that needs more is an error naming what it needs. 0: the process default
  // (set_default_max_memory).
  size_t max_memory = 0;
  // Choose each run's thread count by measuring (runtime/thread_chooser.h): on a machine where other
  // processes hold cores, runs move to fewer threads instead of waiting at every kernel's barrier for a
  // descheduled one. Off: every run uses OpenMP's thread count (OMP_NUM_THREADS).
  bool adapt_threads = true;
};

// The limit of sessions whose SessionOptions::max_memory is 0 (the CLI's --max-memory). 0, the default: the
// memory the machine has available (MemAvailable) when a run is planned, plus the weights the session already
// holds.
void set_default_max_memory(size_t bytes);

// What a run needs, counted from the shapes of its tensors before anything is allocated
// (Session::memory_plan).
struct MemoryPlan {
  size_t weights = 0;         // the graph's constants
  size_t peak = 0;            // intermediate tensors live at once, at most (a view of its input counts 0)
  std::string peak_node;      // the node whose outputs are allocated when that peak is reached
  size_t largest = 0;         // the largest intermediate tensor
  std::string largest_value;  // its name and type
  int unknown = 0;            // tensors whose size only the run tells (data-dependent shapes): not counted
  size_t needed() const { return weights + peak; }
};

// "1.5 GiB", "640 MiB", "12 KiB", "100 bytes" (and TiB).
std::string format_bytes(size_t bytes);
// "8G", "512M", "1.5GB", "64k", "1000000" (bytes; K/M/G/T powers of 1024) -> bytes; nullopt when it is none
// of those.
std::optional<size_t> parse_bytes(const std::string& text);

struct NodeProfile {
  std::string name, op_type;
  double total_s = 0;
  int64_t calls = 0;
};

// One node execution of a profiled run: the node (its index in RunStats::nodes), when it started (steady_clock
// nanoseconds since that clock's epoch) and ran, and the bytes its inputs and outputs held.
struct NodeEvent {
  int node = 0;
  int64_t start_ns = 0, dur_ns = 0;
  size_t in_bytes = 0, out_bytes = 0;
};

struct RunStats {
  size_t peak_bytes = 0;   // peak of live intermediate buffers during the last run
  size_t pool_bytes = 0;   // what the buffer pool holds at the end of the last run (live and free blocks)
  size_t pool_fresh_bytes = 0;  // of which the last run got anew from the system (0: every buffer was reused)
  size_t kv_cache_bytes = 0;  // the KV cache's buffers (Session::enable_kv_cache), outside the pool
  double last_run_s = 0;
  int threads = 0;                 // the threads the last run used (SessionOptions::adapt_threads)
  std::vector<NodeProfile> nodes;  // with SessionOptions::profile
  std::vector<NodeEvent> events;   // with SessionOptions::profile: the last run's node executions, in run order
};

class PoolAllocator;
class ThreadChooser;

// A decoder's past input and the present output that Concat(past, new, axis) makes of it (Session::enable_kv_cache).
struct KvCachePair {
  std::string past, present, node;  // names of the input, the output and the Concat
  int64_t axis = 0;                 // the Concat's axis as written (negative counts from the end)
};

// Runs a graph on the CPU. One run at a time per Session: kernels keep per-run state (oneDNN argument maps,
// shape caches), so runs from several threads take turns (run() holds a lock); threads that should run the same
// model in parallel each build their own Session. Tensors a run returns stay valid after the Session is gone.
class Session {
 public:
  // Creates a kernel for every node; throws gaf::UnsupportedError naming the first node whose op, opset or
  // dtype has no kernel.
  explicit Session(const Graph& graph, SessionOptions options = {});
  // A session that owns its graph (a model loaded for it alone: the CLI's generate, the Python Session). It holds
  // a weight once: where every kernel reading a constant keeps it in a form of its own (a decoder's products on
  // weights packed for Gemv, Kernel::keeps_own_copy), the graph's copy is released as soon as the last of those
  // kernels is made, so a model's weights are not held twice (nor, while the session is built, more than one
  // matrix over). graph() then still names every value with its type and shape, but such a constant has no data
  // (Tensor::has_data()).
  explicit Session(std::unique_ptr<Graph> graph, SessionOptions options = {});
  ~Session();

  // Inputs by graph-input name; a graph input with an initializer may be omitted. Returns graph outputs in order.
  std::vector<Tensor> run(const std::map<std::string, Tensor>& inputs);
  // Inputs in graph-input order (non-initializer inputs only).
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);
  // I/O binding: outputs by graph-output name are the caller's buffers (Tensor::wrap over its own memory, or any
  // contiguous tensor), written in place by the kernel that produces the output when it has the buffer's dtype and
  // dims (else an error naming the output); inputs may be wrapped memory too, read in place. A bound output must
  // not share memory with an input. Returns every output, the bound ones as their buffers.
  std::vector<Tensor> run(const std::map<std::string, Tensor>& inputs, const std::map<std::string, Tensor>& outputs);

  // Keeps a decoder's keys and values in place. For every graph input P read by a two-operand Concat(P, new, axis)
  // whose result is a graph output (a present), the session keeps one buffer with room for `capacity` positions
  // along the axis; a run appends the new positions to it and returns the present as a strided view of the buffer
  // (Tensor::view; is_contiguous() is false while there is room left). Fed back as P, that view is read where it
  // lies: no step copies the past. Any other tensor fed as P (a first step's empty past, a past from elsewhere) is
  // copied into the buffer once: the buffer there already when the caller holds no present of it, else a new
  // one. A run that needs more room moves the buffer to twice its size (one copy). A present stays valid until a
  // later run writes over its positions: feeding an older present (rewinding) makes the next run append after
  // it, over the positions of the presents returned since. Kernels that read strides (gaf.Attention, Shape) read
  // the views in place; others get a contiguous copy. Returns the pairs found (none: nothing changes); calling it
  // again sets the capacity of buffers made from then on.
  const std::vector<KvCachePair>& enable_kv_cache(int64_t capacity);
  const std::vector<KvCachePair>& kv_cache_pairs() const { return kv_pairs_; }

  // The plan of a run with the graph's symbolic dims bound to `symbols` (dims not bound and data-dependent
  // shapes: those tensors are not counted). Throws naming the tensor when a size overflows 64 bits.
  MemoryPlan memory_plan(const std::map<std::string, int64_t>& symbols = {}) const;

  const RunStats& stats() const { return stats_; }
  const Graph& graph() const { return graph_; }
  // Graph inputs that must be fed (those without an initializer).
  std::vector<const Value*> required_inputs() const;
  // Fused nodes that run op by op instead of as a generated kernel, with the reason.
  const std::map<std::string, std::string>& codegen_fallbacks() const { return fallbacks_; }
  size_t generated_kernels() const { return generated_; }
  // How the generated kernels were built when the session was made: translation units, how many of them were
  // compiled (the others came from the kernel cache), wall seconds.
  const codegen::CompileStats& compile_stats() const { return compile_stats_; }
  // The bytes of the graph's constants released because kernels hold them in their own form (an owned graph).
  size_t released_weight_bytes() const { return released_bytes_; }

 private:
  struct Step;
  std::vector<Tensor> run_bound(const std::vector<std::pair<const Value*, const Tensor*>>& inputs,
                                const std::map<std::string, Tensor>& outputs);
  void kv_append(const Step& step, const std::vector<const Tensor*>& ins, std::vector<Tensor>& outs);
  void check_memory(const std::map<std::string, int64_t>& symbols);
  Session(std::unique_ptr<Graph> owned, const Graph* graph, SessionOptions options);
  std::unique_ptr<Graph> owned_;  // the graph when the session owns it (then graph_ is *owned_)
  const Graph& graph_;
  SessionOptions options_;
  std::vector<Step> steps_;
  std::map<const Value*, int> slot_of_;
  int num_slots_ = 0;
  std::vector<int> graph_output_slots_;
  std::vector<const Value*> required_;  // required_inputs(), in order
  std::vector<std::pair<int, const Value*>> initializer_slots_, input_slots_;
  std::unique_ptr<PoolAllocator> pool_;
  // The thread count's chooser per kind of run: runs whose symbolic dims have the same bit lengths (a decoder's
  // prompt and its steps apart, the steps grouped by powers of two of the past), so that a prompt among steps
  // is not taken for load that came.
  std::map<std::vector<int>, std::unique_ptr<ThreadChooser>> threads_;
  ThreadChooser* last_chooser_ = nullptr;  // the last run's
  RunStats stats_;
  std::map<std::string, std::string> fallbacks_;
  size_t generated_ = 0;
  size_t released_bytes_ = 0;
  codegen::CompileStats compile_stats_;
  std::vector<KvCachePair> kv_pairs_;
  std::vector<Tensor> kv_buffers_;  // per pair: the past's dims with room for the capacity along the axis
  std::unique_ptr<Allocator> kv_arena_;  // where they are carved from
  int64_t kv_capacity_ = 0;
  std::optional<std::map<std::string, int64_t>> memory_checked_;  // the largest symbol values planned so far
  std::unique_ptr<std::mutex> run_mutex_ = std::make_unique<std::mutex>();
};

// The passes' ConstantEvaluator (gaf/passes.h) on this runtime: a node runs alone in a Session on its constant
// inputs, so folding uses exactly the kernels inference would. The driver installs it in PassContext::evaluator.
const ConstantEvaluator& constant_evaluator();

}  // namespace gaf::runtime
