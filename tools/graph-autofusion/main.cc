// graph-autofusion command line: a thin layer over the library (gaf::tools). Every user error is one line on
// stderr and a non-zero exit.
#include <CLI/CLI.hpp>
#include <fmt/ranges.h>

#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <new>
#include <sstream>

#include "gaf/cuda.h"
#include "gaf/onnx_io.h"
#include "gaf/session.h"
#include "gaf/tools.h"

namespace {

using namespace gaf;

struct RunArgs {
  std::string model;
  std::vector<std::string> input_pbs;
  std::string input_dir;
  bool random_inputs = false;
  std::vector<std::string> dims;  // --dim NAME=SIZE: random inputs' symbolic dims
  std::string save_inputs, save_outputs;
  int iterations = 0;
  uint64_t seed = 0;
  int opt_level = 0;  // run: fuse in memory at this level first (0: run the file as it is)
  std::string rules;  // with opt_level: the rules file (else $GAF_FUSION_CONFIG / $ASCEND_FUSION_CONFIG)
  std::string device = "cpu";
  bool dry_run = false;  // --device cuda: plan and compile only
};

int cmd_info(const std::string& path) {
  Model m = tools::read_model(path);
  std::cout << tools::model_info(m);
  return 0;
}

// A count on the command line: a whole number >= `least`, else one line saying so (CLI11's own numeric
// validators print their range as 0.000000 to 1.79e308).
CLI::Validator count_at_least(int64_t least) {
  return CLI::Validator(
      [least](std::string& text) -> std::string {
        int64_t v = 0;
        const char* end = text.data() + text.size();
        auto [ptr, ec] = std::from_chars(text.data(), end, v);
        if (ec != std::errc() || ptr != end || v < least)
          return fmt::format("'{}' is not a whole number >= {}", text, least);
        return "";
      },
      least > 0 ? "POSITIVE" : "NON-NEGATIVE");
}

CLI::Validator non_negative_tolerance() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || !(v >= 0))
          return fmt::format("'{}' is not a tolerance >= 0", text);
        return "";
      },
      "TOLERANCE");
}

constexpr const char* kDimHelp = "NAME=SIZE: the size of a named (symbolic) input dim in random inputs (default 1)";

// The inputs --inputs and --input-pb give (none when neither does), each read as the type of the graph input
// it feeds (a sequence or an optional has a proto of its own).
std::vector<Tensor> given_inputs(const RunArgs& io, const Graph& g) {
  std::vector<Tensor> inputs;
  if (!io.input_dir.empty()) inputs = tools::load_input_dir(io.input_dir, &g);
  std::vector<const Value*> fed;
  for (const Value* v : g.inputs())
    if (!v->is_constant()) fed.push_back(v);
  for (const auto& p : io.input_pbs)
    inputs.push_back(inputs.size() < fed.size() ? onnx_io::load_value(p, fed[inputs.size()]->type)
                                                : onnx_io::load_tensor(p));
  return inputs;
}

std::vector<Tensor> gather_inputs(const RunArgs& a, const runtime::Session& s) {
  std::vector<Tensor> inputs = given_inputs(a, s.graph());
  if (inputs.empty()) {
    GAF_CHECK(a.random_inputs || s.required_inputs().empty(),
              "the model needs {} input(s): give --input-pb FILE... or --inputs DIR, or --random-inputs",
              s.required_inputs().size());
    inputs = tools::random_inputs(s.graph(), a.seed, tools::parse_dim_sizes(a.dims));
  }
  return inputs;
}

void save_tensors(const std::vector<Tensor>& ts, const std::vector<Value*>& values, const std::string& dir,
                  const char* kind) {
  tools::create_folder(dir, fmt::format("--save-{}s", kind));
  for (size_t i = 0; i < ts.size(); ++i)
    onnx_io::save_value(ts[i], values[i]->type,
                        (std::filesystem::path(dir) / fmt::format("{}_{}.pb", kind, i)).string(),
                        values[i]->name());
  std::cout << "wrote " << ts.size() << " " << kind << "(s) to " << dir << "\n";
}

// The model at `path`, `before_fusion` applied, fused in memory first at `opt_level` (> 0) with the rules file
// (or the environment's); the fusion summary printed unless `quiet`.
Model load_fused(const std::string& path, int opt_level, const std::string& rules, bool quiet,
                 const std::function<void(Model&)>& before_fusion = {}) {
  Model m = tools::read_model(path);
  if (before_fusion) before_fusion(m);
  if (opt_level > 0) {
    tools::FuseOptions opts;
    opts.fusion.opt_level = opt_level;
    opts.fusion.rules = FusionRules::from_env_or_file(rules);
    const std::string line = tools::fuse_model(m, opts).summary_line();
    if (!quiet) std::cout << line << "\n";
  }
  return m;
}

