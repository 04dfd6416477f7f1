// Internal helpers of the oneDNN kernel family: the process-wide engine, a stream and a scratchpad per
// thread, memory descriptors for plain row-major tensors, fp32 staging of fp16/bf16 tensors, the post-op
// chain, a per-kernel cache of primitives keyed by input shapes, and conversion of oneDNN errors into gaf
// errors.
#pragma once

#include <omp.h>

#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gaf/kernel.h"
#include "ops/geometry.h"
#include "runtime/kernels/common.h"
#include "runtime/kernels/dnnl/dnnl_ops.h"

namespace gaf::runtime::dnnl_detail {

using dnnl::memory;
using Dims = std::vector<int64_t>;
// The window and matmul shape functions of the op definitions (ops/geometry.h).
using ops::batched_matmul;
using ops::BatchedMatMul;
using ops::conv_shape;
using ops::ConvShape;
using ops::forward_window;
using ops::matmul_shape;
using ops::MatMulShape;
using ops::transpose_window;
using ops::Window;
using ops::WindowAttrs;

dnnl::engine& engine();
dnnl::stream& stream();
// Once per process: builds and runs a small matmul, so that oneDNN's first-use costs (its JIT code buffers, the
// CPU dispatch, the primitive cache) fall at session build rather than in the first run of a kernel whose
// primitive waits for its run-time shapes (a decoder's products: 2 ms of a fresh session's first run).
void warm_up();

// Dense row-major descriptor of `dims` (any rank, zero-size dims allowed by the caller's checks).
memory::desc plain_desc(const Dims& dims, memory::data_type dt = memory::data_type::f32);
// Same element order, explicit strides (e.g. a transposed view).
memory::desc strided_desc(const Dims& dims, const Dims& strides,
                          memory::data_type dt = memory::data_type::f32);

// Channels-last activations (gaf.Conv / gaf.MaxPool / gaf.AveragePool with layout = "NHWC"): the physical dims
// [N, spatial..., C] and the logical [N, C, spatial...] oneDNN descriptors speak; ranks below 3 pass unchanged.
using ops::channels_last_logical;
Dims channels_last_physical(const Dims& logical);
// The descriptor of a channels-last tensor of `logical` dims as it lies in memory.
memory::desc channels_last_desc(const Dims& logical, memory::data_type dt = memory::data_type::f32);

// Primitive attributes with a user-managed scratchpad (one thread-local buffer serves every primitive).
dnnl::primitive_attr base_attr();

// Runs `prim` on this thread's stream; `scratch_bytes` comes from the primitive descriptor's
// scratchpad_desc().
void execute(const dnnl::primitive& prim, size_t scratch_bytes, std::unordered_map<int, memory>& args);

// The argument map of one primitive (one shape-cache entry), kept across runs: each run points the memory
// objects at its own buffers (set_data_handle) instead of creating them. Creating a oneDNN memory object costs
// an aligned allocation and a descriptor copy, measured at about 0.3 us each: more than the arithmetic of a small
// convolution. An argument id always has the same descriptor within one entry.
class ArgCache {
 public:
  // Argument `arg` as a memory of descriptor `md` over `data`.
  void bind(int arg, const memory::desc& md, const void* data);
  // Argument `arg` as an existing memory object (packed weights, a reorder's scratch).
  void set(int arg, const memory& m) { args_[arg] = m; }
  std::unordered_map<int, memory>& args() { return args_; }

