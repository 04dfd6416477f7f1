// The fuse driver: passes -> plan -> apply, with costs before and after, the report and graph dumps.
#include <fcntl.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "codegen/cpu/cache_util.h"
#include "gaf/codegen.h"
#include "gaf/onnx_io.h"
#include "gaf/op_registry.h"
#include "gaf/passes.h"
#include "gaf/tools.h"

namespace gaf::tools {

namespace {

void dump_dot(const Graph& g, const std::string& dir, const std::string& stem) {
  create_folder(dir, "--dump-graph");
  std::string dot = (std::filesystem::path(dir) / (stem + ".dot")).string();
  onnx_io::write_file_atomic(dot, g.to_dot());
  // graphviz's dot, when installed, from an argument vector (no shell: any folder name works); its messages go
  // to /dev/null, and a failed run leaves no half-written SVG.
  const std::string svg = (std::filesystem::path(dir) / (stem + ".svg")).string();
  const int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  const int rc = null_fd < 0 ? -1 : codegen::run_process({"dot", "-Tsvg", dot, "-o", svg}, null_fd);
  if (null_fd >= 0) ::close(null_fd);
  std::error_code ec;
  if (rc != 0) std::filesystem::remove(svg, ec);
}

nlohmann::json cost_json(const GraphCost& c) {
  return {{"nodes", c.nodes},
          {"kernels", c.kernels},
          {"modeled_bytes", c.bytes},
          {"estimated_time_s", c.time_s},
          {"peak_memory_bytes", c.peak_memory_bytes},
          {"dims_costed_as_1", c.dims_costed_as_1}};
}

// A C identifier made of `s` (fused op types name generated functions).
std::string identifier(const std::string& s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

// The backend that runs the plan: the one the caller installed, else the target's.
const KernelBackend& backend_of(const FuseOptions& opts) {
  if (opts.fusion.backend) return *opts.fusion.backend;
  return opts.target.backend == "cuda" ? codegen::cuda_kernel_backend() : codegen::cpu_kernel_backend();
}

// The rewrite pipeline of the opt level, with the passes the backend adds.
PassManager pipeline(const FuseOptions& opts) {
  const int level = opts.fusion.opt_level;
  return PassManager::for_opt_level(level, backend_of(opts).pipeline_passes(level, opts.target));
}

// The planner on g (the main graph, or a subgraph whose groups are named after `prefix` and listed with
// `scope`), its groups applied; candidates, decisions and groups are added to r's.
void plan_and_apply(Graph& g, const FuseOptions& opts, const CostModel& cm, const std::string& prefix,
                    const std::string& scope, FuseResult& r) {
  if (opts.fusion.opt_level < 2) return;
  FusionOptions fo = opts.fusion;
  fo.backend = &backend_of(opts);
  FusionPlan plan = plan_fusion(g, cm, fo);
  r.candidates += plan.candidates;
  r.decisions.insert(r.decisions.end(), plan.decisions.begin(), plan.decisions.end());
  for (GroupSummary& s : apply_fusion(g, plan, cm, prefix)) {
    s.scope = scope;
    r.groups.push_back(std::move(s));
  }
}

// The rewrite pipeline and the planner inside every subgraph of g's nodes (If's branches, Loop's and Scan's
// body), at any depth; their groups are listed with the subgraph they are in, their pass dumps go to a
// folder of their own.
void fuse_subgraphs(Graph& g, const std::string& scope, PassContext& ctx, const FuseOptions& opts,
                    const CostModel& cm, FuseResult& r) {
  for (Node* n : g.nodes()) {
    for (const auto& [attr, sub] : n->subgraphs()) {
      const std::string where = fmt::format("{}{} {}", scope, n->describe(), attr);
      const std::string name = identifier(n->display_name() + "_" + attr);
      const std::string dumps = ctx.dump_dir;
      if (!dumps.empty()) ctx.dump_dir = (std::filesystem::path(dumps) / name).string();
      // Shape inference on the enclosing graph typed the subgraph's captures from the values they stand for.
      pipeline(opts).run(*sub, ctx);
      plan_and_apply(*sub, opts, cm, name + "_", where, r);
      fuse_subgraphs(*sub, where + ": ", ctx, opts, cm, r);
      ctx.dump_dir = dumps;
    }
  }
}

}  // namespace

FuseResult fuse_model(Model& model, const FuseOptions& opts) {
  Graph& g = *model.graph;
  CostModel cm(opts.target);
  FuseResult r;
  if (!opts.dump_dir.empty()) dump_dot(g, opts.dump_dir, "before");
  r.before = graph_cost(g, cm);
  PassContext ctx;
  ctx.opt_level = opts.fusion.opt_level;
  ctx.evaluator = &runtime::constant_evaluator();
  ctx.conv_winograd = opts.target.conv_winograd && opts.fusion.rules.winograd;
  ctx.conv_expand_depthwise = opts.target.conv_expand_depthwise;
  ctx.conv_expand_depthwise_everywhere = opts.target.conv_expand_depthwise_everywhere;
  ctx.target = &opts.target;
  if (!opts.fusion.rules.skip_nodes.empty()) {
    std::vector<std::string> names;
    for (const Node* n : g.nodes()) names.push_back(n->name);
    const std::set<std::string> present(names.begin(), names.end());
    for (const std::string& s : opts.fusion.rules.skip_nodes)
      if (!present.count(s)) fail("rules: skip_nodes names '{}', which is no node of the model{}", s, did_you_mean(s, names));
  }
  ctx.skip_passes = opts.fusion.rules.skip_passes;
  const KernelBackend& backend = backend_of(opts);
  ctx.weight_precision = backend.weight_precision(opts.fusion.rules.precision_mode);
  if (!ctx.skip_passes.empty()) {
    const std::vector<std::string> names = PassManager::known_passes();
    const std::set<std::string> known(names.begin(), names.end());
    for (const std::string& p : ctx.skip_passes)
      if (!known.count(p))
        fail("rules: skip_passes names '{}', which is no rewrite pass (known: {})", p, fmt::join(known, ", "));
  }
  if (!opts.dump_dir.empty()) ctx.dump_dir = (std::filesystem::path(opts.dump_dir) / "passes").string();
  pipeline(opts).run(g, ctx);
  if (opts.fusion.opt_level >= 1) {
    PassManager precision;
    for (auto& p : backend.precision_passes(opts.fusion.rules.precision_mode)) precision.add(std::move(p));
    precision.run(g, ctx, 1);
  }
  {
    std::set<std::string> present;  // a near miss whose anchor a later rewrite consumed is no miss
    for (const Node* n : g.nodes()) present.insert(n->describe());
    for (const auto& [key, m] : ctx.near_misses)
      if (present.count(m.anchor)) r.near_misses.push_back(m);
    r.precision_changes = ctx.precision_changes;
    for (const Node* n : g.nodes())
      if (n->domain == "gaf" && n->op_type == "CompressedMatMul")
        r.precision_changes.push_back(
            fmt::format("{}: weights '{}' {}", n->output(0)->name(), n->input(1)->name(), n->input(1)->type.to_string()));
  }
  if (opts.keep_planned) r.planned = std::make_shared<const Model>(copy_model(model));
  plan_and_apply(g, opts, cm, "", "", r);
  fuse_subgraphs(g, "", ctx, opts, cm, r);
  r.rewrites = ctx.rewrites;
  if (!model.opsets.count("gaf.fused") && !r.groups.empty()) model.opsets["gaf.fused"] = 1;
  r.after = graph_cost(g, cm);
  if (!opts.dump_dir.empty()) dump_dot(g, opts.dump_dir, "after");
  return r;
}

void create_folder(const std::string& dir, std::string_view option) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  GAF_CHECK(!ec, "{} '{}': cannot create the folder: {}", option, dir, ec.message());
  GAF_CHECK(std::filesystem::is_directory(dir), "{} '{}': it is a file, not a folder", option, dir);
}

int emit_code(const Model& fused, const std::string& dir, bool debug) {
  create_folder(dir, "--emit-code");
  nlohmann::json manifest = nlohmann::json::array();
  int files = 0, index = 0;
  codegen::EmitOptions eo;
  eo.debug = debug;
  std::vector<const Node*> groups;  // the main graph's fused nodes, then those of its subgraphs
  for (const Graph* g : graph_and_subgraphs(*fused.graph))
    for (const Node* n : g->nodes())
      if (n->body) groups.push_back(n);
  for (const Node* n : groups) {
    nlohmann::json entry = {{"group", n->op_type}};
    std::vector<std::string> nodes;
    for (const Node* b : n->body->nodes()) nodes.push_back(b->display_name());
    entry["nodes"] = nodes;
    bool anchor = false;
    for (const Node* b : n->body->nodes()) anchor |= op_kind(*b) == OpKind::Anchor;
    std::string why;
    std::optional<codegen::EmittedKernel> k;
    if (!anchor) k = codegen::emit_kernel(*n, fmt::format("gaf_{}_{}", n->op_type, index), eo, &why);
    ++index;
    if (k) {
      std::string file = n->op_type + ".cpp";
      onnx_io::write_file_atomic((std::filesystem::path(dir) / file).string(), codegen::prelude() + "\n" + k->source);
      entry["file"] = file;
      ++files;
    } else {
      entry["file"] = nullptr;
      entry["runs_as"] = anchor ? "oneDNN primitive with post-ops (or op by op when the epilogue has no post-op form)"
                                : "op by op";
      if (!anchor) entry["reason"] = why;
    }
    manifest.push_back(entry);
  }
  onnx_io::write_file_atomic((std::filesystem::path(dir) / "manifest.json").string(), manifest.dump(2));
  return files;
}

std::string FuseResult::summary_line() const {
  size_t fused_ops = 0;
  for (const auto& gr : groups) fused_ops += gr.ops.size();
  return fmt::format(
      "Found {} operators, {} fusion candidates. Estimated benefit: {:.1f} MB memory traffic, {:.3f} ms. "
      "Fused {} operators into {} fused operators.",
      before.nodes, candidates, (before.bytes - after.bytes) / 1e6, (before.time_s - after.time_s) * 1e3, fused_ops,
      groups.size()) +
         (before.dims_costed_as_1.empty()
              ? ""
              : fmt::format(" (Estimates take the symbolic dims {} as 1.)", fmt::join(before.dims_costed_as_1, ", ")));
}

std::string FuseResult::report_json(const std::string& model_name, const Target& target, int opt_level) const {
  nlohmann::json j;
  j["model"] = model_name;
  j["target"] = target.name;
  j["opt_level"] = opt_level;
  j["before"] = cost_json(before);
  j["after"] = cost_json(after);
  j["groups"] = nlohmann::json::array();
  for (const auto& gr : groups)
    j["groups"].push_back({{"name", gr.name},
                           {"scope", gr.scope},
                           {"ops", gr.ops},
                           {"nodes", gr.nodes},
                           {"modeled_bytes_saved", gr.bytes_saved},
                           {"estimated_benefit_s", gr.benefit_s}});
  j["rewrites"] = nlohmann::json::array();
  for (const auto& [pass, count] : rewrites) j["rewrites"].push_back({{"pass", pass}, {"count", count}});
  j["precision_changes"] = precision_changes;
  j["near_misses"] = nlohmann::json::array();
  for (const NearMiss& m : near_misses)
    j["near_misses"].push_back({{"pass", m.pass}, {"anchor", m.anchor}, {"check", m.check}});
  j["decisions"] = nlohmann::json::array();
  for (const auto& d : decisions)
    j["decisions"].push_back({{"producer", d.producer},
                              {"consumer", d.consumer},
                              {"fused", d.fused},
                              {"reason", std::string(reason_name(d.reason))},
                              {"benefit_s", d.benefit_s},
                              {"detail", d.detail}});
  return j.dump(2);
}

}  // namespace gaf::tools
