// Greedy generation with a past/present decoder (see tools.h): the loop a user writes around an exported LLM.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <limits>
#include <string>

#include "gaf/status.h"
#include "gaf/tools.h"

namespace gaf::tools {

namespace {

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// What the loop feeds and reads, found by name.
struct DecoderIO {
  const Value* ids = nullptr;
  const Value* attention_mask = nullptr;
  const Value* position_ids = nullptr;
  std::vector<const Value*> pasts;
  int logits = 0;
  std::vector<int> presents;                     // output index per past
  std::vector<size_t> past_axis;                 // the sequence axis of each past
  std::vector<std::vector<int64_t>> empty_past;  // each past's dims with no tokens
};

DecoderIO find_io(const runtime::Session& s) {
  const Graph& g = s.graph();
  DecoderIO io;
  for (const Value* v : s.required_inputs()) {
    const std::string& n = v->name();
    const bool int_input = v->type.dtype == DType::Int64 || v->type.dtype == DType::Int32;
    if (n == "input_ids" || (!io.ids && int_input && v->type.shape && v->type.shape->size() == 2 &&
                             !contains(n, "mask") && !contains(n, "position")))
      io.ids = v;
    else if (n == "attention_mask")
      io.attention_mask = v;
    else if (n == "position_ids")
      io.position_ids = v;
    else if (contains(n, "past"))
      io.pasts.push_back(v);
    else
      fail("generate: input '{}' is neither input_ids, attention_mask, position_ids nor a past", n);
  }
  GAF_CHECK(io.ids, "generate: the model has no token input (input_ids, or an int64 input of rank 2)");
  GAF_CHECK(io.ids->type.dtype == DType::Int64, "generate: token input '{}' is {}, expected int64",
            io.ids->name(), dtype_name(io.ids->type.dtype));
  for (int i = 0; i < int(g.outputs().size()); ++i) {
    const std::string& n = g.outputs()[size_t(i)]->name();
    if (n == "logits") io.logits = i;
    if (contains(n, "present")) io.presents.push_back(i);
  }
  GAF_CHECK(io.pasts.size() == io.presents.size(),
            "generate: {} past input(s) but {} present output(s): each past must have its present",
            io.pasts.size(), io.presents.size());
  const Shape ids_shape = io.ids->type.shape.value_or(Shape{});
  const Dim batch = ids_shape.empty() ? Dim() : ids_shape[0];
  for (const Value* p : io.pasts) {
    GAF_CHECK(p->type.shape, "generate: the rank of past input '{}' is unknown", p->name());
    std::vector<int64_t> dims;
    std::optional<size_t> axis;
    for (size_t d = 0; d < p->type.shape->size(); ++d) {
      const Dim& x = (*p->type.shape)[d];
      if (x.is_static())
        dims.push_back(d == 0 ? 1 : x.value());
      else if (d == 0 || (batch.is_symbol() && x == batch))
        dims.push_back(1);
      else if (!axis)
        axis = d, dims.push_back(0);
      else
        fail("generate: past input '{}' has more than one dynamic dim besides the batch", p->name());
    }
    GAF_CHECK(axis, "generate: past input '{}' has no dynamic sequence dim (its shape is fixed)", p->name());
    io.past_axis.push_back(*axis);
    io.empty_past.push_back(dims);
  }
  return io;
}

int64_t argmax_last(const Tensor& logits) {
  GAF_CHECK(logits.dtype() == DType::Float && logits.rank() >= 2,
            "generate: logits are {}{}, expected float [.., vocab]", dtype_name(logits.dtype()),
            dims_to_string(logits.dims()));
  const int64_t vocab = logits.dim(-1);
  const float* row = logits.data<float>() + (logits.numel() - vocab);
  return std::max_element(row, row + vocab) - row;
}

Tensor int_tensor(DType t, std::vector<int64_t> dims, const std::vector<int64_t>& v) {
  Tensor r(t, std::move(dims));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DType::Int64)
      r.data<int64_t>()[i] = v[i];
    else
      r.data<int32_t>()[i] = int32_t(v[i]);
  }
  return r;
}

size_t peak_rss() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return size_t(u.ru_maxrss) * 1024;
}

