// Library side of the CLI tools: everything the commands do lives here so tests and the CLI share one path.
#pragma once

#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "gaf/graph.h"
#include "gaf/session.h"

namespace gaf::tools {

// Op histogram, parameter count, inputs and outputs with shapes.
std::string model_info(const Model& model);

// Seeded random tensors for every required input of the graph. Symbolic or unknown dims take `dynamic_dim`.
std::vector<Tensor> random_inputs(const Graph& g, uint64_t seed = 0, int64_t dynamic_dim = 1);
// The same with a size per dim symbol ("seq" -> 256); other symbolic or unknown dims get `other`. Throws naming
// a symbol no input has.
std::vector<Tensor> random_inputs(const Graph& g, uint64_t seed, const std::map<std::string, int64_t>& dims,
                                  int64_t other = 1);
// "NAME=SIZE" (the CLI's --dim) -> symbol sizes; throws naming a malformed entry.
std::map<std::string, int64_t> parse_dim_sizes(const std::vector<std::string>& specs);
// input_<i>.pb files of a folder, in order; each read as the type of g's i-th input to feed (a sequence, an
// optional) when g is given, else as a tensor.
std::vector<Tensor> load_input_dir(const std::string& dir, const Graph* g = nullptr);

struct Timing {
  double min_s = 0, median_s = 0;
  int iterations = 0;
};
// Runs `iterations` times after one warm-up run; returns the outputs of the last run.
std::vector<Tensor> time_runs(runtime::Session& s, const std::vector<Tensor>& inputs, int iterations,
                              Timing& timing);

// Largest |a-b| / (atol + rtol*|b|) over all elements: <= 1 means within tolerance. Shapes and dtypes must match.
struct Comparison {
  bool ok = true;
  double max_abs_err = 0, max_rel_err = 0;
  std::string message;  // first mismatch, for humans
};
Comparison compare(const Tensor& actual, const Tensor& expected, double rtol, double atol);

// The built-in demo: a small pre-LayerNorm transformer block built with the IR builder (decomposed LayerNorm,
// attention and GELU as exporters write them).
Model demo_transformer_block(int64_t seq = 128, int64_t d_model = 256, int64_t heads = 4, int64_t d_ff = 1024);

}  // namespace gaf::tools

#include "gaf/fusion.h"
#include "gaf/passes.h"

namespace gaf::tools {

struct FuseOptions {
  FusionOptions fusion;
  Target target = Target::cpu_host();
  std::string dump_dir;  // before/after DOT (+ SVG when graphviz is installed), per-pass text dumps
  bool keep_planned = false;  // FuseResult::planned: a copy of the graph the planner saw (for the HTML report)
};

struct FuseResult {
  GraphCost before, after;
  std::vector<GroupSummary> groups;
  std::vector<DecisionRecord> decisions;
  std::map<std::string, int> rewrites;
  std::vector<NearMiss> near_misses;  // recognition patterns started and given up on, anchors still in the graph
  // Products whose precision the mode changed: weights stored compressed (CPU), 16-bit operands (CUDA).
  std::vector<std::string> precision_changes;
  size_t candidates = 0;
  std::shared_ptr<const Model> planned;  // with FuseOptions::keep_planned: the model after rewrites, before fusion
  std::string summary_line() const;  // "Found N operators, C fusion candidates. Estimated benefit: ..."
  std::string report_json(const std::string& model_name, const Target& target, int opt_level) const;
};

// The fusion report as one self-contained HTML page (fuse --report r.html): the summary table (nodes, kernels,
// modeled traffic, estimated time and peak memory before and after), the fused groups, the rewrites that fired and
// the near misses, and the graph the planner saw and the fused graph as inline SVG; a click on a fused group (a
// dashed cluster before, one node after) or a node shows its members, the decisions on its edges with their
// reasons, its modeled benefit and its generated kernel's code. Measured times appear when given. No network.
struct HtmlReport {
  std::string model_name, target_name;
  int opt_level = 0;
  const FuseResult* result = nullptr;
  const Graph* planned = nullptr;  // FuseResult::planned's graph; none: only the fused graph is drawn
  const Graph* fused = nullptr;
  std::vector<std::pair<std::string, std::string>> measured;     // what was measured, and the figure
  std::map<std::string, double> node_ms_unfused, node_ms_fused;  // measured ms per run, by node name
};
std::string report_html(const HtmlReport& r);
// The report of `r` (fused with `opts`, FuseOptions::keep_planned for the planned graph) whose fused graph is
// `fused`; measured times are left to the caller.
HtmlReport html_report_of(std::string model_name, const FuseOptions& opts, const FuseResult& r, const Graph& fused);

// Rewrites (opt >= 1), plans and applies fusion (opt >= 2) on the model in place.
FuseResult fuse_model(Model& model, const FuseOptions& opts);

// Writes one readable .cpp per generated kernel (named after its group, the original nodes in a header comment)
// and manifest.json (group -> file -> original nodes; anchor groups -> their oneDNN post-op form; groups without a
// kernel -> why). `debug` keeps node names as variable names. Returns the number of files written.
int emit_code(const Model& fused, const std::string& dir, bool debug);

// Creates `dir` and its parents for the command-line option `option` (e.g. "--emit-code"); a gaf::Error
// naming both when it cannot (a parent that is a file, no permission).
void create_folder(const std::string& dir, std::string_view option);

}  // namespace gaf::tools

