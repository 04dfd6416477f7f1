// Greedy generation through the past/present loop: every token the fused model picks is the unfused model's
// best (within float noise) when it reads the whole sequence at once, so the loop's caching, positions and
// masks agree with a plain prefill; models without the loop's inputs are refused by name.

#include "models/decoder_exports.h"
#include "passes/pass_test_util.h"

namespace gaf {
namespace {

struct Export {
  const char* name;
  std::string (*text)(int, const testing::DecoderDims&);
};

class Generate : public ::testing::TestWithParam<Export> {};

TEST_P(Generate, FusedLoopPicksWhatAFullPrefillPicks) {
  Model m = testing::parse(GetParam().text(2, {}));
  tools::FuseOptions opts;
  opts.fusion.opt_level = 3;
  Model fused = testing::fused_copy(m, opts);
  runtime::Session s(*fused.graph);
  tools::GenerateOptions g;
  g.prompt = {5, 17, 3, 42};
  g.tokens = 24;
  int calls = 0;
  g.on_token = [&](int n, double) { EXPECT_EQ(n, ++calls); };
  tools::GenerateResult r = tools::generate(s, g);
  ASSERT_EQ(r.ids.size(), 24u);
  EXPECT_EQ(calls, 24);
  EXPECT_EQ(r.step_s.size(), 23u);
  EXPECT_GT(r.tokens_per_s(), 0);
  EXPECT_GT(r.peak_rss_bytes, 0u);
  // Now's split of the resident memory: the data holds at least the weights the graph still holds (in bytes,
  // not the kB /proc counts in), the program's code is there, and the peak is not below now.
  EXPECT_GE(r.rss_anon_bytes, r.weights_bytes - r.released_bytes);
  EXPECT_GT(r.weights_bytes - r.released_bytes, 100u * 1024);  // the bound above means something
  EXPECT_GT(r.rss_file_bytes, 0u);
  EXPECT_GE(r.peak_rss_bytes, r.rss_anon_bytes + r.rss_file_bytes);

  // The unfused model on prompt + generated tokens in one run, no past.
  std::vector<int64_t> seq = g.prompt;
  seq.insert(seq.end(), r.ids.begin(), r.ids.end() - 1);
  std::map<std::string, Tensor> in;
  in.emplace("input_ids", Tensor::from<int64_t>({1, int64_t(seq.size())}, seq));
  for (const Value* v : m.graph->inputs())
    if (v->name().rfind("past", 0) == 0) in.emplace(v->name(), Tensor(DType::Float, {1, 4, 0, 16}));
  runtime::Session plain(*m.graph);
  Tensor logits = plain.run(in)[0];
  const int64_t vocab = logits.dim(-1);
  for (size_t i = 0; i < r.ids.size(); ++i) {
    const float* row = logits.data<float>() + (int64_t(g.prompt.size()) - 1 + int64_t(i)) * vocab;
    const float best = *std::max_element(row, row + vocab);
    EXPECT_GE(row[r.ids[i]], best - 1e-3f * std::max(1.0f, std::abs(best))) << "token " << i;
  }

  // The same session again, the prompt's prefill then re-run on it warm: each re-run starts from empty pasts (the
  // cache rewound), and the loop before them is the first loop over again.
  g.prefill_runs = 3;
  g.on_token = nullptr;
  tools::GenerateResult again = tools::generate(s, g);
  EXPECT_EQ(again.ids, r.ids);
  ASSERT_EQ(again.prefill_warm_s.size(), 3u);
  EXPECT_GT(again.median_prefill_warm_s(), 0);
  EXPECT_EQ(again.prefill_after_steps_s(), again.prefill_warm_s.front());
  EXPECT_TRUE(r.prefill_warm_s.empty());
  EXPECT_EQ(r.median_prefill_warm_s(), 0);
  EXPECT_EQ(r.prefill_after_steps_s(), 0);
  g.prefill_runs = 0;  // and after the re-runs, the loop is still the first loop
  EXPECT_EQ(tools::generate(s, g).ids, r.ids);
}

// Only the last position's logits (keep_last_logits): the same tokens as every position's, the prompt's logits
// one row, and the last row the same numbers.
TEST_P(Generate, LastPositionLogitsPickTheSameTokens) {
  Model m = testing::parse(GetParam().text(2, {}));
  Model last = testing::parse(GetParam().text(2, {}));
  ASSERT_EQ(tools::keep_last_logits(last), "");
  tools::FuseOptions opts;
  opts.fusion.opt_level = 3;
  Model fused_all = testing::fused_copy(m, opts), fused_last = testing::fused_copy(last, opts);
  tools::GenerateOptions g;
  g.prompt = {5, 17, 3, 42, 8, 1};
  g.tokens = 12;
  runtime::Session sa(*fused_all.graph), sl(*fused_last.graph);
  tools::GenerateResult ra = tools::generate(sa, g), rl = tools::generate(sl, g);
  EXPECT_EQ(rl.ids, ra.ids);
  EXPECT_EQ(ra.prefill_logits_rows, 6);
  EXPECT_EQ(rl.prefill_logits_rows, 1);
  // One prefill of the prompt through the unfused models: the last row of every position's logits is the row
  // keep_last_logits leaves.
  std::map<std::string, Tensor> in;
  in.emplace("input_ids", Tensor::from<int64_t>({1, 6}, g.prompt));
  for (const Value* v : m.graph->inputs())
    if (v->name().rfind("past", 0) == 0) in.emplace(v->name(), Tensor(DType::Float, {1, 4, 0, 16}));
  runtime::Session pa(*m.graph), pl(*last.graph);
  const Tensor all = pa.run(in)[0], one = pl.run(in)[0];
  ASSERT_EQ(one.dims(), (std::vector<int64_t>{1, 1, all.dim(-1)}));
  const int64_t vocab = all.dim(-1);
  for (int64_t j = 0; j < vocab; ++j)
    EXPECT_NEAR(one.data<float>()[j], all.data<float>()[5 * vocab + j], 1e-5f * (1 + std::abs(one.data<float>()[j])))
        << "logit " << j;
}

INSTANTIATE_TEST_SUITE_P(Exports, Generate,
                         ::testing::Values(Export{"gpt2", testing::gpt2_decoder},
                                           Export{"llama", testing::llama_decoder}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(Generate, RefusesModelsWithoutTheLoopsInputs) {
  auto expect_error = [](const std::string& text, const std::string& part) {
    Model m = testing::parse(testing::header(14) + text);
    runtime::Session s(*m.graph);
    tools::GenerateOptions g;
    g.prompt = {1};
    try {
      tools::generate(s, g);
      ADD_FAILURE() << "no error; expected one with '" << part << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_error("g (float[1,4] x) => (float[1,4] y) { y = Relu(x) }", "input 'x' is neither");
  expect_error(
      "g (int64[1,T] input_ids, float[1,2,P,4] past_0) => (float[1,T,8] logits) {"
      "  f = Cast <to = 1> (input_ids)  ax = Constant <value = int64[1] {2}> ()  u = Unsqueeze(f, ax)"
      "  s = Constant <value = int64[3] {1, 1, 8}> ()  logits = Expand(u, s) }",
      "1 past input(s) but 0 present");
  // keep_last_logits where the logits are not a product of the last positions: the reason, the model as it was.
  Model expand = testing::parse(testing::header(14) +
                                "g (int64[1,T] input_ids) => (float[1,T,8] logits) {"
                                "  f = Cast <to = 1> (input_ids)  ax = Constant <value = int64[1] {2}> ()"
                                "  u = Unsqueeze(f, ax)  s = Constant <value = int64[3] {1, 1, 8}> ()"
                                "  logits = Expand(u, s) }");
  const size_t nodes = expand.graph->num_nodes();
  EXPECT_NE(tools::keep_last_logits(expand).find("'logits' is not made by a MatMul"), std::string::npos);
  EXPECT_EQ(expand.graph->num_nodes(), nodes);
  Model product = testing::parse(testing::header(14) +
                                 "g (float[1,T,4] h, float[4,8] w) => (float[1,T,8] logits) {"
                                 "  logits = MatMul(h, w) }");
  EXPECT_NE(tools::keep_last_logits(product).find("does not multiply by a constant matrix"), std::string::npos);
  EXPECT_EQ(product.graph->num_nodes(), 1u);
  Model ok = testing::parse(testing::gpt2_decoder(1));
  runtime::Session s(*ok.graph);
  tools::GenerateOptions g;
  EXPECT_THROW(tools::generate(s, g), Error);  // empty prompt
}

}  // namespace
}  // namespace gaf

namespace gaf {
namespace {

// The medians generate reports for the start and the end of a run (item 3: the last 32 steps against the first).
TEST(GenerateResult, MediansOfTheFirstAndLastSteps) {
  tools::GenerateResult r;
  EXPECT_EQ(r.median_first_steps_s(32), 0);  // no steps
  EXPECT_EQ(r.median_last_steps_s(32), 0);
  r.step_s = {5, 1, 3, 100, 300, 200, 7};
  EXPECT_EQ(r.median_first_steps_s(3), 3);
  EXPECT_EQ(r.median_last_steps_s(3), 200);
  EXPECT_EQ(r.median_step_s(1, 2), 3);       // {1, 3}: the upper middle
  EXPECT_EQ(r.median_first_steps_s(32), 7);  // fewer steps than asked: all of them
  EXPECT_EQ(r.median_last_steps_s(32), 7);
  EXPECT_EQ(r.median_step_s(), 7);
  EXPECT_EQ(r.median_step_s(9, 3), 0);  // past the end
  const std::string j = r.json();
  EXPECT_NE(j.find("\"median_first32_ms\": 7000.000"), std::string::npos) << j;
  EXPECT_NE(j.find("\"median_last32_ms\": 7000.000"), std::string::npos) << j;
}

// 1,000 tokens through the loop (a one-layer LLaMA-style decoder with room for 1,040 positions). With the KV
// cache in place, the session's memory is the cache at full length (allocated once, for prompt + tokens
// positions) plus one step's activations: the pool holds what it held after the first decode step, plus twice
// what a step's live tensors grew since (the mask-sized ones grow with the past: 6 KB by token 1,000; live, and
// their last size class kept free).
// Fed as plain tensors (kv_cache off), the pool grows only with the cache: over the first decode step's, it never
// holds more than three generations of the cache's growth (the presents handed back, the pasts given, the ones
// before), each at most 1/8 over, plus 1.5 MB (measured: 2.6x the cache's growth, and one step of 1.1 MB near
// token 960). A pool that kept every size it saw would hold hundreds of megabytes by then.
TEST(GenerateMemory, FlatOverAThousandTokens) {
  std::vector<testing::decoder_detail::Init> weights;
  testing::DecoderDims dims;
  dims.max_positions = 1040;
  dims.deferred = &weights;
  const std::string text = testing::llama_decoder(1, dims);
  Model m = onnx_io::import_model(testing::decoder_proto(text, weights));
  tools::FuseOptions opts;
  opts.fusion.opt_level = 3;
  tools::fuse_model(m, opts);
  const testing::OneThread one_thread;  // the pool's size, not the threads' race for its blocks
  for (bool in_place : {true, false}) {
    SCOPED_TRACE(in_place ? "KV cache in place" : "pasts as tensors");
    runtime::Session s(*m.graph);
    tools::GenerateOptions g;
    g.prompt = {1, 2, 3};
    g.tokens = 1000;
    g.kv_cache = in_place;
    auto cache_bytes = [&](int n) {  // keys + values cached after token n
      return size_t(2 * dims.heads * (int64_t(g.prompt.size()) + n - 1) * dims.head_dim) * sizeof(float);
    };
    size_t base = 0, base_peak = 0, worst_excess = 0;
    int worst_step = 0;
    g.on_token = [&](int n, double) {
      const size_t held = s.stats().pool_bytes, peak = s.stats().peak_bytes;
      if (n == 2) base = held, base_peak = peak;
      if (n < 2) return;
      const size_t step_growth = peak - std::min(peak, base_peak);
      const size_t allowed =
          in_place ? base + 2 * step_growth : base + 3 * (cache_bytes(n) - cache_bytes(2)) * 9 / 8 + 1536 * 1024;
      if (held > allowed && held - allowed > worst_excess) worst_excess = held - allowed, worst_step = n;
    };
    tools::GenerateResult r = tools::generate(s, g);
    EXPECT_EQ(r.ids.size(), 1000u);
    EXPECT_EQ(worst_excess, 0u) << "at token " << worst_step << " the pool held " << worst_excess
                                << " bytes more than allowed";
    EXPECT_EQ(r.kv_pairs, in_place ? 2u : 0u);
    EXPECT_EQ(r.kv_cache_bytes, in_place ? cache_bytes(1001) : 0u);  // room for prompt + tokens positions
  }
}


// A prompt after decode steps (a new prompt, or the next turn of a chat) finds the buffers the first prompt's
// run used: the pool keeps as many free bytes as any one run freed, so the steps' smaller runs do not give the
// prompt's activations back to the system (whose pages a new allocation would fault in again: 70 ms of a
// 256-token prompt's 140 on a 2-core VM). Twin: a prompt longer than any before needs memory the pool never had.
TEST(GenerateMemory, APromptAfterStepsTakesNoNewMemory) {
  Model m = testing::parse(testing::llama_decoder(1, {}));
  tools::FuseOptions opts;
  opts.fusion.opt_level = 3;
  Model fused = testing::fused_copy(m, opts);
  const testing::OneThread one_thread;
  runtime::Session s(*fused.graph);
  tools::GenerateOptions g;
  for (int64_t i = 0; i < 24; ++i) g.prompt.push_back(3 + 7 * i % 50);
  g.tokens = 40;
  g.prefill_runs = 1;
  size_t prompt_fresh = 0, steps_fresh = 0;
  g.on_token = [&](int n, double) { (n == 1 ? prompt_fresh : steps_fresh) += s.stats().pool_fresh_bytes; };
  tools::generate(s, g);
  // The session's first run got its blocks anew. The steps' runs got a few more (other sizes), for which the
  // pool gave back as many bytes of the prompt's (at least; whole blocks): measured 1.6 KB and 9 KB of 650 KB.
  // A pool that gave back what the last run did not take would have the prompt fault in all of it again.
  EXPECT_GT(prompt_fresh, 0u);
  EXPECT_LT(s.stats().pool_fresh_bytes * 16, prompt_fresh)
      << "the prompt's run after " << g.tokens - 1 << " steps got " << s.stats().pool_fresh_bytes
      << " bytes anew; its first run got " << prompt_fresh << " and the steps " << steps_fresh;

  const std::vector<int64_t> first = g.prompt;
  g.prompt.insert(g.prompt.end(), first.begin(), first.end());  // 48 tokens (the model has room for 128)
  g.prefill_runs = 0;
  prompt_fresh = 0;
  tools::generate(s, g);
  EXPECT_GT(prompt_fresh, 0u);
}

}  // namespace
}  // namespace gaf
