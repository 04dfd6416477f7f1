#include <cmath>

#include "gaf/builder.h"
#include "pass_test_util.h"

namespace gaf {
namespace {

using testing::expect_same_outputs;
using testing::header;

const char* kPass = "weight-compression";

testing::Rewritten compress(const std::string& text, const std::string& precision = "") {
  std::vector<std::unique_ptr<Pass>> passes;
  passes.push_back(make_weight_compression());
  PassContext ctx;
  ctx.weight_precision = precision;
  return testing::rewrite(testing::parse(text), std::move(passes), std::move(ctx));
}

// n int8 values in [-127, 127] (salt varies them).
std::string int8_values(int64_t n, int salt) {
  std::string s;
  for (int64_t i = 0; i < n; ++i) s += (i ? "," : "") + std::to_string(int((i * 37 + salt) % 255) - 127);
  return s;
}

// A [3, 5, 300] activation times W' [300, 250] where W' comes from `weights` (defining w from the
// initializers).
std::string product(const std::string& inits, const std::string& weights,
                    const std::string& op = "y = MatMul(a, w)") {
  return header(14) + "g (float[3,5,300] a) => (float[3,5,250] y) <" + inits + "> {" + weights + "  " + op +
         " }";
}

TEST(WeightCompression, QdqInt8WeightsBecomeOneProduct) {
  const std::string inits = "int8[300,250] wq = {" + int8_values(300 * 250, 1) + "}, float[250] s = {" +
                            testing::test_values(250, 2, 4000.0) + "}, int8[250] z = {" +
                            std::string(499, '0') + "}";
  // the zero point's 250 zeros as "0,0,...": every other character a comma
  std::string zeros;
  for (int i = 0; i < 250; ++i) zeros += i ? ",0" : "0";
  auto r = compress(product("int8[300,250] wq = {" + int8_values(300 * 250, 1) + "}, float[250] s = {" +
                                testing::test_values(250, 2, 4000.0) + "}, int8[250] z = {" + zeros + "}",
                            "w = DequantizeLinear <axis = 1> (wq, s, z)"));
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"gaf.CompressedMatMul", 1}})) << r.dump();
  EXPECT_EQ(r.count(kPass), 1);
  expect_same_outputs(r.before, r.after, 1e-4, 1e-5);
  (void)inits;
}

TEST(WeightCompression, Bf16WeightsAndGemmWithBias) {
  // bfloat16 weights [N, K] read by Gemm(transB) with a bias: the product, then the bias added. (ONNX text
  // has no bfloat16 literals: built in the IR.)
  Model m;
  GraphBuilder b(m, 14);
  Value* a = b.input("a", DType::Float, {5, 300});
  Tensor wb(DType::BFloat16, {250, 300});
  for (int64_t i = 0; i < wb.numel(); ++i)  // k / 128 for small k: exact in bfloat16
    static_cast<uint16_t*>(wb.raw())[i] = uint16_t(0x3c00 + (i * 29) % 41);
  Value* w = b.op("Cast", {b.constant(std::move(wb), "wb")}, {{"to", int64_t(DType::Float)}});
  Value* c = b.random_constant("c", {250}, 1.f);
  b.output(b.op("Gemm", {a, w, c}, {{"transB", int64_t(1)}}));
  b.finish();
  std::vector<std::unique_ptr<Pass>> passes;
  passes.push_back(make_weight_compression());
  auto r = testing::rewrite(m, std::move(passes));
  EXPECT_EQ(r.ops(), (std::map<std::string, int>{{"gaf.CompressedMatMul", 1}, {"Add", 1}})) << r.dump();
  expect_same_outputs(r.before, r.after, 1e-4, 1e-5);
}

TEST(WeightCompression, PrecisionModesCompressLargeFp32Weights) {
  const std::string text =
      product("float[300,250] w = {" + testing::test_values(300 * 250, 5, 100.0) + "}", "");
  for (const char* mode : {"bf16", "int8"}) {
    auto r = compress(text, mode);
    EXPECT_EQ(r.count(kPass), 1) << mode << r.dump();
    bool stored = false;
    for (const Value* v : r.after.graph->initializers())
      stored |= v->type.dtype == (std::string(mode) == "bf16" ? DType::BFloat16 : DType::Int8);
    EXPECT_TRUE(stored) << mode;
    // The error a mode allows, relative to the output's scale: bf16 keeps 8 bits of mantissa, int8 7 bits of
    // range.
    runtime::Session a(*r.before.graph), b(*r.after.graph);
    auto in = tools::random_inputs(*r.before.graph, 3);
    Tensor want = a.run(in)[0], got = b.run(in)[0];
    double scale = 0, err = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      scale = std::max(scale, double(std::abs(want.data<float>()[i])));
      err = std::max(err, double(std::abs(want.data<float>()[i] - got.data<float>()[i])));
    }
    EXPECT_LT(err / scale, std::string(mode) == "bf16" ? 0.01 : 0.02) << mode;
    EXPECT_GT(err, 0) << mode << ": the weights were not compressed";
  }
}

