// The planner at scale: 10,000-node models (a static-shape encoder stack, a dynamic-shape GPT-2-style
// decoder) fuse at opt level 3 into exactly the groups their layers imply: the groups of an L-layer model are
// those of a 2-layer one plus L - 2 times what the third layer adds, group by group (op sequence and count).
// A plan that gave up part way (a budget, a cut-off) or merged across layers would differ. How long it takes
// is measured by hand (docs/performance.md), never asserted here.
#include <functional>
#include <map>

#include "models/decoder_exports.h"
#include "models/encoder_stack.h"
#include "passes/pass_test_util.h"

namespace gaf {
namespace {

// Fused groups by op sequence ("MatMul Add Add" -> how many), and the rewrites that fired.
struct Plan {
  std::map<std::string, int> groups;
  std::map<std::string, int> rewrites;
  size_t nodes = 0;
};

Plan fuse(const std::string& text) {
  Model m = testing::parse(text);
  Plan p;
  p.nodes = m.graph->num_nodes();
  tools::FuseOptions opts;
  opts.fusion.opt_level = 3;
  tools::FuseResult r = tools::fuse_model(m, opts);
  for (const GroupSummary& g : r.groups) {
    std::string ops;
    for (const std::string& op : g.ops) ops += (ops.empty() ? "" : " ") + op;
    ++p.groups[ops];
  }
  p.rewrites = r.rewrites;
  verify(*m.graph);
  return p;
}

// counts(two) + k * (counts(three) - counts(two)), entries of 0 dropped.
std::map<std::string, int> extrapolate(const std::map<std::string, int>& two,
                                       const std::map<std::string, int>& three, int k) {
  std::map<std::string, int> out = two;
  for (const auto& [key, n] : three) out[key] += k * (n - (two.count(key) ? two.at(key) : 0));
  for (const auto& [key, n] : two)
    if (!three.count(key)) out[key] -= k * n;
  std::erase_if(out, [](const auto& e) { return e.second == 0; });
  return out;
}

std::string show(const std::map<std::string, int>& m) {
  std::string s;
  for (const auto& [k, n] : m) s += fmt::format("  {} x {}\n", n, k);
  return s;
}

void expect_layers_repeat(const std::function<std::string(int)>& text, int layers,
                          const char* attention_or_norm) {
  const Plan two = fuse(text(2)), three = fuse(text(3)), deep = fuse(text(layers));
  ASSERT_GE(deep.nodes, 10000u);
  ASSERT_FALSE(three.groups.empty());
  ASSERT_NE(two.groups, three.groups) << "a layer adds no group: the check below would hold trivially";
  const auto want = extrapolate(two.groups, three.groups, layers - 2);
  EXPECT_EQ(deep.groups, want) << "got:\n" << show(deep.groups) << "want:\n" << show(want);
  int per_layer = three.rewrites.at(attention_or_norm) - two.rewrites.at(attention_or_norm);
  EXPECT_GT(per_layer, 0);
  EXPECT_EQ(deep.rewrites.at(attention_or_norm),
            two.rewrites.at(attention_or_norm) + (layers - 2) * per_layer);
}

TEST(PlannerScale, EncoderStackOf10000NodesFusesEveryLayerAlike) {
  const int layers = 205;  // 49 nodes a layer and 8 shared constants
  expect_layers_repeat([](int l) { return testing::encoder_stack(l); }, layers, "layer-norm-recognition");
}

TEST(PlannerScale, DecoderOf10000NodesFusesEveryLayerAlike) {
  const int layers = 166;  // about 60 nodes a layer
  testing::DecoderDims d;  // small weights: the model is parsed from text
  d.embed = 16, d.heads = 2, d.head_dim = 8, d.hidden = 32, d.vocab = 16, d.max_positions = 16;
  expect_layers_repeat([&](int l) { return testing::gpt2_decoder(l, d); }, layers, "attention-fusion");
}

}  // namespace
}  // namespace gaf
