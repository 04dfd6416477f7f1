// Session: compile once (kernel per node, slot per value, last-use table), run many times.
//
//   slots[v]  holds the tensor of value v during a run; constants are filled at compile time and never freed.
//   release_after[step] lists the slots whose last reader is that step: their storage goes back to the pool,
//   so buffer reuse follows liveness and the pool's peak is the largest live set of the schedule.
#include "gaf/session.h"

#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cctype>
#include <chrono>
#include <fstream>
#include <mutex>
#include <set>
#include <utility>

#include "gaf/codegen.h"
#include "gaf/op_registry.h"
#include "runtime/graph_kernels.h"
#include "runtime/thread_chooser.h"

namespace gaf::runtime {

namespace {

// MemAvailable of /proc/meminfo in bytes; 0 when it cannot be read.
size_t available_memory() {
  std::ifstream f("/proc/meminfo");
  std::string key, unit;
  size_t kb = 0;
  while (f >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

}  // namespace

// One mapping that blocks are carved from, one after another (2 MB-aligned and on 2 MB pages where the kernel gives
// them: Allocator::mapped_pages); back to the system with the last reference to it.
struct MappedChunk {
  MappedChunk(size_t bytes, bool populate) : base(Allocator::mapped_pages(bytes, populate)), length(bytes) {}
  ~MappedChunk() { Allocator::free_mapped_pages(base, length); }
  MappedChunk(const MappedChunk&) = delete;
  MappedChunk& operator=(const MappedChunk&) = delete;
  // `bytes` more from this chunk; null when they do not fit.
  void* carve(size_t bytes) {
    if (used + bytes > length) return nullptr;
    void* p = static_cast<char*>(base) + used;
    used += bytes;
    return p;
  }
  // `bytes` from `current`, or from a new chunk of `length` bytes (then `current`) where they do not fit there.
  // Throws std::bad_alloc, `current` then unchanged.
  static void* carve(std::shared_ptr<MappedChunk>& current, size_t bytes, size_t length, bool populate) {
    if (void* p = current ? current->carve(bytes) : nullptr) return p;
    current = std::make_shared<MappedChunk>(length, populate);
    return current->carve(bytes);
  }
  void* base;
  size_t length, used = 0;
};

// A best-fit free list of 64-byte aligned blocks. Blocks go back to the list when the last Tensor referencing
// them dies; the state is shared with the deleters so tensors may outlive the Session.
//
// Sizes are rounded up to classes (64-byte lines up to 64 KiB, then eight classes per power of two, at
// most 12.5% over the request), so a tensor that grows a little each run, a decoder's past K/V, takes the
// same block again for many runs instead of fresh pages each time. A block left unused through a whole run is
// given back (large ones straight to the OS through munmap): the pool holds what the last two runs used, not
// every size it ever saw, so memory stays flat over a long generation loop.
//
// The pool is also where a run that asks for more memory than there is stops with an error, before the kernel
// touches the memory (a large mmap succeeds whatever the machine has, and the kernel would be killed for it
// later): within an explicit limit on the bytes live at once (SessionOptions::max_memory less the weights),
// or by default a new block of 1 MiB or more must fit in the memory the machine has available.
//
// New blocks come with their pages in place: from 1 MiB on each a mapping of its own, from 64 KiB on carved from
// 2 MB mappings on 2 MB pages (on a VM a 4 KB page faulted in cost ~15 us, populated ~8 us, while 4 MB on 2 MB
// pages took 0.3 ms in all), smaller ones from the heap. A carved block given back returns its pages to the system at
// once (MADV_DONTNEED) and its mapping goes when its last block does.
class PoolAllocator final : public Allocator {
 public:
  static constexpr size_t kMapped = size_t(1) << 20;  // blocks this large are mmap'ed, so freeing returns them
  static constexpr size_t kCarvedFrom = size_t(1) << 16;  // blocks from this size to kMapped are carved
  static constexpr size_t kChunk = size_t(2) << 20;        // from mappings this long

  struct Block {
    void* p;
    uint64_t freed_in_run;
    std::shared_ptr<MappedChunk> chunk;  // the mapping a carved block lies in; null otherwise
  };
  struct State {
    std::mutex mu;
    std::multimap<size_t, Block> free_blocks;
    std::shared_ptr<MappedChunk> carving;  // the chunk new blocks are carved from
    size_t live = 0, peak = 0, held = 0;
    size_t live_limit = 0;  // 0: new large blocks checked against the available memory instead
    uint64_t run = 0;
    size_t retain = 0;  // the most bytes of blocks freed between the starts of two runs
    size_t fresh = 0;   // bytes of new blocks the current run got from the system
    ~State() {
      for (auto& [size, b] : free_blocks) release(b, size);
    }
  };

  static size_t size_class(size_t bytes) {
    size_t size = std::max<size_t>(64, (bytes + 63) / 64 * 64);
    if (size <= 65536) return size;
    size_t step = std::bit_floor(size) / 8;
    return (size + step - 1) / step * step;
  }

  static void release(Block& b, size_t size) {
    if (b.chunk) {
      madvise(b.p, size, MADV_DONTNEED);  // page-aligned: carved sizes are classes of whole 8 KiB steps
      b.chunk.reset();
    } else if (size >= kMapped) {
      Allocator::free_mapped_pages(b.p, size);
    } else {
      std::free(b.p);
    }
  }

  std::shared_ptr<void> allocate(size_t bytes) override {
    size_t size = size_class(bytes);
    void* p = nullptr;
    size_t got = size;
    std::shared_ptr<MappedChunk> chunk;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      auto it = state_->free_blocks.lower_bound(size);
      if (it != state_->free_blocks.end() && it->first <= size * 2) {
        got = it->first;
        p = it->second.p;
        chunk = std::move(it->second.chunk);
        state_->free_blocks.erase(it);
      }
      if (state_->live_limit && state_->live + got > state_->live_limit) {
        if (p) state_->free_blocks.emplace(got, Block{p, state_->run, std::move(chunk)});
        throw Error(fmt::format(
            "out of memory: a {} output would bring the intermediate tensors live at once to "
            "{}, more than the {} the memory limit leaves them besides the weights "
            "(--max-memory, SessionOptions::max_memory); feed smaller inputs (--dim "
            "NAME=SIZE) or raise the limit",
            format_bytes(bytes), format_bytes(state_->live + got), format_bytes(state_->live_limit)));
      }
      state_->live += got;
      state_->peak = std::max(state_->peak, state_->live);
      if (!p) {  // a new block, taken back below if it cannot be had
        state_->held += got;
        state_->fresh += got;
      }
    }
    // A new block that cannot be had: its bytes come off the counts before the error.
    auto not_had = [&] {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->live -= got;
      state_->held -= got;
      state_->fresh -= got;
    };
    if (!p && got >= kMapped && !state_->live_limit) {
      const size_t available = available_memory();
      if (available && got > available) {
        not_had();
        throw Error(
            fmt::format("out of memory: an output of {} does not fit in the {} this machine has available "
                        "({} already held by this run's intermediate tensors); feed smaller inputs "
                        "(--dim NAME=SIZE) or use a machine with more memory",
                        format_bytes(bytes), format_bytes(available), format_bytes(state_->live)));
      }
    }
    if (!p) {
      if (size >= kMapped) {
        // Pages in place in one call (on 2 MB pages from 2 MB on): a VM faults a 4 KB page in by its first
        // write for ~10 us, 80 ms of a 256-token prompt's first run.
        try {
          p = Allocator::mapped_pages(got, true);
        } catch (const std::bad_alloc&) {
          p = nullptr;
        }
      } else if (size >= kCarvedFrom) {
        std::lock_guard<std::mutex> lock(state_->mu);
        try {
          p = MappedChunk::carve(state_->carving, got, kChunk, true);
          chunk = state_->carving;
        } catch (const std::bad_alloc&) {
          p = nullptr;
        }
      } else {
        p = std::aligned_alloc(64, got);
      }
      if (!p) {
        not_had();
        throw std::bad_alloc();
      }
    }
    auto state = state_;
    return std::shared_ptr<void>(p, [state, got, chunk = std::move(chunk)](void* q) mutable {
      std::lock_guard<std::mutex> lock(state->mu);
      state->live -= got;
      state->free_blocks.emplace(got, Block{q, state->run, std::move(chunk)});
    });
  }

  // Starts a run. Blocks freed since the previous run began stay; older ones are released, the oldest first,
  // until the free blocks come to no more than the most freed over any one run (its intermediate tensors and
  // the outputs its caller let go before the next): the pool keeps what its largest run needs (a prompt's
  // activations through the decode steps after it, which would otherwise fault their pages in again at the next
  // prompt) and gives back the rest (the classes a growing past left behind).
  void begin_run() {
    std::lock_guard<std::mutex> lock(state_->mu);
    size_t free_bytes = 0, freed_last = 0;  // freed_last: since the previous run began
    std::vector<std::multimap<size_t, Block>::iterator> old;
    for (auto it = state_->free_blocks.begin(); it != state_->free_blocks.end(); ++it) {
      free_bytes += it->first;
      if (it->second.freed_in_run == state_->run)
        freed_last += it->first;
      else
        old.push_back(it);
    }
    state_->retain = std::max(state_->retain, freed_last);
    ++state_->run;
    state_->fresh = 0;
    std::stable_sort(old.begin(), old.end(),
                     [](const auto& a, const auto& b) { return a->second.freed_in_run < b->second.freed_in_run; });
    for (auto it : old) {
      if (free_bytes <= state_->retain) break;
      release(it->second, it->first);
      state_->held -= it->first;
      free_bytes -= it->first;
      state_->free_blocks.erase(it);
    }
  }

  // Ends a run: returns its peak of live bytes (and starts the next peak from what is live now).
  size_t end_run() {
    std::lock_guard<std::mutex> lock(state_->mu);
    const size_t p = state_->peak;
    state_->peak = state_->live;
    return p;
  }

  // Bytes of new blocks the current (or last) run got from the system.
  size_t fresh() {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->fresh;
  }

  size_t held() {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->held;
  }

  // The most bytes live at once (0: new large blocks must fit in the available memory instead).
  void set_live_limit(size_t bytes) {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->live_limit = bytes;
  }

 private:
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

// The KV cache's buffers, carved one after another from mappings of their own: a decoder's pairs have one size,
// so a mapping holds them all (room for as many as the session has pairs) and goes on 2 MB pages where the
// kernel gives them. Each pair's buffer under 2 MB would fault its 4 KB pages in one by one as the prompt's
// positions are written (11-19 ms of a 256-token prompt's first run on a VM). A mapping goes back to the system
// when its last buffer does and a newer one is being carved (the one being carved stays with the session).
class KvArena final : public Allocator {
 public:
  explicit KvArena(size_t pairs) : pairs_(std::max<size_t>(pairs, 1)) {}

  std::shared_ptr<void> allocate(size_t bytes) override {
    const size_t size = std::max<size_t>(64, (bytes + 63) / 64 * 64);
    void* p = MappedChunk::carve(chunk_, size, size * pairs_, false);
    return std::shared_ptr<void>(p, [chunk = chunk_](void*) {});
  }

 private:
  size_t pairs_;
  std::shared_ptr<MappedChunk> chunk_;  // the one being carved
};

const Tensor& KernelContext::in(int i) const {
  const Tensor* t = input(i);
  GAF_CHECK(t && t->defined(), "{}: required input {} is missing", node_.describe(), i);
  return *t;
}

Tensor& KernelContext::allocate_output(int i, DType dtype, std::vector<int64_t> dims, bool zero) {
  GAF_ASSERT(i < num_outputs(), "allocate_output index out of range");
  if (const Tensor* b = bound_ && i < int(bound_->size()) ? (*bound_)[size_t(i)] : nullptr) {
    GAF_CHECK(b->dtype() == dtype && b->dims() == dims,
              "{}: output '{}' is {}{} but the buffer bound to it is {}{}", node_.describe(), node_.output(i)->name(),
              dtype_name(dtype), dims_to_string(dims), dtype_name(b->dtype()), dims_to_string(b->dims()));
    outputs_[i] = *b;
    if (zero && b->nbytes()) std::memset(outputs_[i].raw(), 0, b->nbytes());
    return outputs_[i];
  }
  outputs_[i] = Tensor(dtype, std::move(dims), alloc_, zero);
  return outputs_[i];
}

struct Session::Step {
  const Node* node;
  std::unique_ptr<Kernel> kernel;
  int kv = -1;                 // a KV cache append (index into kv_pairs_) instead of the kernel
  std::vector<int> in_slots;   // -1: absent optional input
  std::vector<int> out_slots;
  std::vector<int> release;    // slots whose last use is this step
  std::vector<bool> donatable; // per input: released after this step and read once by it
};

namespace {
// Runs of sessions inside a kernel (a fused body run op by op, a Loop's body) take the thread count their
// outer run chose.
thread_local int t_run_depth = 0;

// The calling thread's OpenMP thread count set for one run, restored after it.
class ThreadsForRun {
 public:
  explicit ThreadsForRun(int threads) : saved_(omp_get_max_threads()) {
    if (threads != saved_) omp_set_num_threads(threads);
    ++t_run_depth;
  }
  ~ThreadsForRun() {
    --t_run_depth;
    if (omp_get_max_threads() != saved_) omp_set_num_threads(saved_);
  }
  ThreadsForRun(const ThreadsForRun&) = delete;
  ThreadsForRun& operator=(const ThreadsForRun&) = delete;

 private:
  int saved_;
};
}  // namespace

Session::Session(const Graph& graph, SessionOptions options) : Session(nullptr, &graph, options) {}

Session::Session(std::unique_ptr<Graph> graph, SessionOptions options) : Session(std::move(graph), nullptr, options) {
}

namespace {
const Graph& given(const Graph* borrowed, const std::unique_ptr<Graph>& owned) {
  GAF_CHECK(borrowed || owned, "Session: no graph given (a null std::unique_ptr<Graph>)");
  return borrowed ? *borrowed : *owned;
}
}  // namespace

Session::Session(std::unique_ptr<Graph> owned, const Graph* borrowed, SessionOptions options)
    : owned_(std::move(owned)),
      graph_(given(borrowed, owned_)),
      options_(options),
      pool_(std::make_unique<PoolAllocator>()) {
  const Graph& graph = graph_;
  auto slot = [&](const Value* v) {
    auto [it, inserted] = slot_of_.emplace(v, num_slots_);
    if (inserted) ++num_slots_;
    return it->second;
  };
  for (const Value* v : graph.inputs()) slot(v);
  for (const Value* v : graph.initializers()) slot(v);
  GraphKernels generated;
  bool any_fused = false;
  for (const Node* n : graph.nodes()) any_fused |= n->body != nullptr;
  if (any_fused && options.codegen) {
    codegen::EmitOptions eo;
    eo.debug = options.debug;
    codegen::CompileOptions co;
    co.debug = options.debug;
    generated = build_graph_kernels(graph, eo, co);
    for (const auto& [n, why] : generated.fallbacks) fallbacks_[n->name.empty() ? n->op_type : n->name] = why;
    generated_ = generated.factories.size();
    compile_stats_ = generated.compile;
  }
  // An owned graph's weights: the uses whose kernels are still to be made, and whether every kernel made so far
  // keeps its own copy (then the last one made releases the graph's).
  std::map<Value*, std::pair<size_t, bool>> weight_uses;
  std::map<const Node*, size_t> step_of;
  if (owned_)
    for (Value* v : graph.initializers())
      if (!v->uses().empty() && !graph.is_graph_output(v) && v->constant().nbytes() > 0)
        weight_uses[v] = {v->uses().size(), true};
  auto release_if_kept = [&](const Node* n, Kernel& kernel) {
    for (int i = 0; i < n->num_inputs(); ++i) {
      auto it = weight_uses.find(n->input(i));
      if (it == weight_uses.end()) continue;
      auto& [left, kept] = it->second;
      kept = kept && kernel.keeps_own_copy(i);
      if (--left > 0 || !kept) continue;
      Value* v = it->first;
      released_bytes_ += v->constant().nbytes();
      for (const Use& u : v->uses()) steps_[step_of.at(u.node)].kernel->release_constant(u.index);
      v->drop_constant_data();
    }
  };
  for (const Node* n : graph.nodes()) {
    const runtime::KernelFactory* make = KernelRegistry::cpu().find(*n);
    if (!make) {
      unsupported("{}: op type '{}' (domain '{}', opset {}) is not supported by the CPU runtime; "
                  "remove or replace the node, or file an issue with the model",
                  n->describe(), n->op_type, n->domain.empty() ? "ai.onnx" : n->domain, n->opset);
    }
    Step s;
    s.node = n;
    auto gen = generated.factories.find(n);
    s.kernel = gen != generated.factories.end() ? gen->second(*n) : (*make)(*n);
    for (const Value* v : n->inputs()) s.in_slots.push_back(v ? slot(v) : -1);
    for (const Value* v : n->outputs()) s.out_slots.push_back(slot(v));
    // A subgraph's generated kernels and fallbacks count as the model's (its groups are named after its
    // node).
    for (const Session* sub : s.kernel->subgraph_sessions()) {
      generated_ += sub->generated_kernels();
      fallbacks_.insert(sub->codegen_fallbacks().begin(), sub->codegen_fallbacks().end());
    }
    step_of[n] = steps_.size();
    steps_.push_back(std::move(s));
    release_if_kept(n, *steps_.back().kernel);
  }
  for (const Value* v : graph.outputs()) graph_output_slots_.push_back(slot(v));
  required_ = required_inputs();
  for (const Value* v : graph.initializers()) initializer_slots_.emplace_back(slot(v), v);
  for (const Value* v : graph.inputs()) input_slots_.emplace_back(slot(v), v);

  // Last use of every slot that is neither a constant, a graph input nor a graph output.
  std::vector<int> last_use(num_slots_, -1);
  for (size_t i = 0; i < steps_.size(); ++i) {
    for (int s : steps_[i].in_slots)
      if (s >= 0) last_use[s] = int(i);
    for (int s : steps_[i].out_slots)
      if (last_use[s] < int(i)) last_use[s] = int(i);  // an unused output dies right away
  }
  std::vector<bool> pinned(num_slots_, false);
  for (const Value* v : graph.inputs()) pinned[slot_of_[v]] = true;
  for (const Value* v : graph.initializers()) pinned[slot_of_[v]] = true;
  for (int s : graph_output_slots_) pinned[s] = true;
  for (int s = 0; s < num_slots_; ++s)
    if (!pinned[s] && last_use[s] >= 0) steps_[last_use[s]].release.push_back(s);
  for (Step& st : steps_)
    for (int s : st.in_slots)
      st.donatable.push_back(s >= 0 && std::count(st.release.begin(), st.release.end(), s) > 0 &&
                             std::count(st.in_slots.begin(), st.in_slots.end(), s) == 1);
  // The worker threads start now, with the session, rather than inside its first run.
#pragma omp parallel
  { [[maybe_unused]] volatile int started = omp_get_thread_num(); }
}

Session::~Session() = default;

const std::vector<KvCachePair>& Session::enable_kv_cache(int64_t capacity) {
  GAF_CHECK(capacity >= 1, "enable_kv_cache: the capacity must be at least 1 position (got {})", capacity);
  std::lock_guard<std::mutex> no_run_meanwhile(*run_mutex_);
  kv_capacity_ = capacity;
  if (!kv_pairs_.empty()) return kv_pairs_;
  auto is_input = [&](const Value* v) {
    return v && !v->is_constant() &&
           std::find(graph_.inputs().begin(), graph_.inputs().end(), v) != graph_.inputs().end();
  };
  auto is_output = [&](const Value* v) {
    return std::find(graph_.outputs().begin(), graph_.outputs().end(), v) != graph_.outputs().end();
  };
  // A past grows: its length along the axis is not fixed by the model.
  auto grows = [](const Value* v, int64_t axis) {
    if (!v->type.shape) return true;
    const int64_t rank = int64_t(v->type.shape->size());
    if (axis < 0) axis += rank;
    return axis >= 0 && axis < rank && !(*v->type.shape)[size_t(axis)].is_static();
  };
  auto candidate = [&](const Node& n) {
    return n.op_type == "Concat" && n.domain.empty() && n.inputs().size() == 2 && is_input(n.input(0)) &&
           n.input(1) != n.input(0) && is_output(n.output(0)) && grows(n.input(0), n.attr_int("axis", 0));
  };
  std::map<const Value*, int> concats_of_past;  // a past read by two such Concats has no one present
  for (const Step& st : steps_)
    if (candidate(*st.node)) ++concats_of_past[st.node->input(0)];
  for (Step& st : steps_) {
    const Node& n = *st.node;
    if (!candidate(n) || concats_of_past[n.input(0)] != 1) continue;
    st.kv = int(kv_pairs_.size());
    kv_pairs_.push_back({n.input(0)->name(), n.output(0)->name(), n.name, n.attr_int("axis", 0)});
  }
  kv_buffers_.resize(kv_pairs_.size());
  kv_arena_ = std::make_unique<KvArena>(kv_pairs_.size());
  return kv_pairs_;
}

// Concat(past, new) of a KV cache pair: new's positions written after the past's in the pair's buffer, the
// present a view of the buffer's first past + new positions. The past is read in place when it is such a view.
void Session::kv_append(const Step& step, const std::vector<const Tensor*>& ins, std::vector<Tensor>& outs) {
  const Node& n = *step.node;
  GAF_CHECK(ins.size() == 2 && ins[0] && ins[1], "{}: Concat needs both operands", n.describe());
  const Tensor &past = *ins[0], &add = *ins[1];
  const int rank = past.rank();
  int64_t axis = kv_pairs_[size_t(step.kv)].axis;
  if (axis < 0) axis += rank;
  GAF_CHECK(axis >= 0 && axis < rank, "{}: axis {} is out of range for rank {}", n.describe(),
            kv_pairs_[size_t(step.kv)].axis, rank);
  GAF_CHECK(add.dtype() == past.dtype() && add.rank() == rank && past.dtype() != DType::String,
            "{}: cannot concatenate {}{} and {}{}", n.describe(), dtype_name(past.dtype()),
            dims_to_string(past.dims()), dtype_name(add.dtype()), dims_to_string(add.dims()));
  for (int d = 0; d < rank; ++d)
    GAF_CHECK(d == axis || past.dim(d) == add.dim(d),
              "{}: operand shapes {} and {} differ outside axis {} (dimension {})", n.describe(),
              dims_to_string(past.dims()), dims_to_string(add.dims()), axis, d);
  Tensor& buf = kv_buffers_[size_t(step.kv)];
  const int64_t len = past.dim(int(axis)), total = len + add.dim(int(axis));
  auto with_axis = [&](std::vector<int64_t> dims, int64_t size) {
    dims[size_t(axis)] = size;
    return dims;
  };
  // The buffer holds positions of the past's kind (dtype, and the dims but the axis).
  const bool same_kind =
      buf.defined() && buf.dtype() == past.dtype() && with_axis(past.dims(), 0) == with_axis(buf.dims(), 0);
  // In place: the past is this buffer's first `len` positions, as a previous run returned them.
  const bool in_place = same_kind && past.raw() == buf.raw() && past.strides() == buf.strides();
  const int64_t capacity = buf.defined() ? buf.dim(int(axis)) : 0;
  // A past from elsewhere (a first step's empty past: a new prompt) goes into the buffer it has when nothing
  // else holds that buffer (no present of it is kept): its pages are in memory already, and a new buffer's
  // would fault in one by one as the positions are written.
  const bool reuse =
      same_kind && !in_place && total <= capacity && capacity >= kv_capacity_ && buf.storage_use_count() == 1;
  if (reuse && len > 0) Tensor::view(buf, past.dims(), buf.strides()).copy_from(past);
  if (!reuse && (!in_place || total > capacity)) {
    // A new buffer: the first one, a past from elsewhere, other batch or head sizes, or no room left.
    const int64_t room = std::max({kv_capacity_, total, in_place ? 2 * capacity : int64_t(0)});
    Tensor fresh(past.dtype(), with_axis(past.dims(), room), *kv_arena_);
    if (len > 0) Tensor::view(fresh, past.dims(), fresh.strides()).copy_from(past);
    buf = std::move(fresh);
  }
  const std::vector<int64_t> strides = buf.strides();
  Tensor::view(buf, add.dims(), strides, len * strides[size_t(axis)]).copy_from(add);
  outs[0] = Tensor::view(buf, with_axis(past.dims(), total), strides);
}

std::vector<const Value*> Session::required_inputs() const {
  std::vector<const Value*> r;
  for (const Value* v : graph_.inputs())
    if (!v->is_constant()) r.push_back(v);
  return r;
}

namespace {
// A value given for an input of a non-tensor type (a sequence, an optional) and the element types it holds.
void check_non_tensor_input(const Value* v, const Tensor& t) {
  const ValueKind kind = v->type.kind;
  const bool optional = kind == ValueKind::Optional || kind == ValueKind::OptionalSequence;
  const bool sequence = kind == ValueKind::Sequence || kind == ValueKind::OptionalSequence;
  auto what = [](const Tensor& x) {
    return x.is_none() ? std::string("an empty optional")
                       : fmt::format("{} {}", x.is_sequence() ? "a sequence of" : "a tensor of",
                                     dtype_name(x.dtype()));
  };
  GAF_CHECK((t.is_none() && optional) || (t.is_sequence() == sequence && !t.is_none()),
            "input '{}': expected {}, got {}", v->name(), v->type.to_string(), what(t));
  if (t.is_none() || v->type.dtype == DType::Undefined) return;
  GAF_CHECK(t.dtype() == v->type.dtype, "input '{}': expected {}, got {}", v->name(), v->type.to_string(),
            what(t));
}

void check_input(const Value* v, const Tensor& t, std::map<std::string, int64_t>& symbols) {
  if (!v->type.is_tensor() || !t.is_dense()) {
    GAF_CHECK(!v->type.is_tensor(), "input '{}': expected a tensor ({}), got {}", v->name(),
              v->type.to_string(), t.is_none() ? "an empty optional" : "a sequence");
    return check_non_tensor_input(v, t);
  }
  GAF_CHECK(t.dtype() == v->type.dtype || v->type.dtype == DType::Undefined,
            "input '{}': expected element type {}, got {}", v->name(), dtype_name(v->type.dtype),
            dtype_name(t.dtype()));
  if (!v->type.shape) return;
  const Shape& s = *v->type.shape;
  GAF_CHECK(int(s.size()) == t.rank(), "input '{}': expected shape {}, got {}", v->name(), v->type.to_string(),
            dims_to_string(t.dims()));
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i].is_static()) {
      GAF_CHECK(s[i].value() == t.dim(int(i)), "input '{}': expected shape {}, got {} (dimension {})", v->name(),
                v->type.to_string(), dims_to_string(t.dims()), i);
    } else if (s[i].is_symbol()) {
      auto [it, fresh] = symbols.emplace(s[i].symbol(), t.dim(int(i)));
      GAF_CHECK(fresh || it->second == t.dim(int(i)),
                "input '{}': dimension '{}' is {} here but {} in another input", v->name(), s[i].symbol(),
                t.dim(int(i)), it->second);
    }
  }
}
}  // namespace

