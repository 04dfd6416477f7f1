// Einsum equations: parsing (implicit or explicit output, '...' ellipsis, repeated labels) and binding to
// input shapes. The op's shape and flop count (src/ops) and its CPU kernel read the same parse.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gaf/graph.h"

namespace gaf::ops {

constexpr int kEllipsis = -1;
constexpr int kLetterLabels = 52;  // a-z -> 0..25, A-Z -> 26..51; ellipsis dimensions get 52, 53, ...

struct EinsumEquation {
  std::vector<std::vector<int>> terms;  // per input: a label per subscript, kEllipsis for '...'
  bool explicit_output = false;
  std::vector<int> output;
};

// The label's letter (for messages).
char label_char(int l);

// Parses `equation` (the node's attribute); throws naming the node when it is malformed.
EinsumEquation parse_equation(const std::string& equation, const Node& node);

// The equation bound to concrete input shapes: every dimension of every operand gets a label id.
struct EinsumProblem {
  std::vector<std::vector<int>> labels;  // per operand, per dimension
  std::vector<int> output;               // output labels in order
  std::vector<int64_t> size;             // per label id
};
EinsumProblem bind_shapes(const EinsumEquation& e, const std::vector<std::vector<int64_t>>& dims,
                          const Node& node);

}  // namespace gaf::ops