namespace gaf::tools {

// How far a precision mode may move an output from the fp32 result, relative to its largest magnitude: TF32
// products 1e-2; bfloat16 (compressed weights on the CPU, 16-bit storage on the GPU) 2e-2; float16 storage 1e-2;
// int8 weights 5e-2; fp32 0.
double precision_tolerance(PrecisionMode mode);

struct VerifyResult {
  bool ok = true;
  std::vector<std::string> outputs;    // one line per graph output: name, max errors, verdict
  std::vector<std::string> culprits;   // fused groups whose outputs differ given exact inputs (bisect)
  std::vector<std::string> unchecked;  // fused groups the bisection could not run alone, each with why
  std::string rule;         // a rules file (JSON) under which fused and unfused outputs match; "" if none
  std::string rule_effect;  // what `rule` does, checked by fusing and running again
  std::string tolerance;    // what "match" meant (precision modes and fp16/bf16 outputs widen it)
  std::string text() const;
};
// Fuses a copy of `model` with `opts`, runs both on `inputs` (random when empty) and compares every output.
// On a mismatch it runs each fused group alone on the unfused run's values to name the groups responsible
// (and says why for each group it cannot run so), then looks for a rule that avoids the mismatch: forbidding
// one edge of a responsible group, or skipping its nodes, each tried by fusing and comparing again. float16
// and bfloat16 outputs are compared with at least 4 machine epsilons of their type (relative, and absolute
// against the output's largest magnitude): unfused, each op rounds to the type; a fused group rounds once, at
// its end.
VerifyResult verify_fusion(const Model& model, const FuseOptions& opts, std::vector<Tensor> inputs, double rtol,
                           double atol);

struct BenchResult {
  Timing unfused, fused;
  size_t unfused_kernels = 0, fused_kernels = 0;
  size_t generated = 0;                           // fused nodes running as generated kernels
  codegen::CompileStats compile;  // how the fused session built them (cold, or from the cache)
  std::map<std::string, std::string> fallbacks;   // fused nodes running op by op, with the reason
  double max_rel_err = 0;  // max |fused - unfused| / max |unfused| over the outputs of one run
  double ratio() const { return fused.median_s > 0 ? unfused.median_s / fused.median_s : 0; }
  std::string text() const;
};
// Times the unfused and fused model interleaved (alternating runs) so machine noise hits both alike; both
// sessions are built with `session` (adapt_threads false: every run on OpenMP's thread count, for kernel
// timings that do not depend on what the thread chooser saw).
BenchResult bench_fusion(const Model& model, const FuseOptions& opts, const std::vector<Tensor>& inputs,
                         int iterations, const runtime::SessionOptions& session = {});

// Each fused group's modeled and measured time, unfused (its members one kernel each) and fused (one kernel):
// whether the cost model's sign of the benefit is the measured one. The unfused side is the graph the planner saw
// (after the rewrites, so the members are its nodes), both sides profiled node by node on OpenMP's thread count
// (`iterations` runs each after one warm-up, alternating; a node's time is its mean per run). Groups inside subgraphs are
// listed, not timed (their bodies run per iteration of their Loop or Scan).
struct GroupTiming {
  std::string name, scope;
  std::vector<std::string> ops;
  double modeled_unfused_s = 0, modeled_fused_s = 0;
  double measured_unfused_s = 0, measured_fused_s = 0;
  bool timed = false;  // the fused node and every member were found in the profiles
  double modeled_benefit_s() const { return modeled_unfused_s - modeled_fused_s; }
  double measured_benefit_s() const { return measured_unfused_s - measured_fused_s; }
  bool signs_agree() const { return (modeled_benefit_s() > 0) == (measured_benefit_s() > 0); }
  // Fused and unfused measured within 5% of each other: closer than per-node timings repeat on a shared
  // machine, so no sign is judged.
  bool within_noise() const { return std::abs(measured_benefit_s()) < 0.05 * measured_unfused_s; }
};
std::vector<GroupTiming> time_groups(const Model& model, const FuseOptions& opts, const std::vector<Tensor>& inputs,
                                     int iterations);
// The table of time_groups (one line per group: modeled and measured unfused / fused time, their ratios, and
// "DISAGREES" where the signs differ) and a line counting agreements.
std::string group_timing_text(const std::vector<GroupTiming>& groups);

// Per-node time of `model` unfused and fused with `opts` (`iterations` profiled runs each after one warm-up):
// the `top` most expensive nodes of each (every node in run order when `top` is 0) and totals by op type, as a
// text table.
std::string profile_fusion(const Model& model, const FuseOptions& opts, const std::vector<Tensor>& inputs,
                           int iterations, int top = 15);
// As above, and also writes the profiled runs to `trace_path` (atomically) as Chrome trace-event JSON, the format
// Perfetto and chrome://tracing load: one complete ("X") event per node execution, measured start and duration in
// microseconds from the start of that variant's first profiled run; the unfused model is process 1 ("unfused"),
// the fused one process 2 ("fused"), each on the thread that ran it. Args: op_type, member op types of a fused
// node, input and output bytes, iteration. At most kMaxTraceEvents events per variant: later runs are left out,
// and the file's otherData counts them.
inline constexpr size_t kMaxTraceEvents = 500000;
std::string profile_fusion(const Model& model, const FuseOptions& opts, const std::vector<Tensor>& inputs,
                           int iterations, int top, const std::string& trace_path);
// As above, and also writes the HTML report (report_html) with the measured times to `html_path` (when not empty):
// per run unfused and fused, and each node's time on the graphs (nodes of the planned graph measured under their
// own name in the unfused run).
std::string profile_fusion(const Model& model, const FuseOptions& opts, const std::vector<Tensor>& inputs,
                           int iterations, int top, const std::string& trace_path, const std::string& html_path);

// Human-readable decision log, optionally only the decisions touching `node` (a node or value name).
std::string explain(const FuseResult& r, const std::string& node = "");

// Deep copy of a model through its ONNX form (fused bodies typed again: infer_fused_body_shapes).
Model copy_model(const Model& m);
// A model file as the CLI and the Python module read it: the ONNX frontend's import, then our shape inference inside
// the fused bodies of a model we wrote (infer_fused_body_shapes).
Model read_model(const std::string& path);

}  // namespace gaf::tools

