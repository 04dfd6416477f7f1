// One element of a shape tensor as shape inference follows it: unknown, or an affine expression over dim
// symbols with integer coefficients, c + sum(k_i * s_i). Exports with dynamic axes compute their sizes this
// way (positions Range(past, past + seq), the causal mask sliced at [total - seq : total], presents of past +
// seq rows), so the dims they produce can be named and proved equal: seq + past - past is seq.
//
// A dim symbol reads back as an expression when it parses as one ("past+seq", "total-seq", "seq+1", "2*n"),
// and as an atom otherwise ("min(total,128)", "past_sequence_length + 1" with its spaces). The canonical text
// (terms in symbol order, then the constant) names a derived dim, so two derivations of the same size give
// one symbol.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "gaf/graph.h"

namespace gaf {

class SymInt {
 public:
  SymInt() = default;  // unknown
  static SymInt number(int64_t v);
  static SymInt symbol(const std::string& s);  // parsed as an expression where it is one
  static SymInt of(const Dim& d);              // static, symbolic or unknown

  bool known() const { return known_; }
  std::optional<int64_t> num() const;  // when a known constant
  bool is(int64_t v) const { return num() == v; }
  // The dim this size names: static (negative: unknown), a symbol (its canonical text), or unknown.
  Dim dim() const;
  std::string text() const;  // canonical; "" when unknown

  friend SymInt operator+(const SymInt& a, const SymInt& b);
  friend SymInt operator-(const SymInt& a, const SymInt& b);
  friend SymInt operator*(const SymInt& a, int64_t k);
  bool operator==(const SymInt& o) const { return known_ && o.known_ && terms_ == o.terms_ && c_ == o.c_; }

 private:
  bool known_ = false;
  std::map<std::string, int64_t> terms_;  // symbol -> non-zero coefficient
  int64_t c_ = 0;
};

}  // namespace gaf
