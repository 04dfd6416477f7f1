// ONNX frontend: ModelProto <-> gaf::Model, and TensorProto <-> gaf::Tensor.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gaf/graph.h"

namespace onnx {
class ModelProto;
class TensorProto;
class GraphProto;
class NodeProto;
class TypeProto;
}  // namespace onnx

namespace gaf::onnx_io {

struct ImportOptions {
  bool check = true;            // run the ONNX checker first
  bool infer_shapes = true;     // ONNX shape inference, then ours where ONNX left shapes unknown
  std::string source_path;      // set by load_model: the checker reads external data beside it
};

// Reads a model file (up to 2 GB; external data resolved beside it). Throws gaf::Error naming the problem.
Model load_model(const std::string& path, const ImportOptions& opts = {});
Model import_model(onnx::ModelProto proto, const std::string& base_dir = "", const ImportOptions& opts = {});
// Parses ONNX textual syntax (onnx/defs/parser.h): "<ir_version: 8, opset_import: [\"\" : 17]> g (...) => (...) {...}".
Model parse_model_text(const std::string& text, const ImportOptions& opts = {});

onnx::ModelProto export_model(const Model& model);
void graph_to_proto(const Graph& g, onnx::GraphProto& gp);
void node_to_proto(const Node& n, onnx::NodeProto& np);
TensorType type_from_proto(const onnx::TypeProto& tp);
void type_to_proto(const TensorType& t, onnx::TypeProto& tp);
// The output types ONNX's own inference function for n's op (at n's opset) gives from n's input types and the
// contents of its small constant inputs (pads, repeats, sizes...): nullopt for an output it leaves untyped, all
// nullopt when the op has no schema or inference fails. For what our shape inference has no rule of its own.
std::vector<std::optional<TensorType>> infer_node_types(const Node& n);
// Runs the ONNX checker (with model-local functions) on the exported model; throws naming the problem.
void check_model(const Model& model);
// Writes atomically (temp file then rename): never a half-written file.
void save_model(const Model& model, const std::string& path);

Tensor tensor_from_proto(const onnx::TensorProto& proto, const std::string& base_dir = "");
void tensor_to_proto(const Tensor& t, onnx::TensorProto& proto);
Tensor load_tensor(const std::string& path);  // a serialized TensorProto (.pb)
void save_tensor(const Tensor& t, const std::string& path, const std::string& name = "");

// Writes bytes to `path` through a temporary file in the same folder and a rename.
void write_file_atomic(const std::string& path, const std::string& bytes);

}  // namespace gaf::onnx_io
