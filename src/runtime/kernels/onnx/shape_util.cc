#include "runtime/kernels/onnx/shape_util.h"

#include <immintrin.h>

#include <set>

namespace gaf::runtime {

namespace {

// The index space of a copy after dropping size-1 dims and merging dims that are contiguous in both source
// and destination.
struct CopyPlan {
  std::vector<int64_t> dims, ds, ss;
};

CopyPlan simplify(const std::vector<int64_t>& dims, const std::vector<int64_t>& ds,
                  const std::vector<int64_t>& ss) {
  CopyPlan p;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    if (!p.dims.empty() && p.ds.back() == ds[i] * dims[i] && p.ss.back() == ss[i] * dims[i]) {
      p.dims.back() *= dims[i];
      p.ds.back() = ds[i];
      p.ss.back() = ss[i];
      continue;
    }
    p.dims.push_back(dims[i]);
    p.ds.push_back(ds[i]);
    p.ss.push_back(ss[i]);
  }
  return p;
}

// Decomposes linear index `lin` over `dims` into offsets along destination and source.
inline void offsets_of(int64_t lin, const int64_t* dims, const int64_t* ds, const int64_t* ss, int n,
                       int64_t* idx, int64_t& od, int64_t& os) {
  od = 0;
  os = 0;
  for (int d = n - 1; d >= 0; --d) {
    idx[d] = lin % dims[d];
    lin /= dims[d];
    od += idx[d] * ds[d];
    os += idx[d] * ss[d];
  }
}

template <class T>
void copy_run(T* dst, const T* src, int64_t n, int64_t dl, int64_t sl) {
  if (dl == 1 && sl == 1) {
    copy_elems(dst, src, n);
  } else if (dl == 1 && sl == 0) {
    fill_elems(dst, n, *src);
  } else if (dl == 1) {
    for (int64_t j = 0; j < n; ++j) dst[j] = src[j * sl];
  } else {
    for (int64_t j = 0; j < n; ++j) dst[j * dl] = src[j * sl];
  }
}

// Rows: the innermost dim is a run; outer dims are walked with an odometer.
template <class T>
void copy_rows(T* dst, const T* src, const CopyPlan& p) {
  const int r = int(p.dims.size());
  const int64_t L = p.dims[r - 1], dl = p.ds[r - 1], sl = p.ss[r - 1];
  const int no = r - 1;
  const int64_t rows = prod(p.dims, 0, no);
  const int threads = omp_get_max_threads();
  if (rows < threads && L >= 2 * kCopyGrain) {
    // Fewer rows than threads (a slice of leading rows merges into one run): split the runs too.
    const int64_t pieces = (threads + rows - 1) / rows, len = (L + pieces - 1) / pieces;
    parallel_for(rows * pieces, 1, [&](int64_t b, int64_t e) {
      std::vector<int64_t> idx(std::max(no, 1));
      for (int64_t it = b; it < e; ++it) {
        int64_t od, os;
        offsets_of(it / pieces, p.dims.data(), p.ds.data(), p.ss.data(), no, idx.data(), od, os);
        const int64_t j0 = (it % pieces) * len, n = std::min(L, j0 + len) - j0;
        if (n > 0) copy_run(dst + od + j0 * dl, src + os + j0 * sl, n, dl, sl);
      }
    });
    return;
  }
  parallel_for(rows, std::max<int64_t>(1, kCopyGrain / std::max<int64_t>(L, 1)), [&](int64_t b, int64_t e) {
    std::vector<int64_t> idx(std::max(no, 1));
    int64_t od, os;
    offsets_of(b, p.dims.data(), p.ds.data(), p.ss.data(), no, idx.data(), od, os);
    for (int64_t row = b; row < e; ++row) {
      copy_run(dst + od, src + os, L, dl, sl);
      for (int d = no - 1; d >= 0; --d) {
        od += p.ds[d];
        os += p.ss[d];
        if (++idx[d] < p.dims[d]) break;
        od -= p.ds[d] * p.dims[d];
        os -= p.ss[d] * p.dims[d];
        idx[d] = 0;
      }
    }
  });
}

// Register-level transposes of a VxV block: source rows j at s + j * sl (V consecutive i), destination rows i
// at d + i * dk (V consecutive j). Shuffles move bits unchanged, so the float forms serve every type of the
// width. V = 0: no vector form (scalar loops only).
template <class T>
struct MicroTranspose {
  static constexpr int64_t V = 0;
  static void run(const T*, int64_t, T*, int64_t) {}
};

#if defined(__AVX__)
template <>
struct MicroTranspose<uint32_t> {
  static constexpr int64_t V = 8;
  static void run(const uint32_t* s, int64_t sl, uint32_t* d, int64_t dk) {
    auto ld = [&](int64_t j) { return _mm256_loadu_ps(reinterpret_cast<const float*>(s + j * sl)); };
    __m256 r0 = ld(0), r1 = ld(1), r2 = ld(2), r3 = ld(3), r4 = ld(4), r5 = ld(5), r6 = ld(6), r7 = ld(7);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
    auto st = [&](int64_t i, __m256 v) { _mm256_storeu_ps(reinterpret_cast<float*>(d + i * dk), v); };
    st(0, _mm256_permute2f128_ps(u0, u4, 0x20));
    st(1, _mm256_permute2f128_ps(u1, u5, 0x20));
    st(2, _mm256_permute2f128_ps(u2, u6, 0x20));
    st(3, _mm256_permute2f128_ps(u3, u7, 0x20));
    st(4, _mm256_permute2f128_ps(u0, u4, 0x31));
    st(5, _mm256_permute2f128_ps(u1, u5, 0x31));
    st(6, _mm256_permute2f128_ps(u2, u6, 0x31));
    st(7, _mm256_permute2f128_ps(u3, u7, 0x31));
  }
};

template <>
struct MicroTranspose<uint64_t> {
  static constexpr int64_t V = 4;
  static void run(const uint64_t* s, int64_t sl, uint64_t* d, int64_t dk) {
    auto ld = [&](int64_t j) { return _mm256_loadu_pd(reinterpret_cast<const double*>(s + j * sl)); };
    __m256d r0 = ld(0), r1 = ld(1), r2 = ld(2), r3 = ld(3);
    __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1);
    __m256d t2 = _mm256_unpacklo_pd(r2, r3), t3 = _mm256_unpackhi_pd(r2, r3);
    auto st = [&](int64_t i, __m256d v) { _mm256_storeu_pd(reinterpret_cast<double*>(d + i * dk), v); };
    st(0, _mm256_permute2f128_pd(t0, t2, 0x20));
    st(1, _mm256_permute2f128_pd(t1, t3, 0x20));
    st(2, _mm256_permute2f128_pd(t0, t2, 0x31));
    st(3, _mm256_permute2f128_pd(t1, t3, 0x31));
  }
};
#endif