// The process's resident memory now, split as Linux counts it (/proc/self/status): anonymous pages (the heap,
// the weights' and the cache's mappings: the data) and pages of mapped files (the program's code and its
// libraries, shared with every process that runs them). Zeros where the file is not there.
void resident_now(size_t& anon, size_t& file) {
  std::ifstream status("/proc/self/status");
  std::string key;
  size_t kb = 0;
  while (status >> key) {
    if ((key == "RssAnon:" || key == "RssFile:") && status >> kb)
      (key == "RssAnon:" ? anon : file) = kb * 1024;
    status.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
}

}  // namespace

std::string keep_last_logits(Model& m) {
  Graph& g = *m.graph;
  if (g.outputs().empty()) return "the model has no outputs";
  Value* logits = g.outputs().front();
  for (Value* v : g.outputs())
    if (v->name() == "logits") logits = v;
  const auto is_constant = [](const Value* v) { return v && v->is_constant(); };
  Node* mm = logits->producer();
  Node* bias = nullptr;
  if (mm && mm->op_type == "Add" && mm->domain.empty() && mm->num_inputs() == 2) {
    const int c = is_constant(mm->input(1)) ? 1 : is_constant(mm->input(0)) ? 0 : -1;
    const Value* b = c < 0 ? nullptr : mm->input(c);
    if (b && b->type.shape && b->type.shape->size() <= 1 && mm->input(1 - c)->uses().size() == 1) {
      bias = mm;
      mm = mm->input(1 - c)->producer();
    }
  }
  if (!mm || mm->op_type != "MatMul" || !mm->domain.empty())
    return fmt::format("'{}' is not made by a MatMul (times a constant, plus a bias)", logits->name());
  Value* h = mm->input(0);
  const Value* w = mm->input(1);
  if (!is_constant(w) || !w->type.shape || w->type.shape->size() != 2)
    return fmt::format("the MatMul making '{}' ({}) does not multiply by a constant matrix", logits->name(),
                       mm->name);
  if (!h->type.shape || h->type.shape->size() != 3)
    return fmt::format("the MatMul making '{}' ({}) reads {}, not [batch, sequence, features]", logits->name(),
                       mm->name, h->type.to_string());
  if (m.opsets.count("") && m.opsets.at("") < 10) return "the model's opset is below 10 (Slice with inputs)";
  if (!logits->uses().empty()) return fmt::format("'{}' is also read inside the model", logits->name());
  auto scalar = [&](const std::string& name, int64_t v) {
    return g.add_constant(g.unique_name(name), Tensor::from<int64_t>({1}, std::span<const int64_t>(&v, 1)));
  };
  Value* starts = scalar("last_position_starts", -1);
  Value* ends = scalar("last_position_ends", std::numeric_limits<int64_t>::max());
  Value* axes = scalar("last_position_axes", 1);
  Node* slice = g.insert_node_before(mm, "Slice", {h, starts, ends, axes}, {g.unique_name(h->name() + "_last")},
                                     g.unique_name(mm->name + "_last_position"));
  slice->opset = mm->opset;
  Value* last = slice->output(0);
  last->type = h->type;
  (*last->type.shape)[1] = Dim(1);
  mm->set_input(0, last);
  for (Value* v : {mm->output(0), bias ? bias->output(0) : nullptr})
    if (v && v->type.shape && v->type.shape->size() == 3) (*v->type.shape)[1] = Dim(1);
  verify(g);
  return "";
}

