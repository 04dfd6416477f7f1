// The emitter: a fused node's body -> one kernel (a C++ function, or a CUDA `__global__` kernel).
//
// Three kernel shapes, chosen from the body:
//
//   elementwise   out[i] = f(in0[idx0(i)], in1[idx1(i)], ...) over the output iteration space, one pass over
//                 memory. Lowered to the lowering IR (lower::ElementwiseKernel, src/codegen/lower/kernel_ir.h)
//                 and printed by the dialect's printer (cpu::print_elementwise, cuda::print_elementwise).
//                 Operands that cover the whole space (or are scalars) index with i directly (the Flat walk);
//                 broadcast operands get a per-row base offset and an inner stride of 1 or 0 (the Rows walk).
//                 The CPU's outer loop is OpenMP-parallel for large sizes. Where every operand and output is
//                 fp32, the inner loop runs on whole vectors first (gaf_v: 16 lanes with AVX-512, 8 with AVX2;
//                 each formula compiles on it through the prelude's vector forms of the gaf_* helpers), then a
//                 `#pragma omp simd` scalar loop takes the last elements; otherwise that loop does it all.
//
//   row           reductions over the same trailing axes (layer-norm / softmax shaped): rows in parallel; each row
//                 is staged through small per-thread buffers that stay in cache, so DRAM sees every input once
//                 and every output once. Values are row-shaped (one element per row element) or per-row scalars.
//                 Lowered to lower::RowKernel (which values are staged, inlined into their readers or per-row
//                 scalars, where each buffer lives, how each operand is read) and printed by cpu::print_rows and
//                 cuda::print_rows (both on lower::RowPrinter, what the C-family dialects print alike).
//
//   indexed       groups with injective ops (Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Slice, Expand,
//                 Split) among elementwise ones: one loop nest over the output space; each value is computed at
//                 the index its consumer needs, the injective ops folded into index arithmetic (a Reshape
//                 re-ravels the linear index, a Transpose permutes it, a Slice offsets and strides it), so nothing
//                 in between is written to memory.
//
// Every dimension is a constant or a symbol read from `sym[]`, so a kernel serves every shape of a dynamic model.
// The indexed shape's loop nests are lowered to lower::IndexedNest (statements computing each output at the
// nest's index: index variables, loads, formulas, Concat selects, stores) and printed by cpu::print_indexed and
// cuda::print_indexed; its reductions to lower::IndexedReduction (the reduced axes, each reduction with the
// statements computing the value it folds), which each printer schedules its own way (cpu::
// print_indexed_reduction: blocks, chunks, partial sums; cuda::print_indexed_reduction: a thread per output).
// What is left here is lowering: which shape a group takes, what each value is, and every "no" with its reason.
//
// The CUDA dialect (EmitOptions::dialect) prints the same declarations and expressions as `__global__` kernels
// for NVRTC (head, loop headers and limits in codegen/cuda/printer.h, helpers in cuda_prelude()); only the loops
// differ, and no kernel allocates:
//
//   elementwise   one grid-stride loop over the output index i; the row form's per-row bases come from
//                 r = i / inner, j = i - r * inner.
//   row           one row per block (grid-stride over rows), row buffers in dynamic shared memory, the block's
//                 threads striding over the row; each reduction's per-thread partial is combined over the block
//                 (gaf_block_sum / max / min / or), per-row outputs written by thread 0.
//   indexed       each loop nest a grid-stride loop over its linear index. Nests only read the group's inputs;
//                 one that reads what another wrote (a materialised reduction) would need a grid-wide barrier
//                 and is refused, as is the segmented Concat form (the plain nest reads the same values).
//                 An indexed reduction is one thread per output element running the reduced loops.
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "codegen/cpu/printer.h"
#include "codegen/cuda/printer.h"
#include "codegen/lower/c_text.h"
#include "codegen/lower/kernel_ir.h"
#include "gaf/codegen.h"
#include "gaf/op_registry.h"
#include "ops/reduction.h"

namespace gaf::codegen {

namespace {

using Dims = std::vector<DimExpr>;

using lower::c_type;
using lower::is_one;
using lower::product;
using lower::ravel;
using lower::same;
using lower::scalar_type;
using lower::text;
using lower::nest_index;
using cpu::kHeavyFlops;

bool storage_ok(DType t) {
  return t == DType::Float || t == DType::Float16 || t == DType::BFloat16 || t == DType::Bool;
}
// Integer inputs only where every reader casts them to a float type (positions into rotary angles): loaded as
// float, which is what Cast computes.
bool cast_only_input(const Graph& body, const Value* v) {
  if (v->type.dtype != DType::Int64 && v->type.dtype != DType::Int32) return false;
  bool read = false;
  for (const Node* n : body.nodes())
    for (int i = 0; i < n->num_inputs(); ++i)
      if (n->input(i) == v) {
        const DType to = DType(n->attr_int("to", 0));
        if (n->op_type != "Cast" || !n->domain.empty() || i != 0 || !(to == DType::Float || to == DType::Float16 ||
                                                                       to == DType::BFloat16))
          return false;
        read = true;
      }
  return read;
}
class Unsupported : public std::exception {
 public:
  explicit Unsupported(std::string why) : why_(std::move(why)) {}
  const std::string& why() const { return why_; }

 private:
  std::string why_;
};
template <class... A>
[[noreturn]] void reject(fmt::format_string<A...> f, A&&... a) {
  throw Unsupported(fmt::format(f, std::forward<A>(a)...));
}

// The axes a Reduce* node lists (attribute, or constant input from opset 13/18), as given; empty: none listed.
std::vector<int64_t> reduce_axes(const Node& n) {
  if (n.has_attr("axes")) return n.attr_ints("axes");
  if (!n.input(1)) return {};
  if (!n.input(1)->is_constant()) reject("{}: axes are not constant", n.describe());
  return n.input(1)->constant().to_int_vector();
}

// Injective ops the indexed kernel folds into index arithmetic (the registry's kIndexable flag).
bool indexable(const Node& n) {
  const OpInfo* info = n.domain.empty() ? OpRegistry::instance().find(n.op_type) : nullptr;
  return info && (info->flags & kIndexable);
}

class Emitter {
 public:
  Emitter(const Node& fused, const std::string& symbol, const EmitOptions& opts)
      : fused_(fused), body_(*fused.body), opts_(opts), cuda_(opts.dialect == Dialect::Cuda), names_(opts.debug) {
    sig_.symbol = symbol;
    for (const Node* n : body_.nodes()) sig_.original_nodes.push_back(n->display_name());
  }

