// Einsum: the general Einstein summation. The equation is parsed once when the session compiles (implicit or
// explicit output, '...' ellipsis with broadcasting, repeated labels in one operand = diagonal / trace).
//
// Evaluation works on strided views labelled per dimension. A repeated label is a diagonal view (its strides
// add up), a broadcast ellipsis dimension of size 1 is dropped from its operand. Operands are contracted left
// to right, two at a time: labels only one side needs are summed out first, the rest split into batch / M / N
// / K and go through a batched matrix multiply (oneDNN sgemm for fp32, a vectorisable loop otherwise),
// copying an operand into the needed layout only when it is not already (possibly transposed) in that layout.
// A single operand is a strided reduction / transposition. fp16 and bf16 compute in fp32.
#include <oneapi/dnnl/dnnl.h>

#include <cctype>
#include <cmath>
#include <cstring>

#include "ops/einsum.h"
#include "runtime/kernels/onnx/misc_util.h"

namespace gaf::runtime {

namespace {

using ops::bind_shapes;
using ops::EinsumEquation;
using ops::EinsumProblem;
using ops::kEllipsis;
using ops::kLetterLabels;
using ops::label_char;
using ops::parse_equation;

// ---- Strided labelled views ----

template <class C>
struct View {
  const C* data = nullptr;
  std::vector<int> labels;  // distinct
  std::vector<int64_t> sizes, strides;