#if defined(__SSE2__)
template <>
struct MicroTranspose<uint16_t> {
  static constexpr int64_t V = 8;
  static void run(const uint16_t* s, int64_t sl, uint16_t* d, int64_t dk) {
    auto ld = [&](int64_t j) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + j * sl)); };
    __m128i a0 = ld(0), a1 = ld(1), a2 = ld(2), a3 = ld(3), a4 = ld(4), a5 = ld(5), a6 = ld(6), a7 = ld(7);
    __m128i b0 = _mm_unpacklo_epi16(a0, a1), b1 = _mm_unpackhi_epi16(a0, a1);
    __m128i b2 = _mm_unpacklo_epi16(a2, a3), b3 = _mm_unpackhi_epi16(a2, a3);
    __m128i b4 = _mm_unpacklo_epi16(a4, a5), b5 = _mm_unpackhi_epi16(a4, a5);
    __m128i b6 = _mm_unpacklo_epi16(a6, a7), b7 = _mm_unpackhi_epi16(a6, a7);
    __m128i c0 = _mm_unpacklo_epi32(b0, b2), c1 = _mm_unpackhi_epi32(b0, b2);
    __m128i c2 = _mm_unpacklo_epi32(b1, b3), c3 = _mm_unpackhi_epi32(b1, b3);
    __m128i c4 = _mm_unpacklo_epi32(b4, b6), c5 = _mm_unpackhi_epi32(b4, b6);
    __m128i c6 = _mm_unpacklo_epi32(b5, b7), c7 = _mm_unpackhi_epi32(b5, b7);
    auto st = [&](int64_t i, __m128i v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i * dk), v); };
    st(0, _mm_unpacklo_epi64(c0, c4));
    st(1, _mm_unpackhi_epi64(c0, c4));
    st(2, _mm_unpacklo_epi64(c1, c5));
    st(3, _mm_unpackhi_epi64(c1, c5));
    st(4, _mm_unpacklo_epi64(c2, c6));
    st(5, _mm_unpackhi_epi64(c2, c6));
    st(6, _mm_unpacklo_epi64(c3, c7));
    st(7, _mm_unpackhi_epi64(c3, c7));
  }
};
#endif

