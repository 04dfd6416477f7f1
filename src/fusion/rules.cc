// The rules file (DESIGN.md):
//   { "global": { "enable_fusion": true, "precision_mode": "fp16_mixed", "max_ops_per_group": 32,
//                 "constraint": "onchip_usage < 0.8 * onchip_capacity", "winograd": true },
//     "rules": [ { "pattern": "MatMul -> LayerNormalization", "action": "forbid", "reason": "precision" } ] }
// Every key is checked: an unknown key or a bad value is an error naming the key and its line.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

#include "gaf/fusion.h"
#include "gaf/op_registry.h"

namespace gaf {

namespace {

using json = nlohmann::json;

// Every op type the registry knows, sorted: what a rule may name. The registry is complete once populated.
const std::vector<std::string>& known_op_types() {
  static const std::vector<std::string> names = [] {
    std::set<std::string> sorted;
    for (const auto& [key, info] : OpRegistry::instance().all()) sorted.insert(key.first);
    return std::vector<std::string>(sorted.begin(), sorted.end());
  }();
  return names;
}

struct Source {
  const std::string& text;
  const std::string& name;
  // Line of the first occurrence of "key" in the file (1-based), for messages.
  int line_of(const std::string& key) const {
    auto pos = text.find("\"" + key + "\"");
    if (pos == std::string::npos) return 0;
    return 1 + int(std::count(text.begin(), text.begin() + long(pos), '\n'));
  }
  template <class... Args>
  [[noreturn]] void error(const std::string& key, fmt::format_string<Args...> f, Args&&... args) const {
    fail("{}:{}: '{}': {}", name, line_of(key), key, fmt::format(f, std::forward<Args>(args)...));
  }
};

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t\n");
  auto e = s.find_last_not_of(" \t\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

void parse_global(const json& g, FusionRules& r, const Source& src) {
  if (!g.is_object()) src.error("global", "must be an object");
  for (auto it = g.begin(); it != g.end(); ++it) {
    const std::string& k = it.key();
    const json& v = *it;
    if (k == "enable_fusion" || k == "winograd") {
      if (!v.is_boolean()) src.error(k, "must be true or false");
      (k == "enable_fusion" ? r.enable_fusion : r.winograd) = v.get<bool>();
    } else if (k == "precision_mode") {
      std::string m = v.is_string() ? v.get<std::string>() : "";
      if (m == "fp32") r.precision_mode = PrecisionMode::Fp32;
      else if (m == "fp16_mixed") r.precision_mode = PrecisionMode::Fp16Mixed;
      else if (m == "bf16_mixed") r.precision_mode = PrecisionMode::Bf16Mixed;
      else if (m == "int8_weights") r.precision_mode = PrecisionMode::Int8Weights;
      else if (m == "tf32") r.precision_mode = PrecisionMode::Tf32;
      else src.error(k, "must be \"fp32\", \"tf32\", \"fp16_mixed\", \"bf16_mixed\" or \"int8_weights\"");
    } else if (k == "max_ops_per_group" || k == "max_inputs_per_group" || k == "max_rounds") {
      if (!v.is_number_integer() || v.get<double>() < 1 || v.get<double>() > 1e6)
        src.error(k, "must be a positive integer (at most 1000000)");
      int n = int(v.get<int64_t>());
      if (k == "max_ops_per_group") r.max_ops_per_group = n;
      else if (k == "max_inputs_per_group") r.max_inputs_per_group = n;
      else r.max_rounds = n;
    } else if (k == "constraint") {
      static const std::regex re(
          R"(^\s*onchip_usage\s*<=?\s*(?:([0-9]*\.?[0-9]+)\s*\*\s*onchip_capacity|onchip_capacity\s*\*\s*([0-9]*\.?[0-9]+)|onchip_capacity)\s*$)");
      std::smatch m;
      std::string text = v.is_string() ? v.get<std::string>() : "";
      if (!std::regex_match(text, m, re))
        src.error(k, "must read \"onchip_usage < F * onchip_capacity\" with a number F in (0, 1]");
      double f = m[1].matched ? std::stod(m[1]) : m[2].matched ? std::stod(m[2]) : 1.0;
      if (!(f > 0 && f <= 1)) src.error(k, "the fraction must be in (0, 1], got {}", f);
      r.onchip_fraction = f;
    } else if (k == "skip_nodes" || k == "skip_op_types" || k == "skip_passes") {
      if (!v.is_array()) src.error(k, "must be a list of strings");
      for (const json& s : v) {
        if (!s.is_string()) src.error(k, "must be a list of strings");
        std::string name = s.get<std::string>();
        if (k == "skip_op_types") {
          const std::vector<std::string>& known = known_op_types();
          if (!std::binary_search(known.begin(), known.end(), name))
            src.error(k, "'{}' is no op type{}", name, did_you_mean(name, known));
        }
        (k == "skip_nodes" ? r.skip_nodes : k == "skip_op_types" ? r.skip_op_types : r.skip_passes).insert(name);
      }
    } else {
      src.error(k, "unknown key in \"global\" (known: enable_fusion, precision_mode, max_ops_per_group, "
                   "max_inputs_per_group, max_rounds, constraint, skip_nodes, skip_op_types, skip_passes, winograd)");
    }
  }
}

void parse_rules(const json& list, FusionRules& r, const Source& src) {
  if (!list.is_array()) src.error("rules", "must be a list of {{\"pattern\", \"action\", \"reason\"}} objects");
  for (const json& e : list) {
    if (!e.is_object()) src.error("rules", "each rule must be an object");
    FusionRule rule;
    bool has_pattern = false, has_action = false;
    for (auto it = e.begin(); it != e.end(); ++it) {
      const std::string& k = it.key();
      if (!it->is_string()) src.error(k, "must be a string");
      std::string v = it->get<std::string>();
      if (k == "pattern") {
        try {
          rule.pattern = Pattern::parse(v);
        } catch (const Error& err) {
          src.error(k, "{}", err.what());
        }
        has_pattern = true;
      } else if (k == "action") {
        if (v == "forbid") rule.action = FusionRule::Action::Forbid;
        else if (v == "force") rule.action = FusionRule::Action::Force;
        else src.error(k, "must be \"forbid\" or \"force\", got \"{}\"", v);
        has_action = true;
      } else if (k == "reason") {
        rule.reason = v;
      } else {
        src.error(k, "unknown key in a rule (known: pattern, action, reason)");
      }
    }
    if (!has_pattern) src.error("rules", "a rule has no \"pattern\"");
    if (!has_action) src.error("rules", "the rule \"{}\" has no \"action\"", rule.pattern.text);
    r.rules.push_back(std::move(rule));
  }
}

}  // namespace

Pattern Pattern::parse(const std::string& text) {
  Pattern p;
  p.text = text;
  std::string rest = text;
  size_t pos;
  while (true) {
    pos = rest.find("->");
    std::string tok = trim(rest.substr(0, pos));
    GAF_CHECK(!tok.empty(), "pattern \"{}\" has an empty op between arrows", text);
    if (tok[0] == '@') {
      static const std::set<std::string> cats = {"@elementwise", "@broadcast", "@injective",
                                                 "@reduction",   "@anchor",    "@opaque"};
      GAF_CHECK(cats.count(tok), "pattern \"{}\": unknown category '{}' (known: @elementwise, @broadcast, "
                "@injective, @reduction, @anchor, @opaque)", text, tok);
    } else if (tok != "*") {
      // A misspelt op type would match nothing and the rule would silently do nothing.
      const std::vector<std::string>& known = known_op_types();
      GAF_CHECK(std::binary_search(known.begin(), known.end(), tok),
                "pattern \"{}\": '{}' is neither an op type nor a category{}; op types are spelt as in ONNX "
                "(MatMul, LayerNormalization), categories start with @",
                text, tok, did_you_mean(tok, known));
    }
    p.tokens.push_back(tok);
    if (pos == std::string::npos) break;
    rest = rest.substr(pos + 2);
  }
  return p;
}

bool Pattern::token_matches(size_t i, const Node& n) const {
  const std::string& t = tokens[i];
  if (t == "*") return true;
  if (t[0] == '@') return t.substr(1) == op_kind_name(op_kind(n));
  return t == n.op_type;
}

FusionRules FusionRules::parse(const std::string& text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // a syntax error, or a number beyond what a double holds (1e1000)
    fail("{}: not valid JSON: {}", source, library_message(e));
  }
  Source src{text, source};
  if (!j.is_object()) fail("{}: the rules file must hold a JSON object with \"global\" and/or \"rules\"", source);
  FusionRules r;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "global") parse_global(*it, r, src);
    else if (it.key() == "rules") parse_rules(*it, r, src);
    else src.error(it.key(), "unknown top-level key (known: global, rules)");
  }
  return r;
}

FusionRules FusionRules::load(const std::string& path) {
  std::ifstream f(path);
  GAF_CHECK(f, "cannot open rules file '{}'", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return parse(ss.str(), path);
}

FusionRules FusionRules::from_env_or_file(const std::string& path) {
  if (!path.empty()) return load(path);
  for (const char* var : {"GAF_FUSION_CONFIG", "ASCEND_FUSION_CONFIG"}) {
    const char* p = std::getenv(var);
    if (p && *p) return load(p);
  }
  return {};
}

}  // namespace gaf
