// Our own shape inference, for what ONNX shape inference left unknown. ONNX infers at import, before our
// canonicalisation, so a Reshape, Slice, Expand or Squeeze whose shape, starts or axes were computed at run time
// comes out with an unknown shape; once constant folding and shape folding have turned those inputs into
// constants, the shapes follow. Unknown shapes block fusion and codegen (a group's loops need its dims), so this
// pass fills them in:
//   elementwise / broadcast ops, Where, variadic Sum/Mean/Max/Min   numpy broadcast of the inputs
//   Softmax family, normalisations, Identity, Dropout, CumSum, ...  the shape of input 0
//   Transpose, Reshape, Flatten, Squeeze, Unsqueeze, Slice, Concat, Gather, Expand, Split, MatMul, Gemm,
//   Reduce*, Shape, ConstantOfShape, Conv, GlobalAverage/MaxPool    their ONNX rules, with constant inputs
//   any other op (Pad, Tile, Resize, Range, ScatterND, pools...)   ONNX's own inference function for the op,
//                                                                  fed the types and the constants folded since
//                                                                  import (also for what the rules above leave)
// Shape arithmetic is followed element by element where it stays symbolic: Shape(x) of a [batch, seq, 768]
// tensor holds {batch, seq, 768}, Gather/Slice/Concat/Unsqueeze/Squeeze/Identity/Cast carry those elements,
// and a Reshape, Expand or ConstantOfShape reading such a tensor gets [batch, seq, 12, 64] rather than an
// unknown rank (what exports with dynamic axes compute: without it attention and everything after the head
// reshapes stayed unfused).
// Dims may be symbols; a dim that cannot be known stays unknown. Only unknown ranks and unknown dims are filled:
// a known dim is never changed, and an inference that contradicts it is dropped (the runtime reports the
// mismatch with the node's name). An unknown element type (a value a rewrite made without one, as
// decompose_gaf_ops does) comes from ONNX's inference. Each value whose type gained something counts as one rewrite.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "gaf/onnx_io.h"
#include "gaf/op_registry.h"
#include "gaf/passes.h"
#include "ops/reduction.h"
#include "passes/rewrite_util.h"
#include "passes/sym_int.h"

namespace gaf {

namespace {

using MaybeShape = std::optional<Shape>;

// Nothing left to infer: every dim known and the element type too (a rewrite may leave it unset).
bool typed(const TensorType& t) {
  return t.dtype != DType::Undefined && t.shape &&
         std::all_of(t.shape->begin(), t.shape->end(), [](const Dim& d) { return d.is_known(); });
}

// "min(L,1024)": a dim that a slice of a static dim by a symbolic end gives (see symbolic_slice).
std::string min_symbol(const std::string& sym, int64_t bound) { return fmt::format("min({},{})", sym, bound); }
// "cut(T,1024)": a slice [b:e] of a static dim by computed bounds whose length e - b is the size T (see
// symbolic_slice).
std::string cut_symbol(const std::string& len, int64_t bound) { return fmt::format("cut({},{})", len, bound); }
// Whether `a` is min(b, k) for the symbol b. Broadcasting such a dim against b gives b in every run where the
// broadcast is valid: min(b, k) is b when b <= k, and otherwise (b > k >= 1) valid only when k is 1.
// cut(b,k) (see symbolic_slice) is b in every valid run where it is not 1 either.
bool bounded_by(const Dim& a, const Dim& b) {
  return a.is_symbol() && b.is_symbol() &&
         (a.symbol().rfind("min(" + b.symbol() + ",", 0) == 0 || a.symbol().rfind("cut(" + b.symbol() + ",", 0) == 0);
}

// Numpy broadcast; nullopt when a rank is unknown or two static dims clash.
MaybeShape broadcast(const std::vector<MaybeShape>& shapes) {
  size_t rank = 0;
  for (const auto& s : shapes) {
    if (!s) return std::nullopt;
    rank = std::max(rank, s->size());
  }
  Shape out(rank, Dim(1));
  for (const auto& s : shapes) {
    for (size_t i = 0; i < s->size(); ++i) {
      Dim& o = out[rank - s->size() + i];
      const Dim& d = (*s)[i];
      if (d.is_static() && d.value() == 1) continue;
      if (o.is_static() && o.value() == 1) o = d;
      else if (bounded_by(o, d)) o = d;
      else if (bounded_by(d, o)) continue;
      else if (!(o == d)) {
        if (o.is_static() && d.is_static()) return std::nullopt;
        if (!o.is_static()) o = d.is_static() ? d : Dim();  // a static dim other than 1 decides
      }
    }
  }
  return out;
}

class Inferrer {
 public:
  explicit Inferrer(const Graph& g) : g_(g) {}

