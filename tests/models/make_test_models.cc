// Writes the small models the CLI test runs, in the ONNX backend-test layout of ../shared/models:
//
//   DIR/<name>/model.onnx   DIR/<name>/test_data_set_0/input_0.pb   DIR/<name>/test_data_set_0/output_0.pb
//
// so that a clone of the repository tests end to end without that folder. Each graph is written as ONNX text
// in the form torch.onnx.export (opset 13) gives such a module: GELU and LayerNorm decomposed, scalars and
// shapes as Constant nodes, a Linear as Gemm(transB=1) on 2-D inputs and as MatMul + Add on 3-D ones. Weights
// and inputs are seeded random. The expected output comes from the plain double-precision loops below, never
// from our runtime: a kernel or rewrite that computes the wrong thing fails the CLI test's comparison (rtol
// 1e-3, atol 1e-5).
//
//   gaf_make_test_models DIR
//   gaf_make_test_models --llm DIR LAYERS   GPT-2 and Llama-style decoders of GPT-2 small's sizes (bench/llm),
//                                           each also in ONNX Runtime's own dynamic int8 form (*_ort_int8.onnx)
//   gaf_make_test_models --deep DIR NODES   graphs of NODES nodes or more, for the planner's scale: those
//                                           decoders at the unit tests' sizes and a static-shape encoder
//                                           stack
#include <onnx/checker.h>
#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "gaf/onnx_io.h"
#include "gaf/tensor.h"
#include "models/decoder_exports.h"
#include "models/dynamic_int8.h"
#include "models/encoder_stack.h"

namespace {

namespace fs = std::filesystem;
using Values = std::vector<double>;  // a row-major tensor as the reference sees it

// Values exactly representable as float, so the model's weights and the reference's are the same numbers. The
// standard fixes mt19937_64's output but not the distributions' algorithms, hence the explicit scaling.
class Random {
 public:
  explicit Random(uint64_t seed) : engine_(seed) {}
  Values uniform(size_t n, double lo, double hi) {
    Values v(n);
    for (double& x : v) x = float(lo + (hi - lo) * double(engine_() >> 11) * 0x1.0p-53);
    return v;
  }

