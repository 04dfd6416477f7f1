// External data stays inside the model's folder: a location that is absolute, climbs out with "..", or
// reaches out through a symlink is refused with one error naming the tensor, before a byte of the outside
// file is read.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gaf/onnx_io.h"

namespace gaf {
namespace {

namespace fs = std::filesystem;

class ExternalData : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            fmt::format("gaf_external_{}_{}", getpid(),
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "model");
    // Four floats 1, 2, 3, 4 after an 8-byte prefix, inside the model's folder and outside it.
    for (const fs::path& p : {root_ / "model" / "w.bin", root_ / "outside.bin"}) write_weights(p);
  }
  void TearDown() override { fs::remove_all(root_); }

  static void write_weights(const fs::path& p) {
    std::ofstream f(p, std::ios::binary);
    f << "PREFIX!!";
    for (float v : {1.f, 2.f, 3.f, 4.f}) f.write(reinterpret_cast<const char*>(&v), sizeof v);
  }

  // y = x + W, W's data external at `location` (offset 8 unless given).
  fs::path write_model(const std::string& location, const std::string& offset = "8",
                       const std::string& length = "") {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(17);
    auto* g = m.mutable_graph();
    g->set_name("g");
    auto* w = g->add_initializer();
    w->set_name("W");
    w->set_data_type(onnx::TensorProto::FLOAT);
    w->add_dims(4);
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    auto add_kv = [&](const char* k, const std::string& v) {
      auto* kv = w->add_external_data();
      kv->set_key(k);
      kv->set_value(v);
    };
    add_kv("location", location);
    if (!offset.empty()) add_kv("offset", offset);
    if (!length.empty()) add_kv("length", length);
    for (const char* name : {"x", "y"}) {
      auto* vi = name[0] == 'x' ? g->add_input() : g->add_output();
      vi->set_name(name);
      vi->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
      vi->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(4);
    }
    auto* n = g->add_node();
    n->set_op_type("Add");
    n->set_name("add");
    n->add_input("x");
    n->add_input("W");
    n->add_output("y");
    fs::path path = root_ / "model" / "model.onnx";
    std::ofstream f(path, std::ios::binary);
    m.SerializeToOstream(&f);
    return path;
  }

  std::string load_error(const fs::path& model) {
    try {
      onnx_io::load_model(model.string());
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  fs::path root_;
};

TEST_F(ExternalData, InsideTheFolderLoads) {
  Model m = onnx_io::load_model(write_model("w.bin").string());
  const Value* w = m.graph->find_value("W");
  ASSERT_TRUE(w && w->is_constant());
  const float* d = w->constant().data<float>();
  EXPECT_EQ(std::vector<float>(d, d + 4), std::vector<float>({1, 2, 3, 4}));
}

TEST_F(ExternalData, InsideTheFolderThroughDotDotLoads) {
  fs::create_directories(root_ / "model" / "sub");
  EXPECT_EQ(load_error(write_model("sub/../w.bin")), "");
}

TEST_F(ExternalData, ParentFolderIsRefused) {
  std::string err = load_error(write_model("../outside.bin"));
  EXPECT_NE(err.find("tensor 'W'"), std::string::npos) << err;
  EXPECT_NE(err.find("outside the model's folder"), std::string::npos) << err;
}

TEST_F(ExternalData, AbsolutePathIsRefused) {
  std::string err = load_error(write_model((root_ / "outside.bin").string()));
  EXPECT_NE(err.find("is an absolute path"), std::string::npos) << err;
  err = load_error(write_model("/etc/passwd", "0", "16"));
  EXPECT_NE(err.find("is an absolute path"), std::string::npos) << err;
}

TEST_F(ExternalData, SymlinkOutOfTheFolderIsRefused) {
  fs::create_symlink(root_ / "outside.bin", root_ / "model" / "link.bin");
  std::string err = load_error(write_model("link.bin"));
  EXPECT_NE(err.find("outside the model's folder"), std::string::npos) << err;
  fs::create_directory_symlink(root_, root_ / "model" / "up");
  err = load_error(write_model("up/outside.bin"));
  EXPECT_NE(err.find("outside the model's folder"), std::string::npos) << err;
}

TEST_F(ExternalData, BadOffsetAndLengthAreErrorsNotCrashes) {
  EXPECT_NE(load_error(write_model("w.bin", "eight")).find("external data 'offset' is 'eight'"),
            std::string::npos);
  EXPECT_NE(load_error(write_model("w.bin", "-8")).find("not a non-negative integer"), std::string::npos);
  EXPECT_NE(load_error(write_model("w.bin", "12")).find("is truncated"), std::string::npos);
  EXPECT_NE(load_error(write_model("w.bin", "8", "1000000000000")).find("where its type needs 16 bytes"),
            std::string::npos);
  EXPECT_NE(load_error(write_model("missing.bin")).find("cannot open external data file"), std::string::npos);
}

TEST_F(ExternalData, ModelGivenAsBytesHasNoFolder) {
  write_model("w.bin");
  onnx::ModelProto proto;
  std::ifstream f(root_ / "model" / "model.onnx", std::ios::binary);
  ASSERT_TRUE(proto.ParseFromIstream(&f));
  onnx_io::ImportOptions opts;
  opts.check = false;  // the checker has no folder either; it is our reader that must refuse
  try {
    onnx_io::import_model(proto, "", opts);
    FAIL() << "external data of a model given as bytes was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("load the model from its file"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gaf