  // Inferred shapes of n's outputs (nullopt entries where nothing is known).
  std::vector<MaybeShape> infer(const Node& n) {
    std::vector<MaybeShape> out(size_t(n.num_outputs()));
    const std::string& op = n.op_type;
    if (n.domain == "gaf") {  // the elementwise and normalisation ops; the rest are typed by the pass that makes them
      static const std::set<std::string> gaf_same_as_input = {"Gelu", "Silu", "HardSwish", "LayerNormalization",
                                                              "RMSNormalization"};
      if (gaf_same_as_input.count(op)) out[0] = in(n, 0);
      return out;
    }
    if (!n.domain.empty()) return out;
    static const std::set<std::string> same_as_input = {
        "Softmax", "LogSoftmax", "Hardmax", "LayerNormalization", "BatchNormalization", "InstanceNormalization",
        "LpNormalization", "MeanVarianceNormalization", "Identity", "Dropout", "CumSum", "Trilu", "Cast",
        "CastLike", "Clip", "PRelu", "QuantizeLinear", "DequantizeLinear", "Bernoulli", "RandomNormalLike",
        "RandomUniformLike"};
    if (same_as_input.count(op)) {
      out[0] = in(n, 0);
    } else if (op == "Where" || op == "Sum" || op == "Mean" || op == "Max" || op == "Min" ||
               (op_kind(n) <= OpKind::Broadcast && n.num_outputs() == 1 && !n.has_attr("broadcast"))) {
      std::vector<MaybeShape> ins;
      for (int i = 0; i < n.num_inputs(); ++i)
        if (n.input(i)) ins.push_back(in(n, i));
      if (!ins.empty()) out[0] = broadcast(ins);
    } else if (op == "Transpose") {
      auto s = in(n, 0);
      auto perm = rewrite::transpose_perm(n);
      if (s && perm && perm->size() == s->size()) {
        Shape r;
        for (int64_t a : *perm) r.push_back((*s)[size_t(a)]);
        out[0] = r;
      }
    } else if (op == "Reshape") {
      out[0] = reshape(n);
    } else if (op == "Flatten") {
      out[0] = flatten(n);
    } else if (op == "Squeeze" || op == "Unsqueeze") {
      out[0] = squeeze(n, op == "Unsqueeze");
    } else if (op == "Slice") {
      out[0] = slice(n);
    } else if (op == "Concat") {
      out[0] = concat(n);
    } else if (op == "Gather") {
      auto d = in(n, 0), idx = in(n, 1);
      if (d && idx && !d->empty()) {
        int64_t axis = n.attr_int("axis", 0);
        if (axis < 0) axis += int64_t(d->size());
        if (axis >= 0 && axis < int64_t(d->size())) {
          Shape r(d->begin(), d->begin() + axis);
          r.insert(r.end(), idx->begin(), idx->end());
          r.insert(r.end(), d->begin() + axis + 1, d->end());
          out[0] = r;
        }
      }
    } else if (op == "Expand") {
      if (auto target = shape_of_contents(n.input(1))) out[0] = broadcast({in(n, 0), *target});
    } else if (op == "MatMul") {
      out[0] = matmul(n);
    } else if (op == "Gemm") {
      auto a = in(n, 0), b = in(n, 1);
      if (a && b && a->size() == 2 && b->size() == 2)
        out[0] = Shape{(*a)[n.attr_int("transA", 0) ? 1 : 0], (*b)[n.attr_int("transB", 0) ? 0 : 1]};
    } else if (op.rfind("Reduce", 0) == 0) {
      out[0] = reduce(n);
    } else if (op == "Shape") {
      if (auto s = in(n, 0)) {
        const auto [b, e] = rewrite::shape_range(n, int64_t(s->size()));
        out[0] = Shape{Dim(e - b)};
      }
    } else if (op == "ConstantOfShape") {
      out[0] = shape_of_contents(n.input(0));
    } else if (op == "Split") {
      split(n, out);
    } else if (op == "Range") {
      out[0] = range(n);
    } else if (op == "Conv") {
      out[0] = conv(n);
    } else if (op == "GlobalAveragePool" || op == "GlobalMaxPool") {
      if (auto x = in(n, 0); x && x->size() >= 2) {
        Shape r(x->begin(), x->begin() + 2);
        r.resize(x->size(), Dim(1));
        out[0] = r;
      }
    }
    return out;
  }