 private:
  std::mt19937_64 engine_;
};

struct Case {
  std::string name;
  onnx::ModelProto model;
  Values input;     // of the graph's single input, at its declared shape
  Values expected;  // of the graph's single output
};

Case parse(const std::string& name, const char* text) {
  Case c{name, {}, {}, {}};
  auto status = onnx::OnnxParser::Parse(c.model, text);
  if (!status.IsOK()) throw std::runtime_error(name + ": " + status.ErrorMessage());
  c.model.set_producer_name("gaf_make_test_models");
  return c;
}

gaf::Tensor to_tensor(std::vector<int64_t> dims, const Values& v) {
  std::vector<float> f(v.begin(), v.end());
  return gaf::Tensor::from<float>(std::move(dims), std::span<const float>(f));
}

// Adds the initializer `name` with seeded random values in [lo, hi) and returns them for the reference.
Values weight(Case& c, Random& rng, const std::string& name, std::vector<int64_t> dims, double lo,
              double hi) {
  Values v = rng.uniform(size_t(gaf::numel_of(dims)), lo, hi);
  onnx::TensorProto* t = c.model.mutable_graph()->add_initializer();
  gaf::onnx_io::tensor_to_proto(to_tensor(std::move(dims), v), *t);
  t->set_name(name);
  return v;
}

std::vector<int64_t> dims_of(const onnx::ValueInfoProto& vi) {
  std::vector<int64_t> dims;
  for (const auto& d : vi.type().tensor_type().shape().dim()) dims.push_back(d.dim_value());
  return dims;
}

// Checks the model (ONNX checker, then shape inference that fails on any conflict with the declared shapes)
// and writes it with its input and expected output.
void write(const fs::path& root, Case c) {
  auto& graph = *c.model.mutable_graph();
  // Named after their outputs, so profile and explain listings read against the text.
  for (auto& node : *graph.mutable_node()) node.set_name(node.output(0));
  onnx::checker::check_model(c.model);
  onnx::ModelProto inferred = c.model;
  onnx::shape_inference::InferShapes(inferred, onnx::OpSchemaRegistry::Instance(),
                                     onnx::ShapeInferenceOptions(/*check_type=*/true, /*error_mode=*/1));
  std::vector<int64_t> in_dims = dims_of(graph.input(0)), out_dims = dims_of(graph.output(0));
  if (c.input.size() != size_t(gaf::numel_of(in_dims)) ||
      c.expected.size() != size_t(gaf::numel_of(out_dims)))
    throw std::logic_error(c.name + ": the reference's sizes do not match the graph's declared shapes");

  fs::path dir = root / c.name;
  fs::create_directories(dir / "test_data_set_0");
  gaf::onnx_io::write_file_atomic((dir / "model.onnx").string(), c.model.SerializeAsString());
  gaf::onnx_io::save_tensor(to_tensor(in_dims, c.input), (dir / "test_data_set_0/input_0.pb").string(),
                            graph.input(0).name());
  gaf::onnx_io::save_tensor(to_tensor(out_dims, c.expected), (dir / "test_data_set_0/output_0.pb").string(),
                            graph.output(0).name());
}

// ---- the reference, in double precision ----

// A Linear: y[i,j] = b[j] + sum_k a[i,k] w(k,j), with w stored [n,k] (torch's layout, ONNX Gemm transB=1) or
// [k,n] (the MatMul operand torch exports for a Linear on a 3-D input).
enum class WeightLayout { NK, KN };
Values linear(const Values& a, const Values& w, const Values& b, int64_t m, int64_t k, int64_t n,
              WeightLayout layout) {
  Values y(size_t(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = b[j];
      for (int64_t kk = 0; kk < k; ++kk)
        s += a[i * k + kk] * (layout == WeightLayout::NK ? w[j * k + kk] : w[kk * n + j]);
      y[i * n + j] = s;
    }
  }
  return y;
}

// One image x [c,h,w], weights [o,c,3,3], stride 1, zero padding 1: the output keeps h x w.
Values conv3x3(const Values& x, const Values& w, const Values& b, int64_t c, int64_t h, int64_t wd,
               int64_t o) {
  Values y(size_t(o * h * wd));
  for (int64_t oc = 0; oc < o; ++oc) {
    for (int64_t i = 0; i < h; ++i) {
      for (int64_t j = 0; j < wd; ++j) {
        double s = b[oc];
        for (int64_t ic = 0; ic < c; ++ic) {
          for (int64_t di = 0; di < 3; ++di) {
            for (int64_t dj = 0; dj < 3; ++dj) {
              int64_t ii = i + di - 1, jj = j + dj - 1;
              if (ii < 0 || ii >= h || jj < 0 || jj >= wd) continue;
              s += x[(ic * h + ii) * wd + jj] * w[((oc * c + ic) * 3 + di) * 3 + dj];
            }
          }
        }
        y[(oc * h + i) * wd + j] = s;
      }
    }
  }
  return y;
}

Values relu(Values x) {
  for (double& v : x) v = std::max(v, 0.0);
  return x;
}

// Each row of x [rows,d] to zero mean and unit variance (biased, as torch's LayerNorm), then gamma and beta.
Values layer_norm(const Values& x, const Values& gamma, const Values& beta, int64_t rows, int64_t d,
                  double eps) {
  Values y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = &x[r * d];
    double mean = 0, var = 0;
    for (int64_t i = 0; i < d; ++i) mean += row[i] / double(d);
    for (int64_t i = 0; i < d; ++i) var += (row[i] - mean) * (row[i] - mean) / double(d);
    for (int64_t i = 0; i < d; ++i)
      y[r * d + i] = (row[i] - mean) / std::sqrt(var + eps) * gamma[i] + beta[i];
  }
  return y;
}

// ---- the models ----