  EmittedKernel run() {
    bind_symbols();
    for (const Value* v : body_.inputs()) sig_.input_dims.push_back(dims_of(v));
    for (const Value* v : body_.outputs()) {
      if (!storage_ok(v->type.dtype)) reject("output '{}' has element type {}", v->name(), dtype_name(v->type.dtype));
      sig_.output_dims.push_back(dims_of(v));
      sig_.output_dtypes.push_back(v->type.dtype);
    }
    // A node's second and later outputs are written only where its kernel shape knows them (Split's parts,
    // LayerNormalization's statistics in a row kernel); any other one read or returned (Dropout's mask) is not.
    const std::set<const Value*> returned(body_.outputs().begin(), body_.outputs().end());
    for (const Node* n : body_.nodes())
      for (int k = 1; k < n->num_outputs(); ++k) {
        const Value* o = n->output(k);
        if (o->absent_output || (o->uses().empty() && !returned.count(o))) continue;
        if (n->domain.empty() && (n->op_type == "Split" || n->op_type == "LayerNormalization")) continue;
        reject("{}: its output {} ('{}') is read or returned; the emitter computes the first output only",
               n->describe(), k, o->name());
      }
    bool has_reduction = false, has_injective = false;
    for (const Node* n : body_.nodes()) {
      OpKind k = op_kind(*n);
      if (k == OpKind::Reduction) has_reduction = true;
      else if (k == OpKind::Injective && indexable(*n)) has_injective = true;
      else if (k != OpKind::Elementwise && k != OpKind::Broadcast)
        reject("{} is {}: the emitter handles elementwise, broadcast, row-reduction groups and the injective ops "
               "Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Slice, Expand, Split and Concat", n->describe(),
               op_kind_name(k));
    }
    mark_params();
    if (cuda_) check_cuda_args();
    std::ostringstream head, os;
    head << "// " << sig_.symbol << ": fused group of " << body_.num_nodes() << " ops\n";
    for (const Node* n : body_.nodes()) head << "//   " << n->op_type << " " << n->display_name() << "\n";
    if (cuda_)
      os << cuda::kernel_head(sig_.symbol);
    else
      os << "extern \"C\" void " << sig_.symbol
         << "(const void* const* in_, void* const* out_, const int64_t* sym, const GafScratch* scratch_) {\n"
         << "  (void)sym;\n  (void)scratch_;\n";
    declare_pointers(os);
    if (has_reduction) {
      // Trailing-axis rows (softmax, layer-norm shapes) first; a single reduction over other axes, or behind
      // injective ops, as an indexed reduction. A lone reduction over a few long rows goes the indexed way first:
      // the row kernel runs a row on one thread, the indexed one splits the reduced range over them.
      std::ostringstream rows;
      auto by_rows = [&](std::ostream& s) {
        if (has_injective) reject("injective ops in a reduction group: the row kernel reads its rows contiguously");
        emit_rows(s);
      };
      auto by_index = [&](std::ostream& s) { emit_indexed_reduction(s); };
      const bool split_first = !has_injective && few_long_rows();
      const size_t kernel_ptrs = region_ptrs_.size();
      try {
        split_first ? by_index(rows) : by_rows(rows);
      } catch (const Unsupported& why_first) {
        rows.str("");
        region_ptrs_.resize(kernel_ptrs);
        sink_ = nullptr;
        forget_element();
        try {
          split_first ? by_rows(rows) : by_index(rows);
        } catch (const Unsupported& why) {
          reject("{}; {}", why_first.why(), why.why());
        }
      }
      os << rows.str();
    } else if (has_injective) {
      // One loop nest per output shape (a head split writes Q as [B, L, H, D] and K, V as [B, H, L, D]); each
      // nest computes what its outputs need.
      std::map<std::string, std::vector<size_t>> nests;  // by shape
      for (size_t o = 0; o < body_.outputs().size(); ++o) nests[shape_key(body_.outputs()[o])].push_back(o);
      for (const auto& [shape, outs] : nests) emit_indexed(os, outs);
    } else {
      emit_elementwise(os);
    }
    os << "}\n";
    // CUDA constants live at namespace scope, before the kernel that reads them.
    return {sig_, head.str() + constants_.str() + os.str()};
  }

 private:
  // GafArgs carries fixed-size arrays.
  void check_cuda_args() const {
    if (body_.inputs().size() > size_t(cuda::kMaxInputs) || body_.outputs().size() > size_t(cuda::kMaxOutputs) ||
        sig_.symbol_binds.size() > size_t(cuda::kMaxSymbols))
      reject("CUDA kernels take at most {} inputs, {} outputs and {} symbolic dims; the group has {}, {} and {}",
             cuda::kMaxInputs, cuda::kMaxOutputs, cuda::kMaxSymbols, body_.inputs().size(), body_.outputs().size(),
             sig_.symbol_binds.size());
  }

  // ---- shapes ----
  // v's dims as text: outputs of one shape share a loop nest.
  std::string shape_key(const Value* v) const {
    std::string key;
    for (const DimExpr& d : dims_of(v)) key += (key.empty() ? "" : ",") + text(d);
    return key;
  }
  void bind_symbols() {
    for (size_t i = 0; i < body_.inputs().size(); ++i) {
      const Value* v = body_.inputs()[i];
      if (!v->type.shape) reject("the rank of input '{}' is unknown", v->name());
      for (size_t d = 0; d < v->type.shape->size(); ++d) {
        const Dim& dim = (*v->type.shape)[d];
        if (dim.is_symbol() && !symbols_.count(dim.symbol())) {
          symbols_[dim.symbol()] = int(sig_.symbol_binds.size());
          sig_.symbol_binds.emplace_back(int(i), int(d));
        }
      }
    }
  }
  Dims dims_of(const Value* v) const {
    if (!v->type.shape) reject("the rank of '{}' is unknown", v->name());
    Dims out;
    for (const Dim& d : *v->type.shape) {
      if (d.is_static()) out.push_back({d.value(), -1});
      else if (d.is_symbol() && symbols_.count(d.symbol())) out.push_back({-1, symbols_.at(d.symbol())});
      else reject("a dimension of '{}' is not known from the inputs", v->name());
    }
    return out;
  }

  const char* restrict_() const { return cuda_ ? "__restrict__" : "__restrict"; }
  // The kernel's pointer argument `k` of `array`. The CUDA backend passes allocation bases (its arena is 256-byte
  // aligned, constants come from cudaMalloc), which the dialect tells the compiler: adjacent loads and stores of
  // the vector loops then become 16-byte ones.
  std::string base_pointer(const char* array, int k) const {
    return cuda_ ? fmt::format("__builtin_assume_aligned({}[{}], 16)", array, k) : fmt::format("{}[{}]", array, k);
  }
  void declare_pointers(std::ostream& os) {
    int i = 0;
    for (const Value* v : body_.inputs()) {
      if (params_.count(v)) {  // read only for its values, at codegen time (or not at all: dims come from types)
        ++i;
        continue;
      }
      if (!storage_ok(v->type.dtype) && !cast_only_input(body_, v))
        reject("input '{}' has element type {}", v->name(), dtype_name(v->type.dtype));
      os << fmt::format("  const {}* {} in{} = static_cast<const {}*>({});\n", c_type(v->type.dtype), restrict_(),
                        i, c_type(v->type.dtype), base_pointer("in_", i));
      region_ptrs_.emplace_back(fmt::format("const {}* {}", c_type(v->type.dtype), restrict_()), fmt::format("in{}", i));
      ptr_[v] = fmt::format("in{}", i++);
    }
    int c = 0;
    for (const Value* v : body_.initializers()) {
      if (params_.count(v)) continue;
      const Tensor& t = v->constant();
      if (!storage_ok(t.dtype()) || t.numel() > 64) reject("constant '{}' cannot be inlined", v->name());
      // CUDA: namespace-scope __device__ arrays, whose initialisers must be constant expressions; NVRTC has none
      // for infinity or NaN (__int_as_float is a function), so an array holding one is local to the kernel.
      bool finite = true;
      for (int64_t k = 0; k < t.numel() && t.dtype() != DType::Bool; ++k) finite &= std::isfinite(float(t.get_double(k)));
      const bool global = cuda_ && finite;
      std::string name = global ? fmt::format("{}_c{}", sig_.symbol, c++) : fmt::format("c{}", c++);
      std::ostream& to = global ? constants_ : os;
      to << (global ? "__device__ const " : cuda_ ? "  const " : "  static const ")
         << (t.dtype() == DType::Bool ? "bool" : "float") << " " << name << "[] = {";
      for (int64_t k = 0; k < t.numel(); ++k)
        to << (k ? ", " : "") << (t.dtype() == DType::Bool ? (t.get_int(k) ? "true" : "false") : float_literal(t.get_double(k)));
      to << "};\n";
      ptr_[v] = name;
      const_float_[v] = true;
    }
    for (size_t o = 0; o < body_.outputs().size(); ++o) {
      DType t = body_.outputs()[o]->type.dtype;
      os << fmt::format("  {}* {} out{} = static_cast<{}*>({});\n", c_type(t), restrict_(), o, c_type(t),
                        base_pointer("out_", int(o)));
      region_ptrs_.emplace_back(fmt::format("{}* {}", c_type(t), restrict_()), fmt::format("out{}", o));
    }
  }

