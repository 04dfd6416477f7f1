// gaf.Attention: scaled dot-product attention in one kernel, what the attention-fusion pass makes of
//   MatMul(Q, Kᵀ) -> scale -> [Add mask] -> Softmax(last axis) -> MatMul(·, V)   (with the head transposes around it)
//
//   Attention(Xq, Xk, Xv, [mask]; scale, q_perm, k_perm, v_perm, out_perm)
//     Q = Transpose(Xq, q_perm) : [B..., Lq, D]     K = Transpose(Xk, k_perm) : [B..., Lk, D]
//     V = Transpose(Xv, v_perm) : [B..., Lk, Dv]    mask (float, added to the scores) broadcasts to [B..., Lq, Lk]
//     O = Softmax(scale * Q Kᵀ + mask) V : [B..., Lq, Dv];  output = Transpose(O, out_perm)
//   Batch dims broadcast like MatMul's. A missing perm is the identity. The perms are never executed: each operand
//   is read in place through its permuted strides, so the head reshapes/transposes around attention cost nothing.
//
// Flash-style: each task owns a block of kBlockQ query rows of one batch index and walks the keys in tiles of
// kBlockK, keeping per row the running maximum m, the running sum l of exp(s - m) and the unnormalised output
// O (fp32), rescaled by exp(m_old - m_new) when the maximum grows (online softmax; m and the scores are kept in
// log2 units). The [Lq, Lk] score matrix is never materialised, only one [kBlockQ, kBlockK] tile per thread.
// Tasks are claimed by the OpenMP threads as they finish (parallel_tasks); each runs single-threaded. With
// AVX-512 or AVX2 (ops/simd_vec.h) the two products per tile are simd::gemm_bcast's register tiles: Kᵀ is packed
// once per key tile, Q, the probabilities and V are read in place, and the scores' epilogue adds the mask and
// keeps each row's maximum as it stores them, so the softmax reads the tile once; with a single key tile (up to
// kBlockK keys) the second product's epilogue writes the normalised output rows. Elsewhere (or with V stored
// transposed) they go through oneDNN's sgemm.
// A row whose every score is -inf has no softmax (ONNX Softmax gives NaN there); it comes out NaN too. Keys that
// the mask removes from every row of a block (padding, a causal block's future) are skipped (attention_live_keys).
#include <fmt/ranges.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "runtime/kernels/fast/attention.h"
#include "runtime/kernels/common.h"
#include "runtime/kernels/dnnl/dnnl_util.h"
#include "runtime/kernels/families.h"
#include "runtime/kernels/onnx/reduce_util.h"
#include "ops/simd_math.h"
#include "runtime/kernels/fast/simd_gemm.h"

