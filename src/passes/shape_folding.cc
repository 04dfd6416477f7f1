// Shape arithmetic on static shapes. Exporters compute reshape targets at run time:
//
//   x -> Shape -> Gather -> Unsqueeze -> Concat -> Reshape(y, .)
//
// When x's shape is static, Shape(x) is a constant; constant folding then turns the whole chain into one
// constant shape input. This pass does the part folding cannot (Shape and Size read a non-constant tensor)
// and the reshape algebra that follows:
//   Shape(x) -> int64 constant of x's static dims (opset 15 start/end honoured; only the dims in that range need
//               to be static)
//   Size(x)  -> int64 scalar constant
//   Gather(Shape(x), i) -> int64 constant of dims i of x, when those are static: a model exported with a
//               symbolic batch still reads its static feature sizes (PyTorch's MultiheadAttention slices its
//               packed projection by Shape(qkv)[-1] / 3)
//   Gather(Shape(x), i) -> Gather(Shape(in), j) when dim i of x is a symbol graph input `in` has at dim j: a size
//               read from the input that declares it, so x (a head-split Q an exporter sizes the causal mask
//               by) need not be materialised for its shape alone
//   Reshape(Reshape(x, s1), s2) -> Reshape(x, s2)     when s2 is constant and copies no dim (no 0 entry)
//   Reshape(x, s) -> x                                 when x is static and s gives back x's own shape
// Dims stay untouched where they are symbolic or unknown.
#include <algorithm>

#include "gaf/passes.h"
#include "passes/rewrite_util.h"

namespace gaf {

namespace {

// The dims Reshape(x, shape) produces, when x's shape is static.
std::optional<std::vector<int64_t>> reshape_result(const std::vector<int64_t>& in, const Tensor& shape,
                                                   bool allowzero) {
  std::vector<int64_t> out = shape.to_int_vector();
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0 && !allowzero) {
      if (i >= in.size()) return std::nullopt;
      out[i] = in[i];
    }
    if (out[i] == -1) {
      if (infer >= 0) return std::nullopt;
      infer = int(i);
    } else if (out[i] < 0) {
      return std::nullopt;
    } else {
      known *= out[i];
    }
  }
  int64_t total = numel_of(in);
  if (infer >= 0) {
    if (known == 0 || total % known) return std::nullopt;
    out[infer] = total / known;
  } else if (known != total) {
    return std::nullopt;
  }
  return out;
}

class ShapeFolding final : public rewrite::RulePass {
 public:
  std::string_view name() const override { return "shape-folding"; }

 private:
  bool rule(rewrite::Rewriter& rw, Node& n) override {
    if (!n.domain.empty()) return false;
    if (n.op_type == "Shape" || n.op_type == "Size") return fold_shape(rw, n);
    if (n.op_type == "Gather") return fold_shape_gather(rw, n) || reanchor_shape_gather(rw, n);
    if (n.op_type == "Reshape") return collapse_reshape(rw, n) || drop_noop_reshape(rw, n);
    return false;
  }

  // The dims Shape node n returns (its start/end range of x's dims), each nullopt where not static; nullopt when
  // x's rank is unknown.
  static std::optional<std::vector<std::optional<int64_t>>> shape_dims(const Node& n) {
    const Value* x = n.input(0);
    if (!x || !x->type.shape) return std::nullopt;
    const Shape& s = *x->type.shape;
    const auto [start, end] = rewrite::shape_range(n, int64_t(s.size()));
    std::vector<std::optional<int64_t>> dims;
    for (int64_t i = start; i < end; ++i)
      dims.push_back(s[size_t(i)].is_static() ? std::optional<int64_t>(s[size_t(i)].value()) : std::nullopt);
    return dims;
  }

  // n's output -> constant t; n and `also` (its producers) go when nothing else reads them.
  static void replace_with(rewrite::Rewriter& rw, Node& n, const Tensor& t, Node* also = nullptr) {
    Value* out = n.output(0);
    rw.replace(out, rw.add_constant(out->name() + "__folded", t));
    std::vector<Node*> gone = {&n};
    if (also) gone.push_back(also);
    rw.erase_unused(gone);
  }

  // Shape(x) -> dims of x; Size(x) -> element count of x
  static bool fold_shape(rewrite::Rewriter& rw, Node& n) {
    if (n.op_type == "Size") {
      const Value* x = n.input(0);
      if (!x || !x->type.has_static_shape()) return false;
      replace_with(rw, n, Tensor::scalar<int64_t>(numel_of(x->type.static_dims())));
      return true;
    }
    auto dims = shape_dims(n);
    if (!dims || std::any_of(dims->begin(), dims->end(), [](const auto& d) { return !d; })) return false;
    std::vector<int64_t> part;
    for (const auto& d : *dims) part.push_back(*d);
    replace_with(rw, n, Tensor::from<int64_t>({int64_t(part.size())}, part));
    return true;
  }

