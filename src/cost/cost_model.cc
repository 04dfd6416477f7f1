#include <cstdint>
#include <algorithm>
#include <map>
#include <set>

#include "analysis/row_signature.h"
#include "gaf/cost.h"
#include "gaf/op_registry.h"

namespace gaf {

namespace {

constexpr int64_t kTileElements = 4096;   // elementwise tile: values live on chip per tile
constexpr int64_t kAnchorRowBlock = 32;   // anchor epilogue: rows of the output kept on chip

int64_t value_elements(const Value* v, int64_t dynamic_dim) {
  if (!v || !v->type.shape) return 0;
  int64_t n = 1;  // saturating: a size no machine holds is as good as the largest one
  for (const Dim& d : *v->type.shape)
    if (__builtin_mul_overflow(n, d.is_static() ? d.value() : dynamic_dim, &n)) return INT64_MAX;
  return n;
}

double elem_size(const Value* v) { return v && v->type.dtype != DType::Undefined ? double(dtype_size(v->type.dtype)) : 4.0; }

double node_flops(const Node& n, double& matrix) {
  if (n.body) {
    double f = 0;
    for (const Node* b : n.body->nodes()) f += node_flops(*b, matrix);
    return f;
  }
  const OpInfo* info = find_op(n);
  if (!info) return 0;
  if (info->flops) {
    double f = info->flops(n);
    if (info->kind == OpKind::Anchor || (info->flags & kMatrixFlops)) {
      matrix += f;
      return 0;
    }
    return f;
  }
  double out = 0;
  for (const Value* o : n.outputs()) out += double(value_elements(o, 1));
  return info->flops_per_element * out;
}

}  // namespace

double value_bytes(const Value* v, int64_t dynamic_dim) {
  return double(value_elements(v, dynamic_dim)) * elem_size(v);
}

bool is_free_node(const Node& n) { return n.domain.empty() && n.op_type == "Constant"; }

double CostModel::kernel_time(const KernelStats& k) const {
  const Target& t = target_;
  double mem = k.bytes / t.dram_bandwidth;
  double compute = k.flops / t.vector_flops + k.matrix_flops / t.matrix_flops;
  double spill = 0;
  if (k.working_set > t.onchip_bytes) spill = 2 * (k.working_set - t.onchip_bytes) / t.dram_bandwidth;
  return std::max(mem, compute) + spill + t.launch_overhead_s;
}

namespace {

// The bytes an elementwise group holds on chip at once, tile by tile: walking the group in order, a value
// takes its tile (or its whole self when smaller: a broadcast scalar) from where it is made (a group input:
// from the start) to its last use in the group (a value that leaves the group: to the end). A streaming chain
// holds a few tiles however long it is; counting every value of the group as live at once split long chains
// on targets with a small on-chip budget (a 12-op chain planned as 1 kernel on cpu-host, 2 on cuda-h200, 3 on
// ascend910b).
double streaming_working_set(const std::vector<const Node*>& nodes, const std::set<const Value*>& inputs,
                             const std::set<const Value*>& outputs) {
  auto tile = [](const Value* v) {
    return double(std::min<int64_t>(kTileElements, std::max<int64_t>(1, value_elements(v, 1)))) *
           elem_size(v);
  };
  std::map<const Value*, size_t> last_use;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const Value* v : nodes[i]->inputs())
      if (v) last_use[v] = i;
  for (const Value* v : outputs) last_use[v] = nodes.size();
  double held = 0;
  for (const Value* v : inputs) held += tile(v);
  double peak = held;
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (const Value* o : nodes[i]->outputs())
      if (last_use.count(o)) held += tile(o);  // an output no one reads is never held
    peak = std::max(peak, held);
    std::set<const Value*> read;
    for (const Value* v : nodes[i]->inputs())
      if (v && read.insert(v).second && last_use[v] == i) held -= tile(v);
  }
  return peak;
}

// A Reduce* that nothing in the group reads at more than its own output's size (a loss's mean, a pool at the
// end of its group) folds its input as it streams by: no row waits on chip for the result, so the group's
// working set is a streaming one ([2048, 4096] (x - t)^2 -> ReduceMean had a working set of the whole tensor,
// 32 MB per row, and stayed two kernels). Softmax and the norms, and a reduction whose result is broadcast back
// over its row, hold the row.
bool streams(const Node& red, const std::set<const Node*>& members) {
  if (red.op_type.rfind("Reduce", 0) != 0 || !red.domain.empty()) return false;
  // Symbolic dims count as large: [B, S, C] outnumbers [B, 1, C] whatever S is.
  constexpr int64_t kSymbolic = 4096;
  const int64_t size = value_elements(red.output(0), kSymbolic);
  std::vector<const Value*> work = {red.output(0)};
  std::set<const Value*> seen(work.begin(), work.end());
  while (!work.empty()) {
    const Value* v = work.back();
    work.pop_back();
    for (const Use& u : v->uses()) {
      if (!members.count(u.node)) continue;
      for (const Value* o : u.node->outputs()) {
        if (value_elements(o, kSymbolic) > size) return false;
        if (seen.insert(o).second) work.push_back(o);
      }
    }
  }
  return true;
}

}  // namespace