// ---- memory plan ---------------------------------------------------------------------------------

namespace {

std::atomic<size_t> default_max_memory{0};

// Ops whose output takes no new storage: a view of their input (Reshape's kernel re-labels the dims), or the
// node's own value (Constant).
bool is_view(const Node& n) {
  static const std::set<std::string> views = {"Reshape",   "Flatten",  "Squeeze",
                                              "Unsqueeze", "Identity", "Constant"};
  return n.domain.empty() && views.count(n.op_type);
}

}  // namespace

void set_default_max_memory(size_t bytes) { default_max_memory = bytes; }

std::string format_bytes(size_t bytes) {
  const double b = double(bytes);
  if (b >= 1024.0 * 1024 * 1024 * 1024) return fmt::format("{:.1f} TiB", b / (1024.0 * 1024 * 1024 * 1024));
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.1f} GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt::format("{:.1f} MiB", b / (1024.0 * 1024));
  if (b >= 1024.0) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{} bytes", bytes);
}

std::optional<size_t> parse_bytes(const std::string& text) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  std::string unit = text.substr(used);
  std::transform(unit.begin(), unit.end(), unit.begin(),
                 [](unsigned char c) { return char(std::toupper(c)); });
  if (unit.size() == 2 && unit[1] == 'B') unit.pop_back();  // "GB" = "G"
  if (unit == "IB" || (unit.size() == 3 && unit.substr(1) == "IB")) unit = unit.substr(0, unit.size() - 2);
  double scale = 1;
  if (unit == "K")
    scale = 1024.0;
  else if (unit == "M")
    scale = 1024.0 * 1024;
  else if (unit == "G")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "T")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else if (!unit.empty() && unit != "B")
    return std::nullopt;
  const double bytes = v * scale;
  if (!(bytes >= 1) || bytes >= 1.8e19) return std::nullopt;
  return size_t(bytes);
}