  // Gather(Shape(x), i) -> dims i of x (i a constant scalar or list, negative from the end)
  static bool fold_shape_gather(rewrite::Rewriter& rw, Node& n) {
    Node* shape = rewrite::producer_op(n.input(0), "Shape");
    const Tensor* idx = rewrite::constant_of(rw.graph(), n.input(1));
    if (!shape || !idx || n.attr_int("axis", 0) != 0 || idx->rank() > 1 ||
        (idx->dtype() != DType::Int64 && idx->dtype() != DType::Int32))
      return false;
    auto dims = shape_dims(*shape);
    if (!dims) return false;
    const int64_t len = int64_t(dims->size());
    std::vector<int64_t> picked;
    for (int64_t i : idx->to_int_vector()) {
      if (i < -len || i >= len) return false;  // out of range: the runtime's error to give
      const auto& d = (*dims)[size_t(i < 0 ? i + len : i)];
      if (!d) return false;
      picked.push_back(*d);
    }
    replace_with(rw, n,
                 idx->rank() == 0 ? Tensor::scalar<int64_t>(picked[0])
                                  : Tensor::from<int64_t>({int64_t(picked.size())}, picked),
                 shape);
    return true;
  }

  // Gather(Shape(x), i) -> Gather(Shape(in), j), dim i of x being the symbol dim j of graph input `in`
  static bool reanchor_shape_gather(rewrite::Rewriter& rw, Node& n) {
    Graph& g = rw.graph();
    Node* shape = rewrite::producer_op(n.input(0), "Shape");
    const Tensor* idx = rewrite::constant_of(g, n.input(1));
    if (!shape || !idx || n.attr_int("axis", 0) != 0 || idx->numel() != 1 || shape->has_attr("start") ||
        shape->has_attr("end") || !shape->input(0)->producer() || !shape->input(0)->type.shape)
      return false;
    const Shape& s = *shape->input(0)->type.shape;
    int64_t i = idx->get_int(0);
    if (i < -int64_t(s.size()) || i >= int64_t(s.size())) return false;
    const Dim& d = s[size_t(i < 0 ? i + int64_t(s.size()) : i)];
    if (!d.is_known() || d.is_static()) return false;
    for (Value* in : g.inputs()) {
      if (in->is_constant() || !in->type.shape) continue;
      const Shape& is = *in->type.shape;
      auto at = std::find(is.begin(), is.end(), d);
      if (at == is.end()) continue;
      Tensor j = idx->rank() == 0 ? Tensor::scalar<int64_t>(at - is.begin())
                                  : Tensor::from<int64_t>({1}, std::vector<int64_t>{at - is.begin()});
      Node* sh = rw.add_node("Shape", {in}, {shape->output(0)}, "", shape->opset);
      sh->output(0)->type = TensorType{DType::Int64, Shape{Dim(int64_t(is.size()))}};
      n.set_input(0, sh->output(0));
      n.set_input(1, rw.add_constant(n.output(0)->name() + "__dim", std::move(j)));
      rw.erase_unused({shape});
      return true;
    }
    return false;
  }

  // Reshape(Reshape(x, s1), s2) -> Reshape(x, s2)
  static bool collapse_reshape(rewrite::Rewriter& rw, Node& n) {
    Graph& g = rw.graph();
    Node* inner = rewrite::producer_op(n.input(0), "Reshape");
    const Tensor* shape = rewrite::constant_of(g, n.input(1));
    if (!inner || !shape) return false;
    if (!n.attr_int("allowzero", 0)) {
      std::vector<int64_t> s = shape->to_int_vector();
      if (std::find(s.begin(), s.end(), 0) != s.end()) return false;
    }
    n.set_input(0, inner->input(0));
    rw.erase_unused({inner});
    return true;
  }

  // Reshape(x, s) -> x when the result has x's shape
  static bool drop_noop_reshape(rewrite::Rewriter& rw, Node& n) {
    Graph& g = rw.graph();
    Value* x = n.input(0);
    const Tensor* shape = rewrite::constant_of(g, n.input(1));
    if (!x || !shape || !x->type.has_static_shape() || !rw.can_replace(n.output(0), x)) return false;
    std::vector<int64_t> dims = x->type.static_dims();
    auto out = reshape_result(dims, *shape, n.attr_int("allowzero", 0) != 0);
    if (!out || *out != dims) return false;
    rw.replace(n.output(0), x, false);
    rw.erase_unused({&n});
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_shape_folding() { return std::make_unique<ShapeFolding>(); }

}  // namespace gaf
