// Decomposes our own domain's ops ("gaf": Gelu, Silu, HardSwish, LayerNormalization, RMSNormalization — what the
// recognition passes produce for opsets that lack the standard op) back into standard ONNX ops, in the graph and
// in every fused body. Export for other runtimes runs it, so a written model needs nothing but standard ONNX and
// its gaf.fused functions.
//
//   Gelu(x)               -> Mul(Mul(x, Add(Erf(Div(x, sqrt2)), 1)), 0.5)          (tanh form likewise)
//   Silu(x)               -> Mul(x, Sigmoid(x))
//   HardSwish(x)          -> Mul(x, HardSigmoid<alpha=1/6, beta=1/2>(x))
//   LayerNormalization    -> standard LayerNormalization at opset >= 17, else ReduceMean/Sub/Mul/ReduceMean/
//                            Add eps/Sqrt/Div/Mul scale/Add bias
//   RMSNormalization      -> Div(x, Sqrt(Add(ReduceMean(Mul(x, x)), eps))) * scale
//   Conv, MaxPool, AveragePool (layout NHWC) -> Transpose(op(Transpose(x, to NCHW)), to NHWC)
//   ExpandDepthwiseConv   -> Transpose(Act(Conv<group E>(Act(Conv(Transpose(x), W1, B1)), W2, B2))) (NCHW inside),
//                            Act a Clip and then Silu or HardSwish as above, each where the op has it
//   SqueezeExcitation     -> Mul(x, Gate(Conv(Act(Conv(ReduceMean(x), W1, B1)), W2, B2))) (the gates alone with
//                            gate_only), the pooled channels transposed to NCHW and the gates back when channels-last
//   ChannelShuffle        -> Slice(Reshape(Transpose(Reshape(Concat(X_g)))), one per output) (the channel shuffle)
//   CompressedMatMul      -> MatMul(A, [Transpose](DequantizeLinear(W, scale, 0, axis = the column axis))) for int8
//                            W (Mul(Cast(W), scale) below opset 13), MatMul(A, [Transpose](Cast(W))) for bfloat16
//   Attention             -> Transpose(MatMul(Softmax(MatMul(Q', Transpose(K')) * scale [+ mask]), V'), out_perm)
//                            with Q' = Transpose(Q, q_perm) and so on (a Transpose only where a perm is given)
#include <cmath>
#include <limits>
#include <numeric>

#include "gaf/passes.h"

namespace gaf {

namespace {

class Decomposer {
 public:
  Decomposer(Graph& g, int opset) : g_(g), opset_(opset) {}

  int run() {
    int count = 0;
    for (Node* n : g_.nodes()) {
      if (n->body) count += Decomposer(*n->body, opset_).run();
      if (n->domain != "gaf") continue;
      if (decompose(n)) ++count;
    }
    if (count) {
      g_.topo_sort();
      g_.remove_dead_values();
    }
    return count;
  }

 private:
  Value* scalar(float v) { return g_.add_constant(g_.unique_name("gaf_decomposed_const"), Tensor::scalar<float>(v)); }
  Value* op(Node* before, const std::string& type, std::vector<Value*> ins, std::map<std::string, Attribute> attrs = {},
            const TensorType* type_of = nullptr) {
    Node* n = g_.insert_node_before(before, type, ins, {g_.unique_name(before->output(0)->name() + "_" + type)},
                                    before->name.empty() ? "" : g_.unique_name(before->name + "/" + type));
    n->attrs = std::move(attrs);
    n->opset = opset_;
    if (type_of) n->output(0)->type = *type_of;
    return n->output(0);
  }
  void replace(Node* n, Value* result) { replace_all(n, {result}); }

  // Output k of n becomes results[k], which takes its type and name; n goes. Outputs past the results must be
  // unread.
  void replace_all(Node* n, const std::vector<Value*>& results) {
    for (int k = int(results.size()); k < n->num_outputs(); ++k)
      GAF_CHECK(n->output(k)->uses().empty() && !g_.is_graph_output(n->output(k)),
                "{}: its extra outputs cannot be expressed in standard ONNX here", n->describe());
    for (size_t k = 0; k < results.size(); ++k) {
      Value* out = n->output(int(k));
      std::string name = out->name();
      results[k]->type = out->type;
      g_.replace_all_uses(out, results[k]);
      g_.rename(out, g_.unique_name(name + "__decomposed"));
      g_.rename(results[k], name);
    }
    g_.remove_node(n);
  }

