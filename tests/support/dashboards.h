// Test helpers for keel's Grafana dashboards (dashboards/*.json): every PromQL expression they hold, the
// Grafana variables in them replaced so Prometheus can run them, and a light PromQL scan that names the
// metrics and labels an expression uses. Used by tests/dashboards_test.cpp (checks against
// metrics/catalogue.h) and by the real-Prometheus integration test.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace keel::testing {

struct DashboardQuery {
  std::string file, where /* panel title / annotation / variable name */, expr;
  enum class Kind { panel, annotation, variable } kind = Kind::panel;
};

// Every PromQL expression of every *.json dashboard in `dir` (files in name order): panel targets
// (panels nested in rows included), annotation queries, and query variables; for a variable
// `label_values(SELECTOR, label)` the expression is SELECTOR, and variables without a selector
// (`label_values(label)`), the datasource variable and non-query variables are skipped. `file` is the
// file name, `where` the panel title, annotation name or variable name. Throws std::runtime_error on a
// file that is not valid JSON.
std::vector<DashboardQuery> dashboard_queries(const std::filesystem::path& dir);

// `expr` with Grafana's variables replaced: $__rate_interval, $__interval and $__range (also as ${...})
// by `rate_interval`; every other $var, ${var} or ${var:format} (the dashboards' $instance, $workload)
// by `.*`, which matches what their "All" value matches.
std::string expand_grafana_variables(std::string expr, const std::string& rate_interval);

// The metric names `expr` selects, each once, in order of appearance: identifiers standing as a
// selector (alone or followed by `{`), and `{__name__="m"}`. Functions, aggregation operators, keywords
// (by, without, on, ignoring, group_left, group_right, bool, and, or, unless, offset, ...), label names
// in braces or grouping lists, strings, numbers and durations are not metrics. Works on expanded and
// unexpanded expressions alike ($vars outside strings are skipped).
std::vector<std::string> metric_names(const std::string& expr);

// The finer scan behind metric_names, for label checks.
struct PromMatcher {
  std::string label, op, value;  // value unquoted (escapes kept as written)
};
struct PromSelector {
  std::string metric;  // "" when the selector names no single metric ({__name__=~"..."} or {job="x"})
  std::vector<PromMatcher> matchers;
};
// A label list: `by`/`without` of an aggregation, with the metrics selected inside the aggregated
// expression; or `on`/`ignoring`/`group_left`/`group_right` of a binary operation, with every metric of
// the whole expression (which side a label belongs to is not worked out).
struct PromGrouping {
  std::string clause;
  std::vector<std::string> labels;
  std::vector<std::string> metrics;
};
struct PromScan {
  std::vector<PromSelector> selectors;
  std::vector<PromGrouping> groupings;
};
// Throws std::invalid_argument on unbalanced brackets or an unterminated string.
PromScan scan_promql(const std::string& expr);

}  // namespace keel::testing
