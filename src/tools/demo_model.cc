// The built-in demo model: one pre-LayerNorm transformer encoder block, written the way exporters decompose it
// (LayerNorm as ReduceMean/Sub/Pow/Sqrt/Div, attention as MatMul/Div/Softmax/MatMul with head reshapes, GELU in
// its erf form), so every fusion and rewrite has something to do.
#include <cmath>

#include "gaf/builder.h"
#include "gaf/tools.h"

namespace gaf::tools {

namespace {

Value* layer_norm(GraphBuilder& b, Value* x, int64_t d, const std::string& prefix) {
  Value* mean = b.op("ReduceMean", {x}, {{"axes", std::vector<int64_t>{-1}}, {"keepdims", int64_t(1)}});
  Value* centered = b.op("Sub", {x, mean});
  Value* sq = b.op("Pow", {centered, b.scalar(2.0f)});
  Value* var = b.op("ReduceMean", {sq}, {{"axes", std::vector<int64_t>{-1}}, {"keepdims", int64_t(1)}});
  Value* denom = b.op("Sqrt", {b.op("Add", {var, b.scalar(1e-5f)})});
  Value* norm = b.op("Div", {centered, denom});
  Value* gamma = b.random_constant(prefix + ".weight", {d}, 1.0f);
  Value* beta = b.random_constant(prefix + ".bias", {d}, 0.1f);
  return b.op("Add", {b.op("Mul", {norm, gamma}), beta});
}

Value* linear(GraphBuilder& b, Value* x, int64_t in, int64_t out, const std::string& prefix) {
  float scale = 1.0f / std::sqrt(float(in));
  Value* w = b.random_constant(prefix + ".weight", {in, out}, scale);
  Value* bias = b.random_constant(prefix + ".bias", {out}, scale);
  return b.op("Add", {b.op("MatMul", {x, w}), bias});
}

}  // namespace

Model demo_transformer_block(int64_t seq, int64_t d_model, int64_t heads, int64_t d_ff) {
  Model m;
  m.graph->name = "demo_transformer_block";
  GraphBuilder b(m, 13);
  const int64_t head_dim = d_model / heads;
  Value* x = b.input("x", DType::Float, {1, seq, d_model});

  // Attention.
  Value* h = layer_norm(b, x, d_model, "ln1");
  auto split_heads = [&](Value* t) {
    Value* r = b.op("Reshape", {t, b.ints({1, seq, heads, head_dim})});
    return b.op("Transpose", {r}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  };
  Value* q = split_heads(linear(b, h, d_model, d_model, "attn.q"));
  Value* k = split_heads(linear(b, h, d_model, d_model, "attn.k"));
  Value* v = split_heads(linear(b, h, d_model, d_model, "attn.v"));
  Value* kt = b.op("Transpose", {k}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  Value* scores = b.op("Div", {b.op("MatMul", {q, kt}), b.scalar(std::sqrt(float(head_dim)))});
  Value* probs = b.op("Softmax", {scores}, {{"axis", int64_t(-1)}});
  Value* ctx = b.op("MatMul", {probs, v});
  ctx = b.op("Transpose", {ctx}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  ctx = b.op("Reshape", {ctx, b.ints({1, seq, d_model})});
  Value* x1 = b.op("Add", {x, linear(b, ctx, d_model, d_model, "attn.out")});

  // Feed-forward with erf GELU: 0.5 * x * (1 + erf(x / sqrt(2))).
  Value* h2 = layer_norm(b, x1, d_model, "ln2");
  Value* f = linear(b, h2, d_model, d_ff, "ffn.up");
  Value* erf = b.op("Erf", {b.op("Div", {f, b.scalar(std::sqrt(2.0f))})});
  Value* gelu = b.op("Mul", {b.op("Mul", {f, b.op("Add", {erf, b.scalar(1.0f)})}), b.scalar(0.5f)});
  Value* y = b.op("Add", {x1, linear(b, gelu, d_ff, d_model, "ffn.down")});
  b.output(y);
  b.graph().rename(y, "y");
  b.finish();
  m.graph->remove_dead_values();
  return m;
}

}  // namespace gaf::tools
