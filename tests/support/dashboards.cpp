#include "tests/support/dashboards.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string_view>

namespace keel::testing {
namespace {

using nlohmann::json;

// ---- dashboards --------------------------------------------------------------------------------------

std::string read_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + file.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// j[key] when j is an object holding a string there, else "".
std::string string_at(const json& j, const char* key) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// j[key] when j is an object holding an array there, else an empty array.
const json& array_at(const json& j, const char* key) {
  static const json empty = json::array();
  if (!j.is_object()) return empty;
  auto it = j.find(key);
  return it != j.end() && it->is_array() ? *it : empty;
}

std::string trim(std::string_view s) {
  auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return "";
  auto last = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(first, last - first + 1));
}

// Position of the last comma of `s` outside quotes, braces and parentheses, or npos.
size_t last_top_level_comma(std::string_view s) {
  size_t found = std::string_view::npos;
  int depth = 0;
  char quote = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (quote) {
      if (c == '\\')
        ++i;
      else if (c == quote)
        quote = 0;
    } else if (c == '"' || c == '\'' || c == '`') {
      quote = c;
    } else if (c == '(' || c == '{') {
      ++depth;
    } else if (c == ')' || c == '}') {
      --depth;
    } else if (c == ',' && depth == 0) {
      found = i;
    }
  }
  return found;
}

// If `q` is `NAME( ... )`, the text between the parentheses.
std::optional<std::string> call_argument(const std::string& q, std::string_view name) {
  if (!q.starts_with(name) || q.size() < name.size() + 2 || q[name.size()] != '(' || q.back() != ')')
    return std::nullopt;
  return q.substr(name.size() + 1, q.size() - name.size() - 2);
}

// The PromQL expression of a Prometheus query variable, if it has one.
std::optional<std::string> variable_expr(const std::string& query) {
  std::string q = trim(query);
  if (auto arg = call_argument(q, "label_values")) {
    size_t comma = last_top_level_comma(*arg);
    if (comma == std::string::npos) return std::nullopt;  // label_values(label): no selector
    return trim(std::string_view(*arg).substr(0, comma));
  }
  if (auto arg = call_argument(q, "query_result")) return trim(*arg);
  if (q.empty() || q.starts_with("label_names(") || q.starts_with("metrics(")) return std::nullopt;
  return q;
}

void collect_panels(const json& panels, const std::string& file, std::vector<DashboardQuery>& out) {
  for (const auto& panel : panels) {
    for (const auto& target : array_at(panel, "targets")) {
      std::string expr = string_at(target, "expr");
      if (!expr.empty()) out.push_back({file, string_at(panel, "title"), expr, DashboardQuery::Kind::panel});
    }
    collect_panels(array_at(panel, "panels"), file, out);  // a collapsed row holds its panels
  }
}

void collect_annotations(const json& doc, const std::string& file, std::vector<DashboardQuery>& out) {
  if (!doc.contains("annotations")) return;
  for (const auto& a : array_at(doc["annotations"], "list")) {
    // Grafana 9 keeps the query in "expr"; newer versions may move it into "target".
    std::string expr = string_at(a, "expr");
    if (expr.empty() && a.contains("target")) expr = string_at(a["target"], "expr");
    if (!expr.empty()) out.push_back({file, string_at(a, "name"), expr, DashboardQuery::Kind::annotation});
  }
}

void collect_variables(const json& doc, const std::string& file, std::vector<DashboardQuery>& out) {
  if (!doc.contains("templating")) return;
  for (const auto& v : array_at(doc["templating"], "list")) {
    if (string_at(v, "type") != "query") continue;
    // Grafana 9 writes the query as a string, Grafana 10 may write {"query": "...", "refId": ...}.
    std::string query = string_at(v, "query");
    if (query.empty() && v.contains("query")) query = string_at(v["query"], "query");
    if (auto expr = variable_expr(query))
      out.push_back({file, string_at(v, "name"), *expr, DashboardQuery::Kind::variable});
  }
}

// ---- PromQL tokens -------------------------------------------------------------------------------------

enum class Kind { ident, string, number, lparen, rparen, lbrace, rbrace, comma, op, range, variable };

struct Token {
  Kind kind;
  std::string text;  // strings without their quotes
};

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':'; }

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

