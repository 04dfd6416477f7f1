// The row form (lower::RowKernel) as the C-family dialects print it alike: the stages of a row (elementwise values,
// softmax, norms, reductions) as loops over the row's elements. Each dialect's printer derives from RowPrinter and
// says what differs: how rows are spread over the machine and where scratch rows live (cpu::print_rows: a parallel
// region, per-thread scratch; cuda::print_rows: a block per row, shared memory), the header of every loop over a
// row, how a row's partial totals combine (CUDA: over the block), and the CPU's whole-vector loops.
#pragma once

#include <map>
#include <ostream>
#include <string>

#include "codegen/lower/c_text.h"
#include "codegen/lower/kernel_ir.h"

namespace gaf::codegen::lower {

class RowPrinter {
 public:
  // `element_loop`: the header of every loop over a row's elements j in [0, L).
  RowPrinter(std::ostream& os, const RowKernel& k, std::string element_loop);
  virtual ~RowPrinter() = default;
  // The kernel's body after its pointer declarations.
  void print();

 protected:
  // Opens the walk over rows r (the lines after `L` and `rows` are declared, up to the row's body).
  virtual void open_rows() = 0;
  // Closes what open_rows opened.
  virtual void close_rows() = 0;
  // Where scratch row k starts: `base + L * k`.
  virtual std::string scratch_base() const = 0;
  // After the row's first stage, when later stages follow.
  virtual void after_first_stage() {}
  // The line in front of a loop over the row that `clause` describes (e.g. "simd reduction(+:s0)"); "" where the
  // dialect has none.
  virtual std::string loop_pragma(const std::string& clause) const = 0;
  // Combines the per-thread partial `v` of a row's total over the threads sharing the row (`fn`: gaf_block_sum,
  // gaf_block_max, gaf_block_min, gaf_block_or); nothing where one thread takes a row.
  virtual void block_total(const char* fn, const std::string& v) = 0;
  // Printed in front of the store of a per-row value, so that one thread writes it.
  virtual std::string row_scalar_guard() const = 0;
  // Staged stage st's leading loops (whole vectors): prints `{ int64_t jv = 0;` and loops leaving jv at the
  // first element they did not compute, and returns true (the caller's loop starts at jv and closes the brace);
  // or prints nothing and returns false. `flops`: the formula's arithmetic per element.
  virtual bool leading_loops(const RowStage& st, double flops);
  // The leading loops of an exp-sum over argument xa (the row's maximum `mx`) into `sum`, each term stored to
  // `buf`[j] when named; returns the header of the loop over the rest of the row (element_loop when there are
  // none).
  virtual std::string exp_sum_leading_loops(const RowArg& xa, const std::string& mx, const std::string& sum,
                                            const std::string& buf);
  // The leading loops of a row's maximum (hi) or minimum of argument xa into `ext` (declared, holding -inf or
  // +inf): each element v taken where v > ext (v < ext), a NaN v skipped but, where `nan` is named, setting that
  // int flag; returns the header of the loop over the rest of the row (element_loop when there are none).
  virtual std::string extreme_leading_loops(const RowArg& xa, const std::string& ext, bool hi,
                                            const std::string& nan);

  // Operand o's index in row r at element j.
  std::string index(int o) const;
  // A staged stage that returns its row apart from its buffer.
  bool stored_apart(const RowStage& st) const;

  std::ostream& os_;
  const RowKernel& k_;
  const std::string jl_;  // the header of every loop over the row
  const std::string ind_ = "      ";
  std::map<int, std::string> scalar_;  // a per-row scalar's name, by stage

 private:
  void store_row_scalar(int output, const std::string& v);
  std::string also_store(const RowStage& st, const std::string& v) const;
  std::string arg(const RowArg& a, ScalarType& t) const;
  void exp_sum(const RowArg& xa, const std::string& x, const std::string& mx, const std::string& sum,
               const std::string& buf);
  void stage(size_t s);
  void softmax(const RowStage& st);
  void norm(const RowStage& st);
  void reduce(size_t s);

  std::map<int, std::string> inline_;  // an inlined row value's formula, parenthesised, by stage
  int sv_ = 0;
};

}  // namespace gaf::codegen::lower
