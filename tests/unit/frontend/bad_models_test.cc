// 41 models that are wrong in one way each: loading, fusing, compiling and running them gives one gaf::Error
// whose message names what is wrong (the node, tensor or field), never a crash or another exception type.
#include "test_util.h"

namespace gaf {
namespace {

struct Bad {
  const char* name;
  const char* text;  // graph text after the header
  const char* says;  // a part of the message
};

const char* kHeader = "<ir_version: 8, opset_import: [\"\" : 17]> ";

// Loads, fuses at opt level 3, compiles and runs on random inputs; returns the error message ("" when none).
std::string first_error(const std::string& text, bool* other_exception) {
  try {
    Model m = testing::parse(text);
    tools::FuseOptions opts;
    opts.fusion.opt_level = 3;
    tools::fuse_model(m, opts);
    runtime::Session s(*m.graph);
    s.run(tools::random_inputs(*m.graph, 1, 2));
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    *other_exception = true;
    return e.what();
  }
  return "";
}

class BadModel : public ::testing::TestWithParam<Bad> {};

TEST_P(BadModel, OneClearError) {
  const Bad& b = GetParam();
  bool other = false;
  const std::string msg = first_error(std::string(kHeader) + b.text, &other);
  EXPECT_FALSE(msg.empty()) << b.name << ": no error";
  EXPECT_FALSE(other) << b.name << ": not a gaf::Error: " << msg;
  EXPECT_NE(msg.find(b.says), std::string::npos)
      << b.name << ": '" << msg << "' does not say '" << b.says << "'";
}

const Bad kCases[] = {
    {"unknown_op", "g (float[2] x) => (float[2] y) { y = Frobnicate(x) }", "Frobnicate"},
    // Found by the onnx_text fuzz target: sizes computed from these dims overflowed int64 (undefined behaviour).
    {"dims_overflow", "g (float[2,4,1677777777777777777] x) => (float[2,4,1677777777777777777] y) { y = Relu(x) }",
     "value 'x' declares dims whose element count overflows 64 bits"},
    {"undefined_input", "g (float[2] x) => (float[2] y) { y = Add(x, nowhere) }", "nowhere"},
    {"reshape_count", R"(g (float[2,3] x) => (float[?] y) {
        s = Constant <value = int64[1] {7}> ()  y = Reshape(x, s) })",
     "Reshape"},
    {"reshape_two_minus_one", R"(g (float[2,3] x) => (float[?,?] y) {
        s = Constant <value = int64[2] {-1, -1}> ()  y = Reshape(x, s) })",
     "Reshape"},
    {"matmul_inner", "g (float[2,3] a, float[4,5] b) => (float[2,5] y) { y = MatMul(a, b) }", "MatMul"},
    {"concat_rank", "g (float[2,3] a, float[2] b) => (float[?,?] y) { y = Concat <axis = 0> (a, b) }",
     "Concat"},
    {"gather_index", R"(g (float[4,3] x) => (float[?] y) {
        i = Constant <value = int64 {9}> ()  y = Gather <axis = 0> (x, i) })",
     "Gather"},
    {"transpose_perm", "g (float[2,3] x) => (float[3,2] y) { y = Transpose <perm = [0, 0]> (x) }",
     "Transpose"},
    {"softmax_axis", "g (float[2,3] x) => (float[2,3] y) { y = Softmax <axis = 5> (x) }", "axis"},
    {"conv_channels", R"(g (float[1,3,8,8] x, float[4,2,3,3] w) => (float[1,4,6,6] y) { y = Conv(x, w) })",
     "Conv"},
    {"slice_step_zero", R"(g (float[6] x) => (float[?] y) {
        s = Constant <value = int64[1] {0}> ()  e = Constant <value = int64[1] {6}> ()
        a = Constant <value = int64[1] {0}> ()  p = Constant <value = int64[1] {0}> ()  y = Slice(x, s, e, a, p) })",
     "Slice"},
    {"split_sizes", R"(g (float[6] x) => (float[?] y, float[?] z) {
        s = Constant <value = int64[2] {2, 2}> ()  y, z = Split <axis = 0> (x, s) })",
     "Split"},
    {"expand_incompatible", R"(g (float[3] x) => (float[?] y) {
        s = Constant <value = int64[1] {4}> ()  y = Expand(x, s) })",
     "Expand"},
    {"expand_overflow", R"(g (float[1] x) => (float[?,?] y) {
        s = Constant <value = int64[2] {1099511627776, 1099511627776}> ()  y = Expand(x, s) })",
     "value 'y' declares dims whose element count overflows 64 bits"},
    {"where_not_bool", "g (float[2] c, float[2] a, float[2] b) => (float[2] y) { y = Where(c, a, b) }",
     "Where"},
    {"cast_no_to", "g (float[2] x) => (float[2] y) { y = Cast(x) }", "to"},
    {"reduce_axis", "g (float[2,3] x) => (float[?] y) { y = ReduceMean <axes = [4]> (x) }", "ReduceMean"},
    {"output_not_produced", "g (float[2] x) => (float[2] y) { z = Relu(x) }", "y"},
    {"duplicate_output", "g (float[2] x) => (float[2] y) { y = Relu(x)  y = Neg(x) }", "y"},
    {"initializer_count", "g (float[2] x) => (float[2] y) <float[3] w = {1.0, 2.0}> { y = Add(x, w) }", "w"},
    {"range_delta_zero", R"(g (float[2] x) => (int64[?] y) {
        a = Constant <value = int64 {0}> ()  b = Constant <value = int64 {5}> ()  d = Constant <value = int64 {0}> ()
        y = Range(a, b, d) })",
     "Range"},
    {"tile_negative", R"(g (float[2] x) => (float[?] y) {
        r = Constant <value = int64[1] {-3}> ()  y = Tile(x, r) })",
     "Tile"},
    {"constant_of_shape_negative", R"(g (float[2] x) => (float[?] y) {
        s = Constant <value = int64[1] {-4}> ()  y = ConstantOfShape(s) })",
     "negative"},
    {"pad_mode", R"(g (float[4] x) => (float[?] y) {
        p = Constant <value = int64[2] {1, 1}> ()  y = Pad <mode = "sideways"> (x, p) })",
     "Pad"},
    {"gemm_inner", "g (float[2,3] a, float[4,5] b) => (float[2,5] y) { y = Gemm(a, b) }", "Gemm"},
    {"conv_kernel_too_big", "g (float[1,1,2,2] x, float[1,1,3,3] w) => (float[?,?,?,?] y) { y = Conv(x, w) }",
     "Conv"},
    {"maxpool_kernel_too_big",
     "g (float[1,1,2,2] x) => (float[?,?,?,?] y) { y = MaxPool <kernel_shape = [3, 3]> (x) }", "MaxPool"},
    {"squeeze_not_one", R"(g (float[2,3] x) => (float[?] y) {
        a = Constant <value = int64[1] {0}> ()  y = Squeeze(x, a) })",
     "Squeeze"},
    {"unsqueeze_duplicate", R"(g (float[2] x) => (float[?,?,?] y) {
        a = Constant <value = int64[2] {0, 0}> ()  y = Unsqueeze(x, a) })",
     "Unsqueeze"},
    {"flatten_axis", "g (float[2,3] x) => (float[?,?] y) { y = Flatten <axis = 4> (x) }", "Flatten"},
    {"gather_axis", R"(g (float[4,3] x) => (float[?] y) {
        i = Constant <value = int64 {0}> ()  y = Gather <axis = 3> (x, i) })",
     "Gather"},
    {"topk_too_many", R"(g (float[4] x) => (float[?] v, int64[?] i) {
        k = Constant <value = int64[1] {9}> ()  v, i = TopK(x, k) })",
     "TopK"},
    {"einsum_equation", "g (float[2,3] a) => (float[?] y) { y = Einsum <equation = \"ij,jk->ik\"> (a) }",
     "Einsum"},
    {"layernorm_axis", R"(g (float[2,3] x, float[3] s) => (float[2,3] y) {
        y = LayerNormalization <axis = 5> (x, s) })",
     "LayerNormalization"},
    {"batchnorm_params", R"(g (float[1,3,2,2] x, float[2] s, float[3] b, float[3] m, float[3] v)
        => (float[1,3,2,2] y) { y = BatchNormalization(x, s, b, m, v) })",
     "BatchNormalization"},
    {"trilu_rank", "g (float[4] x) => (float[4] y) { y = Trilu(x) }", "Trilu"},
    {"depth_to_space_channels",
     "g (float[1,3,2,2] x) => (float[?,?,?,?] y) { y = DepthToSpace <blocksize = 2> (x) }", "DepthToSpace"},
    {"scatternd_index", R"(g (float[4] x, float[1] u) => (float[4] y) {
        i = Constant <value = int64[1,1] {7}> ()  y = ScatterND(x, i, u) })",
     "ScatterND"},
    {"cumsum_axis", R"(g (float[4] x) => (float[4] y) {
        a = Constant <value = int64 {3}> ()  y = CumSum(x, a) })",
     "CumSum"},
    {"onehot_depth", R"(g (int64[3] i) => (float[?,?] y) {
        d = Constant <value = int64 {-2}> ()  v = Constant <value = float[2] {0.0, 1.0}> ()  y = OneHot(i, d, v) })",
     "OneHot"},
};

INSTANTIATE_TEST_SUITE_P(Catalogue, BadModel, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace gaf
