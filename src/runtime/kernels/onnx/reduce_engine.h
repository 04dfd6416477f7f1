// The reduction engine behind Reduce* and the statistics of MeanVarianceNormalization.
//
// The input is viewed through its collapsed shape: size-1 dimensions dropped, adjacent dimensions that are
// all reduced or all kept merged. If the innermost group is kept it has extent K (else K = 1), and the
// innermost reduced group always has stride K, so each step along it moves by one contiguous run of K
// elements. Outputs come in rows of K contiguous values; a "piece" is a row or a slice of one.
//
//  * Short reductions (at most 16 steps, K <= 32): the step offsets are listed once and each output folds
//    its few values directly; the row base advances as an odometer.
//  * Lane mode (K <= 32, covers the row reduce K = 1): consecutive reduced steps are contiguous memory, read
//    as rows of W = K*m elements (m a power of two, W <= 64) folded into W independent accumulators; lane j
//    feeds output j % K, and the lanes are folded as a tree at the end. The inner loop is a plain
//    vectorisable map over the lanes.
//  * Column mode (K > 32): each reduced step is a contiguous slice of up to 1024 outputs, folded
//    element-wise into that many accumulators, vectorised across the kept dimension.
//
// Independent pieces run in parallel. When there are too few pieces for that (a full reduction, a few rows),
// the reduced range is split into chunks whose partial states are merged in a fixed order; the chunking
// depends only on the shape, so results do not depend on the thread count.
//
// An Op supplies: S (state), init(), step(S, C x, C shift), merge(S, S) and finish(S, count, C shift), where
// C is the compute type (fp32 for 16-bit floats) and shift is a per-output offset (used by ReduceLogSumExp).
#pragma once

#include <vector>

#include "runtime/kernels/onnx/reduce_util.h"

