// Runtime kernel interface. A Kernel is created once per node when a Session compiles (so it can precompute:
// oneDNN primitives, reordered weights) and run many times. Output shapes are computed at run time from the
// input tensors, so dynamic shapes work without a separate shape function.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gaf/graph.h"
#include "gaf/op_registry.h"
#include "gaf/tensor.h"

namespace gaf::runtime {

class Session;

class KernelContext {
 public:
  // `inputs` and `donatable` must outlive the context. donatable[i]: input i is dead after this node (its last
  // reader, not a graph input, constant or output, and passed once), so its storage may become an output's.
  KernelContext(const Node& node, const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs,
                Allocator& alloc, const std::vector<bool>* donatable = nullptr)
      : node_(node), inputs_(inputs), outputs_(outputs), alloc_(alloc), donatable_(donatable) {}

  const Node& node() const { return node_; }
  int num_inputs() const { return int(inputs_.size()); }
  int num_outputs() const { return int(outputs_.size()); }
  // nullptr when an optional input is absent (also past the end).
  const Tensor* input(int i) const { return i < num_inputs() ? inputs_[i] : nullptr; }
  // Required input: throws naming the node when absent.
  const Tensor& in(int i) const;
  // Allocates output i (uninitialised unless zero) from the session's allocator, or hands out the caller's
  // buffer when the output is bound (Session::run with outputs) and has its dtype and dims (else an error).
  Tensor& allocate_output(int i, DType dtype, std::vector<int64_t> dims, bool zero = false);
  // Caller-owned buffers for the outputs (null entries: unbound); must outlive the context.
  void bind_outputs(const std::vector<const Tensor*>* bound) { bound_ = bound; }
  // Sets output i to an existing tensor (a view sharing an input's storage, a constant).
  void set_output(int i, Tensor t) { outputs_[i] = std::move(t); }
  Tensor& output(int i) { return outputs_[i]; }
  Allocator& allocator() { return alloc_; }
  // Whether the session lets input i's storage be reused (see the constructor), and whether it can be now: no
  // other tensor shares that storage. A kernel writing its output in place over such an input (a residual added
  // into a convolution's output) sets the output to it and saves a copy.
  bool may_donate(int i) const { return donatable_ && i < int(donatable_->size()) && (*donatable_)[size_t(i)]; }
  bool can_take(int i) const {
    const Tensor* t = input(i);
    return may_donate(i) && t && t->defined() && t->storage_use_count() == 1;
  }

 private:
  const Node& node_;
  const std::vector<const Tensor*>& inputs_;
  std::vector<Tensor>& outputs_;
  Allocator& alloc_;
  const std::vector<bool>* donatable_;
  const std::vector<const Tensor*>* bound_ = nullptr;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual void run(KernelContext& ctx) = 0;
  // Whether run() reads its inputs through Tensor::strides(), so a strided view (Tensor::view) may be passed
  // as it is; otherwise the session passes a contiguous copy.
  virtual bool reads_strided_inputs() const { return false; }
  // Whether the kernel keeps constant input i in a form of its own (a product's weights packed for Gemv) and
  // reads that tensor's data no more once release_constant(i) has been called: a session that owns its graph
  // then releases the graph's copy, so the weight is held once (Session(std::unique_ptr<Graph>)).
  virtual bool keeps_own_copy(int i) const { return false; }
  // Drops the kernel's references to constant input i's data (keeps_own_copy(i) said so); later runs pass a
  // tensor of its dtype and dims without data (Tensor::without_data) in its place.
  virtual void release_constant(int i) {}
  // The sessions running the node's subgraphs (If, Loop, Scan, SequenceMap), built with the kernel.
  virtual std::vector<const Session*> subgraph_sessions() const { return {}; }
};

using KernelFactory = std::function<std::unique_ptr<Kernel>(const Node&)>;

// The CPU runtime's kernels: for each op of the op registry (src/ops) it runs, how to make its kernel for a node.
// The op families of src/runtime/kernels fill it; a Session asks it for every node no generated kernel covers.
class KernelRegistry {
 public:
  struct Entry {
    KernelFactory make;
    Entry& set_kernel(KernelFactory f) {
      make = std::move(f);
      return *this;
    }
  };
  static const KernelRegistry& cpu();  // populated on first use
  // Registers the kernel of an op the op registry defines (anything else is a programming error).
  Entry& add(std::string op_type, std::string domain = "");
  // The factory for n (a fused node: the body runner), null when the CPU runtime has no kernel for its op.
  const KernelFactory* find(const Node& n) const;
  const KernelFactory* find(std::string_view op_type, std::string_view domain = "") const;
  // Keyed by the op's definition: the op registry alone says which names and domains are one op.
  const std::map<const OpInfo*, Entry>& all() const { return kernels_; }

 private:
  const KernelFactory* find(const OpInfo* op) const;
  std::map<const OpInfo*, Entry> kernels_;
};

// Adapts a plain function into a Kernel; for ops that need no per-node precomputation.
using KernelFn = void (*)(KernelContext&);
class FnKernel final : public Kernel {
 public:
  explicit FnKernel(KernelFn fn, bool strided = false) : fn_(fn), strided_(strided) {}
  void run(KernelContext& ctx) override { fn_(ctx); }
  bool reads_strided_inputs() const override { return strided_; }

 private:
  KernelFn fn_;
  bool strided_;
};
inline KernelFactory fn_kernel(KernelFn fn) {
  return [fn](const Node&) -> std::unique_ptr<Kernel> { return std::make_unique<FnKernel>(fn); };
}
// A function kernel that reads strided inputs (Kernel::reads_strided_inputs).
inline KernelFactory strided_fn_kernel(KernelFn fn) {
  return [fn](const Node&) -> std::unique_ptr<Kernel> { return std::make_unique<FnKernel>(fn, true); };
}

}  // namespace gaf::runtime