  // Records what n's output holds when it is shape arithmetic (see the header); call in graph order.
  void track(const Node& n) {
    if (!n.domain.empty() || n.num_outputs() < 1) return;
    const std::string& op = n.op_type;
    std::optional<SymInts> r;
    if (op == "Shape") {
      if (auto x = in(n, 0)) {
        const auto [b, e] = rewrite::shape_range(n, int64_t(x->size()));
        r = SymInts();
        for (int64_t i = b; i < e; ++i) r->push_back(SymInt::of((*x)[size_t(i)]));
      }
    } else if (op == "Identity" || op == "Unsqueeze" || op == "Squeeze" ||
               (op == "Cast" && is_int(DType(n.attr_int("to", 0))))) {
      r = contents(n.input(0));
    } else if (op == "Gather" && n.attr_int("axis", 0) == 0) {
      auto data = contents(n.input(0));
      auto idx = ints(n.input(1));
      if (data && idx) {
        const int64_t len = int64_t(data->size());
        r = SymInts();
        for (int64_t i : *idx) {
          if (i < -len || i >= len) return;
          r->push_back((*data)[size_t(i < 0 ? i + len : i)]);
        }
      }
    } else if (op == "Concat" && (n.attr_int("axis", 0) == 0 || n.attr_int("axis", 0) == -1)) {
      r = SymInts();
      for (int i = 0; i < n.num_inputs() && r; ++i) {
        auto part = contents(n.input(i));
        if (!part) return;
        r->insert(r->end(), part->begin(), part->end());
      }
    } else if (op == "Add" || op == "Sub" || op == "Mul") {
      r = arithmetic(op, contents(n.input(0)), contents(n.input(1)));
    } else if (op == "Slice") {
      auto data = contents(n.input(0));
      auto starts = ints(n.input(1)), ends = ints(n.input(2));
      auto ax = n.input(3) ? ints(n.input(3)) : std::vector<int64_t>{0};
      auto steps = n.input(4) ? ints(n.input(4)) : std::vector<int64_t>{1};
      if (!data || !starts || !ends || !ax || !steps || starts->size() != 1 || ends->size() != 1 ||
          ax->size() != 1 || ((*ax)[0] != 0 && (*ax)[0] != -1) || steps->size() != 1 || (*steps)[0] != 1)
        return;
      const int64_t len = int64_t(data->size());
      auto clamp = [&](int64_t a) { return std::clamp(a < 0 ? a + len : a, int64_t(0), len); };
      const int64_t b = clamp((*starts)[0]), e = clamp((*ends)[0]);
      r = SymInts(data->begin() + b, data->begin() + std::max(b, e));
    }
    if (r) contents_[n.output(0)] = std::move(*r);
  }

 private:
  using SymInts = std::vector<SymInt>;

  static bool is_int(DType t) { return t == DType::Int64 || t == DType::Int32; }

  // v's elements: from a constant (of rank 0 or 1), or as tracked.
  std::optional<SymInts> contents(const Value* v) const {
    if (!v) return std::nullopt;
    if (const Tensor* t = rewrite::constant_of(g_, v)) {
      if (!is_int(t->dtype()) || t->rank() > 1) return std::nullopt;
      SymInts r;
      for (int64_t x : t->to_int_vector()) r.push_back(SymInt::number(x));
      return r;
    }
    auto it = contents_.find(v);
    if (it != contents_.end()) return it->second;
    if (is_int(v->type.dtype) && v->type.has_static_shape() && v->type.shape->size() == 1)
      return SymInts(size_t(v->type.static_dims()[0]));  // its length, each element unknown
    return std::nullopt;
  }
  // Elementwise a op b on shape elements (numpy broadcast of lengths 1 and n), as affine expressions: a product
  // needs a number on one side; anything else is unknown.
  static std::optional<SymInts> arithmetic(const std::string& op, const std::optional<SymInts>& a,
                                           const std::optional<SymInts>& b) {
    if (!a || !b || (a->size() != b->size() && a->size() != 1 && b->size() != 1)) return std::nullopt;
    SymInts r(std::max(a->size(), b->size()));
    for (size_t i = 0; i < r.size(); ++i) {
      const SymInt& x = (*a)[a->size() == 1 ? 0 : i];
      const SymInt& y = (*b)[b->size() == 1 ? 0 : i];
      if (op == "Add") r[i] = x + y;
      else if (op == "Sub") r[i] = x - y;
      else if (auto k = y.num()) r[i] = x * *k;
      else if (auto k = x.num()) r[i] = y * *k;
    }
    return r;
  }

