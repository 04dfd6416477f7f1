#include <map>
#include <sstream>

#include "gaf/tools.h"

namespace gaf::tools {

std::string model_info(const Model& model) {
  const Graph& g = *model.graph;
  std::ostringstream os;
  os << "graph '" << g.name << "'";
  for (const auto& [domain, version] : model.opsets) os << ", opset " << (domain.empty() ? "ai.onnx" : domain) << ":" << version;
  os << "\n";
  int64_t params = 0;
  size_t param_bytes = 0;
  for (const Value* v : g.initializers()) {
    params += v->constant().numel();
    param_bytes += v->constant().nbytes();
  }
  os << fmt::format("nodes: {}, initializers: {}, parameters: {} ({:.2f} MB)\n", g.num_nodes(),
                    g.initializers().size(), params, param_bytes / 1e6);
  os << "inputs:\n";
  for (const Value* v : g.inputs())
    if (!v->is_constant()) os << "  " << v->name() << " : " << v->type.to_string() << "\n";
  os << "outputs:\n";
  for (const Value* v : g.outputs()) os << "  " << v->name() << " : " << v->type.to_string() << "\n";
  std::map<std::string, int> hist;
  for (const Node* n : g.nodes()) hist[(n->domain.empty() ? "" : n->domain + ".") + n->op_type]++;
  std::vector<std::pair<std::string, int>> sorted(hist.begin(), hist.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  os << "op histogram:\n";
  for (const auto& [op, count] : sorted) os << fmt::format("  {:<28} {:>5}\n", op, count);
  return os.str();
}

}  // namespace gaf::tools
