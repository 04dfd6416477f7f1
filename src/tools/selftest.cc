// Random-graph differential testing of fusion + codegen against the unfused runtime (see tools.h).
//
// Each random graph works on one row space: values are [B,M,N] ("rows") or [B,M,1] ("reduced"), so any two can be
// combined with numpy broadcasting; B is symbolic in half of the graphs. Ops are drawn from elementwise math kept in
// safe ranges (Exp of a Tanh, Sqrt of an Abs, division by 1 + |y|), binary broadcast ops, last-axis reductions,
// Softmax, MatMul by a constant [N,N] weight followed by epilogues, and injective ops (Transpose, Reshape,
// Slice, Unsqueeze/Squeeze, Expand) around elementwise work. Every value may be consumed several times.
#include <fmt/ranges.h>
#include <onnx/onnx_pb.h>

#include <climits>
#include <random>
#include <sstream>

#include "gaf/onnx_io.h"
#include "gaf/tools.h"

namespace gaf::tools {

namespace {

struct Gen {
  std::mt19937_64 rng;
  std::ostringstream body;
  std::vector<std::pair<std::string, bool>> values;  // name, is reduced ([B,M,1])
  std::vector<std::string> inits;
  int counter = 0;
  int64_t n = 0, m = 0;
  std::string prefix;

  int pick(int k) { return int(rng() % uint64_t(k)); }
  std::string fresh() { return fmt::format("{}v{}", prefix, counter++); }
  std::pair<std::string, bool> any() { return values[size_t(pick(int(values.size())))]; }
  std::string emit(const std::string& expr, bool reduced) {
    std::string v = fresh();
    body << "    " << v << " = " << expr << "\n";
    values.emplace_back(v, reduced);
    return v;
  }
  std::string weight() {
    std::string name = fmt::format("{}w{}", prefix, inits.size());
    std::ostringstream w;
    w << "float[" << n << "," << n << "] " << name << " = {";
    std::uniform_real_distribution<float> d(-0.5f, 0.5f);
    for (int64_t i = 0; i < n * n; ++i) w << (i ? "," : "") << fmt::format("{:.4f}", d(rng));
    w << "}";
    inits.push_back(w.str());
    return name;
  }

  void step() {
    auto [x, xr] = any();
    switch (pick(11)) {
      case 0: {
        static const char* unary[] = {"Relu", "Neg", "Abs", "Sigmoid", "Tanh", "Softsign"};
        emit(fmt::format("{}({})", unary[pick(6)], x), xr);
        break;
      }
      case 1: emit(fmt::format("Exp({})", emit(fmt::format("Tanh({})", x), xr)), xr); break;
      case 2: emit(fmt::format("Sqrt({})", emit(fmt::format("Abs({})", x), xr)), xr); break;
      case 3:
      case 4: {
        auto [y, yr] = any();
        static const char* binary[] = {"Add", "Sub", "Mul", "Max", "Min"};
        emit(fmt::format("{}({}, {})", binary[pick(5)], x, y), xr && yr);
        break;
      }
      case 5: {
        auto [y, yr] = any();
        std::string den = emit(fmt::format("Abs({})", y), yr);
        emit(fmt::format("Div({}, {})", x, emit(fmt::format("Add({}, {}one)", den, prefix), yr)), xr && yr);
        break;
      }
      case 6: {
        if (xr) return step();
        static const char* red[] = {"ReduceMin", "ReduceMean", "ReduceMax"};
        emit(fmt::format("{} <axes = [-1], keepdims = 1> ({})", red[pick(3)], x), true);
        break;
      }
      case 7:
        if (xr) return step();
        emit(fmt::format("Softmax <axis = -1> ({})", x), false);
        break;
      case 8: {
        if (xr) return step();
        std::string m = emit(fmt::format("MatMul({}, {})", x, weight()), false);
        if (pick(2)) emit(fmt::format("Relu({})", m), false);
        break;
      }
      case 9: injective(x, xr); break;
      case 10: {  // a reduction over the middle axis ([B,1,N]) of computed values, broadcast back onto the rows
        if (xr) return step();
        std::string a = emit(fmt::format("Relu({})", x), false);
        int k = pick(3);
        std::string r = k == 0 ? emit(fmt::format("ReduceSum <keepdims = 1> ({}, {})", a, ints({1})), false)
                               : emit(fmt::format("{} <axes = [1], keepdims = 1> ({})", k == 1 ? "ReduceMax" : "ReduceMean", a), false);
        values.pop_back();
        emit(fmt::format("Sub({}, {})", x, r), false);
        break;
      }
    }
  }