 private:
  std::unordered_map<int, memory> args_;
};

// A trailing Swish (x * sigmoid(alpha x)) is split off a convolution's post-op chain and run as one vectorised
// pass over the output after the primitive: oneDNN 2.6's swish post-op (an exp and a division per element in the
// kernel's store phase) measured 1.2-2.6x slower than the convolution without it followed by that pass (16->96
// channels at 112x112: 235 vs 178 us; EfficientNet-B0's twelve 1x1 shapes: 925 vs 788 us). Returns its alpha, or
// nullopt. (MatMul and Gemm run everything from a chain's first SiLU or GELU as a PostOpPass.)
std::optional<float> take_trailing_swish(std::vector<dnnl_ops::PostOp>& chain);
// y[i] = y[i] * sigmoid(alpha y[i]) over n floats, in place, across the OpenMP threads.
void swish_inplace(float* y, int64_t n, float alpha);

// Runs a reorder between two memories (plain <-> blocked layouts, weights packing).
void reorder_memory(const memory& from, const memory& to);

// True when a primitive descriptor fell back to oneDNN's slow reference implementation.
bool is_reference_impl(const dnnl::primitive_desc_base& pd);

// fp32, fp16 and bf16 run through oneDNN in fp32; other types take the plain-loop paths.
inline bool is_dnnl_float(DType t) {
  return t == DType::Float || t == DType::Float16 || t == DType::BFloat16;
}

// `t` as fp32: the tensor itself when it already is, else a converted copy (parallel).
Tensor to_float(const Tensor& t, Allocator& alloc = Allocator::heap());
// Converts fp32 `src` into `dst` (Float16 / BFloat16 / Float) elementwise; same element count.
void store_from_float(const float* src, Tensor& dst);

// fp32 copy of any numeric tensor times `scale` (Gemm's beta * C).
Tensor scaled_float(const Tensor& t, float scale, Allocator& alloc = Allocator::heap());
// fp32 tensor `t` (dims padded to `padded`) materialised to the full broadcast shape `full`.
Tensor expand_float(const Tensor& t, const Dims& padded, const Dims& full, Allocator& alloc);

// Wraps a tensor's storage in a oneDNN memory of the given descriptor (no copy).
memory wrap(const memory::desc& md, const void* data);

// --- post-ops ---
// The oneDNN eltwise post-op (algorithm and parameters) a PostOp appends as; nullopt for Add and Binary.
struct EltwiseForm {
  dnnl::algorithm alg;
  float alpha, beta;
};
std::optional<EltwiseForm> eltwise_form(const dnnl_ops::PostOp& op);
// Appends the chain to `attr`. `addend_descs[i]` is the src1 descriptor of the i-th Add post-op, except that
// Add number `sum_addend` (if >= 0) becomes a sum post-op: the caller writes that addend into the destination
// before executing (oneDNN then adds the destination's prior contents at that point of the chain).
void append_post_ops(dnnl::primitive_attr& attr, const std::vector<dnnl_ops::PostOp>& ops,
                     const std::vector<memory::desc>& addend_descs, int sum_addend = -1);
// Argument id of the i-th post-op's src1 (binary) operand.
inline int post_op_src1_arg(int position) {
  return DNNL_ARG_ATTR_MULTIPLE_POST_OP(position) | DNNL_ARG_SRC_1;
}
// Validates the chain (kinds, Add inputs present) for `node`; throws naming the node.
void check_post_ops(const Node& node, const std::vector<dnnl_ops::PostOp>& ops, int first_extra_input);
// One op without an operand on one value, as the ONNX op computes it (the scalar form of the post-op passes;
// post_op_pass.h applies a whole chain).
float eltwise_ref(const dnnl_ops::PostOp& op, float x);
// Addend dims padded with leading 1s to rank(out); throws unless they broadcast into `out` unidirectionally.
Dims addend_dims(const Node& node, const Dims& addend, const Dims& out);

// --- cache ---
// Primitives built for one set of input shapes and one thread count. oneDNN splits a primitive's work among
// the threads there are when it is built and always runs that many, so a run the session gives fewer threads
// (a busy machine, runtime/thread_chooser.h) builds its own entry rather than waiting on threads it does not
// have. Small (typically one entry, two on a machine whose load varies); the oldest entry goes when full.
template <class Entry>
class ShapeCache {
 public:
  Entry* find(const Dims& key) {
    const int threads = omp_get_max_threads();
    for (auto& [k, e] : entries_)
      if (k.second == threads && k.first == key) return e.get();
    return nullptr;
  }
  Entry& insert(Dims key, std::unique_ptr<Entry> e) {
    if (entries_.size() >= kMaxEntries) entries_.erase(entries_.begin());
    entries_.emplace_back(std::make_pair(std::move(key), omp_get_max_threads()), std::move(e));
    return *entries_.back().second;
  }
  bool empty() const { return entries_.empty(); }

 private:
  static constexpr size_t kMaxEntries = 8;
  std::vector<std::pair<std::pair<Dims, int>, std::unique_ptr<Entry>>> entries_;
};

// Appends rank, dims and element type of an operand to a cache key (-1 for an absent operand).
inline void key_append(Dims& key, const Dims& dims, DType dtype) {
  key.push_back(int64_t(dims.size()));
  key.insert(key.end(), dims.begin(), dims.end());
  key.push_back(int64_t(dtype));
}
inline void key_append(Dims& key, const Tensor* t) {
  if (!t || !t->defined()) {
    key.push_back(-1);
    return;
  }
  key_append(key, t->dims(), t->dtype());
}

// Calls f(); a dnnl::error becomes gaf::UnsupportedError naming the node and what was attempted (oneDNN
// rejects configurations it has no implementation for, e.g. a dtype combination).
template <class F>
decltype(auto) dnnl_try(const Node& node, const char* what, F&& f) {
  try {
    return f();
  } catch (const dnnl::error& e) {
    unsupported("{}: oneDNN cannot {} ({})", node.describe(), what, e.what());
  }
}

using ops::static_input_dims;  // static dims of input i of a node, or empty optional when unknown

}  // namespace gaf::runtime::dnnl_detail