GenerateResult generate(runtime::Session& session, const GenerateOptions& opts) {
  GAF_CHECK(!opts.prompt.empty(), "generate: the prompt is empty: give at least one token id");
  GAF_CHECK(opts.tokens >= 1, "generate: --tokens must be at least 1 (got {})", opts.tokens);
  const DecoderIO io = find_io(session);
  GenerateResult r;
  if (opts.kv_cache) r.kv_pairs = session.enable_kv_cache(int64_t(opts.prompt.size()) + opts.tokens).size();
  std::vector<Tensor> pasts;
  for (const auto& d : io.empty_past) pasts.emplace_back(DType::Float, d);
  std::vector<int64_t> feed = opts.prompt;
  int64_t past_len = 0;
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  // One run's inputs: the tokens fed after past_len positions.
  auto inputs = [&](const std::vector<int64_t>& tokens, int64_t past) {
    std::map<std::string, Tensor> in;
    const int64_t n = int64_t(tokens.size());
    in.emplace(io.ids->name(), int_tensor(DType::Int64, {1, n}, tokens));
    if (io.attention_mask)
      in.emplace(io.attention_mask->name(), int_tensor(io.attention_mask->type.dtype, {1, past + n},
                                                       std::vector<int64_t>(size_t(past + n), 1)));
    if (io.position_ids) {
      std::vector<int64_t> pos(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) pos[size_t(i)] = past + i;
      in.emplace(io.position_ids->name(), int_tensor(io.position_ids->type.dtype, {1, n}, pos));
    }
    return in;
  };
  for (int t = 0; t < opts.tokens; ++t) {
    std::map<std::string, Tensor> in = inputs(feed, past_len);
    const int64_t n = int64_t(feed.size());
    for (size_t k = 0; k < pasts.size(); ++k) in.insert_or_assign(io.pasts[k]->name(), std::move(pasts[k]));
    const auto t0 = clock::now();
    std::vector<Tensor> outs = session.run(in);
    const Tensor& logits = outs[size_t(io.logits)];
    const int64_t next = argmax_last(logits);
    const double dt = std::chrono::duration<double>(clock::now() - t0).count();
    if (t == 0) {
      r.prefill_s = dt;
      r.prefill_logits_rows = logits.numel() / std::max<int64_t>(1, logits.dim(-1));
    } else {
      r.step_s.push_back(dt);
    }
    for (size_t k = 0; k < pasts.size(); ++k) {
      Tensor& p = outs[size_t(io.presents[k])];
      GAF_CHECK(
          p.rank() == int64_t(io.empty_past[k].size()) && p.dim(int64_t(io.past_axis[k])) == past_len + n,
          "generate: present output '{}' is {}, expected {} tokens along axis {} (past {} + new {})",
          session.graph().outputs()[size_t(io.presents[k])]->name(), dims_to_string(p.dims()), past_len + n,
          io.past_axis[k], past_len, n);
      pasts[k] = std::move(p);
    }
    past_len += n;
    r.ids.push_back(next);
    feed = {next};
    if (opts.on_token) opts.on_token(t + 1, std::chrono::duration<double>(clock::now() - start).count());
  }
  // The prompt's prefill again on the warm session, each from empty pasts (with the cache in place, a rewind),
  // the loop's last presents let go first as a caller starting a new prompt would.
  pasts.clear();
  for (int i = 0; i < opts.prefill_runs; ++i) {
    std::map<std::string, Tensor> in = inputs(opts.prompt, 0);
    for (size_t k = 0; k < io.pasts.size(); ++k) in.emplace(io.pasts[k]->name(), Tensor(DType::Float, io.empty_past[k]));
    const auto t0 = clock::now();
    std::vector<Tensor> outs = session.run(in);
    argmax_last(outs[size_t(io.logits)]);
    r.prefill_warm_s.push_back(std::chrono::duration<double>(clock::now() - t0).count());
  }
  resident_now(r.rss_anon_bytes, r.rss_file_bytes);
  // The kernel's high-water mark is kept from batched per-thread counts and can trail the count now by a few
  // hundred KB (seen: 0.2 MB): a peak below the current count would be no peak.
  r.peak_rss_bytes = std::max(peak_rss(), r.rss_anon_bytes + r.rss_file_bytes);
  r.pool_bytes = session.stats().pool_bytes;
  r.kv_cache_bytes = session.stats().kv_cache_bytes;
  r.threads = session.stats().threads;
  r.weights_bytes = session.memory_plan().weights;
  r.released_bytes = session.released_weight_bytes();
  return r;
}

double GenerateResult::tokens_per_s() const {
  double total = 0;
  for (double t : step_s) total += t;
  return total > 0 ? double(step_s.size()) / total : 0;
}

namespace {
// The median of [first, last) (0 for none).
double median_of(std::vector<double>::const_iterator first, std::vector<double>::const_iterator last) {
  if (first == last) return 0;
  std::vector<double> s(first, last);
  std::nth_element(s.begin(), s.begin() + long(s.size() / 2), s.end());
  return s[s.size() / 2];
}
}  // namespace

double GenerateResult::median_step_s(size_t first, size_t count) const {
  first = std::min(first, step_s.size());
  count = std::min(count, step_s.size() - first);
  return median_of(step_s.begin() + long(first), step_s.begin() + long(first + count));
}

double GenerateResult::median_step_s() const { return median_step_s(0, step_s.size()); }