// run --device cuda: fused for the GPU at --opt-level, then the same report as on the CPU.
int cmd_run_cuda(const RunArgs& a) {
  if (std::string why = cuda::unavailable_reason(); !why.empty() && !a.dry_run)
    fail("--device cuda: {} (--dry-run plans and compiles the kernels without one)", why);
  Model m = tools::read_model(a.model);
  tools::FuseOptions opts;
  opts.fusion.opt_level = a.opt_level;
  opts.fusion.rules = FusionRules::from_env_or_file(a.rules);
  opts.target = Target::builtin_or_file("cuda-h200");
  if (a.opt_level > 0) std::cout << tools::fuse_model(m, opts).summary_line() << "\n";
  else m = tools::unfused_for_gpu(m);
  cuda::Options co;
  co.tf32 = opts.fusion.rules.precision_mode == PrecisionMode::Tf32;
  co.dry_run = a.dry_run;
  cuda::Session session(*m.graph, co);
  if (a.dry_run) {
    for (const cuda::Step& s : session.steps()) std::cout << s.node << ": " << s.how << "\n";
    std::cout << fmt::format("dry run: {} steps, {} generated kernels compiled for sm_90, arena {:.2f} MB\n",
                             session.steps().size(), session.generated_kernels(), session.arena_bytes() / 1e6);
    return 0;
  }
  std::vector<Tensor> inputs = given_inputs(a, *m.graph);
  if (inputs.empty()) {
    std::vector<const Value*> need;
    for (const Value* v : m.graph->inputs())
      if (!v->is_constant()) need.push_back(v);
    GAF_CHECK(a.random_inputs || need.empty(),
              "the model needs {} input(s): give --input-pb FILE... or --inputs DIR, or --random-inputs", need.size());
    inputs = tools::random_inputs(*m.graph, a.seed, tools::parse_dim_sizes(a.dims));
  }
  std::vector<Tensor> outs = session.run(inputs);
  const Graph& g = *m.graph;
  for (size_t i = 0; i < outs.size(); ++i) std::cout << g.outputs()[i]->name() << ": " << outs[i].to_string(8) << "\n";
  if (a.iterations > 0)
    std::cout << fmt::format("{}: median {:.3f} ms over {} runs (one CUDA graph, {} kernels per run); arena {:.2f} MB\n",
                             session.device_name(), session.median_ms(inputs, a.iterations, 3, true), a.iterations,
                             session.kernels_per_run(), session.arena_bytes() / 1e6);
  if (!a.save_outputs.empty()) save_tensors(outs, g.outputs(), a.save_outputs, "output");
  return 0;
}

int cmd_run(const RunArgs& a) {
  if (a.device == "cuda") return cmd_run_cuda(a);
  Model m = load_fused(a.model, a.opt_level, a.rules, false);
  runtime::Session session(*m.graph);
  std::vector<Tensor> inputs = gather_inputs(a, session);
  tools::Timing timing;
  std::vector<Tensor> outs = tools::time_runs(session, inputs, a.iterations, timing);
  const Graph& g = *m.graph;
  for (size_t i = 0; i < outs.size(); ++i)
    std::cout << g.outputs()[i]->name() << ": " << outs[i].to_string(8) << "\n";
  if (a.iterations > 0)
    std::cout << fmt::format("latency over {} runs: min {:.3f} ms, median {:.3f} ms; peak intermediate memory {:.2f} MB\n",
                             timing.iterations, timing.min_s * 1e3, timing.median_s * 1e3,
                             session.stats().peak_bytes / 1e6);
  if (!a.save_inputs.empty()) {
    std::vector<Value*> fed;
    for (Value* v : g.inputs())
      if (!v->is_constant()) fed.push_back(v);
    save_tensors(inputs, fed, a.save_inputs, "input");
  }
  if (!a.save_outputs.empty()) save_tensors(outs, g.outputs(), a.save_outputs, "output");
  return 0;
}

struct GenerateArgs {
  std::string model, prompt, rules;
  int tokens = 32;
  int opt_level = 3;
  bool progress = false;
  bool json = false;
  bool no_kv_cache = false;
  bool all_logits = false;
  int prefill_runs = 0;
};

// "1,2,3" or "1 2 3" -> ids; an error names the first entry that is not a token id.
std::vector<int64_t> parse_ids(const std::string& text) {
  std::vector<int64_t> ids;
  std::string cur;
  auto flush = [&] {
    if (cur.empty()) return;
    int64_t v = -1;
    auto [p, ec] = std::from_chars(cur.data(), cur.data() + cur.size(), v);
    GAF_CHECK(ec == std::errc() && p == cur.data() + cur.size() && v >= 0,
              "--prompt: '{}' is not a token id (a non-negative integer); give ids like --prompt 15496,995", cur);
    ids.push_back(v);
    cur.clear();
  };
  for (char c : text) {
    if (c == ',' || c == ' ') flush();
    else cur += c;
  }
  flush();
  return ids;
}

