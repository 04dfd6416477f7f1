#include "pass_test_util.h"

namespace gaf {
namespace {

using testing::expect_same_outputs;
using testing::header;

const char* kPass = "channel-shuffle-fusion";

std::string str(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
  return s;
}

std::string dims(std::vector<int64_t> d) { return "[" + str(d) + "]"; }

struct Shuffle {
  std::vector<int64_t> group = {1, 5, 6, 4};  // each input's shape
  int groups = 2;
  int axis = 3;
  int split_as = 0;                     // the Reshape splits the axis into [split_as, ...]; 0: groups
  std::vector<int64_t> perm;            // of the split tensor; empty: swap axis and axis + 1
  std::vector<std::pair<int64_t, int64_t>> slices;  // [start, end) along axis; empty: the shuffle is the output
  bool concat_is_output = false;
};

// Relu(x_g) for each group, concatenated, shuffled (Reshape, Transpose, Reshape), then sliced.
std::string model(const Shuffle& s) {
  const int rank = int(s.group.size()), a = s.axis;
  const int64_t c = s.group[size_t(a)], total = c * s.groups, split_as = s.split_as ? s.split_as : s.groups;
  std::vector<int64_t> whole = s.group, split = s.group;
  whole[size_t(a)] = total;
  split[size_t(a)] = total / split_as;
  split.insert(split.begin() + a, split_as);
  std::vector<int64_t> perm = s.perm;
  if (perm.empty()) {
    for (int i = 0; i <= rank; ++i) perm.push_back(i);
    std::swap(perm[size_t(a)], perm[size_t(a + 1)]);
  }
  std::string ins, body, cat, outs;
  for (int g = 0; g < s.groups; ++g) {
    const std::string x = "x" + std::to_string(g);
    ins += (g ? ", " : "") + std::string("float") + dims(s.group) + " " + x;
    body += "r" + std::to_string(g) + " = Relu(" + x + ")\n";
    cat += (g ? ", " : "") + std::string("r") + std::to_string(g);
  }
  body += "c = Concat <axis = " + std::to_string(a) + "> (" + cat + ")\n";
  body += "sp = Constant <value = int64[" + std::to_string(split.size()) + "] {" + str(split) + "}> ()\n";
  body += "wh = Constant <value = int64[" + std::to_string(rank) + "] {" + str(whole) + "}> ()\n";
  body += "p = Reshape(c, sp)\n";
  body += "t = Transpose <perm = [" + str(perm) + "]> (p)\n";
  body += "s = Reshape(t, wh)\n";
  if (s.concat_is_output) outs = "float" + dims(whole) + " c, ";
  if (s.slices.empty()) {
    outs += "float" + dims(whole) + " s";
  } else {
    body += "ax = Constant <value = int64[1] {" + std::to_string(a) + "}> ()\n";
    for (size_t k = 0; k < s.slices.size(); ++k) {
      const auto [b, e] = s.slices[k];
      const std::string y = "y" + std::to_string(k), ks = std::to_string(k);
      body += "b" + ks + " = Constant <value = int64[1] {" + std::to_string(b) + "}> ()\n";
      body += "e" + ks + " = Constant <value = int64[1] {" + std::to_string(e) + "}> ()\n";
      body += y + " = Slice(s, b" + ks + ", e" + ks + ", ax)\n";
      std::vector<int64_t> d = whole;
      d[size_t(a)] = std::min(e, total) - b;
      outs += (k ? ", " : "") + std::string("float") + dims(d) + " " + y;
    }
  }
  return header() + "g (" + ins + ") => (" + outs + ") {\n" + body + "}";
}

int shuffles(const Graph& g) {
  int n = 0;
  for (const Node* node : g.nodes()) n += node->op_type == "ChannelShuffle";
  return n;
}

// Fires, matches the unfused graph, and decomposes back into standard ops that match too.
void expect_fused(const Shuffle& s, const std::map<std::string, int>& ops) {
  auto r = testing::rewrite(model(s), make_channel_shuffle_fusion());
  EXPECT_EQ(r.count(kPass), 1) << r.dump();
  EXPECT_EQ(r.ops(), ops) << r.dump();
  expect_same_outputs(r.before, r.after, 0, 0);
  Model d = tools::copy_model(r.after);
  decompose_gaf_ops(*d.graph, 17);  // what other runtimes get
  EXPECT_EQ(shuffles(*d.graph), 0);
  for (const Node* n : d.graph->nodes()) EXPECT_TRUE(n->domain.empty()) << n->describe();
  expect_same_outputs(r.before, d, 0, 0);
}

TEST(ChannelShuffleFusion, ShuffleNetUnitChannelsLast) {
  // ShuffleNetV2's unit: two groups of 4 channels-last, shuffled and split in two halves.
  Shuffle s;
  s.slices = {{0, 4}, {4, 8}};
  expect_fused(s, {{"gaf.ChannelShuffle", 1}, {"Relu", 2}});
  // Odd halves (three channels per group: the halves do not start on a pair), and four parts with the last
  // slice's end past the axis.
  s.group = {1, 3, 2, 3}, s.slices = {{0, 3}, {3, 6}};
  expect_fused(s, {{"gaf.ChannelShuffle", 1}, {"Relu", 2}});
  s.group = {2, 3, 2, 8}, s.slices = {{8, 12}, {0, 4}, {4, 8}, {12, int64_t(1) << 40}};
  expect_fused(s, {{"gaf.ChannelShuffle", 1}, {"Relu", 2}});
}

TEST(ChannelShuffleFusion, ThreeGroupsChannelsFirstWithoutSplit) {
  Shuffle s;
  s.group = {1, 3, 2, 5}, s.groups = 3, s.axis = 1;
  expect_fused(s, {{"gaf.ChannelShuffle", 1}, {"Relu", 3}});
}

TEST(ChannelShuffleFusion, SlicesThatDoNotCutEqualPartsStay) {
  // Overlapping halves: the op writes the whole shuffle and the Slices read it.
  Shuffle s;
  s.slices = {{0, 4}, {2, 6}};
  expect_fused(s, {{"gaf.ChannelShuffle", 1}, {"Relu", 2}, {"Slice", 2}});
}

TEST(ChannelShuffleFusion, DoesNotFireOnOtherReshuffles) {
  Shuffle four_groups;  // 2 inputs, but the Reshape splits into 4 groups of 2
  four_groups.split_as = 4;
  Shuffle rotated;      // the Transpose moves another axis
  rotated.perm = {0, 2, 1, 3, 4};
  Shuffle shared;       // the concatenation is also a graph output
  shared.concat_is_output = true;
  for (const Shuffle& s : {four_groups, rotated, shared}) {
    auto r = testing::rewrite(model(s), make_channel_shuffle_fusion());
    EXPECT_EQ(r.count(kPass), 0) << r.dump();
    EXPECT_EQ(shuffles(*r.after.graph), 0) << r.dump();
    expect_same_outputs(r.before, r.after, 0, 0);
  }
}

}  // namespace
}  // namespace gaf