  int find(int l) const {
    auto it = std::find(labels.begin(), labels.end(), l);
    return it == labels.end() ? -1 : int(it - labels.begin());
  }
  bool has(int l) const { return find(l) >= 0; }
  int64_t numel() const { return numel_of(sizes); }
};

template <class C>
View<C> contiguous_view(const C* data, const std::vector<int>& labels, const std::vector<int64_t>& gsize) {
  View<C> v;
  v.data = data;
  v.labels = labels;
  for (int l : labels) v.sizes.push_back(gsize[l]);
  v.strides = contiguous_strides(v.sizes);
  return v;
}

// Integer arithmetic wraps in an unsigned type of at least 32 bits (defined behaviour, same result mod 2^n).
template <class C>
using wrap_t = std::conditional_t<std::is_floating_point_v<C>, C,
                                  std::conditional_t<(sizeof(C) <= 4), uint32_t, uint64_t>>;
// Scalar accumulation (a sum the compiler cannot vectorise anyway): double for floating point.
template <class C>
using acc_t = std::conditional_t<std::is_floating_point_v<C>, double, wrap_t<C>>;

struct Dims {
  std::vector<int64_t> size, stride;
  Dims without(size_t i) const {
    Dims d = *this;
    d.size.erase(d.size.begin() + long(i));
    d.stride.erase(d.stride.begin() + long(i));
    return d;
  }
};

// Row-major walk over the index space of `d` from linear index `start`; `off` is the strided offset.
struct Odometer {
  const Dims& d;
  std::vector<int64_t> idx;
  int64_t off = 0;
  Odometer(const Dims& dims, int64_t start) : d(dims), idx(dims.size.size(), 0) {
    for (int i = int(idx.size()) - 1; i >= 0; --i) {
      idx[i] = start % d.size[i];
      start /= d.size[i];
      off += idx[i] * d.stride[i];
    }
  }
  void next() {
    for (int i = int(idx.size()) - 1; i >= 0; --i) {
      off += d.stride[i];
      if (++idx[i] < d.size[i]) return;
      off -= d.stride[i] * d.size[i];
      idx[i] = 0;
    }
  }
};

// Sum of n elements at stride `stride`; contiguous runs use independent lanes so the loop vectorises.
template <class C>
acc_t<C> sum_run(const C* p, int64_t n, int64_t stride) {
  using A = acc_t<C>;
  A s = 0;
  int64_t i = 0;
  if (stride == 1) {
    constexpr int L = 16;
    A lanes[L] = {};
    for (; i + L <= n; i += L)
      for (int l = 0; l < L; ++l) lanes[l] += A(p[i + l]);
    for (int l = 0; l < L; ++l) s += lanes[l];
    for (; i < n; ++i) s += A(p[i]);
    return s;
  }
  for (; i < n; ++i) s += A(p[i * stride]);
  return s;
}

// out[e] for output elements [eb, ee): sums over `red_outer` x (rin elements at stride rstr).
template <class C, class O>
void reduce_elems(const C* src, const Dims& keep, const Dims& red_outer, int64_t rin, int64_t rstr,
                  int64_t eb, int64_t ee, O* out) {
  const int64_t rn = numel_of(red_outer.size);
  Odometer ko(keep, eb);
  for (int64_t e = eb; e < ee; ++e, ko.next()) {
    acc_t<C> acc = 0;
    Odometer ro(red_outer, 0);
    for (int64_t r = 0; r < rn; ++r, ro.next()) acc += sum_run(src + ko.off + ro.off, rin, rstr);
    out[e] = O(acc);
  }
}

// Output rows [rb, re) whose last dimension (`last` elements) is contiguous in the source: vector
// accumulation.
template <class C, class O>
void reduce_rows_keep_inner(const C* src, const Dims& keep_outer, int64_t last, const Dims& red, int64_t rb,
                            int64_t re, O* out) {
  using R = wrap_t<C>;
  std::vector<R> acc(static_cast<size_t>(last));
  const int64_t rn = numel_of(red.size);
  Odometer ko(keep_outer, rb);
  for (int64_t row = rb; row < re; ++row, ko.next()) {
    std::fill(acc.begin(), acc.end(), R(0));
    Odometer ro(red, 0);
    for (int64_t r = 0; r < rn; ++r, ro.next()) {
      const C* s = src + ko.off + ro.off;
      R* a = acc.data();
      for (int64_t j = 0; j < last; ++j) a[j] += R(s[j]);
    }
    O* o = out + row * last;
    for (int64_t j = 0; j < last; ++j) o[j] = O(C(acc[j]));
  }
}

// dst (contiguous in `keep` order) = the strided source; a transposition goes through 32x32 tiles.
template <class C>
void permute_copy(const C* src, const Dims& keep, C* dst) {
  const int nk = int(keep.size.size());
  if (nk == 0) {
    dst[0] = src[0];
    return;
  }
  const int64_t last = keep.size.back(), lstr = keep.stride.back();
  int a = -1;  // an outer dimension that reads the source contiguously
  for (int i = 0; i + 1 < nk; ++i)
    if (keep.stride[i] == 1 && keep.size[i] > 1) a = i;
  if (lstr == 1 || a < 0 || last < 8) {
    const Dims outer = keep.without(size_t(nk - 1));
    const int64_t rows = numel_of(outer.size);
    parallel_for(rows, std::max<int64_t>(1, kElemGrain / last), [&](int64_t b, int64_t e) {
      Odometer o(outer, b);
      for (int64_t row = b; row < e; ++row, o.next()) {
        const C* s = src + o.off;
        C* d = dst + row * last;
        if (lstr == 1)
          std::copy(s, s + last, d);
        else
          for (int64_t j = 0; j < last; ++j) d[j] = s[j * lstr];
      }
    });
    return;
  }
  constexpr int64_t TB = 32;
  const auto dst_strides = contiguous_strides(keep.size);
  Dims rest;  // the other dimensions: source strides, and destination strides kept alongside
  std::vector<int64_t> rest_dst;
  for (int i = 0; i + 1 < nk; ++i)
    if (i != a) {
      rest.size.push_back(keep.size[i]);
      rest.stride.push_back(keep.stride[i]);
      rest_dst.push_back(dst_strides[i]);
    }
  const int64_t sa = keep.size[a], dsa = dst_strides[a];
  const int64_t tiles_a = (sa + TB - 1) / TB, tiles_l = (last + TB - 1) / TB;
  const int64_t tiles = numel_of(rest.size) * tiles_a * tiles_l;
  parallel_for(tiles, std::max<int64_t>(1, kElemGrain / (TB * TB)), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      int64_t o = t / (tiles_a * tiles_l);
      const int64_t ta = (t / tiles_l) % tiles_a, tl = t % tiles_l;
      int64_t soff = 0, doff = 0;
      for (int i = int(rest.size.size()) - 1; i >= 0; --i) {
        const int64_t x = o % rest.size[i];
        o /= rest.size[i];
        soff += x * rest.stride[i];
        doff += x * rest_dst[i];
      }
      const int64_t a1 = std::min(sa, (ta + 1) * TB), l0 = tl * TB, l1 = std::min(last, (tl + 1) * TB);
      for (int64_t ia = ta * TB; ia < a1; ++ia) {
        const C* s = src + soff + ia;
        C* d = dst + doff + ia * dsa;
        for (int64_t il = l0; il < l1; ++il) d[il] = s[il * lstr];
      }
    }
  });
}