MemoryPlan Session::memory_plan(const std::map<std::string, int64_t>& symbols) const {
  MemoryPlan plan;
  // Bytes of a value with the symbols bound; nullopt when a dim is not known before the run.
  auto bytes_of = [&](const Value* v) -> std::optional<size_t> {
    if (!v || !v->type.shape || v->type.dtype == DType::String || v->type.dtype == DType::Undefined)
      return std::nullopt;
    int64_t n = 1;
    for (const Dim& d : *v->type.shape) {
      int64_t size = -1;
      if (d.is_static())
        size = d.value();
      else if (d.is_symbol())
        if (auto it = symbols.find(d.symbol()); it != symbols.end()) size = it->second;
      if (size < 0) return std::nullopt;
      GAF_CHECK(!__builtin_mul_overflow(n, size, &n),
                "'{}' ({}) has more elements than 64 bits count: the model "
                "asks for an impossible size",
                v->name(), v->type.to_string());
    }
    int64_t b = 0;
    GAF_CHECK(!__builtin_mul_overflow(n, int64_t(dtype_size(v->type.dtype)), &b),
              "'{}' ({}) needs more bytes than 64 bits count: the model asks for an impossible size",
              v->name(), v->type.to_string());
    return size_t(b);
  };
  for (const Value* v : graph_.initializers()) plan.weights += v->constant().nbytes();
  std::vector<size_t> slot_bytes(size_t(num_slots_), 0);
  size_t live = 0;
  for (const Step& st : steps_) {
    const bool view = is_view(*st.node);
    for (size_t k = 0; k < st.out_slots.size(); ++k) {
      const Value* out = st.node->output(int(k));
      if (out->absent_output) continue;
      auto b = bytes_of(out);
      if (!b) {
        ++plan.unknown;
        continue;
      }
      if (*b > plan.largest) {
        plan.largest = *b;
        plan.largest_value = fmt::format("'{}' ({})", out->name(), out->type.to_string());
      }
      if (view) {  // the output shares its input's storage: it keeps it alive when the input dies here
        const int in = st.in_slots.empty() ? -1 : st.in_slots[0];
        if (in >= 0 && std::count(st.release.begin(), st.release.end(), in))
          slot_bytes[size_t(st.out_slots[k])] = std::exchange(slot_bytes[size_t(in)], 0);
        continue;
      }
      slot_bytes[size_t(st.out_slots[k])] = *b;
      live += *b;
    }
    if (live > plan.peak) {
      plan.peak = live;
      plan.peak_node = st.node->describe();
    }
    for (int s : st.release) live -= std::exchange(slot_bytes[size_t(s)], 0);
  }
  return plan;
}