  // The shape a shape input (Expand's, ConstantOfShape's) describes.
  MaybeShape shape_of_contents(const Value* v) const {
    auto c = contents(v);
    if (!c) return std::nullopt;
    Shape r;
    for (const SymInt& e : *c) r.push_back(e.dim());
    return r;
  }

  MaybeShape in(const Node& n, int i) const {
    const Value* v = n.input(i);
    if (!v || !v->type.shape) return std::nullopt;
    return v->type.shape;
  }
  std::optional<std::vector<int64_t>> ints(const Value* v) const {
    const Tensor* t = v ? rewrite::constant_of(g_, v) : nullptr;
    if (!t || (t->dtype() != DType::Int64 && t->dtype() != DType::Int32)) return std::nullopt;
    return t->to_int_vector();
  }
  // Axes from the attribute (older opsets) or the constant input `i`; nullopt when neither is known.
  std::optional<std::vector<int64_t>> axes(const Node& n, int i) const {
    if (n.has_attr("axes")) return n.attr_ints("axes");
    if (n.input(i)) return ints(n.input(i));
    return std::vector<int64_t>{};
  }

  // Conv: [N, M, out...], out = floor((in + pads - dilation (k - 1) - 1) / stride) + 1, or ceil(in / stride)
  // for auto_pad SAME_*; M and k from the weights [M, C/group, k...]. A spatial dim is known when its input is.
  MaybeShape conv(const Node& n) const {
    auto x = in(n, 0), w = in(n, 1);
    if (!x || !w || x->size() < 3 || w->size() != x->size()) return std::nullopt;
    const size_t r = x->size() - 2;
    std::vector<int64_t> k = n.attr_ints("kernel_shape");
    if (k.empty())
      for (size_t i = 0; i < r; ++i) {
        if (!(*w)[2 + i].is_static()) return std::nullopt;
        k.push_back((*w)[2 + i].value());
      }
    std::vector<int64_t> st = n.attr_ints("strides"), dil = n.attr_ints("dilations"), pads = n.attr_ints("pads");
    st.resize(r, 1);
    dil.resize(r, 1);
    pads.resize(2 * r, 0);
    if (k.size() != r) return std::nullopt;
    const std::string pad_mode = n.attr_string("auto_pad", "NOTSET");
    Shape out = {(*x)[0], (*w)[0]};
    for (size_t i = 0; i < r; ++i) {
      const Dim& d = (*x)[2 + i];
      if (!d.is_static() || st[i] <= 0) {
        out.emplace_back();
        continue;
      }
      int64_t o;
      if (pad_mode == "SAME_UPPER" || pad_mode == "SAME_LOWER")
        o = (d.value() + st[i] - 1) / st[i];
      else {
        const int64_t p = pad_mode == "VALID" ? 0 : pads[i] + pads[i + r];
        o = (d.value() + p - dil[i] * (k[i] - 1) - 1) / st[i] + 1;
      }
      if (o <= 0) return std::nullopt;
      out.push_back(Dim(o));
    }
    return out;
  }

