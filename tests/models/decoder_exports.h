// Decoder-only language models in the form torch.onnx.export (TorchScript exporter, opset 14) writes them
// with the usual dynamic axes: batch, seq (new tokens), past (cached tokens) and total (= past + seq, the
// presents' length). Sizes come from Shape -> Gather, positions from Range(past, past + seq), head reshapes
// from Concat of Unsqueezed sizes, and the causal mask is sliced out of a [1, 1, max, max] buffer at [total -
// seq : total, : total]: every dim after the first MatMul is something ONNX shape inference calls unk__N.
// Weights are small deterministic values, so fused and unfused runs can be compared.
//
//   gpt2_decoder(layers)    LayerNorm decomposed (opset 14 has no LayerNormalization), exact GELU (Erf),
//                           masked_fill(mask == 0, -inf), scores * 1/sqrt(d)
//   llama_decoder(layers)   RMSNorm as x * rsqrt(mean(x^2) + eps) * w (torch writes rsqrt as Div(1, Sqrt)),
//                           rotary embeddings (cos/sin of Range positions, rotate_half by Slice/Neg/Concat),
//                           SiLU-gated MLP, an additive causal mask
#pragma once

#include <fmt/format.h>
#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <span>
#include <stdexcept>

#include "gaf/onnx_io.h"
#include "gaf/tensor.h"
#include <fmt/ranges.h>

#include <cmath>
#include <string>
#include <vector>

namespace gaf::testing {

namespace decoder_detail {
struct Init;
}

struct DecoderDims {
  int embed = 64, heads = 4, head_dim = 16, vocab = 96, hidden = 256, max_positions = 128;
  std::vector<decoder_detail::Init>* deferred = nullptr;  // see assemble()
};

namespace decoder_detail {

// A LayerNorm as exporters decompose it, `p` = (x - mean) / sqrt(var + eps) * g + b over the last axis; the
// graph defines the constants `two` and `eps`.
inline std::string layer_norm_text(const std::string& p, const std::string& x, const std::string& g,
                                   const std::string& b) {
  return fmt::format(R"(
    {0}_m = ReduceMean <axes = [-1]> ({1})  {0}_d = Sub({1}, {0}_m)  {0}_p = Pow({0}_d, two)
    {0}_v = ReduceMean <axes = [-1]> ({0}_p)  {0}_ve = Add({0}_v, eps)  {0}_s = Sqrt({0}_ve)
    {0}_n = Div({0}_d, {0}_s)  {0}_ng = Mul({0}_n, {2})  {0} = Add({0}_ng, {3})
)",
                     p, x, g, b);
}

// n values in [-scale, scale) + offset, deterministic in (n, salt), rounded to 5 decimals (as written in text).
inline std::vector<float> values(int64_t n, uint64_t salt, double scale, double offset = 0) {
  std::vector<float> v(static_cast<size_t>(n));
  uint64_t x = salt * 0x9E3779B97F4A7C15ull + 1;
  for (float& f : v) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const double u = double(x >> 11) * 0x1.0p-53;
    f = float(offset + std::round((2 * u - 1) * scale * 1e5) / 1e5);
  }
  return v;
}

// An initializer: random values (salt, scale, offset), a causal 0/1 triangle, or explicit values.
struct Init {
  std::string name;
  std::vector<int64_t> dims;
  uint64_t salt = 0;
  double scale = 0, offset = 0;
  bool causal = false;
  std::vector<float> explicit_values;
  std::vector<float> data() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    if (!explicit_values.empty()) return explicit_values;
    if (!causal) return values(n, salt, scale, offset);
    const int64_t m = dims.back();
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = (i % m) <= (i / m) % m ? 1.0f : 0.0f;
    return v;
  }
  std::string type() const { return fmt::format("float[{}] {}", fmt::join(dims, ","), name); }
};

inline Init weight(const std::string& name, int64_t rows, int64_t cols, uint64_t salt, double scale) {
  return {name, {rows, cols}, salt, scale, 0, false, {}};
}
inline Init vec(const std::string& name, int64_t n, uint64_t salt, double scale, double offset = 0) {
  return {name, {n}, salt, scale, offset, false, {}};
}

