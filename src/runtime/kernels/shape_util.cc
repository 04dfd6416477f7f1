#include "runtime/kernels/shape_util.h"

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

// Blocked transpose: the destination's innermost dim (j, dst stride 1, src stride sl) and the source's unit-
// stride dim k (i, dst stride dk, src stride 1) form 2-D tiles that fit in L1; the other dims are outer
// loops.
template <class T>
void copy_tiles(T* dst, const T* src, const CopyPlan& p, int k) {
  constexpr int64_t B = 32;
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
      for (int64_t j0 = 0; j0 < L; j0 += B) {
        const int64_t j1 = std::min(L, j0 + B);
        for (int64_t i = i0; i < i1; ++i) {
          T* drow = dst + od + i * dk;
          const T* s = src + os + i;
          for (int64_t j = j0; j < j1; ++j) drow[j] = s[j * sl];
        }
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
  const int64_t L = p.dims[r - 1];
  if (p.ds[r - 1] == 1 && p.ss[r - 1] != 1 && p.ss[r - 1] != 0 && L >= 4) {
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
