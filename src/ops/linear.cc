// Linear algebra: the anchors (Conv, ConvTranspose, MatMul, Gemm, pooling, their integer forms, Einsum) whose
// flops come from their shapes, the recurrent cells, and our own fused ops (Attention, ExpandDepthwiseConv,
// SqueezeExcitation, CompressedMatMul). A flop function returns 0 when the shapes are not static.
#include <algorithm>

#include "gaf/status.h"
#include "gaf/tensor.h"
#include "ops/einsum.h"
#include "ops/geometry.h"
#include "ops/ops.h"

namespace gaf::ops {

namespace {

constexpr uint32_t P = kPrecisionSensitive;

double conv_flops(const Node& n, bool transpose) {
  auto x = static_input_dims(n, 0), w = static_input_dims(n, 1);
  if (!x || !w) return 0;
  if (n.attr_string("layout", "NCHW") == "NHWC") x = channels_last_logical(*x);
  try {
    ConvShape s = conv_shape(n, transpose, WindowAttrs::parse(n), n.attr_int("group", 1), *x, *w, nullptr);
    double k = double(numel_of(Dims(w->begin() + 2, w->end())));
    if (transpose) {
      double in = double(numel_of(Dims(x->begin() + 2, x->end())));
      return 2.0 * double(s.N) * double(s.C) * in * double(s.M / s.G) * k;
    }
    double out = double(numel_of(s.win.out));
    return 2.0 * double(s.N) * double(s.M) * out * double(s.C / s.G) * k +
           (n.input(2) ? double(s.N) * double(s.M) * out : 0.0);
  } catch (const Error&) {
    return 0;
  }
}

double pool_flops(const Node& n, double per_tap) {
  auto x = static_input_dims(n, 0);
  if (!x || x->size() < 3) return 0;
  if (n.attr_string("layout", "NCHW") == "NHWC") x = channels_last_logical(*x);
  try {
    WindowAttrs a = WindowAttrs::parse(n);
    Window w = forward_window(n, a, Dims(x->begin() + 2, x->end()), a.kernel_shape);
    return per_tap * double((*x)[0]) * double((*x)[1]) * double(numel_of(w.out)) * double(numel_of(w.k));
  } catch (const Error&) {
    return 0;
  }
}

double global_pool_flops(const Node& n, double per_element) {
  auto x = static_input_dims(n, 0);
  return x ? per_element * double(numel_of(*x)) : 0.0;
}

double int_matmul_flops(const Node& n, int ia, int ib) {
  auto a = static_input_dims(n, ia), b = static_input_dims(n, ib);
  if (!a || !b) return 0;
  try {
    BatchedMatMul bm = batched_matmul(n, *a, *b);
    return 2.0 * double(bm.count) * double(bm.M) * double(bm.N) * double(bm.K);
  } catch (const Error&) {
    return 0;
  }
}

double int_conv_flops(const Node& n, int ix, int iw) {
  auto x = static_input_dims(n, ix), w = static_input_dims(n, iw);
  if (!x || !w) return 0;
  try {
    ConvShape s = conv_shape(n, false, WindowAttrs::parse(n), n.attr_int("group", 1), *x, *w, nullptr);
    return 2.0 * double(s.N) * double(s.M) * double(numel_of(s.win.out)) * double(s.C / s.G) *
           double(numel_of(s.win.k));
  } catch (const Error&) {
    return 0;
  }
}

// 2·Lq·Lk·(D + Dv) per batch index for the two products, plus about 6 per score for scale, mask and softmax.
double attention_flops(const Node& n) {
  auto shape_of = [&](int i) -> std::optional<std::vector<int64_t>> {
    const Value* x = n.input(i);
    if (!x || !x->type.has_static_shape()) return std::nullopt;
    return x->type.static_dims();
  };
  auto o =
      n.output(0)->type.has_static_shape() ? std::optional(n.output(0)->type.static_dims()) : std::nullopt;
  auto qs = shape_of(0);
  auto ks = shape_of(1);
  if (!o || !qs || !ks || qs->size() < 2) return 0;
  double out = 1;
  for (int64_t x : *o) out *= double(x);  // batch * Lq * Dv
  double lkd = 1;                         // Lk * D: K's elements per batch index, whatever its perm
  for (size_t i = ks->size() - 2; i < ks->size(); ++i) lkd *= double((*ks)[i]);
  std::vector<int64_t> perm = n.attr_ints("k_perm");
  if (!perm.empty() && perm.size() == ks->size())
    lkd = double((*ks)[size_t(perm.end()[-2])]) * double((*ks)[size_t(perm.back())]);
  double qd = double((*qs)[qs->size() - 1]);
  std::vector<int64_t> qp = n.attr_ints("q_perm");
  if (!qp.empty() && qp.size() == qs->size()) qd = double((*qs)[size_t(qp.back())]);
  double lk = qd > 0 ? lkd / qd : 0;
  double dv = double(o->back());
  std::vector<int64_t> op = n.attr_ints("out_perm");
  if (!op.empty() && op.size() == o->size()) {
    auto it = std::find(op.begin(), op.end(), int64_t(o->size() - 1));
    dv = double((*o)[size_t(it - op.begin())]);
  }
  double scores = dv > 0 ? out / dv * lk : 0;  // batch * Lq * Lk
  return scores * (2 * qd + 2 * dv + 6);
}

double compressed_matmul_flops(const Node& n) {
  const Value* a = n.input(0);
  const Value* w = n.input(1);
  if (!a->type.has_static_shape() || !w->type.has_static_shape()) return 0;
  return 2.0 * double(numel_of(a->type.static_dims())) * double(numel_of(w->type.static_dims())) /
         double(a->type.static_dims().back());
}

double expand_depthwise_flops(const Node& n) {
  const Value* w1 = n.input(1);
  const Value* w2 = n.input(3);
  const Value* x = n.input(0);
  const Value* y = n.output(0);
  if (!x || !w1 || !w2 || !x->type.has_static_shape() || !w2->type.has_static_shape() ||
      !y->type.has_static_shape() || !w1->type.has_static_shape())
    return 0;
  const auto xs = x->type.static_dims(), ys = y->type.static_dims(), ws = w2->type.static_dims();
  const auto w1s = w1->type.static_dims();
  if (xs.size() != 4 || ys.size() != 4 || ws.size() != 4 || w1s.size() != 4) return 0;
  const double e = double(w1s[0]), c = double(w1s[1]);
  return 2.0 * double(xs[0] * xs[1] * xs[2]) * e * c +
         2.0 * double(ys[0] * ys[1] * ys[2]) * e * double(ws[2] * ws[3]);
}

// 2 * (product of all label sizes) per pairwise contraction: the multiply-adds of the loop nest.
double einsum_flops(const Node& n) {
  try {
    const EinsumEquation eq = parse_equation(n.attr_string("equation", ""), n);
    std::vector<std::vector<int64_t>> dims;
    for (const Value* v : n.inputs()) {
      if (!v || !v->type.has_static_shape()) return 0;
      dims.push_back(v->type.static_dims());
    }
    const EinsumProblem p = bind_shapes(eq, dims, n);
    double total = 1;
    for (int64_t s : p.size)
      if (s >= 0) total *= double(s);
    return 2.0 * total * double(std::max<size_t>(1, dims.size() - 1));
  } catch (const Error&) {
    return 0;
  }
}

// 2 * rows * gates * hidden * (input + hidden) multiply-adds plus the gate math, from static shapes.
double recurrent_flops(const Node& n) {
  const Value* x = n.input(0);
  const Value* w = n.input(1);
  const Value* r = n.input(2);
  if (!x || !w || !r || !x->type.has_static_shape() || !w->type.has_static_shape() ||
      !r->type.has_static_shape())
    return 0;
  const auto xd = x->type.static_dims(), wd = w->type.static_dims(), rd = r->type.static_dims();
  if (xd.size() != 3 || wd.size() != 3 || rd.size() != 3) return 0;
  const double rows = double(xd[0]) * double(xd[1]), dgh = double(wd[0]) * double(wd[1]);
  return rows * dgh * (2.0 * double(wd[2] + rd[2]) + 10.0);
}

// numpy matmul: 2 * batch * M * N * K.
double matmul_flops(const Node& n) {
  auto a = static_input_dims(n, 0), b = static_input_dims(n, 1);
  if (!a || !b) return 0;
  try {
    MatMulShape s = matmul_shape(n, *a, *b);
    return 2.0 * double(numel_of(s.batch)) * double(s.M) * double(s.N) * double(s.K);
  } catch (const Error&) {
    return 0;
  }
}

// Gemm: alpha * A' * B' + beta * C, 2-D.
double gemm_flops(const Node& n) {
  auto a = static_input_dims(n, 0), b = static_input_dims(n, 1);
  if (!a || !b || a->size() != 2 || b->size() != 2) return 0;
  const bool ta = n.attr_int("transA", 0) != 0, tb = n.attr_int("transB", 0) != 0;
  const double m = double(ta ? (*a)[1] : (*a)[0]), k = double(ta ? (*a)[0] : (*a)[1]);
  const double cols = double(tb ? (*b)[0] : (*b)[1]), kb = double(tb ? (*b)[1] : (*b)[0]);
  if (k != kb) return 0;
  const double mn = m * cols;
  return 2.0 * mn * k + (n.input(2) ? 2.0 * mn : 0.0);
}

}  // namespace

void register_linear_ops(OpRegistry& r) {
  r.add("Conv", OpKind::Anchor).set_flops([](const Node& n) { return conv_flops(n, false); });
  r.add("Conv", OpKind::Anchor, "gaf").set_flops([](const Node& n) { return conv_flops(n, false); });  // NHWC
  r.add("ConvTranspose", OpKind::Anchor).set_flops([](const Node& n) { return conv_flops(n, true); });
  r.add("MatMul", OpKind::Anchor).set_flops(matmul_flops);
  r.add("Gemm", OpKind::Anchor).set_flops(gemm_flops);
  r.add("MatMulInteger", OpKind::Anchor).set_flops([](const Node& n) { return int_matmul_flops(n, 0, 1); });
  r.add("QLinearMatMul", OpKind::Anchor).set_flops([](const Node& n) { return int_matmul_flops(n, 0, 3); });
  r.add("ConvInteger", OpKind::Anchor).set_flops([](const Node& n) { return int_conv_flops(n, 0, 1); });
  r.add("QLinearConv", OpKind::Anchor).set_flops([](const Node& n) { return int_conv_flops(n, 0, 3); });
  r.add("Einsum", OpKind::Anchor).set_flags(P).set_flops(einsum_flops);

  auto pool = [](double per_tap) { return [per_tap](const Node& n) { return pool_flops(n, per_tap); }; };
  auto global_pool = [](double per) { return [per](const Node& n) { return global_pool_flops(n, per); }; };
  r.add("MaxPool", OpKind::Anchor).set_flops(pool(1));
  r.add("AveragePool", OpKind::Anchor).set_flops(pool(1));
  r.add("MaxPool", OpKind::Anchor, "gaf").set_flops(pool(1));  // layout = "NHWC"
  r.add("AveragePool", OpKind::Anchor, "gaf").set_flops(pool(1));
  r.add("LpPool", OpKind::Anchor).set_flags(P).set_flops(pool(3));
  r.add("GlobalAveragePool", OpKind::Anchor).set_flops(global_pool(1));
  r.add("GlobalMaxPool", OpKind::Anchor).set_flops(global_pool(1));
  r.add("GlobalLpPool", OpKind::Anchor).set_flags(P).set_flops(global_pool(3));
  r.add("MaxUnpool", OpKind::Opaque);  // a data-dependent scatter

  for (const char* name : {"RNN", "GRU", "LSTM"})
    r.add(name, OpKind::Opaque).set_flags(P).set_flops(recurrent_flops);

  r.add("Attention", OpKind::Opaque, "gaf").set_flags(P | kMatrixFlops).set_flops(attention_flops);
  r.add("CompressedMatMul", OpKind::Opaque, "gaf").set_flags(kMatrixFlops).set_flops(compressed_matmul_flops);
  r.add("ExpandDepthwiseConv", OpKind::Opaque, "gaf")
      .set_flags(kMatrixFlops)
      .set_flops(expand_depthwise_flops);
  r.add("SqueezeExcitation", OpKind::Opaque, "gaf").set_flags(P);
}

}  // namespace gaf::ops
