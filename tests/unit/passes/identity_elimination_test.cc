#include "pass_test_util.h"

namespace gaf {
namespace {

using testing::expect_same_outputs;
using testing::header;
using testing::rewrite;

const char* kPass = "identity-elimination";

testing::Rewritten eliminate(const char* body) {
  return rewrite(header(13) + "g (float[4,8] x) => (float[4,8] y) {" + body + "}", make_identity_elimination());
}

TEST(IdentityElimination, IdentityAndInferenceDropoutGo) {
  // Dropout without training_mode, with training_mode a constant false, and with its mask output unread.
  const char* bodies[] = {
      "a = Identity(x) y = Relu(a)",
      "a = Dropout(x) y = Relu(a)",
      "r = Constant<value = float {0.5}>() t = Constant<value = bool {0}>() a = Dropout(x, r, t) y = Relu(a)",
      "a, m = Dropout(x) y = Relu(a)",
      "a = Identity(x) b = Identity(a) y = Add(a, b)",
  };
  for (const char* body : bodies) {
    auto r = eliminate(body);
    auto ops = r.ops();
    EXPECT_EQ(ops.count("Identity") + ops.count("Dropout"), 0u) << body << "\n" << r.dump();
    EXPECT_GE(r.count(kPass), 1) << body;
    expect_same_outputs(r.before, r.after, 0, 0);  // exactly the same values
  }
}

TEST(IdentityElimination, NoOpsGo) {
  // Swin-T exports (once shapes are folded): window padding by 0, crops to the full map, dropouts of rate 0
  // traced in training mode; also a broadcast to its own shape, repeats of 1, a one-input Concat, a Cast to the
  // same type.
  const char* bodies[] = {
      "p = Constant<value = int64[4] {0, 0, 0, 0}>() a = Pad(x, p) y = Relu(a)",
      "s = Constant<value = int64[1] {0}>() e = Constant<value = int64[1] {8}>() ax = Constant<value = int64[1] "
      "{1}>() a = Slice(x, s, e, ax) y = Relu(a)",
      "s = Constant<value = int64[2] {0, 0}>() e = Constant<value = int64[2] {100, 8}>() "
      "ax = Constant<value = int64[2] {0, 1}>() st = Constant<value = int64[2] {1, 1}>() a = Slice(x, s, e, ax, st) "
      "y = Relu(a)",
      "r = Constant<value = float {0}>() t = Constant<value = bool {1}>() a, m = Dropout(x, r, t) y = Relu(a)",
      "s = Constant<value = int64[2] {4, 1}>() a = Expand(x, s) y = Relu(a)",
      "s = Constant<value = int64[2] {1, 1}>() a = Tile(x, s) y = Relu(a)",
      "a = Concat<axis = 1>(x) y = Relu(a)",
      "a = Cast<to = 1>(x) y = Relu(a)",
  };
  for (const char* body : bodies) {
    auto r = eliminate(body);
    EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Relu", 1}})) << body << "\n" << r.dump();
    EXPECT_EQ(r.count(kPass), 1) << body;
    expect_same_outputs(r.before, r.after, 0, 0);
  }
}

TEST(IdentityElimination, ChangingTwinsStay) {
  // One pad of 1 (and one of -1: the same shape, shifted), a crop, a reversal (step -1 over the whole axis), a
  // rate of 0.5 in training mode, a broadcast that grows, repeats of 2, a Concat of two, a Cast to another type.
  const char* bodies[] = {
      "p = Constant<value = int64[4] {0, 0, 0, 1}>() a = Pad(x, p) s = Constant<value = int64[1] {0}>() "
      "e = Constant<value = int64[1] {8}>() ax = Constant<value = int64[1] {1}>() y = Slice(a, s, e, ax)",
      "p = Constant<value = int64[4] {0, 1, 0, -1}>() a = Pad(x, p) y = Relu(a)",
      "s = Constant<value = int64[1] {0}>() e = Constant<value = int64[1] {4}>() ax = Constant<value = int64[1] "
      "{1}>() a = Slice(x, s, e, ax) y = Concat<axis = 1>(a, a)",
      "s = Constant<value = int64[1] {-1}>() e = Constant<value = int64[1] {-100}>() "
      "ax = Constant<value = int64[1] {1}>() st = Constant<value = int64[1] {-1}>() a = Slice(x, s, e, ax, st) "
      "y = Relu(a)",
      "r = Constant<value = float {0.5}>() t = Constant<value = bool {1}>() a = Dropout(x, r, t) y = Relu(a)",
      "s = Constant<value = int64[3] {2, 4, 1}>() a = Expand(x, s) y = ReduceSum<keepdims = 0>(a, z)",
      "s = Constant<value = int64[2] {1, 2}>() a = Tile(x, s) y = Slice(a, z, e8, one)",
      "a = Concat<axis = 0>(x, x) y = Slice(a, z, e4, z)",
      "a = Cast<to = 10>(x) y = Cast<to = 1>(a)",
  };
  const std::string consts =
      "z = Constant<value = int64[1] {0}>() one = Constant<value = int64[1] {1}>() "
      "e4 = Constant<value = int64[1] {4}>() e8 = Constant<value = int64[1] {8}>() ";
  for (const char* body : bodies) {
    auto r = eliminate((consts + body).c_str());
    EXPECT_EQ(r.count(kPass), 0) << body << "\n" << r.dump();
  }
}

TEST(IdentityElimination, DoesNotFire) {
  const char* bodies[] = {
      "y = Identity(x)",                                                   // a graph output keeps its name
      "t = Constant<value = bool {1}>() a = Dropout(x, , t) y = Relu(a)",  // training mode: random
      "a, m = Dropout(x) c = Cast<to = 1>(m) y = Add(a, c)",               // the mask is read
  };
  for (const char* body : bodies) {
    auto r = eliminate(body);
    EXPECT_EQ(r.count(kPass), 0) << body << "\n" << r.dump();
  }
  // training_mode fed at run time: unknown, so the Dropout stays.
  auto fed =
      rewrite(header(13) + "g (float[4,8] x, bool t) => (float[4,8] y) { a = Dropout(x, , t) y = Relu(a) }",
              make_identity_elimination());
  EXPECT_EQ(fed.count(kPass), 0) << fed.dump();
}

}  // namespace
}  // namespace gaf