  bool decompose(Node* n) {
    Value* x = n->input(0);
    const TensorType* t = &x->type;
    const std::string& kind = n->op_type;
    if (kind == "Gelu") {
      Value* inner;
      if (n->attr_string("approximate", "none") == "tanh") {
        Value* cube = op(n, "Mul", {op(n, "Mul", {x, x}, {}, t), x}, {}, t);
        Value* s = op(n, "Add", {x, op(n, "Mul", {cube, scalar(0.044715f)}, {}, t)}, {}, t);
        inner = op(n, "Tanh", {op(n, "Mul", {s, scalar(float(std::sqrt(2.0 / M_PI)))}, {}, t)}, {}, t);
      } else {
        inner = op(n, "Erf", {op(n, "Div", {x, scalar(float(std::sqrt(2.0)))}, {}, t)}, {}, t);
      }
      Value* y = op(n, "Mul", {op(n, "Mul", {x, op(n, "Add", {inner, scalar(1.0f)}, {}, t)}, {}, t), scalar(0.5f)}, {}, t);
      replace(n, y);
      return true;
    }
    if (kind == "Silu" || kind == "HardSwish") {
      replace(n, activation(n, x, kind, t));
      return true;
    }
    if (kind == "LayerNormalization" || kind == "RMSNormalization") {
      bool centre = kind == "LayerNormalization";
      if (centre && opset_ >= 17) {
        n->domain = "";
        n->opset = opset_;
        return true;
      }
      GAF_CHECK(x->type.shape, "{}: the rank of its input is unknown", n->describe());
      int64_t rank = int64_t(x->type.shape->size());
      int64_t axis = n->attr_int("axis", -1);
      if (axis < 0) axis += rank;
      std::vector<int64_t> axes;
      for (int64_t a = axis; a < rank; ++a) axes.push_back(a);
      Value* d = centre ? op(n, "Sub", {x, reduce_mean(n, x, axes)}, {}, t) : x;
      Value* var = reduce_mean(n, op(n, "Mul", {d, d}, {}, t), axes);
      Value* den = op(n, "Sqrt", {op(n, "Add", {var, scalar(n->attr_float("epsilon", 1e-5f))})});
      Value* y = op(n, "Div", {d, den}, {}, t);
      if (n->input(1)) y = op(n, "Mul", {y, n->input(1)}, {}, t);
      if (centre && n->input(2)) y = op(n, "Add", {y, n->input(2)}, {}, t);
      replace(n, y);
      return true;
    }
    if (kind == "Attention") {
      replace(n, attention(n));
      return true;
    }
    if (kind == "CompressedMatMul") {
      replace(n, compressed_matmul(n));
      return true;
    }
    if (kind == "ExpandDepthwiseConv") {
      replace(n, expand_depthwise(n));
      return true;
    }
    if (kind == "SqueezeExcitation") {
      replace(n, squeeze_excitation(n));
      return true;
    }
    if (kind == "ChannelShuffle") {
      channel_shuffle(n);
      return true;
    }
    if (kind == "Conv" || kind == "MaxPool" || kind == "AveragePool") {  // layout = "NHWC"
      std::vector<Value*> ins = {op(n, "Transpose", {x}, {{"perm", std::vector<int64_t>{0, 3, 1, 2}}})};
      for (int i = 1; i < n->num_inputs(); ++i) ins.push_back(n->input(i));
      auto attrs = n->attrs;
      attrs.erase("layout");
      attrs.erase("algorithm");
      Value* y = op(n, kind, ins, attrs);
      replace(n, op(n, "Transpose", {y}, {{"perm", std::vector<int64_t>{0, 2, 3, 1}}}));
      return true;
    }
    fail("{}: no standard ONNX form for gaf op '{}'", n->describe(), kind);
  }

  Value* compressed_matmul(Node* n) {
    Value* w = n->input(1);
    const bool tb = n->attr_int("trans_b", 0) != 0;
    Value* wf;
    if (w->type.dtype == DType::Int8) {
      const Tensor& s = n->input(2)->constant();
      const int64_t cols = w->type.static_dims()[tb ? 0 : 1];
      if (opset_ >= 13) {
        Tensor zp(DType::Int8, {s.numel()});
        std::fill_n(zp.data<int8_t>(), zp.numel(), int8_t(0));
        Value* z = g_.add_constant(g_.unique_name(w->name() + "_zero_point"), std::move(zp));
        std::map<std::string, Attribute> a;
        if (s.numel() > 1) a["axis"] = int64_t(tb ? 0 : 1);
        wf = op(n, "DequantizeLinear", {w, n->input(2), z}, a);
      } else {
        Tensor sb = s.clone().reshaped(s.numel() > 1 ? (tb ? std::vector<int64_t>{cols, 1}
                                                                : std::vector<int64_t>{1, cols})
                                                         : std::vector<int64_t>{});
        Value* sv = g_.add_constant(g_.unique_name(w->name() + "_scale"), std::move(sb));
        wf = op(n, "Mul", {op(n, "Cast", {w}, {{"to", int64_t(DType::Float)}}), sv});
      }
    } else {
      wf = op(n, "Cast", {w}, {{"to", int64_t(DType::Float)}});
    }
    if (tb) wf = op(n, "Transpose", {wf}, {{"perm", std::vector<int64_t>{1, 0}}});
    return op(n, "MatMul", {n->input(0), wf});
  }

