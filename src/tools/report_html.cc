// The fusion report as one self-contained HTML page (see tools.h): summary, the graph the planner saw and the fused
// graph as inline SVG, groups with their members, decisions, modeled benefit and generated code, rewrites, near
// misses and, when given, measured times. No network: the styles, the data (one JSON block) and the script that
// shows a group's or a node's details on a click are all inline.
//
// Layout: each node in the layer one past its deepest producer (constants left out), nodes of a layer ordered by
// the mean position of their producers (one barycentre sweep), boxes in rows from the top, edges as curves from a
// producer's bottom to its consumer's top. A fused group of the planned graph is a dashed rectangle around its
// members, coloured like the fused node that replaced it in the other graph.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <set>

#include "gaf/codegen.h"
#include "gaf/op_registry.h"
#include "gaf/tools.h"

namespace gaf::tools {

namespace {

constexpr int kBoxW = 150, kBoxH = 34, kGapX = 18, kGapY = 46, kMargin = 16;
constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

std::string escape(const std::string& s) {
  std::string r;
  for (char c : s) {
    switch (c) {
      case '&': r += "&amp;"; break;
      case '<': r += "&lt;"; break;
      case '>': r += "&gt;"; break;
      case '"': r += "&quot;"; break;
      case '\'': r += "&#39;"; break;
      default: r += c;
    }
  }
  return r;
}

std::string short_op(const Node& n) {
  std::string op = n.op_type;
  return op.size() > 22 ? op.substr(0, 21) + "…" : op;
}

struct Placed {
  const Node* node;
  double x = 0, y = 0;
};

// Layers and positions of the nodes that compute (Constant nodes left out).
std::vector<Placed> layout(const Graph& g) {
  std::map<const Node*, int> layer;
  std::vector<std::vector<const Node*>> layers;
  for (const Node* n : g.nodes()) {
    if (n->op_type == "Constant" && n->domain.empty()) continue;
    int l = 0;
    for (const Value* v : n->inputs())
      if (v && v->producer())
        if (auto it = layer.find(v->producer()); it != layer.end()) l = std::max(l, it->second + 1);
    layer[n] = l;
    if (size_t(l) >= layers.size()) layers.resize(size_t(l) + 1);
    layers[size_t(l)].push_back(n);
  }
  std::map<const Node*, double> slot;  // position within its layer
  for (auto& row : layers) {
    std::vector<std::pair<double, const Node*>> keyed;
    for (size_t i = 0; i < row.size(); ++i) {
      double sum = 0;
      int count = 0;
      for (const Value* v : row[i]->inputs())
        if (v && v->producer())
          if (auto it = slot.find(v->producer()); it != slot.end()) sum += it->second, ++count;
      keyed.push_back({count ? sum / count : double(i), row[i]});
    }
    std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < keyed.size(); ++i) {
      row[i] = keyed[i].second;
      slot[row[i]] = double(i);
    }
  }
  size_t widest = 1;
  for (const auto& row : layers) widest = std::max(widest, row.size());
  std::vector<Placed> placed;
  for (size_t l = 0; l < layers.size(); ++l) {
    const auto& row = layers[l];
    const double offset = (double(widest) - double(row.size())) * (kBoxW + kGapX) / 2;  // rows centred
    for (size_t i = 0; i < row.size(); ++i)
      placed.push_back({row[i], kMargin + offset + double(i) * (kBoxW + kGapX), kMargin + double(l) * (kBoxH + kGapY)});
  }
  return placed;
}

// One graph as SVG: nodes with data-node (index into `info`), fused nodes and grouped members with data-group.
// `group_of`: the group index of a node (members in the planned graph, the fused node in the fused graph).
std::string graph_svg(const Graph& g, const std::string& id, const std::map<const Node*, int>& group_of,
                      const std::map<std::string, double>& node_ms, nlohmann::json& info) {
  const std::vector<Placed> placed = layout(g);
  std::map<const Node*, const Placed*> at;
  double width = 2 * kMargin + kBoxW, height = 2 * kMargin + kBoxH;
  for (const Placed& p : placed) {
    at[p.node] = &p;
    width = std::max(width, p.x + kBoxW + kMargin);
    height = std::max(height, p.y + kBoxH + kMargin);
  }
  std::string edges, boxes, clusters;
  // Group rectangles first (behind everything): the bounding box of a group's members.
  std::map<int, std::array<double, 4>> bounds;  // x0, y0, x1, y1
  for (const Placed& p : placed) {
    auto it = group_of.find(p.node);
    if (it == group_of.end()) continue;
    auto [b, fresh] = bounds.try_emplace(it->second, std::array<double, 4>{p.x, p.y, p.x + kBoxW, p.y + kBoxH});
    if (!fresh) {
      auto& r = b->second;
      r = {std::min(r[0], p.x), std::min(r[1], p.y), std::max(r[2], p.x + kBoxW), std::max(r[3], p.y + kBoxH)};
    }
  }
  for (const auto& [gi, r] : bounds) {
    const char* colour = kPalette[size_t(gi) % std::size(kPalette)];
    clusters += fmt::format(
        "<rect class=\"cluster\" data-group=\"{}\" x=\"{:.0f}\" y=\"{:.0f}\" width=\"{:.0f}\" height=\"{:.0f}\" "
        "rx=\"8\" style=\"stroke:{};fill:{}\"/>\n",
        gi, r[0] - 6, r[1] - 6, r[2] - r[0] + 12, r[3] - r[1] + 12, colour, colour);
  }
  for (const Placed& p : placed) {
    for (const Value* v : p.node->inputs()) {
      if (!v || !v->producer()) continue;
      auto it = at.find(v->producer());
      if (it == at.end()) continue;
      const double x0 = it->second->x + kBoxW / 2.0, y0 = it->second->y + kBoxH, x1 = p.x + kBoxW / 2.0, y1 = p.y;
      const double my = (y0 + y1) / 2;
      edges += fmt::format("<path class=\"edge\" d=\"M{:.0f},{:.0f} C{:.0f},{:.0f} {:.0f},{:.0f} {:.0f},{:.0f}\"/>\n",
                           x0, y0, x0, my, x1, my, x1, y1);
    }
  }
  for (const Placed& p : placed) {
    const Node& n = *p.node;
    const int index = int(info.size());
    auto git = group_of.find(&n);
    nlohmann::json ni = {{"name", n.display_name()},
                         {"op", n.domain.empty() ? n.op_type : n.domain + "." + n.op_type}};
    nlohmann::json ins = nlohmann::json::array(), outs = nlohmann::json::array();
    for (const Value* v : n.inputs())
      if (v) ins.push_back(v->name() + " : " + v->type.to_string());
    for (const Value* v : n.outputs()) outs.push_back(v->name() + " : " + v->type.to_string());
    ni["inputs"] = ins;
    ni["outputs"] = outs;
    if (git != group_of.end()) ni["group"] = git->second;
    std::string label = short_op(n), ms;
    if (auto t = node_ms.find(n.display_name()); t != node_ms.end()) {
      ms = fmt::format("{:.3f} ms", t->second);
      ni["measured_ms"] = t->second;
    }
    info.push_back(ni);
    const bool fused = n.body != nullptr;
    const std::string fill = git != group_of.end() ? kPalette[size_t(git->second) % std::size(kPalette)] : "#ffffff";
    boxes += fmt::format(
        "<g class=\"node{}\" data-node=\"{}\"{}><title>{}</title>"
        "<rect x=\"{:.0f}\" y=\"{:.0f}\" width=\"{}\" height=\"{}\" rx=\"5\" "
        "style=\"fill:{};fill-opacity:{}\"/>"
        "<text x=\"{:.0f}\" y=\"{:.0f}\">{}</text>{}</g>\n",
        fused ? " fused" : "", index,
        git != group_of.end() ? fmt::format(" data-group=\"{}\"", git->second) : "",
        escape(n.display_name() + " (" + n.op_type + ")"), p.x, p.y, kBoxW, kBoxH, fill,
        git != group_of.end() ? (fused ? "0.85" : "0.35") : "1", p.x + kBoxW / 2.0,
        p.y + (ms.empty() ? 21 : 15), escape(label),
        ms.empty() ? ""
                   : fmt::format("<text class=\"ms\" x=\"{:.0f}\" y=\"{:.0f}\">{}</text>", p.x + kBoxW / 2.0,
                                 p.y + 28, ms));
  }
  return fmt::format(
      "<svg id=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" viewBox=\"0 0 {:.0f} "
      "{:.0f}\">\n{}{}{}</svg>\n",
      id, width, height, width, height, clusters, edges, boxes);
}

std::string cost_row(const char* what, const GraphCost& c) {
  return fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.2f} MB</td><td>{:.3f} ms</td><td>{:.2f} MB</td></tr>\n",
                     what, c.nodes, c.kernels, c.bytes / 1e6, c.time_s * 1e3, c.peak_memory_bytes / 1e6);
}