int cmd_generate(const GenerateArgs& a) {
  std::string full_logits;  // why every position's logits are computed, where they are
  Model m = load_fused(a.model, a.opt_level, a.rules, a.json, [&](Model& model) {
    if (!a.all_logits) full_logits = tools::keep_last_logits(model);
  });
  if (!a.json && a.all_logits) std::cout << "logits: every position (--all-logits)\n";
  else if (!a.json && !full_logits.empty()) std::cout << "logits: every position (" << full_logits << ")\n";
  runtime::Session session(std::move(m.graph));  // owned: the weights a kernel keeps packed are held once
  tools::GenerateOptions g;
  g.prompt = parse_ids(a.prompt);
  g.tokens = a.tokens;
  g.kv_cache = !a.no_kv_cache;
  g.prefill_runs = a.prefill_runs;
  if (a.progress)
    g.on_token = [&](int n, double s) {
      const int width = 30, done = width * n / a.tokens;
      std::cerr << fmt::format("\r[{}{}] {}/{} tokens, {:.1f} tokens/s", std::string(size_t(done), '#'),
                               std::string(size_t(width - done), ' '), n, a.tokens, s > 0 ? n / s : 0.0)
                << (n == a.tokens ? "\n" : "") << std::flush;
    };
  tools::GenerateResult r = tools::generate(session, g);
  if (a.json) std::cout << r.json();
  else std::cout << fmt::format("prompt: {} tokens; generated {} (greedy)\n", g.prompt.size(), r.ids.size()) << r.text();
  return 0;
}

struct FuseArgs {
  std::string input, output, fusion_rules = "all", rules, target = "cpu-host", report, dump_graph, emit_code;
  std::string device = "cpu", json;  // verify / bench: where the fused model runs; a JSON copy of the result
  int opt_level = 2;
  bool debug = false;
  bool force = false;
  bool external_data = false;
};

void add_fuse_options(CLI::App* app, FuseArgs& a, bool positional) {
  if (positional) app->add_option("model", a.input, "ONNX model to fuse");
  app->add_option("--input,-i", a.input, "ONNX model to fuse");
  app->add_option("--output,-o", a.output, "where to write the fused ONNX model");
  app->add_option("--fusion-rules", a.fusion_rules, "all | none")->check(CLI::IsMember({"all", "none"}));
  app->add_option("--rules", a.rules, "JSON rules file (else $GAF_FUSION_CONFIG / $ASCEND_FUSION_CONFIG)");
  app->add_option("--opt-level,-O", a.opt_level, "0 none, 1 rewrites, 2 + fusion, 3 + multi-output/horizontal")
      ->check(CLI::Range(0, 3));
  app->add_option("--target", a.target, "cpu-host | cuda-h200 | ascend910b | target.json");
  app->add_flag("--external-data", a.external_data,
                "write the weights to OUTPUT.data beside the model (ONNX external data; automatic past 1.5 GB)");
  app->add_option("--report", a.report,
                  "write the fusion report: r.html a self-contained HTML page (graphs, groups, code); any other "
                  "name JSON, with the HTML page beside it (r.json -> r.html)");
  app->add_option("--dump-graph", a.dump_graph, "write before/after graphs (DOT, SVG) to this folder");
  app->add_option("--emit-code", a.emit_code, "write each generated kernel as .cpp plus manifest.json here");
  app->add_option("--debug", a.debug, "keep debug info")->default_str("false")->expected(0, 1);
  app->add_flag("--force", a.force, "let --output replace the input model");
}

std::string env_dump_dir() {
  for (auto [flag, path] : {std::pair{"GAF_GRAPH_DUMP", "GAF_GRAPH_DUMP_PATH"},
                            std::pair{"ENABLE_NPU_GRAPH_DUMP", "NPU_GRAPH_DUMP_PATH"}}) {
    const char* f = std::getenv(flag);
    if (f && std::string(f) == "1") {
      const char* p = std::getenv(path);
      return p && *p ? p : "graph_dump";
    }
  }
  return "";
}

tools::FuseOptions fuse_options(const FuseArgs& a) {
  GAF_CHECK(!a.input.empty(), "give the model with --input MODEL");
  tools::FuseOptions opts;
  opts.fusion.opt_level = a.opt_level;
  opts.fusion.rules = FusionRules::from_env_or_file(a.rules);
  if (a.fusion_rules == "none") opts.fusion.rules.enable_fusion = false;
  opts.target = Target::builtin_or_file(a.target);
  opts.dump_dir = a.dump_graph.empty() ? env_dump_dir() : a.dump_graph;
  return opts;
}

// The same file by identity (a link or another spelling of the path counts), or by path when `out` does not exist.
bool same_file(const std::string& in, const std::string& out) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(out, ec)) return fs::equivalent(in, out, ec);
  return fs::weakly_canonical(in, ec) == fs::weakly_canonical(out, ec);
}

