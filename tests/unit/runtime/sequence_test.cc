// Sequences and optionals: the kernels against plain C++, graph inputs and outputs of those types (checked
// when fed, written and read back), SequenceMap whose body fuses, and the passes leaving such values alone.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "gaf/onnx_io.h"
#include "gaf/session.h"
#include "gaf/tools.h"
#include "test_util.h"

namespace gaf {
namespace {

using testing::parse;

// x [7,3] cut into pieces of 3 rows (3, 3, 1), each mapped to sigmoid(a * w) + a by SequenceMap and joined
// again; x's rows as a sequence of 7 vectors stacked along a new axis 1 (x transposed), and their count.
const char* kSplitMapConcat = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[7,3] x, float[3] w) => (float[7,3] joined, float[3,7] stacked, int64 count) {
  three = Constant <value = int64 {3}> ()
  pieces = SplitToSequence <axis = 0> (x, three)
  mapped = SequenceMap (pieces, w) <body = f (float[M,3] a, float[3] b) => (float[M,3] c) {
    s = Mul (a, b)
    t = Sigmoid (s)
    c = Add (t, a)
  }>
  joined = ConcatFromSequence <axis = 0> (mapped)
  rows = SplitToSequence <axis = 0, keepdims = 0> (x)
  stacked = ConcatFromSequence <axis = 1, new_axis = 1> (rows)
  count = SequenceLength (rows)
}
)";

Tensor counting(std::vector<int64_t> dims, float scale) {
  Tensor t(DType::Float, dims);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = scale * float(i % 11 - 5);
  return t;
}

std::vector<float> values(const Tensor& t) {
  const float* p = t.data<float>();
  return {p, p + t.numel()};
}

void expect_split_map_concat(const Graph& g) {
  runtime::Session s(g);
  Tensor x = counting({7, 3}, 0.25f), w = counting({3}, 0.5f);
  std::vector<Tensor> out = s.run({{"x", x}, {"w", w}});
  ASSERT_EQ(out.size(), 3u);
  ASSERT_EQ(out[0].dims(), (std::vector<int64_t>{7, 3}));
  ASSERT_EQ(out[1].dims(), (std::vector<int64_t>{3, 7}));
  for (int64_t r = 0; r < 7; ++r)
    for (int64_t c = 0; c < 3; ++c) {
      const float a = x.data<float>()[r * 3 + c], b = w.data<float>()[c];
      EXPECT_NEAR(out[0].data<float>()[r * 3 + c], 1 / (1 + std::exp(-a * b)) + a, 1e-6) << r << "," << c;
      EXPECT_EQ(out[1].data<float>()[c * 7 + r], a);
    }
  ASSERT_EQ(out[2].numel(), 1);
  EXPECT_EQ(out[2].get_int(0), 7);
}

TEST(Sequence, SplitMapAndConcatMatchPlainCpp) {
  Model m = parse(kSplitMapConcat);
  const Value* pieces = m.graph->find_value("pieces");
  ASSERT_TRUE(pieces);
  EXPECT_EQ(pieces->type.kind, ValueKind::Sequence);
  EXPECT_EQ(pieces->type.to_string(), "seq(float)");
  expect_split_map_concat(*m.graph);
}

TEST(Sequence, SequenceMapBodyFusesAndSequenceOpsStayOutOfGroups) {
  Model m = parse(kSplitMapConcat);
  tools::FuseOptions o;
  o.fusion.opt_level = 3;
  Model fused = testing::fused_copy(m, o);
  const Node* map = nullptr;
  for (const Node* n : fused.graph->nodes()) {
    if (n->op_type == "SequenceMap") map = n;
    if (!n->body) continue;
    for (const Node* b : n->body->nodes()) EXPECT_FALSE(b->has_non_tensor_values()) << b->describe();
  }
  ASSERT_TRUE(map);
  // Mul, Sigmoid and Add of the body: one generated kernel per item.
  EXPECT_EQ(testing::count_fused(*map->subgraph("body")), 1) << map->subgraph("body")->to_string();
  expect_split_map_concat(*fused.graph);
}

const char* kPositions = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] a, float[2] b, float[2] c) => (float[2] last, float[2] first, int64 count) {
  zero = Constant <value = int64 {0}> ()
  back = Constant <value = int64 {-1}> ()
  s = SequenceConstruct (a, b)
  s2 = SequenceInsert (s, c, zero)
  s3 = SequenceErase (s2, back)
  last = SequenceAt (s3, back)
  first = SequenceAt (s3, zero)
  count = SequenceLength (s3)
}
)";

