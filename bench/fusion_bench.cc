// Fused vs unfused on the cases of the CPU codegen issue, interleaved in one run, with this machine's copy
// bandwidth measured in the same run:
//
//   gaf_fusion_bench [--iterations N] [--filter SUBSTR] [--save-models DIR]
//
// For each case: unfused ms, fused ms, their ratio, and the fused run's achieved bandwidth (bytes the fused graph
// must move / median time) as a fraction of the measured copy bandwidth.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>

#include "gaf/builder.h"
#include "gaf/onnx_io.h"
#include "gaf/session.h"
#include "gaf/tools.h"

namespace {

using namespace gaf;

double copy_bandwidth() {
  const size_t n = size_t(64) << 20;  // 256 MB of floats
  std::vector<float> a(n, 1.0f), b(n, 0.0f);
  std::vector<double> t;
  for (int i = 0; i < 5; ++i) {
    auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < 64; ++c) std::memcpy(b.data() + c * (n / 64), a.data() + c * (n / 64), n / 64 * 4);
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return 2.0 * double(n) * 4 / t[t.size() / 2];  // read + write
}

struct Case {
  std::string name;
  Model model;
  int64_t dynamic_dim = 1;  // the size every symbolic dim runs with
};

Case elementwise_chain() {
  Case c{"elementwise chain, 8 ops, 16M fp32", {}};
  GraphBuilder b(c.model);
  Value* x = b.input("x", DType::Float, {16 << 20});
  Value* y = b.input("y", DType::Float, {16 << 20});
  Value* t = b.op("Add", {x, y});
  t = b.op("Mul", {t, b.scalar(0.5f)});
  t = b.op("Relu", {t});
  t = b.op("Sub", {t, y});
  t = b.op("Mul", {t, t});
  t = b.op("Add", {t, b.scalar(1.0f)});
  t = b.op("Sqrt", {t});
  t = b.op("Neg", {t});
  b.output(t);
  b.finish();
  return c;
}

// The twelve-op chain of the generated-kernels issue (#28): transcendental ops (Sigmoid, Tanh, Exp) between
// streaming ones, over two 16M-element inputs; at bandwidth it moves 192 MB.
Case transcendental_chain() {
  Case c{"transcendental chain, 12 ops, 16M fp32", {}};
  GraphBuilder b(c.model);
  Value* x = b.input("x", DType::Float, {16 << 20});
  Value* y = b.input("y", DType::Float, {16 << 20});
  Value* t = b.op("Relu", {b.op("Add", {x, y})});
  t = b.op("Mul", {t, y});
  t = b.op("Tanh", {b.op("Sigmoid", {t})});
  t = b.op("Mul", {b.op("Sub", {t, x}), b.scalar(0.75f)});
  t = b.op("Neg", {b.op("Abs", {b.op("Add", {t, y})})});
  t = b.op("Clip", {b.op("Exp", {t}), b.scalar(0.0f), b.scalar(6.0f)});
  b.output(t);
  b.finish();
  return c;
}

// Activations as torch exports them, alone over 16M fp32 (one read, one write: 128 MB at bandwidth): GELU's erf
// form (Div, Erf, Add, Mul, Mul), SiLU (x * Sigmoid(x)).
Case gelu_erf_16m() {
  Case c{"GELU (erf form as exported), 16M fp32", {}};
  GraphBuilder b(c.model);
  Value* x = b.input("x", DType::Float, {16 << 20});
  Value* e = b.op("Erf", {b.op("Div", {x, b.scalar(1.41421356f)})});
  b.output(b.op("Mul", {b.op("Mul", {x, b.op("Add", {e, b.scalar(1.0f)})}), b.scalar(0.5f)}));
  b.finish();
  return c;
}

Case silu_16m() {
  Case c{"SiLU x*Sigmoid(x), 16M fp32", {}};
  GraphBuilder b(c.model);
  Value* x = b.input("x", DType::Float, {16 << 20});
  b.output(b.op("Mul", {x, b.op("Sigmoid", {x})}));
  b.finish();
  return c;
}

// Pow with a tensor exponent (a learned or computed power), after Abs: 192 MB at bandwidth. Op by op and
// fused, Pow runs simd::powv.
Case pow_16m() {
  Case c{"Pow(|x|, y), 16M fp32", {}};
  GraphBuilder b(c.model);
  Value* x = b.input("x", DType::Float, {16 << 20});
  Value* y = b.input("y", DType::Float, {16 << 20});
  b.output(b.op("Pow", {b.op("Abs", {x}), y}));
  b.finish();
  return c;
}

// The same five-op chain over fp16 and bf16 elements (16-bit in memory, fp32 in the formulas): 96 MB at
// bandwidth.
Case half_chain(DType dtype, const char* name) {
  Case c{name, {}};
  GraphBuilder b(c.model);
  Value* x = b.input("x", dtype, {16 << 20});
  Value* y = b.input("y", dtype, {16 << 20});
  Value* t = b.op("Mul", {b.op("Relu", {b.op("Add", {x, y})}), y});
  b.output(b.op("Sub", {b.op("Sigmoid", {t}), x}));
  b.finish();
  return c;
}
Case fp16_chain() { return half_chain(DType::Float16, "Add->Relu->Mul->Sigmoid->Sub, 16M fp16"); }
Case bf16_chain() { return half_chain(DType::BFloat16, "Add->Relu->Mul->Sigmoid->Sub, 16M bf16"); }

Case add_relu_mul() {
  Case c{"Add->Relu->Mul [1,2048,56,56]", {}};
  GraphBuilder b(c.model);
  Value* x = b.input("x", DType::Float, {1, 2048, 56, 56});
  Value* y = b.input("y", DType::Float, {1, 2048, 56, 56});
  Value* s = b.random_constant("scale", {2048, 1, 1}, 1.0f);
  b.output(b.op("Mul", {b.op("Relu", {b.op("Add", {x, y})}), s}));
  b.finish();
  return c;
}

Case reduce_mean() {
  Case c{"Relu->Mul->ReduceMean [1,2048,7,7]->[1,2048]", {}};
  GraphBuilder b(c.model);
  Value* x = b.input("x", DType::Float, {1, 2048, 7, 7});
  Value* t = b.op("Mul", {b.op("Relu", {x}), b.scalar(2.0f)});
  b.output(b.op("ReduceMean", {t}, {{"axes", std::vector<int64_t>{2, 3}}, {"keepdims", int64_t(0)}}));
  b.finish();
  return c;
}

// Relu -> ReduceSum over `axes` of a 64 MB tensor: the reductions that are not over the trailing row (#28:
// at >= 70% of the copy bandwidth), and one over everything.
Case reduce_sum(std::vector<int64_t> dims, std::vector<int64_t> axes, const char* what) {
  Case c{fmt::format("Relu->ReduceSum {} [{}]", what, fmt::join(dims, ",")), {}};
  GraphBuilder b(c.model);
  Value* x = b.input("x", DType::Float, std::vector<Dim>(dims.begin(), dims.end()));
  b.output(b.op("ReduceSum", {b.op("Relu", {x}), b.constant(Tensor::from<int64_t>({int64_t(axes.size())}, axes), "axes")},
                {{"keepdims", int64_t(1)}}));
  b.finish();
  return c;
}
Case reduce_outer() { return reduce_sum({4096, 4096}, {0}, "outer axis"); }
Case reduce_middle() { return reduce_sum({64, 512, 512}, {1}, "middle axis"); }
Case reduce_all() { return reduce_sum({4096, 4096}, {0, 1}, "all axes"); }

// The tail of an EfficientNet-B0 block as it exports: a 3x3 depthwise convolution and SiLU (x * Sigmoid(x)), the
// squeeze-excitation (global average, 1x1 convolution to R channels, SiLU, 1x1 back to C, Sigmoid, the Mul scaling
// the activation), the 1x1 projection to C / 6.
Case squeeze_excitation(int64_t c, int64_t r, int64_t h) {
  Case cs{fmt::format("dw+SiLU, SE, projection [1,{},{},{}]", c, h, h), {}};
  GraphBuilder b(cs.model);
  auto silu = [&](Value* v) { return b.op("Mul", {v, b.op("Sigmoid", {v})}); };
  Value* d = b.op("Conv", {b.input("x", DType::Float, {1, c, h, h}), b.random_constant("wd", {c, 1, 3, 3}, 0.3f)},
                  {{"group", c}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  Value* x = silu(d);
  Value* s = b.op("Conv", {b.op("GlobalAveragePool", {x}), b.random_constant("w1", {r, c, 1, 1}, 0.1f),
                          b.random_constant("b1", {r}, 0.1f)});
  Value* g = b.op("Conv", {silu(s), b.random_constant("w2", {c, r, 1, 1}, 0.1f), b.random_constant("b2", {c}, 0.1f)});
  b.output(b.op("Conv", {b.op("Mul", {x, b.op("Sigmoid", {g})}), b.random_constant("wp", {c / 6, c, 1, 1}, 0.1f)}));
  b.finish();
  return cs;
}
Case se_late() { return squeeze_excitation(1152, 48, 7); }
Case se_early() { return squeeze_excitation(144, 6, 56); }

Case softmax_rows() {
  Case c{"scale->Softmax rows [4096,768]", {}};
  GraphBuilder b(c.model);
  Value* x = b.input("x", DType::Float, {4096, 768});
  b.output(b.op("Softmax", {b.op("Mul", {x, b.scalar(0.125f)})}, {{"axis", int64_t(-1)}}));
  b.finish();
  return c;
}

// A row's maximum and the row shifted by it, then exp-normalised and scaled by the shift, over long rows: the
// first group returns the shifted row, which its row kernel stages in the output itself.
Case shifted_rows() {
  Case c{"ReduceMax->Sub, Exp/Sum*shift rows [64,60000]", {}};
  GraphBuilder b(c.model);
  Value* x = b.input("x", DType::Float, {64, 60000});
  Value* d = b.op("Sub", {x, b.op("ReduceMax", {x}, {{"axes", std::vector<int64_t>{-1}}, {"keepdims", int64_t(1)}})});
  Value* e = b.op("Exp", {d});
  Value* s = b.op("ReduceSum", {e, b.constant(Tensor::from<int64_t>({1}, std::vector<int64_t>{-1}), "axes")},
                  {{"keepdims", int64_t(1)}});
  b.output(b.op("Mul", {b.op("Div", {e, s}), d}));
  b.finish();
  return c;
}

// LayerNormalization over the last axis as PyTorch exports it: ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div,
// Mul, Add.
Value* decomposed_layernorm(GraphBuilder& b, Value* x, const std::string& name) {
  auto attrs = std::map<std::string, Attribute>{{"axes", std::vector<int64_t>{-1}}, {"keepdims", int64_t(1)}};
  Value* m = b.op("ReduceMean", {x}, attrs);
  Value* d = b.op("Sub", {x, m});
  Value* v = b.op("ReduceMean", {b.op("Pow", {d, b.scalar(2.0f)})}, attrs);
  Value* n = b.op("Div", {d, b.op("Sqrt", {b.op("Add", {v, b.scalar(1e-5f)})})});
  Value* g = b.random_constant(name + "_gamma", {768}, 1.0f);
  Value* bb = b.random_constant(name + "_beta", {768}, 0.1f);
  return b.op("Add", {b.op("Mul", {n, g}), bb});
}

Case layernorm_rows() {
  Case c{"LayerNorm (decomposed) rows [4096,768]", {}};
  GraphBuilder b(c.model);
  b.output(decomposed_layernorm(b, b.input("x", DType::Float, {4096, 768}), "ln"));
  b.finish();
  return c;
}

// GELU in the erf form PyTorch exports: x * (erf(x / sqrt(2)) + 1) * 0.5.
Value* erf_gelu(GraphBuilder& b, Value* f) {
  Value* erf = b.op("Erf", {b.op("Div", {f, b.scalar(std::sqrt(2.0f))})});
  return b.op("Mul", {b.op("Mul", {f, b.op("Add", {erf, b.scalar(1.0f)})}), b.scalar(0.5f)});
}

Case matmul_bias_gelu() {
  Case c{"MatMul+bias+GELU [512,768]x[768,3072]", {}};
  GraphBuilder b(c.model);
  Value* x = b.input("x", DType::Float, {512, 768});
  Value* w = b.random_constant("w", {768, 3072}, 0.03f);
  Value* bias = b.random_constant("bias", {3072}, 0.1f);
  b.output(erf_gelu(b, b.op("Add", {b.op("MatMul", {x, w}), bias})));
  b.finish();
  return c;
}

// A LLaMA-style MLP's gate at a 256-token prompt with static shapes: SiLU of the gate product times the up
// product (SwiGLU), the gate an anchor whose epilogue is SiLU then Mul.
Case matmul_silu_mul() {
  Case c{"MatMul+SiLU*up [256,768]x[768,3072]", {}};
  GraphBuilder b(c.model);
  Value* x = b.input("x", DType::Float, {256, 768});
  Value* g = b.op("MatMul", {x, b.random_constant("w_gate", {768, 3072}, 0.03f)});
  Value* u = b.op("MatMul", {x, b.random_constant("w_up", {768, 3072}, 0.03f)});
  b.output(b.op("Mul", {b.op("Mul", {g, b.op("Sigmoid", {g})}), u}));
  b.finish();
  return c;
}

// BERT-style self-attention, 12 heads, d 768, sequence 512: heads split by Reshape + Transpose, scores scaled
// by 1/sqrt(64), an additive padding mask, Softmax, heads merged back. `projections` adds the Q/K/V and output
// projections around it (a full attention layer, where the GEMMs dominate). The mask is an input (random values)
// unless `valid` > 0: then a padded batch, the keys from `valid` on masked with torch.finfo(float32).min.
Case attention(bool projections, int64_t valid = 0) {
  Case c{projections ? "attention layer + projections, 12h d768 L512"
         : valid    ? fmt::format("attention 12h d768 L512, {} keys unpadded", valid)
                    : "attention 12 heads d768 L512 (+mask)",
         {}};
  GraphBuilder b(c.model);
  const int64_t L = 512, H = 12, D = 64;
  Value* heads = b.ints({1, L, H, D});
  Value* merged = b.ints({1, L, H * D});
  Value* mask;
  if (valid > 0) {
    std::vector<float> m(size_t(L), 0.0f);
    std::fill(m.begin() + valid, m.end(), -3.4028234663852886e+38f);
    mask = b.constant(Tensor::from<float>({1, 1, 1, L}, m), "padding");
  } else {
    mask = b.input("mask", DType::Float, {1, 1, 1, L});
  }
  auto split = [&](Value* x, std::vector<int64_t> perm) {
    return b.op("Transpose", {b.op("Reshape", {x, heads})}, {{"perm", perm}});
  };
  Value *q, *k, *v;
  if (projections) {
    Value* x = b.input("x", DType::Float, {1, L, H * D});
    auto proj = [&](const char* name) {
      return b.op("Add", {b.op("MatMul", {x, b.random_constant(std::string(name) + "_w", {H * D, H * D}, 0.03f)}),
                          b.random_constant(std::string(name) + "_b", {H * D}, 0.1f)});
    };
    q = proj("q"), k = proj("k"), v = proj("v");
  } else {
    q = b.input("q", DType::Float, {1, L, H * D});
    k = b.input("k", DType::Float, {1, L, H * D});
    v = b.input("v", DType::Float, {1, L, H * D});
  }
  Value* s = b.op("MatMul", {split(q, {0, 2, 1, 3}), split(k, {0, 2, 3, 1})});
  Value* p = b.op("Softmax", {b.op("Add", {b.op("Div", {s, b.scalar(8.0f)}), mask})}, {{"axis", int64_t(-1)}});
  Value* o = b.op("Reshape", {b.op("Transpose", {b.op("MatMul", {p, split(v, {0, 2, 1, 3})})},
                                    {{"perm", std::vector<int64_t>{0, 2, 1, 3}}}),
                               merged});
  if (projections)
    o = b.op("Add", {b.op("MatMul", {o, b.random_constant("o_w", {H * D, H * D}, 0.03f)}),
                     b.random_constant("o_b", {H * D}, 0.1f)});
  b.output(o);
  b.finish();
  return c;
}

// A BERT encoder layer as exported with dynamic axes (batch and sequence symbolic; run at batch 1, sequence 256
// here): the head reshapes' targets come from Shape(x) at run time, LayerNorm and GELU (erf form) decomposed.
Case bert_layer_dynamic() {
  Case c{"BERT layer, dynamic axes (L=256), 12h d768", {}, 256};
  GraphBuilder b(c.model);
  const int64_t H = 12, D = 64, E = H * D;
  Value* x = b.input("x", DType::Float, {Dim(1), Dim(std::string("seq")), Dim(E)});
  Value* mask = b.input("mask", DType::Float, {Dim(1), Dim(1), Dim(1), Dim(std::string("seq"))});
  auto linear = [&](Value* in, const std::string& name, int64_t k, int64_t n) {
    return b.op("Add", {b.op("MatMul", {in, b.random_constant(name + "_w", {k, n}, 0.03f)}),
                        b.random_constant(name + "_b", {n}, 0.1f)});
  };
  Value* shape = b.op("Shape", {x});
  Value* batch = b.op("Gather", {shape, b.ints({0})}, {{"axis", int64_t(0)}});
  Value* seq = b.op("Gather", {shape, b.ints({1})}, {{"axis", int64_t(0)}});
  Value* heads = b.op("Concat", {batch, seq, b.ints({H}), b.ints({D})}, {{"axis", int64_t(0)}});
  Value* merged = b.op("Concat", {batch, seq, b.ints({E})}, {{"axis", int64_t(0)}});
  auto split = [&](Value* t, std::vector<int64_t> perm) {
    return b.op("Transpose", {b.op("Reshape", {t, heads})}, {{"perm", perm}});
  };
  Value* q = split(linear(x, "q", E, E), {0, 2, 1, 3});
  Value* k = split(linear(x, "k", E, E), {0, 2, 3, 1});
  Value* v = split(linear(x, "v", E, E), {0, 2, 1, 3});
  Value* s = b.op("Add", {b.op("Div", {b.op("MatMul", {q, k}), b.scalar(8.0f)}), mask});
  Value* p = b.op("Softmax", {s}, {{"axis", int64_t(-1)}});
  Value* ctx = b.op("Reshape", {b.op("Transpose", {b.op("MatMul", {p, v})}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}}),
                                merged});
  Value* h = decomposed_layernorm(b, b.op("Add", {linear(ctx, "o", E, E), x}), "ln1");
  Value* g = erf_gelu(b, linear(h, "ffn1", E, 4 * E));
  b.output(decomposed_layernorm(b, b.op("Add", {linear(g, "ffn2", 4 * E, E), h}), "ln2"));
  b.finish();
  return c;
}

// Decoder self-attention, 12 heads of 64, 1024 positions, a causal mask (-inf above the diagonal, as
// masked_fill exports it): the fused kernel skips each query block's future keys.
Case attention_causal() {
  Case c{"causal attention 12h d64 L1024", {}};
  GraphBuilder b(c.model);
  const int64_t L = 1024, H = 12, D = 64;
  Value* q = b.input("q", DType::Float, {1, H, L, D});
  Value* k = b.input("k", DType::Float, {1, H, L, D});
  Value* v = b.input("v", DType::Float, {1, H, L, D});
  std::vector<float> m(size_t(L * L), 0.0f);
  for (int64_t i = 0; i < L; ++i)
    std::fill(m.begin() + i * L + i + 1, m.begin() + (i + 1) * L, -std::numeric_limits<float>::infinity());
  Value* mask = b.constant(Tensor::from<float>({1, 1, L, L}, m), "causal");
  Value* s = b.op("MatMul", {q, b.op("Transpose", {k}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}})});
  Value* p = b.op("Softmax", {b.op("Add", {b.op("Mul", {s, b.scalar(0.125f)}), mask})}, {{"axis", int64_t(-1)}});
  b.output(b.op("MatMul", {p, v}));
  b.finish();
  return c;
}

