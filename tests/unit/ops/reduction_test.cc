// ops::reduced_axes: the one reading of a Reduce* node's axes.
#include "ops/reduction.h"

#include "test_util.h"

namespace gaf {
namespace {

// A ReduceSum of a rank-4 input at `opset`, with `attrs`, and an axes input when `axes_input`.
struct ReduceNode {
  Graph g;
  Node* n;
  ReduceNode(int opset, std::map<std::string, Attribute> attrs, bool axes_input) {
    std::vector<Value*> ins = {g.add_input("x", TensorType{DType::Float, std::nullopt})};
    if (axes_input) ins.push_back(g.add_input("axes", TensorType{DType::Int64, std::nullopt}));
    n = g.add_node("ReduceSum", ins, {"y"});
    n->opset = opset;
    n->attrs = std::move(attrs);
  }
};

using Axes = std::optional<std::vector<int64_t>>;

TEST(ReducedAxes, AttributeNormalisedAndSorted) {
  ReduceNode r(11, {{"axes", std::vector<int64_t>{-1, 1}}}, false);
  EXPECT_EQ(ops::reduced_axes(*r.n, 4, nullptr), Axes(std::vector<int64_t>{1, 3}));
}

TEST(ReducedAxes, InputAxesAndUnknownInput) {
  ReduceNode r(13, {}, true);
  const std::vector<int64_t> given = {0, -2};
  EXPECT_EQ(ops::reduced_axes(*r.n, 4, &given), Axes(std::vector<int64_t>{0, 2}));
  EXPECT_EQ(ops::reduced_axes(*r.n, 4, &given, /*axes_input_known=*/false), std::nullopt);
}

TEST(ReducedAxes, NoAxesReduceEverythingUnlessNoop) {
  ReduceNode all(13, {}, false);
  EXPECT_EQ(ops::reduced_axes(*all.n, 3, nullptr), Axes(std::vector<int64_t>{0, 1, 2}));
  const std::vector<int64_t> none;
  ReduceNode noop(18, {{"noop_with_empty_axes", int64_t(1)}}, true);
  EXPECT_EQ(ops::reduced_axes(*noop.n, 3, &none), std::nullopt);
}

TEST(ReducedAxes, OutOfRangeOrTwiceIsNotAReduction) {
  ReduceNode out(11, {{"axes", std::vector<int64_t>{4}}}, false);
  EXPECT_EQ(ops::reduced_axes(*out.n, 4, nullptr), std::nullopt);
  ReduceNode twice(11, {{"axes", std::vector<int64_t>{1, -3}}}, false);
  EXPECT_EQ(ops::reduced_axes(*twice.n, 4, nullptr), std::nullopt);  // -3 is 1 again
}

}  // namespace
}  // namespace gaf