// dst (contiguous, labels `keep` in order) = sum of `in` over its labels not in `keep`. A kept label the view
// lacks is broadcast (stride 0).
template <class C>
void reduce_to(const View<C>& in, const std::vector<int>& keep, const std::vector<int64_t>& gsize, C* dst) {
  Dims k, r;
  for (int l : keep) {
    const int i = in.find(l);
    k.size.push_back(gsize[l]);
    k.stride.push_back(i >= 0 ? in.strides[i] : 0);
  }
  std::vector<std::pair<int64_t, int64_t>> red;  // (stride, size); sorted so the innermost comes last
  bool empty_reduce = false;
  for (size_t i = 0; i < in.labels.size(); ++i) {
    if (std::find(keep.begin(), keep.end(), in.labels[i]) != keep.end()) continue;
    if (in.sizes[i] == 0) empty_reduce = true;
    if (in.sizes[i] > 1) red.emplace_back(in.strides[i], in.sizes[i]);
  }
  std::sort(red.begin(), red.end(), [](auto& x, auto& y) { return x.first > y.first; });
  for (auto& [s, n] : red) r.size.push_back(n), r.stride.push_back(s);
  const int64_t out_numel = numel_of(k.size);
  if (out_numel == 0) return;
  if (empty_reduce) {
    std::fill(dst, dst + out_numel, C(0));
    return;
  }
  if (r.size.empty()) {
    permute_copy(in.data, k, dst);
    return;
  }
  const int nk = int(k.size.size());
  const int64_t last = nk ? k.size.back() : 1;
  const bool keep_inner = nk && k.stride.back() == 1 && last >= 8 && r.stride.back() != 1;
  const Dims k_outer = keep_inner ? k.without(size_t(nk - 1)) : Dims{};
  const int64_t rnumel = numel_of(r.size);
  const int64_t items = keep_inner ? out_numel / last : out_numel;  // units of parallel work
  const int64_t per_item = keep_inner ? last * rnumel : rnumel;
  auto work = [&](const C* base, const Dims& rd, int64_t b, int64_t e, auto* out) {
    using O = std::remove_pointer_t<decltype(out)>;
    if (keep_inner) {
      reduce_rows_keep_inner<C, O>(base, k_outer, last, rd, b, e, out);
    } else {
      const size_t inner = rd.size.size() - 1;
      reduce_elems<C, O>(base, k, rd.without(inner), rd.size[inner], rd.stride[inner], b, e, out);
    }
  };
  const int threads = omp_get_max_threads();
  if (items < threads && rnumel >= 4 * kElemGrain) {
    // Few outputs, long sums: split the largest reduced dimension across threads, then add the partial sums.
    size_t big = 0;
    for (size_t i = 1; i < r.size.size(); ++i)
      if (r.size[i] > r.size[big]) big = i;
    const int64_t parts = std::min<int64_t>(threads, r.size[big]);
    using A = acc_t<C>;
    std::vector<A> partial(static_cast<size_t>(parts * out_numel));
    parallel_for(parts, 1, [&](int64_t pb, int64_t pe) {
      for (int64_t p = pb; p < pe; ++p) {
        Dims rp = r;
        const int64_t lo = r.size[big] * p / parts, hi = r.size[big] * (p + 1) / parts;
        rp.size[big] = hi - lo;
        A* o = partial.data() + p * out_numel;
        if (hi > lo)
          work(in.data + lo * r.stride[big], rp, 0, items, o);
        else
          std::fill(o, o + out_numel, A(0));
      }
    });
    for (int64_t i = 0; i < out_numel; ++i) {
      A s = 0;
      for (int64_t p = 0; p < parts; ++p) s += partial[size_t(p * out_numel + i)];
      dst[i] = C(s);
    }
    return;
  }
  parallel_for(items, std::max<int64_t>(1, kElemGrain / std::max<int64_t>(1, per_item)),
               [&](int64_t b, int64_t e) { work(in.data, r, b, e, dst); });
}

// True when `v` is stored contiguously with its labels in `order` (size-1 dimensions are ignored).
template <class C>
bool contiguous_in(const View<C>& v, const std::vector<int>& order) {
  if (order.size() != v.labels.size()) return false;
  int64_t expect = 1;
  for (int i = int(order.size()) - 1; i >= 0; --i) {
    const int j = v.find(order[i]);
    if (j < 0) return false;
    if (v.sizes[j] != 1 && v.strides[j] != expect) return false;
    expect *= v.sizes[j];
  }
  return true;
}

// ---- Batched matrix multiply: C[b] = op(A[b]) * op(B[b]), A is [M,K] (or [K,M] when ta), B [K,N] (or [N,K])
// ----

