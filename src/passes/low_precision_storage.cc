// Mixed precision storage for a backend whose products run on 16-bit operands (the CUDA backend under the rules'
// precision_mode bf16_mixed / fp16_mixed: tensor-core products, half the bytes between kernels):
//
//   MatMul / Gemm / Conv (float)     -> the same op on T (bfloat16 or float16): float inputs computed at run time
//                                       cast to T, constant ones (weights, biases) stored in T; its output T
//   Add, Mul, Relu, Reshape, ... whose  -> the same op on T, its float constants stored in T
//     float inputs are T values or
//     constants (T-propagating ops)
//   any other op reading a T value      -> that input cast back to float (Cast(to = float) in front of it)
//   a graph output that became T        -> cast back to float under its own name (the model's interface keeps its
//                                          types)
//
// An op the backend runs on narrow operands with fp32 math inside (`narrow_inputs`: its flash attention reads
// Q, K, V in T, the mask in fp32) takes those inputs in T and returns T, whatever its sensitivity.
//
// An op that follows its data input's storage (`follows_storage`: the CUDA backend's pools, which sum in fp32 and
// round once, and its gather) runs on T where that input is T, as the T-propagating ops do.
//
// What stays float, as autocast does it: ops marked precision-sensitive (exp, log, softmax, normalisations,
// reductions: kPrecisionSensitive), ops the backend runs in fp32 only (`float_only`), and every value derived
// from a float value that is computed (positions, masks, a sensitive op's result). Model inputs, what an fp32-only
// op returns, and data moved or combined with constants (gathered embeddings) are data, cast to T where they meet
// a T operand (a residual stream that begins at the embeddings). Only the storage changes: generated kernels load
// T into fp32, compute in fp32 and round once on the way out, and the libraries accumulate products in fp32. A
// Cast the pass inserts sits beside the kernel it feeds or leaves and fuses into it.
//
// Does not fire: precision fp32 (the pass is not added), a graph without float products. Runs once, after the
// rewrite pipeline (KernelBackend::precision_passes): the recognisers before it see the model's float types.
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "gaf/op_registry.h"
#include "gaf/passes.h"

namespace gaf {

namespace {

bool is_product(const Node& n) {
  return n.domain.empty() && (n.op_type == "MatMul" || n.op_type == "Gemm" || n.op_type == "Conv");
}

// Standard ops whose float inputs and outputs all share one type T in the ONNX schema and that compute nothing
// a 16-bit store would lose (no exp, no division by a small sum): they run on T when their float inputs are T
// or constants.
bool propagates_storage(const Node& n) {
  static const std::set<std::string> ops = {
      "Add",     "Sub",   "Mul",      "Div",    "Relu",    "LeakyRelu", "Neg",       "Abs",    "Max",
      "Min",     "Clip",  "Where",    "Reshape", "Transpose", "Slice",   "Concat",    "Split",  "Squeeze",
      "Unsqueeze", "Flatten", "Expand", "Identity", "Tile",   "Pad",       "DepthToSpace", "SpaceToDepth"};
  return n.domain.empty() && ops.count(n.op_type) > 0;
}

bool is_sensitive(const Node& n) {
  const OpInfo* info = find_op(n);
  return info && (info->flags & kPrecisionSensitive);
}

bool is_float(const Value* v) { return v && v->type.dtype == DType::Float && !v->absent_output; }

class LowPrecisionStorage final : public Pass {
 public:
  LowPrecisionStorage(DType storage, StoragePolicy policy) : storage_(storage), policy_(std::move(policy)) {}
  std::string_view name() const override { return "low-precision-storage"; }

  bool run(Graph& g, PassContext& ctx) override {
    low_.clear();
    data_.clear();
    to_float_.clear();
    to_low_.clear();
    constants_.clear();
    int changed = 0;
    for (Node* n : g.nodes()) {
      if (n->has_non_tensor_values() || !n->subgraphs().empty()) {
        changed += restore_float_inputs(g, *n);
        continue;
      }
      if (const std::vector<int> narrow = policy_.narrow_inputs ? policy_.narrow_inputs(*n) : std::vector<int>{};
          !narrow.empty()) {
        // Computes in fp32 inside from narrow operands (the backend's flash attention): those inputs T, the rest
        // fp32, the result T.
        changed += make_low(g, *n, &narrow);
        continue;
      }
      bool low = false;
      if (is_product(*n) && !policy_.float_only(*n)) {
        low = true;
        if (is_float(n->output(0)))
          ctx.precision_changes.push_back(fmt::format("{}: {} operands and result, fp32 accumulation",
                                                      n->describe(), dtype_name(storage_)));
      } else if (((propagates_storage(*n) && !is_sensitive(*n)) || follows_storage(*n)) &&
                 !policy_.float_only(*n)) {
        bool any_low = false, any_float = false;
        for (const Value* v : n->inputs()) {
          if (!v) continue;
          if (low_.count(v)) any_low = true;
          else if (is_float(v) && !v->is_constant() && !castable(g, v)) any_float = true;
        }
        low = any_low && !any_float;
        if (!any_low && !any_float)  // data moved or combined with constants is still data
          for (const Value* o : n->outputs()) data_.insert(o);
      }
      changed += low ? make_low(g, *n, nullptr) : restore_float_inputs(g, *n);
    }
    // The model's outputs keep their types: the T value is renamed and a Cast back to float takes the name.
    for (int i = 0; i < int(g.outputs().size()); ++i) {
      Value* v = g.outputs()[size_t(i)];
      if (!low_.count(v)) continue;
      const std::string name = v->name();
      g.rename(v, g.unique_name(name + "_" + std::string(dtype_name(storage_))));
      Node* c = g.add_node("Cast", {v}, {name}, g.unique_name(name + "_to_float"));
      c->attrs["to"] = int64_t(DType::Float);
      c->output(0)->type = v->type;
      c->output(0)->type.dtype = DType::Float;
      g.set_output(i, c->output(0));
      ++changed;
    }
    if (changed) {
      g.topo_sort();
      g.remove_dead_values();
      ctx.count(name(), changed);
    }
    return changed > 0;  // a second run changes nothing: what it would make T is T
  }

