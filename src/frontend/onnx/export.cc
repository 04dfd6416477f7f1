// gaf::Model -> ModelProto. Every value with a known type gets a value_info so shapes survive the trip.
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "frontend/onnx/gaf_schemas.h"
#include "gaf/onnx_io.h"

namespace gaf::onnx_io {

void type_to_proto(const TensorType& t, onnx::TypeProto& tp) {
  switch (t.kind) {
    case ValueKind::Tensor:
      break;
    case ValueKind::Sequence:
      tp.mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(int32_t(t.dtype));
      return;
    case ValueKind::Optional:
      tp.mutable_optional_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(int32_t(t.dtype));
      return;
    case ValueKind::OptionalSequence:
      tp.mutable_optional_type()
          ->mutable_elem_type()
          ->mutable_sequence_type()
          ->mutable_elem_type()
          ->mutable_tensor_type()
          ->set_elem_type(int32_t(t.dtype));
      return;
  }
  auto* tt = tp.mutable_tensor_type();
  tt->set_elem_type(static_cast<int32_t>(t.dtype));
  if (!t.shape) return;
  auto* sp = tt->mutable_shape();
  for (const Dim& d : *t.shape) {
    auto* dp = sp->add_dim();
    if (d.is_static()) dp->set_dim_value(d.value());
    else if (d.is_symbol()) dp->set_dim_param(d.symbol());
  }
}

namespace {

// The name a value is written under: its own, or, for a subgraph's capture, the name of the enclosing graph's
// value it stands for (an outer-scope reference).
using NameOf = std::function<std::string(const Value*)>;

std::string own_name(const Value* v) { return v->name(); }

void value_info(const Value* v, onnx::ValueInfoProto& vi, const NameOf& name_of = own_name) {
  vi.set_name(name_of(v));
  if (!v->doc_string.empty()) vi.set_doc_string(v->doc_string);
  if (v->type.dtype != DType::Undefined || !v->type.is_tensor()) type_to_proto(v->type, *vi.mutable_type());
}

void graph_proto(const Graph& g, onnx::GraphProto& gp, const NameOf& name_of, int formal_inputs);

// Subgraph `sub` of node n as ONNX writes it: its captures are no inputs but references to the values of the
// enclosing graph that are n's implicit inputs.
void subgraph_to_proto(const Node& n, const Graph& sub, const NameOf& outer, onnx::GraphProto& gp) {
  const int formal = int(sub.inputs().size()) - n.implicit_inputs;
  GAF_ASSERT(formal >= 0, "a subgraph with fewer inputs than its node's captures");
  std::map<const Value*, std::string> captured;
  for (int k = 0; k < n.implicit_inputs; ++k)
    captured[sub.inputs()[size_t(formal + k)]] = outer(n.input(n.num_explicit_inputs() + k));
  graph_proto(
      sub, gp,
      [&](const Value* v) {
        auto it = captured.find(v);
        return it == captured.end() ? v->name() : it->second;
      },
      formal);
}

void attr_to_proto(const Node& n, const std::string& name, const Attribute& a, onnx::AttributeProto& ap,
                   const NameOf& name_of) {
  if (const auto* o = std::get_if<OpaqueAttr>(&a)) {
    GAF_ASSERT(ap.ParseFromString(o->proto), "opaque attribute does not parse");
    return;
  }
  ap.set_name(name);
  if (const auto* sub = std::get_if<GraphAttr>(&a)) {
    ap.set_type(onnx::AttributeProto::GRAPH);
    subgraph_to_proto(n, *sub->graph, name_of, *ap.mutable_g());
    return;
  }
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          ap.set_type(onnx::AttributeProto::INT);
          ap.set_i(v);
        } else if constexpr (std::is_same_v<T, float>) {
          ap.set_type(onnx::AttributeProto::FLOAT);
          ap.set_f(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          ap.set_type(onnx::AttributeProto::STRING);
          ap.set_s(v);
        } else if constexpr (std::is_same_v<T, Tensor>) {
          ap.set_type(onnx::AttributeProto::TENSOR);
          tensor_to_proto(v, *ap.mutable_t());
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          ap.set_type(onnx::AttributeProto::INTS);
          for (auto x : v) ap.add_ints(x);
        } else if constexpr (std::is_same_v<T, std::vector<float>>) {
          ap.set_type(onnx::AttributeProto::FLOATS);
          for (auto x : v) ap.add_floats(x);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          ap.set_type(onnx::AttributeProto::STRINGS);
          for (const auto& x : v) ap.add_strings(x);
        }
      },
      a);
}

}  // namespace

namespace {

void node_proto(const Node& n, onnx::NodeProto& np, const NameOf& name_of) {
  np.set_op_type(n.op_type);
  if (!n.name.empty()) np.set_name(n.name);
  if (!n.domain.empty()) np.set_domain(n.domain);
  if (!n.doc_string.empty()) np.set_doc_string(n.doc_string);
  for (int i = 0; i < n.num_explicit_inputs(); ++i) np.add_input(n.input(i) ? name_of(n.input(i)) : "");
  for (const Value* v : n.outputs()) np.add_output(v->absent_output ? "" : name_of(v));
  for (const auto& [k, a] : n.attrs) attr_to_proto(n, k, a, *np.add_attribute(), name_of);
}

}  // namespace

