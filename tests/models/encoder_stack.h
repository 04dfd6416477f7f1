// A deep stack of BERT-style encoder layers with static shapes, in the form torch.onnx.export (opset 13)
// writes nn.TransformerEncoderLayer(norm_first=False): Q, K, V as MatMul + Add, head split by Reshape and
// Transpose, Softmax attention, LayerNorm decomposed into ReduceMean / Sub / Pow / Sqrt / Div, exact GELU
// (Erf). The layers share one set of weights (as ALBERT does), so a graph of thousands of nodes stays a small
// file. About 50 nodes a layer: encoder_stack(204) is the 10,000-node graph the planner's scale is measured
// on (with the dynamic-shape decoders of decoder_exports.h).
#pragma once

#include "models/decoder_exports.h"

namespace gaf::testing {

struct EncoderDims {
  int seq = 64, embed = 128, heads = 4, hidden = 512;
  std::vector<decoder_detail::Init>* deferred = nullptr;  // see decoder_detail::assemble()
};

inline std::string encoder_stack(int layers, const EncoderDims& e = {}) {
  using namespace decoder_detail;
  const int S = e.seq, C = e.embed, H = e.heads, D = e.embed / e.heads, F = e.hidden;
  const std::vector<Init> inits = {
      weight("wq", C, C, 1, 0.2), vec("bq", C, 2, 0.1),  weight("wk", C, C, 3, 0.2),  vec("bk", C, 4, 0.1),
      weight("wv", C, C, 5, 0.2), vec("bv", C, 6, 0.1),  weight("wo", C, C, 7, 0.2),  vec("bo", C, 8, 0.1),
      weight("w1", C, F, 9, 0.2), vec("b1", F, 10, 0.1), weight("w2", F, C, 11, 0.1), vec("b2", C, 12, 0.1),
      vec("g1", C, 13, 0.1, 1),   vec("c1", C, 14, 0.1), vec("g2", C, 15, 0.1, 1),    vec("c2", C, 16, 0.1)};
  std::string body = fmt::format(R"(
    heads_shape = Constant <value = int64[4] {{1, {0}, {1}, {2}}}> ()  merge_shape = Constant <value = int64[3] {{1, {0}, {3}}}> ()
    sqrt_d = Constant <value = float {{{4}}}> ()  eps = Constant <value = float {{1e-5}}> ()  two = Constant <value = float {{2.0}}> ()
    one_f = Constant <value = float {{1.0}}> ()  half = Constant <value = float {{0.5}}> ()  sqrt2 = Constant <value = float {{1.4142135}}> ()
)",
                                 S, H, D, C, std::sqrt(double(D)));
  auto layer_norm = decoder_detail::layer_norm_text;
  for (int l = 0; l < layers; ++l) {
    const std::string x = l == 0 ? "x" : fmt::format("x{}", l), L = fmt::format("l{}", l);
    body += fmt::format(R"(
    {0}_qm = MatMul({1}, wq)  {0}_q = Add(bq, {0}_qm)  {0}_km = MatMul({1}, wk)  {0}_k = Add(bk, {0}_km)
    {0}_vm = MatMul({1}, wv)  {0}_v = Add(bv, {0}_vm)
    {0}_qh = Reshape({0}_q, heads_shape)  {0}_qt = Transpose <perm = [0, 2, 1, 3]> ({0}_qh)
    {0}_kh = Reshape({0}_k, heads_shape)  {0}_kt = Transpose <perm = [0, 2, 3, 1]> ({0}_kh)
    {0}_vh = Reshape({0}_v, heads_shape)  {0}_vt = Transpose <perm = [0, 2, 1, 3]> ({0}_vh)
    {0}_s = MatMul({0}_qt, {0}_kt)  {0}_sc = Div({0}_s, sqrt_d)  {0}_p = Softmax <axis = -1> ({0}_sc)
    {0}_c = MatMul({0}_p, {0}_vt)  {0}_ct = Transpose <perm = [0, 2, 1, 3]> ({0}_c)  {0}_cm = Reshape({0}_ct, merge_shape)
    {0}_om = MatMul({0}_cm, wo)  {0}_o = Add(bo, {0}_om)  {0}_r1 = Add({1}, {0}_o)
)",
                        L, x);
    body += layer_norm(L + "_n1", L + "_r1", "g1", "c1");
    body += fmt::format(R"(
    {0}_fm = MatMul({0}_n1, w1)  {0}_f = Add(b1, {0}_fm)
    {0}_gd = Div({0}_f, sqrt2)  {0}_ge = Erf({0}_gd)  {0}_ga = Add({0}_ge, one_f)  {0}_gm = Mul({0}_f, {0}_ga)
    {0}_g = Mul({0}_gm, half)  {0}_f2m = MatMul({0}_g, w2)  {0}_f2 = Add(b2, {0}_f2m)  {0}_r2 = Add({0}_n1, {0}_f2)
)",
                        L);
    body += layer_norm(l + 1 == layers ? "y" : fmt::format("x{}", l + 1), L + "_r2", "g2", "c2");
  }
  const std::string sig = fmt::format("encoder_stack (float[1,{0},{1}] x)", S, C);
  DecoderDims d;
  d.deferred = e.deferred;
  return assemble(sig, fmt::format("float[1,{},{}] y", S, C), inits, body, d);
}

}  // namespace gaf::testing
