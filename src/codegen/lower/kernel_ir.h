// The lowering IR of generated kernels: what a kernel reads, computes and writes, and over which iteration space,
// with no dialect in it. The emitter (src/codegen/cpu/emitter.cc) lowers a fused group into one of four forms;
// printers write the kernel from it and choose its loops: the CPU printer (src/codegen/cpu/printer.h: C++ with
// OpenMP and the runtime's vectors) and the CUDA printer (src/codegen/cuda/printer.h: grid-stride loops, a block
// per row), over what both C-family dialects print alike (c_text.h; c_rows.h, the row form's stages). The scalar
// formula of every statement comes from its op's definition (formula() below, OpInfo::scalar), so the dialects
// cannot drift.
//
// The forms: ElementwiseKernel (every value spans one iteration space; operands broadcast into it), RowKernel
// (reductions over trailing axes with what they read and what reads them), IndexedNest (injective ops folded into
// index arithmetic) and IndexedReduction (reductions over any axes, each printer choosing its schedule).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gaf/codegen.h"
#include "gaf/dtype.h"
#include "gaf/graph.h"
#include "gaf/op_registry.h"

namespace gaf::codegen::lower {

using Dims = std::vector<DimExpr>;

bool same(const DimExpr& a, const DimExpr& b);
bool same(const Dims& a, const Dims& b);
bool is_one(const DimExpr& d);
ScalarType scalar_type(DType t);

// An array the kernel reads at each element of the iteration space: a body input (a kernel argument) or an
// inlined constant, seen through dims right-aligned to the space (1 where it is broadcast; BatchNormalization's
// per-channel parameters on the channel axis).
struct Operand {
  const Value* value = nullptr;
  std::string array;      // the kernel's name for it: in<k> (an argument) or a constant array
  bool argument = false;  // a kernel argument (aligned base, as the dialect's allocator gives it)
  DType loaded = DType::Float;  // element type as stored, converted to the formulas' type on load
  Dims vdims;
};

// An argument of a statement: operand `operand`, the result of statement `statement`, or neither (an absent
// optional input).
struct Arg {
  int operand = -1;
  int statement = -1;
};

// One node's output computed per element: the node's formula over its arguments.
struct Statement {
  const Node* node = nullptr;
  std::vector<Arg> args;
  ScalarType type = ScalarType::F32;
};

// Body output `output` stored per element from statement `statement`, converted to `dtype`.
struct Store {
  int output = 0;
  int statement = 0;
  DType dtype = DType::Float;
};

// How the elementwise loop walks its space.
enum class Walk {
  Flat,  // every operand covers the whole space or is one element: one loop over the linear index i
  Rows,  // some operand is broadcast over part of it: rows of the innermost dim, each operand at a per-row base
};

// out[i] = f(operands at i) over `space`, one pass over memory.
struct ElementwiseKernel {
  Dims space;
  Walk walk = Walk::Flat;
  std::vector<Operand> operands;
  std::vector<Statement> statements;  // in body order: a statement's arguments are earlier statements
  std::vector<Store> stores;
  // Arithmetic per element from the op definitions (an exp or a division 10 or more, an add 1): a heavy formula
  // is bound by the latency of its dependent instructions, not by memory.
  double flops_per_element = 0;
};

// ---- row kernels ----
// rows = product(space[0, from)) rows of L = product(space[from, rank)) elements, in parallel; each row's
// values staged through row buffers that stay on chip, so memory sees every input once and every output once.

// Where a row operand's element j of row r is.
enum class RowRead {
  Whole,        // the operand spans the space: r * L + j
  Weight,       // broadcast over the rows: j
  PerRow,       // one value per row: r
  Scalar,       // one value: 0
  OuterWhole,   // broadcast over some outer dims, whole rows: (its row from r's coordinates) * L + j
  OuterPerRow,  // broadcast over some outer dims, one value per row: its row from r's coordinates
};
struct RowOperand {
  const Value* value = nullptr;
  std::string array;
  DType loaded = DType::Float;
  Dims vdims;  // right-aligned to the space
  RowRead read = RowRead::Whole;
};

// A row stage's argument: a row operand, a staged row (buffer), an inlined row value or a per-row scalar (the
// stage computing it), or nothing (an absent optional input).
struct RowArg {
  enum Kind { None, Operand, Buffer, Inline, Scalar } kind = None;
  int index = -1;
};

// One node of a row kernel, in body order.
enum class RowStageKind {
  Staged,      // a row-shaped elementwise value computed over the row into its buffer
  Inline,      // a light row-shaped value only reductions read (or a mask): its formula written into its readers
  PerRow,      // an elementwise value of one element per row: a scalar
  Softmax,     // Softmax / LogSoftmax over the row, into its buffer
  LogSoftmax,
  Norm,        // LayerNormalization / RMSNormalization over the row, into its buffer
  Reduce,      // a Reduce* over the row: a scalar
};
struct RowStage {
  const Node* node = nullptr;
  RowStageKind kind = RowStageKind::Staged;
  std::vector<RowArg> args;
  ScalarType type = ScalarType::F32;
  int buffer = -1;  // Staged, Softmax, LogSoftmax, Norm: the row buffer of its output
  int output = -1;  // the body output its first output is, -1 where it is none
  std::vector<std::pair<int, int>> stats;  // Norm: (its output 1 = Mean or 2 = InvStdDev, the body output)
};
// A staged row: in the row of body output `output` itself (written once, read back from there) or in scratch
// row `scratch`.
struct RowBuffer {
  const Value* value = nullptr;
  int output = -1;
  int scratch = -1;
};
struct RowKernel {
  Dims space;
  size_t from = 0;
  std::vector<RowOperand> operands;
  std::vector<RowBuffer> buffers;
  std::vector<RowStage> stages;
  std::vector<DType> output_dtypes;  // per body output
  int scratch_rows = 0;
};
// ---- indexed kernels ----
// A loop nest over an output space whose values are computed at the index their consumer needs: Reshape,
// Transpose, Slice, Expand, Split, Concat... folded into index arithmetic. Index expressions are int64_t
// arithmetic over the nest's indices (q<d> per outer dim, j the innermost, i the linear index) and earlier index
// variables, the same text in every C-family dialect.

// One step of computing a nest's outputs at one element, in order.
struct IndexedStatement {
  enum Kind {
    Index,    // const int64_t name = expr;
    Load,     // name = array[expr], converted from `loaded` to `type`
    Compute,  // name = node's formula over args (names of earlier values, "" for an absent input) of `types`
    Select,   // name = the value of args[k] for the first k with `at` < ends[k] (a Concat along an axis)
    Store,    // body output `output` at i = expr (a value's name), converted to `stored`
  } kind = Index;
  std::string name;
  ScalarType type = ScalarType::F32;
  std::string expr;
  std::string array;
  DType loaded = DType::Float;
  const Node* node = nullptr;
  std::vector<std::string> args;
  std::vector<ScalarType> types;
  std::string at;
  std::vector<std::string> ends;
  int output = -1;
  DType stored = DType::Float;
};

struct IndexedNest {
  Dims space;
  std::vector<IndexedStatement> body;  // at (q0, ..., j), linear index i
  // A channel Concat along the innermost axis (CPU): the inner loop split into one loop per operand's range
  // [begin, end), each reading only that operand; empty: one inner loop over the whole row.
  struct Segment {
    int64_t begin = 0, end = 0;
    std::vector<IndexedStatement> body;
  };
  std::vector<Segment> segments;
};

// Reduce* nodes over the same input space and axes, at the end of a group: each element of the output space folds
// the input elements of its reduced axes, the values folded computed at the input index by statements (the
// input's index: k<a> on reduced axis a, the output's q<d> / j on the others).
struct IndexedReduction {
  Dims input;                 // the reductions' input space
  Dims space;                 // their output space
  std::vector<bool> reduced;  // per input axis
  struct Reduce {
    const Node* node = nullptr;
    std::string op;                    // ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ...
    DType input = DType::Float;        // the element type of the values folded
    int output = -1;                   // the body output it is, -1 where none
    bool scratch = false;              // its result kept in redbuf<k> for the nests after it (or for none)
    std::vector<IndexedStatement> at;  // computing the value folded at the input index
    std::string value;                 // that value's name
  };
  std::vector<Reduce> reduces;
};
// A reduction's accumulator type, its initial value, whether it sums (in double), whether it sums squares.
std::string reduce_acc_type(const std::string& op);
std::string reduce_init(const std::string& op);
bool reduce_sums(const std::string& op);
bool reduce_squares(const std::string& op);
// What a reduction folds of value `x` (its absolute value for ReduceL1).
std::string reduce_term(const std::string& op, const std::string& x);
// The statement folding `x` (a value, or another partial state of the same output) into accumulator `a`.
std::string reduce_fold(const std::string& op, const std::string& a, const std::string& x);

// Operand k of `k` is one element for the whole space (Flat) or one per row (Rows: broadcast along the innermost
// dim): the same value on every lane of a vector.
bool splat(const ElementwiseKernel& k, size_t operand);
// Elements of type t a CPU vector loop reads and writes: fp32, and fp16 / bf16 converted a vector at a time (the
// formulas stay fp32).
bool vector_type(DType t);
// Every operand read and every output written as a vector_type (the CPU printer's whole-vector loops apply).
bool all_float(const ElementwiseKernel& k);

// The formula of n's first output from argument expressions `args` whose types are `types`, from the op's
// definition (BatchNormalization's inference form from its parameters). Empty `expr` with `why` where there is
// none, or where a second output of n is read (only the first is computed).
ScalarExpr formula(const Node& n, const std::vector<std::string>& args, const std::vector<ScalarType>& types,
                   std::string* why);
// formula() for a printer, whose statements the lowering has already checked: throws std::logic_error where
// there is none.
ScalarExpr formula_of(const Node& n, const std::vector<std::string>& args, const std::vector<ScalarType>& types);

// The index names of a loop nest over `rank` dims, as every printer opens it: q<d> for each outer dim, j for the
// innermost.
std::vector<std::string> nest_index(size_t rank);

}  // namespace gaf::codegen::lower
