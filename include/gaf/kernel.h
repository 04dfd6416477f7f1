// Runtime kernel interface. A Kernel is created once per node when a Session compiles (so it can precompute:
// oneDNN primitives, reordered weights) and run many times. Output shapes are computed at run time from the
// input tensors, so dynamic shapes work without a separate shape function.
#pragma once

#include <memory>
#include <vector>

#include "gaf/graph.h"
#include "gaf/op_registry.h"
#include "gaf/tensor.h"

namespace gaf::runtime {

class KernelContext {
 public:
  KernelContext(const Node& node, std::vector<const Tensor*> inputs, std::vector<Tensor>& outputs,
                Allocator& alloc)
      : node_(node), inputs_(std::move(inputs)), outputs_(outputs), alloc_(alloc) {}

  const Node& node() const { return node_; }
  int num_inputs() const { return int(inputs_.size()); }
  int num_outputs() const { return int(outputs_.size()); }
  // nullptr when an optional input is absent (also past the end).
  const Tensor* input(int i) const { return i < num_inputs() ? inputs_[i] : nullptr; }
  // Required input: throws naming the node when absent.
  const Tensor& in(int i) const;
  // Allocates output i (uninitialised unless zero) from the session's allocator.
  Tensor& allocate_output(int i, DType dtype, std::vector<int64_t> dims, bool zero = false);
  // Sets output i to an existing tensor (a view sharing an input's storage, a constant).
  void set_output(int i, Tensor t) { outputs_[i] = std::move(t); }
  Allocator& allocator() { return alloc_; }

 private:
  const Node& node_;
  std::vector<const Tensor*> inputs_;
  std::vector<Tensor>& outputs_;
  Allocator& alloc_;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual void run(KernelContext& ctx) = 0;
};

// Adapts a plain function into a Kernel; for ops that need no per-node precomputation.
using KernelFn = void (*)(KernelContext&);
class FnKernel final : public Kernel {
 public:
  explicit FnKernel(KernelFn fn) : fn_(fn) {}
  void run(KernelContext& ctx) override { fn_(ctx); }

 private:
  KernelFn fn_;
};
inline KernelFactory fn_kernel(KernelFn fn) {
  return [fn](const Node&) -> std::unique_ptr<Kernel> { return std::make_unique<FnKernel>(fn); };
}

}  // namespace gaf::runtime