// Linear -> GELU (erf form) -> Linear, input 16x64, hidden 256: ../shared/models/mlp at a smaller size.
Case make_mlp() {
  Case c = parse("mlp", R"(
    <ir_version: 7, opset_import: ["" : 13]>
    mlp (float[16, 64] x) => (float[16, 64] fc2) {
      fc1 = Gemm<transB = 1>(x, fc1_weight, fc1_bias)
      sqrt2 = Constant<value = float {1.41421356}>()
      gelu_div = Div(fc1, sqrt2)
      gelu_erf = Erf(gelu_div)
      one = Constant<value = float {1.0}>()
      gelu_add = Add(gelu_erf, one)
      gelu_mul = Mul(fc1, gelu_add)
      half = Constant<value = float {0.5}>()
      gelu = Mul(gelu_mul, half)
      fc2 = Gemm<transB = 1>(gelu, fc2_weight, fc2_bias)
    })");
  constexpr int64_t m = 16, d = 64, hidden = 256;
  Random rng(1);
  // Bounds as torch's default Linear init (1/sqrt(fan_in)); an input in [-2, 2) puts GELU's inputs on both
  // sides of its bend.
  Values w1 = weight(c, rng, "fc1_weight", {hidden, d}, -0.125, 0.125);
  Values b1 = weight(c, rng, "fc1_bias", {hidden}, -0.125, 0.125);
  Values w2 = weight(c, rng, "fc2_weight", {d, hidden}, -0.0625, 0.0625);
  Values b2 = weight(c, rng, "fc2_bias", {d}, -0.0625, 0.0625);
  c.input = rng.uniform(m * d, -2, 2);

  Values h = linear(c.input, w1, b1, m, d, hidden, WeightLayout::NK);
  for (double& v : h) v = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
  c.expected = linear(h, w2, b2, m, hidden, d, WeightLayout::NK);
  return c;
}

// Conv -> BatchNorm -> ReLU -> MaxPool -> Conv -> ReLU -> global average -> Flatten -> Linear, on 1x3x16x16.
Case make_convnet() {
  Case c = parse("convnet", R"(
    <ir_version: 7, opset_import: ["" : 13]>
    convnet (float[1, 3, 16, 16] x) => (float[1, 10] fc) {
      conv1 = Conv<dilations = [1, 1], group = 1, kernel_shape = [3, 3], pads = [1, 1, 1, 1],
                   strides = [1, 1]>(x, conv1_weight, conv1_bias)
      bn = BatchNormalization<epsilon = 0.00001, momentum = 0.9>(conv1, bn_scale, bn_bias, bn_mean, bn_var)
      relu1 = Relu(bn)
      pool = MaxPool<kernel_shape = [2, 2], pads = [0, 0, 0, 0], strides = [2, 2]>(relu1)
      conv2 = Conv<dilations = [1, 1], group = 1, kernel_shape = [3, 3], pads = [1, 1, 1, 1],
                   strides = [1, 1]>(pool, conv2_weight, conv2_bias)
      relu2 = Relu(conv2)
      gap = GlobalAveragePool(relu2)
      flat = Flatten<axis = 1>(gap)
      fc = Gemm<transB = 1>(flat, fc_weight, fc_bias)
    })");
  constexpr int64_t cin = 3, size = 16, c1 = 16, c2 = 32, classes = 10;
  constexpr double eps = 1e-5;
  Random rng(2);
  Values w1 = weight(c, rng, "conv1_weight", {c1, cin, 3, 3}, -0.19, 0.19);
  Values b1 = weight(c, rng, "conv1_bias", {c1}, -0.19, 0.19);
  Values scale = weight(c, rng, "bn_scale", {c1}, 0.5, 1.5);
  Values shift = weight(c, rng, "bn_bias", {c1}, -0.5, 0.5);
  Values mean = weight(c, rng, "bn_mean", {c1}, -0.2, 0.2);
  Values var = weight(c, rng, "bn_var", {c1}, 0.5, 1.5);
  Values w2 = weight(c, rng, "conv2_weight", {c2, c1, 3, 3}, -0.083, 0.083);
  Values b2 = weight(c, rng, "conv2_bias", {c2}, -0.083, 0.083);
  Values wf = weight(c, rng, "fc_weight", {classes, c2}, -0.18, 0.18);
  Values bf = weight(c, rng, "fc_bias", {classes}, -0.18, 0.18);
  c.input = rng.uniform(cin * size * size, -1, 1);

  constexpr int64_t plane = size * size, half = size / 2;
  Values y = conv3x3(c.input, w1, b1, cin, size, size, c1);
  for (int64_t ch = 0; ch < c1; ++ch) {
    for (int64_t p = 0; p < plane; ++p) {
      double& v = y[ch * plane + p];
      v = (v - mean[ch]) / std::sqrt(var[ch] + eps) * scale[ch] + shift[ch];
    }
  }
  y = relu(std::move(y));
  Values pooled(size_t(c1 * half * half), -std::numeric_limits<double>::infinity());
  for (int64_t ch = 0; ch < c1; ++ch) {
    for (int64_t i = 0; i < size; ++i) {
      for (int64_t j = 0; j < size; ++j) {
        double& out = pooled[(ch * half + i / 2) * half + j / 2];
        out = std::max(out, y[(ch * size + i) * size + j]);
      }
    }
  }
  y = relu(conv3x3(pooled, w2, b2, c1, half, half, c2));
  Values avg(size_t(c2), 0.0);
  for (int64_t ch = 0; ch < c2; ++ch) {
    for (int64_t p = 0; p < half * half; ++p) avg[ch] += y[ch * half * half + p] / double(half * half);
  }
  c.expected = linear(avg, wf, bf, 1, c2, classes, WeightLayout::NK);
  return c;
}