// --report: X.html is the HTML page; any other name the JSON report, the page beside it (X.json -> X.html).
std::pair<std::string, std::string> report_paths(const std::string& report) {
  namespace fs = std::filesystem;
  if (report.empty()) return {};
  if (fs::path(report).extension() == ".html") return {"", report};
  return {report, fs::path(report).replace_extension(".html").string()};
}

int cmd_fuse(const FuseArgs& a) {
  tools::FuseOptions opts = fuse_options(a);
  const auto [json_report, html_report] = report_paths(a.report);
  opts.keep_planned = !html_report.empty();
  GAF_CHECK(a.output.empty() || a.force || !same_file(a.input, a.output),
            "--output '{}' is the input model: the fused model would replace the original; write it elsewhere, or "
            "add --force",
            a.output);
  Model m = tools::read_model(a.input);
  tools::FuseResult r = tools::fuse_model(m, opts);
  std::cout << r.summary_line() << "\n";
  std::cout << fmt::format("kernels {} -> {}, modeled memory traffic {:.1f} MB -> {:.1f} MB, estimated time {:.3f} ms -> {:.3f} ms\n",
                           r.before.kernels, r.after.kernels, r.before.bytes / 1e6, r.after.bytes / 1e6,
                           r.before.time_s * 1e3, r.after.time_s * 1e3);
  // The model and the report are written together or not at all: a failed report leaves no fused model behind.
  std::vector<std::pair<std::string, std::string>> files;
  if (!a.output.empty()) {
    const PortableModel portable(m);  // our gaf-domain ops decomposed into standard ONNX
    onnx_io::check_model(portable);
    for (auto& f : onnx_io::serialize_model_files(
             portable, a.output, a.external_data ? onnx_io::ExternalData::Always : onnx_io::ExternalData::Auto))
      files.push_back(std::move(f));
  }
  if (!json_report.empty()) files.emplace_back(json_report, r.report_json(a.input, opts.target, a.opt_level));
  if (!html_report.empty())
    files.emplace_back(html_report, tools::report_html(tools::html_report_of(a.input, opts, r, *m.graph)));
  if (!a.emit_code.empty()) tools::create_folder(a.emit_code, "--emit-code");  // before anything is written
  onnx_io::write_files_atomic(files);
  for (const auto& f : files) std::cout << "wrote " << f.first << "\n";
  if (!a.emit_code.empty()) {
    int kernels = tools::emit_code(m, a.emit_code, a.debug);
    std::cout << "wrote " << kernels << " kernel source(s) and manifest.json to " << a.emit_code << "\n";
  }
  return 0;
}

std::vector<Tensor> inputs_for(const Model& m, const RunArgs& io) {
  std::vector<Tensor> inputs = given_inputs(io, *m.graph);
  return inputs.empty() ? tools::random_inputs(*m.graph, 0, tools::parse_dim_sizes(io.dims)) : inputs;
}

// --device cuda: the device is checked first, so a machine without one gets that one line, not a model error.
tools::FuseOptions cuda_fuse_options(const FuseArgs& a) {
  if (std::string why = cuda::unavailable_reason(); !why.empty()) fail("--device cuda: {}", why);
  tools::FuseOptions opts = fuse_options(a);
  if (a.target == "cpu-host") opts.target = Target::builtin_or_file("cuda-h200");
  return opts;
}

void write_json(const std::string& path, const std::string& text) {
  if (!path.empty()) onnx_io::write_file_atomic(path, text + "\n");
}

int cmd_verify(const FuseArgs& a, const RunArgs& io, double rtol, double atol) {
  if (a.device == "cuda") {
    tools::FuseOptions opts = cuda_fuse_options(a);
    Model m = tools::read_model(a.input);
    auto r = tools::verify_cuda(m, opts, inputs_for(m, io));
    std::cout << r.text();
    write_json(a.json, r.json());
    return r.ok ? 0 : 1;
  }
  tools::FuseOptions opts = fuse_options(a);
  Model m = tools::read_model(a.input);
  auto r = tools::verify_fusion(m, opts, inputs_for(m, io), rtol, atol);
  std::cout << r.text();
  return r.ok ? 0 : 1;
}

int cmd_explain(const FuseArgs& a, const std::string& node) {
  tools::FuseOptions opts = fuse_options(a);
  Model m = tools::read_model(a.input);
  if (!node.empty()) {
    std::vector<std::string> names;
    for (const Node* n : m.graph->nodes()) {
      names.push_back(n->name);
      for (int k = 0; k < n->num_outputs(); ++k) names.push_back(n->output(k)->name());
    }
    GAF_CHECK(std::find(names.begin(), names.end(), node) != names.end(),
              "explain --node '{}': no node or value of that name in '{}'{}", node, a.input, did_you_mean(node, names));
  }
  tools::FuseResult r = tools::fuse_model(m, opts);
  std::cout << tools::explain(r, node) << r.summary_line() << "\n";
  return 0;
}

