// The same model fused twice, and with 1 and 2 OpenMP threads, gives byte-identical ONNX, reports and
// generated kernel sources; one compiled Session run from 4 threads x 50 runs (runs take turns) gives what a
// single thread gets, bit for bit.
#include <omp.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "models/decoder_exports.h"
#include "passes/pass_test_util.h"

namespace gaf {
namespace {

namespace fs = std::filesystem;

struct Fused {
  std::string onnx, report;
  std::map<std::string, std::string> kernels;  // file name -> contents
};

Fused fuse_once(const std::string& text_or_path, int threads, const fs::path& dir) {
  omp_set_num_threads(threads);
  Model m =
      text_or_path.rfind("<", 0) == 0 ? testing::parse(text_or_path) : onnx_io::load_model(text_or_path);
  tools::FuseOptions opts;
  opts.fusion.opt_level = 3;
  tools::FuseResult r = tools::fuse_model(m, opts);
  Fused f{onnx_io::serialize_model(PortableModel(m)), r.report_json("m", opts.target, 3), {}};
  tools::emit_code(m, dir.string(), false);
  for (const auto& e : fs::directory_iterator(dir)) {
    std::ifstream in(e.path());
    std::stringstream ss;
    ss << in.rdbuf();
    f.kernels[e.path().filename().string()] = ss.str();
  }
  return f;
}

TEST(Determinism, FusingTwiceAndWithOneOrTwoThreadsGivesTheSameBytes) {
  const fs::path tmp = fs::temp_directory_path() / ("gaf_determinism_" + std::to_string(getpid()));
  const int threads = omp_get_max_threads();
  std::vector<std::string> models = {testing::gpt2_decoder(2, {}), testing::llama_decoder(2, {})};
  for (const char* name :
       {"mlp", "mobilenet_v2", "resnet18_bn", "transformer_layer"})  // when ../shared is there
    if (fs::exists(fs::path(GAF_SHARED_MODELS) / name / "model.onnx"))
      models.push_back((fs::path(GAF_SHARED_MODELS) / name / "model.onnx").string());
  for (const std::string& t : models) {
    fs::remove_all(tmp);
    Fused a = fuse_once(t, 2, tmp / "a"), b = fuse_once(t, 2, tmp / "b"), c = fuse_once(t, 1, tmp / "c");
    EXPECT_FALSE(a.kernels.empty());
    for (const Fused* x : {&b, &c}) {
      EXPECT_TRUE(x->onnx == a.onnx) << "the fused ONNX differs";
      EXPECT_EQ(x->report, a.report);
      EXPECT_EQ(x->kernels, a.kernels);
    }
  }
  omp_set_num_threads(threads);
  fs::remove_all(tmp);
}

TEST(Determinism, OneSessionRunFromFourThreadsMatchesOneThread) {
  Model m = testing::parse(testing::gpt2_decoder(2, {}));
  tools::FuseOptions opts;
  opts.fusion.opt_level = 3;
  tools::fuse_model(m, opts);
  runtime::Session s(*m.graph);
  std::map<std::string, Tensor> in;
  in.emplace("input_ids", Tensor::from<int64_t>({1, 4}, std::vector<int64_t>{5, 17, 3, 42}));
  for (const Value* v : m.graph->inputs())
    if (v->name().rfind("past", 0) == 0) {
      Tensor p(DType::Float, {1, 4, 6, 16});
      for (int64_t i = 0; i < p.numel(); ++i) p.data<float>()[i] = float((i * 7) % 13) / 13.f - 0.5f;
      in.emplace(v->name(), std::move(p));
    }
  const std::vector<Tensor> want = s.run(in);
  std::atomic<int> mismatches{0}, errors{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < 4; ++t)
    pool.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        try {
          std::vector<Tensor> got = s.run(in);
          for (size_t k = 0; k < want.size(); ++k)
            if (got[k].dims() != want[k].dims() ||
                std::memcmp(got[k].raw(), want[k].raw(), want[k].nbytes()) != 0)
              ++mismatches;
        } catch (const std::exception&) {
          ++errors;
        }
      }
    });
  for (auto& t : pool) t.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(errors.load(), 0);
}

}  // namespace
}  // namespace gaf