// Pre-norm self-attention block, sequence 8, width 32, 2 heads: LayerNorm -> Q/K/V -> scaled dot-product
// attention per head -> output projection -> residual.
Case make_encoder() {
  Case c = parse("encoder", R"(
    <ir_version: 7, opset_import: ["" : 13]>
    encoder (float[1, 8, 32] x) => (float[1, 8, 32] y) {
      ln_mean = ReduceMean<axes = [-1]>(x)
      ln_sub = Sub(x, ln_mean)
      two = Constant<value = float {2.0}>()
      ln_pow = Pow(ln_sub, two)
      ln_var = ReduceMean<axes = [-1]>(ln_pow)
      eps = Constant<value = float {0.00001}>()
      ln_add = Add(ln_var, eps)
      ln_sqrt = Sqrt(ln_add)
      ln_div = Div(ln_sub, ln_sqrt)
      ln_mul = Mul(ln_div, ln_weight)
      ln = Add(ln_mul, ln_bias)
      q_mm = MatMul(ln, q_weight)
      q = Add(q_bias, q_mm)
      k_mm = MatMul(ln, k_weight)
      k = Add(k_bias, k_mm)
      v_mm = MatMul(ln, v_weight)
      v = Add(v_bias, v_mm)
      heads_shape = Constant<value = int64[4] {1, 8, 2, 16}>()
      q_heads = Reshape(q, heads_shape)
      q_t = Transpose<perm = [0, 2, 1, 3]>(q_heads)
      k_heads = Reshape(k, heads_shape)
      k_t = Transpose<perm = [0, 2, 3, 1]>(k_heads)
      v_heads = Reshape(v, heads_shape)
      v_t = Transpose<perm = [0, 2, 1, 3]>(v_heads)
      scores = MatMul(q_t, k_t)
      sqrt_head = Constant<value = float {4.0}>()
      scaled = Div(scores, sqrt_head)
      probs = Softmax<axis = -1>(scaled)
      context = MatMul(probs, v_t)
      context_t = Transpose<perm = [0, 2, 1, 3]>(context)
      merged_shape = Constant<value = int64[3] {1, 8, 32}>()
      merged = Reshape(context_t, merged_shape)
      out_mm = MatMul(merged, out_weight)
      out = Add(out_bias, out_mm)
      y = Add(x, out)
    })");
  constexpr int64_t seq = 8, d = 32, heads = 2, dh = d / heads;
  Random rng(3);
  Values gamma = weight(c, rng, "ln_weight", {d}, 0.5, 1.5);
  Values beta = weight(c, rng, "ln_bias", {d}, -0.5, 0.5);
  std::vector<Values> w, b;  // q, k, v, out
  for (const char* p : {"q", "k", "v", "out"}) {
    w.push_back(weight(c, rng, std::string(p) + "_weight", {d, d}, -0.18, 0.18));
    b.push_back(weight(c, rng, std::string(p) + "_bias", {d}, -0.18, 0.18));
  }
  // A wide input range makes the scores differ enough that softmax is far from uniform.
  c.input = rng.uniform(seq * d, -3, 3);

  Values h = layer_norm(c.input, gamma, beta, seq, d, 1e-5);
  Values q = linear(h, w[0], b[0], seq, d, d, WeightLayout::KN);
  Values k = linear(h, w[1], b[1], seq, d, d, WeightLayout::KN);
  Values v = linear(h, w[2], b[2], seq, d, d, WeightLayout::KN);
  Values context(size_t(seq * d), 0.0);
  for (int64_t hd = 0; hd < heads; ++hd) {
    for (int64_t i = 0; i < seq; ++i) {
      Values p(seq, 0.0);  // query i's attention weights over the keys
      for (int64_t j = 0; j < seq; ++j) {
        for (int64_t e = 0; e < dh; ++e) p[j] += q[i * d + hd * dh + e] * k[j * d + hd * dh + e];
        p[j] /= std::sqrt(double(dh));
      }
      double top = *std::max_element(p.begin(), p.end()), sum = 0;
      for (double& s : p) {
        s = std::exp(s - top);
        sum += s;
      }
      for (int64_t j = 0; j < seq; ++j) {
        for (int64_t e = 0; e < dh; ++e) context[i * d + hd * dh + e] += p[j] / sum * v[j * d + hd * dh + e];
      }
    }
  }
  c.expected = linear(context, w[3], b[3], seq, d, d, WeightLayout::KN);
  for (int64_t i = 0; i < seq * d; ++i) c.expected[i] += c.input[i];
  return c;
}

