// Row signatures of reductions: which axes a reduction-kind node reduces over which input shape. Legality asks
// whether several reductions share one row-wise kernel; the cost model sizes a reduction's row from it. Below both
// (fusion uses the cost model), so neither reaches into the other.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "gaf/graph.h"

namespace gaf::analysis {

// A reduction's row: the input shape and the reduced axes (sorted, non-negative). Two reductions can share one
// row-wise kernel when their signatures are equal and the axes are trailing.
struct RowSignature {
  std::vector<int64_t> input_numel_dims;  // static dims, symbolic as -1
  std::vector<int> axes;
  bool trailing = false;
  bool operator==(const RowSignature& o) const {
    return input_numel_dims == o.input_numel_dims && axes == o.axes;
  }
};
// nullopt when the axes or the rank are unknown.
std::optional<RowSignature> row_signature(const Node& n);

// Element count of a value's shape with symbolic dims as distinct markers: equal results mean equal shapes.
std::optional<std::vector<int64_t>> shape_key(const Value* v);

}  // namespace gaf::analysis