  // Virtual dims of input `i` of node n, right-aligned to rank `rank`.
  Dims operand_dims(const Node& n, int i, size_t rank) const {
    const Value* v = n.input(i);
    Dims d = dims_of(v);
    if (n.op_type == "BatchNormalization" && i >= 1) {
      if (d.size() != 1 || rank < 2) reject("{}: unexpected parameter shape", n.describe());
      Dims v2(rank, DimExpr{1, -1});
      v2[1] = d[0];
      return v2;
    }
    if (d.size() > rank) reject("{}: operand '{}' has a higher rank than the output", n.describe(), v->name());
    Dims v2(rank - d.size(), DimExpr{1, -1});
    v2.insert(v2.end(), d.begin(), d.end());
    return v2;
  }

  // The element type `v` is read as: inlined constants and materialised values are fp32 (or bool) arrays.
  DType loaded_type(const Value* v) const {
    if (!const_float_.count(v) && !materialised_.count(v)) return v->type.dtype;
    return v->type.dtype == DType::Bool ? DType::Bool : DType::Float;
  }

  // Scalar formula of node n given argument expressions, from its op definition.
  ScalarExpr node_expr(const Node& n, const std::vector<std::string>& args, const std::vector<ScalarType>& types) {
    std::string why;
    ScalarExpr e = lower::formula(n, args, types, &why);
    if (e.expr.empty()) reject("{}", why);
    return e;
  }

  std::string var_name(const Value* v) { return names_(v); }

  // ---- elementwise ----
  // The group as an elementwise kernel of the lowering IR: every value spans the output's space, operands (by
  // value and virtual dims) broadcast into it; printed by the dialect's printer.
  void emit_elementwise(std::ostream& os) {
    lower::ElementwiseKernel k;
    k.space = dims_of(body_.outputs()[0]);
    const size_t rank = k.space.size();
    for (const Node* n : body_.nodes())
      for (const Value* o : n->outputs())
        if (!o->absent_output && !same(dims_of(o), k.space))
          reject("'{}' does not span the group's iteration space", o->name());
    bool flat = true;
    std::map<const Value*, int> statement_of;
    for (const Node* n : body_.nodes()) {
      lower::Statement st;
      st.node = n;
      std::vector<std::string> args;
      std::vector<ScalarType> types;
      for (int i = 0; i < n->num_inputs(); ++i) {
        const Value* v = n->input(i);
        lower::Arg arg;
        if (v && v->producer() && v->producer()->graph() == &body_) {
          auto it = statement_of.find(v);
          if (it == statement_of.end())
            reject("{}: '{}' is not the first output of a node of the group", n->describe(), v->name());
          arg.statement = it->second;
          types.push_back(k.statements[size_t(arg.statement)].type);
        } else if (v) {
          if (!ptr_.count(v)) reject("'{}' is neither an input nor a constant of the body", v->name());
          Dims vd = operand_dims(*n, i, rank);
          for (size_t d = 0; d < rank; ++d)
            if (!same(vd[d], k.space[d]) && !is_one(vd[d]))
              reject("operand '{}' does not broadcast to the output space", v->name());
          flat &= same(vd, k.space) || std::all_of(vd.begin(), vd.end(), is_one);
          for (size_t o = 0; o < k.operands.size() && arg.operand < 0; ++o)
            if (k.operands[o].value == v && same(k.operands[o].vdims, vd)) arg.operand = int(o);
          if (arg.operand < 0) {
            arg.operand = int(k.operands.size());
            const std::string& array = ptr_.at(v);
            k.operands.push_back({v, array, !const_float_.count(v), loaded_type(v), vd});
          }
          types.push_back(scalar_type(v->type.dtype));
        } else {
          types.push_back(ScalarType::F32);
        }
        st.args.push_back(arg);
        args.push_back(v ? fmt::format("a{}", i) : "");
      }
      st.type = node_expr(*n, args, types).type;
      statement_of[n->output(0)] = int(k.statements.size());
      k.statements.push_back(st);
      k.flops_per_element += formula_flops(*n);
    }
    for (size_t o = 0; o < body_.outputs().size(); ++o) {
      const Value* v = body_.outputs()[o];
      auto it = statement_of.find(v);
      if (it == statement_of.end()) reject("output '{}' is not the first output of a node of the group", v->name());
      k.stores.push_back({int(o), it->second, v->type.dtype});
    }
    k.walk = flat ? lower::Walk::Flat : lower::Walk::Rows;
    if (cuda_)
      cuda::print_elementwise(os, k, names_);
    else
      cpu::print_elementwise(os, k, region_ptrs_, names_);
  }

  static double formula_flops(const Node& n) {
    const OpInfo* info = find_op(n);
    return info ? info->flops_per_element : 0;
  }

  // ---- rows ----
  void emit_rows(std::ostream& os);
  // ---- indexed (injective ops) ----
  using Index = std::vector<std::string>;  // one C++ index expression per dim of a value
  struct Computed {
    std::string name;
    ScalarType type;
  };
  void mark_params();
  void emit_indexed(std::ostream& os, std::vector<size_t> outs = {});
  void emit_indexed_reduction(std::ostream& os);
  bool few_long_rows() const;
  // The walk below appends the statements computing a value at an index to `sink_`.
  Computed value_at(const Value* v, const Index& idx);
  Computed concat_at(const Node& n, const Index& idx);
  bool lower_segmented(lower::IndexedNest& nest, const std::vector<size_t>& outs);
  void store_outputs(const std::vector<size_t>& outs, const Index& idx);
  // Inside a segmented loop nest: the inner index j runs over operand `operand` of Concat `node` only (its range
  // starts at `start` along the innermost axis), so that Concat reads that operand and nothing else.
  struct Segment {
    const Node* node = nullptr;
    int operand = -1;
    std::string start;
  } segment_;
  struct NotSegmentable {};
  Index producer_index(const Node& n, const Value* out, const Index& idx);
  std::optional<Index> reshape_groups(const Dims& od, const Dims& id, const Index& idx);
  void unravel(const std::string& lin, const Dims& dims, size_t from, size_t to, Index& r);
  std::string index_var(const std::string& expr);
  std::vector<lower::IndexedStatement>* sink_ = nullptr;
  // A new element: nothing computed at an index so far is reused.
  void forget_element() {
    computed_.clear();
    index_vars_.clear();
  }
  std::set<const Value*> params_;                 // shape/axes/starts inputs of injective ops
  std::set<const Value*> materialised_;           // values held in a scratch buffer (fp32) inside the kernel
  std::map<std::string, Computed> computed_;      // (value, index) -> variable, per element
  std::map<std::string, std::string> index_vars_; // index expression -> variable, per element
  std::vector<std::pair<std::string, std::string>> region_ptrs_;  // pointers a region takes: type, name