// One tile of a transpose: destination rows i in [i0, i1) (stride dk), columns j in [j0, j1) (stride 1); the
// source has stride 1 along i and sl along j. Full VxV blocks go through registers, the edges are scalar.
template <class T>
inline void transpose_tile(T* dst, const T* src, int64_t dk, int64_t sl, int64_t i0, int64_t i1, int64_t j0,
                           int64_t j1) {
  using M = MicroTranspose<T>;
  int64_t iv = i0, jv = j0;
  if constexpr (M::V > 0) {
    iv = i0 + (i1 - i0) / M::V * M::V;
    jv = j0 + (j1 - j0) / M::V * M::V;
    for (int64_t i = i0; i < iv; i += M::V)
      for (int64_t j = j0; j < jv; j += M::V) M::run(src + i + j * sl, sl, dst + i * dk + j, dk);
  }
  for (int64_t i = i0; i < iv; ++i)
    for (int64_t j = jv; j < j1; ++j) dst[i * dk + j] = src[i + j * sl];
  for (int64_t i = iv; i < i1; ++i)
    for (int64_t j = j0; j < j1; ++j) dst[i * dk + j] = src[i + j * sl];
}

// A transpose whose destination rows are only L (2..4) long, e.g. the block dim of DepthToSpace: interleaves
// L source rows; a compile-time L lets the compiler vectorise along i.
template <class T, int L>
inline void interleave_tile(T* dst, const T* src, int64_t dk, int64_t sl, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; ++i)
    for (int j = 0; j < L; ++j) dst[i * dk + j] = src[i + j * sl];
}

// Blocked transpose: the destination's innermost dim (j, dst stride 1, src stride sl) and the source's unit-
// stride dim k (i, dst stride dk, src stride 1) form 2-D tiles; the other dims are outer loops, and (outer
// index, block of i) pairs are the parallel work items.
template <class T>
void copy_tiles(T* dst, const T* src, const CopyPlan& p, int k) {
  // About 1 KiB of tile edge: a 4-byte tile is 256x256 (256 KiB, in L2); measured better than L1-sized tiles
  // for power-of-two strides, whose rows collide in L1 sets.
  constexpr int64_t B = std::clamp<int64_t>(1024 / int64_t(sizeof(T)), 32, 512);
  const int r = int(p.dims.size());
  const int64_t L = p.dims[r - 1], sl = p.ss[r - 1];
  const int64_t K = p.dims[k], dk = p.ds[k];
  std::vector<int64_t> odims, ods, oss;
  for (int d = 0; d < r - 1; ++d) {
    if (d == k) continue;
    odims.push_back(p.dims[d]);
    ods.push_back(p.ds[d]);
    oss.push_back(p.ss[d]);
  }
  const int no = int(odims.size());
  const int64_t kblocks = (K + B - 1) / B;
  const int64_t items = prod(odims, 0, no) * kblocks;
  parallel_for(items, std::max<int64_t>(1, kCopyGrain / (B * L)), [&](int64_t b, int64_t e) {
    std::vector<int64_t> idx(std::max(no, 1));
    for (int64_t it = b; it < e; ++it) {
      int64_t od, os;
      offsets_of(it / kblocks, odims.data(), ods.data(), oss.data(), no, idx.data(), od, os);
      const int64_t i0 = (it % kblocks) * B, i1 = std::min(K, i0 + B);
      T* d = dst + od;
      const T* s = src + os;
      switch (L) {
        case 2:
          interleave_tile<T, 2>(d, s, dk, sl, i0, i1);
          break;
        case 3:
          interleave_tile<T, 3>(d, s, dk, sl, i0, i1);
          break;
        case 4:
          interleave_tile<T, 4>(d, s, dk, sl, i0, i1);
          break;
        default:
          for (int64_t j0 = 0; j0 < L; j0 += B) transpose_tile(d, s, dk, sl, i0, i1, j0, std::min(L, j0 + B));
      }
    }
  });
}

template <class T>
void strided_copy_t(T* dst, const T* src, const CopyPlan& p) {
  const int r = int(p.dims.size());
  if (r == 0) {
    *dst = *src;
    return;
  }
  // Destination rows read with a stride: transpose in tiles when some other dim is contiguous in the source.
  if (p.ds[r - 1] == 1 && p.ss[r - 1] != 1 && p.ss[r - 1] != 0) {
    for (int d = r - 2; d >= 0; --d) {
      if (p.ss[d] == 1 && p.dims[d] >= 4) return copy_tiles(dst, src, p, d);
    }
  }
  copy_rows(dst, src, p);
}

}  // namespace

