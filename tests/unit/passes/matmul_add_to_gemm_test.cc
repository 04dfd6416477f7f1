#include "pass_test_util.h"

namespace gaf {
namespace {

using testing::expect_same_outputs;
using testing::header;
using testing::rewrite;

const char* kPass = "matmul-add-to-gemm";

TEST(MatMulAddToGemm, TwoDimensionalMatMulWithBiasBecomesGemm) {
  auto r = rewrite(header() + R"(g (float[8,16] a, float[16,4] w) => (float[8,4] y) {
      b = Constant <value = float[4] {1, -2, 3, -4}> ()
      p = MatMul(a, w) y = Add(b, p) })",
                   make_matmul_add_to_gemm());
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Gemm", 1}})) << r.dump();
  EXPECT_EQ(r.count(kPass), 1);
  expect_same_outputs(r.before, r.after);
}

TEST(MatMulAddToGemm, ColumnBiasOverStaticRowsFits) {
  auto r = rewrite(header() + R"(g (float[3,5] a, float[5,2] w) => (float[3,2] y) {
      b = Constant <value = float[3,1] {1, 2, 3}> ()
      p = MatMul(a, w) y = Add(p, b) })",
                   make_matmul_add_to_gemm());
  EXPECT_EQ(r.count(kPass), 1) << r.dump();
  expect_same_outputs(r.before, r.after);
}

TEST(MatMulAddToGemm, BatchedOrNonConstantOrWideningBiasesStay) {
  const char* cases[] = {
      // 3-D A: Gemm is 2-D only
      R"(g (float[2,8,16] a, float[16,4] w) => (float[2,8,4] y) {
          b = Constant <value = float[4] {1, 2, 3, 4}> () p = MatMul(a, w) y = Add(p, b) })",
      // the bias is an input
      R"(g (float[8,16] a, float[16,4] w, float[4] b) => (float[8,4] y) { p = MatMul(a, w) y = Add(p, b) })",
      // the bias raises the rank: [2,1,4] + [8,4] is [2,8,4]
      R"(g (float[8,16] a, float[16,4] w) => (float[2,8,4] y) {
          b = Constant <value = float[2,1,4] {1, 2, 3, 4, 5, 6, 7, 8}> () p = MatMul(a, w) y = Add(p, b) })",
      // the product is read elsewhere too
      R"(g (float[8,16] a, float[16,4] w) => (float[8,4] y, float[8,4] p) {
          b = Constant <value = float[4] {1, 2, 3, 4}> () p = MatMul(a, w) y = Add(p, b) })",
  };
  for (const char* c : cases) {
    auto r = rewrite(header() + c, make_matmul_add_to_gemm());
    EXPECT_EQ(r.count(kPass), 0) << r.dump();
    EXPECT_EQ(r.ops()["MatMul"], 1);
  }
}

TEST(MatMulAddToGemm, GemmWithoutBiasTakesTheAdd) {
  auto r = rewrite(header() + R"(g (float[8,16] a, float[4,16] w) => (float[8,4] y) {
      b = Constant <value = float[4] {1, -2, 3, -4}> ()
      p = Gemm <transB = 1, alpha = 0.5> (a, w) y = Add(p, b) })",
                   make_matmul_add_to_gemm());
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"Gemm", 1}})) << r.dump();
  EXPECT_EQ(r.after.graph->nodes()[0]->num_inputs(), 3);
  expect_same_outputs(r.before, r.after);
}

}  // namespace
}  // namespace gaf