  MaybeShape reshape(const Node& n) const {
    auto s = in(n, 0);
    auto target = contents(n.input(1));
    if (!target) return std::nullopt;
    bool allowzero = n.attr_int("allowzero", 0);
    Shape r;
    int infer = -1;
    for (size_t i = 0; i < target->size(); ++i) {
      const SymInt& e = (*target)[i];
      if (!e.num()) {
        r.push_back(e.dim());  // a symbol, or unknown
        continue;
      }
      int64_t t = *e.num();
      if (t == 0 && !allowzero) {
        if (!s || i >= s->size()) return std::nullopt;
        r.push_back((*s)[i]);
      } else if (t == -1) {
        infer = int(i);
        r.emplace_back();
      } else {
        r.emplace_back(t);
      }
    }
    if (infer >= 0 && s && std::all_of(s->begin(), s->end(), [](const Dim& d) { return d.is_static(); })) {
      int64_t total = 1, rest = 1;
      for (const Dim& d : *s) total *= d.value();
      for (size_t i = 0; i < r.size(); ++i)
        if (int(i) != infer) {
          if (!r[i].is_static()) return r;
          rest *= r[i].value();
        }
      if (rest > 0 && total % rest == 0) r[size_t(infer)] = Dim(total / rest);
    }
    return r;
  }

  MaybeShape flatten(const Node& n) const {
    auto s = in(n, 0);
    if (!s) return std::nullopt;
    int64_t axis = n.attr_int("axis", 1);
    if (axis < 0) axis += int64_t(s->size());
    if (axis < 0 || axis > int64_t(s->size())) return std::nullopt;
    auto prod = [&](size_t b, size_t e) {
      int64_t p = 1;
      for (size_t i = b; i < e; ++i) {
        if (!(*s)[i].is_static()) return Dim();
        p *= (*s)[i].value();
      }
      return Dim(p);
    };
    return Shape{prod(0, size_t(axis)), prod(size_t(axis), s->size())};
  }

  MaybeShape squeeze(const Node& n, bool unsqueeze) const {
    auto s = in(n, 0);
    auto ax = axes(n, 1);
    if (!s || !ax) return std::nullopt;
    if (unsqueeze) {
      int64_t rank = int64_t(s->size() + ax->size());
      std::vector<bool> inserted(size_t(rank), false);
      for (int64_t a : *ax) {
        a = a < 0 ? a + rank : a;
        if (a < 0 || a >= rank || inserted[size_t(a)]) return std::nullopt;
        inserted[size_t(a)] = true;
      }
      Shape r;
      size_t k = 0;
      for (int64_t i = 0; i < rank; ++i) r.push_back(inserted[size_t(i)] ? Dim(1) : (*s)[k++]);
      return r;
    }
    int64_t rank = int64_t(s->size());
    std::vector<bool> drop(s->size(), false);
    if (ax->empty()) {  // every static 1; an unknown dim makes the rank unknown
      for (size_t i = 0; i < s->size(); ++i) {
        if (!(*s)[i].is_static()) return std::nullopt;
        drop[i] = (*s)[i].value() == 1;
      }
    }
    for (int64_t a : *ax) {
      a = a < 0 ? a + rank : a;
      if (a < 0 || a >= rank) return std::nullopt;
      drop[size_t(a)] = true;
    }
    Shape r;
    for (size_t i = 0; i < s->size(); ++i)
      if (!drop[i]) r.push_back((*s)[i]);
    return r;
  }

  // Slice whose starts or ends are computed, step 1 (the rank stays; any other slice of a dim leaves it unknown).
  // Over a symbolic dim D: the end is D (or past it, INT64_MAX) and the start a known size b: D - b; the start may
  // count from the end (-k: D - k). Over a static dim k >= 1 (a buffer of the maximum length): from 0 to a
  // size e gives min(e,k) (GPT-2's causal mask, bias[:, :, :L, :L]), from b to e with e - b a size E gives
  // cut(E,k), E where e <= k (bias[:, :, L-T:L]). Both broadcast against E as E in every valid run.
  MaybeShape symbolic_slice(const Node& n, const Shape& s, std::vector<int64_t> ax,
                            const std::vector<int64_t>& steps) const {
    auto starts = contents(n.input(1)), ends = contents(n.input(2));
    if (!starts || !ends || starts->size() != ends->size()) return std::nullopt;
    const int64_t rank = int64_t(s.size());
    if (ax.empty())
      for (int64_t k = 0; k < int64_t(starts->size()); ++k) ax.push_back(k);
    if (ax.size() != starts->size() || (!steps.empty() && steps.size() != ax.size())) return std::nullopt;
    Shape r = s;
    for (size_t k = 0; k < ax.size(); ++k) {
      const int64_t a = ax[k] < 0 ? ax[k] + rank : ax[k];
      if (a < 0 || a >= rank) return std::nullopt;
      r[size_t(a)] = Dim();
      if (!steps.empty() && steps[k] != 1) continue;
      const Dim& d = s[size_t(a)];
      SymInt b = (*starts)[k], e = (*ends)[k];
      if (!b.known() || !e.known()) continue;
      if (d.is_static()) {
        if (d.value() < 1 || e.num() || b.num().value_or(0) < 0) continue;
        if (b.is(0)) r[size_t(a)] = Dim(min_symbol(e.text(), d.value()));
        else if (!(e - b).num()) r[size_t(a)] = Dim(cut_symbol((e - b).text(), d.value()));
        continue;
      }
      r[size_t(a)] = slice_of_symbol(SymInt::of(d), b, e);
    }
    return r;
  }

