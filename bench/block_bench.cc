// MobileNet-style inverted residual blocks (1x1 expansion, activation, KxK depthwise convolution, activation) at
// the shapes of MobileNetV2, MobileNetV3-small, EfficientNet-B0 and ShuffleNetV2, fused at -O 3 twice: once with
// the fused expansion + depthwise kernel (gaf.ExpandDepthwiseConv) and once without it (the two convolutions
// apart, the target's conv_expand_depthwise off). Both run in one process, alternating in rounds, so machine
// noise hits both alike:
//
//   gaf_block_bench [--rounds R] [--runs N] [--filter SUBSTR]
//
// For each block: the minimum and median over rounds of each variant's per-round median, and the median of the
// per-round ratios (fused kernel / apart; below 1 means the fused kernel is faster) with their range.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include "gaf/builder.h"
#include "gaf/session.h"
#include "gaf/tools.h"

namespace {

using namespace gaf;

struct Block {
  std::string model;
  int64_t c, e, h, k, s;
  std::string act;   // after the expansion: "Relu6", "Relu", "HardSwish", "Silu"
  std::string act2;  // after the depthwise convolution: the same, or "" for none
};

Value* activation(GraphBuilder& b, Value* x, const std::string& act) {  // act: see Block
  if (act == "Relu") return b.op("Relu", {x});
  if (act == "Relu6") return b.op("Clip", {x, b.scalar(0.f), b.scalar(6.f)});
  if (act == "HardSwish") return b.op("HardSwish", {x});
  return b.op("Mul", {x, b.op("Sigmoid", {x})});  // SiLU as exporters write it
}

Model block_model(const Block& blk) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::Float, {1, blk.c, blk.h, blk.h});
  Value* a = b.op("Conv", {x, b.random_constant("w1", {blk.e, blk.c, 1, 1}, 0.2f), b.random_constant("b1", {blk.e}, 0.1f)});
  a = activation(b, a, blk.act);
  const int64_t p = blk.k / 2;
  Value* d = b.op("Conv", {a, b.random_constant("w2", {blk.e, 1, blk.k, blk.k}, 0.2f), b.random_constant("b2", {blk.e}, 0.1f)},
                  {{"group", blk.e}, {"strides", std::vector<int64_t>{blk.s, blk.s}}, {"pads", std::vector<int64_t>{p, p, p, p}}});
  b.output(blk.act2.empty() ? d : activation(b, d, blk.act2));
  b.finish();
  return m;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds per run, the median of `runs` runs.