Case attention_core() { return attention(false); }
Case attention_padded() { return attention(false, 128); }
Case attention_layer() { return attention(true); }

}  // namespace

int main(int argc, char** argv) {
  int iterations = 15;
  std::string filter, save_dir;  // --save-models DIR: each case as DIR/<n>.onnx (for profile, explain, ORT)
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--iterations" && i + 1 < argc) iterations = std::atoi(argv[++i]);
    else if (a == "--filter" && i + 1 < argc) filter = argv[++i];
    else if (a == "--save-models" && i + 1 < argc) save_dir = argv[++i];
  }
  double bw = copy_bandwidth();
  // Kernels timed on OpenMP's thread count, as the copy is: the sessions' thread chooser reacts to load (and
  // to the first runs' page faults), which would mix one- and two-thread runs into one median.
  runtime::SessionOptions session;
  session.adapt_threads = false;
  std::cout << fmt::format("copy bandwidth (read+write, {} threads, measured now): {:.1f} GB/s\n\n",
                           omp_get_max_threads(), bw / 1e9);
  std::cout << fmt::format("{:<46} {:>8} {:>9} {:>9} {:>7} {:>10} {:>9} {:>4} {:>8}\n", "case", "kernels", "unfused",
                           "fused", "ratio", "fused GB/s", "% of copy", "gen", "max rel");
  std::vector<Case (*)()> cases = {elementwise_chain, transcendental_chain, gelu_erf_16m, silu_16m, pow_16m,
                                   fp16_chain, bf16_chain, add_relu_mul, reduce_mean, reduce_outer,
                                   reduce_middle, reduce_all, softmax_rows, shifted_rows, layernorm_rows,
                                   matmul_bias_gelu, matmul_silu_mul, attention_core, attention_padded,
                                   attention_causal, attention_layer, bert_layer_dynamic, se_late, se_early};
  for (const auto& make : cases) {
    Case c = make();
    if (!filter.empty() && c.name.find(filter) == std::string::npos) continue;
    if (!save_dir.empty()) {
      std::filesystem::create_directories(save_dir);
      onnx_io::save_model(PortableModel(c.model), (std::filesystem::path(save_dir) / fmt::format("case{}.onnx", &make - cases.data())).string());
    }
    tools::FuseOptions opts;
    opts.fusion.opt_level = 3;
    auto inputs = tools::random_inputs(*c.model.graph, 1, c.dynamic_dim);
    Model fused = tools::copy_model(c.model);
    tools::FuseResult fr = tools::fuse_model(fused, opts);
    tools::BenchResult r = tools::bench_fusion(c.model, opts, inputs, iterations, session);
    double gbs = fr.after.bytes / r.fused.median_s;
    std::cout << fmt::format("{:<46} {:>3}->{:<3} {:>7.2f}ms {:>7.2f}ms {:>6.2f}x {:>10.1f} {:>8.0f}% {:>4} {:>8.1e}\n",
                             c.name, r.unfused_kernels, r.fused_kernels, r.unfused.median_s * 1e3,
                             r.fused.median_s * 1e3, r.ratio(), gbs / 1e9, 100.0 * gbs / bw, r.generated,
                             r.max_rel_err);
    for (const auto& [node, why] : r.fallbacks) std::cout << "    op by op: " << node << ": " << why << "\n";
  }
  return 0;
}