namespace gaf::runtime::rn {

struct ReduceGeometry {
  std::vector<int64_t> out_dims;  // output dims, keepdims applied
  int64_t outputs = 1;            // output elements
  int64_t reduced = 1;            // input elements folded into each output (0: empty reduction)
  int64_t K = 1;                  // extent of the innermost kept group (1 when the innermost axis is reduced)
  std::vector<int64_t> kdims, kstrides;  // kept groups outside K, outer to inner, with input strides
  std::vector<int64_t> rdims, rstrides;  // reduced groups, outer to inner; the last has stride K
};

ReduceGeometry make_reduce_geometry(const std::vector<int64_t>& dims, const std::vector<bool>& reduce,
                                    bool keepdims, const Node& node);

namespace detail {

// Input offset of the first element of output row `row` (row = output index / K).
inline int64_t row_base(const ReduceGeometry& g, int64_t row) {
  int64_t base = 0;
  for (int d = int(g.kdims.size()) - 1; d >= 0; --d) {
    base += (row % g.kdims[d]) * g.kstrides[d];
    row /= g.kdims[d];
  }
  return base;
}

// Calls f(offset, steps) for the reduced steps [rb, re) in runs along the innermost reduced group: `steps`
// consecutive steps starting at input offset `offset` (relative to the row base), i.e. steps*K contiguous
// elements.
template <class F>
inline void for_reduced_runs(const ReduceGeometry& g, int64_t rb, int64_t re, F&& f) {
  const int nr = int(g.rdims.size());
  if (nr == 0) {
    if (rb < re) f(int64_t(0), int64_t(1));
    return;
  }
  int64_t idx[16];
  int64_t rem = rb;
  for (int d = nr - 1; d >= 0; --d) {
    idx[d] = rem % g.rdims[d];
    rem /= g.rdims[d];
  }
  const int64_t inner = g.rdims[nr - 1];
  int64_t pos = rb;
  while (pos < re) {
    int64_t off = 0;
    for (int d = 0; d < nr; ++d) off += idx[d] * g.rstrides[d];
    int64_t run = std::min(inner - idx[nr - 1], re - pos);
    f(off, run);
    pos += run;
    idx[nr - 1] += run;
    for (int d = nr - 1; d > 0 && idx[d] >= g.rdims[d]; --d) {
      idx[d] = 0;
      ++idx[d - 1];
    }
  }
}

inline constexpr int64_t kLaneK = 32;       // lane mode up to this K
inline constexpr int64_t kMaxLanes = 64;    // lane accumulators
inline constexpr int64_t kColChunk = 1024;  // outputs per piece in column mode
inline constexpr int64_t kMinPieces = 8;    // from this many pieces, split the pieces, not the reduced range

// The lane loop with a compile-time lane count: the accumulators stay in vector registers. Folds the whole
// multiples of W of q[0..cnt) and returns how many elements it consumed.
template <class Op, int64_t W, class C>
inline int64_t lane_blocks(typename Op::S* lanes, const C* lsh, const C* q, int64_t cnt) {
  using S = typename Op::S;
  S acc[W];
  C sh[W];
  for (int64_t j = 0; j < W; ++j) {
    acc[j] = lanes[j];
    sh[j] = lsh[j];
  }
  int64_t i = 0;
  for (; i + W <= cnt; i += W) {
    const C* qi = q + i;
    for (int64_t j = 0; j < W; ++j) acc[j] = Op::step(acc[j], qi[j], sh[j]);
  }
  for (int64_t j = 0; j < W; ++j) lanes[j] = acc[j];
  return i;
}

// Folds reduced steps [rb, re) of outputs row `row`, columns [k0, k0 + kn), into st[0..kn).
// `shift` points at the per-output shifts of those outputs (Op::kShift only).
template <class Op, class T>
void accumulate_piece(const ReduceGeometry& g, const T* x, int64_t row, int64_t k0, int64_t kn, int64_t rb,
                      int64_t re, typename Op::S* st, const compute_t<T>* shift) {
  using C = compute_t<T>;
  using S = typename Op::S;
  const int64_t K = g.K;
  const T* xrow = x + row_base(g, row) + k0;
  if (K <= kLaneK) {
    // Lane mode: the piece is the whole row (k0 = 0, kn = K). m lanes per output, a power of two, fewer for
    // short reductions so they do not pay for idle lanes; folded as a tree at the end.
    int64_t m = 1;
    while (K * m * 2 <= kMaxLanes && m * 8 <= re - rb) m *= 2;
    const int64_t W = K * m;
    S lanes[kMaxLanes];
    C lsh[kMaxLanes];
    for (int64_t j = 0; j < W; ++j) {
      lanes[j] = Op::init();
      lsh[j] = Op::kShift ? shift[j % K] : C(0);
    }
    const int64_t block = W * (kConvBlock / W);
    for_reduced_runs(g, rb, re, [&](int64_t off, int64_t steps) {
      for_compute_blocks(xrow + off, steps * K, block, [&](const C* q, int64_t, int64_t cnt) {
        int64_t i = 0;
        if (W == kMaxLanes) {
          i = lane_blocks<Op, kMaxLanes>(lanes, lsh, q, cnt);
        } else {
          for (; i + W <= cnt; i += W) {
            const C* qi = q + i;
            for (int64_t j = 0; j < W; ++j) lanes[j] = Op::step(lanes[j], qi[j], lsh[j]);
          }
        }
        const C* qi = q + i;
        for (int64_t j = 0; j < cnt - i; ++j) lanes[j] = Op::step(lanes[j], qi[j], lsh[j]);
      });
    });
    for (int64_t h = W / 2; h >= K; h /= 2)
      for (int64_t j = 0; j < h; ++j) lanes[j] = Op::merge(lanes[j], lanes[j + h]);
    for (int64_t j = 0; j < K; ++j) st[j] = Op::merge(st[j], lanes[j]);
    return;
  }
  // Column mode.
  for_reduced_runs(g, rb, re, [&](int64_t off, int64_t steps) {
    for (int64_t t = 0; t < steps; ++t) {
      for_compute_blocks(xrow + off + t * K, kn, kConvBlock, [&](const C* q, int64_t o, int64_t cnt) {
        S* s = st + o;
        if constexpr (Op::kShift) {
          const C* sh = shift + o;
          for (int64_t j = 0; j < cnt; ++j) s[j] = Op::step(s[j], q[j], sh[j]);
        } else {
          for (int64_t j = 0; j < cnt; ++j) s[j] = Op::step(s[j], q[j], C(0));
        }
      });
    }
  });
}

// Short reductions (R <= kShortR steps, K <= kLaneK): the reduced offsets are listed once and the row base
// advances as an odometer, so the per-output cost is a handful of loads, not a piece's setup.
inline constexpr int64_t kShortR = 16;

template <class Op, class T, class Y>
void reduce_short(const ReduceGeometry& g, const T* x, Y* y, const compute_t<T>* shift) {
  using C = compute_t<T>;
  using S = typename Op::S;
  const int64_t K = g.K, R = g.reduced, rows = g.outputs / K;
  int64_t roff[kShortR];
  int64_t nr = 0;
  for_reduced_runs(g, 0, R, [&](int64_t off, int64_t steps) {
    for (int64_t t = 0; t < steps; ++t) roff[nr++] = off + t * K;
  });
  const int nk = int(g.kdims.size());
  parallel_for(rows, std::max<int64_t>(1, kGrain / (R * K)), [&](int64_t b, int64_t e) {
    int64_t idx[16];
    int64_t base = 0, rem = b;
    for (int d = nk - 1; d >= 0; --d) {
      idx[d] = rem % g.kdims[d];
      rem /= g.kdims[d];
      base += idx[d] * g.kstrides[d];
    }
    for (int64_t row = b; row < e; ++row) {
      const T* xr = x + base;
      for (int64_t j = 0; j < K; ++j) {
        C sh = C(0);
        if constexpr (Op::kShift) sh = shift[row * K + j];
        S s = Op::init();
        for (int64_t r = 0; r < R; ++r) s = Op::step(s, load_c(xr[roff[r] + j]), sh);
        y[row * K + j] = cast_out<Y>(Op::finish(s, R, sh));
      }
      for (int d = nk - 1; d >= 0; --d) {
        base += g.kstrides[d];
        if (++idx[d] < g.kdims[d]) break;
        base -= idx[d] * g.kstrides[d];
        idx[d] = 0;
      }
    }
  });
}

}  // namespace detail

// Reduces x into y (g.outputs elements of Y). `shift` (Op::kShift only) holds one value per output.
template <class Op, class T, class Y>
void run_reduce(const ReduceGeometry& g, const T* x, Y* y, const compute_t<T>* shift = nullptr) {
  using C = compute_t<T>;
  using S = typename Op::S;
  if (g.outputs == 0) return;
  if (g.reduced == 0) {
    Y v = cast_out<Y>(Op::finish(Op::init(), 0, C(0)));
    std::fill(y, y + g.outputs, v);
    return;
  }
  const int64_t K = g.K, R = g.reduced;
  if (K <= detail::kLaneK && R <= detail::kShortR) return detail::reduce_short<Op>(g, x, y, shift);
  const int64_t rows = g.outputs / K;
  const int64_t kc = K <= detail::kLaneK ? K : std::min(K, detail::kColChunk);
  const int64_t per_row = (K + kc - 1) / kc;
  const int64_t pieces = rows * per_row;
  const int64_t work = g.outputs * R;
  auto finish = [&](int64_t o, S s) {
    C sh = C(0);
    if constexpr (Op::kShift) sh = shift[o];
    y[o] = cast_out<Y>(Op::finish(s, R, sh));
  };
  auto piece_shift = [&](int64_t o) -> const C* {
    if constexpr (Op::kShift)
      return shift + o;
    else
      return nullptr;
  };

  const int64_t chunks = std::min<int64_t>({64, R, work / kGrain});
  if (pieces >= detail::kMinPieces || chunks < 2) {
    // Parallel over pieces, each folding its whole reduced range. The chunked path below writes a partial
    // state per chunk and output and merges them on one thread: on 2 threads, [8, 49, 2048] over axis 1 (16
    // pieces) took 0.69 ms there and 0.05 here. The choice does not look at the thread count, so a result
    // does not depend on it.
    const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(1, kc * R));
    parallel_for(pieces, grain, [&](int64_t b, int64_t e) {
      S st[detail::kColChunk];
      for (int64_t p = b; p < e; ++p) {
        const int64_t row = p / per_row, k0 = (p % per_row) * kc, kn = std::min(kc, K - k0);
        const int64_t o0 = row * K + k0;
        for (int64_t j = 0; j < kn; ++j) st[j] = Op::init();
        detail::accumulate_piece<Op>(g, x, row, k0, kn, 0, R, st, piece_shift(o0));
        for (int64_t j = 0; j < kn; ++j) finish(o0 + j, st[j]);
      }
    });
    return;
  }
  // Few pieces, much to reduce: split the reduced range into chunks, merge the partial states in order.
  std::vector<S> part(static_cast<size_t>(chunks * g.outputs), Op::init());
  parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      const int64_t rb = R * c / chunks, re = R * (c + 1) / chunks;
      S* pst = part.data() + c * g.outputs;
      for (int64_t p = 0; p < pieces; ++p) {
        const int64_t row = p / per_row, k0 = (p % per_row) * kc, kn = std::min(kc, K - k0);
        const int64_t o0 = row * K + k0;
        detail::accumulate_piece<Op>(g, x, row, k0, kn, rb, re, pst + o0, piece_shift(o0));
      }
    }
  });
  for (int64_t o = 0; o < g.outputs; ++o) {
    S s = part[o];
    for (int64_t c = 1; c < chunks; ++c) s = Op::merge(s, part[c * g.outputs + o]);
    finish(o, s);
  }
}

}  // namespace gaf::runtime::rn
