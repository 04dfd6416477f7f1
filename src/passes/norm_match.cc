#include "passes/norm_match.h"

#include <algorithm>

namespace gaf::rewrite {

std::optional<NormTail> match_norm_tail(const Graph& g, Value* centered, Value* variance, bool allow_beta,
                                        std::string* why) {
  auto no = [&](std::string w) -> std::optional<NormTail> {
    if (why) *why = std::move(w);
    return std::nullopt;
  };
  auto name = [](const Node* n) { return n ? n->describe() : std::string("more than one reader, or none"); };
  NormTail t;
  Node* add = sole_user(g, variance);
  if (!is_op(add, "Add")) return no(fmt::format("the variance '{}' is read by {}, not by an Add of epsilon alone",
                                                variance->name(), name(add)));
  auto eps = scalar_operand(g, other_operand(add, variance), variance);
  if (!eps) return no(fmt::format("{} adds '{}', not a scalar constant epsilon", add->describe(),
                                  other_operand(add, variance)->name()));
  Node* after = sole_user(g, add->output(0));
  t.epsilon = float(*eps);
  t.nodes = {add};
  Value* inv = nullptr;  // 1 / sqrt(var + eps), multiplied into centered
  if (is_op(after, "Sqrt")) {
    t.nodes.push_back(after);
    Value* root = after->output(0);
    Node* next = sole_user(g, root);
    if (is_op(next, "Div") && next->input(0) == centered && next->input(1) == root) {
      t.normalize = next;  // centered / sqrt(var + eps)
    } else if (is_op(next, "Reciprocal") ||
               (is_op(next, "Div") && next->input(1) == root && is_scalar(g, next->input(0), root, 1.0))) {
      t.nodes.push_back(next);  // Reciprocal(sqrt(var + eps)), or Div(1, sqrt(var + eps)): torch's rsqrt
      inv = next->output(0);
    } else {
      return no(fmt::format("{} is read by {}, not by a Div of the input '{}' by it, a Reciprocal or Div(1, .)",
                            after->describe(), name(next), centered->name()));
    }
  } else if (is_op(after, "Pow") && after->input(0) == add->output(0) &&
             is_scalar(g, after->input(1), add->output(0), -0.5)) {
    t.nodes.push_back(after);  // (var + eps) ^ -0.5
    inv = after->output(0);
  } else {
    return no(fmt::format("variance + epsilon ('{}') is read by {}, not by Sqrt or Pow(., -0.5)",
                          add->output(0)->name(), name(after)));
  }
  if (inv) {
    Node* mul = sole_user(g, inv);
    if (!is_op(mul, "Mul") || other_operand(mul, inv) != centered)
      return no(fmt::format("the inverse root '{}' is read by {}, not by one Mul with the input '{}'", inv->name(),
                            name(mul), centered->name()));
    t.normalize = mul;  // centered * (1 / sqrt(var + eps))
  }
  t.nodes.push_back(t.normalize);
  t.result = t.normalize->output(0);
  Node* mul = sole_user(g, t.result);
  if (is_op(mul, "Mul") && constant_of(g, other_operand(mul, t.result))) {
    t.gamma = other_operand(mul, t.result);
    t.nodes.push_back(mul);
    t.result = mul->output(0);
  }
  Node* bias = allow_beta ? sole_user(g, t.result) : nullptr;
  if (is_op(bias, "Add") && constant_of(g, other_operand(bias, t.result))) {
    t.beta = other_operand(bias, t.result);
    t.nodes.push_back(bias);
    t.result = bias->output(0);
  }
  return t;
}

std::optional<int64_t> trailing_axis(const Graph& g, const Node& reduce, const Value* x) {
  int rank = rank_of(x);
  auto axes = reduce_axes(g, reduce, rank);
  if (!axes || !keeps_dims(reduce) || axes->back() != rank - 1) return std::nullopt;
  if (axes->back() - axes->front() + 1 != int64_t(axes->size())) return std::nullopt;
  return axes->front();
}

namespace {

// x's normalised dims x.shape[axis:], when static.
std::optional<std::vector<int64_t>> normalized_dims(const Value* x, int64_t axis) {
  int rank = rank_of(x);
  if (rank < 0 || axis < 0 || axis >= rank) return std::nullopt;
  std::vector<int64_t> norm;
  for (int i = int(axis); i < rank; ++i) {
    const Dim& d = (*x->type.shape)[i];
    if (!d.is_static()) return std::nullopt;
    norm.push_back(d.value());
  }
  return norm;
}

// The dims of `p` right-aligned to x's rank, when p varies over the normalised dims only.
std::optional<std::vector<int64_t>> padded_dims(const Tensor& p, const std::vector<int64_t>& norm, int rank) {
  if (p.dtype() != DType::Float || p.rank() > rank) return std::nullopt;
  int axis = rank - int(norm.size());
  std::vector<int64_t> padded(rank - p.rank(), 1);
  padded.insert(padded.end(), p.dims().begin(), p.dims().end());
  for (int i = 0; i < rank; ++i) {
    if (i < axis && padded[i] != 1) return std::nullopt;  // varies across rows: not a per-feature scale
    if (i >= axis && padded[i] != 1 && padded[i] != norm[i - axis]) return std::nullopt;
  }
  return padded;
}

}  // namespace

bool fits_normalized(const Graph& g, const Value* param, const Value* x, int64_t axis) {
  auto norm = normalized_dims(x, axis);
  if (!norm) return false;
  if (!param) return true;
  const Tensor* p = constant_of(g, param);
  return p && padded_dims(*p, *norm, rank_of(x));
}

Value* normalized_param(Rewriter& rw, Value* param, const Value* x, int64_t axis, float fill) {
  GAF_ASSERT(fits_normalized(rw.graph(), param, x, axis), "normalized_param: check fits_normalized first");
  std::vector<int64_t> norm = *normalized_dims(x, axis);
  Tensor out(DType::Float, norm);
  float* o = out.data<float>();
  if (!param) {
    std::fill(o, o + out.numel(), fill);
    return rw.add_constant(x->name() + "__norm_param", std::move(out));
  }
  const Tensor& p = param->constant();
  if (p.dims() == norm) return param;
  std::vector<int64_t> padded = *padded_dims(p, norm, rank_of(x));
  // Broadcast p over the normalised dims: stride 0 along its size-1 dims.
  int nr = int(norm.size()), first = int(padded.size()) - nr;
  std::vector<int64_t> stride(nr, 0);
  for (int i = nr - 1, s = 1; i >= 0; --i) {
    stride[i] = padded[first + i] == 1 ? 0 : s;
    s *= int(padded[first + i]);
  }
  const float* src = p.data<float>();
  std::vector<int64_t> idx(nr, 0);
  for (int64_t k = 0; k < out.numel(); ++k) {
    int64_t off = 0;
    for (int i = 0; i < nr; ++i) off += idx[i] * stride[i];
    o[k] = src[off];
    for (int i = nr - 1; i >= 0 && ++idx[i] == norm[i]; --i) idx[i] = 0;
  }
  return rw.add_constant(param->name() + "__normalized", std::move(out));
}

}  // namespace gaf::rewrite