  // Clip(v, min, max) for the bounds n has (attributes `lo`, `hi`); v when it has none.
  Value* clamp(Node* n, Value* v, const char* lo, const char* hi) {
    if (!n->has_attr(lo) && !n->has_attr(hi)) return v;
    const float inf = std::numeric_limits<float>::infinity();
    const float a = n->attr_float(lo, -inf), b = n->attr_float(hi, inf);
    if (opset_ < 11) return op(n, "Clip", {v}, {{"min", a}, {"max", b}});
    return op(n, "Clip", {v, scalar(a), scalar(b)});
  }

  // Silu(x) or HardSwish(x) in standard ops, typed *t where given.
  Value* activation(Node* n, Value* x, const std::string& kind, const TensorType* t) {
    if (kind == "Silu") return op(n, "Mul", {x, op(n, "Sigmoid", {x}, {}, t)}, {}, t);
    Value* hs = op(n, "HardSigmoid", {x}, {{"alpha", 1.0f / 6.0f}, {"beta", 0.5f}}, t);
    return op(n, "Mul", {x, hs}, {}, t);
  }

  // The clamp (attributes `lo`, `hi`), then the activation (attribute `act`) n has for v.
  Value* stage(Node* n, Value* v, const char* lo, const char* hi, const char* act) {
    v = clamp(n, v, lo, hi);
    const std::string a = n->attr_string(act, "");
    return a.empty() ? v : activation(n, v, a, nullptr);
  }

  // Transpose(Act2(Conv<group E>(Act1(Conv(Transpose(x), W1, B1)), W2, B2))) in NCHW.
  Value* expand_depthwise(Node* n) {
    const Value* w2 = n->input(3);
    GAF_CHECK(w2->type.has_static_shape() && w2->type.shape->size() == 4, "{}: W2's shape is unknown",
              n->describe());
    const int64_t e = w2->type.static_dims()[0];
    Value* x = op(n, "Transpose", {n->input(0)}, {{"perm", std::vector<int64_t>{0, 3, 1, 2}}});
    Value* a = stage(n, op(n, "Conv", {x, n->input(1), n->input(2)}), "min1", "max1", "activation1");
    Value* d = op(n, "Conv", {a, n->input(3), n->input(4)},
                  {{"group", e}, {"strides", n->attr_ints("strides")}, {"pads", n->attr_ints("pads")}});
    return op(n, "Transpose", {stage(n, d, "min2", "max2", "activation2")}, {{"perm", std::vector<int64_t>{0, 2, 3, 1}}});
  }

  // ReduceMean<axes, keepdims>(v): axes an attribute before opset 18, an input from it.
  Value* reduce_mean(Node* n, Value* v, const std::vector<int64_t>& axes) {
    if (opset_ >= 18) return op(n, "ReduceMean", {v, ints(axes)}, {{"keepdims", int64_t(1)}});
    return op(n, "ReduceMean", {v}, {{"axes", axes}, {"keepdims", int64_t(1)}});
  }

  // Mul(x, Gate(Conv(Act(Clip(Conv(mean, W1, B1))), W2, B2))), mean the spatial ReduceMean of x; channels-last,
  // the pooled [N, 1..., C] is transposed to [N, C, 1...] for the convolutions and the gates back.
  Value* squeeze_excitation(Node* n) {
    Value* x = n->input(0);
    const int rank = x->type.shape ? int(x->type.shape->size()) : -1;
    GAF_CHECK(rank >= 3, "{}: the rank of X is unknown", n->describe());
    const bool nhwc = n->attr_string("layout", "NCHW") == "NHWC";
    std::vector<int64_t> spatial, to_nchw = {0, rank - 1}, to_nhwc = {0};
    for (int64_t a = nhwc ? 1 : 2; a < (nhwc ? rank - 1 : rank); ++a) spatial.push_back(a);
    for (int64_t a = 1; a < rank - 1; ++a) to_nchw.push_back(a);
    for (int64_t a = 2; a < rank; ++a) to_nhwc.push_back(a);
    to_nhwc.push_back(1);
    Value* m = reduce_mean(n, x, spatial);
    if (nhwc) m = op(n, "Transpose", {m}, {{"perm", to_nchw}});
    Value* h = stage(n, op(n, "Conv", {m, n->input(1), n->input(2)}), "min", "max", "activation");
    Value* g = op(n, "Conv", {h, n->input(3), n->input(4)});
    if (n->attr_string("gate", "Sigmoid") == "HardSigmoid")
      g = op(n, "HardSigmoid", {g}, {{"alpha", n->attr_float("alpha", 0.2f)}, {"beta", n->attr_float("beta", 0.5f)}});
    else
      g = op(n, "Sigmoid", {g});
    if (nhwc) g = op(n, "Transpose", {g}, {{"perm", to_nhwc}});
    return n->attr_int("gate_only", 0) ? g : op(n, "Mul", {x, g}, {}, &x->type);
  }