  // The length of x[b:e] (step 1) over a symbolic dim D when the end is D or past it: D - b, with a start
  // counting from the end (-k) as D - k.
  static Dim slice_of_symbol(const SymInt& D, SymInt b, SymInt e) {
    if (!D.known() || !b.known() || !e.known()) return Dim();
    if (auto bn = b.num(); bn && *bn < 0) b = D + b;
    if (auto en = e.num(); en && *en >= std::numeric_limits<int32_t>::max()) e = D;
    if (!(e == D) || (b.num() && *b.num() < 0)) return Dim();
    return (D - b).dim();
  }

  MaybeShape slice(const Node& n) const {
    auto s = in(n, 0);
    if (!s) return std::nullopt;
    std::optional<std::vector<int64_t>> starts, ends, ax, steps;
    if (n.has_attr("starts")) {  // opset < 10
      starts = n.attr_ints("starts"), ends = n.attr_ints("ends"), ax = n.attr_ints("axes");
    } else {
      starts = ints(n.input(1)), ends = ints(n.input(2));
      ax = n.input(3) ? ints(n.input(3)) : std::vector<int64_t>{};
      steps = n.input(4) ? ints(n.input(4)) : std::vector<int64_t>{};
      if ((!starts || !ends) && ax && steps) return symbolic_slice(n, *s, *ax, *steps);
    }
    if (!starts || !ends || !ax || starts->size() != ends->size()) return std::nullopt;
    if (!steps) return std::nullopt;
    if (ax->empty()) {
      ax->resize(starts->size());
      std::iota(ax->begin(), ax->end(), int64_t(0));
    }
    if (ax->size() != starts->size() || (!steps->empty() && steps->size() != starts->size())) return std::nullopt;
    Shape r = *s;
    const int64_t rank = int64_t(s->size());
    for (size_t k = 0; k < ax->size(); ++k) {
      int64_t a = (*ax)[k] < 0 ? (*ax)[k] + rank : (*ax)[k];
      if (a < 0 || a >= rank) return std::nullopt;
      const Dim& d = (*s)[size_t(a)];
      if (!d.is_static()) {
        const bool unit = steps->empty() || (*steps)[k] == 1;
        r[size_t(a)] = unit ? slice_of_symbol(SymInt::of(d), SymInt::number((*starts)[k]), SymInt::number((*ends)[k]))
                            : Dim();
        continue;
      }
      int64_t dim = d.value(), step = steps->empty() ? 1 : (*steps)[k];
      if (step == 0) return std::nullopt;
      auto clampi = [&](int64_t v, int64_t lo, int64_t hi) {
        if (v < 0) v += dim;
        return std::clamp(v, lo, hi);
      };
      int64_t b = step > 0 ? clampi((*starts)[k], 0, dim) : clampi((*starts)[k], -1, dim - 1);
      int64_t e = step > 0 ? clampi((*ends)[k], 0, dim) : clampi((*ends)[k], -1, dim - 1);
      int64_t len = step > 0 ? (e > b ? (e - b + step - 1) / step : 0) : (b > e ? (b - e - step - 1) / -step : 0);
      r[size_t(a)] = Dim(len);
    }
    return r;
  }