int cmd_bench(const FuseArgs& a, const RunArgs& io, bool per_group) {
  if (a.device == "cuda") {
    GAF_CHECK(!per_group, "--per-group times the CPU runtime's groups; it does not apply to --device cuda");
    tools::FuseOptions opts = cuda_fuse_options(a);
    Model m = tools::read_model(a.input);
    auto r = tools::bench_cuda(m, opts, inputs_for(m, io), std::max(io.iterations, 1));
    std::cout << r.text();
    write_json(a.json, r.json());
    return 0;
  }
  tools::FuseOptions opts = fuse_options(a);
  Model m = tools::read_model(a.input);
  const std::vector<Tensor> inputs = inputs_for(m, io);
  auto r = tools::bench_fusion(m, opts, inputs, std::max(io.iterations, 1));
  std::cout << r.text();
  if (per_group)
    std::cout << "\n== per fused group: the cost model's time and the measured one (profiled node by node)\n"
              << tools::group_timing_text(tools::time_groups(m, opts, inputs, std::max(io.iterations, 1)));
  return 0;
}

int cmd_profile(const FuseArgs& a, const RunArgs& io, int top, const std::string& trace) {
  if (a.device == "cuda") {
    GAF_CHECK(trace.empty(), "--trace records the CPU runtime's node executions; it does not apply to --device cuda");
    tools::FuseOptions opts = cuda_fuse_options(a);
    Model m = tools::read_model(a.input);
    std::cout << tools::profile_cuda(m, opts, inputs_for(m, io), std::max(io.iterations, 1), top);
    return 0;
  }
  tools::FuseOptions opts = fuse_options(a);
  const auto [json_report, html_report] = report_paths(a.report);
  GAF_CHECK(json_report.empty(), "profile --report writes the HTML page with the measured times: give a name ending "
            "in .html (the JSON report comes from fuse --report)");
  Model m = tools::read_model(a.input);
  std::cout << tools::profile_fusion(m, opts, inputs_for(m, io), std::max(io.iterations, 1), top, trace,
                                     html_report);
  if (!html_report.empty()) std::cout << "wrote " << html_report << "\n";
  return 0;
}

// opt: named passes, text in and out (a developer's tool, like mlir-opt).
int cmd_opt(const std::string& input, const std::string& passes, const std::string& dump_after,
            const std::string& output) {
  Model m = tools::load_model_or_text(input);
  std::vector<std::string> names;
  std::stringstream list(passes);
  for (std::string p; std::getline(list, p, ',');)
    if (!p.empty()) names.push_back(p);
  tools::run_passes(m, names, dump_after, std::cout);
  if (output.empty()) {
    std::cout << tools::model_text(m) << "\n";
  } else if (output.size() >= 4 && output.compare(output.size() - 4, 4, ".txt") == 0) {
    onnx_io::write_file_atomic(output, tools::model_text(m) + "\n");
  } else {
    onnx_io::save_model(PortableModel(m), output);  // our ops decomposed into standard ONNX
  }
  return 0;
}

int cmd_demo() {
  Model m = tools::demo_transformer_block();
  std::cout << "Built-in model: " << m.graph->name << " (seq 128, d_model 256, 4 heads, d_ff 1024)\n";
  std::cout << tools::model_info(m);
  tools::FuseOptions opts;
  opts.fusion.opt_level = 3;
  Model fused = tools::copy_model(m);
  tools::FuseResult r = tools::fuse_model(fused, opts);
  std::cout << "\n== fusion (opt level 3, target cpu-host)\n" << r.summary_line() << "\n";
  std::cout << fmt::format("{:<28} {:>10} {:>10}\n{:<28} {:>10} {:>10}\n{:<28} {:>10.2f} {:>10.2f}\n"
                           "{:<28} {:>10.3f} {:>10.3f}\n{:<28} {:>10.2f} {:>10.2f}\n",
                           "", "before", "after", "kernels", r.before.kernels, r.after.kernels,
                           "modeled memory traffic (MB)", r.before.bytes / 1e6, r.after.bytes / 1e6,
                           "estimated time (ms)", r.before.time_s * 1e3, r.after.time_s * 1e3,
                           "modeled peak memory (MB)", r.before.peak_memory_bytes / 1e6, r.after.peak_memory_bytes / 1e6);
  auto counts = [](const std::map<std::string, int>& m) {
    std::vector<std::string> parts;
    for (const auto& [k, n] : m) parts.push_back(fmt::format("{} {}", k, n));
    return fmt::format("{}", fmt::join(parts, ", "));
  };
  std::map<std::string, int> reasons;
  for (const auto& d : r.decisions) ++reasons[std::string(reason_name(d.reason))];
  std::cout << "rewrites: " << counts(r.rewrites) << "\n"
            << "candidate decisions (graph-autofusion explain shows each): " << counts(reasons) << "\n"
            << "fused groups:\n";
  for (const auto& g : r.groups)
    std::cout << fmt::format("  {:<40} {:>2} ops, saves {:.2f} MB{}\n", g.name, g.ops.size(),
                             g.bytes_saved / 1e6, g.scope.empty() ? "" : " (in " + g.scope + ")");
  auto inputs = tools::random_inputs(*m.graph, 1);
  std::cout << "\n== verify (fused vs unfused, rtol 1e-4)\n" << tools::verify_fusion(m, opts, inputs, 1e-4, 1e-5).text();
  std::cout << "\n== measured (interleaved runs)\n" << tools::bench_fusion(m, opts, inputs, 20).text();
  return 0;
}

