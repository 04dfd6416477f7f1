// The CUDA backend's hand-written kernels (compiled by NVRTC with the generated ones, after the CUDA
// prelude): flash attention (on CUDA cores, and on tensor cores for 16-bit operands), 2-D pooling, global pooling, row gather. Each takes one argument struct by
// value; the host side (session.cc) fills the same structs, declared in library_kernels.h.
#include "backends/cuda/library_kernels.h"

#include <cmath>
#include <cstdlib>
#include <numeric>
#include <string_view>
#include <vector>

#include "gaf/graph.h"
#include "gaf/status.h"

namespace gaf::cuda {

std::vector<int64_t> static_dims(const Value* v, const Node& n) {
  if (!v->type.has_static_shape())
    throw UnsupportedError(
        fmt::format("{}: value '{}' has shape {}; the CUDA backend runs static shapes so far", n.describe(),
                    v->name(), v->type.to_string()));
  return v->type.static_dims();
}
int64_t numel(const std::vector<int64_t>& d) {
  return std::accumulate(d.begin(), d.end(), int64_t(1), std::multiplies<>());
}

// A library kernel's element type code: 0 float, 1 bfloat16, 2 float16; -1 for any other.
static int io_of(DType t) {
  return t == DType::Float ? 0 : t == DType::BFloat16 ? 1 : t == DType::Float16 ? 2 : -1;
}

AttnArgs attention_args(const Node& n, int64_t* nbatch_out) {
  auto operand = [&](int i, const char* perm_attr, std::vector<int64_t>& dims,
                     std::vector<int64_t>& strides) {
    const Value* v = n.input(i);
    std::vector<int64_t> d = static_dims(v, n);
    if (v->type.dtype != n.input(0)->type.dtype || n.output(0)->type.dtype != v->type.dtype ||
        (v->type.dtype != DType::Float && v->type.dtype != DType::BFloat16 && v->type.dtype != DType::Float16))
      throw UnsupportedError(fmt::format("{}: the CUDA attention kernel takes Q, K, V and its output in one of "
                                         "float, bfloat16, float16",
                                         n.describe()));
    std::vector<int64_t> perm = n.attr_ints(perm_attr);
    if (perm.empty()) {
      perm.resize(d.size());
      std::iota(perm.begin(), perm.end(), int64_t(0));
    }
    std::vector<int64_t> cs(d.size(), 1);
    for (int k = int(d.size()) - 2; k >= 0; --k) cs[size_t(k)] = cs[size_t(k) + 1] * d[size_t(k) + 1];
    dims.clear();
    strides.clear();
    for (int64_t p : perm) dims.push_back(d[size_t(p)]), strides.push_back(cs[size_t(p)]);
  };
  std::vector<int64_t> qd, qs, kd, ks, vd, vs, md, ms;
  operand(0, "q_perm", qd, qs);
  operand(1, "k_perm", kd, ks);
  operand(2, "v_perm", vd, vs);
  const Value* mask = n.input(3);
  if (mask) {
    if (mask->type.dtype != DType::Float)
      throw UnsupportedError(fmt::format("{}: the CUDA attention kernel adds a float mask", n.describe()));
    md = static_dims(mask, n);
    while (md.size() < 2) md.insert(md.begin(), 1);
    ms.assign(md.size(), 1);
    for (int k = int(md.size()) - 2; k >= 0; --k) ms[size_t(k)] = ms[size_t(k) + 1] * md[size_t(k) + 1];
    for (size_t k = 0; k < md.size(); ++k)
      if (md[k] == 1) ms[k] = 0;
  }
  const std::vector<int64_t> yd = static_dims(n.output(0), n);
  std::vector<int64_t> out_perm = n.attr_ints("out_perm");
  const size_t orank = yd.size();
  if (out_perm.empty()) {
    out_perm.resize(orank);
    std::iota(out_perm.begin(), out_perm.end(), int64_t(0));
  }
  std::vector<int64_t> ycs(orank, 1), ostr(orank);
  for (int k = int(orank) - 2; k >= 0; --k) ycs[size_t(k)] = ycs[size_t(k) + 1] * yd[size_t(k) + 1];
  for (size_t j = 0; j < orank; ++j) ostr[size_t(out_perm[j])] = ycs[j];
  std::vector<int64_t> od(orank);
  for (size_t j = 0; j < orank; ++j) od[size_t(out_perm[j])] = yd[j];
  const int nb = int(orank) - 2;
  AttnArgs a{};
  a.lq = qd.end()[-2], a.d = qd.back(), a.lk = kd.end()[-2], a.dv = vd.back();
  if (nb > 4 || a.d > 256 || a.dv > 256)
    throw UnsupportedError(
        fmt::format("{}: the CUDA attention kernel takes up to 4 batch dims and depth 256", n.describe()));
  a.nb = nb;
  int64_t nbatch = 1;
  // Batch strides right-aligned; an operand's size-1 batch dim broadcasts (stride 0).
  auto batch_strides = [&](const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                           long long* out) {
    int r = int(dims.size()) - 2;
    for (int k = nb - 1, j = r - 1; k >= 0; --k, --j)
      out[k] = j >= 0 && dims[size_t(j)] != 1 ? strides[size_t(j)] : 0;
  };
  for (int k = 0; k < nb; ++k) a.bdims[k] = od[size_t(k)], nbatch *= od[size_t(k)];
  batch_strides(qd, qs, a.qb);
  batch_strides(kd, ks, a.kb);
  batch_strides(vd, vs, a.vb);
  if (mask) batch_strides(md, ms, a.mb);
  for (int k = 0; k < nb; ++k) a.ob[k] = ostr[size_t(k)];
  a.qr = qs.end()[-2], a.qc = qs.back(), a.kr = ks.end()[-2], a.kc = ks.back(), a.vr = vs.end()[-2],
  a.vc = vs.back();
  if (mask) a.mr = ms.end()[-2], a.mc = ms.back();
  a.orow = ostr[orank - 2], a.ocol = ostr[orank - 1];
  a.scale = n.attr_float("scale", float(1.0 / std::sqrt(double(std::max<int64_t>(a.d, 1)))));
  a.io = io_of(n.input(0)->type.dtype);
  *nbatch_out = nbatch;
  return a;
}

size_t attention_smem(const AttnArgs& a) {
  return size_t(32 * (a.d + 1) + 32 * a.dv + 4 * a.d) * sizeof(float);
}

AttentionLaunch attention_launch(const AttnArgs& a) {
  const char* env = std::getenv("GAF_CUDA_ATTENTION");
  const bool simt_only = env && std::string_view(env) == "simt";
  if (!simt_only && a.io != 0 && a.d % 16 == 0 && a.dv % 16 == 0 && a.d <= 128 && a.dv <= 128)
    return {"gaf_attention_mma", 64, size_t(64 * (a.d + 8) + a.dv * (64 + 8)) * 2, true};
  return {"gaf_attention", 4, attention_smem(a), false};
}

PoolArgs pool_args(const Node& n) {
  std::vector<int64_t> xd = static_dims(n.input(0), n), yd = static_dims(n.output(0), n);
  if (xd.size() != 4 || io_of(n.input(0)->type.dtype) < 0 ||
      (n.num_outputs() > 1 && !n.output(1)->absent_output && !n.output(1)->uses().empty()))
    throw UnsupportedError(fmt::format(
        "{}: the CUDA backend pools 2-D float, bfloat16 or float16 maps (no indices output)", n.describe()));
  if (n.attr_string("auto_pad", "NOTSET") != "NOTSET")
    throw UnsupportedError(fmt::format("{}: auto_pad on the CUDA backend", n.describe()));
  std::vector<int64_t> ks = n.attr_ints("kernel_shape"), pads = n.attr_ints("pads", {0, 0, 0, 0}),
                       st = n.attr_ints("strides", {1, 1}), dil = n.attr_ints("dilations", {1, 1});
  GAF_CHECK(ks.size() == 2 && pads.size() == 4 && st.size() == 2 && dil.size() == 2,
            "{}: 2-D pooling needs 2 kernel dims, 4 pads, 2 strides and 2 dilations", n.describe());
  PoolArgs a{};
  a.nc = xd[0] * xd[1], a.h = xd[2], a.w = xd[3], a.oh = yd[2], a.ow = yd[3];
  a.kh = int(ks[0]), a.kw = int(ks[1]), a.sh = int(st[0]), a.sw = int(st[1]), a.ph = int(pads[0]),
  a.pw = int(pads[1]), a.dh = int(dil[0]), a.dw = int(dil[1]), a.ph_end = int(pads[2]), a.pw_end = int(pads[3]);
  a.mode = n.op_type == "MaxPool" ? 0 : n.attr_int("count_include_pad", 0) ? 1 : 2;
  a.io = io_of(n.input(0)->type.dtype);
  return a;
}

GlobalPoolArgs global_pool_args(const Node& n) {
  std::vector<int64_t> xd = static_dims(n.input(0), n);
  if (xd.size() < 3 || io_of(n.input(0)->type.dtype) < 0)
    throw UnsupportedError(fmt::format("{}: the CUDA backend pools float, bfloat16 or float16 maps", n.describe()));
  GlobalPoolArgs a{};
  a.rows = xd[0] * xd[1];
  a.len = numel(xd) / std::max<int64_t>(a.rows, 1);
  a.max = n.op_type == "GlobalMaxPool";
  a.io = io_of(n.input(0)->type.dtype);
  return a;
}

GatherArgs gather_args(const Node& n) {
  std::vector<int64_t> dd = static_dims(n.input(0), n), id = static_dims(n.input(1), n);
  if (io_of(n.input(0)->type.dtype) < 0 || n.input(1)->type.dtype != DType::Int64)
    throw UnsupportedError(fmt::format(
        "{}: the CUDA backend gathers float, bfloat16 or float16 data by int64 indices", n.describe()));
  int64_t axis = n.attr_int("axis", 0);
  if (axis < 0) axis += int64_t(dd.size());
  GAF_CHECK(axis >= 0 && axis < int64_t(dd.size()), "{}: axis out of range", n.describe());
  GatherArgs a{};
  a.outer = numel(std::vector<int64_t>(dd.begin(), dd.begin() + axis));
  a.rows = dd[size_t(axis)];
  a.len = numel(std::vector<int64_t>(dd.begin() + axis + 1, dd.end()));
  a.nidx = numel(id);
  a.io = io_of(n.input(0)->type.dtype);
  return a;
}

std::string library_kernels_source() {
  return R"CUDA(
// ---- graph-autofusion CUDA library kernels ----
#define GAFL_INF __int_as_float(0x7f800000)

struct GafAttnArgs {
  const void* q; const void* k; const void* v; const float* mask; void* o;
  int nb; long long bdims[4];
  long long qb[4], kb[4], vb[4], mb[4], ob[4];
  long long lq, lk, d, dv;
  long long qr, qc, kr, kc, vr, vc, mr, mc, orow, ocol;
  float scale;
  int io;  // Q, K, V and the output: 0 fp32, 1 bfloat16, 2 float16 (the math is fp32 either way)
};

__device__ __forceinline__ float gafl_ld(int io, const void* p, long long i) {
  if (io == 0) return ((const float*)p)[i];
  const uint16_t h = ((const uint16_t*)p)[i];
  return io == 1 ? gaf_load_bf16(h) : gaf_load_half(h);
}
__device__ __forceinline__ void gafl_st(int io, void* p, long long i, float v) {
  if (io == 0) ((float*)p)[i] = v;
  else ((uint16_t*)p)[i] = io == 1 ? gaf_store_bf16(v) : gaf_store_half(v);
}

__device__ __forceinline__ float gafl_warp_max(float x) {
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float gafl_warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// One warp per query row, four rows per block; key/value tiles of 32 rows in shared memory, shared by the
// block's warps. Lane j scores key j of a tile; the online softmax rescales the running output (each lane holds
// dv / 32 of its columns) when the row maximum grows. A row whose keys are all masked with -inf comes out NaN,
// as the unfused softmax gives.
extern "C" __global__ void __launch_bounds__(128) gaf_attention(const GafAttnArgs a) {
  extern __shared__ float gafl_sm[];
  const int d = int(a.d), dv = int(a.dv), ldk = d + 1;
  float* ks = gafl_sm;
  float* vs = ks + 32 * ldk;
  float* qs = vs + 32 * dv;
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  long long rem = blockIdx.y, qo = 0, ko = 0, vo = 0, mo = 0, oo = 0;
  for (int i = a.nb - 1; i >= 0; --i) {
    const long long idx = rem % a.bdims[i];
    rem /= a.bdims[i];
    qo += idx * a.qb[i]; ko += idx * a.kb[i]; vo += idx * a.vb[i]; mo += idx * a.mb[i]; oo += idx * a.ob[i];
  }
  const long long row = (long long)blockIdx.x * 4 + warp;
  const bool live = row < a.lq;
  for (int t = lane; t < d; t += 32)
    qs[warp * d + t] = live ? gafl_ld(a.io, a.q, qo + row * a.qr + t * a.qc) : 0.0f;
  float m = -GAFL_INF, l = 0.0f, acc[8];
  for (int t = 0; t < 8; ++t) acc[t] = 0.0f;
  for (long long k0 = 0; k0 < a.lk; k0 += 32) {
    const int nk = a.lk - k0 < 32 ? int(a.lk - k0) : 32;
    __syncthreads();
    for (int e = threadIdx.x; e < 32 * d; e += blockDim.x) {
      const int j = e / d, t = e - j * d;
      ks[j * ldk + t] = j < nk ? gafl_ld(a.io, a.k, ko + (k0 + j) * a.kr + t * a.kc) : 0.0f;
    }
    for (int e = threadIdx.x; e < 32 * dv; e += blockDim.x) {
      const int j = e / dv, t = e - j * dv;
      vs[j * dv + t] = j < nk ? gafl_ld(a.io, a.v, vo + (k0 + j) * a.vr + t * a.vc) : 0.0f;
    }
    __syncthreads();
    float s = -GAFL_INF;
    if (live && lane < nk) {
      const float* qr = qs + warp * d;
      const float* kr = ks + lane * ldk;
      float dot = 0.0f;
      for (int t = 0; t < d; ++t) dot = fmaf(qr[t], kr[t], dot);
      s = dot * a.scale;
      if (a.mask) s += a.mask[mo + row * a.mr + (k0 + lane) * a.mc];
    }
    const float mn = fmaxf(m, gafl_warp_max(s));
    const float p = mn == -GAFL_INF ? 0.0f : expf(s - mn);
    const float corr = mn == -GAFL_INF ? 1.0f : expf(m - mn);
    l = l * corr + gafl_warp_sum(p);
    m = mn;
    for (int t = 0; t < 8; ++t) acc[t] *= corr;
    for (int j = 0; j < nk; ++j) {
      const float pj = __shfl_sync(0xffffffffu, p, j);
      const float* vr = vs + j * dv;
      for (int t = 0; t < 8; ++t) {
        const int c = lane + 32 * t;
        if (c < dv) acc[t] = fmaf(pj, vr[c], acc[t]);
      }
    }
  }
  if (!live) return;
  const float inv = 1.0f / l;
  for (int t = 0; t < 8; ++t) {
    const int c = lane + 32 * t;
    if (c < dv)
      gafl_st(a.io, a.o, oo + row * a.orow + c * a.ocol, l > 0.0f ? acc[t] * inv : __int_as_float(0x7fffffff));
  }
}

// ---- tensor-core attention (16-bit Q, K, V) ----

__device__ __forceinline__ float gafl_lo(int io, uint32_t r) {
  return io == 1 ? gaf_load_bf16(uint16_t(r & 0xffffu)) : gaf_load_half(uint16_t(r & 0xffffu));
}
__device__ __forceinline__ float gafl_hi(int io, uint32_t r) {
  return io == 1 ? gaf_load_bf16(uint16_t(r >> 16)) : gaf_load_half(uint16_t(r >> 16));
}
__device__ __forceinline__ uint32_t gafl_pack(int io, float lo, float hi) {
  const uint16_t a = io == 1 ? gaf_store_bf16(lo) : gaf_store_half(lo);
  const uint16_t b = io == 1 ? gaf_store_bf16(hi) : gaf_store_half(hi);
  return uint32_t(a) | (uint32_t(b) << 16);
}

// d += A B for one m16n8k16 tile: bfloat16 (io 1) or float16 (io 2) operands, fp32 accumulators. Lane
// (g = lane / 4, t = lane % 4) holds A rows g and g + 8 at columns 2t, 2t + 1 (a[0] row g, a[1] row g + 8)
// and 2t + 8, 2t + 9 (a[2] row g, a[3] row g + 8); B column g at rows 2t, 2t + 1 (b[0]) and 2t + 8, 2t + 9
// (b[1]); d rows g (d[0], d[1]) and g + 8 (d[2], d[3]) at columns 2t, 2t + 1. A register's low half holds the
// lower index (the PTX ISA's fragment layout of mma.m16n8k16). Without sm_80's instruction (the CPU emulator)
// the same product from the warp's registers by shuffles.
__device__ __forceinline__ void gafl_mma(int io, float* d, const uint32_t* a, const uint32_t* b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if (io == 1)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  const int lane = int(threadIdx.x) & 31, g = lane >> 2, t = lane & 3;
  for (int s = 0; s < 4; ++s) {  // the lanes holding k = 2s, 2s + 1, 2s + 8, 2s + 9
    const uint32_t a0 = __shfl_sync(0xffffffffu, a[0], g * 4 + s), a1 = __shfl_sync(0xffffffffu, a[1], g * 4 + s);
    const uint32_t a2 = __shfl_sync(0xffffffffu, a[2], g * 4 + s), a3 = __shfl_sync(0xffffffffu, a[3], g * 4 + s);
    const uint32_t b00 = __shfl_sync(0xffffffffu, b[0], 8 * t + s), b01 = __shfl_sync(0xffffffffu, b[1], 8 * t + s);
    const uint32_t b10 = __shfl_sync(0xffffffffu, b[0], 8 * t + 4 + s);
    const uint32_t b11 = __shfl_sync(0xffffffffu, b[1], 8 * t + 4 + s);
    auto dot = [io](uint32_t x0, uint32_t x2, uint32_t y0, uint32_t y1) {
      return gafl_lo(io, x0) * gafl_lo(io, y0) + gafl_hi(io, x0) * gafl_hi(io, y0) +
             gafl_lo(io, x2) * gafl_lo(io, y1) + gafl_hi(io, x2) * gafl_hi(io, y1);
    };
    d[0] += dot(a0, a2, b00, b01);
    d[1] += dot(a0, a2, b10, b11);
    d[2] += dot(a1, a3, b00, b01);
    d[3] += dot(a1, a3, b10, b11);
  }
#endif
}

// 16-bit Q, K, V on the tensor cores, FlashAttention-2's arrangement: 64 query rows a block, 16 per warp, Q's
// fragments in registers; key tiles of 64 rows staged in shared memory as bits (K key-major, V transposed so
// that both are B operands read 32 bits at a time); S = Q K^T and O += P V by mma.m16n8k16 with fp32
// accumulators; the online softmax in fp32 on the accumulators (a row's 64 scores over its 4 lanes, maxima and
// sums by quad shuffles), P rounded to the operands' type for P V. Depths d and dv multiples of 16 up to 128
// (so rows of 8 values, 16 bytes, tile them).
// Rows past lq compute on zeros and are not written; a row whose keys are all -inf comes out NaN, as the
// unfused softmax gives.
#define GAFL_TC_KEYS 64
struct __align__(16) GaflVec8 { uint32_t w[4]; };  // eight 16-bit values
template <int IO>  // 1 bfloat16, 2 float16
__device__ __forceinline__ void gafl_attention_mma(const GafAttnArgs& a) {
  extern __shared__ float gafl_sm[];
  const int d = int(a.d), dv = int(a.dv), ldk = d + 8, ldv = GAFL_TC_KEYS + 8;  // +8: rows start on other banks
  uint16_t* ks = (uint16_t*)gafl_sm;      // [GAFL_TC_KEYS][ldk]
  uint16_t* vt = ks + GAFL_TC_KEYS * ldk;  // [dv][ldv]
  const uint16_t* q16 = (const uint16_t*)a.q;
  const uint16_t* k16 = (const uint16_t*)a.k;
  const uint16_t* v16 = (const uint16_t*)a.v;
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31, g = lane >> 2, t = lane & 3;
  long long rem = blockIdx.y, qo = 0, ko = 0, vo = 0, mo = 0, oo = 0;
  for (int i = a.nb - 1; i >= 0; --i) {
    const long long idx = rem % a.bdims[i];
    rem /= a.bdims[i];
    qo += idx * a.qb[i]; ko += idx * a.kb[i]; vo += idx * a.vb[i]; mo += idx * a.mb[i]; oo += idx * a.ob[i];
  }
  const long long r0 = (long long)blockIdx.x * 64 + warp * 16 + g, r1 = r0 + 8;
  const float inf = GAFL_INF;
  // Rows of K and V read 16 bytes at a time where a row's depth is contiguous and every row starts 16-byte
  // aligned (the same for the whole block).
  const bool kvec = a.kc == 1 && ((ko | a.kr) & 7) == 0 && ((unsigned long long)a.k & 15) == 0;
  const bool vvec = a.vc == 1 && ((vo | a.vr) & 7) == 0 && ((unsigned long long)a.v & 15) == 0;
  auto qpair = [&](long long r, int c) -> uint32_t {
    if (r >= a.lq) return 0u;
    const long long base = qo + r * a.qr;
    return uint32_t(q16[base + c * a.qc]) | (uint32_t(q16[base + (c + 1) * a.qc]) << 16);
  };
  uint32_t qf[8][4];
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
    if (kk * 16 >= d) break;
    const int c = kk * 16 + 2 * t;
    qf[kk][0] = qpair(r0, c);
    qf[kk][1] = qpair(r1, c);
    qf[kk][2] = qpair(r0, c + 8);
    qf[kk][3] = qpair(r1, c + 8);
  }
  float o[16][4];
#pragma unroll
  for (int ob = 0; ob < 16; ++ob) o[ob][0] = o[ob][1] = o[ob][2] = o[ob][3] = 0.0f;
  float m0 = -inf, m1 = -inf, l0 = 0.0f, l1 = 0.0f;
  for (long long k0 = 0; k0 < a.lk; k0 += GAFL_TC_KEYS) {
    const int nk = a.lk - k0 < GAFL_TC_KEYS ? int(a.lk - k0) : GAFL_TC_KEYS;
    __syncthreads();
    if (kvec) {
      for (int e = int(threadIdx.x); e < GAFL_TC_KEYS * (d >> 3); e += int(blockDim.x)) {
        const int j = e / (d >> 3), c = (e - j * (d >> 3)) << 3;
        GaflVec8 w = {{0u, 0u, 0u, 0u}};
        if (j < nk) w = *(const GaflVec8*)(k16 + ko + (k0 + j) * a.kr + c);
        *(GaflVec8*)(ks + j * ldk + c) = w;
      }
    } else {
      for (int e = int(threadIdx.x); e < GAFL_TC_KEYS * d; e += int(blockDim.x)) {
        const int j = e / d, c = e - j * d;
        ks[j * ldk + c] = j < nk ? k16[ko + (k0 + j) * a.kr + c * a.kc] : uint16_t(0);
      }
    }
    if (vvec) {
      for (int e = int(threadIdx.x); e < GAFL_TC_KEYS * (dv >> 3); e += int(blockDim.x)) {
        const int j = e / (dv >> 3), c = (e - j * (dv >> 3)) << 3;
        GaflVec8 w = {{0u, 0u, 0u, 0u}};
        if (j < nk) w = *(const GaflVec8*)(v16 + vo + (k0 + j) * a.vr + c);
        for (int i = 0; i < 8; ++i) vt[(c + i) * ldv + j] = uint16_t(w.w[i >> 1] >> ((i & 1) * 16));
      }
    } else {
      for (int e = int(threadIdx.x); e < GAFL_TC_KEYS * dv; e += int(blockDim.x)) {
        const int j = e / dv, c = e - j * dv;
        vt[c * ldv + j] = j < nk ? v16[vo + (k0 + j) * a.vr + c * a.vc] : uint16_t(0);
      }
    }
    __syncthreads();
    float s[8][4];
#pragma unroll
    for (int nb = 0; nb < 8; ++nb) {
      s[nb][0] = s[nb][1] = s[nb][2] = s[nb][3] = 0.0f;
      const uint16_t* kr = ks + (nb * 8 + g) * ldk + 2 * t;
#pragma unroll
      for (int kk = 0; kk < 8; ++kk) {
        if (kk * 16 >= d) break;
        const uint32_t b[2] = {*(const uint32_t*)(kr + kk * 16), *(const uint32_t*)(kr + kk * 16 + 8)};
        gafl_mma(IO, s[nb], qf[kk], b);
      }
    }
    // Scale, mask, keys past lk at -inf; the rows' maxima over their quads.
    float mx0 = -inf, mx1 = -inf;
#pragma unroll
    for (int nb = 0; nb < 8; ++nb)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const long long key = k0 + nb * 8 + 2 * t + h;
        float x0 = s[nb][h] * a.scale, x1 = s[nb][2 + h] * a.scale;
        if (key >= a.lk) {
          x0 = x1 = -inf;
        } else if (a.mask) {
          if (r0 < a.lq) x0 += a.mask[mo + r0 * a.mr + key * a.mc];
          if (r1 < a.lq) x1 += a.mask[mo + r1 * a.mr + key * a.mc];
        }
        s[nb][h] = x0, s[nb][2 + h] = x1;
        mx0 = fmaxf(mx0, x0), mx1 = fmaxf(mx1, x1);
      }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
    const float c0 = mn0 == -inf ? 1.0f : expf(m0 - mn0), c1 = mn1 == -inf ? 1.0f : expf(m1 - mn1);
    m0 = mn0, m1 = mn1;
    // P = e^(S - m) as P V's A operand: key block nb is k-step nb / 2, its lower or upper 8 columns.
    uint32_t pf[4][4];
    float ps0 = 0.0f, ps1 = 0.0f;
#pragma unroll
    for (int nb = 0; nb < 8; ++nb) {
      const float p0 = mn0 == -inf ? 0.0f : expf(s[nb][0] - mn0), p1 = mn0 == -inf ? 0.0f : expf(s[nb][1] - mn0);
      const float p2 = mn1 == -inf ? 0.0f : expf(s[nb][2] - mn1), p3 = mn1 == -inf ? 0.0f : expf(s[nb][3] - mn1);
      ps0 += p0 + p1, ps1 += p2 + p3;
      pf[nb >> 1][(nb & 1) * 2] = gafl_pack(IO, p0, p1);
      pf[nb >> 1][(nb & 1) * 2 + 1] = gafl_pack(IO, p2, p3);
    }
    l0 = l0 * c0 + ps0, l1 = l1 * c1 + ps1;  // this lane's share of the row sums
#pragma unroll
    for (int ob = 0; ob < 16; ++ob) {
      if (ob * 8 >= dv) break;
      o[ob][0] *= c0, o[ob][1] *= c0, o[ob][2] *= c1, o[ob][3] *= c1;
      const uint16_t* vr = vt + (ob * 8 + g) * ldv + 2 * t;
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const uint32_t b[2] = {*(const uint32_t*)(vr + kk * 16), *(const uint32_t*)(vr + kk * 16 + 8)};
        gafl_mma(IO, o[ob], pf[kk], b);
      }
    }
  }
  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
  const float nan = __int_as_float(0x7fffffff);
  const float i0 = l0 > 0.0f ? 1.0f / l0 : nan, i1 = l1 > 0.0f ? 1.0f / l1 : nan;
#pragma unroll
  for (int ob = 0; ob < 16; ++ob) {
    if (ob * 8 >= dv) break;
    const long long c = ob * 8 + 2 * t;
    if (r0 < a.lq) {
      gafl_st(IO, a.o, oo + r0 * a.orow + c * a.ocol, o[ob][0] * i0);
      gafl_st(IO, a.o, oo + r0 * a.orow + (c + 1) * a.ocol, o[ob][1] * i0);
    }
    if (r1 < a.lq) {
      gafl_st(IO, a.o, oo + r1 * a.orow + c * a.ocol, o[ob][2] * i1);
      gafl_st(IO, a.o, oo + r1 * a.orow + (c + 1) * a.ocol, o[ob][3] * i1);
    }
  }
}
extern "C" __global__ void __launch_bounds__(128) gaf_attention_mma(const GafAttnArgs a) {
  if (a.io == 1)
    gafl_attention_mma<1>(a);
  else
    gafl_attention_mma<2>(a);
}


