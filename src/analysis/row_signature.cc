#include "analysis/row_signature.h"

#include <algorithm>
#include <string>

#include "ops/reduction.h"

namespace gaf::analysis {

std::optional<std::vector<int64_t>> shape_key(const Value* v) {
  if (!v || !v->type.shape) return std::nullopt;
  std::vector<int64_t> k;
  for (const Dim& d : *v->type.shape) {
    if (d.is_static()) k.push_back(d.value());
    else if (d.is_symbol()) k.push_back(-1 - int64_t(std::hash<std::string>{}(d.symbol()) & 0xffffff));
    else return std::nullopt;
  }
  return k;
}

std::optional<RowSignature> row_signature(const Node& n) {
  const Value* in = n.input(0);
  auto key = shape_key(in);
  if (!key) return std::nullopt;
  int rank = int(key->size());
  std::vector<int64_t> axes;
  const std::string& op = n.op_type;
  if (op == "Softmax" || op == "LogSoftmax" || op == "Hardmax") {
    int64_t axis = n.attr_int("axis", n.opset >= 13 ? -1 : 1);
    if (axis < 0) axis += rank;
    if (n.opset >= 13) axes = {axis};
    else
      for (int64_t a = axis; a < rank; ++a) axes.push_back(a);
  } else if (op == "LayerNormalization" || op == "RMSNormalization") {
    int64_t axis = n.attr_int("axis", -1);
    if (axis < 0) axis += rank;
    for (int64_t a = axis; a < rank; ++a) axes.push_back(a);
  } else if (op == "ArgMax" || op == "ArgMin" || op == "CumSum") {
    if (op == "CumSum") {
      const Value* a = n.input(1);
      if (!a || !a->is_constant()) return std::nullopt;
      axes = {a->constant().get_int(0)};
    } else {
      axes = {n.attr_int("axis", 0)};
    }
  } else if (op.rfind("Reduce", 0) == 0) {
    const Value* a = n.input(1);
    const std::vector<int64_t> given =
        a && a->is_constant() ? a->constant().to_int_vector() : std::vector<int64_t>{};
    auto r = ops::reduced_axes(n, rank, &given, !a || a->is_constant());
    if (!r) return std::nullopt;
    axes = *r;
  } else {
    // Other reduction-kind ops (InstanceNormalization, LpNormalization, ...): rows over the trailing axes from 1.
    for (int64_t a = std::min(2, rank - 1); a < rank; ++a) axes.push_back(a);
    if (op == "LpNormalization") {
      int64_t axis = n.attr_int("axis", -1);
      axes = {axis < 0 ? axis + rank : axis};
    }
  }
  RowSignature s;
  s.input_numel_dims = *key;
  for (int64_t a : axes) {
    if (a < 0) a += rank;
    if (a < 0 || a >= rank) return std::nullopt;
    s.axes.push_back(int(a));
  }
  std::sort(s.axes.begin(), s.axes.end());
  s.axes.erase(std::unique(s.axes.begin(), s.axes.end()), s.axes.end());
  s.trailing = !s.axes.empty() && s.axes.back() == rank - 1 && s.axes.back() - s.axes.front() + 1 == int(s.axes.size());
  return s;
}

}  // namespace gaf::analysis
