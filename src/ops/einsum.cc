#include "ops/einsum.h"

#include <algorithm>
#include <cctype>

#include "gaf/status.h"
#include "gaf/tensor.h"

namespace gaf::ops {

char label_char(int l) { return l < 26 ? char('a' + l) : char('A' + (l - 26)); }

namespace {

int letter_label(char c) {
  if (c >= 'a' && c <= 'z') return c - 'a';
  if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
  return -2;
}

std::vector<int> parse_term(const std::string& t, const std::string& eq, const Node& node) {
  std::vector<int> labels;
  bool ellipsis = false;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '.') {
      GAF_CHECK(t.compare(i, 3, "...") == 0 && !ellipsis,
                "{}: equation '{}': '.' must appear only as one '...' per term", node.describe(), eq);
      ellipsis = true;
      labels.push_back(kEllipsis);
      i += 2;
      continue;
    }
    const int l = letter_label(t[i]);
    GAF_CHECK(l >= 0, "{}: equation '{}': '{}' is not a valid subscript (use letters a-z, A-Z)",
              node.describe(), eq, t[i]);
    labels.push_back(l);
  }
  return labels;
}

}  // namespace

EinsumEquation parse_equation(const std::string& equation, const Node& node) {
  std::string eq;
  for (char c : equation)
    if (!std::isspace(static_cast<unsigned char>(c))) eq += c;
  EinsumEquation e;
  std::string lhs = eq, rhs;
  if (auto arrow = eq.find("->"); arrow != std::string::npos) {
    lhs = eq.substr(0, arrow);
    rhs = eq.substr(arrow + 2);
    GAF_CHECK(rhs.find("->") == std::string::npos, "{}: equation '{}' has more than one '->'",
              node.describe(), equation);
    e.explicit_output = true;
  }
  size_t start = 0;
  while (true) {
    size_t comma = lhs.find(',', start);
    e.terms.push_back(parse_term(lhs.substr(start, comma - start), equation, node));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  int count[kLetterLabels] = {};
  for (const auto& t : e.terms)
    for (int l : t)
      if (l >= 0) ++count[l];
  if (e.explicit_output) {
    e.output = parse_term(rhs, equation, node);
    bool seen[kLetterLabels] = {};
    for (int l : e.output) {
      if (l < 0) continue;
      GAF_CHECK(count[l] > 0, "{}: equation '{}': output subscript '{}' does not appear in any input",
                node.describe(), equation, label_char(l));
      GAF_CHECK(!seen[l], "{}: equation '{}': output subscript '{}' appears twice", node.describe(), equation,
                label_char(l));
      seen[l] = true;
    }
  } else {
    // Implicit output: the ellipsis dimensions, then the labels that appear exactly once, in ASCII order.
    bool any_ellipsis = false;
    for (const auto& t : e.terms)
      for (int l : t) any_ellipsis = any_ellipsis || l == kEllipsis;
    if (any_ellipsis) e.output.push_back(kEllipsis);
    for (char c = 'A'; c <= 'Z'; ++c)
      if (count[letter_label(c)] == 1) e.output.push_back(letter_label(c));
    for (char c = 'a'; c <= 'z'; ++c)
      if (count[letter_label(c)] == 1) e.output.push_back(letter_label(c));
  }
  return e;
}

EinsumProblem bind_shapes(const EinsumEquation& e, const std::vector<std::vector<int64_t>>& dims,
                          const Node& node) {
  GAF_CHECK(dims.size() == e.terms.size(), "{}: the equation has {} input terms but the node has {} inputs",
            node.describe(), e.terms.size(), dims.size());
  EinsumProblem p;
  int max_ell = 0;
  std::vector<int> ell_rank(dims.size(), 0);
  for (size_t k = 0; k < dims.size(); ++k) {
    const auto& t = e.terms[k];
    const bool has_ell = std::find(t.begin(), t.end(), kEllipsis) != t.end();
    const int letters = int(t.size()) - (has_ell ? 1 : 0);
    const int rank = int(dims[k].size());
    GAF_CHECK(has_ell ? rank >= letters : rank == letters,
              "{}: input {} has rank {} ({}) but its subscripts name {} dimensions", node.describe(), k, rank,
              dims_to_string(dims[k]), letters);
    ell_rank[k] = rank - letters;
    max_ell = std::max(max_ell, ell_rank[k]);
  }
  p.size.assign(size_t(kLetterLabels + max_ell), -1);
  p.labels.resize(dims.size());
  for (size_t k = 0; k < dims.size(); ++k) {
    int d = 0;
    for (int l : e.terms[k]) {
      if (l == kEllipsis) {
        for (int j = 0; j < ell_rank[k]; ++j, ++d) {
          const int id = kLetterLabels + max_ell - ell_rank[k] + j;
          const int64_t s = dims[k][d];
          int64_t& g = p.size[id];
          GAF_CHECK(g == -1 || g == 1 || s == 1 || g == s,
                    "{}: the '...' dimensions of the inputs cannot be broadcast together (input {} has {})",
                    node.describe(), k, dims_to_string(dims[k]));
          if (g == -1 || g == 1) g = s;
          p.labels[k].push_back(id);
        }
        continue;
      }
      const int64_t s = dims[k][d++];
      GAF_CHECK(p.size[l] == -1 || p.size[l] == s,
                "{}: subscript '{}' has size {} in input {} ({}) but size {} elsewhere", node.describe(),
                label_char(l), s, k, dims_to_string(dims[k]), p.size[l]);
      p.size[l] = s;
      p.labels[k].push_back(l);
    }
  }
  for (int l : e.output) {
    if (l == kEllipsis) {
      for (int j = 0; j < max_ell; ++j) p.output.push_back(kLetterLabels + j);
    } else {
      p.output.push_back(l);
    }
  }
  return p;
}

}  // namespace gaf::ops