  const Node& fused_;
  const Graph& body_;
  EmitOptions opts_;
  bool cuda_;
  std::ostringstream constants_;  // CUDA: the inlined constants, printed before the kernel
  KernelSignature sig_;
  std::map<std::string, int> symbols_;
  std::map<const Value*, std::string> ptr_;
  std::map<const Value*, bool> const_float_;
  lower::Namer names_;
};

// Row kernels: see the file comment. Stages, in body order:
//   row-shaped elementwise node   computed in a j-loop into its row buffer (and its output, if it is one)
//   reduction over the row        a j-loop accumulating into a per-row scalar
//   Softmax / LogSoftmax          max, sum of exp, scale: three j-loops over buffers
//   per-row elementwise node      a scalar statement
void Emitter::emit_rows(std::ostream& os) {
  // The row signature: the first reduction's input space and its trailing axes.
  const Node* red = nullptr;
  for (const Node* n : body_.nodes())
    if (op_kind(*n) == OpKind::Reduction) {
      red = n;
      break;
    }
  Dims space = dims_of(red->input(0));
  size_t rank = space.size();
  auto trailing_from = [&](const Node& n) -> size_t {
    const std::string& op = n.op_type;
    std::vector<int64_t> axes;
    if (op == "Softmax" || op == "LogSoftmax") {
      // Before opset 13 the input is coerced to 2-D at `axis` (default 1): the row is every axis from it on.
      if (n.opset < 13) {
        int64_t axis = n.attr_int("axis", 1);
        if (axis < 0) axis += int64_t(rank);
        for (int64_t a = axis; a < int64_t(rank); ++a) axes.push_back(a);
      } else {
        axes = {n.attr_int("axis", -1)};
      }
    } else if (op == "LayerNormalization" || op == "RMSNormalization") {
      int64_t axis = n.attr_int("axis", -1);
      if (axis < 0) axis += int64_t(rank);
      for (int64_t a = axis; a < int64_t(rank); ++a) axes.push_back(a);
      for (int k = 1; k < n.num_outputs(); ++k)
        if (!n.output(k)->absent_output && !n.output(k)->uses().empty())
          reject("{}: only the normalised output can be fused", n.describe());
    } else if (op.rfind("Reduce", 0) == 0) {
      axes = reduce_axes(n);
      if (axes.empty()) reject("{}: reduces every axis", n.describe());
    } else {
      reject("{} has no row form in the emitter", n.describe());
    }
    for (auto& a : axes) a = a < 0 ? a + int64_t(rank) : a;
    std::sort(axes.begin(), axes.end());
    for (size_t k = 0; k < axes.size(); ++k)
      if (axes[k] != int64_t(rank - axes.size() + k)) reject("{} does not reduce trailing axes", n.describe());
    return rank - axes.size();
  };
  size_t from = trailing_from(*red);
  Dims reduced_keep = space, reduced_drop(space.begin(), space.begin() + long(from));
  for (size_t d = from; d < rank; ++d) reduced_keep[d] = {1, -1};
  enum class Shape { Row, PerRow };
  auto shape_of = [&](const Value* v) {
    Dims d = dims_of(v);
    if (same(d, space)) return Shape::Row;
    if (same(d, reduced_keep) || same(d, reduced_drop)) return Shape::PerRow;
    reject("'{}' is neither row-shaped nor one value per row", v->name());
  };
  // How an operand is read inside a row: whole rows, a row-broadcast weight, one value per row, or a scalar.
  auto operand_read = [&](const Node& n, int i) -> lower::RowRead {
    const Value* v = n.input(i);
    Dims vd = operand_dims(n, i, rank);
    bool row_full = same(vd, space);
    bool weight = true, per_row = true, scalar = true;
    for (size_t d = 0; d < rank; ++d) {
      bool in_row = d >= from;
      weight &= in_row ? same(vd[d], space[d]) : is_one(vd[d]);
      per_row &= in_row ? is_one(vd[d]) : same(vd[d], space[d]);
      scalar &= is_one(vd[d]);
    }
    if (row_full) return lower::RowRead::Whole;
    if (scalar) return lower::RowRead::Scalar;
    if (weight) return lower::RowRead::Weight;
    if (per_row) return lower::RowRead::PerRow;
    // Broadcast over some outer dims (position embeddings [1, L, C] added to [B, L, C] rows): the operand's row
    // is r's coordinates with its size-1 dims dropped.
    bool outer_ok = true, whole_rows = true, one_per_row = true;
    for (size_t d = 0; d < rank; ++d) {
      if (d < from) outer_ok &= is_one(vd[d]) || same(vd[d], space[d]);
      else whole_rows &= same(vd[d], space[d]), one_per_row &= is_one(vd[d]);
    }
    if (outer_ok && (whole_rows || one_per_row)) return whole_rows ? lower::RowRead::OuterWhole : lower::RowRead::OuterPerRow;
    reject("operand '{}' of {} is not row-aligned", v->name(), n.describe());
  };

  lower::RowKernel k;
  k.space = space;
  k.from = from;
  for (const Value* v : body_.outputs()) k.output_dtypes.push_back(v->type.dtype);
  // A light row-shaped value that only reductions over the row read (ReduceMean of x * x, ReduceSum of Relu(x))
  // is not staged: its formula is written into the reduction's loop, which then streams the row once instead of
  // writing a buffer and reading it back ([4096, 4096] Relu -> ReduceMean: 1.44-2.1 -> 1.0-1.1 ms, at the
  // machine's read rate). Softmax and the norms read their input more than once and keep it staged, as do heavy
  // formulas (an exp's vector stage is faster than the compiler's simd form of the scalar helper) and outputs.
  // A value's formula is written once per place that reads it, through the chain of inlined readers: a value
  // read in more than kMaxInlineCopies places is staged, so chains of x * x stay linear in text, not 2^depth.
  constexpr int kMaxInlineCopies = 8;
  const std::set<const Value*> group_outputs(body_.outputs().begin(), body_.outputs().end());
  std::set<const Value*> inlined;
  std::map<const Value*, int> copies;  // an inlined value: the places its formula is written
  const auto body_nodes = body_.nodes();
  for (auto it = body_nodes.rbegin(); it != body_nodes.rend(); ++it) {
    const Node& n = **it;
    const Value* out = n.output(0);
    // A boolean row value (a mask a comparison makes for Where) has no fp32 buffer: it is written into every
    // row-shaped reader's formula.
    const bool mask = out->type.dtype == DType::Bool;
    if (op_kind(n) == OpKind::Reduction || n.num_outputs() != 1 || group_outputs.count(out) ||
        shape_of(out) != Shape::Row || (out->type.dtype != DType::Float && !mask) ||
        formula_flops(n) >= kHeavyFlops || out->uses().empty())
      continue;
    bool only_reductions = true;
    int places = 0;
    for (const Use& u : out->uses()) {
      const bool by_inlined = inlined.count(u.node->output(0)) > 0;
      const bool reader = mask ? op_kind(*u.node) != OpKind::Reduction && shape_of(u.node->output(0)) == Shape::Row
                               : op_kind(*u.node) == OpKind::Reduction && u.node->op_type.rfind("Reduce", 0) == 0 &&
                                     u.index == 0;
      only_reductions &= u.node->graph() == &body_ && (by_inlined || reader);
      places += by_inlined ? copies[u.node->output(0)] : 1;
    }
    if (only_reductions && places <= kMaxInlineCopies) {
      inlined.insert(out);
      copies[out] = places;
    }
  }
  std::map<const Value*, int> out_slot;
  for (size_t o = 0; o < body_.outputs().size(); ++o) out_slot[body_.outputs()[o]] = int(o);
  // Row buffers for the other row-shaped values, in body order. On the CPU an fp32 row the group returns is
  // staged in its output row itself: written once, read back from there. Staged in a scratch row as well, it was
  // written twice (a row max and the shifted row [64, 60000]: 0.97 ms fused against 0.87 ms op by op).
  std::map<const Value*, int> buffer;
  for (const Node* n : body_.nodes()) {
    const Value* v = n->output(0);
    if (shape_of(v) != Shape::Row || inlined.count(v)) continue;
    buffer[v] = int(k.buffers.size());
    lower::RowBuffer b{v, -1, -1};
    if (!cuda_ && out_slot.count(v) && v->type.dtype == DType::Float) b.output = out_slot[v];
    else b.scratch = k.scratch_rows++;
    k.buffers.push_back(b);
  }
  if (cuda_) {
    // One block per row: its buffers in dynamic shared memory, which the host sizes from sig_.cuda.
    int64_t static_l = 1;
    for (size_t d = from; d < rank && static_l >= 0; ++d) static_l = space[d].value < 0 ? -1 : static_l * space[d].value;
    const int64_t bytes = int64_t(k.scratch_rows) * static_l * int64_t(sizeof(float));
    if (static_l >= 0 && bytes > cuda::kMaxRowSharedBytes)
      reject("the row kernel's {} row buffers of {} floats need {} bytes of shared memory, more than the {} a block "
             "gets", k.scratch_rows, static_l, bytes, cuda::kMaxRowSharedBytes);
  }
  std::map<const Value*, int> stage_of;  // a per-row scalar or inlined value: its stage
  // Argument i of n, read at row element j (in_loop) or once per row.
  auto arg = [&](const Node& n, int i, bool in_loop, ScalarType& t) -> lower::RowArg {
    const Value* v = n.input(i);
    if (!v) {
      t = ScalarType::F32;
      return {};
    }
    if (auto it = stage_of.find(v); it != stage_of.end() && k.stages[size_t(it->second)].kind != lower::RowStageKind::Inline) {
      t = k.stages[size_t(it->second)].type;
      return {lower::RowArg::Scalar, it->second};
    }
    if (buffer.count(v) || stage_of.count(v)) {
      if (!in_loop) reject("{} reads a row inside a per-row computation", n.describe());
      if (buffer.count(v)) {
        t = ScalarType::F32;
        return {lower::RowArg::Buffer, buffer[v]};
      }
      t = k.stages[size_t(stage_of[v])].type;
      return {lower::RowArg::Inline, stage_of[v]};
    }
    t = scalar_type(v->type.dtype);
    lower::RowOperand op{v, "", loaded_type(v), operand_dims(n, i, rank), operand_read(n, i)};
    if (!in_loop && (op.read == lower::RowRead::Whole || op.read == lower::RowRead::Weight ||
                     op.read == lower::RowRead::OuterWhole))
      reject("{} reads a row inside a per-row computation", n.describe());
    op.array = ptr_.at(v);
    k.operands.push_back(op);
    return {lower::RowArg::Operand, int(k.operands.size()) - 1};
  };
  static const std::set<std::string> kRowReductions = {"ReduceSum", "ReduceMean", "ReduceSumSquare", "ReduceL2",
                                                        "ReduceL1", "ReduceLogSum", "ReduceMax", "ReduceMin",
                                                        "ReduceLogSumExp"};
  for (const Node* n : body_.nodes()) {
    const Value* out = n->output(0);
    lower::RowStage st;
    st.node = n;
    st.output = out_slot.count(out) ? out_slot[out] : -1;
    if (buffer.count(out)) st.buffer = buffer[out];
    const std::string& op = n->op_type;
    if (op_kind(*n) == OpKind::Reduction) {
      if (trailing_from(*n) != from) reject("{} reduces a different row", n->describe());
      ScalarType t;
      st.args.push_back(arg(*n, 0, true, t));
      if (op == "Softmax" || op == "LogSoftmax") {
        st.kind = op == "Softmax" ? lower::RowStageKind::Softmax : lower::RowStageKind::LogSoftmax;
      } else if (op == "LayerNormalization" || op == "RMSNormalization") {
        st.kind = lower::RowStageKind::Norm;
        const bool centre = op == "LayerNormalization";
        for (int o = 1; o < n->num_outputs(); ++o) {
          const Value* stat = n->output(o);
          if (stat->absent_output || !out_slot.count(stat)) continue;
          if (!centre || o > 2) reject("{}: only the normalised output can be fused", n->describe());
          st.stats.emplace_back(o, out_slot[stat]);
        }
        st.args.push_back(n->input(1) ? arg(*n, 1, true, t) : lower::RowArg{});
        st.args.push_back(centre && n->input(2) ? arg(*n, 2, true, t) : lower::RowArg{});
      } else {
        if (!kRowReductions.count(op)) reject("{} has no row form in the emitter", n->describe());
        st.kind = lower::RowStageKind::Reduce;
        stage_of[out] = int(k.stages.size());
      }
      k.stages.push_back(st);
      continue;
    }
    // Elementwise node: per-row scalar, inlined or staged row value.
    const bool in_loop = shape_of(out) == Shape::Row;
    std::vector<std::string> args;
    std::vector<ScalarType> types;
    for (int i = 0; i < n->num_inputs(); ++i) {
      ScalarType t;
      st.args.push_back(arg(*n, i, in_loop, t));
      args.push_back(st.args.back().kind == lower::RowArg::None ? "" : fmt::format("a{}", i));
      types.push_back(t);
    }
    st.type = node_expr(*n, args, types).type;
    if (!in_loop) {
      st.kind = lower::RowStageKind::PerRow;
      stage_of[out] = int(k.stages.size());
    } else if (inlined.count(out)) {
      st.kind = lower::RowStageKind::Inline;
      stage_of[out] = int(k.stages.size());
    } else {
      if (st.type == ScalarType::Bool) reject("{}: boolean row values are not staged", n->describe());
      st.kind = lower::RowStageKind::Staged;
    }
    k.stages.push_back(st);
  }
  if (!cuda_) {
    cpu::print_rows(os, k, region_ptrs_);
  } else {
    cuda::print_rows(os, k);
    sig_.cuda.rows = true;
    sig_.cuda.rows_dims.assign(space.begin(), space.begin() + long(from));
    sig_.cuda.row_length.assign(space.begin() + long(from), space.end());
    sig_.cuda.row_buffers = k.scratch_rows;
  }
}

}  // namespace

// ---- indexed kernels ----


// Inputs that only parameterise their op: Reshape's shape, Squeeze/Unsqueeze axes, Slice's starts/ends/axes/
// steps, Expand's shape, Split's sizes, a reduction's axes. Dims come from the value types; Slice and the
// reductions read the constant's data at codegen time.
void Emitter::mark_params() {
  std::set<const Value*> data;
  for (const Node* n : body_.nodes()) {
    // Injective ops: every input after the data (Concat: none); reductions: the axes input (opset 13+ ReduceSum,
    // 18+ others).
    bool param_inputs = (indexable(*n) && n->op_type != "Concat") || (op_kind(*n) == OpKind::Reduction &&
                                                              n->op_type.rfind("Reduce", 0) == 0);
    for (int i = 0; i < n->num_inputs(); ++i)
      if (const Value* v = n->input(i)) (param_inputs && i > 0 ? params_ : data).insert(v);
  }
  for (const Value* v : data)
    if (params_.count(v)) reject("'{}' is both data and a shape parameter", v->name());
  for (const Value* v : params_)
    if (v->producer() && v->producer()->graph() == &body_) reject("'{}' is a computed shape parameter", v->name());
}

std::string Emitter::index_var(const std::string& expr) {
  auto it = index_vars_.find(expr);
  if (it != index_vars_.end()) return it->second;
  std::string name = fmt::format("x{}", index_vars_.size());
  lower::IndexedStatement st;
  st.kind = lower::IndexedStatement::Index;
  st.name = name;
  st.expr = expr;
  sink_->push_back(st);
  index_vars_[expr] = name;
  return name;
}

// Runs of dims with equal products on both sides of a reshape (reshape_runs), where a symbolic dim matches only
// itself: the symbols must be the same, in the same order, on both sides; each is a run of its own and the static
// dims between two of them form runs as reshape_runs gives them ([B,S,768] -> [B,S,12,64]: (B)(B) (S)(S)
// (768)(12,64); a 1 facing a symbolic dim is a run alone). nullopt otherwise (that reshape re-ravels through the
// linear index).
std::optional<std::vector<std::array<size_t, 4>>> symbolic_reshape_runs(const Dims& from, const Dims& to) {
  std::vector<std::array<size_t, 4>> runs;
  size_t a = 0, c = 0;
  while (a <= from.size() && c <= to.size()) {
    size_t b = a, e = c;  // the static stretch before the next symbol (or the end) on each side
    while (b < from.size() && from[b].value >= 0) ++b;
    while (e < to.size() && to[e].value >= 0) ++e;
    std::vector<int64_t> f, t;
    for (size_t k = a; k < b; ++k) f.push_back(from[k].value);
    for (size_t k = c; k < e; ++k) t.push_back(to[k].value);
    auto stretch = reshape_runs(f, t);  // nullopt for a 0 dim or unequal products
    if (!stretch) return std::nullopt;
    for (const auto& [ra, rb, rc, re] : *stretch) runs.push_back({a + ra, a + rb, c + rc, c + re});
    if (b == from.size() || e == to.size()) {
      if (b != from.size() || e != to.size()) return std::nullopt;  // a symbol left on one side only
      return runs;
    }
    if (from[b].symbol != to[e].symbol) return std::nullopt;
    runs.push_back({b, b + 1, e, e + 1});
    a = b + 1, c = e + 1;
  }
  return runs;
}

// A reshape as runs of dims with equal products on both sides ([128,12,64] <- [128,1,768]: (128)(12,64) <-
// (128)(1,768); symbolic dims each a run of their own, [B,S,12,64] <- [B,S,768]): each run re-ravels on its own,
// and a run whose input side has one dim other than 1 takes the run's linear index as is, so splitting or merging
// heads costs a multiply-add, not a division. nullopt when a symbolic dim does not match itself across.
std::optional<Emitter::Index> Emitter::reshape_groups(const Dims& od, const Dims& id, const Index& idx) {
  auto runs = symbolic_reshape_runs(od, id);
  if (!runs) return std::nullopt;
  Index r(id.size(), "0");
  for (const auto& [a, b, c, e] : *runs) {
    const std::string lin = ravel(idx, od, a, b);
    int big = 0;
    for (size_t k = c; k < e; ++k) big += !is_one(id[k]);
    if (big <= 1) {
      for (size_t k = c; k < e; ++k) r[k] = is_one(id[k]) ? "0" : lin;
    } else {
      unravel(lin, id, c, e, r);
    }
  }
  return r;
}

// Splits the linear index `lin` over dims [from, to) of `dims` into r[from..to).
void Emitter::unravel(const std::string& lin, const Dims& dims, size_t from, size_t to, Index& r) {
  std::string l = index_var(lin);
  for (size_t k = from; k < to; ++k) {
    std::string q = k + 1 < to ? fmt::format("{} / ({})", l, product(dims, k + 1, to)) : l;
    r[k] = k == from ? index_var(q) : index_var(fmt::format("({}) % {}", q, text(dims[k])));
  }
}

// The index into the input of injective node `n` that holds `out`[idx].
Emitter::Index Emitter::producer_index(const Node& n, const Value* out, const Index& idx) {
  const Value* in = n.input(0);
  Dims od = dims_of(out), id = dims_of(in);
  const std::string& op = n.op_type;
  Index r(id.size(), "0");
  if (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze") {
    if (same(od, id)) return idx;
    // Drop and insert size-1 dims only: the remaining dims keep their indices.
    Index kept;
    for (size_t k = 0; k < od.size(); ++k)
      if (!is_one(od[k])) kept.push_back(idx[k]);
    Dims in_big;
    for (const auto& d : id)
      if (!is_one(d)) in_big.push_back(d);
    Dims out_big;
    for (const auto& d : od)
      if (!is_one(d)) out_big.push_back(d);
    if (same(in_big, out_big)) {
      for (size_t k = 0, m = 0; k < id.size(); ++k) r[k] = is_one(id[k]) ? "0" : kept[m++];
      return r;
    }
    if (auto grouped = reshape_groups(od, id, idx)) return *grouped;
    // General re-ravel through the linear index (symbolic dims).
    unravel(ravel(idx, od, 0, od.size()), id, 0, id.size(), r);
    return r;
  }
  if (op == "Transpose") {
    std::vector<int64_t> perm = n.attr_ints("perm");
    if (perm.empty())
      for (size_t k = 0; k < id.size(); ++k) perm.push_back(int64_t(id.size() - 1 - k));
    if (perm.size() != id.size()) reject("{}: perm does not match the rank", n.describe());
    for (size_t j = 0; j < perm.size(); ++j) r[size_t(perm[j])] = idx[j];
    return r;
  }
  if (op == "Expand") {
    for (size_t k = 0; k < id.size(); ++k) {
      size_t pos = od.size() - id.size() + k;
      r[k] = is_one(id[k]) && !is_one(od[pos]) ? "0" : idx[pos];
    }
    return r;
  }
  if (op == "Split") {
    int rank = int(id.size());
    int64_t axis = n.attr_int("axis", 0);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) reject("{}: axis out of range", n.describe());
    std::string offset;
    for (int k = 0; k < n.num_outputs() && n.output(k) != out; ++k)
      offset += (offset.empty() ? "" : " + ") + text(dims_of(n.output(k))[size_t(axis)]);
    r = idx;
    if (!offset.empty()) r[size_t(axis)] = fmt::format("({} + {})", offset, idx[size_t(axis)]);
    return r;
  }
  if (op == "Slice") {
    auto ints = [&](int i) -> std::optional<std::vector<int64_t>> {
      const Value* v = n.input(i);
      if (!v) return std::nullopt;
      if (!v->is_constant()) reject("{}: Slice input {} is not a constant", n.describe(), i);
      return v->constant().to_int_vector();
    };
    if (n.has_attr("starts")) reject("{}: opset < 10 Slice", n.describe());
    auto starts = ints(1), ends = ints(2), axes = ints(3), steps = ints(4);
    if (!starts || !ends) reject("{}: Slice without starts and ends", n.describe());
    r = idx;
    const int64_t rank = int64_t(id.size());
    for (size_t k = 0; k < starts->size(); ++k) {
      int64_t a = axes ? (*axes)[k] : int64_t(k);
      if (a < 0) a += rank;
      if (a < 0 || a >= rank) reject("{}: axis out of range", n.describe());
      int64_t step = steps ? (*steps)[k] : 1;
      if (id[size_t(a)].value < 0) reject("{}: sliced dim {} is symbolic", n.describe(), a);
      int64_t dim = id[size_t(a)].value, st = (*starts)[k];
      if (st < 0) st += dim;
      st = step > 0 ? std::clamp<int64_t>(st, 0, dim) : std::clamp<int64_t>(st, -1, dim - 1);
      r[size_t(a)] = step == 1 ? fmt::format("({} + {})", st, idx[size_t(a)])
                               : fmt::format("({} + {} * {})", st, step, idx[size_t(a)]);
    }
    return r;
  }
  reject("{}: not an indexable op", n.describe());
}

