#include "pass_test_util.h"

namespace gaf {
namespace {

using testing::expect_same_outputs;
using testing::header;
using testing::rewrite;

const char* kPass = "identity-elimination";

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
    auto r = rewrite(header(13) + "g (float[4,8] x) => (float[4,8] y) {" + body + "}",
                     make_identity_elimination());
    auto ops = r.ops();
    EXPECT_EQ(ops.count("Identity") + ops.count("Dropout"), 0u) << body << "\n" << r.dump();
    EXPECT_GE(r.count(kPass), 1) << body;
    expect_same_outputs(r.before, r.after, 0, 0);  // exactly the same values
  }
}

TEST(IdentityElimination, DoesNotFire) {
  const char* bodies[] = {
      "y = Identity(x)",                                                   // a graph output keeps its name
      "t = Constant<value = bool {1}>() a = Dropout(x, , t) y = Relu(a)",  // training mode: random
      "a, m = Dropout(x) c = Cast<to = 1>(m) y = Add(a, c)",               // the mask is read
  };
  for (const char* body : bodies) {
    auto r = rewrite(header(13) + "g (float[4,8] x) => (float[4,8] y) {" + body + "}",
                     make_identity_elimination());
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
