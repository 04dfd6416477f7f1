// Matching shared by the LayerNorm and RMSNorm recognisers: the normalising tail after the variance, and the
// scale/bias operands as tensors of the normalised shape.
//
//   variance -> Add eps -> Sqrt -> Div(centered, .)                [* gamma] [+ beta]
//                               -> Reciprocal -> Mul(centered, .)
//                               -> Div(1, .)  -> Mul(centered, .)   (torch.rsqrt)
//                      -> Pow(., -0.5)        -> Mul(centered, .)
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "passes/rewrite_util.h"

namespace gaf::rewrite {

struct NormTail {
  float epsilon = 0;
  Node* normalize = nullptr;  // the Div or Mul reading `centered`
  Value* gamma = nullptr;     // constant scale, when multiplied in
  Value* beta = nullptr;      // constant shift, when added (LayerNorm only)
  Value* result = nullptr;    // what the whole pattern computes
  std::vector<Node*> nodes;   // every tail node, for erasing
};

// Matches the tail from `variance` (a ReduceMean output) to the result. Intermediates must be read once,
// inside the tail; eps a single-element constant; gamma/beta constants (their shapes are checked by
// normalized_param).
// `why` (optional) says what did not match.
std::optional<NormTail> match_norm_tail(const Graph& g, Value* centered, Value* variance, bool allow_beta,
                                        std::string* why = nullptr);

// The reduced axes of `reduce` when they are the trailing axes [axis, rank) of `x`, with keepdims: the axis.
std::optional<int64_t> trailing_axis(const Graph& g, const Node& reduce, const Value* x);

// Whether `param` (an fp32 constant, or nullptr: absent) can become a tensor of x's normalised shape
// x.shape[axis:]: those dims are static and param broadcasts within them only.
bool fits_normalized(const Graph& g, const Value* param, const Value* x, int64_t axis);
// `param` as a tensor of the normalised shape (the value itself when it has that shape already); an absent
// param becomes a constant filled with `fill`. Requires fits_normalized.
Value* normalized_param(Rewriter& rw, Value* param, const Value* x, int64_t axis, float fill);

}  // namespace gaf::rewrite
