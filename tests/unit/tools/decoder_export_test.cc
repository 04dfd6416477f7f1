// Decoders exported with dynamic axes (see decoder_exports.h): every layer's attention fuses, the norms are
// recognised, every fused group runs as a generated kernel, and the fused model computes what the unfused one
// does for prefill (no past) and decode steps (one new token, a past) at several batch sizes.
#include <random>

#include "models/decoder_exports.h"
#include "models/dynamic_int8.h"
#include "passes/pass_test_util.h"

namespace gaf {
namespace {

struct Step {
  int64_t batch, seq, past;
};

std::map<std::string, Tensor> decoder_inputs(const Graph& g, const Step& s, int vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::map<std::string, Tensor> in;
  for (const Value* v : g.inputs()) {
    if (v->is_constant()) continue;
    if (v->name() == "input_ids") {
      Tensor t(DType::Int64, {s.batch, s.seq});
      for (int64_t i = 0; i < t.numel(); ++i) t.data<int64_t>()[i] = int64_t(rng() % uint64_t(vocab));
      in.emplace(v->name(), std::move(t));
    } else {
      const auto& sh = *v->type.shape;
      Tensor t(DType::Float, {s.batch, sh[1].value(), s.past, sh[3].value()});
      std::uniform_real_distribution<float> u(-1, 1);
      for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
      in.emplace(v->name(), std::move(t));
    }
  }
  return in;
}

struct Export {
  const char* name;
  std::string (*text)(int, const testing::DecoderDims&);
  const char* norm_pass;
};

class DecoderExport : public ::testing::TestWithParam<Export> {};

TEST_P(DecoderExport, AttentionFusesInEveryLayerAndMatchesUnfused) {
  const Export& e = GetParam();
  const int layers = 2;
  testing::DecoderDims dims;
  Model m = testing::parse(e.text(layers, dims));
  tools::FuseOptions opts;
  opts.fusion.opt_level = 3;
  tools::FuseResult r;
  Model fused = testing::fused_copy(m, opts, &r);
  EXPECT_EQ(r.rewrites["attention-fusion"], layers) << fused.graph->to_string();
  EXPECT_EQ(r.rewrites[e.norm_pass], 2 * layers + 1) << fused.graph->to_string();
  runtime::Session a(*m.graph), b(*fused.graph);
  for (const auto& [node, why] : b.codegen_fallbacks()) ADD_FAILURE() << node << " runs op by op: " << why;
  for (Step s : {Step{1, 6, 0}, Step{1, 1, 9}, Step{2, 3, 5}, Step{3, 1, 30}}) {
    auto inputs = decoder_inputs(*m.graph, s, dims.vocab, uint64_t(s.seq * 100 + s.past));
    auto want = a.run(inputs);
    auto got = b.run(inputs);
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i].dims(), want[i].dims()) << e.name << " output " << i;
      auto cmp = tools::compare(got[i], want[i], 1e-3, 1e-4);
      EXPECT_TRUE(cmp.ok) << e.name << " batch " << s.batch << " seq " << s.seq << " past " << s.past
                          << " output " << i << ": " << cmp.message;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Exports, DecoderExport,
                         ::testing::Values(Export{"gpt2", testing::gpt2_decoder, "layer-norm-recognition"},
                                           Export{"llama", testing::llama_decoder, "rms-norm-recognition"}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace gaf

namespace gaf {
namespace {

// Weight precision on a decoder wide enough for its products to be compressed (256 wide, 1024 hidden): the
// logits stay within 2% (bf16_mixed) and 5% (int8_weights) of the fp32 logits' scale, for prefill and decode.
TEST(DecoderExportPrecision, LogitsStayWithinTheModesTolerance) {
  for (auto text : {testing::gpt2_decoder, testing::llama_decoder}) {
    std::vector<testing::decoder_detail::Init> weights;
    testing::DecoderDims dims;
    dims.embed = 256, dims.heads = 4, dims.head_dim = 64, dims.hidden = 1024, dims.vocab = 512;
    dims.deferred = &weights;
    const std::string t = text(2, dims);
    dims.deferred = nullptr;
    Model m = onnx_io::import_model(testing::decoder_proto(t, weights));
    runtime::Session fp32(*m.graph);
    for (auto [mode, tolerance] : {std::pair{PrecisionMode::Bf16Mixed, 0.02}, std::pair{PrecisionMode::Int8Weights, 0.05}}) {
      tools::FuseOptions opts;
      opts.fusion.opt_level = 3;
      opts.fusion.rules.precision_mode = mode;
      tools::FuseResult r;
      Model low = testing::fused_copy(m, opts, &r);
      EXPECT_GE(r.rewrites["weight-compression"], 8) << m.graph->name;  // every layer's products at least
      runtime::Session s(*low.graph);
      for (Step step : {Step{1, 7, 0}, Step{1, 1, 20}}) {
        auto in = decoder_inputs(*m.graph, step, dims.vocab, 5);
        Tensor want = fp32.run(in)[0], got = s.run(in)[0];
        double scale = 0, err = 0;
        for (int64_t i = 0; i < want.numel(); ++i) {
          scale = std::max(scale, double(std::abs(want.data<float>()[i])));
          err = std::max(err, double(std::abs(want.data<float>()[i] - got.data<float>()[i])));
        }
        EXPECT_LT(err, tolerance * scale) << m.graph->name << " mode " << int(mode) << " seq " << step.seq;
        EXPECT_GT(err, 0) << "nothing was compressed";
      }
    }
  }
}

// The int8 form bench/llm gives ONNX Runtime (its quantize_dynamic's, dynamic_int8.h) computes the decoder: every
// product on a large constant weight became DynamicQuantizeLinear -> MatMulInteger -> scales, and run here,
// fused and not, its logits stay within 5% of the fp32 logits' scale (int8 weights and activations).
TEST(DecoderExportPrecision, OrtDynamicInt8FormComputesTheDecoder) {
  std::vector<testing::decoder_detail::Init> weights;
  testing::DecoderDims dims;
  dims.embed = 256, dims.heads = 4, dims.head_dim = 64, dims.hidden = 1024, dims.vocab = 512;
  dims.deferred = &weights;
  const std::string t = testing::gpt2_decoder(2, dims);
  const onnx::ModelProto fp32_proto = testing::decoder_proto(t, weights);
  const onnx::ModelProto int8_proto = testing::ort_dynamic_int8(fp32_proto);
  int matmul_integer = 0, plain_on_weights = 0;
  for (const auto& n : int8_proto.graph().node()) {
    matmul_integer += n.op_type() == "MatMulInteger";
    if (n.op_type() == "MatMul")
      for (const auto& w : int8_proto.graph().initializer()) plain_on_weights += w.name() == n.input(1);
  }
  EXPECT_EQ(matmul_integer, 2 * 4 + 1);  // QKV, out, up, down per layer, and the head
  EXPECT_EQ(plain_on_weights, 0);
  Model m = onnx_io::import_model(fp32_proto), q = onnx_io::import_model(int8_proto);
  tools::FuseOptions opts;
  opts.fusion.opt_level = 3;
  Model qf = testing::fused_copy(q, opts);
  runtime::Session fp32(*m.graph), int8(*q.graph), int8_fused(*qf.graph);
  for (Step step : {Step{1, 7, 0}, Step{1, 1, 20}}) {
    auto in = decoder_inputs(*m.graph, step, dims.vocab, 5);
    const Tensor want = fp32.run(in)[0];
    for (runtime::Session* s : {&int8, &int8_fused}) {
      const Tensor got = s->run(in)[0];
      ASSERT_EQ(got.dims(), want.dims());
      double scale = 0, err = 0;
      for (int64_t i = 0; i < want.numel(); ++i) {
        scale = std::max(scale, double(std::abs(want.data<float>()[i])));
        err = std::max(err, double(std::abs(want.data<float>()[i] - got.data<float>()[i])));
      }
      EXPECT_LT(err, 0.05 * scale) << "seq " << step.seq;
      EXPECT_GT(err, 0) << "the int8 form computed the fp32 values exactly";
    }
  }
}

}  // namespace
}  // namespace gaf