  MaybeShape concat(const Node& n) const {
    std::vector<Shape> shapes;
    for (int i = 0; i < n.num_inputs(); ++i) {
      auto s = in(n, i);
      if (!s) return std::nullopt;
      shapes.push_back(*s);
    }
    if (shapes.empty() || shapes[0].empty()) return std::nullopt;
    const int64_t rank = int64_t(shapes[0].size());
    int64_t axis = n.attr_int("axis", 0);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return std::nullopt;
    Shape r = shapes[0];
    SymInt total = SymInt::number(0);  // past + seq for a KV cache's Concat(past, new)
    for (const Shape& s : shapes) {
      if (int64_t(s.size()) != rank) return std::nullopt;
      total = total + SymInt::of(s[size_t(axis)]);
      for (int64_t i = 0; i < rank; ++i)
        if (i != axis && !r[size_t(i)].is_known()) r[size_t(i)] = s[size_t(i)];
    }
    r[size_t(axis)] = total.dim();
    return r;
  }

  MaybeShape matmul(const Node& n) const {
    auto a = in(n, 0), b = in(n, 1);
    if (!a || !b || a->empty() || b->empty()) return std::nullopt;
    bool a1 = a->size() == 1, b1 = b->size() == 1;
    Shape av = a1 ? Shape{Dim(1), (*a)[0]} : *a;
    Shape bv = b1 ? Shape{(*b)[0], Dim(1)} : *b;
    auto batch = broadcast({Shape(av.begin(), av.end() - 2), Shape(bv.begin(), bv.end() - 2)});
    if (!batch) return std::nullopt;
    Shape r = *batch;
    if (!a1) r.push_back(av[av.size() - 2]);
    if (!b1) r.push_back(bv.back());
    return r;
  }

  MaybeShape reduce(const Node& n) const {
    auto s = in(n, 0);
    auto ax = axes(n, 1);
    if (!s || !ax) return std::nullopt;
    if (ax->empty() && n.attr_int("noop_with_empty_axes", 0)) return s;  // reduces nothing
    auto reduced = ops::reduced_axes(n, int64_t(s->size()), &*ax);
    if (!reduced) return std::nullopt;
    std::vector<bool> red(s->size(), false);
    for (int64_t a : *reduced) red[size_t(a)] = true;
    bool keep = n.attr_int("keepdims", 1);
    Shape r;
    for (size_t i = 0; i < s->size(); ++i) {
      if (!red[i]) r.push_back((*s)[i]);
      else if (keep) r.emplace_back(1);
    }
    return r;
  }

  // Range(start, limit, delta): [max(0, ceil((limit - start) / delta))]; limit - start when delta is 1 (positions
  // Range(past, past + seq, 1) have seq elements).
  MaybeShape range(const Node& n) const {
    auto start = contents(n.input(0)), limit = contents(n.input(1)), delta = contents(n.input(2));
    if (!start || !limit || !delta || start->size() != 1 || limit->size() != 1 || delta->size() != 1)
      return std::nullopt;
    const SymInt len = (*limit)[0] - (*start)[0];
    const std::optional<int64_t> d = (*delta)[0].num(), l = len.num();
    if (l && d && *d != 0) return Shape{Dim(std::max<int64_t>(0, (*l + *d - (*d > 0 ? 1 : -1)) / *d))};
    if (d == 1 && len.known()) return Shape{len.dim()};
    return std::nullopt;
  }

  void split(const Node& n, std::vector<MaybeShape>& out) const {
    auto s = in(n, 0);
    if (!s || s->empty()) return;
    const int64_t rank = int64_t(s->size());
    int64_t axis = n.attr_int("axis", 0);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return;
    std::optional<std::vector<int64_t>> parts =
        n.has_attr("split") ? std::optional(n.attr_ints("split")) : (n.input(1) ? ints(n.input(1)) : std::nullopt);
    const Dim& d = (*s)[size_t(axis)];
    if (!parts && n.input(1) == nullptr && !n.has_attr("split") && d.is_static()) {
      int64_t k = n.num_outputs(), chunk = (d.value() + k - 1) / k;  // equal parts, the last one smaller
      parts = std::vector<int64_t>();
      for (int64_t i = 0, left = d.value(); i < k; ++i, left -= chunk) parts->push_back(std::min(chunk, left));
    }
    if (!parts || int(parts->size()) != n.num_outputs()) return;
    for (int i = 0; i < n.num_outputs(); ++i) {
      Shape r = *s;
      r[size_t(axis)] = Dim((*parts)[size_t(i)]);
      out[size_t(i)] = r;
    }
  }

