// Everything else: constants and shape queries, random numbers, strings, detection, sampling, losses, window
// functions, Det, quantisation with a data-dependent scale, and fused nodes.
#include "gaf/tensor.h"
#include "ops/ops.h"

namespace gaf::ops {

namespace {

constexpr uint32_t P = kPrecisionSensitive;

double flops_zero(const Node&) { return 0; }

double static_numel(const Value* v) {
  if (!v || !v->type.has_static_shape()) return 0;
  double n = 1;
  for (int64_t d : v->type.static_dims()) n *= double(d);
  return n;
}

// LU decomposition: 2/3 m^3 per matrix.
double det_flops(const Node& n) {
  const Value* x = n.input(0);
  if (!x || !x->type.has_static_shape()) return 0;
  auto d = x->type.static_dims();
  if (d.size() < 2) return 0;
  double m = double(d.back());
  return double(numel_of(d)) / (m * m) * (2.0 / 3.0) * m * m * m;
}

}  // namespace

void register_misc_ops(OpRegistry& r) {
  r.add("Constant", OpKind::Opaque).set_flops(flops_zero);
  r.add("Shape", OpKind::Opaque).set_flops(flops_zero);
  r.add("Size", OpKind::Opaque).set_flops(flops_zero);
  r.add("Range", OpKind::Opaque);
  r.add("NonZero", OpKind::Opaque);
  r.add("TopK", OpKind::Opaque).set_flops_per_element(10);
  r.add("Unique", OpKind::Opaque).set_flops_per_element(10);
  r.add("DynamicQuantizeLinear", OpKind::Opaque).set_flops_per_element(5);

  r.add("RandomUniform", OpKind::Opaque).set_flags(kRandom);
  r.add("RandomNormal", OpKind::Opaque).set_flags(kRandom);
  r.add("RandomUniformLike", OpKind::Elementwise).set_flags(kRandom);
  r.add("RandomNormalLike", OpKind::Elementwise).set_flags(kRandom);
  r.add("Bernoulli", OpKind::Elementwise).set_flags(kRandom);

  r.add("StringNormalizer", OpKind::Opaque).set_flops_per_element(10);
  r.add("TfIdfVectorizer", OpKind::Opaque).set_flops_per_element(10);
  r.add("NonMaxSuppression", OpKind::Opaque).set_flops_per_element(50);
  r.add("RoiAlign", OpKind::Opaque).set_flops_per_element(40);
  r.add("GridSample", OpKind::Opaque).set_flops_per_element(20);

  r.add("NegativeLogLikelihoodLoss", OpKind::Opaque).set_flags(P).set_flops([](const Node& n) {
    return 3 * static_numel(n.input(1));
  });
  // exp and log per score, plus the gather of the target class.
  r.add("SoftmaxCrossEntropyLoss", OpKind::Opaque).set_flags(P).set_flops([](const Node& n) {
    return 14 * static_numel(n.input(0)) + 3 * static_numel(n.input(1));
  });

  r.add("Det", OpKind::Opaque).set_flags(P).set_flops(det_flops);
  r.add("HannWindow", OpKind::Opaque).set_flags(P).set_flops_per_element(12);
  r.add("HammingWindow", OpKind::Opaque).set_flags(P).set_flops_per_element(12);
  r.add("BlackmanWindow", OpKind::Opaque).set_flags(P).set_flops_per_element(24);

  // Control flow: the node runs its subgraphs (GraphAttr), whose own nodes are planned and costed there.
  r.add("If", OpKind::Opaque).set_flops(flops_zero);
  r.add("Loop", OpKind::Opaque).set_flops(flops_zero);
  r.add("Scan", OpKind::Opaque).set_flops(flops_zero);

  // A fused node (gaf.fused): its body's ops are costed one by one.
  r.add("FusedOp", OpKind::Opaque, "gaf.fused");
}

}  // namespace gaf::ops
