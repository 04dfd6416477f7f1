// ModelProto -> gaf::Model. The ONNX checker and ONNX shape inference run first; then the graph is converted
// value by value. Attribute kinds the IR does not interpret (subgraphs, sparse tensors) travel as OpaqueAttr so
// export reproduces them.
#include <onnx/checker.h>
#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "frontend/onnx/gaf_schemas.h"
#include "gaf/builder.h"
#include "gaf/onnx_io.h"

namespace gaf::onnx_io {

namespace {

// The tensor type of tp (tensor_type) into t's dtype and shape.
void tensor_type_from_proto(const onnx::TypeProto::Tensor& tt, const std::string& name, TensorType& t) {
  t.dtype = static_cast<DType>(tt.elem_type());
  if (!tt.has_shape()) return;
  Shape s;
  int64_t elements = 1;  // of the static dims: must fit an int64, as every size computed from them does
  for (const auto& d : tt.shape().dim()) {
    if (d.has_dim_value()) {
      s.emplace_back(d.dim_value());
      if (d.dim_value() > 0 && __builtin_mul_overflow(elements, d.dim_value(), &elements))
        fail("{}declares dims whose element count overflows 64 bits (a dim of {}); fix the model's shape",
             name.empty() ? "a tensor type " : fmt::format("value '{}' ", name), d.dim_value());
    } else if (d.has_dim_param() && !d.dim_param().empty()) {
      s.emplace_back(d.dim_param());
    } else {
      s.emplace_back();
    }
  }
  t.shape = std::move(s);
}

// The element type of a sequence type: its tensors' element type (nullopt for a sequence of non-tensors).
std::optional<DType> sequence_elem(const onnx::TypeProto::Sequence& seq) {
  if (!seq.has_elem_type()) return DType::Undefined;
  if (!seq.elem_type().has_tensor_type()) return std::nullopt;
  return static_cast<DType>(seq.elem_type().tensor_type().elem_type());
}

}  // namespace

bool supported_type(const onnx::TypeProto& tp) {
  switch (tp.value_case()) {
    case onnx::TypeProto::kTensorType:
    case onnx::TypeProto::VALUE_NOT_SET:
      return true;
    case onnx::TypeProto::kSequenceType:
      return sequence_elem(tp.sequence_type()).has_value();
    case onnx::TypeProto::kOptionalType: {
      if (!tp.optional_type().has_elem_type()) return true;
      const onnx::TypeProto& e = tp.optional_type().elem_type();
      return e.has_tensor_type() || (e.has_sequence_type() && sequence_elem(e.sequence_type()).has_value());
    }
    default:
      return false;  // maps, sparse tensors
  }
}

TensorType type_from_proto(const onnx::TypeProto& tp, const std::string& name) {
  TensorType t;
  if (tp.has_tensor_type()) {
    tensor_type_from_proto(tp.tensor_type(), name, t);
  } else if (tp.has_sequence_type()) {
    t.kind = ValueKind::Sequence;
    t.dtype = sequence_elem(tp.sequence_type()).value_or(DType::Undefined);
  } else if (tp.has_optional_type() && tp.optional_type().has_elem_type()) {
    const onnx::TypeProto& e = tp.optional_type().elem_type();
    if (e.has_tensor_type()) {
      t.kind = ValueKind::Optional;
      t.dtype = static_cast<DType>(e.tensor_type().elem_type());
    } else if (e.has_sequence_type()) {
      t.kind = ValueKind::OptionalSequence;
      t.dtype = sequence_elem(e.sequence_type()).value_or(DType::Undefined);
    }
  }
  return t;
}

namespace {

Attribute attr_from_proto(const onnx::AttributeProto& a, const std::string& base_dir) {
  switch (a.type()) {
    case onnx::AttributeProto::FLOAT: return a.f();
    case onnx::AttributeProto::INT: return int64_t(a.i());
    case onnx::AttributeProto::STRING: return a.s();
    case onnx::AttributeProto::TENSOR: return tensor_from_proto(a.t(), base_dir);
    case onnx::AttributeProto::FLOATS: return std::vector<float>(a.floats().begin(), a.floats().end());
    case onnx::AttributeProto::INTS: return std::vector<int64_t>(a.ints().begin(), a.ints().end());
    case onnx::AttributeProto::STRINGS: return std::vector<std::string>(a.strings().begin(), a.strings().end());
    default: return OpaqueAttr{a.SerializeAsString()};
  }
}

using FunctionMap = std::map<std::string, const onnx::FunctionProto*>;

// With data propagation: ONNX then follows small shape computations (Shape -> Gather -> Concat -> Reshape), so a
// model exported with dynamic axes arrives with its reshapes' ranks and symbolic dims.
onnx::ShapeInferenceOptions shape_inference_options() { return onnx::ShapeInferenceOptions(false, 0, true); }

// ONNX's checker and shape inference write messages over several lines ("...\n\n==> Context: Bad node spec
// for node. Name: y OpType: Softmax"); an error of ours is one line.
std::string one_line(std::string_view message) {
  std::string out;
  bool space = false;
  for (char c : message) {
    if (c == '\n' || c == '\r' || c == '\t' || c == ' ') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

// ONNX's checker names a failing node by its name alone ("Bad node spec for node. Name:  OpType: Softmax"),
// and exporters often leave names empty: while it runs, an unnamed node is named by its first output, as our
// errors name it, and unnamed again after.
class NamedWhileChecked {
 public:
  explicit NamedWhileChecked(onnx::GraphProto& g) : g_(g) {
    for (int i = 0; i < g.node_size(); ++i) {
      onnx::NodeProto* n = g.mutable_node(i);
      if (!n->name().empty() || n->output_size() == 0) continue;
      n->set_name(n->output(0));
      named_.push_back(i);
    }
  }
  ~NamedWhileChecked() {
    for (int i : named_) g_.mutable_node(i)->clear_name();
  }
  NamedWhileChecked(const NamedWhileChecked&) = delete;
  NamedWhileChecked& operator=(const NamedWhileChecked&) = delete;

 private:
  onnx::GraphProto& g_;
  std::vector<int> named_;
};

// A gaf.fused call becomes a fused node again: its function's nodes are the body; Constant nodes in the body
// become body constants; body types come from the call site and ONNX shape inference (the driver's
// infer_fused_body_shapes fills in what they leave unknown).
void build_fused_body(Node& n, const onnx::FunctionProto& fp, const std::map<std::string, int64_t>& opsets,
                      const std::string& base_dir) {
  Model tmp;
  tmp.opsets = opsets;
  tmp.opsets.erase("gaf.fused");
  Graph& body = *tmp.graph;
  body.name = n.op_type;
  GAF_CHECK(fp.input_size() == n.num_inputs(), "{}: the call has {} inputs, function '{}' takes {}", n.describe(),
            n.num_inputs(), fp.name(), fp.input_size());
  for (int i = 0; i < fp.input_size(); ++i) body.add_input(fp.input(i), n.input(i) ? n.input(i)->type : TensorType{});
  for (const auto& np : fp.node()) {
    if (np.op_type() == "Constant" && np.domain().empty() && np.attribute_size() == 1 &&
        np.attribute(0).name() == "value") {
      body.add_constant(np.output(0), tensor_from_proto(np.attribute(0).t(), base_dir));
      continue;
    }
    std::vector<Value*> ins;
    for (const auto& name : np.input()) {
      Value* v = name.empty() ? nullptr : body.find_value(name);
      GAF_CHECK(name.empty() || v, "function '{}': '{}' is used before it is defined", fp.name(), name);
      ins.push_back(v);
    }
    std::vector<std::string> outs(np.output().begin(), np.output().end());
    Node* b = body.add_node(np.op_type(), ins, outs, np.name());
    b->domain = np.domain() == "ai.onnx" ? "" : np.domain();
    auto it = tmp.opsets.find(b->domain);
    b->opset = it == tmp.opsets.end() ? 0 : int(it->second);
    for (const auto& a : np.attribute()) b->attrs[a.name()] = attr_from_proto(a, base_dir);
  }
  for (const auto& name : fp.output()) {
    Value* v = body.find_value(name);
    GAF_CHECK(v, "function '{}': output '{}' is never defined", fp.name(), name);
    body.add_output(v);
  }
  infer_types(tmp);
  // ONNX infers a body from its inputs alone; where that leaves an output's shape less known than the call
  // site's (a Reshape whose target the caller computed from a symbolic shape), the call site's type is right.
  for (int i = 0; i < int(body.outputs().size()) && i < n.num_outputs(); ++i) {
    const TensorType& outer = n.output(i)->type;
    TensorType& inner = body.outputs()[size_t(i)]->type;
    auto known_dims = [](const TensorType& t) {
      return t.shape ? 1 + std::count_if(t.shape->begin(), t.shape->end(), [](const Dim& d) { return d.is_known(); })
                     : 0;
    };
    if (outer.dtype == inner.dtype && known_dims(outer) > known_dims(inner)) inner.shape = outer.shape;
  }
  n.body = std::move(tmp.graph);
}

// The names a graph reads that neither it nor the subgraph reading them defines: values of enclosing graphs
// (outer-scope references), in the order of first use.
std::vector<std::string> outer_references(const onnx::GraphProto& gp) {
  std::set<std::string> defined, seen;
  std::vector<std::string> out;
  auto use = [&](const std::string& name) {
    if (!name.empty() && !defined.count(name) && seen.insert(name).second) out.push_back(name);
  };
  for (const auto& vi : gp.input()) defined.insert(vi.name());
  for (const auto& t : gp.initializer()) defined.insert(t.name());
  for (const auto& t : gp.sparse_initializer()) defined.insert(t.values().name());
  for (const auto& np : gp.node()) {
    for (const auto& name : np.input()) use(name);
    for (const auto& a : np.attribute()) {
      if (a.has_g())
        for (const auto& name : outer_references(a.g())) use(name);
      for (const auto& sub : a.graphs())
        for (const auto& name : outer_references(sub)) use(name);
    }
    for (const auto& name : np.output()) defined.insert(name);
  }
  for (const auto& vi : gp.output()) use(vi.name());
  return out;
}

void convert_graph(const onnx::GraphProto& gp, Graph& g, const std::map<std::string, int64_t>& opsets,
                   const std::string& base_dir, const FunctionMap& fused_functions,
                   std::map<std::string, Tensor>* converted, const std::vector<Value*>& captures = {});

// Node n's subgraph attributes (If's branches, Loop's and Scan's body) become GraphAttrs whose captures are
// the values of g they read; those values become n's implicit inputs.
void convert_subgraphs(const onnx::NodeProto& np, Node& n, Graph& g,
                       const std::map<std::string, int64_t>& opsets, const std::string& base_dir,
                       const FunctionMap& fused_functions) {
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (const auto& a : np.attribute()) {
    if (a.type() != onnx::AttributeProto::GRAPH) continue;
    for (const auto& name : outer_references(a.g()))
      if (seen.insert(name).second) names.push_back(name);
  }
  std::vector<Value*> captures;
  for (const auto& name : names) {
    Value* v = g.find_value(name);
    GAF_CHECK(v, "{}: its subgraph reads '{}', which no enclosing graph defines before the node",
              n.describe(), name);
    captures.push_back(v);
  }
  for (const auto& a : np.attribute()) {
    if (a.type() != onnx::AttributeProto::GRAPH) continue;
    auto sub = std::make_shared<Graph>();
    try {
      convert_graph(a.g(), *sub, opsets, base_dir, fused_functions, nullptr, captures);
    } catch (const UnsupportedError& e) {
      unsupported("{}, subgraph '{}': {}", n.describe(), a.name(), e.what());
    } catch (const Error& e) {
      fail("{}, subgraph '{}': {}", n.describe(), a.name(), e.what());
    }
    n.attrs[a.name()] = GraphAttr{std::move(sub)};
  }
  for (Value* v : captures) n.add_input(v);
  n.implicit_inputs = int(captures.size());
}

void convert_graph(const onnx::GraphProto& gp, Graph& g, const std::map<std::string, int64_t>& opsets,
                   const std::string& base_dir, const FunctionMap& fused_functions,
                   std::map<std::string, Tensor>* converted, const std::vector<Value*>& captures) {
  // An initializer's tensor: converted already (and taken), or read from its proto.
  auto tensor_of = [&](const onnx::TensorProto& t) {
    if (converted) {
      auto it = converted->find(t.name());
      if (it != converted->end()) {
        Tensor r = std::move(it->second);
        converted->erase(it);
        return r;
      }
    }
    return tensor_from_proto(t, base_dir);
  };
  g.name = gp.name();
  g.doc_string = gp.doc_string();
  std::map<std::string, const onnx::TensorProto*> inits;
  for (const auto& t : gp.initializer()) {
    GAF_CHECK(!t.name().empty(), "graph '{}': an initializer has no name", gp.name());
    inits[t.name()] = &t;
  }
  GAF_CHECK(gp.sparse_initializer_size() == 0, "graph '{}': sparse initializers are not supported", gp.name());
  std::set<std::string> input_names;
  for (const auto& vi : gp.input()) {
    input_names.insert(vi.name());
    if (vi.has_type() && !supported_type(vi.type()))
      unsupported(
          "graph '{}': input '{}' is a map, a sparse tensor or a sequence of non-tensors; only tensors, "
          "sequences of tensors and optionals of those are supported",
          gp.name(), vi.name());
    Value* v;
    if (inits.count(vi.name())) {
      v = g.add_constant(vi.name(), tensor_of(*inits[vi.name()]));
      v->type = type_from_proto(vi.type(), vi.name());
      g.mark_input(v);
    } else {
      v = g.add_input(vi.name(), type_from_proto(vi.type(), vi.name()));
    }
    v->doc_string = vi.doc_string();
  }
  for (const auto& t : gp.initializer())
    if (!input_names.count(t.name())) g.add_constant(t.name(), tensor_of(t));
  for (const Value* c : captures) g.add_input(c->name(), c->type);  // a subgraph's captures

  for (int ni = 0; ni < gp.node_size(); ++ni) {
    const auto& np = gp.node(ni);
    std::vector<Value*> ins;
    for (const auto& name : np.input()) {
      if (name.empty()) {
        ins.push_back(nullptr);
        continue;
      }
      Value* v = g.find_value(name);
      GAF_CHECK(v, "node '{}' ({}): input '{}' is not defined before it (the graph must be topologically sorted)",
                np.name(), np.op_type(), name);
      ins.push_back(v);
    }
    std::vector<std::string> outs;
    std::vector<bool> absent;
    for (int k = 0; k < np.output_size(); ++k) {
      const std::string& name = np.output(k);
      absent.push_back(name.empty());
      outs.push_back(name.empty() ? g.unique_name(fmt::format("{}_{}_absent{}", np.op_type(), ni, k)) : name);
    }
    Node* n = g.add_node(np.op_type(), ins, outs, np.name());
    n->domain = np.domain() == "ai.onnx" ? "" : np.domain();
    n->doc_string = np.doc_string();
    auto it = opsets.find(n->domain);
    n->opset = it == opsets.end() ? 0 : int(it->second);
    for (int k = 0; k < n->num_outputs(); ++k) n->output(k)->absent_output = absent[k];
    for (const auto& a : np.attribute())
      if (a.type() != onnx::AttributeProto::GRAPH) n->attrs[a.name()] = attr_from_proto(a, base_dir);
    convert_subgraphs(np, *n, g, opsets, base_dir, fused_functions);
  }
  for (const auto& vi : gp.value_info()) {
    if (Value* v = g.find_value(vi.name())) {
      v->type = type_from_proto(vi.type(), vi.name());
      v->doc_string = vi.doc_string();
    }
  }
  for (Node* n : g.nodes()) {
    if (n->domain != "gaf.fused") continue;
    auto it = fused_functions.find(n->op_type);
    GAF_CHECK(it != fused_functions.end(), "{}: no model-local function '{}' in domain gaf.fused", n->describe(),
              n->op_type);
    build_fused_body(*n, *it->second, opsets, base_dir);
  }
  for (const auto& vi : gp.output()) {
    Value* v = g.find_value(vi.name());
    GAF_CHECK(v, "graph '{}': output '{}' is not produced by any node", gp.name(), vi.name());
    if (vi.has_type() && !supported_type(vi.type()))
      unsupported(
          "graph '{}': output '{}' is a map, a sparse tensor or a sequence of non-tensors; only tensors, "
          "sequences of tensors and optionals of those are supported",
          gp.name(), vi.name());
    TensorType t = type_from_proto(vi.type(), vi.name());
    if (t.dtype != DType::Undefined || !t.is_tensor()) v->type = t;
    g.add_output(v);
  }
}

// The newest opset of `domain` whose ops the frontend and runtime give their meaning; -1 for a domain of no limit
// we know. The default domain goes past ONNX 1.12's schemas (17): the kernels follow the ops that changed in 18-20
// (Reduce* and Pad axes as inputs, Split's num_outputs, ScatterElements' max/min, GridSample's modes), and shape
// inference falls back to the newest schema it has. Beyond that an op could mean something we do not do.
int64_t newest_opset(const std::string& domain) {
  if (domain.empty()) return 20;
  const auto& ranges = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto it = ranges.find(domain);
  return it == ranges.end() ? -1 : it->second.second;
}

// Every tensor a graph holds, subgraphs included, has its external data inside the model's folder: checked
// before the ONNX checker, which would otherwise look for files wherever a location points. Returns whether any
// tensor has external data.
bool check_external_locations(const onnx::GraphProto& g, const std::string& base_dir);

bool external(const onnx::TensorProto& t, const std::string& base_dir) {
  check_external_data(t, base_dir);
  return t.data_location() == onnx::TensorProto::EXTERNAL;
}

bool check_external_locations(const google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes,
                              const std::string& base_dir) {
  bool any = false;
  for (const auto& n : nodes)
    for (const auto& a : n.attribute()) {
      if (a.has_t()) any |= external(a.t(), base_dir);
      for (const auto& t : a.tensors()) any |= external(t, base_dir);
      if (a.has_g()) any |= check_external_locations(a.g(), base_dir);
      for (const auto& sub : a.graphs()) any |= check_external_locations(sub, base_dir);
    }
  return any;
}

bool check_external_locations(const onnx::GraphProto& g, const std::string& base_dir) {
  bool any = false;
  for (const auto& t : g.initializer()) any |= external(t, base_dir);
  for (const auto& s : g.sparse_initializer()) any |= external(s.values(), base_dir) | external(s.indices(), base_dir);
  return check_external_locations(g.node(), base_dir) || any;
}

}  // namespace

Model import_model(onnx::ModelProto proto, const std::string& base_dir, const ImportOptions& opts) {
  register_gaf_schemas();
  GAF_CHECK(proto.has_graph(), "the model has no graph: is this an ONNX model file?");
  bool has_external = check_external_locations(proto.graph(), base_dir);
  for (const auto& o : proto.opset_import()) {
    std::string domain = o.domain() == "ai.onnx" ? "" : o.domain();
    int64_t newest = newest_opset(domain);
    GAF_CHECK(newest < 0 || o.version() <= newest,
              "the model imports opset {} of domain '{}'; the newest this build supports is {}: export it again "
              "with opset {} or lower",
              o.version(), domain.empty() ? "ai.onnx" : domain, newest, newest);
  }
  for (const auto& f : proto.functions()) has_external |= check_external_locations(f.node(), base_dir);
  if (opts.check) {
    try {
      // The path form resolves external data beside the file (in-memory models have none); it reads the file
      // again, so a model without external data is checked as it is in memory.
      if (opts.source_path.empty() || !has_external) {
        NamedWhileChecked named(*proto.mutable_graph());
        onnx::checker::check_model(proto);
      } else {
        onnx::checker::check_model(opts.source_path);
      }
    } catch (const std::exception& e) {
      fail("the ONNX checker rejected the model: {}", one_line(e.what()));
    }
  }
  if (opts.infer_shapes) {
    try {
      onnx::shape_inference::InferShapes(proto, schema_registry(), shape_inference_options());
    } catch (const std::exception& e) {
      fail("ONNX shape inference failed: {}", one_line(e.what()));
    }
  }
  Model m;
  m.ir_version = proto.ir_version();
  m.opsets.clear();
  for (const auto& o : proto.opset_import()) m.opsets[o.domain() == "ai.onnx" ? "" : o.domain()] = o.version();
  m.producer_name = proto.producer_name();
  m.producer_version = proto.producer_version();
  m.domain = proto.domain();
  m.model_version = proto.model_version();
  m.doc_string = proto.doc_string();
  for (const auto& kv : proto.metadata_props()) m.metadata.emplace_back(kv.key(), kv.value());
  FunctionMap fused;
  for (const auto& f : proto.functions()) {
    if (f.domain() == "gaf.fused") fused[f.name()] = &f;  // rebuilt as fused bodies; export writes them again
    else m.functions.push_back(f.SerializeAsString());
  }
  // The top-level initializers become tensors one by one, each proto's copy released once converted: the model
  // is held once, not twice (a 170 MB decoder peaked at 3x its size while loading).
  std::map<std::string, Tensor> tensors;
  for (auto& t : *proto.mutable_graph()->mutable_initializer()) {
    GAF_CHECK(!t.name().empty(), "graph '{}': an initializer has no name", proto.graph().name());
    tensors.insert_or_assign(t.name(), tensor_from_proto(t, base_dir));
    onnx::TensorProto header;  // name, type and dims only; clearing the fields would keep their memory
    header.set_name(t.name());
    header.set_data_type(t.data_type());
    *header.mutable_dims() = t.dims();
    t.Swap(&header);
  }
  convert_graph(proto.graph(), *m.graph, m.opsets, base_dir, fused, &tensors);
  return m;
}

Model load_model(const std::string& path, const ImportOptions& opts) {
  std::error_code ec;
  GAF_CHECK(!std::filesystem::is_directory(path, ec), "cannot open model '{}': it is a folder, not a model file",
            path);
  GAF_CHECK(std::filesystem::is_regular_file(path, ec), "cannot open model '{}': no such file", path);
  std::ifstream f(path, std::ios::binary);
  GAF_CHECK(f, "cannot open model '{}': permission denied?", path);
  onnx::ModelProto proto;
  GAF_CHECK(proto.ParseFromIstream(&f),
            "'{}' is not a valid ONNX model: the protobuf could not be parsed (truncated or not ONNX)", path);
  GAF_CHECK(proto.has_graph() && proto.opset_import_size() > 0,
            "'{}' is not a valid ONNX model: it has no graph or no opset_import", path);
  std::string dir = folder_of(path);
  ImportOptions with_path = opts;
  with_path.source_path = path;
  try {
    return import_model(std::move(proto), dir, with_path);
  } catch (const UnsupportedError&) {
    throw;
  } catch (const Error& e) {
    fail("{}: {}", path, e.what());
  }
}

Model parse_model_text(const std::string& text, const ImportOptions& opts) {
  onnx::ModelProto proto;
  // ONNX's parser reports most errors in its status, but a malformed number (`axes = [-?]`) escapes from its
  // std::stol as an exception (found by the onnx_text fuzz target).
  onnx::Common::Status status;
  try {
    status = onnx::OnnxParser::Parse(proto, text.c_str());
  } catch (const std::exception& e) {
    fail("cannot parse ONNX text: {} (a malformed number or token?)", e.what());
  }
  GAF_CHECK(status.IsOK(), "cannot parse ONNX text: {}", status.ErrorMessage());
  return import_model(std::move(proto), "", opts);
}

}  // namespace gaf::onnx_io

namespace gaf {

void infer_types(Model& model) {
  onnx_io::register_gaf_schemas();
  onnx::ModelProto proto = onnx_io::export_model(model);
  try {
    onnx::shape_inference::InferShapes(proto, onnx_io::schema_registry(), onnx_io::shape_inference_options());
  } catch (const std::exception& e) {
    fail("ONNX shape inference failed: {}", e.what());
  }
  auto apply = [&](const onnx::ValueInfoProto& vi) {
    Value* v = model.graph->find_value(vi.name());
    if (!v) return;
    TensorType t = onnx_io::type_from_proto(vi.type());
    if (t.dtype != DType::Undefined || !t.is_tensor()) v->type = std::move(t);
  };
  for (const auto& vi : proto.graph().value_info()) apply(vi);
  for (const auto& vi : proto.graph().output()) apply(vi);
}

}  // namespace gaf