namespace gaf::tools {

// Differential self-test: seeded random graphs (elementwise, broadcast, reductions, softmax, MatMul anchors with
// epilogues, multi-consumer values, symbolic batch dims, fp16 regions) run unfused and fused at opt level 3 with
// generated kernels; every output must agree. Graphs are checked in batches (disjoint subgraphs of one model, so
// one kernel compilation serves a batch). A failing graph is shrunk to the fewest nodes that still fail and
// reported as ONNX text.
struct SelftestResult {
  int graphs = 0, passed = 0, failed = 0;
  size_t fused_groups = 0, generated_kernels = 0;  // over all batches: what the check exercised
  std::vector<std::string> failures;  // seed, error and a reproducer in ONNX text
  std::map<std::string, int> fallback_reasons;  // why fused groups ran op by op (first words), with counts
  int compile_errors = 0;  // generated translation units the compiler rejected (an emitter bug)
};
SelftestResult selftest(int graphs, uint64_t seed, int batch = 100);

// Graph `index` of the random family of `seed` with `nodes` nodes, as ONNX text.
std::string random_graph_text(uint64_t seed, int index, int nodes);

}  // namespace gaf::tools

namespace gaf::tools {

// Greedy decoding with a decoder that takes its past keys/values as inputs and returns presents (the form
// torch.onnx.export and Optimum give LLMs): token ids in "input_ids" (or the first int64 input of rank 2), pasts
// the float inputs whose names contain "past" and presents the outputs whose names contain "present", paired in
// order; logits the output "logits" (or the first). An "attention_mask" input gets ones over past + new tokens,
// a "position_ids" input the positions. The first run is the prefill of the whole prompt with empty pasts; each
// step after it feeds the newest token and the presents back as pasts. Batch 1.
struct GenerateOptions {
  std::vector<int64_t> prompt;
  int tokens = 16;  // how many to generate (the prefill gives the first)
  // Keys and values in place (Session::enable_kv_cache with room for prompt + tokens): no step copies the past.
  bool kv_cache = true;
  // Called after each token with (tokens so far, seconds since the start); for a progress display.
  std::function<void(int, double)> on_token;
  // After the loop, the prompt's prefill this many times more on the warm session (a server's prefill latency,
  // where prefill_s is a fresh session's first run).
  int prefill_runs = 0;
};
struct GenerateResult {
  std::vector<int64_t> ids;        // the generated tokens (not the prompt)
  double prefill_s = 0;            // time to the first token
  std::vector<double> prefill_warm_s;  // GenerateOptions::prefill_runs
  std::vector<double> step_s;      // each decode step after the prefill
  size_t peak_rss_bytes = 0;       // of the process, at the end
  // The process's resident memory at the end (Linux; 0 elsewhere): anonymous pages (the data: weights, cache,
  // activations, the heap) and pages of mapped files (the program's code and libraries, shared between processes).
  size_t rss_anon_bytes = 0, rss_file_bytes = 0;
  size_t pool_bytes = 0;           // the session's buffer pool after the last step
  size_t kv_pairs = 0;             // past/present pairs kept in place (0: pasts fed as tensors)
  size_t kv_cache_bytes = 0;       // their buffers
  size_t weights_bytes = 0;        // the model's constants
  size_t released_bytes = 0;       // of those, held only in kernels' own form (Session::released_weight_bytes)
  int threads = 0;  // the threads the last step ran on (the session adapts them to the machine's load)
  int64_t prefill_logits_rows = 0;  // positions the prefill's logits held (1 after keep_last_logits)
  double tokens_per_s() const;     // decode steps over their total time
  double median_step_s() const;
  double median_prefill_warm_s() const;  // 0 without prefill_runs
  // The first of them: a new prompt right after the loop (0 without prefill_runs).
  double prefill_after_steps_s() const { return prefill_warm_s.empty() ? 0 : prefill_warm_s.front(); }
  // The median of `count` steps from step `first` (fewer where there are fewer; 0 for none), of the first n and
  // of the last n: a loop that slows as its past grows shows it as last over first.
  double median_step_s(size_t first, size_t count) const;
  double median_first_steps_s(size_t n) const;
  double median_last_steps_s(size_t n) const;
  std::string text() const;        // the summary generate prints
  std::string json() const;        // the same as one JSON object (generate --json)
};
// Throws gaf::Error naming what the model lacks (no token input, pasts and presents that do not pair up, ...).
GenerateResult generate(runtime::Session& session, const GenerateOptions& opts);
// Only the logits greedy decoding reads, the last position's: the MatMul that makes the logits output ("logits",
// or the first output), a [B, S, D] input times a constant [D, V] (plus a constant bias), takes the last position
// of its input (a Slice along axis 1 put before it), so a prompt's prefill skips the vocabulary product of every
// other position and the logits come out [B, 1, V]. Before fusion. Returns "" where it did so, else why not,
// the model left as it was.
std::string keep_last_logits(Model& m);

}  // namespace gaf::tools

