// graph-autofusion opt: named rewrite passes over a model, the result as ONNX text (like mlir-opt).
#include <onnx/defs/printer.h>
#include <onnx/onnx_pb.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "gaf/onnx_io.h"
#include "gaf/passes.h"
#include "gaf/tools.h"

namespace gaf::tools {

// ONNX's printer has the graph and functions, not the model header (written here in the parser's syntax) nor
// the graph's initializers (printed as Constant nodes in front, which the parser reads back the same).
std::string model_text(const Model& m) {
  onnx::ModelProto p = onnx_io::export_model(m);
  onnx::GraphProto& g = *p.mutable_graph();
  std::set<std::string> inputs;
  for (const auto& i : g.input()) inputs.insert(i.name());
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  google::protobuf::RepeatedPtrField<onnx::TensorProto> kept;
  for (const onnx::TensorProto& t : g.initializer()) {
    if (inputs.count(t.name())) {  // an input with a default stays an initializer
      *kept.Add() = t;
      continue;
    }
    onnx::NodeProto* c = nodes.Add();
    c->set_op_type("Constant");
    c->add_output(t.name());
    onnx::AttributeProto* a = c->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    *a->mutable_t() = t;
    a->mutable_t()->clear_name();
  }
  for (const onnx::NodeProto& n : g.node()) *nodes.Add() = n;
  g.mutable_node()->Swap(&nodes);
  g.mutable_initializer()->Swap(&kept);
  std::ostringstream os;
  os << "<ir_version: " << p.ir_version() << ", opset_import: [";
  for (int i = 0; i < p.opset_import_size(); ++i)
    os << (i ? ", " : "") << '"' << p.opset_import(i).domain() << "\" : " << p.opset_import(i).version();
  os << "]>\n" << p.graph();
  for (const onnx::FunctionProto& f : p.functions()) os << "\n" << f;
  // The printer writes a scalar's type as float[], which the parser reads only as float.
  static const std::regex scalar(
      R"(\b(float|double|float16|bfloat16|int8|int16|int32|int64|uint8|uint16|uint32|uint64|bool|string)\[\])");
  return std::regex_replace(os.str(), scalar, "$1");
}

Model read_model(const std::string& path) {
  Model m = onnx_io::load_model(path);
  infer_fused_body_shapes(*m.graph);
  return m;
}

Model load_model_or_text(const std::string& path) {
  if (path.size() < 4 || path.compare(path.size() - 4, 4, ".txt") != 0) return read_model(path);
  std::ifstream f(path);
  GAF_CHECK(f, "cannot read '{}'", path);
  std::stringstream s;
  s << f.rdbuf();
  Model m = onnx_io::parse_model_text(s.str());
  infer_fused_body_shapes(*m.graph);
  return m;
}

int run_passes(Model& m, const std::vector<std::string>& passes, const std::string& dump_after,
               std::ostream& dumps) {
  const std::vector<std::string> known = PassManager::known_passes();
  auto check_name = [&](const std::string& name, const char* what) {
    GAF_CHECK(std::find(known.begin(), known.end(), name) != known.end(), "{} '{}' is no pass (known: {})",
              what, name, fmt::join(known, ", "));
  };
  GAF_CHECK(!passes.empty(), "--passes names no pass (known: {})", fmt::join(known, ", "));
  PassManager pm;
  for (const std::string& p : passes) {
    check_name(p, "--passes:");
    pm.add(PassManager::make_pass(p));
  }
  if (!dump_after.empty() && dump_after != "all") check_name(dump_after, "--dump-after:");
  PassContext ctx;
  ctx.evaluator = &runtime::constant_evaluator();
  int dumped = 0;
  if (!dump_after.empty())
    ctx.after_pass = [&](std::string_view pass, const Graph&) {
      if (dump_after != "all" && pass != dump_after) return;
      dumps << "# after " << pass << "\n" << model_text(m) << "\n";
      ++dumped;
    };
  pm.run(*m.graph, ctx);
  verify(*m.graph);
  return dumped;
}

}  // namespace gaf::tools