double GenerateResult::median_prefill_warm_s() const {
  return median_of(prefill_warm_s.begin(), prefill_warm_s.end());
}

double GenerateResult::median_first_steps_s(size_t n) const { return median_step_s(0, n); }

double GenerateResult::median_last_steps_s(size_t n) const {
  return median_step_s(step_s.size() - std::min(n, step_s.size()), n);
}

std::string GenerateResult::json() const {
  return fmt::format(
      "{{\"prefill_ms\": {:.3f}, \"prefill_warm_ms\": {:.3f}, \"prefill_after_steps_ms\": {:.3f}, "
      "\"tokens_per_s\": {:.2f}, \"median_step_ms\": {:.3f}, "
      "\"first_step_ms\": {:.3f}, \"last_step_ms\": {:.3f}, \"median_first32_ms\": {:.3f}, "
      "\"median_last32_ms\": {:.3f}, \"peak_rss_mb\": {:.1f}, "
      "\"rss_anon_mb\": {:.1f}, \"rss_file_mb\": {:.1f}, \"pool_mb\": {:.1f}, \"kv_pairs\": {}, "
      "\"kv_cache_mb\": {:.1f}, \"weights_mb\": {:.1f}, "
      "\"weights_packed_only_mb\": {:.1f}, \"threads\": {}, \"prefill_logits_rows\": {}, \"ids\": [{}]}}\n",
      prefill_s * 1e3, median_prefill_warm_s() * 1e3, prefill_after_steps_s() * 1e3,
      tokens_per_s(), median_step_s() * 1e3, step_s.empty() ? 0 : step_s.front() * 1e3,
      step_s.empty() ? 0 : step_s.back() * 1e3, median_first_steps_s(32) * 1e3, median_last_steps_s(32) * 1e3,
      double(peak_rss_bytes) / 1e6, double(rss_anon_bytes) / 1e6, double(rss_file_bytes) / 1e6,
      double(pool_bytes) / 1e6, kv_pairs, double(kv_cache_bytes) / 1e6, double(weights_bytes) / 1e6,
      double(released_bytes) / 1e6, threads, prefill_logits_rows, fmt::join(ids, ","));
}

std::string GenerateResult::text() const {
  std::string s = fmt::format("time to first token: {:.2f} ms (the prompt's logits: {} position{})\n",
                              prefill_s * 1e3, prefill_logits_rows, prefill_logits_rows == 1 ? "" : "s");
  if (!prefill_warm_s.empty())
    s += fmt::format("prefill on the warm session: {:.2f} ms (median of {}; the first, right after the loop: "
                     "{:.2f} ms)\n",
                     median_prefill_warm_s() * 1e3, prefill_warm_s.size(), prefill_after_steps_s() * 1e3);
  if (!step_s.empty()) {
    s += fmt::format(
        "decode: {} steps, {:.1f} tokens/s (median step {:.2f} ms; of the first 32 steps {:.2f} ms, of the "
        "last 32 "
        "{:.2f} ms)\n",
        step_s.size(), tokens_per_s(), median_step_s() * 1e3, median_first_steps_s(32) * 1e3,
        median_last_steps_s(32) * 1e3);
  }
  s += fmt::format("peak resident memory: {:.1f} MB (session buffer pool {:.1f} MB)\n",
                   double(peak_rss_bytes) / 1e6, double(pool_bytes) / 1e6);
  if (rss_anon_bytes || rss_file_bytes)
    s += fmt::format(
        "resident at the end: {:.1f} MB of data (weights, cache, activations, heap), {:.1f} MB of "
        "mapped program code and libraries\n",
        double(rss_anon_bytes) / 1e6, double(rss_file_bytes) / 1e6);
  s += fmt::format("weights: {:.1f} MB", double(weights_bytes) / 1e6);
  if (released_bytes)
    s += fmt::format(", {:.1f} MB of them held once, in the products' packed form",
                     double(released_bytes) / 1e6);
  s += "\n";
  if (kv_pairs)
    s += fmt::format("KV cache in place: {} past/present pairs, {:.1f} MB\n", kv_pairs,
                     double(kv_cache_bytes) / 1e6);
  else
    s += "KV cache: pasts fed as tensors (each step copies the past)\n";
  s += "ids:";
  for (int64_t id : ids) s += fmt::format(" {}", id);
  return s + "\n";
}

}  // namespace gaf::tools
