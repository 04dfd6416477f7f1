// Index of the maximum / minimum along a row or down columns; shared by ArgMax/ArgMin and Hardmax.
// numpy semantics: the first occurrence wins (the last with select_last_index), and NaN counts as the extreme
// value, so the first (last) NaN wins over any number.
#pragma once

#include "runtime/kernels/reduce_util.h"

namespace gaf::runtime::rn {

// Index of the extreme value of q[0..n), n >= 1. Two passes: a vectorised extreme over lanes (NaN noted on
// the side), then a search for its first or last occurrence.
template <bool IsMax, bool Last, class C>
int64_t arg_row(const C* q, int64_t n) {
  constexpr int64_t W = 32;
  C lanes[W];
  bool nan = false;
  for (int64_t j = 0; j < W; ++j) lanes[j] = q[0];
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    const C* qi = q + i;
    for (int64_t j = 0; j < W; ++j) {
      C v = qi[j];
      if constexpr (IsMax)
        lanes[j] = v > lanes[j] ? v : lanes[j];
      else
        lanes[j] = v < lanes[j] ? v : lanes[j];
      if constexpr (std::is_floating_point_v<C>) nan |= v != v;
    }
  }
  C best = lanes[0];
  for (int64_t j = 1; j < W; ++j)
    best = IsMax ? (lanes[j] > best ? lanes[j] : best) : (lanes[j] < best ? lanes[j] : best);
  for (; i < n; ++i) {
    C v = q[i];
    best = IsMax ? (v > best ? v : best) : (v < best ? v : best);
    if constexpr (std::is_floating_point_v<C>) nan |= v != v;
  }
  if constexpr (std::is_floating_point_v<C>) {
    if (nan || best != best) {
      if constexpr (Last) {
        for (int64_t k = n - 1; k >= 0; --k)
          if (q[k] != q[k]) return k;
      } else {
        for (int64_t k = 0; k < n; ++k)
          if (q[k] != q[k]) return k;
      }
    }
  }
  if constexpr (Last) {
    for (int64_t k = n - 1; k >= 0; --k)
      if (q[k] == best) return k;
  } else {
    for (int64_t k = 0; k < n; ++k)
      if (q[k] == best) return k;
  }
  return 0;  // unreachable: best is one of the values
}

// Column step: folds row i (values q[0..cnt)) into the running extremes best[] / idx[].
template <bool IsMax, bool Last, class C>
inline void arg_cols_step(const C* q, int64_t cnt, int64_t i, C* best, int64_t* idx) {
  for (int64_t j = 0; j < cnt; ++j) {
    C v = q[j], b = best[j];
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
    best[j] = take ? v : b;
    idx[j] = take ? i : idx[j];
  }
}

}  // namespace gaf::runtime::rn