  Value* ints(const std::vector<int64_t>& v) {
    return g_.add_constant(g_.unique_name("gaf_decomposed_const"), Tensor::from<int64_t>({int64_t(v.size())}, v));
  }

  // Slices of Reshape(Transpose(Reshape(Concat(X_g, axis a), split a into [G, c]), swap a and a + 1), merged),
  // one per output (none when there is one).
  void channel_shuffle(Node* n) {
    const Value* x = n->input(0);
    GAF_CHECK(x->type.has_static_shape(), "{}: the shape of its inputs is unknown", n->describe());
    std::vector<int64_t> dims = x->type.static_dims();
    const int rank = int(dims.size());
    int64_t a = n->attr_int("axis", -1);
    if (a < 0) a += rank;
    GAF_CHECK(a >= 0 && a < rank, "{}: axis is out of range", n->describe());
    const int64_t groups = n->num_inputs(), parts = n->num_outputs(), c = dims[size_t(a)];
    std::vector<int64_t> split = dims;  // [.., G, c, ..]
    split.insert(split.begin() + a, groups);
    std::vector<int64_t> perm(size_t(rank + 1));
    std::iota(perm.begin(), perm.end(), int64_t(0));
    std::swap(perm[size_t(a)], perm[size_t(a + 1)]);
    dims[size_t(a)] = groups * c;
    Value* s = op(n, "Concat", std::vector<Value*>(n->inputs().begin(), n->inputs().end()), {{"axis", a}});
    s = op(n, "Reshape", {op(n, "Transpose", {op(n, "Reshape", {s, ints(split)})}, {{"perm", perm}}), ints(dims)});
    if (parts == 1) {
      replace(n, s);
      return;
    }
    const int64_t part = groups * c / parts;
    std::vector<Value*> ys;
    for (int64_t k = 0; k < parts; ++k) {
      if (opset_ >= 10)
        ys.push_back(op(n, "Slice", {s, ints({k * part}), ints({(k + 1) * part}), ints({a})}));
      else
        ys.push_back(op(n, "Slice", {s}, {{"starts", std::vector<int64_t>{k * part}},
                                          {"ends", std::vector<int64_t>{(k + 1) * part}},
                                          {"axes", std::vector<int64_t>{a}}}));
    }
    replace_all(n, ys);
  }

  int rank_of(const Node* n, int i, const char* perm) {
    if (n->has_attr(perm)) return int(n->attr_ints(perm).size());
    GAF_CHECK(n->input(i)->type.shape, "{}: the rank of input {} is unknown", n->describe(), i);
    return int(n->input(i)->type.shape->size());
  }

  Value* attention(Node* n) {
    auto read = [&](int i, const char* perm, bool swap_last) {
      int rank = rank_of(n, i, perm);
      std::vector<int64_t> p = n->attr_ints(perm);
      if (p.empty())
        for (int k = 0; k < rank; ++k) p.push_back(k);
      if (swap_last) std::swap(p[size_t(rank - 2)], p[size_t(rank - 1)]);
      bool id = true;
      for (int k = 0; k < rank; ++k) id &= p[size_t(k)] == k;
      return id ? n->input(i) : op(n, "Transpose", {n->input(i)}, {{"perm", p}});
    };
    Value* q = read(0, "q_perm", false);
    Value* kt = read(1, "k_perm", true);
    Value* v = read(2, "v_perm", false);
    GAF_CHECK(n->has_attr("scale"), "{}: without a scale attribute it has no standard form here", n->describe());
    Value* s = op(n, "Mul", {op(n, "MatMul", {q, kt}), scalar(n->attr_float("scale", 1.0f))});
    if (n->input(3)) s = op(n, "Add", {s, n->input(3)});
    int rank = std::max(rank_of(n, 0, "q_perm"), rank_of(n, 1, "k_perm"));
    Value* o = op(n, "MatMul", {op(n, "Softmax", {s}, {{"axis", int64_t(opset_ >= 13 ? -1 : rank - 1)}}), v});
    if (n->has_attr("out_perm")) o = op(n, "Transpose", {o}, {{"perm", n->attr_ints("out_perm")}});
    return o;
  }

  Graph& g_;
  int opset_;
};

}  // namespace

int decompose_gaf_ops(Graph& g, int opset) {
  int n = 0;
  for (Graph* sub : graph_and_subgraphs(g)) n += Decomposer(*sub, opset).run();
  return n;
}

}  // namespace gaf
