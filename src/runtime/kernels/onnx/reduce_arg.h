// Index of the maximum / minimum along a row or down columns; shared by ArgMax/ArgMin and Hardmax.
// numpy semantics: the first occurrence wins (the last with select_last_index), and NaN counts as the extreme
// value, so the first (last) NaN wins over any number.
#pragma once

#include "runtime/kernels/onnx/reduce_util.h"

namespace gaf::runtime::rn {

// True when v should replace the running extreme b (seen at an earlier index): strictly better, or equal with
// select_last_index; NaN beats numbers.
template <bool IsMax, bool Last, class C>
inline bool arg_take(C v, C b) {
  bool take;
  if constexpr (IsMax)
    take = Last ? v >= b : v > b;
  else
    take = Last ? v <= b : v < b;
  if constexpr (std::is_floating_point_v<C>) {
    if constexpr (Last)
      take = take || v != v;  // b NaN, v a number: v >= b is false, keep b
    else
      take = take || (v != v && b == b);
  }
  return take;
}

// Column step: folds row i (values q[0..cnt)) into the running extremes best[] / idx[].
template <bool IsMax, bool Last, class C>
inline void arg_cols_step(const C* q, int64_t cnt, int64_t i, C* best, int64_t* idx) {
  for (int64_t j = 0; j < cnt; ++j) {
    const bool take = arg_take<IsMax, Last>(q[j], best[j]);
    best[j] = take ? q[j] : best[j];
    idx[j] = take ? i : idx[j];
  }
}

// Index of the extreme value of q[0..n), n >= 1, in one vectorised pass: W lanes each keep their extreme and
// its index (lane j sees indices j, j+W, ... in order), then the lanes are combined with ties going to the
// lower (higher with Last) index.
template <bool IsMax, bool Last, class C>
int64_t arg_row(const C* q, int64_t n) {
  constexpr int64_t W = 64;
  if (n < 2 * W) {
    C b = q[0];
    int64_t bi = 0;
    for (int64_t i = 1; i < n; ++i)
      if (arg_take<IsMax, Last>(q[i], b)) {
        b = q[i];
        bi = i;
      }
    return bi;
  }
  // Lanes hold the start of the block their extreme came from; its index is that plus the lane.
  C best[W];
  int64_t idx[W];
  for (int64_t j = 0; j < W; ++j) {
    best[j] = q[j];
    idx[j] = 0;
  }
  int64_t i = W;
  for (; i + W <= n; i += W) arg_cols_step<IsMax, Last>(q + i, W, i, best, idx);
  for (int64_t j = 0; i + j < n; ++j)
    if (arg_take<IsMax, Last>(q[i + j], best[j])) {
      best[j] = q[i + j];
      idx[j] = i;
    }
  C b = best[0];
  int64_t bi = idx[0];
  for (int64_t j = 1; j < W; ++j) {
    const C v = best[j];
    const int64_t k = idx[j] + j;
    bool same = v == b;
    if constexpr (std::is_floating_point_v<C>) same = same || (v != v && b != b);
    const bool better = same ? (Last ? k > bi : k < bi) : arg_take<IsMax, false>(v, b);
    if (better) {
      b = v;
      bi = k;
    }
  }
  return bi;
}

}  // namespace gaf::runtime::rn