// The signature's pasts and presents, and the shared size arithmetic.
inline std::string signature(const std::string& name, int layers, const DecoderDims& d,
                             std::string* outputs) {
  std::string in = "int64[batch,seq] input_ids";
  *outputs = fmt::format("float[batch,seq,{}] logits", d.vocab);
  for (int l = 0; l < layers; ++l)
    for (const char* kv : {"key", "value"}) {
      in += fmt::format(", float[batch,{},past,{}] past_{}_{}", d.heads, d.head_dim, kv, l);
      *outputs += fmt::format(", float[batch,{},total,{}] present_{}_{}", d.heads, d.head_dim, kv, l);
    }
  return name + " (" + in + ")";
}

inline std::string size_arithmetic(const DecoderDims& d) {
  return fmt::format(R"(
    i0 = Constant <value = int64 {{0}}> ()  i1 = Constant <value = int64 {{1}}> ()  i2 = Constant <value = int64 {{2}}> ()
    a0 = Constant <value = int64[1] {{0}}> ()  a2 = Constant <value = int64[1] {{2}}> ()  a3 = Constant <value = int64[1] {{3}}> ()
    s1 = Constant <value = int64[1] {{1}}> ()  z1 = Constant <value = int64[1] {{0}}> ()
    nh = Constant <value = int64[1] {{{}}}> ()  hd = Constant <value = int64[1] {{{}}}> ()  ce = Constant <value = int64[1] {{{}}}> ()
    ids_shape = Shape(input_ids)  B = Gather <axis = 0> (ids_shape, i0)  T = Gather <axis = 0> (ids_shape, i1)
    pk_shape = Shape(past_key_0)  P = Gather <axis = 0> (pk_shape, i2)
    pos_end = Add(P, T)  pos = Range(P, pos_end, i1)  pos2 = Unsqueeze(pos, a0)
    Bu = Unsqueeze(B, a0)  Tu = Unsqueeze(T, a0)
    heads_shape = Concat <axis = 0> (Bu, Tu, nh, hd)  merge_shape = Concat <axis = 0> (Bu, Tu, ce)
    tok = Gather(wte, input_ids)
)",
                     d.heads, d.head_dim, d.embed);
}

// q, k, v -> attention output y (merged heads); presents written. Masking per `mask` (text using `scores`,
// defining `masked`).
inline std::string attention(int l, const std::string& q, const std::string& k, const std::string& v,
                             const std::string& mask) {
  return fmt::format(R"(
    present_key_{0} = Concat <axis = 2> (past_key_{0}, {2})  present_value_{0} = Concat <axis = 2> (past_value_{0}, {3})
    l{0}_kT = Transpose <perm = [0, 1, 3, 2]> (present_key_{0})  l{0}_qk = MatMul({1}, l{0}_kT)
    l{0}_scores = Mul(l{0}_qk, inv_sqrt_d)
    l{0}_q_shape = Shape({1})  l{0}_Tq = Gather <axis = 0> (l{0}_q_shape, i2)
    l{0}_k_shape = Shape(present_key_{0})  l{0}_L = Gather <axis = 0> (l{0}_k_shape, i2)
    l{0}_st = Sub(l{0}_L, l{0}_Tq)  l{0}_stu = Unsqueeze(l{0}_st, a0)  l{0}_Lu = Unsqueeze(l{0}_L, a0)
    l{0}_m1 = Slice(causal, l{0}_stu, l{0}_Lu, a2, s1)  l{0}_m2 = Slice(l{0}_m1, z1, l{0}_Lu, a3, s1)
    {4}
    l{0}_p = Softmax <axis = -1> (l{0}_masked)  l{0}_pv = MatMul(l{0}_p, present_value_{0})
    l{0}_yt = Transpose <perm = [0, 2, 1, 3]> (l{0}_pv)  l{0}_y = Reshape(l{0}_yt, merge_shape)
)",
                     l, q, k, v, fmt::format(fmt::runtime(mask), l));
}

inline std::string header() { return "<ir_version: 8, opset_import: [\"\" : 14]> "; }

inline Init causal_buffer(const DecoderDims& d) {
  return {"causal", {1, 1, d.max_positions, d.max_positions}, 0, 0, 0, true, {}};
}