struct GafPoolArgs {
  const void* x; void* y;
  long long nc, h, w, oh, ow;
  int kh, kw, sh, sw, ph, pw, dh, dw;
  int ph_end, pw_end;  // bottom and right pads
  int mode;  // 0 max, 1 average counting padding, 2 average over the window's in-image elements
  int io;  // x and y: 0 fp32, 1 bfloat16, 2 float16 (sums in fp32, one rounding)
};

extern "C" __global__ void __launch_bounds__(256) gaf_pool2d(const GafPoolArgs a) {
  const long long n = a.nc * a.oh * a.ow;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const long long ox = i % a.ow, oy = (i / a.ow) % a.oh, plane = i / (a.ow * a.oh);
    const long long xp = plane * a.h * a.w;
    float acc = a.mode == 0 ? -GAFL_INF : 0.0f;
    int count = 0, padded = 0;  // window elements inside the image, inside the padded image
    bool nan = false;
    for (int ky = 0; ky < a.kh; ++ky) {
      const long long iy = oy * a.sh - a.ph + (long long)ky * a.dh;
      const bool row_padded = iy < a.h + a.ph_end;
      for (int kx = 0; kx < a.kw; ++kx) {
        const long long ix = ox * a.sw - a.pw + (long long)kx * a.dw;
        // A ceil_mode window's last positions can lie past the padding too: those count for no average.
        padded += row_padded && ix < a.w + a.pw_end;
        if (iy < 0 || iy >= a.h || ix < 0 || ix >= a.w) continue;
        const float v = gafl_ld(a.io, a.x, xp + iy * a.w + ix);
        if (a.mode == 0) { nan |= v != v; acc = v > acc ? v : acc; }
        else acc += v;
        ++count;
      }
    }
    const float r = a.mode == 0 ? (nan ? __int_as_float(0x7fffffff) : acc)
                    : a.mode == 1 ? (padded ? acc / float(padded) : 0.0f)
                                  : (count ? acc / float(count) : 0.0f);
    gafl_st(a.io, a.y, i, r);
  }
}

