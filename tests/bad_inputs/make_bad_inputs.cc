// Writes the bad and edge-case models of the bad-input catalogue (tests/bad_inputs/cases.txt) into DIR:
// broken files, broken graphs, broken tensors, external data that leaves the model's folder, shapes whose
// sizes overflow or exceed any machine. Each is written as ONNX text and then broken where text cannot say it
// (a raw tensor of the wrong length, an external-data location), so the catalogue names what each file holds.
// Also DIR/secret.bin, a file outside every model folder that no model may read.
//
//   gaf_make_bad_inputs DIR
#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <string>

#include "gaf/onnx_io.h"
#include "gaf/tensor.h"

namespace {

namespace fs = std::filesystem;

fs::path g_dir;

onnx::ModelProto parse(const std::string& text) {
  onnx::ModelProto m;
  auto status = onnx::OnnxParser::Parse(m, text.c_str());
  if (!status.IsOK()) throw std::runtime_error("bad model text: " + status.ErrorMessage() + "\n" + text);
  return m;
}

void write(const std::string& rel, const std::string& bytes) {
  const fs::path p = g_dir / rel;
  fs::create_directories(p.parent_path());
  gaf::onnx_io::write_file_atomic(p.string(), bytes);
}

void write(const std::string& rel, const onnx::ModelProto& m) { write(rel, m.SerializeAsString()); }

// A one-node model around `body` (ONNX text lines), the standard domain at `opset`.
std::string model_text(const std::string& signature, const std::string& body, int opset = 17,
                       const std::string& extra_imports = "") {
  return "<ir_version: 8, opset_import: [\"\" : " + std::to_string(opset) + extra_imports + "]>\n" + "g " +
         signature + " {\n" + body + "\n}\n";
}

// y = x + w, w a float[4] initializer whose data lives in an external file at `location`.
onnx::ModelProto external_model(const std::string& location, const std::string& offset = "0") {
  onnx::ModelProto m =
      parse(model_text("(float[4] x) => (float[4] y) <float[4] w = {1, 2, 3, 4}>", "  y = Add(x, w)"));
  onnx::TensorProto* w = m.mutable_graph()->mutable_initializer(0);
  w->clear_float_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto kv = [&](const char* key, const std::string& value) {
    auto* e = w->add_external_data();
    e->set_key(key);
    e->set_value(value);
  };
  kv("location", location);
  kv("offset", offset);
  kv("length", "16");
  return m;
}

void write_all() {
  // Files that are no model.
  write("empty.onnx", "");
  std::string noise(4096, '\0');
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (char& c : noise) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    c = char(s >> 56);
  }
  write("random.onnx", noise);
  onnx::ModelProto big =
      parse(model_text("(float[64,64] x, float[64,64] w) => (float[64,64] y)", "  y = MatMul(x, w)"));
  onnx::TensorProto* w = big.mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(64);
  w->add_dims(64);
  w->set_raw_data(std::string(64 * 64 * 4, '\1'));
  const std::string big_bytes = big.SerializeAsString();
  write("truncated.onnx", big_bytes.substr(0, big_bytes.size() / 2));
  onnx::ModelProto no_graph;
  no_graph.set_ir_version(8);
  no_graph.add_opset_import()->set_version(17);
  write("no_graph.onnx", no_graph);

  // Graphs that are not well formed.
  write("cycle.onnx", parse(model_text("(float[2] x) => (float[2] y)",
                                       "  a = Add(x, b)\n  b = Relu(a)\n  y = Identity(b)")));
  write("unknown_op.onnx", parse(model_text("(float[2] x) => (float[2] y)", "  y = Frobnicate(x)")));
  write("unknown_domain.onnx", parse(model_text("(float[2] x) => (float[2] y)",
                                                "  y = com.acme.Frobnicate(x)", 17, ", \"com.acme\" : 1")));
  write("opset99.onnx", parse(model_text("(float[2] x) => (float[2] y)", "  y = Relu(x)", 99)));
  write("undefined_input.onnx", parse(model_text("(float[2] x) => (float[2] y)", "  y = Add(x, nosuch)")));
  write("output_never_produced.onnx",
        parse(model_text("(float[2] x) => (float[2] y, float[2] z)", "  y = Relu(x)")));
  write("two_producers.onnx",
        parse(model_text("(float[2] x) => (float[2] y)", "  y = Relu(x)\n  y = Neg(x)")));
  write("attribute_type.onnx",
        parse(model_text("(float[2,3] x) => (float[2,3] y)", "  y = Softmax<axis = \"last\">(x)")));
  write("missing_attribute.onnx",
        parse(model_text("(float[1,1,4,4] x) => (float[1,1,2,2] y)", "  y = MaxPool(x)")));
  write("too_many_inputs.onnx", parse(model_text("(float[2] x) => (float[2] y)", "  y = Relu(x, x)")));
  write("axis_out_of_range.onnx",
        parse(model_text("(float[2,3] x) => (float[2,3] y)", "  y = Softmax<axis = 5>(x)")));
  write("matmul_mismatch.onnx",
        parse(model_text("(float[2,3] x, float[5,4] w) => (float[2,4] y)", "  y = MatMul(x, w)")));
  write("reshape_mismatch.onnx",
        parse(model_text("(float[2,3] x) => (float[4,2] y) <int64[2] s = {4, 2}>", "  y = Reshape(x, s)")));
  write("wrong_type.onnx", parse(model_text("(string[2] x) => (string[2] y)", "  y = Relu(x)")));
  write("perm_wrong_length.onnx",
        parse(model_text("(float[2,3] x) => (float[3,2] y)", "  y = Transpose<perm = [0, 1, 2]>(x)")));

