// Text and DOT dumps of a Graph.
#include <sstream>

#include "gaf/graph.h"

namespace gaf {

namespace {

std::string attr_to_string(const Attribute& a) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, float>) {
          return fmt::format("{}", v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          return fmt::format("\"{}\"", v);
        } else if constexpr (std::is_same_v<T, Tensor>) {
          return v.to_string(8);
        } else if constexpr (std::is_same_v<T, OpaqueAttr>) {
          return "<opaque>";
        } else if constexpr (std::is_same_v<T, GraphAttr>) {
          return "<graph>";
        } else {
          return fmt::format("[{}]", fmt::join(v, ","));
        }
      },
      a);
}

void print_graph(const Graph& g, std::ostream& os, const std::string& indent) {
  os << indent << "graph " << (g.name.empty() ? "main" : g.name) << " (";
  bool first = true;
  for (const Value* v : g.inputs()) {
    os << (first ? "" : ", ") << v->type.to_string() << " %" << v->name();
    first = false;
  }
  os << ") {\n";
  for (const Value* v : g.initializers())
    os << indent << "  const %" << v->name() << " : " << v->type.to_string() << "\n";
  for (const Node* n : g.nodes()) {
    os << indent << "  ";
    for (int i = 0; i < n->num_outputs(); ++i)
      os << (i ? ", " : "") << "%" << n->output(i)->name() << " : " << n->output(i)->type.to_string();
    os << " = " << (n->domain.empty() ? "" : n->domain + ".") << n->op_type;
    if (!n->attrs.empty()) {
      os << "<";
      bool f = true;
      for (const auto& [k, a] : n->attrs) {
        os << (f ? "" : ", ") << k << "=" << attr_to_string(a);
        f = false;
      }
      os << ">";
    }
    os << "(";
    for (int i = 0; i < n->num_inputs(); ++i)
      os << (i ? ", " : "") << (n->input(i) ? "%" + n->input(i)->name() : std::string("<none>"));
    os << ")";
    if (!n->name.empty()) os << "  # " << n->name;
    os << "\n";
    if (n->body) print_graph(*n->body, os, indent + "    ");
    for (const auto& [attr, sub] : n->subgraphs()) {
      os << indent << "    " << attr << ":\n";
      print_graph(*sub, os, indent + "    ");
    }
  }
  os << indent << "  return ";
  first = true;
  for (const Value* v : g.outputs()) {
    os << (first ? "" : ", ") << "%" << v->name();
    first = false;
  }
  os << "\n" << indent << "}\n";
}

std::string dot_escape(const std::string& s) {
  std::string r;
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    r += c;
  }
  return r;
}

}  // namespace

std::string Graph::to_string() const {
  std::ostringstream os;
  print_graph(*this, os, "");
  return os.str();
}

std::string Graph::to_dot() const {
  std::ostringstream os;
  os << "digraph \"" << dot_escape(name) << "\" {\n  rankdir=TB;\n  node [shape=box, fontsize=10];\n";
  std::map<const Value*, std::string> source;  // value -> dot node id that produces it
  int id = 0;
  for (const Value* v : inputs()) {
    std::string nid = fmt::format("in{}", id++);
    os << "  " << nid << " [shape=ellipse, label=\"" << dot_escape(v->name()) << "\\n" << v->type.to_string()
       << "\"];\n";
    source[v] = nid;
  }
  int cluster = 0;
  for (const Node* n : nodes()) {
    std::string nid = fmt::format("n{}", id++);
    if (n->body) {
      // A fused node: its body's ops drawn inside a cluster; edges attach to the cluster's label node.
      os << "  subgraph cluster_" << cluster++ << " {\n    style=filled; color=lightblue; label=\""
         << dot_escape(n->name) << "\";\n    " << nid << " [label=\"" << dot_escape(n->op_type) << "\"];\n";
      int k = 0;
      for (const Node* b : n->body->nodes())
        os << "    " << nid << "_" << k++ << " [label=\"" << dot_escape(b->op_type) << "\", style=filled, fillcolor=white];\n";
      for (int j = 0; j + 1 < k; ++j) os << "    " << nid << "_" << j << " -> " << nid << "_" << j + 1 << " [style=dotted];\n";
      os << "  }\n";
    } else {
      os << "  " << nid << " [label=\"" << dot_escape(n->op_type) << "\\n" << dot_escape(n->name) << "\"];\n";
    }
    for (const Value* v : n->inputs()) {
      if (!v || !source.count(v)) continue;
      os << "  " << source[v] << " -> " << nid << " [label=\"" << dot_escape(v->type.to_string()) << "\", fontsize=8];\n";
    }
    for (const Value* o : n->outputs()) source[o] = nid;
  }
  for (const Value* v : outputs()) {
    std::string nid = fmt::format("out{}", id++);
    os << "  " << nid << " [shape=ellipse, label=\"" << dot_escape(v->name()) << "\"];\n";
    if (source.count(v)) os << "  " << source[v] << " -> " << nid << ";\n";
  }
  os << "}\n";
  return os.str();
}

}  // namespace gaf