// The model text: initializers written inline, or (d.deferred) declared as graph inputs and listed in
// *d.deferred for the caller to attach as initializers (a model too large to write as text).
inline std::string assemble(const std::string& sig, const std::string& outs, const std::vector<Init>& inits,
                            const std::string& body, const DecoderDims& d) {
  std::string init_list, extra_inputs;
  for (const Init& i : inits) {
    if (d.deferred) {
      extra_inputs += ", " + i.type();
      d.deferred->push_back(i);
      continue;
    }
    std::string v;
    for (float f : i.data()) v += fmt::format("{}{:.8g}", v.empty() ? "" : ",", f);
    init_list += (init_list.empty() ? "" : ", ") + i.type() + " = {" + v + "}";
  }
  std::string text = header() + sig.substr(0, sig.size() - 1) + extra_inputs + ") => (" + outs + ")";
  if (!init_list.empty()) text += " <" + init_list + ">";
  return text + " {" + body + "}";
}


}  // namespace decoder_detail

inline std::string gpt2_decoder(int layers, const DecoderDims& d = {}) {
  using namespace decoder_detail;
  std::string outs;
  std::string sig = signature("gpt2", layers, d, &outs);
  const int C = d.embed, F = d.hidden;
  std::vector<Init> inits = {weight("wte", d.vocab, C, 1, 0.5),
                                    weight("wpe", d.max_positions, C, 2, 0.1),
                                    causal_buffer(d),
                                    weight("lm_head", C, d.vocab, 3, 0.2),
                                    vec("lnf_g", C, 4, 0.1, 1),
                                    vec("lnf_b", C, 5, 0.1)};
  std::string body = size_arithmetic(d) + fmt::format(R"(
    inv_sqrt_d = Constant <value = float {{{}}}> ()  eps = Constant <value = float {{1e-5}}> ()
    two = Constant <value = float {{2.0}}> ()  zero_f = Constant <value = float {{0.0}}> ()
    ninf = Log(zero_f)  one_f = Constant <value = float {{1.0}}> ()
    half = Constant <value = float {{0.5}}> ()  sqrt2 = Constant <value = float {{1.4142135}}> ()
    split3 = Constant <value = int64[3] {{{},{},{}}}> ()
    pe = Gather(wpe, pos2)  x0 = Add(tok, pe)
)",
                                                      1.0 / std::sqrt(double(d.head_dim)), C, C, C);
  auto layer_norm = decoder_detail::layer_norm_text;
  for (int l = 0; l < layers; ++l) {
    const uint64_t s = 100 + uint64_t(l) * 20;
    for (auto w :
         {weight(fmt::format("l{}_wqkv", l), C, 3 * C, s, 0.2),
          vec(fmt::format("l{}_bqkv", l), 3 * C, s + 1, 0.1),
          weight(fmt::format("l{}_wo", l), C, C, s + 2, 0.2), vec(fmt::format("l{}_bo", l), C, s + 3, 0.1),
          weight(fmt::format("l{}_w1", l), C, F, s + 4, 0.2), vec(fmt::format("l{}_b1", l), F, s + 5, 0.1),
          weight(fmt::format("l{}_w2", l), F, C, s + 6, 0.1), vec(fmt::format("l{}_b2", l), C, s + 7, 0.1),
          vec(fmt::format("l{}_g1", l), C, s + 8, 0.1, 1), vec(fmt::format("l{}_c1", l), C, s + 9, 0.1),
          vec(fmt::format("l{}_g2", l), C, s + 10, 0.1, 1), vec(fmt::format("l{}_c2", l), C, s + 11, 0.1)})
      inits.push_back(w);
    const std::string x = fmt::format("x{}", l), L = fmt::format("l{}", l);
    body += layer_norm(L + "_h", x, L + "_g1", L + "_c1");
    body += fmt::format(R"(
    {0}_qkv = MatMul({0}_h, {0}_wqkv)  {0}_qkvb = Add({0}_qkv, {0}_bqkv)
    {0}_q, {0}_k, {0}_v = Split <axis = 2> ({0}_qkvb, split3)
    {0}_qr = Reshape({0}_q, heads_shape)  {0}_qt = Transpose <perm = [0, 2, 1, 3]> ({0}_qr)
    {0}_kr = Reshape({0}_k, heads_shape)  {0}_kt = Transpose <perm = [0, 2, 1, 3]> ({0}_kr)
    {0}_vr = Reshape({0}_v, heads_shape)  {0}_vt = Transpose <perm = [0, 2, 1, 3]> ({0}_vr)
)",
                        L);
    body += attention(l, L + "_qt", L + "_kt", L + "_vt",
                      "l{0}_eq = Equal(l{0}_m2, zero_f)  l{0}_masked = Where(l{0}_eq, ninf, l{0}_scores)");
    body += fmt::format(R"(
    {0}_o = MatMul({0}_y, {0}_wo)  {0}_ob = Add({0}_o, {0}_bo)  {0}_x1 = Add({1}, {0}_ob)
)",
                        L, x);
    body += layer_norm(L + "_h2", L + "_x1", L + "_g2", L + "_c2");
    body += fmt::format(R"(
    {0}_f = MatMul({0}_h2, {0}_w1)  {0}_fb = Add({0}_f, {0}_b1)
    {0}_g1d = Div({0}_fb, sqrt2)  {0}_g1e = Erf({0}_g1d)  {0}_g1a = Add({0}_g1e, one_f)  {0}_g1m = Mul({0}_fb, {0}_g1a)
    {0}_gelu = Mul({0}_g1m, half)
    {0}_f2 = MatMul({0}_gelu, {0}_w2)  {0}_f2b = Add({0}_f2, {0}_b2)  x{1} = Add({0}_x1, {0}_f2b)
)",
                        L, l + 1);
  }
  body += layer_norm("hf", fmt::format("x{}", layers), "lnf_g", "lnf_b");
  body += "    logits = MatMul(hf, lm_head)\n";
  return assemble(sig, outs, inits, body, d);
}

