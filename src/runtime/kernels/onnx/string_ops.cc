// String ops: StringNormalizer and TfIdfVectorizer.
//
// StringNormalizer drops stopwords (optionally case-insensitively) from a [C] or [1, C] string tensor, then
// lower- or upper-cases what is left. Case mapping works on UTF-8 code points and covers ASCII, Latin-1,
// Latin Extended-A, basic Greek and Cyrillic (what the en_US locale maps one-to-one); other code points and
// invalid UTF-8 bytes pass through unchanged, and the `locale` attribute is not consulted.
//
// TfIdfVectorizer counts, per row, the n-grams of a fixed pool (with up to max_skip_count skipped items
// between the elements of an n-gram) and writes term frequencies, IDF weights or TF-IDF per pool n-gram.
#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <variant>

#include "runtime/kernels/onnx/extra_util.h"

namespace gaf::runtime::extra {

namespace {

// ---- case mapping --------------------------------------------------------------------------------------

char32_t lower_cp(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 0x20;
  if (c == 0x178) return 0xFF;
  if ((c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) return (c % 2 == 0) ? c + 1 : c;
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 1) ? c + 1 : c;
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 0x20;
  if (c == 0x386) return 0x3AC;
  if (c >= 0x388 && c <= 0x38A) return c + 0x25;
  if (c == 0x38C) return 0x3CC;
  if (c == 0x38E || c == 0x38F) return c + 0x3F;
  if (c >= 0x410 && c <= 0x42F) return c + 0x20;
  if (c >= 0x400 && c <= 0x40F) return c + 0x50;
  return c;
}

char32_t upper_cp(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 0x20;
  if (c == 0xFF) return 0x178;
  if ((c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177)) return (c % 2 == 1) ? c - 1 : c;
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 0) ? c - 1 : c;
  if (c >= 0x3B1 && c <= 0x3C9) return c == 0x3C2 ? 0x3A3 : c - 0x20;
  if (c == 0x3AC) return 0x386;
  if (c >= 0x3AD && c <= 0x3AF) return c - 0x25;
  if (c == 0x3CC) return 0x38C;
  if (c == 0x3CD || c == 0x3CE) return c - 0x3F;
  if (c >= 0x430 && c <= 0x44F) return c - 0x20;
  if (c >= 0x450 && c <= 0x45F) return c - 0x50;
  return c;
}

// Decodes one well-formed UTF-8 sequence at s[i]; returns its length, 0 when the bytes there are not one.
size_t decode_utf8(std::string_view s, size_t i, char32_t& cp) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char b0 = b(0);
  size_t len;
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  } else if ((b0 & 0xE0) == 0xC0) {
    len = 2;
    cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3;
    cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4;
    cp = b0 & 0x07;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((b(k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(k) & 0x3F);
  }
  static constexpr char32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

void encode_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

std::string change_case(std::string_view s, bool upper) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    char32_t cp;
    size_t len = decode_utf8(s, i, cp);
    if (len == 0) {  // not UTF-8: keep the byte
      out += s[i++];
      continue;
    }
    encode_utf8(upper ? upper_cp(cp) : lower_cp(cp), out);
    i += len;
  }
  return out;
}

const std::vector<std::string>* attr_strings(const Node& node, const std::string& name) {
  auto it = node.attrs.find(name);
  if (it == node.attrs.end()) return nullptr;
  const auto* v = std::get_if<std::vector<std::string>>(&it->second);
  GAF_CHECK(v, "{}: attribute '{}' must be a list of strings", node.describe(), name);
  return v;
}

// ---- StringNormalizer ----------------------------------------------------------------------------------