TEST(WeightCompression, VerifyStatesTheModesToleranceAndTheReportTheProducts) {
  Model m =
      testing::parse(product("float[300,250] w = {" + testing::test_values(300 * 250, 5, 100.0) + "}", ""));
  tools::FuseOptions opts;
  opts.fusion.rules.precision_mode = PrecisionMode::Int8Weights;
  tools::VerifyResult v = tools::verify_fusion(m, opts, {}, 1e-3, 1e-5);
  EXPECT_TRUE(v.ok) << v.text();
  EXPECT_NE(v.text().find("5% of each output's largest magnitude (int8_weights)"), std::string::npos)
      << v.text();
  Model f = tools::copy_model(m);
  tools::FuseResult r = tools::fuse_model(f, opts);
  ASSERT_EQ(r.precision_changes.size(), 1u);
  EXPECT_NE(r.precision_changes[0].find("int8[300,250]"), std::string::npos) << r.precision_changes[0];
  EXPECT_NE(r.report_json("m", opts.target, 2).find("precision_changes"), std::string::npos);
  // Without the mode the same comparison is exact to fp32 rounding, and a compressed product would fail it.
  opts.fusion.rules.precision_mode = PrecisionMode::Fp32;
  EXPECT_EQ(tools::verify_fusion(m, opts, {}, 1e-3, 1e-5).tolerance, "rtol 0.001, atol 1e-05");
}

TEST(WeightCompression, DoesNotFire) {
  // No precision mode; weights too small to gain; an asymmetric zero point (a near miss, named).
  EXPECT_EQ(compress(product("float[300,250] w = {" + testing::test_values(300 * 250, 5, 100.0) + "}", ""))
                .count(kPass),
            0);
  auto small = compress(header(14) + "g (float[2,16] a) => (float[2,8] y) <float[16,8] w = {" +
                            testing::test_values(128, 1, 10.0) + "}> { y = MatMul(a, w) }",
                        "int8");
  EXPECT_EQ(small.count(kPass), 0);
  std::string zp;
  for (int i = 0; i < 250; ++i) zp += i ? ",3" : "3";
  auto asym = compress(product("int8[300,250] wq = {" + int8_values(300 * 250, 1) + "}, float[250] s = {" +
                                   testing::test_values(250, 2, 4000.0) + "}, int8[250] z = {" + zp + "}",
                               "w = DequantizeLinear <axis = 1> (wq, s, z)"));
  EXPECT_EQ(asym.count(kPass), 0);
  ASSERT_EQ(asym.ctx.near_misses.size(), 1u);
  EXPECT_NE(asym.ctx.near_misses.begin()->second.check.find("zero point"), std::string::npos);
}

TEST(WeightCompression, WrittenModelKeepsTheStoredWeightsAndReadsBack) {
  // The portable form is DequantizeLinear + MatMul on the int8 weights, which import reads back into one
  // product (constant folding leaves the dequantisation of product weights alone).
  tools::FuseOptions opts;
  opts.fusion.opt_level = 2;
  opts.fusion.rules.precision_mode = PrecisionMode::Int8Weights;
  Model m =
      testing::parse(product("float[300,250] w = {" + testing::test_values(300 * 250, 5, 100.0) + "}", ""));
  Model fused = tools::copy_model(m);
  tools::fuse_model(fused, opts);
  onnx::ModelProto proto;
  ASSERT_TRUE(proto.ParseFromString(onnx_io::serialize_model(PortableModel(fused))));
  Model written = onnx_io::import_model(proto);
  infer_fused_body_shapes(*written.graph);
  std::map<std::string, int> ops = testing::histogram(*written.graph);
  EXPECT_EQ(ops["DequantizeLinear"], 1) << written.graph->to_string().substr(0, 2000);
  bool int8 = false;
  for (const Value* v : written.graph->initializers()) int8 |= v->type.dtype == DType::Int8;
  EXPECT_TRUE(int8);
  testing::expect_same_outputs(fused, written, 1e-4, 1e-5);
  tools::FuseOptions plain;
  plain.fusion.opt_level = 2;
  EXPECT_EQ(tools::fuse_model(written, plain).rewrites[kPass], 1);
}

}  // namespace
}  // namespace gaf