Emitter::Computed Emitter::value_at(const Value* v, const Index& idx) {
  std::string key = fmt::format("{}|{}", fmt::ptr(v), fmt::join(idx, ","));
  if (auto it = computed_.find(key); it != computed_.end()) return it->second;
  Computed c;
  const Node* n = v->producer();
  if (!n || n->graph() != &body_ || materialised_.count(v)) {
    if (!ptr_.count(v)) reject("'{}' is neither an input nor a constant of the body", v->name());
    Dims d = dims_of(v);
    c = {fmt::format("l{}", computed_.size()), scalar_type(v->type.dtype)};
    lower::IndexedStatement st;
    st.kind = lower::IndexedStatement::Load;
    st.name = c.name;
    st.type = c.type;
    st.array = ptr_.at(v);
    st.loaded = loaded_type(v);
    st.expr = ravel(idx, d, 0, d.size());
    sink_->push_back(st);
  } else if (n->op_type == "Concat") {
    c = concat_at(*n, idx);
  } else if (indexable(*n)) {
    c = value_at(n->input(0), producer_index(*n, v, idx));
  } else {
    Dims od = dims_of(v);
    std::vector<std::string> args;
    std::vector<ScalarType> types;
    for (int i = 0; i < n->num_inputs(); ++i) {
      const Value* in = n->input(i);
      if (!in) {
        args.emplace_back();
        types.push_back(ScalarType::F32);
        continue;
      }
      Dims id = dims_of(in);
      Index sub(id.size(), "0");
      if (n->op_type == "BatchNormalization" && i >= 1) {
        if (id.size() != 1 || od.size() < 2) reject("{}: unexpected parameter shape", n->describe());
        sub[0] = idx[1];
      } else {
        if (id.size() > od.size()) reject("{}: operand '{}' has a higher rank than the output", n->describe(), in->name());
        for (size_t k = 0; k < id.size(); ++k) {
          size_t pos = od.size() - id.size() + k;
          sub[k] = is_one(id[k]) ? "0" : idx[pos];
        }
      }
      Computed a = value_at(in, sub);
      args.push_back(a.name);
      types.push_back(a.type);
    }
    ScalarExpr e = node_expr(*n, args, types);
    c = {var_name(v), e.type};
    lower::IndexedStatement st;
    st.kind = lower::IndexedStatement::Compute;
    st.name = c.name;
    st.type = e.type;
    st.node = n;
    st.args = args;
    st.types = types;
    sink_->push_back(st);
  }
  computed_[key] = c;
  return c;
}