inline std::string llama_decoder(int layers, const DecoderDims& d = {}) {
  using namespace decoder_detail;
  std::string outs;
  std::string sig = signature("llama", layers, d, &outs);
  const int C = d.embed, F = d.hidden, half_d = d.head_dim / 2;
  std::vector<float> inv_freq;
  for (int i = 0; i < half_d; ++i) inv_freq.push_back(float(1.0 / std::pow(10000.0, 2.0 * i / d.head_dim)));
  std::vector<Init> inits = {weight("wte", d.vocab, C, 11, 0.5), causal_buffer(d),
                                    weight("lm_head", C, d.vocab, 13, 0.2), vec("normf", C, 14, 0.1, 1),
                                    Init{"inv_freq", {1, half_d}, 0, 0, 0, false, inv_freq}};
  std::string body = size_arithmetic(d) + fmt::format(R"(
    inv_sqrt_d = Constant <value = float {{{}}}> ()  eps = Constant <value = float {{1e-6}}> ()
    two = Constant <value = float {{2.0}}> ()  one_f = Constant <value = float {{1.0}}> ()
    zero_f = Constant <value = float {{0.0}}> ()  big_neg = Constant <value = float {{-3.4028234663852886e+38}}> ()
    hh = Constant <value = int64[1] {{{}}}> ()  big = Constant <value = int64[1] {{9223372036854775807}}> ()
    am1 = Constant <value = int64[1] {{-1}}> ()  a1 = Constant <value = int64[1] {{1}}> ()
    posf = Cast <to = 1> (pos)  t = Unsqueeze(posf, a1)  freqs = MatMul(t, inv_freq)
    emb = Concat <axis = -1> (freqs, freqs)  cos = Cos(emb)  sin = Sin(emb)
    x0 = Identity(tok)
)",
                                                      1.0 / std::sqrt(double(d.head_dim)), half_d);
  auto rms_norm = [&](const std::string& p, const std::string& x, const std::string& g) {
    return fmt::format(R"(
    {0}_sq = Pow({1}, two)  {0}_ms = ReduceMean <axes = [-1]> ({0}_sq)  {0}_me = Add({0}_ms, eps)
    {0}_rt = Sqrt({0}_me)  {0}_rs = Div(one_f, {0}_rt)  {0}_n = Mul({1}, {0}_rs)  {0} = Mul({2}, {0}_n)
)",
                       p, x, g);
  };
  // rotate_half(x) = cat(-x[..., d/2:], x[..., :d/2]); x * cos + rotate_half(x) * sin
  auto rope = [&](const std::string& o, const std::string& x) {
    return fmt::format(R"(
    {0}_x1 = Slice({1}, z1, hh, am1, s1)  {0}_x2 = Slice({1}, hh, big, am1, s1)  {0}_nx2 = Neg({0}_x2)
    {0}_rot = Concat <axis = -1> ({0}_nx2, {0}_x1)  {0}_c = Mul({1}, cos)  {0}_s = Mul({0}_rot, sin)
    {0} = Add({0}_c, {0}_s)
)",
                       o, x);
  };
  for (int l = 0; l < layers; ++l) {
    const uint64_t s = 200 + uint64_t(l) * 20;
    for (auto w :
         {weight(fmt::format("l{}_wq", l), C, C, s, 0.2), weight(fmt::format("l{}_wk", l), C, C, s + 1, 0.2),
          weight(fmt::format("l{}_wv", l), C, C, s + 2, 0.2),
          weight(fmt::format("l{}_wo", l), C, C, s + 3, 0.2),
          weight(fmt::format("l{}_wg", l), C, F, s + 4, 0.2),
          weight(fmt::format("l{}_wu", l), C, F, s + 5, 0.2),
          weight(fmt::format("l{}_wd", l), F, C, s + 6, 0.1), vec(fmt::format("l{}_n1", l), C, s + 7, 0.1, 1),
          vec(fmt::format("l{}_n2", l), C, s + 8, 0.1, 1)})
      inits.push_back(w);
    const std::string x = fmt::format("x{}", l), L = fmt::format("l{}", l);
    body += rms_norm(L + "_h", x, L + "_n1");
    body += fmt::format(R"(
    {0}_q = MatMul({0}_h, {0}_wq)  {0}_k = MatMul({0}_h, {0}_wk)  {0}_v = MatMul({0}_h, {0}_wv)
    {0}_qr = Reshape({0}_q, heads_shape)  {0}_qt = Transpose <perm = [0, 2, 1, 3]> ({0}_qr)
    {0}_kr = Reshape({0}_k, heads_shape)  {0}_kt = Transpose <perm = [0, 2, 1, 3]> ({0}_kr)
    {0}_vr = Reshape({0}_v, heads_shape)  {0}_vt = Transpose <perm = [0, 2, 1, 3]> ({0}_vr)
)",
                        L);
    body += rope(L + "_qe", L + "_qt") + rope(L + "_ke", L + "_kt");
    body += attention(l, L + "_qe", L + "_ke", L + "_vt",
                      "l{0}_eq = Equal(l{0}_m2, zero_f)  l{0}_add = Where(l{0}_eq, big_neg, zero_f)  "
                      "l{0}_masked = Add(l{0}_scores, l{0}_add)");
    body += fmt::format(R"(
    {0}_o = MatMul({0}_y, {0}_wo)  {0}_x1 = Add({1}, {0}_o)
)",
                        L, x);
    body += rms_norm(L + "_h2", L + "_x1", L + "_n2");
    body += fmt::format(R"(
    {0}_gt = MatMul({0}_h2, {0}_wg)  {0}_sg = Sigmoid({0}_gt)  {0}_silu = Mul({0}_gt, {0}_sg)
    {0}_up = MatMul({0}_h2, {0}_wu)  {0}_gu = Mul({0}_silu, {0}_up)  {0}_dn = MatMul({0}_gu, {0}_wd)
    x{1} = Add({0}_x1, {0}_dn)
)",
                        L, l + 1);
  }
  body += rms_norm("hf", fmt::format("x{}", layers), "normf");
  body += "    logits = MatMul(hf, lm_head)\n";
  return assemble(sig, outs, inits, body, d);
}

// The model of a text written with d.deferred set: the deferred weights attached as initializers (and no longer
// graph inputs). Throws on a parse error.
inline onnx::ModelProto decoder_proto(const std::string& text, const std::vector<decoder_detail::Init>& weights) {
  onnx::ModelProto m;
  auto status = onnx::OnnxParser::Parse(m, text.c_str());
  if (!status.IsOK()) throw std::runtime_error("decoder text: " + status.ErrorMessage());
  auto* g = m.mutable_graph();
  for (const auto& w : weights) {
    std::vector<float> v = w.data();
    onnx::TensorProto* t = g->add_initializer();
    onnx_io::tensor_to_proto(Tensor::from<float>(w.dims, std::span<const float>(v)), *t);
    t->set_name(w.name);
  }
  auto* inputs = g->mutable_input();
  inputs->erase(std::remove_if(inputs->begin(), inputs->end(),
                               [&](const onnx::ValueInfoProto& i) {
                                 return std::any_of(weights.begin(), weights.end(),
                                                    [&](const auto& w) { return w.name == i.name(); });
                               }),
                inputs->end());
  return m;
}

}  // namespace gaf::testing