TEST(Sequence, InsertEraseAndAtCountNegativePositionsFromTheEnd) {
  Model m = parse(kPositions);
  runtime::Session s(*m.graph);
  Tensor a = counting({2}, 1), b = counting({2}, 2), c = counting({2}, 3);
  auto out = s.run({{"a", a}, {"b", b}, {"c", c}});
  EXPECT_EQ(values(out[0]), values(a));  // [c, a, b] without its last: [c, a]
  EXPECT_EQ(values(out[1]), values(c));
  EXPECT_EQ(out[2].get_int(0), 2);
  // SequenceAt hands out the item itself: no copy.
  EXPECT_EQ(out[0].raw(), a.raw());
}

TEST(Sequence, APositionOutsideTheSequenceIsAnErrorNamingTheNode) {
  Model m = parse(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] a, int64 at) => (float[2] y) {
  s = SequenceConstruct (a, a)
  y = SequenceAt (s, at)
}
)");
  runtime::Session s(*m.graph);
  Tensor a = counting({2}, 1);
  EXPECT_EQ(values(s.run({{"a", a}, {"at", Tensor::scalar<int64_t>(-2)}})[0]), values(a));
  try {
    s.run({{"a", a}, {"at", Tensor::scalar<int64_t>(2)}});
    FAIL() << "position 2 of 2 items ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("node 'y' (SequenceAt): position 2 is outside [-2, 1]"),
              std::string::npos)
        << e.what();
  }
}

TEST(Sequence, SplitToSequenceChecksItsSplit) {
  Model m = parse(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[5,2] x, int64[2] split) => (float[5,2] y) {
  s = SplitToSequence <axis = 0> (x, split)
  y = ConcatFromSequence <axis = 0> (s)
}
)");
  runtime::Session s(*m.graph);
  Tensor x = counting({5, 2}, 1);
  EXPECT_EQ(values(s.run({{"x", x}, {"split", Tensor::from<int64_t>({2}, std::vector<int64_t>{4, 1})}})[0]),
            values(x));
  EXPECT_THROW(s.run({{"x", x}, {"split", Tensor::from<int64_t>({2}, std::vector<int64_t>{4, 2})}}), Error);
}

// seq(float) s, optional(float) o -> (length of s, whether o holds a tensor, s itself).
Model sequence_io_model() {
  Model m;
  m.opsets[""] = 17;
  Graph& g = *m.graph;
  g.name = "sequence_io";
  const TensorType seq{DType::Float, std::nullopt, ValueKind::Sequence};
  Value* s = g.add_input("s", seq);
  Value* o = g.add_input("o", TensorType{DType::Float, std::nullopt, ValueKind::Optional});
  Node* len = g.add_node("SequenceLength", {s}, {"len"});
  len->output(0)->type = TensorType{DType::Int64, Shape{}};
  Node* has = g.add_node("OptionalHasElement", {o}, {"has"});
  has->output(0)->type = TensorType{DType::Bool, Shape{}};
  Node* same = g.add_node("Identity", {s}, {"same"});
  same->output(0)->type = seq;
  for (Node* n : {len, has, same}) {
    n->opset = 17;
    g.add_output(n->output(0));
  }
  return m;
}

TEST(Sequence, GraphInputsOfSequenceAndOptionalTypeAreCheckedWhenFed) {
  Model m = sequence_io_model();
  runtime::Session s(*m.graph);
  Tensor items = Tensor::sequence(DType::Float, {counting({2}, 1), counting({3, 1}, 2)});
  auto out = s.run({{"s", items}, {"o", Tensor::none()}});
  EXPECT_EQ(out[0].get_int(0), 2);
  EXPECT_EQ(out[1].get_double(0), 0);
  ASSERT_TRUE(out[2].is_sequence());
  EXPECT_EQ(out[2].items().size(), 2u);
  EXPECT_EQ(out[2].items()[1].raw(), items.items()[1].raw());
  EXPECT_EQ(s.run({{"s", items}, {"o", counting({4}, 1)}})[1].get_double(0), 1);

  auto error_of = [&](const Tensor& seq, const Tensor& opt) -> std::string {
    try {
      s.run({{"s", seq}, {"o", opt}});
    } catch (const Error& e) {
      return e.what();
    }
    return "ran";
  };
  EXPECT_EQ(error_of(counting({2}, 1), Tensor::none()),
            "input 's': expected seq(float), got a tensor of float");
  EXPECT_EQ(error_of(Tensor::none(), Tensor::none()),
            "input 's': expected seq(float), got an empty optional");
  EXPECT_EQ(error_of(Tensor::sequence(DType::Int64, {}), Tensor::none()),
            "input 's': expected seq(float), got a sequence of int64");
  EXPECT_EQ(error_of(items, items), "input 'o': expected optional(float), got a sequence of float");
  EXPECT_THROW(Tensor::sequence(DType::Float, {Tensor::scalar<int64_t>(1)}), Error);
}