// A GRU cell run over a sequence by a Loop, as a recurrent model written step by step exports: the body reads
// the input sequence and the weights from the main graph (outer-scope references) and picks step i with
// Gather.
Case make_gru_loop() {
  Case c = parse("gru_loop", R"(
    <ir_version: 8, opset_import: ["" : 17]>
    gru_loop (float[16, 8, 64] x) => (float[8, 64] y) {
      steps = Constant<value = int64 {16}>()
      go = Constant<value = bool {1}>()
      y = Loop(steps, go, h0) <body = gru_step (int64 i, bool c, float[8, 64] h) => (bool c_out, float[8, 64] h_out) {
        c_out = Identity(c)
        xt = Gather<axis = 0>(x, i)
        zx = MatMul(xt, wz)
        zh = MatMul(h, uz)
        zs = Add(zx, zh)
        zb = Add(zs, bz)
        z = Sigmoid(zb)
        rx = MatMul(xt, wr)
        rh = MatMul(h, ur)
        rs = Add(rx, rh)
        rb = Add(rs, br)
        r = Sigmoid(rb)
        nx = MatMul(xt, wn)
        gated = Mul(r, h)
        nh = MatMul(gated, un)
        ns = Add(nx, nh)
        nb = Add(ns, bn)
        n = Tanh(nb)
        one = Constant<value = float {1.0}>()
        keep = Sub(one, z)
        fresh = Mul(keep, n)
        carried = Mul(z, h)
        h_out = Add(fresh, carried)
      }>
    })");
  constexpr int64_t steps = 16, batch = 8, d = 64;
  Random rng(5);
  Values h = weight(c, rng, "h0", {batch, d}, -0.5, 0.5);
  std::vector<Values> w, u, b;  // z, r, n
  for (const char* g : {"z", "r", "n"}) {
    w.push_back(weight(c, rng, std::string("w") + g, {d, d}, -0.2, 0.2));
    u.push_back(weight(c, rng, std::string("u") + g, {d, d}, -0.2, 0.2));
    b.push_back(weight(c, rng, std::string("b") + g, {d}, -0.2, 0.2));
  }
  c.input = rng.uniform(steps * batch * d, -1, 1);
  const Values zero(size_t(d), 0.0);
  auto sigmoid = [](double v) { return 1 / (1 + std::exp(-v)); };
  for (int64_t t = 0; t < steps; ++t) {
    const Values xt(c.input.begin() + t * batch * d, c.input.begin() + (t + 1) * batch * d);
    Values z = linear(xt, w[0], b[0], batch, d, d, WeightLayout::KN);
    Values r = linear(xt, w[1], b[1], batch, d, d, WeightLayout::KN);
    Values n = linear(xt, w[2], b[2], batch, d, d, WeightLayout::KN);
    const Values zh = linear(h, u[0], zero, batch, d, d, WeightLayout::KN);
    const Values rh = linear(h, u[1], zero, batch, d, d, WeightLayout::KN);
    Values gated(h.size());
    for (size_t i = 0; i < h.size(); ++i) gated[i] = sigmoid(r[i] + rh[i]) * h[i];
    const Values nh = linear(gated, u[2], zero, batch, d, d, WeightLayout::KN);
    for (size_t i = 0; i < h.size(); ++i) {
      const double zi = sigmoid(z[i] + zh[i]);
      h[i] = (1 - zi) * std::tanh(n[i] + nh[i]) + zi * h[i];
    }
  }
  c.expected = h;
  return c;
}

}  // namespace