  // An int64 constant node (a shape or axes parameter); not a value the other steps may pick.
  std::string ints(const std::vector<int64_t>& v) {
    std::string name = fresh();
    body << fmt::format("    {} = Constant <value = int64[{}] {{{}}}> ()\n", name, v.size(), fmt::join(v, ", "));
    return name;
  }

  // Injective ops that leave the value in the row space, with elementwise work in between so fusion must fold
  // the index arithmetic: transpose there and back, flatten and restore, reverse the rows (Slice, step -1),
  // a size-1 axis in and out, a reduced value expanded to a full row, or a rotation along the rows or columns
  // (two Slices concatenated the other way round).
  void injective(const std::string& x, bool xr) {
    switch (pick(6)) {
      case 0: {
        std::string t = emit(fmt::format("Transpose <perm = [0, 2, 1]> ({})", x), xr);
        values.pop_back();  // [B,N,M]: not in the row space
        std::string u = emit(fmt::format("Mul({}, {})", t, t), xr);
        values.pop_back();
        emit(fmt::format("Transpose <perm = [0, 2, 1]> ({})", u), xr);
        break;
      }
      case 1: {
        std::string f = emit(fmt::format("Reshape({}, {})", x, ints({0, -1})), xr);
        values.pop_back();  // [B,M*N]
        std::string u = emit(fmt::format("Sigmoid({})", f), xr);
        values.pop_back();
        emit(fmt::format("Reshape({}, {})", u, ints({0, m, xr ? 1 : n})), xr);
        break;
      }
      case 2:
        emit(fmt::format("Slice({}, {}, {}, {}, {})", x, ints({-1}), ints({INT64_MIN}), ints({2}), ints({-1})), xr);
        break;
      case 3: {
        std::string u = emit(fmt::format("Unsqueeze({}, {})", x, ints({1})), xr);
        values.pop_back();  // [B,1,M,N]
        std::string v = emit(fmt::format("Neg({})", u), xr);
        values.pop_back();
        emit(fmt::format("Squeeze({}, {})", v, ints({1})), xr);
        break;
      }
      case 4:
        if (!xr) return step();
        emit(fmt::format("Expand({}, {})", x, ints({1, 1, n})), false);
        break;
      case 5: {
        const int64_t axis = xr || pick(2) ? 1 : 2, dim = axis == 1 ? m : n;
        if (dim < 2) return step();
        const int64_t k = 1 + pick(int(dim - 1));
        std::string hi = emit(fmt::format("Slice({}, {}, {}, {})", x, ints({k}), ints({dim}), ints({axis})), xr);
        values.pop_back();  // part of a row or column: not in the row space
        std::string lo = emit(fmt::format("Slice({}, {}, {}, {})", x, ints({0}), ints({k}), ints({axis})), xr);
        values.pop_back();
        std::string a = emit(fmt::format("Abs({})", hi), xr);
        values.pop_back();
        emit(fmt::format("Concat <axis = {}> ({}, {})", axis, a, lo), xr);
        break;
      }
    }
  }
};

const char* kHeader = "<ir_version: 8, opset_import: [\"\" : 17]>\n";

}  // namespace

std::string random_graph_text(uint64_t seed, int index, int nodes) {
  Gen g;
  g.rng.seed(seed * 1000003ull + uint64_t(index));
  g.prefix = fmt::format("g{}_", index);
  g.m = 1 + g.pick(6);
  const int64_t m = g.m;
  g.n = 1 + g.pick(12);
  bool symbolic = g.pick(2) == 0;
  bool fp16 = g.pick(5) == 0;
  std::string b = symbolic ? fmt::format("B{}", index) : std::to_string(1 + g.pick(3));
  std::string row = fmt::format("[{},{},{}]", b, m, g.n);
  int inputs = 1 + g.pick(3);
  std::vector<std::string> in_decl;
  for (int i = 0; i < inputs; ++i) {
    std::string name = fmt::format("{}x{}", g.prefix, i);
    in_decl.push_back("float" + row + " " + name);
    g.values.emplace_back(name, false);
  }
  if (fp16) {
    // An fp16 region: cast in, compute, cast back (the fused kernel must round where the casts are).
    std::string h = g.emit(fmt::format("Cast <to = 10> ({})", g.values[0].first), false);
    std::string r = g.emit(fmt::format("Relu({})", h), false);
    std::string s = g.emit(fmt::format("Add({}, {})", r, h), false);
    g.values.resize(size_t(inputs));
    g.emit(fmt::format("Cast <to = 1> ({})", s), false);
  }
  for (int i = 0; i < nodes; ++i) g.step();
  g.inits.push_back(fmt::format("float {}one = {{1.0}}", g.prefix));
  // Outputs: the last value, and one earlier computed value when there is one.
  std::vector<std::pair<std::string, bool>> outs = {g.values.back()};
  if (int(g.values.size()) > inputs + 1) {
    auto other = g.values[size_t(inputs + g.pick(int(g.values.size()) - inputs - 1))];
    if (other.first != outs[0].first) outs.push_back(other);
  }
  // Weights are initializers declared in the input list (the ONNX 1.12 text syntax).
  std::ostringstream os;
  os << "g" << index << " (";
  for (size_t i = 0; i < in_decl.size(); ++i) os << (i ? ", " : "") << in_decl[i];
  for (const auto& w : g.inits) os << ", " << w;
  os << ") => (";
  for (size_t i = 0; i < outs.size(); ++i)
    os << (i ? ", " : "") << "float" << (outs[i].second ? fmt::format("[{},{},1]", b, m) : row) << " "
       << outs[i].first;
  os << ")\n  {\n" << g.body.str() << "  }\n";
  return os.str();
}

namespace {

// Checks graphs [first, first + count) of `seed` in one model; returns the indices of those whose outputs differ
// (all of them, with `error` set, when the batch itself fails).
std::vector<int> check_batch(uint64_t seed, int first, int count, const std::vector<int>& nodes, std::string& error,
                             SelftestResult* stats = nullptr) {
  std::vector<std::string> texts;
  for (int i = 0; i < count; ++i) texts.push_back(random_graph_text(seed, first + i, nodes[size_t(i)]));
  std::vector<std::pair<size_t, size_t>> out_range;  // per graph: outputs [a, b) of the merged model
  std::vector<int> bad;
  try {
    // One model holding every graph of the batch as a disjoint component.
    onnx::ModelProto all;
    for (int i = 0; i < count; ++i) {
      onnx::ModelProto one = onnx_io::export_model(onnx_io::parse_model_text(kHeader + texts[size_t(i)]));
      if (i == 0) {
        all = one;
        out_range.emplace_back(0, size_t(one.graph().output_size()));
        continue;
      }
      auto* g = all.mutable_graph();
      size_t a = size_t(g->output_size());
      for (const auto& x : one.graph().input()) *g->add_input() = x;
      for (const auto& x : one.graph().initializer()) *g->add_initializer() = x;
      for (const auto& x : one.graph().node()) *g->add_node() = x;
      for (const auto& x : one.graph().value_info()) *g->add_value_info() = x;
      for (const auto& x : one.graph().output()) *g->add_output() = x;
      out_range.emplace_back(a, size_t(g->output_size()));
    }
    Model merged = onnx_io::import_model(all);
    Model fused = copy_model(merged);
    FuseOptions opts;
    opts.fusion.opt_level = 3;
    fuse_model(fused, opts);
    onnx_io::check_model(PortableModel(fused));
    runtime::Session su(*merged.graph), sf(*fused.graph);
    if (stats) {
      for (const Node* n : fused.graph->nodes()) stats->fused_groups += n->body ? 1 : 0;
      stats->generated_kernels += sf.generated_kernels();
      for (const auto& [node, why] : sf.codegen_fallbacks()) {
        if (why.find("source kept at") != std::string::npos) ++stats->compile_errors;
        // The reason without the node and value names: "'x' does not span ..." -> "does not span ...".
        std::string r = why;
        if (auto q = r.rfind("' "); q != std::string::npos && r.find(": ") == std::string::npos) r = r.substr(q + 2);
        if (auto c = r.find(": "); c != std::string::npos) r = r.substr(c + 2);
        ++stats->fallback_reasons[r];
      }
    }
    auto inputs = random_inputs(*merged.graph, seed + uint64_t(first), 2);
    auto ou = su.run(inputs);
    auto of = sf.run(inputs);
    for (int i = 0; i < count; ++i) {
      bool fp16 = texts[size_t(i)].find("Cast <to = 10>") != std::string::npos;
      for (size_t k = out_range[size_t(i)].first; k < out_range[size_t(i)].second; ++k) {
        Comparison c = compare(of[k], ou[k], fp16 ? 2e-2 : 1e-4, fp16 ? 2e-3 : 1e-5);
        if (!c.ok) {
          bad.push_back(first + i);
          error = fmt::format("output '{}': {}", merged.graph->outputs()[k]->name(), c.message);
          break;
        }
      }
    }
  } catch (const std::exception& e) {
    error = e.what();
    bad.clear();
    for (int i = 0; i < count; ++i) bad.push_back(first + i);
  }
  return bad;
}

}  // namespace

SelftestResult selftest(int graphs, uint64_t seed, int batch) {
  SelftestResult r;
  auto size_of = [&](int index) { return 3 + int((seed * 7919u + uint64_t(index) * 104729u) % 10); };
  Progress progress("selftest graphs", graphs);
  for (int first = 0; first < graphs; first += batch) {
    progress.step(first);
    int count = std::min(batch, graphs - first);
    std::vector<int> nodes;
    for (int i = 0; i < count; ++i) nodes.push_back(size_of(first + i));
    std::string error;
    std::vector<int> bad = check_batch(seed, first, count, nodes, error, &r);
    if (bad.size() == size_t(count) && count > 1) {
      // The batch failed as a whole: find the culprits one by one.
      bad.clear();
      for (int i = 0; i < count; ++i) {
        std::string e;
        if (!check_batch(seed, first + i, 1, {nodes[size_t(i)]}, e).empty()) bad.push_back(first + i);
      }
    }
    r.graphs += count;
    r.failed += int(bad.size());
    r.passed += count - int(bad.size());
    for (int index : bad) {
      // Shrink: the fewest nodes for which this graph still fails.
      int n = size_of(index);
      std::string e;
      for (int k = 1; k < n; ++k) {
        std::string ek;
        if (!check_batch(seed, index, 1, {k}, ek).empty()) {
          n = k;
          e = ek;
          break;
        }
      }
      if (e.empty()) check_batch(seed, index, 1, {n}, e);
      r.failures.push_back(fmt::format("seed {} graph {} ({} nodes): {}\n{}{}", seed, index, n, e, kHeader,
                                       random_graph_text(seed, index, n)));
    }
  }
  progress.step(graphs);
  return r;
}

}  // namespace gaf::tools