class StringNormalizerKernel final : public Kernel {
 public:
  explicit StringNormalizerKernel(const Node& node) {
    const std::string action = node.attr_string("case_change_action", "NONE");
    if (action == "LOWER")
      action_ = Action::Lower;
    else if (action == "UPPER")
      action_ = Action::Upper;
    else if (action == "NONE")
      action_ = Action::None;
    else
      fail("{}: case_change_action '{}' is not valid (LOWER, UPPER or NONE)", node.describe(), action);
    case_sensitive_ = node.attr_int("is_case_sensitive", 0) != 0;
    if (const auto* sw = attr_strings(node, "stopwords"))
      for (const auto& w : *sw) stopwords_.push_back(case_sensitive_ ? w : change_case(w, false));
    std::sort(stopwords_.begin(), stopwords_.end());
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.in(0);
    GAF_CHECK(x.dtype() == DType::String, "{}: the input must be a string tensor, got {}", node.describe(),
              dtype_name(x.dtype()));
    GAF_CHECK(x.rank() == 1 || (x.rank() == 2 && x.dim(0) == 1),
              "{}: the input must have shape [C] or [1, C], got {}", node.describe(),
              dims_to_string(x.dims()));
    const std::string* in = x.strings();
    std::vector<std::string> kept;
    kept.reserve(size_t(x.numel()));
    for (int64_t i = 0; i < x.numel(); ++i) {
      if (!stopwords_.empty()) {
        const std::string key = case_sensitive_ ? in[i] : change_case(in[i], false);
        if (std::binary_search(stopwords_.begin(), stopwords_.end(), key)) continue;
      }
      kept.push_back(action_ == Action::None ? in[i] : change_case(in[i], action_ == Action::Upper));
    }
    // Everything dropped: one empty string, keeping the rank.
    if (kept.empty()) kept.emplace_back();
    const int64_t c = int64_t(kept.size());
    std::vector<int64_t> dims = x.rank() == 1 ? std::vector<int64_t>{c} : std::vector<int64_t>{1, c};
    std::string* out = ctx.allocate_output(0, DType::String, dims).strings();
    for (int64_t i = 0; i < c; ++i) out[i] = std::move(kept[size_t(i)]);
  }

 private:
  enum class Action { None, Lower, Upper };
  Action action_ = Action::None;
  bool case_sensitive_ = false;
  std::vector<std::string> stopwords_;  // sorted; lower-cased unless case sensitive
};

// ---- TfIdfVectorizer -----------------------------------------------------------------------------------

// A trie of the pool's n-grams: node 0 is the root, each edge is one item; `ordinal` numbers the n-grams in
// pool order (-1 for a prefix that is not itself in the pool).
template <class K>
struct NgramTrie {
  struct TrieNode {
    std::unordered_map<K, int32_t> next;
    int64_t ordinal = -1;
  };
  std::vector<TrieNode> nodes{1};

  // Returns the node reached from `from` by `item`, -1 when there is none.
  int32_t step(int32_t from, const K& item) const {
    const auto& m = nodes[size_t(from)].next;
    auto it = m.find(item);
    return it == m.end() ? -1 : it->second;
  }
  void insert(const K* items, int64_t n, int64_t ordinal) {
    int32_t cur = 0;
    for (int64_t i = 0; i < n; ++i) {
      auto it = nodes[size_t(cur)].next.find(items[i]);
      if (it == nodes[size_t(cur)].next.end()) {
        nodes.emplace_back();
        const int32_t id = int32_t(nodes.size() - 1);
        nodes[size_t(cur)].next.emplace(items[i], id);
        cur = id;
      } else {
        cur = it->second;
      }
    }
    nodes[size_t(cur)].ordinal = ordinal;
  }
};

