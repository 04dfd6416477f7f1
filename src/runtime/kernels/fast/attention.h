// Internals of the gaf.Attention kernel that tests check directly.
#pragma once

#include <cstdint>
#include <utility>

namespace gaf::runtime {

// The keys [lo, hi) of a block of `rows` mask rows (row stride mrs, 0 for one row shared by all; key stride mcs)
// outside of which every mask value is <= -1e30: -inf, or a fill such as torch.finfo(float32).min. Such a key's
// softmax weight is exactly 0 in a row that attends to any key (its score sits 1e30 below the row's maximum), so
// the kernel's two products skip it: right padding, and the keys after a causal block's last query. A row that
// attends to no key keeps the whole range (its softmax over all keys is uniform, or NaN for -inf), and a NaN mask
// value counts as attended (the row comes out NaN, as unfused). No mask: [0, lk).
std::pair<int64_t, int64_t> attention_live_keys(const float* mb, int64_t mrs, int64_t mcs, int64_t rows, int64_t lk);

}  // namespace gaf::runtime
