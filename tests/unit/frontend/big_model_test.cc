// A model whose weights live in external data (#29 item 9, at a size CI affords: 4 products of 4096 x 4096, 256 MB):
// written with its weights in `<file>.data` beside it (the model file itself a few KB), loaded back, fused, written
// again with external data, loaded and run: the same outputs as the model it started from. Small tensors stay in
// the model file; offsets of large ones are 4 KiB aligned.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gaf/builder.h"
#include "test_util.h"

namespace gaf {
namespace {

namespace fs = std::filesystem;

TEST(BigModel, ExternalDataWrittenLoadedFusedAndRun) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("gaf_big_model_{}", getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  constexpr int64_t kWidth = 4096;
  Model m;
  {
    GraphBuilder b(m);
    Value* x = b.input("x", DType::Float, {2, kWidth});
    Value* t = x;
    for (int i = 0; i < 4; ++i) {
      t = b.op("MatMul", {t, b.random_constant(fmt::format("w{}", i), {kWidth, kWidth}, 0.02f, uint64_t(i + 1))});
      t = b.op("Add", {t, b.random_constant(fmt::format("b{}", i), {kWidth}, 0.1f, uint64_t(i + 11))});
      t = b.op(i % 2 ? "Tanh" : "Relu", {t});
    }
    Value* small = b.constant(Tensor::from<float>({4}, std::vector<float>{1, 2, 3, 4}), "small");  // stays inline
    b.output(b.op("Mul", {b.op("Reshape", {t, b.ints({2, kWidth / 4, 4})}), small}));
    b.finish();
  }
  const std::vector<Tensor> inputs = tools::random_inputs(*m.graph, 7);
  const Tensor expected = runtime::Session(*m.graph).run(inputs)[0];

  const fs::path original = dir / "big.onnx";
  onnx_io::save_model(m, original.string(), onnx_io::ExternalData::Always);
  ASSERT_TRUE(fs::exists(dir / "big.onnx.data"));
  EXPECT_LT(fs::file_size(original), 64u * 1024);  // the graph only
  EXPECT_GE(fs::file_size(dir / "big.onnx.data"), size_t(4 * kWidth * kWidth) * sizeof(float));
  {  // how the file names its weights
    onnx::ModelProto p;
    std::ifstream f(original, std::ios::binary);
    ASSERT_TRUE(p.ParseFromIstream(&f));
    int external = 0;
    for (const auto& t : p.graph().initializer()) {
      if (t.data_location() != onnx::TensorProto::EXTERNAL) {
        EXPECT_LT(t.raw_data().size(), onnx_io::kExternalMinBytes) << t.name();
        continue;
      }
      ++external;
      for (const auto& e : t.external_data()) {
        if (e.key() == "location") {
          EXPECT_EQ(e.value(), "big.onnx.data");
        }
        if (e.key() == "offset" && t.name()[0] == 'w') {
          EXPECT_EQ(std::stoll(e.value()) % 4096, 0) << t.name();
        }
      }
    }
    EXPECT_EQ(external, 8);  // four weights and four biases; `small` inline
  }

  Model loaded = onnx_io::load_model(original.string());
  tools::FuseOptions opts;
  opts.fusion.opt_level = 3;
  tools::FuseResult r = tools::fuse_model(loaded, opts);
  EXPECT_FALSE(r.groups.empty());
  const fs::path fused_path = dir / "fused.onnx";
  onnx_io::save_model(PortableModel(loaded), fused_path.string(), onnx_io::ExternalData::Always);
  ASSERT_TRUE(fs::exists(dir / "fused.onnx.data"));
  Model again = tools::read_model(fused_path.string());
  const Tensor got = runtime::Session(*again.graph).run(inputs)[0];
  ASSERT_EQ(got.dims(), expected.dims());
  double worst = 0;
  for (int64_t i = 0; i < got.numel(); ++i)
    worst = std::max(worst, std::abs(double(got.data<float>()[i]) - double(expected.data<float>()[i])) /
                                (1e-5 + 1e-3 * std::abs(double(expected.data<float>()[i]))));
  EXPECT_LE(worst, 1.0) << "fused and reloaded vs the original: beyond rtol 1e-3, atol 1e-5";
  // Never: the weights inside one file (this one is under 2 GB).
  onnx_io::save_model(m, (dir / "inline.onnx").string(), onnx_io::ExternalData::Never);
  EXPECT_FALSE(fs::exists(dir / "inline.onnx.data"));
  EXPECT_GE(fs::file_size(dir / "inline.onnx"), size_t(4 * kWidth * kWidth) * sizeof(float));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gaf
