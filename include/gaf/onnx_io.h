// ONNX frontend: ModelProto <-> gaf::Model, and TensorProto <-> gaf::Tensor. Import and export only translate: the
// driver runs our passes around them (gaf/passes.h: infer_fused_body_shapes after reading a model we wrote,
// PortableModel before writing one for other runtimes).
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
// `name` (of the value typed) for the error when the static dims' element count overflows 64 bits.
TensorType type_from_proto(const onnx::TypeProto& tp, const std::string& name = "");
// Whether the IR holds values of this type: tensors, sequences of tensors, optionals of either (not maps).
bool supported_type(const onnx::TypeProto& tp);
void type_to_proto(const TensorType& t, onnx::TypeProto& tp);
// The output types ONNX's own inference function for n's op (at n's opset) gives from n's input types and the
// contents of its small constant inputs (pads, repeats, sizes...): nullopt for an output it leaves untyped, all
// nullopt when the op has no schema or inference fails. For what our shape inference has no rule of its own.
std::vector<std::optional<TensorType>> infer_node_types(const Node& n);
// Runs the ONNX checker (with model-local functions) on the exported model; throws naming the problem.
void check_model(const Model& model);
// Where the weights go when a model is written. Auto: into the model file, unless they pass
// kAutoExternalBytes (a protobuf file cannot hold 2 GB), then into external data; Always / Never: as said.
enum class ExternalData { Auto, Always, Never };
inline constexpr size_t kAutoExternalBytes = size_t(1536) << 20;
// Initializers smaller than this stay in the model file when the rest go to external data (ONNX's default).
inline constexpr size_t kExternalMinBytes = 1024;

// Writes atomically (temp file then rename): never a half-written file. With external data the weights go to
// `<file name>.data` beside the model (offsets of large tensors aligned to 4 KiB), both files written together.
void save_model(const Model& model, const std::string& path, ExternalData external = ExternalData::Auto);
// The bytes save_model writes (the model as it is; PortableModel(m) for other runtimes), weights inside.
std::string serialize_model(const Model& model);
// The files save_model writes for `path`, as (path, bytes) pairs for write_files_atomic (renamed in order): with
// external data the data file first, then the model.
std::vector<std::pair<std::string, std::string>> serialize_model_files(const Model& model, const std::string& path,
                                                                       ExternalData external = ExternalData::Auto);

// External data is read from `base_dir` and must stay inside it (symlinks followed); with no base_dir (a model
// given as bytes) external data is an error.
Tensor tensor_from_proto(const onnx::TensorProto& proto, const std::string& base_dir = "");
// Refuses (throws naming the tensor) external data of `proto` whose location leaves `base_dir` or whose offset or
// length is not a number; reads nothing.
void check_external_data(const onnx::TensorProto& proto, const std::string& base_dir);
// The folder a file's external data is resolved in: its parent, "." for a bare file name.
std::string folder_of(const std::string& file_path);
void tensor_to_proto(const Tensor& t, onnx::TensorProto& proto);
Tensor load_tensor(const std::string& path);  // a serialized TensorProto (.pb)
void save_tensor(const Tensor& t, const std::string& path, const std::string& name = "");
// A value of declared `type` (a tensor: a TensorProto; a sequence: a SequenceProto; an optional: an
// OptionalProto, as ONNX's test data stores them).
Tensor load_value(const std::string& path, const TensorType& type);
void save_value(const Tensor& v, const TensorType& type, const std::string& path,
                const std::string& name = "");

// Writes bytes to `path` through a temporary file in the same folder (fsynced) and a rename; a temporary left by a
// killed process is removed. A folder at `path` is an error.
void write_file_atomic(const std::string& path, const std::string& bytes);
// Several files, all or none: every temporary is written before the first rename, so a failure leaves no file.
void write_files_atomic(const std::vector<std::pair<std::string, std::string>>& files);

}  // namespace gaf::onnx_io
