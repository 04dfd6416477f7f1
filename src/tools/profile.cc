// profile_fusion: where the time goes, node by node, before and after fusion.
//
// With a trace path the profiled runs' node executions (RunStats::events: measured start and duration of each)
// also go to a Chrome trace-event file, one process per variant, one track per run thread.
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "gaf/onnx_io.h"
#include "gaf/session.h"
#include "gaf/tools.h"

namespace gaf::tools {

namespace {

// Chrome trace events of one variant (process `pid`): a process_name and a thread_name metadata event, then one
// complete event per node execution, `ts`/`dur` in microseconds from `origin_ns`.
struct Trace {
  int pid = 0;
  std::string process;
  int64_t origin_ns = 0;
  long tid = 0;
  std::vector<std::pair<int, runtime::NodeEvent>> events;  // (iteration, event)
  int runs_left_out = 0;                                    // past kMaxTraceEvents
};

std::string trace_events(const Trace& t, const Graph& g) {
  const std::vector<Node*> nodes = g.nodes();  // the Session's steps are the graph's nodes in this order
  std::string out;
  auto add = [&](const nlohmann::json& e) {
    if (!out.empty()) out += ",\n";
    out += e.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);  // names need not be UTF-8
  };
  add({{"ph", "M"}, {"pid", t.pid}, {"tid", t.tid}, {"name", "process_name"}, {"args", {{"name", t.process}}}});
  add({{"ph", "M"}, {"pid", t.pid}, {"tid", t.tid}, {"name", "thread_name"}, {"args", {{"name", "run"}}}});
  std::vector<nlohmann::json> members(nodes.size());
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (!nodes[k]->body) continue;
    members[k] = nlohmann::json::array();
    for (const Node* b : nodes[k]->body->nodes()) members[k].push_back(b->op_type);
  }
  for (const auto& [iteration, ev] : t.events) {
    GAF_ASSERT(ev.node >= 0 && size_t(ev.node) < nodes.size(), "trace: node index out of range");
    const Node& n = *nodes[size_t(ev.node)];
    nlohmann::json args = {{"op_type", n.op_type},
                           {"input_bytes", ev.in_bytes},
                           {"output_bytes", ev.out_bytes},
                           {"iteration", iteration}};
    if (n.body) args["members"] = members[size_t(ev.node)];
    add({{"ph", "X"},
         {"pid", t.pid},
         {"tid", t.tid},
         {"name", n.name.empty() ? n.op_type : n.name},
         {"cat", n.body ? "fused" : "op"},
         {"ts", double(ev.start_ns - t.origin_ns) / 1e3},
         {"dur", double(ev.dur_ns) / 1e3},
         {"args", std::move(args)}});
  }
  return out;
}

// Measured per node and per run, for the HTML report.
struct Measured {
  std::map<std::string, double> node_ms;
  double run_ms = 0;
};

std::string table(const std::string& title, const Model& m, const std::vector<Tensor>& inputs, int iterations,
                  int top, Trace* trace = nullptr, Measured* measured = nullptr) {
  runtime::Session s(*m.graph, runtime::SessionOptions{.profile = true});
  s.run(inputs);  // warm-up (and generated kernels loaded)
  std::vector<runtime::NodeProfile> acc = s.stats().nodes;  // totals accumulate over runs: keep the difference
  for (auto& p : acc) p.total_s = -p.total_s;
  double wall = 0;
  if (trace) {
    trace->tid = long(::syscall(SYS_gettid));  // runs execute their nodes one after another on this thread
    trace->origin_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::steady_clock::now().time_since_epoch())
                           .count();
  }
  Progress progress("profile", iterations);
  for (int i = 0; i < iterations; ++i) {
    progress.step(i);
    s.run(inputs);
    wall += s.stats().last_run_s;
    if (trace && trace->events.size() + s.stats().events.size() > tools::kMaxTraceEvents) ++trace->runs_left_out;
    else if (trace)
      for (const auto& ev : s.stats().events) trace->events.emplace_back(i, ev);
  }
  progress.step(iterations);
  const auto& nodes = s.stats().nodes;
  for (size_t k = 0; k < nodes.size() && k < acc.size(); ++k) acc[k].total_s += nodes[k].total_s;
  const double n = std::max(iterations, 1);
  double sum = 0;
  std::map<std::string, std::pair<double, int>> by_type;
  for (const auto& p : acc) {
    sum += p.total_s;
    auto& t = by_type[p.op_type];
    t.first += p.total_s, ++t.second;
  }
  std::string out = fmt::format("== {}: {} nodes, {:.3f} ms per run (nodes {:.3f} ms)\n", title, acc.size(),
                                wall / n * 1e3, sum / n * 1e3);
  if (measured) {
    measured->run_ms = wall / n * 1e3;
    for (const auto& p : acc) measured->node_ms[p.name] += p.total_s / n * 1e3;
  }
  std::vector<const runtime::NodeProfile*> order;
  for (const auto& p : acc) order.push_back(&p);
  if (top > 0)
    std::stable_sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->total_s > b->total_s; });
  out += fmt::format("  {:>9} {:>6}  {:<16} {}\n", "ms", "share", "op", "node");
  for (size_t i = 0; i < order.size() && (top <= 0 || int(i) < top); ++i)
    out += fmt::format("  {:>9.3f} {:>5.1f}%  {:<16} {}\n", order[i]->total_s / n * 1e3,
                       sum > 0 ? 100 * order[i]->total_s / sum : 0.0, order[i]->op_type, order[i]->name);
  std::vector<std::pair<std::string, std::pair<double, int>>> types(by_type.begin(), by_type.end());
  std::stable_sort(types.begin(), types.end(), [](auto& a, auto& b) { return a.second.first > b.second.first; });
  out += "  by op type:";
  for (const auto& [type, t] : types) out += fmt::format(" {} {:.3f} ms ({}),", type, t.first / n * 1e3, t.second);
  out.back() = '\n';
  return out;
}

}  // namespace

