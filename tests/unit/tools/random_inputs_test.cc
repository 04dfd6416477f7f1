#include "passes/pass_test_util.h"

namespace gaf {
namespace {

TEST(RandomInputs, SizesPerDimSymbol) {
  Model m = testing::parse(testing::header(13) +
                           "g (float[B,L,8] x, float[B,1,L] m, int64[3] n) => (float[B,L,8] y) { y = Relu(x) }");
  auto in = tools::random_inputs(*m.graph, 1, tools::parse_dim_sizes({"L=5", "B=2"}));
  ASSERT_EQ(in.size(), 3u);
  EXPECT_EQ(in[0].dims(), (std::vector<int64_t>{2, 5, 8}));
  EXPECT_EQ(in[1].dims(), (std::vector<int64_t>{2, 1, 5}));
  EXPECT_EQ(in[2].dims(), (std::vector<int64_t>{3}));
  // Unnamed symbols take the default; the old form sizes every symbol alike.
  EXPECT_EQ(tools::random_inputs(*m.graph, 1, tools::parse_dim_sizes({"L=5"}), 3)[0].dims(),
            (std::vector<int64_t>{3, 5, 8}));
  EXPECT_EQ(tools::random_inputs(*m.graph, 1, 4)[1].dims(), (std::vector<int64_t>{4, 1, 4}));
}

TEST(RandomInputs, BadDimSizesNameTheEntry) {
  Model m = testing::parse(testing::header(13) + "g (float[B,8] x) => (float[B,8] y) { y = Relu(x) }");
  EXPECT_THROW(tools::random_inputs(*m.graph, 1, {{"seq", 4}}), Error);
  try {
    tools::random_inputs(*m.graph, 1, {{"seq", 4}});
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'seq'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("B"), std::string::npos) << e.what();
  }
  for (const char* bad : {"seq", "=4", "seq=", "seq=-1", "seq=4x"})
    EXPECT_THROW(tools::parse_dim_sizes({bad}), Error) << bad;
}

}  // namespace
}  // namespace gaf