constexpr const char* kStyle = R"(
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #222; }
header { padding: 12px 20px; background: #2d3e50; color: #fff; }
header h1 { font-size: 18px; margin: 0; }
main { display: flex; }
#content { flex: 1; padding: 0 20px 40px; overflow: auto; }
#details { width: 420px; padding: 12px 16px; border-left: 1px solid #ccc; position: sticky; top: 0; height: 100vh;
           overflow: auto; box-sizing: border-box; background: #fafafa; }
table { border-collapse: collapse; margin: 8px 0; }
td, th { border: 1px solid #ccc; padding: 3px 8px; text-align: left; }
.graph { overflow: auto; border: 1px solid #ddd; max-height: 80vh; }
svg text { font: 11px monospace; text-anchor: middle; pointer-events: none; }
svg text.ms { fill: #333; font-size: 10px; }
.node rect { stroke: #555; cursor: pointer; }
.node.fused rect { stroke-width: 2.5; }
.node.selected rect { stroke: #d00; stroke-width: 3; }
.cluster { fill-opacity: 0.08; stroke-dasharray: 5 3; stroke-width: 1.5; cursor: pointer; }
.edge { fill: none; stroke: #888; stroke-width: 1; }
#details h2 { word-break: break-all; font-size: 16px; }
pre { background: #f0f0f0; padding: 8px; overflow: auto; max-height: 50vh; font-size: 11px; }
.muted { color: #777; }
)";

// Shows what was clicked in #details: a node (its group's details when it has one) or a group.
constexpr const char* kScript = R"(
const data = JSON.parse(document.getElementById('gaf-data').textContent);
const details = document.getElementById('details');
function text(s) { const d = document.createElement('div'); d.textContent = s; return d.innerHTML; }
function showGroup(gi) {
  const g = data.groups[gi];
  let h = '<h2>' + text(g.name) + '</h2>';
  h += '<p>' + g.ops.length + ' ops: ' + text(g.ops.join(', ')) + '</p>';
  h += '<p>modeled traffic saved ' + (g.modeled_bytes_saved / 1e6).toFixed(3) + ' MB, estimated benefit ' +
       (g.estimated_benefit_s * 1e3).toFixed(4) + ' ms</p>';
  h += '<h3>Members</h3><ul>' + g.nodes.map(n => '<li>' + text(n) + '</li>').join('') + '</ul>';
  h += '<h3>Decisions</h3><ul>' + g.decisions.map(d => '<li>' + text(d.producer + ' → ' + d.consumer + ': ' +
       (d.fused ? 'fused' : d.reason) + (d.detail ? ' (' + d.detail + ')' : '')) + '</li>').join('') + '</ul>';
  h += '<h3>Runs as</h3><p>' + text(g.runs_as) + '</p>';
  if (g.code) h += '<pre>' + text(g.code) + '</pre>';
  details.innerHTML = h;
}
function showNode(graph, i) {
  const n = data.graphs[graph][i];
  let h = '<h2>' + text(n.name) + '</h2><p>' + text(n.op) + '</p>';
  if (n.measured_ms !== undefined) h += '<p>measured ' + n.measured_ms.toFixed(4) + ' ms per run</p>';
  h += '<h3>Inputs</h3><ul>' + n.inputs.map(s => '<li>' + text(s) + '</li>').join('') + '</ul>';
  h += '<h3>Outputs</h3><ul>' + n.outputs.map(s => '<li>' + text(s) + '</li>').join('') + '</ul>';
  details.innerHTML = h;
  if (n.group !== undefined) {
    const node = details.innerHTML;
    showGroup(n.group);
    details.innerHTML = node + '<hr>' + details.innerHTML;
  }
}
for (const svg of document.querySelectorAll('svg[id]')) {
  svg.addEventListener('click', e => {
    document.querySelectorAll('.selected').forEach(x => x.classList.remove('selected'));
    const node = e.target.closest('[data-node]');
    if (node) { node.classList.add('selected'); showNode(svg.id, Number(node.dataset.node)); return; }
    const cluster = e.target.closest('[data-group]');
    if (cluster) showGroup(Number(cluster.dataset.group));
  });
}
// #selftest (the test's headless browser): click the first fused node with a generated kernel (else the first
// fused node) and report what the panel shows.
let state = 'ready';
if (location.hash === '#selftest') {
  const fused = [...document.querySelectorAll('#fused .node.fused')];
  const node = fused.find(n => data.groups[Number(n.dataset.group)].code) || fused[0];
  if (node) {
    node.dispatchEvent(new MouseEvent('click', {bubbles: true}));
    const title = details.querySelectorAll('h2');
    state += ' clicked ' + (title.length > 1 ? title[1].textContent : '?') + ' code ' +
             (details.querySelector('pre') ? 'yes' : 'no');
  }
}
document.getElementById('gaf-ready').textContent = state;
)";

}  // namespace

HtmlReport html_report_of(std::string model_name, const FuseOptions& opts, const FuseResult& r, const Graph& fused) {
  HtmlReport h;
  h.model_name = std::move(model_name);
  h.target_name = opts.target.name;
  h.opt_level = opts.fusion.opt_level;
  h.result = &r;
  h.planned = r.planned ? r.planned->graph.get() : nullptr;
  h.fused = &fused;
  return h;
}

std::string report_html(const HtmlReport& r) {
  GAF_CHECK(r.result && r.fused, "report_html: no fusion result or fused graph");
  const FuseResult& fr = *r.result;
  nlohmann::json data;
  // Groups: the planned graph's members by name, the fused graph's node by op type (a fused node's op_type is
  // its group's name).
  std::map<std::string, int> group_index;
  data["groups"] = nlohmann::json::array();
  for (size_t i = 0; i < fr.groups.size(); ++i) {
    const GroupSummary& gs = fr.groups[i];
    group_index[gs.name] = int(i);
    nlohmann::json decisions = nlohmann::json::array();
    const std::set<std::string> members(gs.nodes.begin(), gs.nodes.end());
    for (const DecisionRecord& d : fr.decisions)
      if (members.count(d.producer) || members.count(d.consumer))
        decisions.push_back({{"producer", d.producer}, {"consumer", d.consumer}, {"fused", d.fused},
                             {"reason", std::string(reason_name(d.reason))}, {"detail", d.detail}});
    data["groups"].push_back({{"name", gs.name},
                              {"ops", gs.ops},
                              {"nodes", gs.nodes},
                              {"modeled_bytes_saved", gs.bytes_saved},
                              {"estimated_benefit_s", gs.benefit_s},
                              {"decisions", decisions},
                              {"runs_as", "op by op (no fused node found)"},
                              {"code", ""}});
  }
  std::map<const Node*, int> fused_group;
  codegen::EmitOptions eo;
  int kernel_index = 0;
  for (const Node* n : r.fused->nodes()) {
    if (!n->body) continue;
    auto it = group_index.find(n->op_type);
    if (it == group_index.end()) continue;
    fused_group[n] = it->second;
    nlohmann::json& gj = data["groups"][size_t(it->second)];
    bool anchor = false;
    for (const Node* b : n->body->nodes()) anchor |= op_kind(*b) == OpKind::Anchor;
    std::string why;
    std::optional<codegen::EmittedKernel> k;
    if (!anchor) k = codegen::emit_kernel(*n, fmt::format("gaf_{}_{}", n->op_type, kernel_index++), eo, &why);
    if (k) {
      gj["runs_as"] = "one generated kernel (CPU, shown below)";
      gj["code"] = k->source;
    } else {
      gj["runs_as"] = anchor ? "the anchor's library primitive with the rest of the group as its epilogue"
                             : "op by op: " + why;
    }
  }
  std::map<const Node*, int> planned_group;
  if (r.planned) {
    std::map<std::string, int> member_of;
    for (size_t i = 0; i < fr.groups.size(); ++i)
      for (const std::string& m : fr.groups[i].nodes) member_of[m] = int(i);
    for (const Node* n : r.planned->nodes())
      if (auto it = member_of.find(n->display_name()); it != member_of.end()) planned_group[n] = it->second;
  }
  data["graphs"] = nlohmann::json::object();
  nlohmann::json planned_info = nlohmann::json::array(), fused_info = nlohmann::json::array();
  const std::string planned_svg =
      r.planned ? graph_svg(*r.planned, "planned", planned_group, r.node_ms_unfused, planned_info) : "";
  const std::string fused_svg = graph_svg(*r.fused, "fused", fused_group, r.node_ms_fused, fused_info);
  data["graphs"]["planned"] = planned_info;
  data["graphs"]["fused"] = fused_info;
  std::string json = data.dump();
  for (size_t p = 0; (p = json.find("</", p)) != std::string::npos; p += 3) json.replace(p, 2, "<\\/");

  std::string h = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  h += fmt::format("<title>graph-autofusion report: {}</title>\n<style>{}</style></head><body>\n",
                   escape(r.model_name), kStyle);
  h += fmt::format("<header><h1>graph-autofusion: {}</h1><div>target {}, opt level {}</div></header>\n",
                   escape(r.model_name), escape(r.target_name), r.opt_level);
  h += "<main><div id=\"content\">\n<h2>Summary</h2>\n<p>" + escape(fr.summary_line()) + "</p>\n";
  h += "<table><tr><th></th><th>nodes</th><th>kernels</th><th>modeled traffic</th><th>estimated time</th>"
       "<th>peak memory</th></tr>\n" + cost_row("before", fr.before) + cost_row("after", fr.after) + "</table>\n";
  if (!r.measured.empty()) {
    h += "<h2>Measured</h2>\n<table>";
    for (const auto& [what, value] : r.measured) h += "<tr><td>" + escape(what) + "</td><td>" + escape(value) + "</td></tr>";
    h += "</table>\n";
  }
  h += fmt::format("<h2>Fused groups ({})</h2>\n<table><tr><th>group</th><th>ops</th><th>traffic saved</th>"
                   "<th>benefit</th></tr>\n", fr.groups.size());
  for (size_t i = 0; i < fr.groups.size(); ++i) {
    const GroupSummary& gs = fr.groups[i];
    h += fmt::format(
        "<tr><td><a href=\"#\" onclick=\"showGroup({});return false\">{}</a>{}</td><td>{}</td>"
        "<td>{:.3f} MB</td><td>{:.4f} ms</td></tr>\n",
        i, escape(gs.name),
        gs.scope.empty() ? "" : " <span class=\"muted\">in " + escape(gs.scope) + "</span>", gs.ops.size(),
        gs.bytes_saved / 1e6, gs.benefit_s * 1e3);
  }
  h += "</table>\n<h2>Rewrites that fired</h2>\n";
  if (fr.rewrites.empty()) h += "<p class=\"muted\">none</p>\n";
  else {
    h += "<table><tr><th>pass</th><th>times</th></tr>";
    for (const auto& [pass, count] : fr.rewrites) h += fmt::format("<tr><td>{}</td><td>{}</td></tr>", escape(pass), count);
    h += "</table>\n";
  }
  if (!fr.near_misses.empty()) {
    h += "<h2>Near misses</h2>\n<table><tr><th>pass</th><th>at</th><th>check that failed</th></tr>";
    for (const NearMiss& m : fr.near_misses)
      h += "<tr><td>" + escape(m.pass) + "</td><td>" + escape(m.anchor) + "</td><td>" + escape(m.check) + "</td></tr>";
    h += "</table>\n";
  }
  if (!planned_svg.empty())
    h += "<h2>Before fusion (after rewrites): groups as dashed clusters</h2>\n<p class=\"muted\">Click a node or a "
         "cluster for its details.</p>\n<div class=\"graph\">" + planned_svg + "</div>\n";
  h += "<h2>After fusion</h2>\n<div class=\"graph\">" + fused_svg + "</div>\n";
  h += "</div>\n<aside id=\"details\"><p class=\"muted\">Click a fused group, a node or a cluster.</p></aside></main>\n";
  h += "<span id=\"gaf-ready\" hidden></span>\n";
  h += "<script type=\"application/json\" id=\"gaf-data\">" + json + "</script>\n";
  h += std::string("<script>") + kScript + "</script>\n</body></html>\n";
  return h;
}

}  // namespace gaf::tools
