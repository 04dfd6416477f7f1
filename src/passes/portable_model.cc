// The model other runtimes read (PortableModel): our gaf-domain ops decomposed into standard ONNX. The copy is
// made through the ONNX frontend (export, then import without checks or inference), as a model read back.
#include <onnx/onnx_pb.h>

#include <functional>

#include "gaf/onnx_io.h"
#include "gaf/passes.h"

namespace gaf {

PortableModel::PortableModel(const Model& m) : model_(m) {
  bool custom = false;
  std::function<void(const Graph&)> scan = [&](const Graph& g) {
    for (const Node* n : g.nodes()) {
      custom |= n->domain == "gaf";
      if (n->body) scan(*n->body);
    }
  };
  for (const Graph* g : graph_and_subgraphs(*m.graph)) scan(*g);
  if (!custom) return;
  Model copy = onnx_io::import_model(onnx_io::export_model(m), "", onnx_io::ImportOptions{false, false, ""});
  infer_fused_body_shapes(*copy.graph);
  auto it = copy.opsets.find("");
  decompose_gaf_ops(*copy.graph, it == copy.opsets.end() ? 13 : int(it->second));
  PassContext ctx;  // the decomposed ops' values get their shapes, like every other value of the written model
  for (Graph* g : graph_and_subgraphs(*copy.graph)) make_shape_inference()->run(*g, ctx);
  copy.opsets.erase("gaf");
  copy_ = std::move(copy);
}

}  // namespace gaf