class Lexer {
 public:
  explicit Lexer(std::string_view src) : s_(src) {}

  std::vector<Token> tokens() {
    std::vector<Token> out;
    while (skip_space_and_comments()) out.push_back(next());
    return out;
  }

 private:
  bool skip_space_and_comments() {
    while (i_ < s_.size()) {
      if (std::isspace(static_cast<unsigned char>(s_[i_]))) {
        ++i_;
      } else if (s_[i_] == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else {
        return true;
      }
    }
    return false;
  }

  Token next() {
    char c = s_[i_];
    if (c == '"' || c == '\'' || c == '`') return quoted(c);
    if (c == '[') return until(']', Kind::range);  // a range or subquery: durations, no metrics
    if (c == '$') return variable();
    if (std::isdigit(static_cast<unsigned char>(c)) ||
        (c == '.' && i_ + 1 < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_ + 1]))))
      return number();
    if (ident_start(c)) return take_while(ident_char, Kind::ident);
    ++i_;
    switch (c) {
      case '(':
        return {Kind::lparen, "("};
      case ')':
        return {Kind::rparen, ")"};
      case '{':
        return {Kind::lbrace, "{"};
      case '}':
        return {Kind::rbrace, "}"};
      case ',':
        return {Kind::comma, ","};
      default:
        return {Kind::op, std::string(1, c)};
    }
  }

  Token quoted(char q) {
    size_t start = ++i_;
    while (i_ < s_.size() && s_[i_] != q) i_ += (s_[i_] == '\\' && q != '`') ? 2 : 1;
    if (i_ >= s_.size()) throw std::invalid_argument("unterminated string in PromQL: " + std::string(s_));
    return {Kind::string, std::string(s_.substr(start, i_++ - start))};
  }

  Token until(char close, Kind kind) {
    size_t end = s_.find(close, i_);
    if (end == std::string_view::npos)
      throw std::invalid_argument(std::string("missing '") + close + "' in PromQL: " + std::string(s_));
    Token t{kind, std::string(s_.substr(i_, end + 1 - i_))};
    i_ = end + 1;
    return t;
  }

  // A Grafana variable left in the expression: $name or ${name...}.
  Token variable() {
    if (i_ + 1 < s_.size() && s_[i_ + 1] == '{') return until('}', Kind::variable);
    size_t start = i_++;
    while (i_ < s_.size() && ident_char(s_[i_])) ++i_;
    return {Kind::variable, std::string(s_.substr(start, i_ - start))};
  }

  // Numbers and durations: 1, 0.99, 1e9, 1e-3, 0x1f, 5m, 1h30m.
  Token number() {
    size_t start = i_;
    bool hex = s_.substr(i_, 2) == "0x" || s_.substr(i_, 2) == "0X";
    while (i_ < s_.size()) {
      char c = s_[i_];
      bool exponent_sign = (c == '+' || c == '-') && !hex && (s_[i_ - 1] == 'e' || s_[i_ - 1] == 'E');
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || exponent_sign)) break;
      ++i_;
    }
    return {Kind::number, std::string(s_.substr(start, i_ - start))};
  }

  Token take_while(bool (*pred)(char), Kind kind) {
    size_t start = i_;
    while (i_ < s_.size() && pred(s_[i_])) ++i_;
    return {kind, std::string(s_.substr(start, i_ - start))};
  }

  std::string_view s_;
  size_t i_ = 0;
};

// ---- PromQL scan ---------------------------------------------------------------------------------------

bool is_aggregation(const std::string& w) {
  static const char* const kAggs[] = {"sum",    "min",   "max",          "avg",     "group", "stddev",
                                      "stdvar", "count", "count_values", "bottomk", "topk",  "quantile"};
  return std::ranges::any_of(kAggs, [&](const char* a) { return w == a; });
}

bool is_grouping_keyword(const std::string& w) {
  return w == "by" || w == "without" || w == "on" || w == "ignoring" || w == "group_left" ||
         w == "group_right";
}

// Words that are neither metrics nor labels where they stand outside braces.
bool is_keyword(const std::string& w) {
  static const char* const kWords[] = {"and",   "or",  "unless", "bool",  "offset",
                                       "atan2", "inf", "nan",    "start", "end"};
  return std::ranges::any_of(kWords, [&](const char* k) { return w == k; });
}