void node_to_proto(const Node& n, onnx::NodeProto& np) { node_proto(n, np, own_name); }

namespace {

// Node names must be unique within a graph or function body (ONNX Runtime refuses a model otherwise, also after
// inlining a function); our rewrites name nodes after values, so two can share a name. A repeated name gets the
// first free suffix _1, _2, ... (free among all the names there); an empty name stays empty.
template <class Nodes>
void unique_node_names(Nodes& nodes) {
  std::set<std::string> all, seen;
  for (const auto& np : nodes) all.insert(np.name());
  for (auto& np : nodes) {
    if (np.name().empty()) continue;
    if (seen.insert(np.name()).second) continue;
    for (int k = 1;; ++k) {
      std::string candidate = np.name() + "_" + std::to_string(k);
      if (!all.count(candidate)) {
        all.insert(candidate);
        seen.insert(candidate);
        np.set_name(candidate);
        break;
      }
    }
  }
}

// Graph nodes plus, for each body initializer, a Constant node (functions have no initializers).
template <class Proto>
void body_nodes_to_proto(const Graph& body, Proto& fp) {
  for (const Value* c : body.initializers()) {
    auto* np = fp.add_node();
    np->set_op_type("Constant");
    np->add_output(c->name());
    auto* a = np->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    tensor_to_proto(c->constant(), *a->mutable_t());
  }
  for (const Node* n : body.nodes()) node_to_proto(*n, *fp.add_node());
  unique_node_names(*fp.mutable_node());
}

// A fused node's body as a model-local function named after the node's op type, in domain gaf.fused.
void fused_function(const Node& n, const Model& m, onnx::FunctionProto& fp) {
  fp.set_name(n.op_type);
  fp.set_domain(n.domain);
  fp.set_doc_string("graph-autofusion fused group");
  for (const Value* v : n.body->inputs()) fp.add_input(v->name());
  for (const Value* v : n.body->outputs()) fp.add_output(v->name());
  body_nodes_to_proto(*n.body, fp);
  for (const auto& [domain, version] : m.opsets) {
    if (domain == n.domain) continue;
    auto* o = fp.add_opset_import();
    o->set_domain(domain);
    o->set_version(version);
  }
}

// g's first `formal_inputs` inputs become the GraphProto's inputs (the rest are captures, written as
// references).
void graph_proto(const Graph& g, onnx::GraphProto& gp, const NameOf& name_of, int formal_inputs) {
  gp.set_name(g.name.empty() ? "main" : g.name);
  if (!g.doc_string.empty()) gp.set_doc_string(g.doc_string);
  std::set<const Value*> listed;
  for (int i = 0; i < int(g.inputs().size()); ++i) {
    const Value* v = g.inputs()[size_t(i)];
    if (i < formal_inputs) value_info(v, *gp.add_input(), name_of);
    listed.insert(v);
  }
  for (const Value* v : g.initializers()) {
    auto* tp = gp.add_initializer();
    tensor_to_proto(v->constant(), *tp);
    tp->set_name(name_of(v));
    listed.insert(v);
  }
  for (const Node* n : g.nodes()) node_proto(*n, *gp.add_node(), name_of);
  unique_node_names(*gp.mutable_node());
  for (const Value* v : g.outputs()) {
    value_info(v, *gp.add_output(), name_of);
    listed.insert(v);
  }
  for (const Node* n : g.nodes())
    for (const Value* v : n->outputs())
      if (!listed.count(v) && !v->absent_output &&
          (v->type.dtype != DType::Undefined || !v->type.is_tensor()))
        value_info(v, *gp.add_value_info(), name_of);
}

}  // namespace

void graph_to_proto(const Graph& g, onnx::GraphProto& gp) {
  graph_proto(g, gp, own_name, int(g.inputs().size()));
}