void Session::check_memory(const std::map<std::string, int64_t>& symbols) {
  // The plan grows with every dim: sizes at most 1/8 over ones already planned need no new plan (a decoder's
  // past grows by one position a step; the pool still holds each run to the limit, block by block).
  if (memory_checked_ && memory_checked_->size() == symbols.size()) {
    bool covered = true;
    for (const auto& [name, value] : symbols) {
      auto it = memory_checked_->find(name);
      covered &= it != memory_checked_->end() && value <= it->second + it->second / 8;
    }
    if (covered) return;
  }
  const MemoryPlan plan = memory_plan(symbols);
  size_t limit = options_.max_memory ? options_.max_memory : default_max_memory.load();
  std::string source = "the memory limit: --max-memory, SessionOptions::max_memory";
  pool_->set_live_limit(limit ? std::max<size_t>(limit - std::min(limit, plan.weights), 1) : 0);
  if (!limit) {
    const size_t available = available_memory();
    if (!available) return;            // no /proc/meminfo: nothing to check against
    limit = available + plan.weights;  // the weights are in memory already
    source = "the memory this machine has available";
  }
  if (plan.needed() > limit) {
    std::string sizes;
    for (const auto& [name, value] : symbols)
      sizes += fmt::format("{}{}={}", sizes.empty() ? "" : ", ", name, value);
    throw Error(
        fmt::format("the model needs {} to run{}{}: weights {}, and {} of intermediate tensors live at once "
                    "at {}; the largest "
                    "is {}, {}. That is more than {} ({}): feed smaller inputs (--dim NAME=SIZE), or raise "
                    "the limit on a "
                    "machine with more memory",
                    format_bytes(plan.needed()), sizes.empty() ? "" : " with ", sizes,
                    format_bytes(plan.weights), format_bytes(plan.peak), plan.peak_node, plan.largest_value,
                    format_bytes(plan.largest), format_bytes(limit), source));
  }
  memory_checked_ = symbols;
}