class Scanner {
 public:
  explicit Scanner(const std::string& expr) : expr_(expr), t_(Lexer(expr).tokens()) { match_brackets(); }

  PromScan scan() {
    for (size_t i = 0; i < t_.size();) i = step(i);
    for (auto& g : pending_) scan_.groupings.push_back(resolve(g));
    return std::move(scan_);
  }

 private:
  struct Pending {
    std::string clause;
    std::vector<std::string> labels;
    size_t keyword;  // token index of by/without/on/...
    size_t end;      // token index after its label list
  };

  // Pairs every ( with its ) and { with its }.
  void match_brackets() {
    close_.assign(t_.size(), 0);
    std::vector<size_t> stack;
    for (size_t i = 0; i < t_.size(); ++i) {
      Kind k = t_[i].kind;
      if (k == Kind::lparen || k == Kind::lbrace) {
        stack.push_back(i);
      } else if (k == Kind::rparen || k == Kind::rbrace) {
        Kind open = k == Kind::rparen ? Kind::lparen : Kind::lbrace;
        if (stack.empty() || t_[stack.back()].kind != open)
          throw std::invalid_argument("unbalanced brackets in PromQL: " + expr_);
        close_[stack.back()] = i;
        open_of_[i] = stack.back();
        stack.pop_back();
      }
    }
    if (!stack.empty()) throw std::invalid_argument("unbalanced brackets in PromQL: " + expr_);
  }

  bool is(size_t i, Kind k) const { return i < t_.size() && t_[i].kind == k; }

  // Handles the token at i; returns the index of the next token to look at.
  size_t step(size_t i) {
    if (is(i, Kind::lbrace)) return selector(i, i, "");
    if (!is(i, Kind::ident)) return i + 1;
    std::string word = lower(t_[i].text);
    if (is_grouping_keyword(word)) return label_list(i, word);
    if (is(i + 1, Kind::lparen)) return i + 1;  // a function or aggregation call
    if (is_aggregation(word) && is(i + 1, Kind::ident) &&
        (lower(t_[i + 1].text) == "by" || lower(t_[i + 1].text) == "without"))
      return i + 1;
    if (is_keyword(word)) return i + 1;
    return selector(i, i + 1, t_[i].text);
  }

  // `by (a, b)` and friends; group_left/group_right may stand without a list.
  size_t label_list(size_t i, const std::string& clause) {
    if (!is(i + 1, Kind::lparen)) return i + 1;
    size_t close = close_[i + 1];
    Pending p{clause, {}, i, close + 1};
    for (size_t k = i + 2; k < close; ++k)
      if (t_[k].kind == Kind::ident) p.labels.push_back(t_[k].text);
    pending_.push_back(std::move(p));
    return close + 1;
  }

  // A selector starting at token `at`, named `metric` (or unnamed), whose matchers, if any, open at `brace`.
  size_t selector(size_t at, size_t brace, std::string metric) {
    PromSelector sel{std::move(metric), {}};
    size_t next = brace;
    if (is(brace, Kind::lbrace)) {
      sel.matchers = matchers(brace + 1, close_[brace]);
      next = close_[brace] + 1;
    }
    if (sel.metric.empty())
      for (const auto& m : sel.matchers)
        if (m.label == "__name__" && m.op == "=") sel.metric = m.value;
    selector_at_.push_back(at);
    scan_.selectors.push_back(std::move(sel));
    return next;
  }

  // label op "value" [, ...] between tokens [from, to).
  std::vector<PromMatcher> matchers(size_t from, size_t to) const {
    std::vector<PromMatcher> out;
    for (size_t k = from; k < to; ++k) {
      if (t_[k].kind != Kind::ident) continue;
      PromMatcher m{t_[k].text, "", ""};
      while (k + 1 < to && t_[k + 1].kind == Kind::op) m.op += t_[++k].text;
      if (k + 1 < to && t_[k + 1].kind == Kind::string) m.value = t_[++k].text;
      out.push_back(std::move(m));
    }
    return out;
  }