void strided_copy(DType dtype, void* dst, const void* src, const std::vector<int64_t>& dims,
                  const std::vector<int64_t>& dst_strides, const std::vector<int64_t>& src_strides) {
  GAF_ASSERT(dims.size() == dst_strides.size() && dims.size() == src_strides.size(), "strided_copy rank");
  for (int64_t d : dims)
    if (d == 0) return;
  CopyPlan p = simplify(dims, dst_strides, src_strides);
  visit_bytes(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    strided_copy_t(static_cast<T*>(dst), static_cast<const T*>(src), p);
  });
}

void transpose_into(const Tensor& in, Tensor& out, const std::vector<int64_t>& in_dims,
                    const std::vector<int>& perm) {
  auto cs = contiguous_strides(in_dims);
  std::vector<int64_t> dims(perm.size()), ss(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    dims[i] = in_dims[perm[i]];
    ss[i] = cs[perm[i]];
  }
  strided_copy(in.dtype(), out.raw(), in.raw(), dims, contiguous_strides(dims), ss);
}

void parallel_memcpy(void* dst, const void* src, size_t bytes) {
  constexpr size_t kChunk = 256 * 1024;
  if (bytes <= 2 * kChunk) {
    if (bytes) std::memcpy(dst, src, bytes);
    return;
  }
  const int64_t chunks = int64_t((bytes + kChunk - 1) / kChunk);
  parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
    size_t lo = size_t(b) * kChunk, hi = std::min(bytes, size_t(e) * kChunk);
    std::memcpy(static_cast<char*>(dst) + lo, static_cast<const char*>(src) + lo, hi - lo);
  });
}

void check_split_lengths(const std::vector<int64_t>& sizes, int64_t dim, int axis, const Node& node) {
  int64_t total = 0;
  for (int64_t s : sizes) {
    GAF_CHECK(s >= 0, "{}: split {} has a negative size", node.describe(), dims_to_string(sizes));
    total += s;
  }
  GAF_CHECK(total == dim, "{}: split {} sums to {}, but axis {} has size {}", node.describe(),
            dims_to_string(sizes), total, axis, dim);
}

std::vector<int64_t> read_ints(const Tensor& t, const Node& node, const char* what) {
  GAF_CHECK(t.rank() <= 1, "{}: {} must be a 1-D tensor, got shape {}", node.describe(), what,
            dims_to_string(t.dims()));
  std::vector<int64_t> v(t.numel());
  switch (t.dtype()) {
    case DType::Int64:
      std::memcpy(v.data(), t.raw(), v.size() * 8);
      break;
    case DType::Int32:
      for (int64_t i = 0; i < t.numel(); ++i) v[i] = t.data<int32_t>()[i];
      break;
    default:
      GAF_CHECK(is_integer(t.dtype()), "{}: {} must be an integer tensor, got {}", node.describe(), what,
                dtype_name(t.dtype()));
      for (int64_t i = 0; i < t.numel(); ++i) v[i] = t.get_int(i);
  }
  return v;
}

int64_t read_scalar_int(const Tensor& t, const Node& node, const char* what) {
  GAF_CHECK(t.numel() == 1, "{}: {} must hold exactly one value, got shape {}", node.describe(), what,
            dims_to_string(t.dims()));
  GAF_CHECK(is_integer(t.dtype()), "{}: {} must be an integer tensor, got {}", node.describe(), what,
            dtype_name(t.dtype()));
  return t.get_int(0);
}

std::vector<int64_t> checked_indices(const Tensor& t, int64_t n, const Node& node, int axis) {
  std::vector<int64_t> out(t.numel());
  visit_index(t.dtype(), node, "indices", [&](auto tag) {
    using I = typename decltype(tag)::type;
    const I* p = t.data<I>();
    for (int64_t i = 0; i < t.numel(); ++i) out[i] = checked_index(p, i, n, node, t, axis);
  });
  return out;
}

std::vector<int> normalize_axes(const std::vector<int64_t>& axes, int rank, const Node& node) {
  std::vector<int> out;
  std::set<int> seen;
  for (int64_t a : axes) {
    GAF_CHECK(a >= -rank && a < rank, "{}: axis {} is out of range for rank {}", node.describe(), a, rank);
    int n = int(a < 0 ? a + rank : a);
    GAF_CHECK(seen.insert(n).second, "{}: axis {} is repeated", node.describe(), a);
    out.push_back(n);
  }
  return out;
}

}  // namespace gaf::runtime