// Concat at `idx`: every operand is read at the index clamped into its own range along the axis (so every load is
// in bounds, the selects vectorise), and the one whose range holds idx[axis] is selected.
Emitter::Computed Emitter::concat_at(const Node& n, const Index& idx) {
  const Dims od = dims_of(n.output(0));
  const int64_t rank = int64_t(od.size());
  int64_t axis = n.attr_int("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) reject("{}: axis out of range", n.describe());
  const std::string& at = idx[size_t(axis)];
  if (segment_.node == &n) {
    if (at != "j") throw NotSegmentable{};  // the Concat axis is not the loop's inner index here
    Index sub = idx;
    sub[size_t(axis)] = index_var(fmt::format("j - ({})", segment_.start));
    return value_at(n.input(segment_.operand), sub);
  }
  if (n.num_inputs() > kMaxFusedConcatOperands)
    reject("{}: {} operands, more than the {} a fused Concat reads per element", n.describe(), n.num_inputs(),
           kMaxFusedConcatOperands);
  std::vector<std::pair<std::string, Computed>> parts;  // (end of the operand's range along the axis, its value)
  std::string start = "int64_t(0)";
  for (int i = 0; i < n.num_inputs(); ++i) {
    const Value* in = n.input(i);
    const DimExpr d = dims_of(in)[size_t(axis)];
    if (d.value == 0) continue;
    Index sub = idx;
    const std::string t = index_var(fmt::format("{} - ({})", at, start));
    sub[size_t(axis)] = index_var(fmt::format("{} < 0 ? int64_t(0) : ({} < {} ? {} : {} - 1)", t, t, text(d), t, text(d)));
    start = fmt::format("{} + {}", start, text(d));
    parts.emplace_back(start, value_at(in, sub));
  }
  if (parts.empty()) reject("{}: every operand is empty", n.describe());
  Computed c{var_name(n.output(0)), parts[0].second.type};
  lower::IndexedStatement st;
  st.kind = lower::IndexedStatement::Select;
  st.name = c.name;
  st.type = c.type;
  st.at = at;
  for (const auto& [end, value] : parts) {
    st.ends.push_back(end);
    st.args.push_back(value.name);
  }
  sink_->push_back(st);
  return c;
}

// Inside a loop nest: body outputs `outs` computed at `idx` and stored at the linear index i.
void Emitter::store_outputs(const std::vector<size_t>& outs, const Index& idx) {
  for (size_t o : outs) {
    const Value* v = body_.outputs()[o];
    Computed c = value_at(v, idx);
    lower::IndexedStatement st;
    st.kind = lower::IndexedStatement::Store;
    st.output = int(o);
    st.expr = c.name;
    st.stored = v->type.dtype;
    sink_->push_back(st);
  }
}

// `outs`: the body outputs this loop nest writes (all when empty); they must share one shape. Lowered to one
// lower::IndexedNest, printed by the dialect's printer.
void Emitter::emit_indexed(std::ostream& os, std::vector<size_t> outs) {
  if (outs.empty())
    for (size_t o = 0; o < body_.outputs().size(); ++o) outs.push_back(o);
  lower::IndexedNest nest;
  nest.space = dims_of(body_.outputs()[outs[0]]);
  for (size_t o : outs)
    if (!same(dims_of(body_.outputs()[o]), nest.space))
      reject("output '{}' does not span the group's iteration space", body_.outputs()[o]->name());
  if (!lower_segmented(nest, outs)) {
    sink_ = &nest.body;
    store_outputs(outs, nest_index(nest.space.size()));
    sink_ = nullptr;
    forget_element();
  }
  if (cuda_)
    cuda::print_indexed(os, nest);
  else
    cpu::print_indexed(os, nest, region_ptrs_);
}

// A group with one Concat along its innermost axis whose index is the loop nest's inner index (a channel
// concatenation of channels-last tensors, then elementwise work): one inner loop per operand over its channel
// range, each reading that operand contiguously, instead of reading every operand at every element and
// selecting. False (nest.segments empty) when the group is not of that form.
bool Emitter::lower_segmented(lower::IndexedNest& nest, const std::vector<size_t>& outs) {
  if (cuda_) return false;  // a grid-stride loop over i has no inner loop to split into segments
  const Dims& space = nest.space;
  const Node* concat = nullptr;
  for (const Node* n : body_.nodes())
    if (n->op_type == "Concat") {
      if (concat) return false;
      concat = n;
    }
  const size_t rank = space.size();
  if (!concat || rank == 0 || space.back().value < 0) return false;
  const Dims cd = dims_of(concat->output(0));
  int64_t axis = concat->attr_int("axis", 0);
  if (axis < 0) axis += int64_t(cd.size());
  if (axis != int64_t(cd.size()) - 1 || !same(cd.back(), space.back())) return false;
  std::vector<std::pair<int64_t, int64_t>> ranges;  // [start, end) of each operand along the axis
  int64_t start = 0;
  for (int i = 0; i < concat->num_inputs(); ++i) {
    const DimExpr d = dims_of(concat->input(i)).back();
    if (d.value < 0) return false;
    ranges.emplace_back(start, start + d.value);
    start += d.value;
  }
  const Index idx = nest_index(rank);
  try {
    for (size_t k = 0; k < ranges.size(); ++k) {
      if (ranges[k].first == ranges[k].second) continue;
      nest.segments.push_back({ranges[k].first, ranges[k].second, {}});
      sink_ = &nest.segments.back().body;
      segment_ = {concat, int(k), std::to_string(ranges[k].first)};
      store_outputs(outs, idx);
      forget_element();
    }
  } catch (const NotSegmentable&) {
    nest.segments.clear();
    sink_ = nullptr;
    segment_ = {};
    forget_element();
    return false;
  }
  sink_ = nullptr;
  segment_ = {};
  return true;
}

// Few outputs of a long reduction (a loss's mean over a whole tensor, a pool over a large map): fewer than
// kSplitRows outputs, each folding at least kSplitReduced elements, all dims known. A group whose outputs are
// all such Reduce* results (over the same row, as legality requires) runs as an indexed reduction, whose reduced
// range splits over the threads.
using cpu::kSplitReduced;
using cpu::kSplitRows;

// The element count of dims all known at codegen time; -1 when one is symbolic.
int64_t known_elements(const Dims& dims) {
  int64_t n = 1;
  for (const DimExpr& d : dims) {
    if (d.value < 0) return -1;
    n *= d.value;
  }
  return n;
}

bool Emitter::few_long_rows() const {
  if (cuda_) return false;
  const Node* red = nullptr;
  for (const Node* n : body_.nodes())
    if (op_kind(*n) == OpKind::Reduction) {
      if (n->op_type.rfind("Reduce", 0) != 0) return false;
      if (!red) red = n;
    }
  if (!red || !red->input(0)->type.shape) return false;
  for (const Value* v : body_.outputs())
    if (!v->producer() || op_kind(*v->producer()) != OpKind::Reduction) return false;
  const int64_t read = known_elements(dims_of(red->input(0))), written = known_elements(dims_of(red->output(0)));
  return read >= 0 && written > 0 && written < kSplitRows && read / written >= kSplitReduced;
}

// Reductions (any axes, all over the same input space and axes) at the end of the group, their producers
// computed at each reduced index: the output space is the reductions' output, and for each output element nested
// loops run over the reduced axes. With the reduced axes outside the innermost one (column reductions), the omp
// simd loop runs across contiguous output elements; with the innermost input axis reduced (a whole tensor, rows
// behind a transpose), it runs along that axis, a vector reduction per output element. Sums accumulate in
// double.
//
// Few outputs (fewer than 8 blocks of 64): the outermost reduced axis that is not 1 splits into chunks, up to
// 64 of at least 32768 elements read each, which the threads fold as separate items into partial states; those
// merge in chunk order. The chunk count depends only on the shape, so a result does not depend on the thread
// count (the runtime's reduce engine splits the same way).
void Emitter::emit_indexed_reduction(std::ostream& os) {
  static const std::set<std::string> kinds = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                                              "ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSum"};
  lower::IndexedReduction k;
  auto& reds = k.reduces;
  for (const Node* n : body_.nodes())
    if (op_kind(*n) == OpKind::Reduction) {
      const std::string& op = n->op_type;
      if (!kinds.count(op) || !n->domain.empty()) reject("{} has no indexed form", n->describe());
      lower::IndexedReduction::Reduce r;
      r.node = n;
      r.op = op;
      r.input = n->input(0)->type.dtype;
      reds.push_back(r);
    }
  const Node* red = reds.front().node;
  const Value* in = red->input(0);
  Dims id = dims_of(in);
  const int rank = int(id.size());
  const std::vector<int64_t> listed = reduce_axes(*red);
  const auto axes = ops::reduced_axes(*red, rank, &listed);
  if (!axes) reject("{}: reduces nothing, or an axis is out of range or listed twice", red->describe());
  const bool keep = red->attr_int("keepdims", 1) != 0;
  for (const auto& r : reds) {
    const Value* x = r.node->input(0);
    if (x->type.dtype != DType::Float && x->type.dtype != DType::Float16 && x->type.dtype != DType::BFloat16)
      reject("{}: element type {}", r.node->describe(), dtype_name(x->type.dtype));
    const std::vector<int64_t> l = reduce_axes(*r.node);
    if (!same(dims_of(x), id) || ops::reduced_axes(*r.node, rank, &l) != axes ||
        (r.node->attr_int("keepdims", 1) != 0) != keep)
      reject("{} and {} reduce different spaces", red->describe(), r.node->describe());
  }
  k.reduced.assign(static_cast<size_t>(rank), false);
  for (int64_t a : *axes) k.reduced[size_t(a)] = true;
  k.input = id;
  k.space = dims_of(red->output(0));
  const size_t orank = k.space.size();
  if (cuda_) {
    if (reds.size() > 1) reject("the CUDA dialect prints one indexed reduction per kernel");
    // One thread per output element: a long reduction into a few outputs would run on a few threads.
    Dims folded_dims;
    for (int a = 0; a < rank; ++a)
      if (k.reduced[size_t(a)]) folded_dims.push_back(id[size_t(a)]);
    const int64_t written = known_elements(k.space), folded = known_elements(folded_dims);
    if (written >= 0 && written < 1024 && folded >= kSplitReduced)
      reject("{}: {} outputs of {} elements each; the CUDA dialect folds each output on one thread",
             red->describe(), written, folded);
  }
  // Outputs upstream of the reductions (a multi-output group also writes them) get loop nests of their own
  // first; consumers of a reduction (reduce -> broadcast -> elementwise, e.g. x - mean(x) over a middle axis)
  // read its result from a scratch buffer in nests after it.
  std::map<std::string, std::vector<size_t>> before, after;  // by shape
  std::set<const Value*> downstream;
  for (const auto& r : reds) downstream.insert(r.node->output(0));
  for (const Node* n : body_.nodes())
    for (int i = 0; i < n->num_inputs(); ++i)
      if (n->input(i) && downstream.count(n->input(i))) {
        if (op_kind(*n) == OpKind::Reduction) reject("{} reads another reduction's result", n->describe());
        downstream.insert(n->output(0));
      }
  for (size_t o = 0; o < body_.outputs().size(); ++o) {
    const Value* v = body_.outputs()[o];
    auto it = std::find_if(reds.begin(), reds.end(), [&](const auto& r) { return r.node->output(0) == v; });
    if (it != reds.end()) it->output = int(o);
    else
      (downstream.count(v) ? after : before)[shape_key(v)].push_back(o);
  }
  for (const auto& [shape, outs] : before) emit_indexed(os, outs);
  bool any_scratch = false;
  for (auto& r : reds) any_scratch |= r.scratch = r.output < 0 || !after.empty();
  if (cuda_ && (any_scratch || !before.empty()))
    reject("{}: the CUDA dialect prints an indexed reduction only as the group's one loop nest (other outputs or "
           "readers of its result would need a scratch buffer and a grid-wide barrier)", red->describe());
  // The input index: reduced axes from loop variables k<a>, the others from the output index.
  const Index oidx = nest_index(orank);
  Index iidx(static_cast<size_t>(rank));
  size_t o = 0;
  for (int a = 0; a < rank; ++a) {
    if (k.reduced[size_t(a)]) {
      iidx[size_t(a)] = fmt::format("k{}", a);
      if (keep) ++o;
    } else {
      iidx[size_t(a)] = orank ? oidx[o++] : "0";
    }
  }
  for (auto& r : reds) {
    sink_ = &r.at;
    r.value = value_at(r.node->input(0), iidx).name;
    sink_ = nullptr;
  }
  forget_element();
  if (cuda_)
    cuda::print_indexed_reduction(os, k);
  else
    cpu::print_indexed_reduction(os, k, region_ptrs_);
  if (!after.empty()) {
    for (size_t r = 0; r < reds.size(); ++r) {
      ptr_[reds[r].node->output(0)] = fmt::format("redbuf{}", r);
      materialised_.insert(reds[r].node->output(0));
    }
    for (const auto& [shape, outs] : after) emit_indexed(os, outs);
  }
}

std::optional<EmittedKernel> emit_kernel(const Node& fused, const std::string& symbol, const EmitOptions& opts,
                                         std::string* why_not) {
  GAF_ASSERT(fused.body != nullptr, "emit_kernel on a node without body");
  try {
    return Emitter(fused, symbol, opts).run();
  } catch (const Unsupported& u) {
    if (why_not) *why_not = u.why();
    return std::nullopt;
  } catch (const std::exception& e) {
    // A case the emitter does not foresee: the group runs op by op (and the planner, asking first, does not form
    // it), with this as the reason, rather than failing the whole command.
    if (why_not) *why_not = fmt::format("the emitter failed on {}: {}", fused.describe(), e.what());
    return std::nullopt;
  }
}

}  // namespace gaf::codegen