struct GafGlobalPoolArgs { const void* x; void* y; long long rows, len; int max; int io; };

// One warp per (n, c) plane.
extern "C" __global__ void __launch_bounds__(256) gaf_global_pool(const GafGlobalPoolArgs a) {
  const long long warps = (long long)gridDim.x * (blockDim.x >> 5);
  const int lane = int(threadIdx.x) & 31;
  for (long long r = blockIdx.x * (long long)(blockDim.x >> 5) + (threadIdx.x >> 5); r < a.rows; r += warps) {
    float acc = a.max ? -GAFL_INF : 0.0f;
    for (long long j = lane; j < a.len; j += 32) {
      const float v = gafl_ld(a.io, a.x, r * a.len + j);
      acc = a.max ? fmaxf(acc, v) : acc + v;
    }
    acc = a.max ? gafl_warp_max(acc) : gafl_warp_sum(acc);
    if (lane == 0) gafl_st(a.io, a.y, r, a.max ? acc : acc / float(a.len));
  }
}

struct GafConvEpilogueArgs { void* y; const void* bias; const void* z; long long n, plane, channels; int relu, half; };

// y = [relu](y + bias[c] + z) in place over a bfloat16 (half = 0) or float16 (half = 1) NCHW tensor, summed in
// fp32 and rounded once; ReLU keeps NaN as the runtime's does.
extern "C" __global__ void __launch_bounds__(256) gaf_conv_epilogue16(const GafConvEpilogueArgs a) {
  uint16_t* y = (uint16_t*)a.y;
  const uint16_t* b = (const uint16_t*)a.bias;
  const uint16_t* z = (const uint16_t*)a.z;
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < a.n; i += step) {
    float v = a.half ? gaf_load_half(y[i]) : gaf_load_bf16(y[i]);
    if (b) {
      const uint16_t bc = b[(i / a.plane) % a.channels];
      v += a.half ? gaf_load_half(bc) : gaf_load_bf16(bc);
    }
    if (z) v += a.half ? gaf_load_half(z[i]) : gaf_load_bf16(z[i]);
    if (a.relu) v = v < 0.0f ? 0.0f : v;
    y[i] = a.half ? gaf_store_half(v) : gaf_store_bf16(v);
  }
}

struct GafGatherArgs {
  const void* data; const long long* idx; void* y; long long nidx, rows, outer, len; int io;
};

// Gather along axis `a` of data viewed as [outer, rows, len]: y[o, i, :] = data[o, idx[i], :] (negative indices
// count from the end; out-of-range ones give 0 rather than reading outside the tensor).
extern "C" __global__ void __launch_bounds__(256) gaf_gather(const GafGatherArgs a) {
  const long long n = a.outer * a.nidx * a.len;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const long long j = i % a.len, k = (i / a.len) % a.nidx, o = i / (a.len * a.nidx);
    long long r = a.idx[k];
    r = r < 0 ? r + a.rows : r;
    gafl_st(a.io, a.y, i, r >= 0 && r < a.rows ? gafl_ld(a.io, a.data, (o * a.rows + r) * a.len + j) : 0.0f);
  }
}
)CUDA";
}

}  // namespace gaf::cuda