double time_median(runtime::Session& s, const std::vector<Tensor>& inputs, int runs) {
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    s.run(inputs);
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(t);
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 15, runs = 20;
  std::string filter;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--rounds" && i + 1 < argc) rounds = std::max(1, std::atoi(argv[++i]));
    else if (a == "--runs" && i + 1 < argc) runs = std::max(1, std::atoi(argv[++i]));
    else if (a == "--filter" && i + 1 < argc) filter = argv[++i];
  }
  const Block blocks[] = {
      {"mobilenet_v2", 16, 96, 112, 3, 2, "Relu6", "Relu6"},   {"mobilenet_v2", 24, 144, 56, 3, 1, "Relu6", "Relu6"},
      {"mobilenet_v2", 24, 144, 56, 3, 2, "Relu6", "Relu6"},   {"mobilenet_v2", 32, 192, 28, 3, 1, "Relu6", "Relu6"},
      {"mobilenet_v2", 64, 384, 14, 3, 1, "Relu6", "Relu6"},   {"mobilenet_v3_small", 16, 72, 56, 3, 2, "Relu", "Relu"},
      {"mobilenet_v3_small", 24, 88, 28, 3, 1, "Relu", "Relu"}, {"mobilenet_v3_small", 24, 96, 28, 5, 2, "HardSwish", "HardSwish"},
      {"mobilenet_v3_small", 40, 240, 14, 5, 1, "HardSwish", "HardSwish"}, {"mobilenet_v3_small", 40, 120, 14, 5, 1, "HardSwish", "HardSwish"},
      {"mobilenet_v3_small", 48, 144, 14, 5, 1, "HardSwish", "HardSwish"}, {"mobilenet_v3_small", 48, 288, 14, 5, 2, "HardSwish", "HardSwish"},
      {"efficientnet_b0", 16, 96, 112, 3, 2, "Silu", "Silu"}, {"efficientnet_b0", 24, 144, 56, 3, 1, "Silu", "Silu"},
      {"efficientnet_b0", 24, 144, 56, 5, 2, "Silu", "Silu"}, {"efficientnet_b0", 40, 240, 28, 5, 1, "Silu", "Silu"},
      {"efficientnet_b0", 40, 240, 28, 3, 2, "Silu", "Silu"},
      // ShuffleNetV2's branches: 1x1 + ReLU, then a depthwise convolution without an activation.
      {"shufflenet_v2", 24, 58, 56, 3, 2, "Relu", ""}, {"shufflenet_v2", 58, 58, 28, 3, 1, "Relu", ""}};
  std::cout << fmt::format("{:<20} {:<30} {:>17} {:>17} {:>22}\n", "model", "block", "apart ms min/med",
                           "fused ms min/med", "fused/apart med (range)");
  for (const Block& blk : blocks) {
    const std::string name = fmt::format("{}->{} {}x{} k{} s{} {}{}", blk.c, blk.e, blk.h, blk.h, blk.k, blk.s, blk.act,
                                         blk.act2 == blk.act ? "" : "/" + (blk.act2.empty() ? "-" : blk.act2));
    if (!filter.empty() && (blk.model + " " + name).find(filter) == std::string::npos) continue;
    const Model source = block_model(blk);
    auto variant = [&](bool expand_depthwise, size_t& fused_ops) {
      tools::FuseOptions opts;
      opts.fusion.opt_level = 3;
      opts.target.conv_expand_depthwise = expand_depthwise;
      opts.target.conv_expand_depthwise_everywhere = expand_depthwise;  // the shapes the pass leaves apart too
      Model m = tools::copy_model(source);
      tools::fuse_model(m, opts);
      fused_ops = 0;
      for (const Node* n : m.graph->nodes()) fused_ops += n->op_type == "ExpandDepthwiseConv";
      return m;
    };
    size_t apart_ops = 0, fused_ops = 0;
    const Model apart = variant(false, apart_ops), fused = variant(true, fused_ops);
    if (fused_ops != 1 || apart_ops != 0) {
      std::cout << fmt::format("{:<20} {:<30} the fused variant has {} ExpandDepthwiseConv ops (not 1): skipped\n",
                               blk.model, name, fused_ops);
      continue;
    }
    runtime::Session sa(*apart.graph), sf(*fused.graph);
    const auto inputs = tools::random_inputs(*source.graph, 1);
    sa.run(inputs), sf.run(inputs);
    std::vector<double> ta, tf, ratio;
    for (int r = 0; r < rounds; ++r) {
      const bool fused_first = r % 2;
      const double f0 = fused_first ? time_median(sf, inputs, runs) : 0;
      ta.push_back(time_median(sa, inputs, runs));
      tf.push_back(fused_first ? f0 : time_median(sf, inputs, runs));
      ratio.push_back(tf.back() / ta.back());
    }
    std::cout << fmt::format("{:<20} {:<30} {:>8.3f}/{:<8.3f} {:>8.3f}/{:<8.3f} {:>6.2f} ({:.2f}-{:.2f})\n", blk.model,
                             name, *std::min_element(ta.begin(), ta.end()) * 1e3, median(ta) * 1e3,
                             *std::min_element(tf.begin(), tf.end()) * 1e3, median(tf) * 1e3, median(ratio),
                             *std::min_element(ratio.begin(), ratio.end()), *std::max_element(ratio.begin(), ratio.end()));
  }
  return 0;
}