template <class C>
void batched_gemm(int64_t batch, int64_t M, int64_t N, int64_t K, const C* A, bool ta, const C* B, bool tb,
                  C* out, const Node& node) {
  if (batch == 0 || M == 0 || N == 0) return;
  if (K == 0) {
    std::fill(out, out + batch * M * N, C(0));
    return;
  }
  if constexpr (std::is_same_v<C, float>) {
    auto one = [&](int64_t b) {
      dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, 1.f, A + b * M * K, ta ? M : K,
                                    B + b * K * N, tb ? K : N, 0.f, out + b * M * N, N);
      GAF_CHECK(st == dnnl_success, "{}: oneDNN sgemm failed (status {})", node.describe(), int(st));
    };
    const double work = double(M) * double(N) * double(K);
    const int threads = omp_get_max_threads();
    if (batch > 1 && (work < double(1 << 18) || batch % threads == 0 || batch >= 4 * threads)) {
      // Enough products to go round: one per thread (sgemm runs single-threaded inside a parallel region).
      parallel_for(batch, std::max<int64_t>(1, int64_t(double(1 << 18) / std::max(work, 1.0))),
                   [&](int64_t b, int64_t e) {
                     for (int64_t i = b; i < e; ++i) one(i);
                   });
    } else {
      for (int64_t i = 0; i < batch; ++i) one(i);
    }
  } else {
    using W = wrap_t<C>;
    parallel_for(batch * M, std::max<int64_t>(1, kElemGrain / std::max<int64_t>(1, N * K)),
                 [&](int64_t rb, int64_t re) {
                   std::vector<W> acc(static_cast<size_t>(N));
                   for (int64_t r = rb; r < re; ++r) {
                     const int64_t b = r / M, i = r % M;
                     const C* a = A + b * M * K;
                     const C* bm = B + b * K * N;
                     auto aik = [&](int64_t k) { return W(ta ? a[k * M + i] : a[i * K + k]); };
                     if (!tb) {
                       std::fill(acc.begin(), acc.end(), W(0));
                       for (int64_t k = 0; k < K; ++k) {
                         const W av = aik(k);
                         const C* brow = bm + k * N;
                         W* ac = acc.data();
                         for (int64_t j = 0; j < N; ++j) ac[j] += av * W(brow[j]);
                       }
                     } else {
                       for (int64_t j = 0; j < N; ++j) {
                         const C* bcol = bm + j * K;
                         W s = 0;
                         for (int64_t k = 0; k < K; ++k) s += aik(k) * W(bcol[k]);
                         acc[j] = s;
                       }
                     }
                     C* c = out + r * N;
                     for (int64_t j = 0; j < N; ++j) c[j] = C(acc[j]);
                   }
                 });
  }
}

template <class C>
struct Contractor {
  const std::vector<int64_t>& gsize;
  const Node& node;
  std::vector<std::vector<C>> buffers;  // intermediates, alive until the kernel call ends

  C* scratch(int64_t n) {
    buffers.emplace_back(size_t(std::max<int64_t>(n, 1)));
    return buffers.back().data();
  }
  int64_t size_of(const std::vector<int>& labels) const {
    int64_t n = 1;
    for (int l : labels) n *= gsize[l];
    return n;
  }
  static std::vector<int> concat(std::initializer_list<const std::vector<int>*> parts) {
    std::vector<int> r;
    for (const auto* p : parts) r.insert(r.end(), p->begin(), p->end());
    return r;
  }

  // Sums out the labels of `v` that are not in `needed`; returns `v` itself when there are none.
  View<C> drop_unneeded(const View<C>& v0, const std::vector<int>& needed) {
    auto is_needed = [&](int l) { return std::find(needed.begin(), needed.end(), l) != needed.end(); };
    View<C> v;  // size-1 labels nobody needs leave without a copy
    v.data = v0.data;
    for (size_t i = 0; i < v0.labels.size(); ++i) {
      if (v0.sizes[i] == 1 && !is_needed(v0.labels[i])) continue;
      v.labels.push_back(v0.labels[i]);
      v.sizes.push_back(v0.sizes[i]);
      v.strides.push_back(v0.strides[i]);
    }
    std::vector<int> keep;
    for (int l : v.labels)
      if (is_needed(l)) keep.push_back(l);
    if (keep.size() == v.labels.size()) return v;
    C* d = scratch(size_of(keep));
    reduce_to(v, keep, gsize, d);
    return contiguous_view(d, keep, gsize);
  }

