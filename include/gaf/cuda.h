// The CUDA backend: runs a (fused) graph on an NVIDIA GPU.
//
// A cuda::Session compiles a graph once: every fused node and every standalone elementwise, data-movement or
// row-reduction node becomes a generated kernel (the CPU emitter's CUDA dialect, compiled by NVRTC for the
// device's compute capability and cached on disk by content hash); MatMul and Gemm run on cuBLASLt with their
// bias / ReLU / residual epilogues folded in where cuBLASLt has them; Conv runs on cuDNN with bias, residual
// and ReLU folded in; gaf.Attention runs a flash-attention kernel (online softmax, nothing of the score
// matrix in memory); pooling has hand-written kernels. Whatever part of a fused group the library call cannot
// take runs as one generated epilogue kernel. Intermediates live in one device arena planned from value
// lifetimes; the whole schedule is captured once into a CUDA graph and replayed (one launch per run).
//
// This slice runs static shapes, fp32 storage (TF32 products with precision_mode tf32).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gaf/graph.h"

namespace gaf::cuda {

// Empty when --device cuda can run here; else why not (no CUDA backend in this build, no driver, no device).
std::string unavailable_reason();

struct Options {
  bool tf32 = false;  // products and convolutions in TF32 (precision_mode tf32); strict fp32 otherwise
  bool graph = true;  // capture the schedule into a CUDA graph at build, replay it per run
  // Plan and compile the kernels (NVRTC, for an H200's sm_90) without touching a device: what a machine
  // without a GPU can check of a model (run --device cuda --dry-run). Such a session cannot run.
  bool dry_run = false;
  // Runs launch step by step and wait for each, so a kernel fault names the step it happened in (verify uses it).
  bool check_steps = false;
};

struct Step {
  std::string node;  // "node 'name' (Op)"
  std::string how;   // "generated kernel gaf_k3", "cuBLASLt (bias, relu)", "alias", ...
  int launches = 0;  // kernel launches (library calls count one each)
};

class Session {
 public:
  // Throws gaf::UnsupportedError naming the first node the backend cannot run, gaf::Error when no device.
  explicit Session(const Graph& graph, Options options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Inputs in graph-input order (non-initializer inputs), on the host; outputs copied back to the host.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);
  // Copies `inputs` to the device once, then times `iterations` runs after `warmup` (CUDA events around
  // each): the median in milliseconds. `replay`: the captured CUDA graph, else the schedule launched step by
  // step.
  double median_ms(const std::vector<Tensor>& inputs, int iterations, int warmup, bool replay);

  // Per step, the median milliseconds over `iterations` runs launched step by step with CUDA events between
  // the steps (the events cost a little; the sum is above an unprofiled run's time).
  std::vector<double> step_ms(const std::vector<Tensor>& inputs, int iterations);

  const std::vector<Step>& steps() const;
  // Kernel launches per run: counted from the captured graph's kernel nodes (library internals included) when
  // there is one, else the steps' estimates.
  size_t kernels_per_run() const;
  size_t generated_kernels() const;
  std::string device_name() const;
  size_t arena_bytes() const;
  // Why the schedule could not be captured into a CUDA graph (runs then launch step by step); empty when it
  // was.
  const std::string& capture_error() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gaf::cuda