  // Tensors whose bytes do not match their shape.
  onnx::ModelProto raw =
      parse(model_text("(float[4] x) => (float[4] y) <float[4] w = {1, 2, 3, 4}>", "  y = Add(x, w)"));
  raw.mutable_graph()->mutable_initializer(0)->clear_float_data();
  raw.mutable_graph()->mutable_initializer(0)->set_raw_data(std::string(7, '\0'));
  write("raw_data_length.onnx", raw);
  onnx::ModelProto few =
      parse(model_text("(float[4] x) => (float[4] y) <float[4] w = {1, 2, 3, 4}>", "  y = Add(x, w)"));
  few.mutable_graph()->mutable_initializer(0)->mutable_float_data()->RemoveLast();
  write("float_data_count.onnx", few);
  onnx::ModelProto neg =
      parse(model_text("(float[4] x) => (float[4] y) <float[4] w = {1, 2, 3, 4}>", "  y = Add(x, w)"));
  neg.mutable_graph()->mutable_initializer(0)->set_dims(0, -4);
  write("negative_dim.onnx", neg);

  // Sizes past int64 and past any machine.
  write("element_overflow.onnx",
        parse(model_text(
            "(float[2] x) => (float[4294967296,4294967296,4] y) <int64[3] s = {4294967296, 4294967296, 4}>",
            "  y = Expand(x, s)")));
  write("terabytes.onnx",
        parse(model_text("(float[1] x) => (float[1000000,1000000] y) <int64[2] s = {1000000, 1000000}>",
                         "  y = Expand(x, s)")));

  // External data: inside the folder it loads; anywhere else it is refused.
  write("secret.bin", std::string("SECRET-0123456789-SECRET"));
  write("ext_ok/model.onnx", external_model("weights.bin"));
  write("ext_ok/weights.bin", std::string("\0\0\x80\x3f\0\0\0\x40\0\0\x40\x40\0\0\x80\x40", 16));  // 1 2 3 4
  write("ext_parent/model.onnx", external_model("../secret.bin"));
  write("ext_deep_parent/model.onnx", external_model("../../../../../../../../etc/passwd"));
  write("ext_absolute/model.onnx", external_model((fs::absolute(g_dir) / "secret.bin").string()));
  write("ext_symlink/model.onnx", external_model("weights.bin"));
  fs::remove(g_dir / "ext_symlink/weights.bin");
  fs::create_symlink("../secret.bin", g_dir / "ext_symlink/weights.bin");
  write("ext_missing/model.onnx", external_model("nosuch.bin"));
  write("ext_past_end/model.onnx", external_model("weights.bin", "4096"));
  write("ext_past_end/weights.bin", std::string(16, '\0'));
  write("ext_bad_offset/model.onnx", external_model("weights.bin", "eight"));
  write("ext_bad_offset/weights.bin", std::string(16, '\0'));

  // Models whose fused form differs from the unfused one, for `verify`: a NaN (Sqrt of a negative input)
  // through Conv + Relu, and a chain of bfloat16 elementwise ops (unfused, each op rounds to bfloat16).
  std::string weights = "{";
  for (int i = 0; i < 4 * 2 * 3 * 3; ++i)
    weights += (i ? ", " : "") + std::to_string(((i * 37) % 17 - 8) / 8.0);
  write("nan_conv_relu.onnx",
        parse(model_text("(float[1,2,6,6] x) => (float[1,4,6,6] y) <float[4,2,3,3] w = " + weights + "}>",
                         "  s = Sqrt(x)\n  c = Conv<pads = [1, 1, 1, 1]>(s, w)\n  y = Relu(c)")));
  write("bf16_chain.onnx",
        parse(model_text("(bfloat16[64,64] x) => (bfloat16[64,64] y)",
                         "  a = Mul(x, x)\n  b = Add(a, x)\n  c = Tanh(b)\n  d = Mul(c, x)\n"
                         "  e = Sub(d, a)\n  y = Add(e, c)")));

  // Inputs for `run` of ext_ok (x: float[4]): of the wrong element type, of the wrong shape, and no tensor.
  gaf::onnx_io::save_tensor(gaf::Tensor(gaf::DType::Int64, {4}, gaf::Allocator::heap(), /*zero=*/true),
                            (g_dir / "x_int64.pb").string(), "x");
  gaf::onnx_io::save_tensor(gaf::Tensor(gaf::DType::Float, {3}, gaf::Allocator::heap(), /*zero=*/true),
                            (g_dir / "x_float3.pb").string(), "x");
  write("not_a_tensor.pb", std::string("this is not a tensor"));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: gaf_make_bad_inputs DIR\n";
    return 2;
  }
  try {
    g_dir = argv[1];
    fs::remove_all(g_dir);
    fs::create_directories(g_dir);
    write_all();
  } catch (const std::exception& e) {
    std::cerr << "gaf_make_bad_inputs: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
