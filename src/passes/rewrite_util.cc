#include "passes/rewrite_util.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "ops/reduction.h"

namespace gaf::rewrite {

bool same_shape(const Value* a, const Value* b) {
  return a->type.shape && b->type.shape && *a->type.shape == *b->type.shape;
}

// The permutation of Transpose `t` when valid and known (the default reverses the dims).
std::optional<std::vector<int64_t>> transpose_perm(const Node& t) {
  int rank = rank_of(t.input(0));
  std::vector<int64_t> p = t.attr_ints("perm");
  if (!t.has_attr("perm")) {
    if (rank < 0) return std::nullopt;
    p.resize(rank);
    std::iota(p.rbegin(), p.rend(), int64_t(0));
  }
  std::vector<bool> seen(p.size(), false);
  for (int64_t a : p) {
    if (a < 0 || a >= int64_t(p.size()) || seen[a]) return std::nullopt;
    seen[a] = true;
  }
  if (rank >= 0 && rank != int64_t(p.size())) return std::nullopt;
  return p;
}

const Tensor* constant_of(const Graph& g, const Value* v) {
  if (!v || !v->is_constant()) return nullptr;
  const auto& in = g.inputs();
  if (std::find(in.begin(), in.end(), v) != in.end()) return nullptr;
  return &v->constant();
}

std::optional<double> scalar_operand(const Graph& g, const Value* v, const Value* into) {
  const Tensor* t = constant_of(g, v);
  if (!t || t->numel() != 1 || t->dtype() == DType::String) return std::nullopt;
  int rank = rank_of(into);
  if (t->rank() > std::max(rank, 0)) return std::nullopt;
  return t->get_double(0);
}

bool near(double v, double want) { return std::abs(v - want) <= 1e-6 * std::abs(want); }

bool is_scalar(const Graph& g, const Value* v, const Value* into, double want) {
  auto c = scalar_operand(g, v, into);
  return c && near(*c, want);
}

std::pair<int64_t, int64_t> shape_range(const Node& shape, int64_t rank) {
  auto clamp = [&](int64_t a) { return std::clamp(a < 0 ? a + rank : a, int64_t(0), rank); };
  const int64_t start = clamp(shape.attr_int("start", 0));
  return {start, std::max(start, clamp(shape.attr_int("end", rank)))};
}

bool all_equal(const std::vector<int64_t>& v, int64_t want) {
  return std::all_of(v.begin(), v.end(), [&](int64_t x) { return x == want; });
}

int rank_of(const Value* v) { return v && v->type.shape ? int(v->type.shape->size()) : -1; }

bool is_float(const Value* v) { return v && v->type.dtype == DType::Float; }

bool is_op(const Node* n, std::string_view op) { return n && n->domain.empty() && n->op_type == op; }

Node* producer_op(const Value* v, std::string_view op) {
  return v && is_op(v->producer(), op) ? v->producer() : nullptr;
}

Node* sole_user(const Graph& g, const Value* v) {
  if (!v || v->uses().size() != 1 || g.is_graph_output(v)) return nullptr;
  return v->uses()[0].node;
}

bool used_only_by(const Graph& g, const Value* v, const std::vector<const Node*>& nodes) {
  if (g.is_graph_output(v)) return false;
  return std::all_of(v->uses().begin(), v->uses().end(), [&](const Use& u) {
    return std::find(nodes.begin(), nodes.end(), u.node) != nodes.end();
  });
}

Value* other_operand(const Node* n, const Value* v) {
  if (!n || n->num_inputs() != 2) return nullptr;
  if (n->input(0) == v) return n->input(1);
  if (n->input(1) == v) return n->input(0);
  return nullptr;
}

std::optional<std::vector<int64_t>> reduce_axes(const Graph& g, const Node& n, int rank) {
  const Tensor* t = n.input(1) && !n.has_attr("axes") ? constant_of(g, n.input(1)) : nullptr;
  const std::vector<int64_t> given = t ? t->to_int_vector() : std::vector<int64_t>{};
  return ops::reduced_axes(n, rank, &given, !n.input(1) || n.has_attr("axes") || t);
}

bool keeps_dims(const Node& reduce) { return reduce.attr_int("keepdims", 1) != 0; }

std::optional<Stage> stage_of(const Graph& g, const Node* n) {
  if (!n) return std::nullopt;
  Stage c;
  if ((n->domain == kGafDomain && n->op_type == "Silu") ||
      ((n->domain.empty() || n->domain == kGafDomain) && n->op_type == "HardSwish")) {
    c.act = n->op_type;
    return c;
  }
  if (!n->domain.empty()) return std::nullopt;
  if (n->op_type == "Relu") {
    c.lo = 0.f;
    return c;
  }
  if (n->op_type != "Clip") return std::nullopt;
  if (n->opset < 11) {
    c.lo = n->attr_float("min", c.lo), c.hi = n->attr_float("max", c.hi);
    return c;
  }
  for (int i = 1; i <= 2; ++i) {
    if (!n->input(i)) continue;
    const auto v = scalar_operand(g, n->input(i), n->input(0));
    if (!v) return std::nullopt;
    (i == 1 ? c.lo : c.hi) = float(*v);
  }
  if (!(c.lo <= c.hi)) return std::nullopt;  // NaN bounds or min > max: left to the plain ops
  return c;
}

std::optional<std::vector<double>> per_channel(const Tensor& c, int rank, int64_t m) {
  if (c.dtype() == DType::String || c.rank() > rank) return std::nullopt;
  std::vector<int64_t> dims(size_t(rank - c.rank()), 1);
  dims.insert(dims.end(), c.dims().begin(), c.dims().end());
  for (int i = 0; i < rank; ++i)
    if (dims[size_t(i)] != 1 && !(i == 1 && dims[size_t(i)] == m)) return std::nullopt;
  std::vector<double> v(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) v[size_t(i)] = c.get_double(c.numel() == 1 ? 0 : i);
  return v;
}

std::optional<Affine> batch_norm_affine(const Graph& g, const Node& bn, int64_t m) {
  if (bn.opset < 7 || bn.attr_int("training_mode", 0) != 0 || bn.attr_int("spatial", 1) != 1)
    return std::nullopt;
  for (int i = 1; i < bn.num_outputs(); ++i)
    if (!bn.output(i)->uses().empty() || g.is_graph_output(bn.output(i))) return std::nullopt;
  const Tensor* p[4];
  for (int i = 0; i < 4; ++i) {
    p[i] = constant_of(g, bn.input(i + 1));
    if (!p[i] || p[i]->rank() != 1 || p[i]->numel() != m || !is_floating(p[i]->dtype())) return std::nullopt;
  }
  double eps = bn.attr_float("epsilon", 1e-5f);
  Affine a{std::vector<double>(size_t(m)), std::vector<double>(size_t(m))};
  for (int64_t i = 0; i < m; ++i) {
    a.first[size_t(i)] = p[0]->get_double(i) / std::sqrt(p[3]->get_double(i) + eps);
    a.second[size_t(i)] = p[1]->get_double(i) - p[2]->get_double(i) * a.first[size_t(i)];
  }
  return a;
}

std::optional<Affine> elementwise_affine(const Graph& g, const Node& n, const Value* y, int rank, int64_t m) {
  const Tensor* c = constant_of(g, other_operand(&n, y));
  if (!c || c->dtype() != y->type.dtype) return std::nullopt;
  auto v = per_channel(*c, rank, m);
  if (!v) return std::nullopt;
  if (n.op_type == "Mul") return Affine{*v, std::vector<double>(size_t(m), 0.0)};
  return Affine{std::vector<double>(size_t(m), 1.0), *v};
}

namespace {

template <class T>
Tensor scale_along_t(const Tensor& w, const std::vector<double>& s, int axis) {
  Tensor out(w.dtype(), w.dims());
  int64_t inner = 1;
  for (int i = axis + 1; i < w.rank(); ++i) inner *= w.dim(i);
  const int64_t n = w.dim(axis);
  const T* src = w.data<T>();
  T* dst = out.data<T>();
  for (int64_t i = 0; i < w.numel(); ++i) dst[i] = T(double(src[i]) * s[size_t(i / inner % n)]);
  return out;
}

}  // namespace

Tensor scale_along(const Tensor& w, const std::vector<double>& s, int axis) {
  GAF_ASSERT(w.dtype() == DType::Float || w.dtype() == DType::Double, "scale_along: float or double weights");
  return w.dtype() == DType::Float ? scale_along_t<float>(w, s, axis) : scale_along_t<double>(w, s, axis);
}

Tensor affine_bias(const Tensor* b, double beta, const Affine& a, DType dtype) {
  GAF_ASSERT(dtype == DType::Float || dtype == DType::Double, "affine_bias: float or double");
  const int64_t m = int64_t(a.first.size());
  Tensor out(dtype, {m});
  for (int64_t i = 0; i < m; ++i) {
    const double bi = b ? beta * b->get_double(b->numel() == 1 ? 0 : i) : 0.0;
    out.set_double(i, bi * a.first[size_t(i)] + a.second[size_t(i)]);
  }
  return out;
}

std::vector<Tensor> evaluate(const PassContext& ctx, const Graph& g, const Node& n) {
  if (!ctx.evaluator) unsupported("{}: no constant evaluator installed", n.describe());
  std::vector<const Tensor*> inputs;
  for (int i = 0; i < n.num_inputs(); ++i) {
    const Tensor* t = constant_of(g, n.input(i));
    GAF_ASSERT(t || !n.input(i), "evaluate: a non-constant input");
    inputs.push_back(t);
  }
  return ctx.evaluator->evaluate(n, inputs);
}

int Rewriter::run(const std::function<bool(Node&)>& rule) {
  int count = 0;
  for (Node* n : g_.nodes()) {
    if (erased_.count(n)) continue;
    if (rule(*n)) ++count;
  }
  if (count) {
    g_.topo_sort();
    g_.remove_dead_values();
  }
  return count;
}

bool Rewriter::free_name(const Value* v) const {
  const auto& in = g_.inputs();
  return !g_.is_graph_output(v) && std::find(in.begin(), in.end(), v) == in.end();
}

bool Rewriter::can_replace(const Value* from, const Value* to) const {
  return from != to && (!g_.is_graph_output(from) || free_name(to));
}

void Rewriter::replace(Value* from, Value* to, bool take_name) {
  GAF_ASSERT(can_replace(from, to), "Rewriter::replace: the graph output would lose its name");
  bool rename = g_.is_graph_output(from) || (take_name && free_name(to));
  g_.replace_all_uses(from, to);
  if (!rename) return;
  std::string name = from->name();
  g_.rename(from, g_.unique_name(name + "__replaced"));
  g_.rename(to, name);
}

void Rewriter::erase_unused(const std::vector<Node*>& pattern) {
  for (bool progress = true; progress;) {
    progress = false;
    for (Node* n : pattern) {
      if (erased_.count(n)) continue;
      bool unused = std::all_of(n->outputs().begin(), n->outputs().end(),
                                [&](const Value* o) { return o->uses().empty() && !g_.is_graph_output(o); });
      if (!unused) continue;
      g_.remove_node(n);
      erased_.insert(n);
      progress = true;
    }
  }
}

void Rewriter::drop_if_unused(Value* v) {
  if (v && v->uses().empty() && !g_.is_graph_output(v)) v->drop_constant_data();
}

Node* Rewriter::add_node(const std::string& op_type, const std::vector<Value*>& inputs,
                         const std::vector<const Value*>& like, std::string_view domain, int opset) {
  std::vector<std::string> names;
  for (const Value* v : like) names.push_back(g_.unique_name(v->name() + "__" + op_type));
  Node* n = g_.add_node(op_type, inputs, names, names[0]);
  erased_.erase(n);  // the allocator may hand out the address of a node erased earlier
  n->domain = std::string(domain);
  n->opset = opset;
  for (size_t i = 0; i < like.size(); ++i) n->output(int(i))->type = like[i]->type;
  return n;
}

Value* Rewriter::add_constant(const std::string& base, Tensor t) {
  return g_.add_constant(g_.unique_name(base), std::move(t));
}

}  // namespace gaf::rewrite