// Per-image scores of a detector's post-processing, as models with a variable number of boxes
// per image export it: a sequence of [boxes_i, 4] tensors in, each mapped by SequenceMap to the sum over its
// columns of sigmoid(box * scale) (a body the planner fuses), out as the per-image sequence and all scores
// concatenated.
void write_seq_scores(const fs::path& root) {
  Case c = parse("seq_scores", R"(
    <ir_version: 8, opset_import: ["" : 17]>
    seq_scores (float[N, 4] boxes) => (float[T] scores, float[M] per_image) {
      per_image = SequenceMap(boxes, scale) <body = score (float[K, 4] b, float[4] s) => (float[K] y) {
        z = Mul(b, s)
        p = Sigmoid(z)
        axes = Constant<value = int64[1] {1}>()
        y = ReduceSum<keepdims = 0>(p, axes)
      }>
      scores = ConcatFromSequence<axis = 0>(per_image)
    })");
  Random rng(9);
  const Values scale = weight(c, rng, "scale", {4}, -2, 2);
  // The text format has no sequence types: the graph's input and second output become seq(float) here.
  auto& g = *c.model.mutable_graph();
  for (onnx::ValueInfoProto* vi : {g.mutable_input(0), g.mutable_output(1)}) {
    onnx::TypeProto seq;
    seq.mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(
        onnx::TensorProto::FLOAT);
    *vi->mutable_type() = seq;
  }
  for (auto& node : *g.mutable_node()) node.set_name(node.output(0));
  onnx::checker::check_model(c.model);

  std::vector<gaf::Tensor> images, per_image;
  Values all;
  for (int64_t boxes : {3, 0, 5}) {  // an image without boxes too
    const Values b = rng.uniform(size_t(boxes * 4), -1, 1);
    images.push_back(to_tensor({boxes, 4}, b));
    Values sums;
    for (int64_t i = 0; i < boxes; ++i) {
      double sum = 0;
      for (int64_t j = 0; j < 4; ++j) sum += 1 / (1 + std::exp(-b[size_t(i * 4 + j)] * scale[size_t(j)]));
      sums.push_back(sum);
    }
    per_image.push_back(to_tensor({boxes}, sums));
    all.insert(all.end(), sums.begin(), sums.end());
  }
  const gaf::TensorType seq{gaf::DType::Float, std::nullopt, gaf::ValueKind::Sequence};
  fs::path dir = root / c.name;
  fs::create_directories(dir / "test_data_set_0");
  gaf::onnx_io::write_file_atomic((dir / "model.onnx").string(), c.model.SerializeAsString());
  gaf::onnx_io::save_value(gaf::Tensor::sequence(gaf::DType::Float, images), seq,
                           (dir / "test_data_set_0/input_0.pb").string(), "boxes");
  gaf::onnx_io::save_tensor(to_tensor({int64_t(all.size())}, all),
                            (dir / "test_data_set_0/output_0.pb").string(), "scores");
  gaf::onnx_io::save_value(gaf::Tensor::sequence(gaf::DType::Float, per_image), seq,
                           (dir / "test_data_set_0/output_1.pb").string(), "per_image");
}

// A model written as text (layers deep) with the weights declared as inputs, then attached as initializers.
using DeferredText = std::function<std::string(int layers, std::vector<gaf::testing::decoder_detail::Init>*)>;
onnx::ModelProto deferred_model(const DeferredText& text, int layers) {
  std::vector<gaf::testing::decoder_detail::Init> weights;
  const std::string t = text(layers, &weights);
  onnx::ModelProto m = gaf::testing::decoder_proto(t, weights);
  m.set_producer_name("gaf_make_test_models");
  return m;
}

void write_model(const fs::path& path, const onnx::ModelProto& m, const std::string& what) {
  fs::create_directories(path.parent_path());
  gaf::onnx_io::write_file_atomic(path.string(), m.SerializeAsString());
  std::cout << "wrote " << path.string() << " (" << what << ", " << m.graph().node_size() << " nodes, "
            << m.graph().initializer_size() << " weights)\n";
}