std::vector<Tensor> Session::run(const std::vector<Tensor>& inputs) {
  // In the order of required_inputs(), bound by position: no names looked up (a Loop body runs this way once
  // an iteration).
  GAF_CHECK(inputs.size() == required_.size(), "the model takes {} inputs, {} given", required_.size(),
            inputs.size());
  std::vector<std::pair<const Value*, const Tensor*>> bound;
  bound.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) bound.emplace_back(required_[i], &inputs[i]);
  return run_bound(bound, {});
}

std::vector<Tensor> Session::run(const std::map<std::string, Tensor>& inputs) { return run(inputs, {}); }

std::vector<Tensor> Session::run(const std::map<std::string, Tensor>& inputs,
                                 const std::map<std::string, Tensor>& outputs) {
  std::vector<std::pair<const Value*, const Tensor*>> bound;
  for (const auto& [name, t] : inputs) {
    const Value* v = graph_.find_value(name);
    GAF_CHECK(v && std::find(graph_.inputs().begin(), graph_.inputs().end(), v) != graph_.inputs().end(),
              "'{}' is not an input of the model", name);
    bound.emplace_back(v, &t);
  }
  return run_bound(bound, outputs);
}

std::vector<Tensor> Session::run_bound(const std::vector<std::pair<const Value*, const Tensor*>>& inputs,
                                       const std::map<std::string, Tensor>& outputs) {
  std::lock_guard<std::mutex> one_run_at_a_time(*run_mutex_);
  auto t0 = std::chrono::steady_clock::now();
  pool_->begin_run();
  std::vector<Tensor> slots(num_slots_);
  for (const auto& [k, v] : initializer_slots_) slots[size_t(k)] = v->constant();
  std::map<std::string, int64_t> symbols;
  for (const auto& [v, t] : inputs) {
    check_input(v, *t, symbols);
    slots[size_t(slot_of_.at(v))] = *t;
  }
  for (const auto& [k, v] : input_slots_)
    GAF_CHECK(slots[size_t(k)].defined(), "input '{}' ({}) was not given", v->name(), v->type.to_string());
  check_memory(symbols);  // before the run allocates anything
  const bool adapt = options_.adapt_threads && t_run_depth == 0;
  ThreadChooser* chooser = nullptr;
  if (adapt) {
    std::vector<int> kind;
    for (const auto& entry : symbols) kind.push_back(int(std::bit_width(uint64_t(std::max<int64_t>(0, entry.second)))));
    if (threads_.size() >= 64 && !threads_.count(kind))  // kinds without end: keep the last one's only
      std::erase_if(threads_, [&](const auto& e) { return e.second.get() != last_chooser_; });
    auto& c = threads_[kind];
    if (!c) {  // a new kind of run goes on from the last kind's count, or in a session's first run, the cores idle
      c = std::make_unique<ThreadChooser>(omp_get_max_threads());
      if (last_chooser_)
        c->continue_from(*last_chooser_);
      else
        c->seed(ThreadChooser::idle_cores(omp_get_num_procs()));
    }
    chooser = last_chooser_ = c.get();
  }
  const int threads = chooser ? chooser->next() : omp_get_max_threads();
  ThreadsForRun with_threads(threads);
  // Output binding: the producing kernel writes into the caller's buffer (KernelContext::allocate_output); one that
  // hands out a view or an input's storage instead is copied into it after the step.
  std::vector<const Tensor*> bound_slot;
  if (!outputs.empty()) {
    bound_slot.assign(size_t(num_slots_), nullptr);
    for (const auto& entry : outputs) {
      const std::string& name = entry.first;
      const Tensor& t = entry.second;
      const auto& outs = graph_.outputs();
      auto it = std::find_if(outs.begin(), outs.end(), [&](const Value* v) { return v->name() == name; });
      GAF_CHECK(it != outs.end(), "'{}' is not an output of the model: only outputs can be bound", name);
      GAF_CHECK(t.defined() && t.is_contiguous() && t.dtype() != DType::String,
                "output '{}': the buffer bound to it must be a contiguous numeric tensor", name);
      bound_slot[size_t(slot_of_[*it])] = &t;
    }
  }
  auto into_bound = [&](const Tensor* b, Tensor& produced, const std::string& name) {
    if (produced.raw() == b->raw() && produced.dims() == b->dims() && produced.is_contiguous()) return;
    GAF_CHECK(produced.dtype() == b->dtype() && produced.dims() == b->dims(),
              "output '{}' is {}{} but the buffer bound to it is {}{}", name, dtype_name(produced.dtype()),
              dims_to_string(produced.dims()), dtype_name(b->dtype()), dims_to_string(b->dims()));
    Tensor dst = *b;
    dst.copy_from(produced);
    produced = dst;
  };
  std::vector<const Tensor*> bound;

  if (options_.profile && stats_.nodes.size() != steps_.size()) {
    stats_.nodes.clear();
    for (const Step& s : steps_) stats_.nodes.push_back({s.node->name, s.node->op_type, 0, 0});
  }
  if (options_.profile) stats_.events.clear();
  std::vector<const Tensor*> ins;
  std::vector<Tensor> outs, copies;
  for (size_t i = 0; i < steps_.size(); ++i) {
    Step& s = steps_[i];
    ins.clear();
    copies.clear();
    for (int k : s.in_slots) ins.push_back(k >= 0 && slots[k].defined() ? &slots[k] : nullptr);
    outs.assign(s.out_slots.size(), Tensor());
    if (s.kv < 0 && !s.kernel->reads_strided_inputs()) {  // a KV cache view, copied for a kernel that reads data as contiguous
      copies.reserve(ins.size());
      for (const Tensor*& t : ins)
        if (t && !t->is_contiguous()) t = &copies.emplace_back(t->clone(*pool_));
    }
    KernelContext ctx(*s.node, ins, outs, *pool_, &s.donatable);
    bool binds = false;
    if (!bound_slot.empty()) {
      bound.assign(s.out_slots.size(), nullptr);
      for (size_t k = 0; k < s.out_slots.size(); ++k) binds |= (bound[k] = bound_slot[size_t(s.out_slots[k])]) != nullptr;
      if (binds) ctx.bind_outputs(&bound);
    }
    NodeEvent ev;
    if (options_.profile)
      for (const Tensor* t : ins) ev.in_bytes += t ? t->nbytes() : 0;
    const auto ts = options_.profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    try {
      if (s.kv >= 0)
        kv_append(s, ins, outs);  // KV cache: the Concat appends in place
      else
        s.kernel->run(ctx);
    } catch (const UnsupportedError&) {
      throw;
    } catch (const Error& e) {
      std::string msg = e.what();
      if (msg.find(s.node->describe()) == std::string::npos) msg = s.node->describe() + ": " + msg;
      throw Error(msg);
    }
    if (options_.profile) {
      const auto te = std::chrono::steady_clock::now();
      stats_.nodes[i].total_s += std::chrono::duration<double>(te - ts).count();
      stats_.nodes[i].calls++;
      using ns = std::chrono::nanoseconds;
      ev.node = int(i);
      ev.start_ns = std::chrono::duration_cast<ns>(ts.time_since_epoch()).count();
      ev.dur_ns = std::chrono::duration_cast<ns>(te - ts).count();
      for (const Tensor& t : outs) ev.out_bytes += t.nbytes();
      stats_.events.push_back(ev);
    }
    if (binds)
      for (size_t k = 0; k < outs.size(); ++k)
        if (bound[k]) into_bound(bound[k], outs[k], s.node->output(int(k))->name());
    for (size_t k = 0; k < outs.size(); ++k) slots[s.out_slots[k]] = std::move(outs[k]);
    for (int k : s.release) slots[k] = Tensor();
  }
  std::vector<Tensor> result;
  for (size_t i = 0; i < graph_output_slots_.size(); ++i) {
    const int s = graph_output_slots_[i];
    if (!bound_slot.empty() && bound_slot[size_t(s)])  // an input or a constant given as an output
      into_bound(bound_slot[size_t(s)], slots[size_t(s)], graph_.outputs()[i]->name());
    result.push_back(slots[size_t(s)]);
  }
  stats_.peak_bytes = pool_->end_run();
  stats_.pool_bytes = pool_->held();
  stats_.pool_fresh_bytes = pool_->fresh();
  stats_.kv_cache_bytes = 0;
  for (const Tensor& b : kv_buffers_) stats_.kv_cache_bytes += b.defined() ? b.nbytes() : 0;
  stats_.last_run_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats_.threads = threads;
  if (chooser) chooser->record(stats_.last_run_s);
  return result;
}

}  // namespace gaf::runtime