TEST(Sequence, TypesSurviveExportAndImportAndTheChecker) {
  Model m = sequence_io_model();
  onnx_io::check_model(m);
  Model back = onnx_io::import_model(onnx_io::export_model(m));
  ASSERT_EQ(back.graph->inputs().size(), 2u);
  EXPECT_EQ(back.graph->inputs()[0]->type.to_string(), "seq(float)");
  EXPECT_EQ(back.graph->inputs()[1]->type.to_string(), "optional(float)");
  EXPECT_EQ(back.graph->outputs()[2]->type.to_string(), "seq(float)");
  runtime::Session s(*back.graph);
  auto out = s.run({{"s", Tensor::sequence(DType::Float, {counting({2}, 1)})}, {"o", Tensor::none()}});
  EXPECT_EQ(out[0].get_int(0), 1);
}

TEST(Sequence, ValuesAreWrittenAndReadAsTheProtosOfTheirType) {
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("gaf_seq_{}", getpid());
  std::filesystem::create_directories(dir);
  const TensorType seq{DType::Float, std::nullopt, ValueKind::Sequence};
  const TensorType opt_seq{DType::Float, std::nullopt, ValueKind::OptionalSequence};
  const TensorType opt{DType::Float, std::nullopt, ValueKind::Optional};
  Tensor items = Tensor::sequence(DType::Float, {counting({2}, 1), counting({1, 3}, 2)});
  auto round_trip = [&](const Tensor& v, const TensorType& type) {
    const std::string path = (dir / "v.pb").string();
    onnx_io::save_value(v, type, path, "v");
    return onnx_io::load_value(path, type);
  };
  for (const TensorType& t : {seq, opt_seq}) {
    Tensor back = round_trip(items, t);
    EXPECT_TRUE(tools::compare(back, items, 0, 0).ok) << back.to_string();
  }
  EXPECT_TRUE(round_trip(Tensor::none(), opt_seq).is_none());
  EXPECT_TRUE(round_trip(Tensor::none(), opt).is_none());
  Tensor t = round_trip(counting({3}, 1), opt);
  EXPECT_TRUE(t.is_dense() && values(t) == values(counting({3}, 1)));
  Tensor empty = round_trip(Tensor::sequence(DType::Int32, {}), seq);
  EXPECT_TRUE(empty.is_sequence() && empty.items().empty());
  // An optional tensor where a sequence was declared is named as such.
  onnx_io::save_value(counting({3}, 1), opt, (dir / "v.pb").string());
  EXPECT_THROW(onnx_io::load_value((dir / "v.pb").string(), opt_seq), Error);
  std::filesystem::remove_all(dir);
}

TEST(Sequence, CompareNamesTheItemThatDiffers) {
  Tensor a = Tensor::sequence(DType::Float, {counting({2}, 1), counting({2}, 2)});
  Tensor b = Tensor::sequence(DType::Float, {counting({2}, 1), counting({2}, 3)});
  auto c = tools::compare(a, b, 0, 0);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.message.rfind("sequence item 1: ", 0), 0u) << c.message;
  EXPECT_FALSE(tools::compare(a, Tensor::none(), 0, 0).ok);
  EXPECT_FALSE(tools::compare(Tensor::sequence(DType::Float, {counting({2}, 1)}), a, 0, 0).ok);
  EXPECT_TRUE(tools::compare(Tensor::none(), Tensor::none(), 0, 0).ok);
}

// Constant folding leaves a sequence of constants alone (a constant is a tensor), and the model still runs
// and writes after the whole pipeline.
TEST(Sequence, ConstantFoldingLeavesSequencesOfConstants) {
  Model m = parse(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y) {
  k1 = Constant <value = float[2] {1, 2}> ()
  k2 = Constant <value = float[2] {3, 4}> ()
  s = SequenceConstruct (k1, k2)
  one = Constant <value = int64 {1}> ()
  k = SequenceAt (s, one)
  y = Add (x, k)
}
)");
  tools::FuseOptions o;
  o.fusion.opt_level = 3;
  Model fused = testing::fused_copy(m, o);
  bool construct = false;
  for (const Node* n : fused.graph->nodes()) construct |= n->op_type == "SequenceConstruct";
  EXPECT_TRUE(construct) << fused.graph->to_string();
  runtime::Session s(*fused.graph);
  Tensor y = s.run({{"x", counting({2}, 1)}})[0];
  EXPECT_EQ(values(y), (std::vector<float>{-2, 0}));
}

}  // namespace
}  // namespace gaf