onnx::ModelProto export_model(const Model& m) {
  onnx::ModelProto p;
  p.set_ir_version(m.ir_version);
  for (const auto& [domain, version] : m.opsets) {
    auto* o = p.add_opset_import();
    o->set_domain(domain);
    o->set_version(version);
  }
  p.set_producer_name(m.producer_name.empty() ? "graph-autofusion" : m.producer_name);
  if (!m.producer_version.empty()) p.set_producer_version(m.producer_version);
  if (!m.domain.empty()) p.set_domain(m.domain);
  if (m.model_version) p.set_model_version(m.model_version);
  if (!m.doc_string.empty()) p.set_doc_string(m.doc_string);
  for (const auto& [k, v] : m.metadata) {
    auto* e = p.add_metadata_props();
    e->set_key(k);
    e->set_value(v);
  }
  for (const auto& f : m.functions) GAF_ASSERT(p.add_functions()->ParseFromString(f), "function does not parse");
  graph_to_proto(*m.graph, *p.mutable_graph());
  if (m.ir_version < 4) {
    // Before IR version 4 every initializer must also be a graph input (passes may have added initializers).
    std::set<std::string> inputs;
    for (const auto& vi : p.graph().input()) inputs.insert(vi.name());
    for (const Value* v : m.graph->initializers())
      if (!inputs.count(v->name())) value_info(v, *p.mutable_graph()->add_input());
  }
  bool fused = false;  // the fused nodes of the graph and of its subgraphs, at any depth
  for (const Graph* g : graph_and_subgraphs(*m.graph))
    for (const Node* n : g->nodes()) {
      if (!n->body) continue;
      fused_function(*n, m, *p.add_functions());
      fused = true;
    }
  if (fused && !m.opsets.count("gaf.fused")) {
    auto* o = p.add_opset_import();
    o->set_domain("gaf.fused");
    o->set_version(1);
  }
  // Our own op domain (rewrite results) needs an opset import too, wherever its ops appear.
  std::function<bool(const Graph&)> uses_gaf = [&](const Graph& g) {
    for (const Node* n : g.nodes()) {
      if (n->domain == "gaf" || (n->body && uses_gaf(*n->body))) return true;
      for (const auto& [attr, sub] : n->subgraphs())
        if (uses_gaf(*sub)) return true;
    }
    return false;
  };
  if (!m.opsets.count("gaf") && uses_gaf(*m.graph)) {
    auto* o = p.add_opset_import();
    o->set_domain("gaf");
    o->set_version(1);
    for (auto& f : *p.mutable_functions()) {
      bool needs = false, has = false;
      for (const auto& n : f.node()) needs |= n.domain() == "gaf";
      for (const auto& op : f.opset_import()) has |= op.domain() == "gaf";
      if (needs && !has) {
        auto* fo = f.add_opset_import();
        fo->set_domain("gaf");
        fo->set_version(1);
      }
    }
  }
  return p;
}

void check_model(const Model& m) {
  register_gaf_schemas();
  try {
    onnx::checker::check_model(export_model(m));
  } catch (const std::exception& e) {
    fail("the exported model fails the ONNX checker: {}", e.what());
  }
}

std::string serialize_model(const Model& m) {
  return std::move(serialize_model_files(m, "model.onnx", ExternalData::Never).front().second);
}

std::vector<std::pair<std::string, std::string>> serialize_model_files(const Model& m, const std::string& path,
                                                                       ExternalData external) {
  onnx::ModelProto p = export_model(m);
  size_t weights = 0;
  for (const auto& t : p.graph().initializer()) weights += t.raw_data().size();
  const bool split = external == ExternalData::Always || (external == ExternalData::Auto && weights > kAutoExternalBytes);
  std::vector<std::pair<std::string, std::string>> files;
  if (!split) {
    std::string bytes;
    GAF_CHECK(p.SerializeToString(&bytes),
              "cannot serialise the model: its weights pass the 2 GB a protobuf file holds; write it with external "
              "data (fuse --external-data, or save_model with ExternalData::Always)");
    files.emplace_back(path, std::move(bytes));
    return files;
  }
  // Each initializer's bytes move from the proto into the data file one by one (the proto's copy released as it
  // goes), so the weights are held twice at most, not three times.
  const std::string data_name = std::filesystem::path(path).filename().string() + ".data";
  auto aligned = [](size_t at, size_t length) {
    const size_t align = length >= (size_t(1) << 20) ? 4096 : 64;
    return (at + align - 1) / align * align;
  };
  size_t total = 0;  // reserved up front: a string that doubled as it grew would hold the weights once more
  for (const auto& t : p.graph().initializer())
    if (t.has_raw_data() && t.raw_data().size() >= kExternalMinBytes)
      total = aligned(total, t.raw_data().size()) + t.raw_data().size();
  std::string data;
  data.reserve(total);
  for (auto& t : *p.mutable_graph()->mutable_initializer()) {
    if (!t.has_raw_data() || t.raw_data().size() < kExternalMinBytes) continue;
    data.resize(aligned(data.size(), t.raw_data().size()), '\0');
    const size_t offset = data.size(), length = t.raw_data().size();
    data += t.raw_data();
    std::string().swap(*t.mutable_raw_data());
    t.clear_raw_data();
    t.set_data_location(onnx::TensorProto::EXTERNAL);
    t.clear_external_data();
    auto entry = [&](const char* key, const std::string& value) {
      auto* e = t.add_external_data();
      e->set_key(key);
      e->set_value(value);
    };
    entry("location", data_name);
    entry("offset", std::to_string(offset));
    entry("length", std::to_string(length));
  }
  std::string bytes;
  GAF_CHECK(p.SerializeToString(&bytes), "cannot serialise the model's graph (over 2 GB without its weights?)");
  // The data file first: renamed before the model, a reader never pairs the new model with old data.
  files.emplace_back((std::filesystem::path(folder_of(path)) / data_name).string(), std::move(data));
  files.emplace_back(path, std::move(bytes));
  return files;
}

void save_model(const Model& m, const std::string& path, ExternalData external) {
  write_files_atomic(serialize_model_files(m, path, external));
}

}  // namespace gaf::onnx_io