  // dst (contiguous, labels `keep`) = sum over the other labels of a * b. keep is within a's and b's labels.
  void contract(const View<C>& a0, const View<C>& b0, const std::vector<int>& keep, C* dst) {
    std::vector<int> need_a = keep, need_b = keep;
    need_a.insert(need_a.end(), b0.labels.begin(), b0.labels.end());
    need_b.insert(need_b.end(), a0.labels.begin(), a0.labels.end());
    const View<C> a = drop_unneeded(a0, need_a);
    const View<C> b = drop_unneeded(b0, need_b);

    std::vector<int> batch;
    for (int l : keep)
      if (a.has(l) && b.has(l)) batch.push_back(l);
    auto only = [&](const View<C>& x, const View<C>& y) {
      std::vector<int> r;
      for (int l : x.labels)
        if (!y.has(l) && std::find(keep.begin(), keep.end(), l) != keep.end()) r.push_back(l);
      return r;
    };
    auto summed = [&](const View<C>& x, const View<C>& y) {
      std::vector<int> r;
      for (int l : x.labels)
        if (y.has(l) && std::find(keep.begin(), keep.end(), l) == keep.end()) r.push_back(l);
      return r;
    };

    // Choose which operand is the left matrix and the order of the summed labels so as to copy the least.
    struct Plan {
      bool swap;
      std::vector<int> m, n, k;
      bool pack_x, pack_y, ta, tb, direct;
      int64_t cost;
    };
    Plan best{};
    best.cost = -1;
    for (bool swap : {false, true}) {
      const View<C>& x = swap ? b : a;
      const View<C>& y = swap ? a : b;
      const std::vector<int> m = only(x, y), n = only(y, x);
      for (const std::vector<int>& k : {summed(x, y), summed(y, x)}) {
        Plan p{swap, m, n, k, false, false, false, false, false, 0};
        if (contiguous_in(x, concat({&batch, &m, &k})))
          p.ta = false;
        else if (contiguous_in(x, concat({&batch, &k, &m})))
          p.ta = true;
        else
          p.pack_x = true, p.cost += x.numel();
        if (contiguous_in(y, concat({&batch, &k, &n})))
          p.tb = false;
        else if (contiguous_in(y, concat({&batch, &n, &k})))
          p.tb = true;
        else
          p.pack_y = true, p.cost += y.numel();
        p.direct = concat({&batch, &m, &n}) == keep;
        if (!p.direct) p.cost += size_of(keep);
        if (best.cost < 0 || p.cost < best.cost) best = p;
      }
    }
    const View<C>& x = best.swap ? b : a;
    const View<C>& y = best.swap ? a : b;
    const C* xd = x.data;
    const C* yd = y.data;
    if (best.pack_x) {
      auto order = concat({&batch, &best.m, &best.k});
      C* d = scratch(size_of(order));
      reduce_to(x, order, gsize, d);
      xd = d;
    }
    if (best.pack_y) {
      auto order = concat({&batch, &best.k, &best.n});
      C* d = scratch(size_of(order));
      reduce_to(y, order, gsize, d);
      yd = d;
    }
    const auto cl = concat({&batch, &best.m, &best.n});
    C* cd = best.direct ? dst : scratch(size_of(cl));
    batched_gemm<C>(size_of(batch), size_of(best.m), size_of(best.n), size_of(best.k), xd, best.ta, yd,
                    best.tb, cd, node);
    if (!best.direct) reduce_to(contiguous_view<C>(cd, cl, gsize), keep, gsize, dst);
  }
};