DeferredText decoder_text(const std::string& name, gaf::testing::DecoderDims d) {
  return [name, d](int layers, std::vector<gaf::testing::decoder_detail::Init>* weights) mutable {
    d.deferred = weights;
    return name == "gpt2" ? gaf::testing::gpt2_decoder(layers, d) : gaf::testing::llama_decoder(layers, d);
  };
}

// Benchmark-sized decoders (bench/llm).
void write_llm(const fs::path& dir, int layers) {
  gaf::testing::DecoderDims d;
  d.embed = 768, d.heads = 12, d.head_dim = 64, d.hidden = 3072, d.vocab = 8192, d.max_positions = 1280;
  for (const char* name : {"gpt2", "llama"}) {
    const onnx::ModelProto m = deferred_model(decoder_text(name, d), layers);
    write_model(dir / (std::string(name) + ".onnx"), m, fmt::format("{} layers", layers));
    write_model(dir / (std::string(name) + "_ort_int8.onnx"), gaf::testing::ort_dynamic_int8(m),
                fmt::format("{} layers, ONNX Runtime's dynamic int8 form", layers));
  }
}

// Deep graphs of at least `nodes` nodes: as many layers as that takes, counted from 1- and 2-layer models.
void write_deep(const fs::path& dir, int nodes) {
  const std::vector<std::pair<std::string, DeferredText>> models = {
      {"gpt2", decoder_text("gpt2", {})},
      {"llama", decoder_text("llama", {})},
      {"encoder_stack", [](int layers, std::vector<gaf::testing::decoder_detail::Init>* weights) {
         gaf::testing::EncoderDims e;
         e.deferred = weights;
         return gaf::testing::encoder_stack(layers, e);
       }}};
  for (const auto& [name, text] : models) {
    const int one = deferred_model(text, 1).graph().node_size(),
              two = deferred_model(text, 2).graph().node_size();
    const int layers = std::max(1, 1 + (nodes - one + two - one - 1) / (two - one));
    write_model(dir / (name + ".onnx"), deferred_model(text, layers), fmt::format("{} layers", layers));
  }
}

int main(int argc, char** argv) {
  if (argc == 4 && (std::string(argv[1]) == "--llm" || std::string(argv[1]) == "--deep")) {
    try {
      if (std::string(argv[1]) == "--llm")
        write_llm(argv[2], std::stoi(argv[3]));
      else
        write_deep(argv[2], std::stoi(argv[3]));
      return 0;
    } catch (const std::exception& e) {
      std::cerr << "gaf_make_test_models: " << e.what() << "\n";
      return 1;
    }
  }
  if (argc != 2) {
    std::cerr << "usage: gaf_make_test_models DIR\n       gaf_make_test_models --llm DIR LAYERS\n"
                 "       gaf_make_test_models --deep DIR NODES\n";
    return 2;
  }
  try {
    write(argv[1], make_mlp());
    write(argv[1], make_convnet());
    write(argv[1], make_encoder());
    write(argv[1], make_gru_loop());
    write_seq_scores(argv[1]);
    // Decoders with past/present inputs and outputs for `generate` (no stored outputs: the unit tests check
    // their numbers against a full prefill).
    fs::create_directories(fs::path(argv[1]) / "decoders");
    for (auto [name, text] : {std::pair{"gpt2", gaf::testing::gpt2_decoder(2, {})},
                              std::pair{"llama", gaf::testing::llama_decoder(2, {})}}) {
      onnx::ModelProto m;
      auto status = onnx::OnnxParser::Parse(m, text.c_str());
      if (!status.IsOK()) throw std::runtime_error(std::string(name) + ": " + status.ErrorMessage());
      m.set_producer_name("gaf_make_test_models");
      gaf::onnx_io::write_file_atomic((fs::path(argv[1]) / "decoders" / (std::string(name) + ".onnx")).string(),
                                      m.SerializeAsString());
    }
  } catch (const std::exception& e) {
    std::cerr << "gaf_make_test_models: " << e.what() << "\n";
    return 1;
  }
  std::cout << "wrote mlp, convnet, encoder, gru_loop, seq_scores, decoders/gpt2, decoders/llama to "
            << argv[1] << "\n";
  return 0;
}
