// Everything else: constants and shape queries, random numbers, strings, detection, sampling, losses, window
// functions, Det, the spectral ops (DFT, STFT, MelWeightMatrix), quantisation with a data-dependent scale,
// sequences and optionals, and fused nodes.
#include <cmath>

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

// An FFT of length n: about 5 n log2(n) flops (the kernel's cost for a length with small prime factors).
double fft_flops(double n) { return n > 1 ? 5.0 * n * std::log2(n) : 0.0; }

// DFT: one transform per line of the input along the axis. Inputs are not read: dft_length is taken as the
// axis' dim and opset 20's axis input as its default, -2.
double dft_flops(const Node& n) {
  const Value* x = n.input(0);
  if (!x || !x->type.has_static_shape()) return 0;
  auto d = x->type.static_dims();
  const int64_t rank = int64_t(d.size());
  int64_t axis = n.opset >= 20 ? -2 : n.attr_int("axis", 1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank - 1 || d[size_t(axis)] == 0) return 0;
  const double len = double(d[size_t(axis)]);
  return double(numel_of(d)) / (len * double(d.back())) * fft_flops(len);
}

// STFT: one transform per frame of its output [batch, frames, bins, 2], of the length the bins come from.
double stft_flops(const Node& n) {
  const Value* y = n.output(0);
  if (!y || !y->type.has_static_shape()) return 0;
  auto d = y->type.static_dims();
  if (d.size() != 4) return 0;
  const double bins = double(d[2]), len = n.attr_int("onesided", 1) ? 2 * (bins - 1) : bins;
  return double(d[0] * d[1]) * (fft_flops(len) + 6 * len);
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
  r.add("DFT", OpKind::Opaque).set_flags(P).set_flops(dft_flops);
  r.add("STFT", OpKind::Opaque).set_flags(P).set_flops(stft_flops);
  r.add("MelWeightMatrix", OpKind::Opaque).set_flags(P).set_flops_per_element(4);

  // Control flow: the node runs its subgraphs (GraphAttr), whose own nodes are planned and costed there.
  r.add("If", OpKind::Opaque).set_flops(flops_zero);
  r.add("Loop", OpKind::Opaque).set_flops(flops_zero);
  r.add("Scan", OpKind::Opaque).set_flops(flops_zero);

  // Sequences and optionals (ValueKind): lists of tensors handed around by reference; SequenceMap runs its
  // body once per item, and that body's nodes are planned and costed there.
  for (const char* op : {"SequenceEmpty", "SequenceConstruct", "SequenceAt", "SequenceInsert",
                         "SequenceErase", "SequenceLength", "SplitToSequence", "ConcatFromSequence",
                         "SequenceMap", "Optional", "OptionalHasElement", "OptionalGetElement"})
    r.add(op, OpKind::Opaque).set_flops(flops_zero);

  // A fused node (gaf.fused): its body's ops are costed one by one.
  r.add("FusedOp", OpKind::Opaque, "gaf.fused");
}

}  // namespace gaf::ops