 private:
  // Data that only T's rounding would change, not values computed in fp32 for their precision: a model input, what
  // an op the backend runs in fp32 only returned, data moved or combined with constants (gathered embeddings).
  // Beside a T operand it is cast to T, so a residual stream that begins there stays T.
  bool castable(const Graph& g, const Value* v) const {
    if (data_.count(v)) return true;
    const Node* p = v->producer();
    if (!p) return std::find(g.inputs().begin(), g.inputs().end(), v) != g.inputs().end();
    return policy_.float_only(*p);
  }

  bool follows_storage(const Node& n) const { return policy_.follows_storage && policy_.follows_storage(n); }

  // n on T: its float inputs (those `only` lists, when given) in T, constants stored in T and run-time values cast
  // once each; any other input this pass made T cast back to float; its float outputs T. Returns the edits.
  int make_low(Graph& g, Node& n, const std::vector<int>* only) {
    int k = 0;
    for (int i = 0; i < n.num_inputs(); ++i) {
      Value* v = n.input(i);
      if (!v) continue;
      if (only && std::find(only->begin(), only->end(), i) == only->end()) {
        if (low_.count(v)) n.set_input(i, cast_to_float(g, n, v)), ++k;
      } else if (is_float(v)) {
        n.set_input(i, v->is_constant() ? low_constant(g, v) : cast_to_low(g, n, v)), ++k;
      }
    }
    for (Value* o : n.outputs())
      if (is_float(o)) {
        o->type.dtype = storage_;
        low_.insert(o);
        ++k;
      }
    return k;
  }

  // n reads float: its T inputs (values this pass made T) cast back. Returns how many.
  int restore_float_inputs(Graph& g, Node& n) {
    int k = 0;
    for (int i = 0; i < n.num_inputs(); ++i) {
      Value* v = n.input(i);
      if (v && low_.count(v)) n.set_input(i, cast_to_float(g, n, v)), ++k;
    }
    return k;
  }

  Value* cast(Graph& g, Node& before, Value* v, DType to, std::map<const Value*, Value*>& memo) {
    auto it = memo.find(v);
    if (it != memo.end()) return it->second;
    const std::string out = g.unique_name(v->name() + "_" + std::string(dtype_name(to)));
    Node* c = g.insert_node_before(&before, "Cast", {v}, {out}, g.unique_name(out));
    c->attrs["to"] = int64_t(to);
    c->output(0)->type = v->type;
    c->output(0)->type.dtype = to;
    memo[v] = c->output(0);
    return c->output(0);
  }
  Value* cast_to_float(Graph& g, Node& before, Value* v) { return cast(g, before, v, DType::Float, to_float_); }
  Value* cast_to_low(Graph& g, Node& before, Value* v) {
    Value* c = cast(g, before, v, storage_, to_low_);
    low_.insert(c);
    return c;
  }

  // A float constant stored in T (once per constant).
  Value* low_constant(Graph& g, Value* v) {
    auto it = constants_.find(v);
    if (it != constants_.end()) return it->second;
    const Tensor& src = v->constant();
    Tensor t(storage_, src.dims());
    uint16_t* dst = static_cast<uint16_t*>(t.raw());
    const float* f = src.data<float>();
    for (int64_t i = 0; i < src.numel(); ++i)
      dst[i] = storage_ == DType::BFloat16 ? float_to_bf16(f[i]) : float_to_half(f[i]);
    Value* c = g.add_constant(g.unique_name(v->name() + "_" + std::string(dtype_name(storage_))), std::move(t));
    constants_[v] = c;
    low_.insert(c);
    return c;
  }

  DType storage_;
  StoragePolicy policy_;
  std::set<const Value*> low_;   // values this pass made T
  std::set<const Value*> data_;  // float values castable to T: data moved by T-propagating ops
  std::map<const Value*, Value*> to_float_, to_low_, constants_;
};

}  // namespace

std::unique_ptr<Pass> make_low_precision_storage(DType storage, StoragePolicy policy) {
  GAF_CHECK(storage == DType::BFloat16 || storage == DType::Float16,
            "low-precision-storage stores bfloat16 or float16, not {}", dtype_name(storage));
  GAF_CHECK(policy.float_only, "low-precision-storage needs the backend's fp32-only predicate");
  return std::make_unique<LowPrecisionStorage>(storage, std::move(policy));
}

}  // namespace gaf