std::string profile_fusion(const Model& model, const FuseOptions& opts, const std::vector<Tensor>& inputs,
                           int iterations, int top) {
  return profile_fusion(model, opts, inputs, iterations, top, "", "");
}

std::string profile_fusion(const Model& model, const FuseOptions& opts, const std::vector<Tensor>& inputs,
                           int iterations, int top, const std::string& trace_path) {
  return profile_fusion(model, opts, inputs, iterations, top, trace_path, "");
}

std::string profile_fusion(const Model& model, const FuseOptions& opts, const std::vector<Tensor>& inputs,
                           int iterations, int top, const std::string& trace_path, const std::string& html_path) {
  for (const std::string& path : {trace_path, html_path}) {  // an unwritable path fails before the runs, not after
    if (path.empty()) continue;
    std::filesystem::path dir = std::filesystem::path(path).parent_path();
    if (dir.empty()) dir = ".";
    std::error_code ec;
    GAF_CHECK(!std::filesystem::is_directory(path, ec), "cannot write '{}': it is a folder; give a file name", path);
    GAF_CHECK(::access(dir.c_str(), W_OK) == 0, "cannot write '{}': {}; check that the folder exists and is writable",
              path, std::strerror(errno));
  }
  const bool tracing = !trace_path.empty(), reporting = !html_path.empty();
  FuseOptions fo = opts;
  fo.keep_planned = reporting;  // the page draws the graph the planner saw
  Model fused = copy_model(model);
  const FuseResult r = fuse_model(fused, fo);
  Trace unfused_trace, fused_trace;
  unfused_trace.pid = 1, unfused_trace.process = "unfused";
  fused_trace.pid = 2, fused_trace.process = "fused";
  Measured unfused_ms, fused_ms;
  std::string text =
      table("unfused", model, inputs, iterations, top, tracing ? &unfused_trace : nullptr,
            reporting ? &unfused_ms : nullptr) +
      table("fused", fused, inputs, iterations, top, tracing ? &fused_trace : nullptr, reporting ? &fused_ms : nullptr);
  if (tracing)
    onnx_io::write_file_atomic(trace_path, "{\"traceEvents\": [\n" + trace_events(unfused_trace, *model.graph) +
                                               ",\n" + trace_events(fused_trace, *fused.graph) +
                                               "\n],\n\"displayTimeUnit\": \"ms\",\n\"otherData\": " +
                                               nlohmann::json({{"iterations", iterations},
                                                               {"unfused_runs_left_out", unfused_trace.runs_left_out},
                                                               {"fused_runs_left_out", fused_trace.runs_left_out}})
                                                   .dump() +
                                               "}\n");
  if (reporting) {
    HtmlReport h = html_report_of(model.graph->name, opts, r, *fused.graph);
    h.measured = {{"unfused, per run (profiled)", fmt::format("{:.3f} ms", unfused_ms.run_ms)},
                  {"fused, per run (profiled)", fmt::format("{:.3f} ms", fused_ms.run_ms)},
                  {"profiled runs", fmt::format("{}", iterations)}};
    h.node_ms_unfused = std::move(unfused_ms.node_ms);
    h.node_ms_fused = std::move(fused_ms.node_ms);
    onnx_io::write_file_atomic(html_path, report_html(h));
  }
  return text;
}

}  // namespace gaf::tools