class EinsumKernel final : public Kernel {
 public:
  explicit EinsumKernel(const Node& n) {
    equation_ = n.attr_string("equation", "");
    GAF_CHECK(!equation_.empty(), "{}: attribute 'equation' is required", n.describe());
    eq_ = parse_equation(equation_, n);
    GAF_CHECK(int(eq_.terms.size()) == n.num_inputs(),
              "{}: equation '{}' has {} input terms but the node has {} inputs", n.describe(), equation_,
              eq_.terms.size(), n.num_inputs());
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    std::vector<std::vector<int64_t>> dims;
    const DType dt = ctx.in(0).dtype();
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor& t = ctx.in(i);
      GAF_CHECK(t.dtype() == dt, "{}: all inputs must have one element type; input {} is {}, input 0 is {}",
                node.describe(), i, dtype_name(t.dtype()), dtype_name(dt));
      dims.push_back(t.dims());
    }
    const EinsumProblem p = bind_shapes(eq_, dims, node);
    std::vector<int64_t> out_dims;
    for (int l : p.output) out_dims.push_back(p.size[l]);
    Tensor& y = ctx.allocate_output(0, dt, out_dims);
    switch (dt) {
      case DType::Float:
        compute<float>(ctx, p, y);
        break;
      case DType::Double:
        compute<double>(ctx, p, y);
        break;
      case DType::Float16:
        compute<Half>(ctx, p, y);
        break;
      case DType::BFloat16:
        compute<BFloat16>(ctx, p, y);
        break;
      case DType::Int8:
        compute<int8_t>(ctx, p, y);
        break;
      case DType::Int16:
        compute<int16_t>(ctx, p, y);
        break;
      case DType::Int32:
        compute<int32_t>(ctx, p, y);
        break;
      case DType::Int64:
        compute<int64_t>(ctx, p, y);
        break;
      case DType::UInt8:
        compute<uint8_t>(ctx, p, y);
        break;
      case DType::UInt16:
        compute<uint16_t>(ctx, p, y);
        break;
      case DType::UInt32:
        compute<uint32_t>(ctx, p, y);
        break;
      case DType::UInt64:
        compute<uint64_t>(ctx, p, y);
        break;
      default:
        unsupported("{}: Einsum of element type {} is not supported", node.describe(), dtype_name(dt));
    }
  }

 private:
  template <class T>
  void compute(KernelContext& ctx, const EinsumProblem& p, Tensor& y) {
    using C = arith_t<T>;
    Contractor<C> ctr{p.size, ctx.node(), {}};
    std::vector<View<C>> views;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor& t = ctx.in(i);
      const C* data;
      if constexpr (std::is_same_v<T, C>) {
        data = t.data<T>();
      } else {
        C* d = ctr.scratch(t.numel());
        const T* s = t.data<T>();
        parallel_for(t.numel(), kElemGrain, [&](int64_t b, int64_t e) {
          for (int64_t j = b; j < e; ++j) d[j] = to_arith(s[j]);
        });
        data = d;
      }
      // Per distinct label: repeated labels (a diagonal) add their strides; broadcast '...' dims of size 1
      // drop.
      View<C> v;
      v.data = data;
      const auto st = contiguous_strides(t.dims());
      for (int d = 0; d < t.rank(); ++d) {
        const int l = p.labels[i][d];
        if (t.dim(d) == 1 && p.size[l] != 1) continue;
        const int j = v.find(l);
        if (j >= 0) {
          v.strides[j] += st[d];
        } else {
          v.labels.push_back(l);
          v.sizes.push_back(t.dim(d));
          v.strides.push_back(st[d]);
        }
      }
      views.push_back(std::move(v));
    }
    if (y.numel() == 0) return;
    C* dst = nullptr;
    if constexpr (std::is_same_v<T, C>)
      dst = y.data<T>();
    else
      dst = ctr.scratch(y.numel());

    if (views.size() == 1) {
      reduce_to(views[0], p.output, p.size, dst);
    } else {
      View<C> cur = views[0];
      for (size_t i = 1; i < views.size(); ++i) {
        std::vector<int> keep;
        if (i + 1 == views.size()) {
          keep = p.output;
        } else {
          // Keep what the output or a later operand needs: output labels first, in output order.
          std::vector<int> needed = p.output;
          for (size_t j = i + 1; j < views.size(); ++j)
            needed.insert(needed.end(), views[j].labels.begin(), views[j].labels.end());
          for (int l : needed)
            if ((cur.has(l) || views[i].has(l)) && std::find(keep.begin(), keep.end(), l) == keep.end())
              keep.push_back(l);
        }
        C* d = i + 1 == views.size() ? dst : ctr.scratch(ctr.size_of(keep));
        ctr.contract(cur, views[i], keep, d);
        cur = contiguous_view<C>(d, keep, p.size);
      }
    }
    if constexpr (!std::is_same_v<T, C>) {
      T* o = y.data<T>();
      parallel_for(y.numel(), kElemGrain, [&](int64_t b, int64_t e) {
        for (int64_t j = b; j < e; ++j) o[j] = from_arith<T>(dst[j]);
      });
    }
  }

  std::string equation_;
  EinsumEquation eq_;
};

}  // namespace

void register_misc_einsum_ops(KernelRegistry& r) {
  r.add("Einsum").set_kernel(
      [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<EinsumKernel>(n); });
}

}  // namespace gaf::runtime