  // The metrics of the selectors starting in [from, to).
  std::vector<std::string> metrics_in(size_t from, size_t to) const {
    std::vector<std::string> out;
    for (size_t s = 0; s < scan_.selectors.size(); ++s) {
      const auto& name = scan_.selectors[s].metric;
      if (selector_at_[s] >= from && selector_at_[s] < to && !name.empty() &&
          std::ranges::find(out, name) == out.end())
        out.push_back(name);
    }
    return out;
  }

  // The aggregated expression of a by/without clause: `agg by (..) (EXPR)` or `agg (EXPR) by (..)`;
  // for on/ignoring/group_* (or a clause that fits neither form) the whole expression.
  PromGrouping resolve(const Pending& p) const {
    PromGrouping g{p.clause, p.labels, metrics_in(0, t_.size())};
    if (p.clause != "by" && p.clause != "without") return g;
    if (is(p.end, Kind::lparen) && p.keyword > 0 && is_aggregation(lower(t_[p.keyword - 1].text))) {
      g.metrics = metrics_in(p.end, close_[p.end]);
    } else if (p.keyword > 0 && is(p.keyword - 1, Kind::rparen)) {
      size_t open = open_of_.at(p.keyword - 1);
      if (open > 0 && is_aggregation(lower(t_[open - 1].text))) g.metrics = metrics_in(open, p.keyword - 1);
    }
    return g;
  }

  std::string expr_;
  std::vector<Token> t_;
  std::vector<size_t> close_;
  std::map<size_t, size_t> open_of_;
  std::vector<size_t> selector_at_;  // token index where each selector starts (its name or its `{`)
  std::vector<Pending> pending_;
  PromScan scan_;
};

// Grafana's built-in interval variables, all replaced by the caller's interval.
bool is_interval_builtin(std::string_view name) {
  return name == "__rate_interval" || name == "__interval" || name == "__range";
}

}  // namespace

std::vector<DashboardQuery> dashboard_queries(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
  std::ranges::sort(files);

  std::vector<DashboardQuery> out;
  for (const auto& path : files) {
    json doc;
    try {
      doc = json::parse(read_file(path));
    } catch (const json::parse_error& e) {
      throw std::runtime_error(path.string() + ": not valid JSON: " + e.what());
    }
    std::string file = path.filename().string();
    collect_panels(array_at(doc, "panels"), file, out);
    collect_annotations(doc, file, out);
    collect_variables(doc, file, out);
  }
  return out;
}

std::string expand_grafana_variables(std::string expr, const std::string& rate_interval) {
  std::string out;
  size_t i = 0;
  while (i < expr.size()) {
    size_t name_start, name_end, next;
    if (expr[i] == '$' && i + 1 < expr.size() && expr[i + 1] == '{') {  // ${name} or ${name:format}
      next = expr.find('}', i);
      if (next == std::string::npos) break;
      name_start = i + 2;
      name_end = std::min(next, expr.find(':', name_start));
      ++next;
    } else if (expr[i] == '[' && expr.compare(i, 2, "[[") == 0 && expr.find("]]", i) != std::string::npos) {
      next = expr.find("]]", i);  // Grafana's old [[name]] syntax
      name_start = i + 2;
      name_end = std::min(next, expr.find(':', name_start));
      next += 2;
    } else if (expr[i] == '$') {  // $name
      name_start = next = i + 1;
      while (next < expr.size() &&
             (std::isalnum(static_cast<unsigned char>(expr[next])) || expr[next] == '_'))
        ++next;
      name_end = next;
    } else {
      out += expr[i++];
      continue;
    }
    std::string_view name(expr.data() + name_start, name_end - name_start);
    if (name.empty()) {
      out += expr[i++];
      continue;
    }
    if (name.starts_with("__") && !is_interval_builtin(name))
      throw std::invalid_argument("expand_grafana_variables: no value for Grafana's $" + std::string(name));
    out += is_interval_builtin(name) ? rate_interval : ".*";
    i = next;
  }
  out.append(expr, std::min(i, expr.size()));
  return out;
}

PromScan scan_promql(const std::string& expr) { return Scanner(expr).scan(); }

std::vector<std::string> metric_names(const std::string& expr) {
  std::vector<std::string> out;
  for (const auto& sel : scan_promql(expr).selectors)
    if (!sel.metric.empty() && std::ranges::find(out, sel.metric) == out.end()) out.push_back(sel.metric);
  return out;
}

}  // namespace keel::testing