class TfIdfKernel final : public Kernel {
 public:
  explicit TfIdfKernel(const Node& node) {
    const std::string d = node.describe();
    min_n_ = node.attr_int("min_gram_length");
    max_n_ = node.attr_int("max_gram_length");
    max_skip_ = node.attr_int("max_skip_count");
    GAF_CHECK(min_n_ >= 1 && min_n_ <= max_n_, "{}: need 1 <= min_gram_length ({}) <= max_gram_length ({})",
              d, min_n_, max_n_);
    GAF_CHECK(max_skip_ >= 0, "{}: max_skip_count must be >= 0, got {}", d, max_skip_);
    const std::string mode = node.attr_string("mode", "");
    if (mode == "TF")
      mode_ = Mode::TF;
    else if (mode == "IDF")
      mode_ = Mode::IDF;
    else if (mode == "TFIDF")
      mode_ = Mode::TFIDF;
    else
      fail("{}: mode '{}' is not valid (TF, IDF or TFIDF)", d, mode);

    const std::vector<int64_t> counts = node.attr_ints("ngram_counts");
    const std::vector<int64_t> indexes = node.attr_ints("ngram_indexes");
    const std::vector<float> weights = node.attr_floats("weights");
    const std::vector<std::string>* pool_s = attr_strings(node, "pool_strings");
    const std::vector<int64_t> pool_i = node.attr_ints("pool_int64s");
    GAF_CHECK(!pool_s || pool_i.empty(), "{}: give pool_strings or pool_int64s, not both", d);
    string_pool_ = pool_s != nullptr;
    const int64_t pool_size = string_pool_ ? int64_t(pool_s->size()) : int64_t(pool_i.size());
    GAF_CHECK(!counts.empty(), "{}: ngram_counts is required", d);

    int64_t ordinal = 0;
    for (size_t lvl = 0; lvl < counts.size(); ++lvl) {
      const int64_t n = int64_t(lvl) + 1;
      const int64_t b = counts[lvl], e = lvl + 1 < counts.size() ? counts[lvl + 1] : pool_size;
      GAF_CHECK(b >= 0 && b <= e && e <= pool_size,
                "{}: ngram_counts {} does not split the pool of {} items into levels", d,
                dims_to_string(counts), pool_size);
      GAF_CHECK((e - b) % n == 0, "{}: the {}-grams of the pool take {} items, not a multiple of {}", d, n,
                e - b, n);
      for (int64_t i = b; i < e; i += n, ++ordinal) {
        if (n > max_n_) continue;  // never looked up; still numbered
        if (string_pool_)
          str_trie_.insert(pool_s->data() + i, n, ordinal);
        else
          int_trie_.insert(pool_i.data() + i, n, ordinal);
      }
    }
    GAF_CHECK(int64_t(indexes.size()) == ordinal,
              "{}: ngram_indexes has {} entries for the {} n-grams of the pool", d, indexes.size(), ordinal);
    GAF_CHECK(weights.empty() || weights.size() == indexes.size(),
              "{}: weights has {} entries for the {} n-grams of the pool", d, weights.size(), indexes.size());
    out_size_ = 0;
    for (int64_t v : indexes) {
      GAF_CHECK(v >= 0, "{}: ngram_indexes must be >= 0, got {}", d, v);
      out_size_ = std::max(out_size_, v + 1);
    }
    column_ = indexes;
    // Output column -> weight of the n-gram counted there (IDF/TFIDF); 1 without weights.
    col_weight_.assign(size_t(out_size_), 1.f);
    if (!weights.empty())
      for (size_t k = 0; k < indexes.size(); ++k) col_weight_[size_t(indexes[k])] = weights[k];
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.in(0);
    GAF_CHECK(x.rank() == 1 || x.rank() == 2, "{}: the input must have shape [C] or [N, C], got {}",
              node.describe(), dims_to_string(x.dims()));
    const int64_t rows = x.rank() == 2 ? x.dim(0) : 1, len = x.dim(-1);
    std::vector<int64_t> dims =
        x.rank() == 2 ? std::vector<int64_t>{rows, out_size_} : std::vector<int64_t>{out_size_};
    float* y = ctx.allocate_output(0, DType::Float, dims).data<float>();
    if (x.dtype() == DType::String) {
      GAF_CHECK(string_pool_, "{}: string input needs pool_strings, the node has pool_int64s",
                node.describe());
      count_all(x.strings(), rows, len, str_trie_, y,
                [](const std::string& s) -> const std::string& { return s; });
    } else if (x.dtype() == DType::Int64 || x.dtype() == DType::Int32) {
      GAF_CHECK(!string_pool_, "{}: integer input needs pool_int64s, the node has pool_strings",
                node.describe());
      if (x.dtype() == DType::Int64)
        count_all(x.data<int64_t>(), rows, len, int_trie_, y, [](int64_t v) { return v; });
      else
        count_all(x.data<int32_t>(), rows, len, int_trie_, y, [](int32_t v) { return int64_t(v); });
    } else {
      fail("{}: the input must be string, int32 or int64, got {}", node.describe(), dtype_name(x.dtype()));
    }
  }

