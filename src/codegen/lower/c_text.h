// What the CPU (C++) and CUDA printers print alike, both being C-family dialects: dims and index arithmetic as
// int64_t expressions over the kernel's `sym[]`, element types and their conversions on load and store, names of
// computed values, and one element of an elementwise kernel (loads, formulas, stores).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "codegen/lower/kernel_ir.h"

namespace gaf::codegen::lower {

// A dim as an int64_t expression: a constant or the kernel's symbol array entry.
std::string text(const DimExpr& d);
// The product of dims [from, to) ("int64_t(1)" when empty).
std::string product(const Dims& dims, size_t from, size_t to);
// The linear index over dims [from, to) of index expressions `idx` (size-1 dims skipped: their index is 0).
std::string ravel(const std::vector<std::string>& idx, const Dims& dims, size_t from, size_t to);

// The C type an element of `t` is stored as; the expression reading element expression `e` of type t as the
// formulas' float (or bool); the expression storing float `e` as t.
std::string c_type(DType t);
std::string load(DType t, const std::string& e);
std::string store(DType t, const std::string& e);
// The declaration of a computed scalar of type t.
std::string decl(ScalarType t);

// Names of computed values: t0, t1, ... or, for reading the kernel (EmitOptions::debug), the value's own name
// made an identifier and numbered.
class Namer {
 public:
  explicit Namer(bool debug) : debug_(debug) {}
  std::string operator()(const Value* v);

 private:
  bool debug_;
  int counter_ = 0;
};

// The Rows walk's per-operand base offsets from the row coordinates q<d>, one `const int64_t b<k> = ...;` line
// each at indent 4; returns each operand's index (b<k> + j, or b<k> where it is broadcast along the row).
std::vector<std::string> print_row_bases(std::ostream& os, const ElementwiseKernel& k);

// One element (or, with `vectors` > 0, `vectors` consecutive gaf_v vectors, each statement printed for vector 0,
// 1, ... before the next) of kernel k: operand loads at `index[k]`, the statements, stores at `out_index`, each
// line at indent `ind`. In the vector form a splat operand is read once and set on every lane; vector u's names
// end in _u (when there is more than one) and its elements start u * gaf_vw after the index.
void print_element(std::ostream& os, const ElementwiseKernel& k, const std::vector<std::string>& index,
                   const std::string& out_index, const std::string& ind, Namer& names, int vectors = 0);
// Statements of an indexed nest, each line at indent `ind`.
void print_statements(std::ostream& os, const std::vector<IndexedStatement>& body, const std::string& ind);

// The element count of reduction r's reduced axes, as a double expression.
std::string reduced_count(const IndexedReduction& r);
// Lines storing reduction k's finished value from accumulator `a` at output element `i` (its redbuf and/or its
// output), each at indent `ind`.
std::string reduce_finish(const IndexedReduction& r, size_t k, const std::string& a, const std::string& i,
                          const std::string& ind);

// Index `idx` moved to vector u of a step.
std::string vector_at(const std::string& idx, int u);
// The CPU prelude's whole-vector read of elements of type t (fp32, fp16 or bf16) from array + at, and the
// trailing argument its whole-vector store of type t takes ("" for fp32).
std::string vector_load(DType t, const std::string& array, const std::string& at);
std::string vector_kind(DType t);

}  // namespace gaf::codegen::lower