  const Graph& g_;
  std::map<const Value*, SymInts> contents_;
};

// Fills the unknown parts of `t` from `s`; whether anything changed. A clash with a known dim drops `s`.
bool merge(TensorType& t, const Shape& s) {
  if (!t.shape) {
    t.shape = s;  // the rank at least
    return true;
  }
  if (t.shape->size() != s.size()) return false;
  for (size_t i = 0; i < s.size(); ++i)
    if ((*t.shape)[i].is_static() && s[i].is_static() && (*t.shape)[i].value() != s[i].value()) return false;
  bool changed = false;
  for (size_t i = 0; i < s.size(); ++i)
    if (!(*t.shape)[i].is_known() && s[i].is_known()) (*t.shape)[i] = s[i], changed = true;
  return changed;
}

class ShapeInference final : public Pass {
 public:
  std::string_view name() const override { return "shape-inference"; }
  bool run(Graph& g, PassContext& ctx) override {
    Inferrer inf(g);
    int count = 0;
    for (Node* n : g.nodes()) {
      inf.track(*n);
      bool todo = false;
      for (const Value* o : n->outputs()) todo |= !o->absent_output && !typed(o->type);
      if (!todo) continue;
      auto shapes = inf.infer(*n);
      std::optional<std::vector<std::optional<TensorType>>> onnx_types;  // asked once, for what our rules leave
      for (int k = 0; k < n->num_outputs(); ++k) {
        Value* o = n->output(k);
        if (o->absent_output) continue;
        if (shapes[size_t(k)] && merge(o->type, *shapes[size_t(k)])) ++count;
        // ONNX's inference for what our rules leave: unknown dims, or the element type of a value a rewrite made
        // without one (decompose_gaf_ops' outputs, typed here so the written model lists them)
        if (typed(o->type) || n->domain == "gaf.fused") continue;
        if (!onnx_types) onnx_types = onnx_io::infer_node_types(*n);
        const auto& t = (*onnx_types)[size_t(k)];
        if (!t || (o->type.dtype != DType::Undefined && t->dtype != o->type.dtype)) continue;
        bool changed = o->type.dtype == DType::Undefined && t->dtype != DType::Undefined;
        if (changed) o->type.dtype = t->dtype;
        if (t->shape) changed |= merge(o->type, *t->shape);
        count += changed;
      }
    }
    // A subgraph's captures (its last inputs, one per implicit input of the node holding it) take the types of the
    // enclosing values they stand for: an outer Constant is typed only after import, and a capture without a rank
    // would keep its readers out of any generated kernel when the subgraph is fused.
    for (Node* n : g.nodes())
      for (const auto& [attr, sub] : n->subgraphs()) {
        const auto& ins = sub->inputs();
        const size_t first = ins.size() >= size_t(n->implicit_inputs) ? ins.size() - size_t(n->implicit_inputs) : 0;
        for (size_t k = 0; first + k < ins.size(); ++k) {
          Value* capture = ins[first + k];
          const Value* outer = n->input(n->num_explicit_inputs() + int(k));
          if (outer && !capture->type.shape && outer->type.shape) {
            capture->type = outer->type;
            ++count;
          }
        }
      }
    // Backwards through Transposes: a fused body read back from ONNX knows its outputs (from the call site)
    // but not a Reshape by a computed shape that feeds one (the head split of attention).
    const std::vector<Node*> nodes = g.nodes();
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
      const Node& n = **it;
      if (n.op_type != "Transpose" || !n.domain.empty() || typed(n.input(0)->type) || !n.output(0)->type.shape) continue;
      auto perm = rewrite::transpose_perm(n);
      const Shape& o = *n.output(0)->type.shape;
      if (!perm || perm->size() != o.size()) continue;
      Shape s(o.size());
      for (size_t k = 0; k < o.size(); ++k) s[size_t((*perm)[k])] = o[k];
      count += merge(n.input(0)->type, s);
    }
    if (count) ctx.count(name(), count);
    return count > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> make_shape_inference() { return std::make_unique<ShapeInference>(); }

void infer_fused_body_shapes(Graph& g) {
  for (Graph* sub : graph_and_subgraphs(g))
    for (Node* n : sub->nodes()) {
      if (!n->body) continue;
      PassContext ctx;
      ShapeInference().run(*n->body, ctx);
    }
}

}  // namespace gaf