namespace gaf::tools {

// Progress of long work (bench, verify, profile, selftest) on stderr: one line rewritten in place on a
// terminal, a plain line per tenth of the work otherwise, nothing after set_progress_quiet(true) (the CLI's
// --quiet). Progress of the kernel compiler on a cold cache (a model's generated kernels, the translation
// units the cache lacks): a line when it starts and one when it is done, with the same rules as Progress
// (nothing after set_progress_quiet(true)). The CLI installs it once (codegen::set_compile_observer).
void show_compile_progress();

class Progress {
 public:
  Progress(std::string label, int64_t total);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  void step(int64_t done);  // `done` of the total are finished

 private:
  std::string label_;
  int64_t total_;
  bool tty_;
  bool shown_ = false;
  int64_t last_tenth_ = -1;
};
void set_progress_quiet(bool quiet);
void set_progress_stream(std::ostream* os);  // plain lines to `os` instead of stderr (tests); null: stderr

// graph-autofusion opt. The model as ONNX text (onnx/defs/printer.h; our gaf ops kept as they are).
std::string model_text(const Model& m);
// A model file (read_model), or ONNX text when the name ends in .txt.
Model load_model_or_text(const std::string& path);
// Runs the named rewrite passes (PassManager::known_passes) in order, to a fixed point as the pipeline does;
// after each pass that changed the graph and is `dump_after` (or every one, "all") writes "# after PASS" and the
// model text to `dumps`. Returns the number of dumps. An unknown name is an error listing the known ones.
int run_passes(Model& m, const std::vector<std::string>& passes, const std::string& dump_after, std::ostream& dumps);

// graph-autofusion calibrate: this machine's copy bandwidth (all cores, read + write), fp32 GEMM rate, elementwise
// rate of a fused kernel, per-op dispatch cost and L2 size, measured (best of several runs; `quick`: smaller sizes,
// a few seconds) into a target named "calibrated" that otherwise keeps cpu-host's settings; `report` gets a table.
// Target::to_json() writes it for --target FILE.
Target calibrate(bool quick, std::string* report);

// A copy of `model` to run op by op on the GPU: constants and static shape arithmetic folded (the device runs no
// int64 size computations), nothing rewritten or fused.
Model unfused_for_gpu(const Model& model);

// --device cuda. The reference is always the CPU runtime's fp32 run of the unfused model on the same inputs.
struct CudaVerifyResult {
  bool ok = true;
  std::string device, tolerance;
  struct Output {
    std::string name;
    double max_abs = 0, scale = 0;  // largest |cuda - cpu|, largest |cpu|
    bool ok = true;
  };
  std::vector<Output> outputs;
  std::vector<std::string> plan;  // one line per step of the fused model on the device
  std::string culprit;            // on a mismatch: the first intermediate value that differs, its node and step
  std::string text() const;
  std::string json() const;
};
// Fuses a copy of `model` for the GPU (no channels-last layout), runs it with the CUDA backend and compares every
// output with the CPU's unfused fp32 run: |cuda - cpu| <= tol * max|cpu| per output, tol 1e-5 (fp32) or 1e-2
// (precision_mode tf32). On a mismatch every intermediate value of the fused graph is compared (device against
// the CPU runtime running the same fused graph) and the first that differs is named with its node and step.
CudaVerifyResult verify_cuda(const Model& model, const FuseOptions& opts, std::vector<Tensor> inputs);

struct CudaBenchResult {
  std::string device;
  double unfused_ms = 0, fused_ms = 0, fused_graph_ms = 0;  // medians (CUDA events)
  size_t unfused_kernels = 0, fused_kernels = 0, unfused_steps = 0, fused_steps = 0, generated = 0;
  size_t arena_bytes = 0;
  int iterations = 0;
  double max_rel_err = 0;  // fused vs unfused on the device, relative to the output's scale
  std::string capture_error;  // why the fused schedule runs without a CUDA graph, if it does
  std::vector<std::string> plan;  // the fused model's steps
  std::string text() const;
  std::string json() const;
};
// The model on the device op by op (only constants folded: every op its own kernel or library call), fused, and
// fused replayed as one CUDA graph: the medians of `iterations` timed runs of each after warm-up.
CudaBenchResult bench_cuda(const Model& model, const FuseOptions& opts, const std::vector<Tensor>& inputs,
                           int iterations);
// Time per step of the model fused for the GPU (CUDA events between steps, medians of `iterations` runs): the
// `top` most expensive steps (every step in run order when 0), with how each runs, and the totals by how.
std::string profile_cuda(const Model& model, const FuseOptions& opts, const std::vector<Tensor>& inputs, int iterations,
                         int top);

}  // namespace gaf::tools
