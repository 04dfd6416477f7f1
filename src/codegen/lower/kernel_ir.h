// The lowering IR of generated kernels: what a kernel reads, computes and writes, and over which iteration space,
// with no dialect in it. The emitter (src/codegen/cpu/emitter.cc) lowers a fused group into it; a printer per
// dialect writes the kernel from it: the CPU printer (src/codegen/cpu/printer.h: C++ with OpenMP and the runtime's
// vectors) and the CUDA printer (src/codegen/cuda/printer.h: grid-stride loops). The scalar formula of every
// statement comes from its op's definition (OpInfo::scalar through scalar_expr), so the dialects cannot drift.
//
// Lowered today: the elementwise kernel shape (every value spans one iteration space; operands broadcast into
// it). The row and indexed shapes are still printed by the emitter directly.
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

// Operand k of `k` is one element for the whole space (Flat) or one per row (Rows: broadcast along the innermost
// dim): the same value on every lane of a vector.
bool splat(const ElementwiseKernel& k, size_t operand);
// Every operand read and every output written as fp32 (the CPU printer's whole-vector loops apply).
bool all_fp32(const ElementwiseKernel& k);

// The formula of n's first output from argument expressions `args` whose types are `types`, from the op's
// definition (BatchNormalization's inference form from its parameters). Empty `expr` with `why` where there is
// none, or where a second output of n is read (only the first is computed).
ScalarExpr formula(const Node& n, const std::vector<std::string>& args, const std::vector<ScalarType>& types,
                   std::string* why);

}  // namespace gaf::codegen::lower
