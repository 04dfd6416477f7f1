// Argument structs of the CUDA backend's hand-written kernels (library_kernels.cc holds their source,
// compiled by NVRTC); the layouts here and there must match field for field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gaf {
class Node;
class Value;
}  // namespace gaf

namespace gaf::cuda {

std::string library_kernels_source();

// v's dims; UnsupportedError naming node n and v when they are not all known (the backend plans static
// shapes).
std::vector<int64_t> static_dims(const Value* v, const Node& n);
int64_t numel(const std::vector<int64_t>& dims);

struct AttnArgs {
  const void *q, *k, *v;  // `io`: 0 fp32, 1 bfloat16, 2 float16
  const float* mask;
  void* o;
  int nb;
  long long bdims[4];
  long long qb[4], kb[4], vb[4], mb[4], ob[4];
  long long lq, lk, d, dv;
  long long qr, qc, kr, kc, vr, vc, mr, mc, orow, ocol;
  float scale;
  int io;
};

// The pools and gather read and write fp32, bfloat16 or float16 (`io` as AttnArgs'); pools sum in fp32.
struct PoolArgs {
  const void* x;
  void* y;
  long long nc, h, w, oh, ow;
  int kh, kw, sh, sw, ph, pw, dh, dw;
  int ph_end, pw_end;
  int mode;
  int io;
};

struct GlobalPoolArgs {
  const void* x;
  void* y;
  long long rows, len;
  int max;
  int io;
};

// y = [relu](y + bias[c] + z) in place over a 16-bit NCHW convolution output of n elements (bias per channel,
// z the residual; either null): what the fp32 path's fused cuDNN call applies.
struct ConvEpilogueArgs {
  void* y;
  const void* bias;
  const void* z;
  long long n, plane, channels;
  int relu, half;
};

struct GatherArgs {
  const void* data;
  const long long* idx;
  void* y;
  long long nidx, rows, outer, len;
  int io;
};

// The arguments of each library kernel for node `n` (static shapes), its data pointers left null for the
// session to fill: gaf.Attention (`*nbatch` receives the grid's batch count), MaxPool / AveragePool,
// GlobalAveragePool / GlobalMaxPool, Gather. Throw gaf::UnsupportedError naming the node when the kernel does
// not take its form.
AttnArgs attention_args(const Node& n, int64_t* nbatch);
size_t attention_smem(const AttnArgs& a);  // dynamic shared memory of a launch (128 threads, 4 query rows)

// How a gaf.Attention node launches (the session and the emulation tests take it from here): the tensor-core
// kernel gaf_attention_mma where Q, K and V are 16-bit and both depths are multiples of 16 up to 128 (64 query
// rows a block), else the CUDA-core gaf_attention (4 rows a block); 128 threads either way. The environment
// variable GAF_CUDA_ATTENTION=simt keeps every node on the CUDA-core kernel (a device run's comparison).
struct AttentionLaunch {
  const char* kernel;
  int64_t rows_per_block;
  size_t smem;  // dynamic shared memory, bytes
  bool tensor_cores;
};
AttentionLaunch attention_launch(const AttnArgs& a);
PoolArgs pool_args(const Node& n);
GlobalPoolArgs global_pool_args(const Node& n);
GatherArgs gather_args(const Node& n);

}  // namespace gaf::cuda