int cmd_compare(const std::string& actual, const std::string& expected, double rtol, double atol) {
  auto c = tools::compare(onnx_io::load_tensor(actual), onnx_io::load_tensor(expected), rtol, atol);
  std::cout << fmt::format("{}: max abs error {:.3g}, max rel error {:.3g}{}{}\n", c.ok ? "match" : "MISMATCH",
                           c.max_abs_err, c.max_rel_err, c.ok ? "" : "; first: ", c.message);
  return c.ok ? 0 : 1;
}

// --input-pb / --inputs of the commands that fuse and then run (seeded random inputs when neither is given).
void add_input_options(CLI::App* app, RunArgs& io) {
  app->add_option("--input-pb", io.input_pbs, "input TensorProto files (default: seeded random)");
  app->add_option("--inputs", io.input_dir, "folder with input_<i>.pb files");
  app->add_option("--dim", io.dims, kDimHelp);
}

// --max-memory of the commands that run a model (the limit of every session they build).
void add_memory_option(CLI::App* app, std::string& max_memory) {
  app->add_option(
      "--max-memory", max_memory,
      "the most memory a run may need (weights + intermediate tensors live at once, planned from the "
      "shapes before anything is allocated), e.g. 8G, 512M; default: the memory this machine has "
      "available");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"graph-autofusion: fuses the operators of ONNX models and runs them"};
  app.require_subcommand(0, 1);
  bool quiet = false;
  FuseArgs top_fuse;
  add_fuse_options(&app, top_fuse, false);
  FuseArgs fuse_args;
  auto* fuse = app.add_subcommand("fuse", "fuse a model (the same as the top-level --input form)");
  add_fuse_options(fuse, fuse_args, true);

  std::string info_model;
  auto* info = app.add_subcommand("info", "op histogram, parameters, inputs and outputs of a model");
  info->add_option("model", info_model, "ONNX model file")->required();

  RunArgs run_args;
  auto* run = app.add_subcommand("run", "run a model on the CPU runtime");
  run->add_option("model", run_args.model, "ONNX model file")->required();
  run->add_option("--input-pb", run_args.input_pbs, "TensorProto files, one per input in graph input order");
  run->add_option("--inputs", run_args.input_dir, "folder with input_<i>.pb files");
  run->add_flag("--random-inputs", run_args.random_inputs, "seeded random inputs");
  run->add_option("--seed", run_args.seed, "seed for --random-inputs");
  run->add_option("--dim", run_args.dims, kDimHelp);
  run->add_option("--save-inputs", run_args.save_inputs, "write the inputs run as input_<i>.pb files to this folder");
  run->add_option("--save-outputs", run_args.save_outputs, "write output_<i>.pb files to this folder");
  run->add_option("--iterations", run_args.iterations, "timed runs after one warm-up; prints min and median")
      ->check(count_at_least(0));
  run->add_option("--opt-level,-O", run_args.opt_level,
                  "fuse in memory first (rewrites, channels-last layout, generated kernels); 0 runs the file as is")
      ->check(CLI::Range(0, 3));
  run->add_option("--rules", run_args.rules, "with --opt-level: JSON rules file (else $GAF_FUSION_CONFIG)");
  run->add_option("--device", run_args.device, "cpu | cuda: where the model runs (cuda: fused for the GPU at "
                  "--opt-level, static shapes)")->check(CLI::IsMember({"cpu", "cuda"}));
  run->add_flag("--dry-run", run_args.dry_run, "with --device cuda: print the plan and compile its kernels; no GPU "
                "needed, nothing runs");

  auto* demo = app.add_subcommand("demo", "build, run and report the built-in transformer block");

  std::string calibrate_out;
  bool calibrate_quick = false;
  auto* calibrate = app.add_subcommand("calibrate", "measure this machine for the cost model and write a target "
                                                    "JSON (--target FILE plans with it)");
  calibrate->add_option("--output,-o", calibrate_out, "the target JSON to write (else printed)");
  calibrate->add_flag("--quick", calibrate_quick, "smaller sizes: a few seconds instead of about a minute");

  std::string opt_input, opt_passes, opt_dump_after, opt_output;
  auto* opt = app.add_subcommand("opt", "run named rewrite passes and print the model as ONNX text (like mlir-opt)");
  opt->add_option("model", opt_input, "ONNX model, or ONNX text (.txt)")->required();
  opt->add_option("--passes", opt_passes, "comma-separated pass names, run in order to a fixed point")->required();
  opt->add_option("--dump-after", opt_dump_after, "print the model after each run of this pass that changed it "
                  "(all: after every pass that did)");
  opt->add_option("--output,-o", opt_output, "write the result here instead (.txt: ONNX text with our ops; else "
                  "a portable .onnx)");

  int st_graphs = 200;
  uint64_t st_seed = 1;
  auto* selftest = app.add_subcommand("selftest", "random graphs: fused (generated kernels) vs unfused");
  selftest->add_flag("--quiet", quiet, "no progress lines on stderr");
  selftest->add_option("--graphs", st_graphs, "how many random graphs")->check(count_at_least(1));
  selftest->add_option("--seed", st_seed, "seed of the random family");

  FuseArgs verify_args;
  RunArgs verify_io;
  double rtol = 1e-3, atol = 1e-5;
  auto* verify = app.add_subcommand("verify", "fused vs unfused outputs; names the fused group of a mismatch");
  verify->add_flag("--quiet", quiet, "no progress lines on stderr");
  add_fuse_options(verify, verify_args, true);
  add_input_options(verify, verify_io);
  verify->add_option("--rtol", rtol)->check(non_negative_tolerance());
  verify->add_option("--device", verify_args.device, "cpu | cuda: cuda runs the fused model on the GPU and compares it "
                     "with the CPU's unfused fp32 run")->check(CLI::IsMember({"cpu", "cuda"}));
  verify->add_option("--json", verify_args.json, "with --device cuda: also write the result as JSON to this file");
  verify->add_option("--atol", atol)->check(non_negative_tolerance());

  FuseArgs explain_args;
  std::string explain_node;
  auto* explain = app.add_subcommand("explain", "why each candidate was or was not fused");
  add_fuse_options(explain, explain_args, true);
  explain->add_option("--node", explain_node, "only decisions touching this node or value");

  FuseArgs bench_args;
  RunArgs bench_io;
  bench_io.iterations = 20;
  auto* bench = app.add_subcommand("bench", "unfused vs fused, interleaved runs, median ratio");
  bench->add_flag("--quiet", quiet, "no progress lines on stderr");
  add_fuse_options(bench, bench_args, true);
  add_input_options(bench, bench_io);
  bench->add_option("--iterations,-n", bench_io.iterations, "runs of each variant");
  bool per_group = false;
  bench->add_flag("--per-group", per_group,
                  "also time each fused group against its members run one by one, beside the cost model's times, "
                  "and say where the signs of the benefit differ");
  bench->add_option("--device", bench_args.device, "cpu | cuda: cuda times the model op by op, fused, and fused in "
                    "one CUDA graph on the GPU")->check(CLI::IsMember({"cpu", "cuda"}));
  bench->add_option("--json", bench_args.json, "with --device cuda: also write the result as JSON to this file");

  FuseArgs profile_args;
  RunArgs profile_io;
  profile_io.iterations = 10;
  auto* profile = app.add_subcommand("profile", "time per node, unfused and fused: where the time goes");
  profile->add_flag("--quiet", quiet, "no progress lines on stderr");
  add_fuse_options(profile, profile_args, true);
  add_input_options(profile, profile_io);
  profile->add_option("--iterations", profile_io.iterations, "profiled runs of each variant");
  profile->add_option("--device", profile_args.device, "cpu | cuda: cuda times each step of the model fused for the "
                      "GPU")->check(CLI::IsMember({"cpu", "cuda"}));
  int profile_top = 15;
  profile
      ->add_option("--top", profile_top,
                   "most expensive nodes listed per variant (0: every node, in run order)")
      ->check(count_at_least(0));
  std::string profile_trace;
  profile->add_option("--trace", profile_trace, "also write the profiled runs' node executions to this file as a "
                      "Chrome trace (JSON; open in Perfetto or chrome://tracing)");

  GenerateArgs gen_args;
  auto* generate = app.add_subcommand(
      "generate", "greedy decoding with a decoder that takes past keys/values and returns presents: time to first "
                  "token, tokens/s, peak memory, the ids");
  generate->add_option("model", gen_args.model, "ONNX decoder (input_ids, past_* inputs, logits and present_* outputs)")
      ->required();
  generate->add_option("--prompt", gen_args.prompt, "prompt token ids, e.g. 15496,995")->required();
  generate->add_option("--tokens,-n", gen_args.tokens, "how many tokens to generate")
      ->check(count_at_least(1));
  generate->add_option("--opt-level,-O", gen_args.opt_level, "fuse in memory first at this level (0: run as is)")
      ->check(CLI::Range(0, 3));
  generate->add_option("--rules", gen_args.rules, "with --opt-level: JSON rules file (else $GAF_FUSION_CONFIG)");
  generate->add_flag("--progress", gen_args.progress, "a live progress bar on stderr");
  generate->add_flag("--json", gen_args.json, "print the result as one JSON object");
  generate->add_flag("--all-logits", gen_args.all_logits,
                     "compute the logits of every prompt position, as the model is exported (by default only the "
                     "last position's, which greedy decoding reads)");
  generate->add_flag("--no-kv-cache", gen_args.no_kv_cache,
                     "feed each present back as a new past tensor (the past copied every step) instead of keeping "
                     "keys and values in place");
  generate
      ->add_option("--prefill-runs", gen_args.prefill_runs,
                   "after generating, run the prompt's prefill this many times more on the warm session and report "
                   "their median (a server's prefill latency; time to first token is a fresh session's first run)")
      ->check(count_at_least(0));

  std::string cmp_actual, cmp_expected;
  double cmp_rtol = 1e-3, cmp_atol = 1e-5;
  auto* compare = app.add_subcommand("compare", "compare two TensorProto files within a tolerance");
  compare->add_option("actual", cmp_actual)->required();
  compare->add_option("expected", cmp_expected)->required();
  compare->add_option("--rtol", cmp_rtol)->check(non_negative_tolerance());
  compare->add_option("--atol", cmp_atol)->check(non_negative_tolerance());

  std::string max_memory;
  for (CLI::App* sub : {run, verify, bench, profile, generate}) add_memory_option(sub, max_memory);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    // A usage mistake: one line, exit status 2 (an error in a model or input file is 1).
    std::cerr << "error: " << e.what() << " (see " << argv[0] << " --help)\n";
    return 2;
  }
  if (!max_memory.empty()) {
    auto bytes = runtime::parse_bytes(max_memory);
    if (!bytes) {
      std::cerr << "error: --max-memory '" << max_memory
                << "' is not a size: write bytes or a number with K, M, G "
                << "or T (powers of 1024), e.g. 8G or 512M\n";
      return 1;
    }
    runtime::set_default_max_memory(*bytes);
  }
  tools::set_progress_quiet(quiet);
  tools::show_compile_progress();
  try {
    if (*fuse) return cmd_fuse(fuse_args);
    if (app.get_subcommands().empty()) {
      if (top_fuse.input.empty()) {
        std::cout << app.help();
        return 1;
      }
      return cmd_fuse(top_fuse);
    }
    if (*info) return cmd_info(info_model);
    if (*run) return cmd_run(run_args);
    if (*demo) return cmd_demo();
    if (*calibrate) {
      std::string report;
      const Target t = tools::calibrate(calibrate_quick, &report);
      std::cout << report;
      if (calibrate_out.empty()) {
        std::cout << t.to_json() << "\n";
      } else {
        onnx_io::write_file_atomic(calibrate_out, t.to_json() + "\n");
        std::cout << "wrote " << calibrate_out << ": plan with --target " << calibrate_out << "\n";
      }
      return 0;
    }
    if (*opt) return cmd_opt(opt_input, opt_passes, opt_dump_after, opt_output);
    if (*selftest) {
      auto r = tools::selftest(st_graphs, st_seed);
      for (const auto& f : r.failures) std::cout << "FAILED " << f << "\n";
      for (const auto& [why, n] : r.fallback_reasons) std::cout << fmt::format("  op by op ({}x): {}\n", n, why);
      std::cout << fmt::format("{} fused groups, {} of them generated kernels\nselftest: {} passed, {} failed\n",
                               r.fused_groups, r.generated_kernels, r.passed, r.failed);
      if (r.compile_errors)
        std::cout << fmt::format("{} fused group(s) lost their generated kernel to a compile error\n", r.compile_errors);
      return r.failed || r.compile_errors ? 1 : 0;
    }
    if (*verify) return cmd_verify(verify_args, verify_io, rtol, atol);
    if (*explain) return cmd_explain(explain_args, explain_node);
    if (*bench) return cmd_bench(bench_args, bench_io, per_group);
    if (*profile) return cmd_profile(profile_args, profile_io, profile_top, profile_trace);
    if (*compare) return cmd_compare(cmp_actual, cmp_expected, cmp_rtol, cmp_atol);
    if (*generate) return cmd_generate(gen_args);
  } catch (const gaf::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "error: out of memory: the model or its inputs need more memory than this machine gives; try "
                 "smaller inputs (--dim NAME=SIZE) or a machine with more memory\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
