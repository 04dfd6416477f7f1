#include "passes/sym_int.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>

namespace gaf {

namespace {

bool identifier(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char ch : s)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_')) return false;
  return true;
}

// "a+b-2*c+3" -> terms and constant; false when `s` is not such a sum.
bool parse(std::string_view s, std::map<std::string, int64_t>& terms, int64_t& c) {
  size_t i = 0;
  bool first = true;
  while (i < s.size() || first) {
    int64_t sign = 1;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
      sign = s[i] == '-' ? -1 : 1;
      ++i;
    } else if (!first) {
      return false;
    }
    first = false;
    size_t e = i;
    while (e < s.size() && s[e] != '+' && s[e] != '-') ++e;
    std::string_view tok = s.substr(i, e - i);
    i = e;
    if (tok.empty()) return false;
    int64_t k = 1;
    if (size_t star = tok.find('*'); star != std::string_view::npos) {
      auto [p, ec] = std::from_chars(tok.data(), tok.data() + star, k);
      if (ec != std::errc() || p != tok.data() + star) return false;
      tok = tok.substr(star + 1);
      if (!identifier(tok)) return false;
    }
    if (identifier(tok)) {
      terms[std::string(tok)] += sign * k;
    } else {
      int64_t v = 0;
      auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
      if (ec != std::errc() || p != tok.data() + tok.size()) return false;
      c += sign * v;
    }
  }
  std::erase_if(terms, [](const auto& t) { return t.second == 0; });
  return true;
}

}  // namespace

SymInt SymInt::number(int64_t v) {
  SymInt r;
  r.known_ = true;
  r.c_ = v;
  return r;
}

SymInt SymInt::symbol(const std::string& s) {
  SymInt r;
  r.known_ = true;
  if (!parse(s, r.terms_, r.c_)) r.terms_ = {{s, 1}}, r.c_ = 0;
  return r;
}

SymInt SymInt::of(const Dim& d) {
  if (d.is_static()) return number(d.value());
  if (d.is_symbol()) return symbol(d.symbol());
  return {};
}

std::optional<int64_t> SymInt::num() const {
  if (known_ && terms_.empty()) return c_;
  return std::nullopt;
}

std::string SymInt::text() const {
  if (!known_) return "";
  if (terms_.size() == 1 && terms_.begin()->second == 1 && c_ == 0)
    return terms_.begin()->first;  // an atom too
  std::string s;
  for (const auto& [sym, k] : terms_) {
    const std::string name = identifier(sym) ? sym : "(" + sym + ")";
    if (k == 1)
      s += (s.empty() ? "" : "+") + name;
    else if (k == -1)
      s += "-" + name;
    else
      s += fmt::format("{}{}*{}", s.empty() || k < 0 ? "" : "+", k, name);
  }
  if (c_ != 0 || s.empty()) s += fmt::format("{}{}", s.empty() || c_ < 0 ? "" : "+", c_);
  return s;
}

Dim SymInt::dim() const {
  if (!known_) return Dim();
  if (auto n = num()) return *n < 0 ? Dim() : Dim(*n);
  if (terms_.size() > 1 || c_ != 0)  // a fresh ONNX symbol in a sum: as unknown as the symbol alone
    for (const auto& t : terms_)
      if (!Dim(t.first).is_known()) return Dim();
  return Dim(text());
}

SymInt operator+(const SymInt& a, const SymInt& b) {
  if (!a.known_ || !b.known_) return {};
  SymInt r = a;
  r.c_ += b.c_;
  for (const auto& [s, k] : b.terms_) r.terms_[s] += k;
  std::erase_if(r.terms_, [](const auto& t) { return t.second == 0; });
  return r;
}

SymInt operator*(const SymInt& a, int64_t k) {
  if (!a.known_) return {};
  if (k == 0) return SymInt::number(0);
  SymInt r = a;
  r.c_ *= k;
  for (auto& t : r.terms_) t.second *= k;
  return r;
}

SymInt operator-(const SymInt& a, const SymInt& b) { return a + b * -1; }

}  // namespace gaf