 private:
  enum class Mode { TF, IDF, TFIDF };

  template <class E, class K, class Key>
  void count_all(const E* x, int64_t rows, int64_t len, const NgramTrie<K>& trie, float* y, Key key) const {
    const int64_t per_row = len * (max_skip_ + 1) * max_n_;
    parallel_for(rows, std::max<int64_t>(1, kWorkGrain / std::max<int64_t>(per_row, 1)),
                 [&](int64_t b, int64_t e) {
                   std::vector<uint32_t> freq(static_cast<size_t>(out_size_));
                   for (int64_t r = b; r < e; ++r) {
                     std::fill(freq.begin(), freq.end(), 0u);
                     count_row(x + r * len, len, trie, freq, key);
                     float* yr = y + r * out_size_;
                     for (int64_t c = 0; c < out_size_; ++c) {
                       const float f = float(freq[size_t(c)]);
                       const float w = col_weight_[size_t(c)];
                       yr[c] = mode_ == Mode::TF ? f : mode_ == Mode::IDF ? (f > 0 ? w : 0.f) : f * w;
                     }
                   }
                 });
  }

  // Every n-gram (min_n <= n <= max_n) starting at each position with items `skip + 1` apart; unigrams only
  // once, since the skip distance does not change them.
  template <class E, class K, class Key>
  void count_row(const E* x, int64_t len, const NgramTrie<K>& trie, std::vector<uint32_t>& freq,
                 Key key) const {
    for (int64_t dist = 1; dist <= max_skip_ + 1; ++dist) {
      const int64_t first_n = dist == 1 ? min_n_ : std::max<int64_t>(min_n_, 2);
      if (first_n > max_n_) break;
      for (int64_t start = 0; start + (first_n - 1) * dist < len; ++start) {
        int32_t cur = 0;
        for (int64_t n = 1, pos = start; n <= max_n_ && pos < len; ++n, pos += dist) {
          cur = trie.step(cur, key(x[pos]));
          if (cur < 0) break;
          const int64_t ord = trie.nodes[size_t(cur)].ordinal;
          if (n >= first_n && ord >= 0) ++freq[size_t(column_[size_t(ord)])];
        }
      }
    }
  }

  int64_t min_n_ = 1, max_n_ = 1, max_skip_ = 0, out_size_ = 0;
  Mode mode_ = Mode::TF;
  bool string_pool_ = false;
  NgramTrie<int64_t> int_trie_;
  NgramTrie<std::string> str_trie_;
  std::vector<int64_t> column_;    // n-gram ordinal -> output column
  std::vector<float> col_weight_;  // output column -> weight
};

}  // namespace

void register_extra_string_ops(KernelRegistry& r) {
  r.add("StringNormalizer").set_kernel([](const Node& n) {
    return std::make_unique<StringNormalizerKernel>(n);
  });
  r.add("TfIdfVectorizer").set_kernel([](const Node& n) { return std::make_unique<TfIdfKernel>(n); });
}

}  // namespace gaf::runtime::extra