KernelStats group_stats(const std::vector<const Node*>& nodes, const Graph& g) {
  KernelStats k;
  // A view alone moves nothing: the runtime takes its (contiguous) input under the new dims. Costing it as a
  // copy made Add -> Reshape look worth a kernel of its own where the Add belongs in the MatMul before it (the
  // attention layer's Q/K/V projections: modeled 2.00x, measured 0.83-1.24x).
  if (nodes.size() == 1 && !nodes[0]->body) {
    const OpInfo* info = find_op(*nodes[0]);
    if (info && (info->flags & kView)) {
      k.num_ops = 1;
      return k;
    }
  }
  std::set<const Node*> members(nodes.begin(), nodes.end());
  std::set<const Value*> inputs, outputs;
  double reduce_row = 0;
  int64_t anchor_n = 0;
  std::map<int64_t, int> by_numel;  // how many group values share a size: row-shaped values live together
  for (const Node* n : nodes) {
    k.num_ops += n->body ? int(n->body->num_nodes()) : 1;
    k.flops += node_flops(*n, k.matrix_flops);
    for (const Value* v : n->inputs()) {
      if (!v) continue;
      if (!v->producer() || !members.count(v->producer())) inputs.insert(v);
    }
    for (const Value* o : n->outputs()) {
      bool escapes = g.is_graph_output(o);
      for (const Use& u : o->uses()) escapes |= !members.count(u.node);
      if (escapes) outputs.insert(o);
      by_numel[value_elements(o, 1)]++;
    }
    OpKind kind = op_kind(*n);
    if (kind == OpKind::Reduction && n->input(0) && !streams(*n, members)) {
      // Row length: the product of the reduced dims (softmax-like ops keep their shape, so in/out won't do).
      double row = 0;
      if (auto sig = analysis::row_signature(*n)) {
        row = 1;
        for (int a : sig->axes) row *= double(std::max<int64_t>(1, sig->input_numel_dims[a]));
      } else {
        double in = double(value_elements(n->input(0), 1));
        row = in / std::max<double>(1, double(value_elements(n->output(0), 1)));
      }
      reduce_row = std::max(reduce_row, row * elem_size(n->input(0)));
    }
    if (kind == OpKind::Anchor && n->output(0)->type.shape && !n->output(0)->type.shape->empty()) {
      const Dim& last = n->output(0)->type.shape->back();
      anchor_n = std::max<int64_t>(anchor_n, last.is_static() ? last.value() : 1);
    }
  }
  for (const Value* v : inputs) k.bytes += value_bytes(v);
  for (const Value* v : outputs) k.bytes += value_bytes(v);
  int live = 0;
  for (const auto& [numel, count] : by_numel) live = std::max(live, count);
  live += int(inputs.size());
  if (reduce_row > 0) {
    // Reduce->broadcast->elementwise rows: every row-shaped value of the group lives on chip for a row.
    k.working_set = reduce_row * std::max(1, live);
  } else if (anchor_n > 0) {
    // oneDNN applies post-ops to each output tile (a block of rows by at most 256 columns) while it is in cache:
    // the tile plus one operand tile.
    k.working_set = double(kAnchorRowBlock * std::min<int64_t>(anchor_n, 256)) * 4.0 * 2;
  } else {
    k.working_set = streaming_working_set(nodes, inputs, outputs);
  }
  return k;
}

KernelStats node_stats(const Node& n) { return group_stats({&n}, *n.graph()); }

GraphCost graph_cost(const Graph& g, const CostModel& cm) {
  GraphCost c;
  auto nodes = g.nodes();
  c.nodes = nodes.size();
  std::map<const Value*, size_t> last_use;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const Value* v : nodes[i]->inputs())
      if (v) last_use[v] = i;
  std::set<std::string> symbolic;  // the graph inputs' named dims, and "?" for any dim known by no name
  auto note_dims = [&](const Value* v, bool named) {
    if (!v || !v->type.shape) return;
    for (const Dim& d : *v->type.shape)
      if (!d.is_known()) symbolic.insert("?");
      else if (named && d.is_symbol()) symbolic.insert(d.symbol());
  };
  for (const Value* v : g.inputs()) note_dims(v, true);
  double live = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node* n = nodes[i];
    for (const Value* o : n->outputs()) note_dims(o, false);
    if (!is_free_node(*n)) {
      ++c.kernels;
      KernelStats k = node_stats(*n);
      c.bytes += k.bytes;
      c.time_s += cm.kernel_time(k);
      for (const Value* o : n->outputs()) live += value_bytes(o);
    }
    c.peak_memory_bytes = std::max(c.peak_memory_bytes, live);
    std::set<const Value*> distinct(n->inputs().begin(), n->inputs().end());
    for (const Value* v : distinct) {
      if (v && v->producer() && !is_free_node(*v->producer()) && last_use[v] == i && !g.is_graph_output(v))
        live -= value_bytes(v);
    }
    for (const Value* o : n->outputs())
      if (o->uses().empty() && !g.is_graph_output(o) && !is_free_node(*n)) live -= value_bytes(o);
  }
  // A control-flow node's subgraphs once each (one iteration of a Loop or Scan body, each branch of an If):
  // the trip count is a run-time value.
  for (const Node* n : nodes)
    for (const auto& [attr, sub] : n->subgraphs()) {
      GraphCost s = graph_cost(*sub, cm);
      c.nodes += s.nodes;
      c.kernels += s.kernels;
      c.bytes += s.bytes;
      c.time_s += s.time_s;
      symbolic.insert(s.dims_costed_as_1.begin(), s.dims_costed_as_1.end());
    }
  c.dims_costed_as_1.assign(symbolic.begin(), symbolic.end());
  return c;
}

}  // namespace gaf