namespace gaf::runtime {

// Rows are scanned last to first, and a row's end only down to the largest end found so far: a causal block's
// last row, scanned first, bounds the others, so the block costs one scan of its dead keys, not one per row.
// Contiguous rows are compared a vector of keys at a time.
std::pair<int64_t, int64_t> attention_live_keys(const float* mb, int64_t mrs, int64_t mcs, int64_t rows, int64_t lk) {
  constexpr float kDead = -1e30f;
  if (!mb) return {0, lk};
  auto live = [&](const float* r, int64_t j) { return !(r[j * mcs] <= kDead); };  // NaN is live
  int64_t lo = lk, hi = 0;
  for (int64_t i = (mrs == 0 ? 1 : rows) - 1; i >= 0; --i) {
    const float* r = mb + i * mrs;
    int64_t first = 0;
#if defined(GAF_SIMD)
    if (mcs == 1) {
      const simd::vf dead = simd::set1(kDead);
      for (; first + simd::kW <= lk; first += simd::kW)
        if (unsigned k = simd::bits(simd::nle(simd::loadu(r + first), dead))) {
          first += __builtin_ctz(k);
          break;
        }
    }
#endif
    while (first < lk && !live(r, first)) ++first;
    if (first == lk) return {0, lk};
    // The row's last live key is at or after `first`; below `hi` it no longer matters.
    const int64_t stop = std::max(hi, first + 1);
    int64_t last = lk;
#if defined(GAF_SIMD)
    if (mcs == 1) {
      const simd::vf dead = simd::set1(kDead);
      for (; last - simd::kW >= stop; last -= simd::kW)
        if (unsigned k = simd::bits(simd::nle(simd::loadu(r + last - simd::kW), dead))) {
          last = last - simd::kW + (32 - __builtin_clz(k));
          break;
        }
    }
#endif
    while (last > stop && !live(r, last - 1)) --last;
    lo = std::min(lo, first);
    hi = std::max(hi, last);
  }
  return {lo, hi};
}

namespace {

// Measured with sgemm on the 12-head, d 64, L 512 bench case (`run --opt-level 3`, 2 threads): larger tiles
// amortise the sgemm calls (64x512 slowest, 256x512 and 512x512 the same); the [256, 512] fp32 score tile is
// 512 KiB, within a core's L2 (1 MiB). With the register tiles, 128x512 measured the same as 256x512.
constexpr int64_t kBlockQ = 256;
constexpr int64_t kBlockK = 512;
constexpr int64_t kSubQ = 64;  // rows of a sub-block with keys of its own (causal masks)
constexpr float kLog2e = 1.44269504088896341f, kLn2 = 0.693147180559945309f;

// A score (log2 units) plus its mask value m (natural units). A finite m so large that m log2(e) overflows
// (torch.finfo(float32).min, Hugging Face's fill) stays the lowest finite float: a row masked entirely by it is
// uniform, as softmax(s + m) is, where -inf would make it NaN (what an -inf mask rightly gives).
inline float masked_score(float m, float s) {
  const float x = std::fma(m, kLog2e, s);
  return x < -std::numeric_limits<float>::max() && m > -std::numeric_limits<float>::infinity()
             ? -std::numeric_limits<float>::max()
             : x;
}

#if defined(GAF_SIMD)
// The scores' epilogue in the vector path: masked_score on kW lanes as the product is stored, and each row's
// running maximum by lane (a NaN score leaves it as it was, as std::max does in the portable path). kClamp: the
// mask has finite values so low that m log2(e) overflows (finfo.min), which masked_score keeps finite.
template <bool kClamp>
struct ScoreEpilogue {
  const float* mask;  // row i of the mask at mask + i * mrs, contiguous; null: no mask
  int64_t mrs;
  float* vmax;  // [rows][kW]
  template <int NC>
  void operator()(int64_t i, int64_t j, const simd::vf (&x)[NC], simd::lanes_t tail, float* c) const {
    using namespace simd;
    vf y[NC];
#pragma GCC unroll 8
    for (int v = 0; v < NC; ++v) {
      y[v] = x[v];
      if (mask) {
        const vf m = load_lanes<NC>(mask + i * mrs + j, v, tail);
        y[v] = fmadd(m, set1(kLog2e), y[v]);
        if constexpr (kClamp) {
          const vf lowest = set1(-std::numeric_limits<float>::max());
          const lanes_t clamp = land(lt(y[v], lowest), gt(m, set1(-std::numeric_limits<float>::infinity())));
          y[v] = select(clamp, lowest, y[v]);
        }
      }
      store_lanes<NC>(c, v, y[v], tail);
    }
    // The row's maximum: the last vector's invalid lanes are left out, a NaN lane too (max returns the second).
    vf top = loadu(vmax + i * kW);
#pragma GCC unroll 8
    for (int v = 0; v < NC; ++v) {
      const vf t = max(y[v], top);
      top = partial<NC>(v, tail) ? select(tail, t, top) : t;
    }
    storeu(vmax + i * kW, top);
  }
};

// The output epilogue of a single key tile: row i of P V times inv[i], 1 / its softmax sum.
struct ScaleRows {
  const float* inv;
  template <int NC>
  void operator()(int64_t i, int64_t, const simd::vf (&x)[NC], simd::lanes_t tail, float* c) const {
    const simd::vf f = simd::set1(inv[i]);
#pragma GCC unroll 8
    for (int v = 0; v < NC; ++v) simd::store_lanes<NC>(c, v, simd::mul(x[v], f), tail);
  }
};
#endif

// Whether a block of mask rows (as attention_live_keys reads them) holds finite values below -max / log2(e),
// where m log2(e) overflows (finfo.min fills).
bool mask_needs_clamp(const float* mb, int64_t mrs, int64_t mcs, int64_t rows, int64_t lk) {
  const float limit = -std::numeric_limits<float>::max() / kLog2e;
  bool any = false;
  for (int64_t i = 0; i < (mrs == 0 ? 1 : rows) && !any; ++i) {
    const float* r = mb + i * mrs;
#pragma omp simd reduction(|| : any)
    for (int64_t j = 0; j < lk; ++j) {
      const float x = r[j * mcs];
      any = any || (x < limit && x > -std::numeric_limits<float>::infinity());
    }
  }
  return any;
}

// 1 / a row's softmax sum; NaN for a row that attended to nothing (all scores -inf), as ONNX Softmax gives.
inline float softmax_norm(float sum) { return sum > 0 ? 1.0f / sum : std::numeric_limits<float>::quiet_NaN(); }

// A 2-D strided view of fp32 data.
struct View {
  const float* p;
  int64_t rows, cols, rs, cs;  // strides in elements
  View t() const { return {p, cols, rows, cs, rs}; }
};

// C[M,N] (contiguous, ldc) = alpha * A[M,K] B[K,N] + beta * C. A view with neither stride 1 (or a leading
// dimension sgemm does not accept) is packed first.
void gemm(View a, View b, float alpha, float beta, float* c, int64_t ldc, std::vector<float>& pack_a,
          std::vector<float>& pack_b) {
  auto prepare = [](View v, std::vector<float>& pack, char& trans, int64_t& ld) -> const float* {
    if (v.cs == 1 && v.rs >= std::max<int64_t>(1, v.cols)) {
      trans = 'N', ld = v.rs;
      return v.p;
    }
    if (v.rs == 1 && v.cs >= std::max<int64_t>(1, v.rows)) {
      trans = 'T', ld = v.cs;
      return v.p;
    }
    pack.resize(size_t(v.rows * v.cols));
    for (int64_t i = 0; i < v.rows; ++i)
      for (int64_t j = 0; j < v.cols; ++j) pack[size_t(i * v.cols + j)] = v.p[i * v.rs + j * v.cs];
    trans = 'N', ld = std::max<int64_t>(1, v.cols);
    return pack.data();
  };
  char ta, tb;
  int64_t lda, ldb;
  const float* pa = prepare(a, pack_a, ta, lda);
  const float* pb = prepare(b, pack_b, tb, ldb);
  dnnl_status_t st = dnnl_sgemm(ta, tb, a.rows, b.cols, a.cols, alpha, pa, lda, pb, ldb, beta, c, ldc);
  GAF_ASSERT(st == dnnl_success, "dnnl_sgemm failed");
}

// row[j] = 2^(row[j] - m) for j < n (row[j] - m <= 0 or NaN); returns the sum. The softmax half of each tile,
// whose scores are in log2 units (the kernel folds log2(e) into the score scale and the mask, which saves a
// multiply per score): in the vector path by simd::exp2v, flushed to 0 below 2^-126 (-inf -> 0, NaN propagates);
// the portable path by rn::exp_nonpos. Subnormal probabilities would add nothing to the row's sum (at least 1)
// but cost a microcode assist per multiply in the product with V on Intel cores: Swin's -100 window masks made
// its attention ten times slower. Error: exp2v's 1.7e-7 relative plus the rounding of t = x - m (6e-8 |t|);
// an fp32 score itself carries more (its GEMM rounding, about 1e-5 absolute at scores near 10).
float exp_shift_sum(float* row, int64_t n, float m) {
#if defined(GAF_SIMD)
  using namespace simd;
  const vf vm = set1(m), lo = set1(-126.0f);
  auto ex = [&](vf x) {  // 0 below 2^-126, not a subnormal; a NaN operand stays NaN through the max and select
    const vf t = sub(x, vm);
    return select(lt(t, lo), zero(), exp2v(max(lo, t)));
  };
  vf s0 = zero(), s1 = zero();
  int64_t j = 0;
  for (; j + 2 * kW <= n; j += 2 * kW) {
    const vf e0 = ex(loadu(row + j)), e1 = ex(loadu(row + j + kW));
    storeu(row + j, e0);
    storeu(row + j + kW, e1);
    s0 = add(s0, e0);
    s1 = add(s1, e1);
  }
  for (; j < n; j += kW) {
    const lanes_t k = first(n - j);
    const vf e = select(k, ex(loadu(row + j, k)), zero());
    storeu(row + j, e, k);
    s0 = add(s0, e);
  }
  return reduce_add(add(s0, s1));
#else
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) {
    float e = rn::exp_nonpos((row[j] - m) * kLn2);
    row[j] = e;
    sum += e;
  }
  return sum;
#endif
}

// A task's scratch from the session's pool: reused from run to run, and 64-byte aligned. std::vectors of these
// sizes (512 KiB of scores, 128 KiB of Kᵀ) were fresh mmaps at glibc's threshold, 16 bytes into a page: a page
// fault per 4 KiB each call, and every vector load of the packed Kᵀ and store of the scores split across two cache
// lines. The bench's attention block (12 heads, L 512), fused: 3.04-3.27 -> 2.90-3.02 ms in five paired runs.
struct PoolBuffer {
  PoolBuffer(KernelContext& ctx, int64_t n) : t(DType::Float, {n}, ctx.allocator()) {}
  float* data() { return t.data<float>(); }
  Tensor t;
};

struct Operand {
  const float* data = nullptr;
  std::vector<int64_t> dims, strides;  // logical (permuted) dims and their element strides
};

Operand permuted(const KernelContext& ctx, const Tensor& t, int i, const char* perm_attr) {
  const Node& n = ctx.node();
  GAF_CHECK(t.dtype() == DType::Float, "{}: input {} is {}; gaf.Attention takes float", n.describe(), i,
            dtype_name(t.dtype()));
  GAF_CHECK(t.rank() >= 2, "{}: input {} has rank {}; attention operands have rank 2 or more", n.describe(), i,
            t.rank());
  std::vector<int64_t> perm = n.attr_ints(perm_attr);
  if (perm.empty()) {
    perm.resize(size_t(t.rank()));
    std::iota(perm.begin(), perm.end(), int64_t(0));
  }
  GAF_CHECK(int(perm.size()) == t.rank(), "{}: {} has {} entries for an input of rank {}", n.describe(), perm_attr,
            perm.size(), t.rank());
  const std::vector<int64_t> cs = t.strides();  // a KV cache's keys are a view with room for more positions
  Operand o{t.data<float>(), {}, {}};
  for (int64_t a : perm) {
    GAF_CHECK(a >= 0 && a < t.rank(), "{}: {} is not a permutation", n.describe(), perm_attr);
    o.dims.push_back(t.dim(int(a)));
    o.strides.push_back(cs[size_t(a)]);
  }
  return o;
}

// Element offset of batch index `b` (row-major over `batch`) in an operand whose leading dims (all but the last
// two, right-aligned to `batch`) broadcast to `batch`.
int64_t batch_offset(int64_t b, const std::vector<int64_t>& batch, const std::vector<int64_t>& dims,
                     const std::vector<int64_t>& strides) {
  int64_t off = 0;
  int nb = int(dims.size()) - 2;
  for (int i = int(batch.size()) - 1, k = nb - 1; i >= 0; --i, --k) {
    int64_t idx = b % batch[size_t(i)];
    b /= batch[size_t(i)];
    if (k >= 0 && dims[size_t(k)] != 1) off += idx * strides[size_t(k)];
  }
  return off;
}

void attention_fp32(KernelContext& ctx, const Tensor& tq, const Tensor& tk, const Tensor& tv);

// Q, K, V in fp32, or all three 16-bit (then widened, and the output rounded back to their type).
void attention(KernelContext& ctx) {
  const DType t = ctx.in(0).dtype();
  if (t != DType::BFloat16 && t != DType::Float16) return attention_fp32(ctx, ctx.in(0), ctx.in(1), ctx.in(2));
  const Node& n = ctx.node();
  for (int i = 1; i < 3; ++i)
    GAF_CHECK(ctx.in(i).dtype() == t, "{}: input {} is {} where Q is {}", n.describe(), i,
              dtype_name(ctx.in(i).dtype()), dtype_name(t));
  // The CUDA backend's 16-bit storage, run here by verify and the tests: operands widened to fp32 (the math's
  // type), the output rounded back.
  auto widened = [&](int i) {
    return dnnl_detail::to_float(ctx.in(i).contiguous(ctx.allocator()), ctx.allocator());
  };
  attention_fp32(ctx, widened(0), widened(1), widened(2));
  const Tensor& y = ctx.output(0);
  Tensor narrow(t, y.dims(), ctx.allocator());
  dnnl_detail::store_from_float(y.data<float>(), narrow);
  ctx.set_output(0, std::move(narrow));
}

void attention_fp32(KernelContext& ctx, const Tensor& tq, const Tensor& tk, const Tensor& tv) {
  const Node& n = ctx.node();
  Operand q = permuted(ctx, tq, 0, "q_perm"), k = permuted(ctx, tk, 1, "k_perm"), v = permuted(ctx, tv, 2, "v_perm");
  const int64_t lq = q.dims.end()[-2], d = q.dims.back(), lk = k.dims.end()[-2], dv = v.dims.back();
  GAF_CHECK(k.dims.back() == d, "{}: Q has depth {} but K has {}", n.describe(), d, k.dims.back());
  GAF_CHECK(v.dims.end()[-2] == lk, "{}: K has {} keys but V has {}", n.describe(), lk, v.dims.end()[-2]);
  const float scale = n.attr_float("scale", float(1.0 / std::sqrt(double(std::max<int64_t>(d, 1)))));

  // Batch shape: MatMul broadcasting of the leading dims of Q, K, V (and the mask's).
  auto lead = [](const std::vector<int64_t>& dims) { return std::vector<int64_t>(dims.begin(), dims.end() - 2); };
  std::vector<std::vector<int64_t>> leads = {lead(q.dims), lead(k.dims), lead(v.dims)};
  const Tensor* mask = ctx.input(3);
  Operand m;
  if (mask) {
    GAF_CHECK(mask->dtype() == DType::Float, "{}: the mask is {}; it must be float (added to the scores)",
              n.describe(), dtype_name(mask->dtype()));
    std::vector<int64_t> md = mask->dims();
    while (md.size() < 2) md.insert(md.begin(), 1);
    GAF_CHECK((md.end()[-2] == 1 || md.end()[-2] == lq) && (md.back() == 1 || md.back() == lk),
              "{}: mask shape {} does not broadcast to the [{}, {}] scores", n.describe(), fmt::join(mask->dims(), "x"),
              lq, lk);
    m.data = mask->data<float>();
    m.strides = contiguous_strides(md);
    for (size_t i = 0; i < md.size(); ++i)
      if (md[i] == 1) m.strides[i] = 0;
    m.dims = md;
    leads.push_back(lead(md));
  }
  std::vector<int64_t> batch = broadcast_shape(std::span<const std::vector<int64_t>>(leads), n);
  const int64_t nbatch = rn::dims_product(batch, 0, int(batch.size()));

  // Output: logical O [batch..., lq, dv], stored as Transpose(O, out_perm).
  std::vector<int64_t> odims = batch;
  odims.push_back(lq);
  odims.push_back(dv);
  const int orank = int(odims.size());
  std::vector<int64_t> out_perm = n.attr_ints("out_perm");
  if (out_perm.empty()) {
    out_perm.resize(size_t(orank));
    std::iota(out_perm.begin(), out_perm.end(), int64_t(0));
  }
  GAF_CHECK(int(out_perm.size()) == orank, "{}: out_perm has {} entries for an output of rank {}", n.describe(),
            out_perm.size(), orank);
  std::vector<int64_t> ydims;
  for (int64_t a : out_perm) {
    GAF_CHECK(a >= 0 && a < orank, "{}: out_perm is not a permutation", n.describe());
    ydims.push_back(odims[size_t(a)]);
  }
  Tensor& y = ctx.allocate_output(0, DType::Float, ydims);
  auto ycs = contiguous_strides(ydims);
  std::vector<int64_t> ostr(static_cast<size_t>(orank));
  for (int j = 0; j < orank; ++j) ostr[size_t(out_perm[size_t(j)])] = ycs[size_t(j)];
  float* yp = y.data<float>();
  if (y.numel() == 0) return;
  const int64_t ors = ostr[size_t(orank - 2)], ocs = ostr[size_t(orank - 1)];

  const int64_t qblocks = (lq + kBlockQ - 1) / kBlockQ;
  parallel_tasks(nbatch * qblocks, [&](auto claim) {
    PoolBuffer s(ctx, kBlockQ * kBlockK), o(ctx, kBlockQ * dv);
    std::vector<float> rmax(kBlockQ), rsum(kBlockQ);
    std::vector<float> pack_a, pack_b;
#if defined(GAF_SIMD)
    PoolBuffer kt(ctx, kBlockK * d);  // one key tile of Kᵀ in panels of simd::kPanel keys
    std::vector<float> vmax(size_t(kBlockQ * simd::kW));  // per row, the largest scores by lane
#endif
    std::vector<float> inv(kBlockQ);  // per row, 1 / its softmax sum (vector path, one key tile)
    struct Rows {
      int64_t r0, r1, lo, hi;  // rows [r0, r1) of the block attend to keys [lo, hi) at most
    };
    struct Plan {
      int64_t rows = 0, klo = 0, khi = 0;  // the block's length and the union of its groups' keys
      std::vector<Rows> groups;
      bool clamp = false;  // the block's mask holds finfo.min-like values (the vector epilogue clamps)
    };
    std::unordered_map<const float*, Plan> memo;  // by mask block
    Plan single;
    for (int64_t task; (task = claim()) >= 0;) {
      const int64_t b = task / qblocks, q0 = task % qblocks * kBlockQ, bq = std::min(kBlockQ, lq - q0);
      const int64_t rq = q.strides.end()[-2], rk = k.strides.end()[-2], rv = v.strides.end()[-2];
      View qv{q.data + batch_offset(b, batch, q.dims, q.strides) + q0 * rq, bq, d, rq, q.strides.back()};
      const float* kb = k.data + batch_offset(b, batch, k.dims, k.strides);
      const float* vb = v.data + batch_offset(b, batch, v.dims, v.strides);
      const float* mb = mask ? m.data + batch_offset(b, batch, m.dims, m.strides) + q0 * m.strides.end()[-2] : nullptr;
      const int64_t mrs = mask ? m.strides.end()[-2] : 0, mcs = mask ? m.strides.back() : 0;
      std::fill(rmax.begin(), rmax.end(), -std::numeric_limits<float>::infinity());
      std::fill(rsum.begin(), rsum.end(), 0.0f);
      // A mask that differs between rows (causal) leaves each sub-block of kSubQ rows its own live keys, whose
      // union is the block's: the block runs in sub-blocks when that skips at least a quarter of its scores
      // (smaller products cost ~8%). Heads sharing a mask block share its scan (a thread's memo, by address).
      const Plan* found = nullptr;
      if (mb && mrs != 0)
        if (auto it = memo.find(mb); it != memo.end() && it->second.rows == bq) found = &it->second;
      if (!found) {
        std::vector<Rows> groups;
        int64_t klo = lk, khi = 0, sub_keys = 0;
        if (mb && mrs != 0 && bq > kSubQ) {
          for (int64_t r0 = 0; r0 < bq; r0 += kSubQ) {
            const int64_t nr = std::min(kSubQ, bq - r0);
            const auto [lo, hi] = attention_live_keys(mb + r0 * mrs, mrs, mcs, nr, lk);
            groups.push_back({r0, r0 + nr, lo, hi});
            sub_keys += nr * (hi - lo);
            klo = std::min(klo, lo);
            khi = std::max(khi, hi);
          }
        } else {
          std::tie(klo, khi) = attention_live_keys(mb, mrs, mcs, bq, lk);
        }
        if (groups.empty() || 4 * sub_keys > 3 * bq * (khi - klo)) groups.assign(1, Rows{0, bq, klo, khi});
        Plan plan{bq, klo, khi, std::move(groups), mb && mask_needs_clamp(mb, mrs, mcs, bq, lk)};
        found = mb && mrs != 0 ? &(memo[mb] = std::move(plan)) : &(single = std::move(plan));
      }
      const int64_t klo = found->klo, khi = found->khi;
      const std::vector<Rows>& groups = found->groups;
      [[maybe_unused]] const bool clamp = found->clamp;
      float* ob = yp + batch_offset(b, batch, odims, ostr) + q0 * ors;
      // One key tile (every sequence up to kBlockK keys): a row's softmax is complete before its product with V,
      // whose epilogue then writes the normalised output rows in place (no accumulator, no final pass). Every
      // row group meets that tile (a group's live keys are never empty when there are keys).
#if defined(GAF_SIMD)
      const bool direct = khi > klo && khi - klo <= kBlockK && v.strides.back() == 1 && ocs == 1;
#else
      const bool direct = false;
#endif
      if (!direct) std::fill_n(o.data(), bq * dv, 0.0f);
      // Key tiles in order; within a tile each row group's live keys: the online softmax per row.
      for (int64_t k0 = klo; k0 < khi; k0 += kBlockK) {
        const int64_t bk = std::min(kBlockK, khi - k0);
#if defined(GAF_SIMD)
        simd::pack_transposed_panels(kb + k0 * rk, bk, d, rk, k.strides.back(), kt.data());
#endif
        for (const Rows& g : groups) {
          int64_t a = std::max(g.lo, k0);
          const int64_t e = std::min(g.hi, k0 + bk);
          if (a >= e) continue;
          const int64_t nr = g.r1 - g.r0;
          // s = log2(e) scale Q Kᵀ (+ log2(e) mask) over keys [a, e); tmax(i): row i's largest score
          const float* mr = mb ? mb + g.r0 * mrs : nullptr;
#if defined(GAF_SIMD)
          // From a panel's first key: the keys before `a` are masked out anyway.
          a = k0 + (a - k0) / simd::kPanel * simd::kPanel;
          const int64_t ns = e - a;
          const bool fused_mask = !mr || mcs == 1;  // a contiguous mask row is added as the scores are stored
          auto scores = [&](const auto& epilogue) {
            simd::gemm_bcast(nr, ns, d, scale * kLog2e, qv.p + g.r0 * qv.rs, qv.rs, qv.cs, kt.data() + (a - k0) * d,
                             simd::kPanel, simd::kPanel * d, s.data(), ns, epilogue);
          };
          if (fused_mask) {
            std::fill(vmax.begin(), vmax.begin() + nr * simd::kW, -std::numeric_limits<float>::infinity());
            const float* ma = mr ? mr + a : nullptr;
            if (clamp)
              scores(ScoreEpilogue<true>{ma, mrs, vmax.data()});
            else
              scores(ScoreEpilogue<false>{ma, mrs, vmax.data()});
          } else {
            scores(simd::StoreC{});
          }
#else
          const int64_t ns = e - a;
          const bool fused_mask = false;
          View qr{qv.p + g.r0 * qv.rs, nr, d, qv.rs, qv.cs};
          gemm(qr, View{kb + a * rk, ns, d, rk, k.strides.back()}.t(), scale * kLog2e, 0.0f, s.data(), ns, pack_a,
               pack_b);
#endif
          for (int64_t i = 0; i < nr; ++i) {
            float* row = s.data() + i * ns;
            float tmax = -std::numeric_limits<float>::infinity();
            if (fused_mask) {
#if defined(GAF_SIMD)
              for (int l = 0; l < simd::kW; ++l) tmax = std::max(tmax, vmax[size_t(i * simd::kW + l)]);
#endif
            } else if (mr && mcs == 1) {  // a contiguous mask row (padding or causal masks)
              const float* mrow = mr + i * mrs + a;
#pragma omp simd reduction(max : tmax)
              for (int64_t j = 0; j < ns; ++j) {
                float x = masked_score(mrow[j], row[j]);
                row[j] = x;
                tmax = std::max(tmax, x);
              }
            } else {
              if (mr) {
                const float* mrow = mr + i * mrs + a * mcs;
                for (int64_t j = 0; j < ns; ++j) row[j] = masked_score(mrow[j * mcs], row[j]);
              }
#pragma omp simd reduction(max : tmax)
              for (int64_t j = 0; j < ns; ++j) tmax = std::max(tmax, row[j]);
            }
            const size_t ri = size_t(g.r0 + i);
            const float mnew = std::max(rmax[ri], tmax);
            if (mnew == -std::numeric_limits<float>::infinity()) {  // nothing attended yet
              std::fill(row, row + ns, 0.0f);
              continue;
            }
            const float sum = exp_shift_sum(row, ns, mnew);
            const float corr = rn::exp_nonpos((rmax[ri] - mnew) * kLn2);  // 0 when the old maximum was -inf
            if (corr != 1.0f && !direct) {
              float* orow = o.data() + int64_t(ri) * dv;
#pragma omp simd
              for (int64_t j = 0; j < dv; ++j) orow[j] *= corr;
            }
            rsum[ri] = rsum[ri] * corr + sum;
            rmax[ri] = mnew;
          }
          // o += P V
#if defined(GAF_SIMD)
          if (direct) {  // output rows = P V / rowsum
            for (int64_t i = 0; i < nr; ++i) inv[size_t(i)] = softmax_norm(rsum[size_t(g.r0 + i)]);
            simd::gemm_bcast(nr, dv, ns, 1.0f, s.data(), ns, 1, vb + a * rv, rv, simd::kPanel, ob + g.r0 * ors, ors,
                             ScaleRows{inv.data()});
            continue;
          }
          if (v.strides.back() == 1) {
            simd::gemm_bcast(nr, dv, ns, 1.0f, s.data(), ns, 1, vb + a * rv, rv, simd::kPanel, o.data() + g.r0 * dv,
                             dv, simd::AddToC{});
            continue;
          }
#endif
          gemm(View{s.data(), nr, ns, ns, 1}, View{vb + a * rv, ns, dv, rv, v.strides.back()}, 1.0f, 1.0f,
               o.data() + g.r0 * dv, dv, pack_a, pack_b);
        }
      }
      if (direct) continue;  // every row is written
      for (int64_t i = 0; i < bq; ++i) {
        const float norm = softmax_norm(rsum[size_t(i)]);
        const float* orow = o.data() + i * dv;
        float* dst = ob + i * ors;
        if (ocs == 1) {
#pragma omp simd
          for (int64_t j = 0; j < dv; ++j) dst[j] = orow[j] * norm;
        } else {
          for (int64_t j = 0; j < dv; ++j) dst[j * ocs] = orow[j] * norm;
        }
      }
    }
  });
}

}  // namespace

void register_attention_ops(KernelRegistry& r) {
  r.add("Attention", "gaf").set_kernel(strided_fn_kernel(attention));
}

}  // namespace gaf::runtime
