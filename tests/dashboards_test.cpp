// keel's Grafana dashboards and Prometheus alert rules (dashboards/), checked against the metric catalogue
// (metrics/catalogue.h) and with promtool: every metric and label they use exists, every expression
// parses, the dashboards have the variables and panels they should, every alert has unit tests.
#include "tests/support/dashboards.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "metrics/catalogue.h"
#include "tests/support/tmp_tree.h"

namespace keel::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path& dashboards_dir() {
  static const fs::path dir = source_dir() / "dashboards";
  return dir;
}
const fs::path& rules_dir() {
  static const fs::path dir = dashboards_dir() / "rules";
  return dir;
}
const char* const kDatasourceUid = "${datasource}";

std::string join(const std::vector<std::string>& v, const char* sep = "\n  ") {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::string in_quotes(const std::string& s) { return "'" + s + "'"; }

// ---- promtool --------------------------------------------------------------------------------------------

bool have_promtool() { return run_command("command -v promtool").first == 0; }

#define REQUIRE_PROMTOOL() \
  if (!have_promtool()) FAIL() << "promtool not found: run scripts/deps.sh"

// ---- the catalogue -----------------------------------------------------------------------------------

// Labels Prometheus adds (instance, job) or histograms have (le): allowed on every metric.
const std::set<std::string> kExtraLabels = {"le", "instance", "job"};

// Values of the labels with a closed set of values, from the comments and help of metrics/catalogue.h.
const std::map<std::string, std::set<std::string>> kLabelValues = {
    {"class", {"critical", "best_effort", "other"}},
    {"knob", {"cpus", "shares", "l3_ways", "mba_percent", "steal_task", "class"}},
    {"direction", {"act", "give_back", "revert"}},
    {"mode", {"enforce", "observe"}},
    {"scope", {"same_llc", "cross_llc", "cross_numa"}},
    {"kind", {"sensing", "actuator"}},
    {"sensor", {"runqueue", "hardware_counters"}},
    {"mechanism", {"cpuset", "cpu_weight", "resctrl", "steal_task", "irq_affinity", "preempt_class"}},
    {"reason", {"map_full", "stamp_full", "gone", "idle", "unmatched", "best_effort"}},
};

std::set<std::string> split_labels(std::string_view csv) {
  std::set<std::string> out;
  while (!csv.empty()) {
    auto comma = csv.find(',');
    out.emplace(csv.substr(0, comma));
    csv = comma == std::string_view::npos ? "" : csv.substr(comma + 1);
  }
  return out;
}

// The catalogue entry a series name belongs to (histograms as _bucket/_sum/_count too).
const metrics::MetricDef* catalogue_entry(std::string_view series) {
  for (const auto& m : metrics::kCatalogue) {
    if (series == m.name) return &m;
    if (m.type != metrics::Type::histogram || !series.starts_with(m.name)) continue;
    auto suffix = series.substr(m.name.size());
    if (suffix == "_bucket" || suffix == "_sum" || suffix == "_count") return &m;
  }
  return nullptr;
}

// The labels a series may carry, or nothing for a name that is neither keel's nor Prometheus's `up`.
std::optional<std::set<std::string>> labels_of(const std::string& series) {
  std::set<std::string> labels = kExtraLabels;
  if (series == "up") return labels;
  const auto* def = catalogue_entry(series);
  if (def == nullptr) return std::nullopt;
  labels.merge(split_labels(def->labels));
  return labels;
}

// The literal alternatives of a matcher value ("a|b" -> a, b); nothing if it holds a variable or regex.
std::optional<std::vector<std::string>> literal_values(const PromMatcher& m) {
  if (m.op != "=" && m.op != "=~") return std::nullopt;
  if (m.value.find_first_of("$.*+?()[]{}\\^") != std::string::npos) return std::nullopt;
  std::vector<std::string> out;
  std::string_view v = m.value;
  while (true) {
    auto bar = v.find('|');
    out.emplace_back(v.substr(0, bar));
    if (bar == std::string_view::npos || m.op == "=") break;
    v = v.substr(bar + 1);
  }
  return out;
}

// Problems of one selector: an unknown metric, a label it does not have, a value outside the label's set.
void check_selector(const std::string& where, const PromSelector& sel, std::vector<std::string>& problems) {
  auto labels = labels_of(sel.metric);
  if (!labels) {
    problems.push_back(where + ": metric " + in_quotes(sel.metric) + " is not in metrics/catalogue.h");
    return;
  }
  for (const auto& m : sel.matchers) {
    if (!labels->contains(m.label)) {
      problems.push_back(where + ": " + sel.metric + " has no label " + in_quotes(m.label));
      continue;
    }
    auto allowed = kLabelValues.find(m.label);
    auto values = literal_values(m);
    if (allowed == kLabelValues.end() || !values) continue;
    for (const auto& v : *values)
      if (!allowed->second.contains(v))
        problems.push_back(where + ": " + m.label + "=" + in_quotes(v) + " is not a value keel exports");
  }
}

// Problems of a by/without/on/... list: by/without labels must be on every metric aggregated,
// on/ignoring/group_* labels on at least one metric of the expression.
void check_grouping(const std::string& where, const PromGrouping& g, std::vector<std::string>& problems) {
  bool every = g.clause == "by" || g.clause == "without";
  for (const auto& label : g.labels) {
    int have = 0, known = 0;
    for (const auto& metric : g.metrics) {
      auto labels = labels_of(metric);
      if (!labels) continue;  // reported by check_selector
      ++known;
      have += labels->contains(label) ? 1 : 0;
    }
    if (known > 0 && (every ? have < known : have == 0))
      problems.push_back(where + ": " + g.clause + " (" + label + ") but " + join(g.metrics, ", ") +
                         (every ? " do not all have it" : " have no such label"));
  }
}

std::vector<std::string> expression_problems(const std::string& where, const std::string& expr) {
  std::vector<std::string> problems;
  PromScan scan;
  try {
    scan = scan_promql(expr);
  } catch (const std::exception& e) {
    return {where + ": " + e.what()};
  }
  if (scan.selectors.empty()) problems.push_back(where + ": selects no metric: " + expr);
  for (const auto& sel : scan.selectors) check_selector(where, sel, problems);
  for (const auto& g : scan.groupings) check_grouping(where, g, problems);
  return problems;
}

std::string where_of(const DashboardQuery& q) { return q.file + " / " + in_quotes(q.where); }

// Every metric, label and label value the queries use must be in the catalogue.
std::vector<std::string> catalogue_problems(const std::vector<DashboardQuery>& queries) {
  std::vector<std::string> problems;
  for (const auto& q : queries) {
    auto p = expression_problems(where_of(q), q.expr);
    problems.insert(problems.end(), p.begin(), p.end());
  }
  return problems;
}

// The variables' own queries cannot filter by the variable they define.
bool defines_variable(const DashboardQuery& q, const std::string& metric, const char* label) {
  return q.where == label && ((q.where == "job" && metric == "keel_build_info") ||
                              (q.where == "instance" && metric == "keel_build_info") ||
                              (q.where == "workload" && metric == "keel_runqueue_latency_seconds_count"));
}

// Every selector filters job=~"$job" and instance=~"$instance", and workload=~"...$workload..." where the
// metric has a workload label (except in the query defining that variable).
std::vector<std::string> filter_problems(const std::vector<DashboardQuery>& queries) {
  std::vector<std::string> problems;
  for (const auto& q : queries) {
    for (const auto& sel : scan_promql(q.expr).selectors) {
      auto has = [&](const char* label, const char* var) {
        return std::ranges::any_of(sel.matchers, [&](const PromMatcher& m) {
          return m.label == label && m.op == "=~" && m.value.find(var) != std::string::npos;
        });
      };
      auto labels = labels_of(sel.metric);
      if (!has("job", "$job") && !defines_variable(q, sel.metric, "job"))
        problems.push_back(where_of(q) + ": " + sel.metric + " lacks job=~\"$job\"");
      // The job variable's own query is above the instance variable too.
      if (!has("instance", "$instance") && !defines_variable(q, sel.metric, "instance") &&
          !defines_variable(q, sel.metric, "job"))
        problems.push_back(where_of(q) + ": " + sel.metric + " lacks instance=~\"$instance\"");
      if (labels && labels->contains("workload") && !has("workload", "$workload") &&
          !defines_variable(q, sel.metric, "workload"))
        problems.push_back(where_of(q) + ": " + sel.metric + " lacks workload=~\"$workload\"");
    }
  }
  return problems;
}

// ---- dashboard structure -------------------------------------------------------------------------------

json load_json(const fs::path& file) { return json::parse(slurp(file)); }

std::vector<fs::path> dashboard_files(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".json") out.push_back(e.path());
  std::ranges::sort(out);
  return out;
}

// Every panel, rows' nested panels included.
void flatten_panels(const json& panels, std::vector<json>& out) {
  if (!panels.is_array()) return;
  for (const auto& p : panels) {
    out.push_back(p);
    if (p.contains("panels")) flatten_panels(p["panels"], out);
  }
}
std::vector<json> all_panels(const json& doc) {
  std::vector<json> out;
  if (doc.contains("panels")) flatten_panels(doc["panels"], out);
  return out;
}

const json kDatasource = {{"type", "prometheus"}, {"uid", kDatasourceUid}};

// Any "datasource" anywhere in the document other than {"type":"prometheus","uid":"${datasource}"}.
void check_datasources(const json& j, const std::string& path, std::vector<std::string>& problems) {
  if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      if (key == "datasource" && value != kDatasource)
        problems.push_back(path + ".datasource is " + value.dump() + ", not " + kDatasource.dump());
      check_datasources(value, path + "." + key, problems);
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i)
      check_datasources(j[i], path + "[" + std::to_string(i) + "]", problems);
  }
}

std::string variable_query(const json& v) {
  if (!v.contains("query")) return "";
  const json& q = v["query"];
  if (q.is_string()) return q.get<std::string>();
  return q.is_object() && q.contains("query") ? q["query"].get<std::string>() : "";
}

void check_query_variable(const json& v, const std::string& query, std::vector<std::string>& problems) {
  std::string name = v.value("name", "?");
  if (v.value("type", "") != "query") problems.push_back("variable " + name + " is not a query variable");
  if (variable_query(v) != query)
    problems.push_back("variable " + name + " queries " + in_quotes(variable_query(v)) + ", not " +
                       in_quotes(query));
  if (!v.value("multi", false) || !v.value("includeAll", false) || v.value("allValue", "") != ".*")
    problems.push_back("variable " + name + " must be multi, includeAll, allValue \".*\"");
}

void check_variables(const json& doc, bool with_workload, std::vector<std::string>& problems) {
  std::vector<std::string> want = {"datasource", "job", "instance"};
  if (with_workload) want.push_back("workload");
  std::vector<std::string> names;
  json vars = doc.contains("templating") ? doc["templating"].value("list", json::array()) : json::array();
  for (const auto& v : vars) names.push_back(v.value("name", "?"));
  if (names != want) problems.push_back("variables are " + join(names, ", ") + ", want " + join(want, ", "));
  if (names != want) return;
  if (vars[0].value("type", "") != "datasource" || vars[0].value("query", "") != "prometheus")
    problems.push_back("variable datasource must be a datasource variable of type prometheus");
  check_query_variable(vars[1], "label_values(keel_build_info, job)", problems);
  check_query_variable(vars[2], "label_values(keel_build_info{job=~\"$job\"}, instance)", problems);
  if (with_workload)
    check_query_variable(
        vars[3],
        "label_values(keel_runqueue_latency_seconds_count{job=~\"$job\", instance=~\"$instance\"}, workload)",
        problems);
}

// Panels, targets and annotations all use the datasource variable; panel ids are unique.
void check_panels(const json& doc, std::vector<std::string>& problems) {
  std::set<int> ids;
  for (const auto& p : all_panels(doc)) {
    std::string title = p.value("title", "?");
    if (!p.contains("id") || !p["id"].is_number_integer() || !ids.insert(p["id"].get<int>()).second)
      problems.push_back("panel " + in_quotes(title) + " has a missing or duplicate id");
    if (!p.contains("gridPos")) problems.push_back("panel " + in_quotes(title) + " has no gridPos");
    if (p.value("type", "") == "row") continue;
    if (p.value("datasource", json()) != kDatasource)
      problems.push_back("panel " + in_quotes(title) + " does not use the datasource variable");
    if (p.value("targets", json::array()).empty())
      problems.push_back("panel " + in_quotes(title) + " has no query");
    for (const auto& t : p.value("targets", json::array()))
      if (t.value("datasource", json()) != kDatasource)
        problems.push_back("a target of " + in_quotes(title) + " does not use the datasource variable");
  }
  json annotations =
      doc.contains("annotations") ? doc["annotations"].value("list", json::array()) : json::array();
  for (const auto& a : annotations)
    if (a.value("datasource", json()) != kDatasource)
      problems.push_back("annotation " + in_quotes(a.value("name", "?")) +
                         " does not use the datasource variable");
}

// What one dashboard file must look like to import and provision anywhere.
std::vector<std::string> structure_problems(const fs::path& file, bool with_workload) {
  json doc;
  try {
    doc = load_json(file);
  } catch (const std::exception& e) {
    return {file.filename().string() + ": not valid JSON: " + e.what()};
  }
  std::vector<std::string> problems;
  if (doc.contains("id") && !doc["id"].is_null())
    problems.push_back("has an \"id\"; provisioned dashboards must not");
  if (!doc.value("uid", "").starts_with("keel-")) problems.push_back("uid must be set and start with keel-");
  if (doc.value("title", "").empty()) problems.push_back("has no title");
  if (doc.value("schemaVersion", 0) != 38) problems.push_back("schemaVersion is not 38");
  check_variables(doc, with_workload, problems);
  check_panels(doc, problems);
  check_datasources(doc, "$", problems);
  for (auto& p : problems) p = file.filename().string() + ": " + p;
  return problems;
}

bool has_workload_variable(const fs::path& file) { return file.filename() != "keel-health.json"; }

// ---- panels the dashboards must have -----------------------------------------------------------------

struct PanelNeed {
  std::string file = {};
  std::string what = {};                   // for the failure message
  std::set<std::string> types = {};        // panel types that do; empty = any
  std::vector<std::string> metrics = {};   // all selected by the panel's queries
  std::vector<std::string> contains = {};  // substrings of the panel's queries
  std::string format = {};                 // a target with this format ("heatmap", "table")
  std::string description = {};            // substring of the panel's description
  bool threshold_at_zero = false;          // a threshold step at 0
};

const std::vector<PanelNeed>& panel_needs() {
  static const std::vector<PanelNeed> needs = [] {
    const std::string in = "keel-interference.json", ct = "keel-controller.json", he = "keel-health.json";
    std::vector<PanelNeed> n = {
        {in,
         "per-workload run-queue latency heatmap",
         {"heatmap"},
         {"keel_runqueue_latency_seconds_bucket"},
         {"sum by (le)", "[$__rate_interval]"},
         "heatmap"},
        {in,
         "p99 against SLO",
         {"timeseries"},
         {"keel_runqueue_latency_seconds_bucket", "keel_runqueue_latency_p99_seconds",
          "keel_slo_target_seconds"},
         {"histogram_quantile(0.99,"}},
        {in, "slack with a threshold at 0", {"timeseries"}, {"keel_slo_slack_ratio"}, {}, "", "", true},
        {in, "SLO violated state", {"state-timeline", "stat"}, {"keel_slo_violated"}},
        {in,
         "migrations by scope",
         {"timeseries"},
         {"keel_migrations_total"},
         {"cross_llc", "cross_numa", "rate("}},
        {in,
         "cache MPKI (needs a PMU)",
         {"timeseries"},
         {"keel_cache_misses_total", "keel_instructions_total"},
         {"1000 *"},
         "",
         "PMU"},
        {in, "antagonist ranking", {"table", "bargauge"}, {"keel_antagonist_score"}, {"sort_desc("}},
        {in, "interference detected", {}, {"keel_interference_detected"}},
        {in,
         "CPU usage by workload and class",
         {"timeseries"},
         {"keel_cpu_usage_seconds_total"},
         {"workload, class", "rate("}},
        {in, "CPU throttling by workload", {"timeseries"}, {"keel_cpu_throttled_periods_total"}, {"rate("}},
        {ct, "controller rung", {"timeseries"}, {"keel_controller_rung"}},
        {ct, "blocked", {"state-timeline", "timeseries"}, {"keel_controller_blocked"}},
        {ct, "actions by direction", {"timeseries"}, {"keel_actions_total"}, {"by (direction", "rate("}},
        {ct,
         "reverts and give-backs",
         {"timeseries"},
         {"keel_actions_total"},
         {"direction=~\"revert|give_back\""}},
        {ct, "mode", {"stat", "state-timeline"}, {"keel_mode"}},
        {he, "tick duration", {"timeseries"}, {"keel_tick_duration_seconds_bucket"}, {"histogram_quantile("}},
        {he, "ticks per second", {"timeseries"}, {"keel_ticks_total"}, {"rate("}},
        {he, "time since last tick", {}, {"keel_last_tick_timestamp_seconds"}, {"time() -"}},
        {he, "BPF ns/event", {"timeseries"}, {"keel_bpf_cost_seconds_per_event"}, {"* 1e9"}},
        {he, "BPF events/s", {"timeseries"}, {"keel_bpf_events_per_second"}},
        {he, "BPF CPU ratio", {"timeseries"}, {"keel_bpf_cpu_ratio"}},
        {he,
         "per-program BPF run time",
         {"timeseries"},
         {"keel_bpf_run_time_seconds_total", "keel_bpf_run_count_total"},
         {"by (instance, program)"}},
        {he, "errors by kind", {"timeseries"}, {"keel_errors_total"}, {"kind)", "rate("}},
        {he, "dropped events", {"timeseries"}, {"keel_bpf_dropped_total"}, {"rate("}},
        {he,
         "map fullness",
         {"bargauge", "timeseries"},
         {"keel_bpf_map_entries", "keel_bpf_map_max_entries"},
         {" / "}},
        {he, "sensors available", {}, {"keel_sensor_available"}},
        {he, "mechanisms enabled", {}, {"keel_mechanism_enabled"}},
        {he, "keel's CPU", {"timeseries"}, {"process_cpu_seconds_total"}, {"rate("}},
        {he, "keel's memory", {"timeseries"}, {"process_resident_memory_bytes"}},
        {he, "workload instances by class", {}, {"keel_workload_instances"}, {"class"}},
        {he, "folded instances", {}, {"keel_metrics_folded_instances"}},
        {he, "scrape health", {}, {"up"}, {"job=\"keel\""}},
    };
    for (const char* knob : {"cpus", "shares", "l3_ways", "mba_percent", "steal_task", "class"})
      n.push_back({ct,
                   std::string("knob ") + knob + " over time",
                   {"timeseries", "state-timeline"},
                   {"keel_knob_value"},
                   {std::string("knob=\"") + knob + "\""}});
    return n;
  }();
  return needs;
}

bool threshold_at_zero(const json& panel) {
  json steps = panel.value("fieldConfig", json::object())
                   .value("defaults", json::object())
                   .value("thresholds", json::object())
                   .value("steps", json::array());
  return std::ranges::any_of(steps, [](const json& s) { return s.contains("value") && s["value"] == 0; });
}

bool panel_meets(const json& panel, const PanelNeed& need) {
  if (!need.types.empty() && !need.types.contains(panel.value("type", ""))) return false;
  std::string exprs;
  bool format_ok = need.format.empty();
  for (const auto& t : panel.value("targets", json::array())) {
    exprs += t.value("expr", "") + "\n";
    format_ok = format_ok || t.value("format", "") == need.format;
  }
  auto names = metric_names(exprs);
  return format_ok &&
         std::ranges::all_of(
             need.metrics,
             [&](const std::string& m) { return std::ranges::find(names, m) != names.end(); }) &&
         std::ranges::all_of(need.contains,
                             [&](const std::string& s) { return exprs.find(s) != std::string::npos; }) &&
         panel.value("description", "").find(need.description) != std::string::npos &&
         (!need.threshold_at_zero || threshold_at_zero(panel));
}

std::vector<std::string> missing_panels(const fs::path& dir) {
  std::vector<std::string> missing;
  for (const auto& need : panel_needs()) {
    std::vector<json> panels;
    if (fs::exists(dir / need.file)) panels = all_panels(load_json(dir / need.file));
    if (std::ranges::none_of(panels, [&](const json& p) { return panel_meets(p, need); }))
      missing.push_back(need.file + ": no panel for " + need.what);
  }
  return missing;
}

// ---- alert rules (line scan) -----------------------------------------------------------------------------

// keel-alerts.yml and keel-alerts.test.yml are read by a line scan, not a YAML parser; both files say
// which format they keep: `- alert: Name` lines, `expr:` on one line or as an indented `|` block, and
// `alertname:` / `exp_alerts: []` / `exp_alerts:` + `- exp_labels:` lines in the tests.

std::string trim(const std::string& s) {
  auto a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\r") - a + 1);
}

size_t indent_of(const std::string& line) { return std::min(line.find_first_not_of(' '), line.size()); }

std::vector<std::string> lines_of(const fs::path& file) {
  std::vector<std::string> out;
  std::istringstream in(slurp(file));
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

struct AlertRule {
  std::string name, expr;
};

std::vector<AlertRule> alert_rules(const fs::path& rules_file) {
  std::vector<AlertRule> rules;
  auto lines = lines_of(rules_file);
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string t = trim(lines[i]);
    if (t.starts_with("- alert:")) rules.push_back({trim(t.substr(8)), ""});
    if (rules.empty() || !t.starts_with("expr:")) continue;
    std::string expr = trim(t.substr(5));
    if (expr == "|" || expr == "|-") {  // a block: the lines indented deeper than `expr:`
      expr.clear();
      for (size_t k = i + 1;
           k < lines.size() && (trim(lines[k]).empty() || indent_of(lines[k]) > indent_of(lines[i])); ++k)
        expr += trim(lines[k]) + "\n";
    }
    rules.back().expr = expr;
  }
  return rules;
}

struct AlertCases {
  bool fires = false, quiet = false;
};

std::map<std::string, AlertCases> alert_cases(const fs::path& test_file) {
  std::map<std::string, AlertCases> cases;
  auto lines = lines_of(test_file);
  std::string alert;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string t = trim(lines[i]);
    if (t.starts_with("- ")) t = trim(t.substr(2));  // the first key of a list item
    if (t.starts_with("alertname:")) alert = trim(t.substr(10));
    if (alert.empty()) continue;
    if (t == "exp_alerts: []") cases[alert].quiet = true;
    if (t == "exp_alerts:" && i + 1 < lines.size() && trim(lines[i + 1]).starts_with("- exp_labels:"))
      cases[alert].fires = true;
  }
  return cases;
}

// Alerts of `rules_file` without a firing or without a quiet case in `test_file`.
std::vector<std::string> untested_alerts(const fs::path& rules_file, const fs::path& test_file) {
  std::vector<std::string> problems;
  auto cases = alert_cases(test_file);
  for (const auto& rule : alert_rules(rules_file)) {
    if (!cases[rule.name].fires) problems.push_back(rule.name + " has no case where it fires");
    if (!cases[rule.name].quiet)
      problems.push_back(rule.name + " has no case where it stays quiet (exp_alerts: [])");
  }
  return problems;
}

std::vector<DashboardQuery> alert_queries(const fs::path& rules_file) {
  std::vector<DashboardQuery> out;
  for (const auto& r : alert_rules(rules_file))
    out.push_back({rules_file.filename().string(), r.name, r.expr});
  return out;
}

// ---- the shipped files ----------------------------------------------------------------------------------

TEST(Dashboards, PromtoolCheckRulesPasses) {
  REQUIRE_PROMTOOL();
  auto [rc, out] = run_command("cd '" + rules_dir().string() + "' && promtool check rules keel-alerts.yml");
  EXPECT_EQ(rc, 0) << "promtool check rules keel-alerts.yml failed:\n" << out;
}

TEST(Dashboards, PromtoolTestRulesPasses) {
  REQUIRE_PROMTOOL();
  auto [rc, out] =
      run_command("cd '" + rules_dir().string() + "' && promtool test rules keel-alerts.test.yml");
  EXPECT_EQ(rc, 0) << "promtool test rules keel-alerts.test.yml failed:\n" << out;
}

TEST(Dashboards, ScrapeExampleIsValidPrometheusConfig) {
  REQUIRE_PROMTOOL();
  auto [rc, out] = run_command("promtool check config '" +
                               (dashboards_dir() / "provisioning" / "prometheus-scrape.yml").string() + "'");
  EXPECT_EQ(rc, 0) << "promtool check config on the scrape example failed:\n" << out;
}

// Every dashboard expression, variables expanded, is checked by promtool as a recording rule.
TEST(Dashboards, EveryExpressionIsValidPromql) {
  REQUIRE_PROMTOOL();
  auto queries = dashboard_queries(dashboards_dir());
  ASSERT_FALSE(queries.empty());
  std::string rules = "groups:\n  - name: dashboard_expressions\n    rules:\n";
  for (size_t i = 0; i < queries.size(); ++i)
    rules += "      - record: keel_dashboard_check:" + std::to_string(i) +
             "\n        expr: " + json(expand_grafana_variables(queries[i].expr, "1m")).dump() + "\n";
  TempDir tmp;
  std::ofstream(tmp.path() / "exprs.yml") << rules;
  auto [rc, out] = run_command("promtool check rules '" + (tmp.path() / "exprs.yml").string() + "'");
  std::string listing;
  for (size_t i = 0; i < queries.size(); ++i)
    listing += std::to_string(i) + ": " + where_of(queries[i]) + ": " + queries[i].expr + "\n";
  EXPECT_EQ(rc, 0) << "promtool rejects a dashboard expression:\n"
                   << out << "\nexpressions (record N):\n"
                   << listing;
}

TEST(Dashboards, TheThreeDashboardsParseWithUniqueUidsAndTitles) {
  auto files = dashboard_files(dashboards_dir());
  std::vector<std::string> names;
  for (const auto& f : files) names.push_back(f.filename().string());
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("keel-controller.json", "keel-health.json",
                                                     "keel-interference.json"));
  std::map<std::string, std::string> uids, titles;
  for (const auto& f : files) {
    json doc;
    ASSERT_NO_THROW(doc = load_json(f)) << f << " is not valid JSON";
    auto uid = doc.value("uid", ""), title = doc.value("title", "");
    EXPECT_TRUE(uids.emplace(uid, f.filename()).second)
        << f.filename() << " repeats uid " << uid << " of " << uids[uid];
    EXPECT_TRUE(titles.emplace(title, f.filename()).second) << f.filename() << " repeats title " << title;
    EXPECT_EQ(uid, f.stem().string()) << "uid should be the file name, stable across imports";
  }
}

TEST(Dashboards, StructureVariablesAndDatasource) {
  for (const auto& f : dashboard_files(dashboards_dir())) {
    auto problems = structure_problems(f, has_workload_variable(f));
    EXPECT_TRUE(problems.empty()) << join(problems);
  }
}

TEST(Dashboards, MetricsLabelsAndValuesAreInTheCatalogue) {
  auto queries = dashboard_queries(dashboards_dir());
  ASSERT_GT(queries.size(), 40u) << "fewer queries than the dashboards hold: is dashboard_queries broken?";
  auto problems = catalogue_problems(queries);
  EXPECT_TRUE(problems.empty()) << "dashboards use what keel does not export:\n  " << join(problems);
}

TEST(Dashboards, EverySelectorFiltersInstanceAndWorkload) {
  auto problems = filter_problems(dashboard_queries(dashboards_dir()));
  EXPECT_TRUE(problems.empty()) << join(problems);
}

TEST(Dashboards, DashboardsHaveTheRequestedPanels) {
  auto missing = missing_panels(dashboards_dir());
  EXPECT_TRUE(missing.empty()) << join(missing);
}

TEST(Dashboards, ControllerActionsAreAnnotations) {
  json doc = load_json(dashboards_dir() / "keel-controller.json");
  std::set<std::string> directions;
  for (const auto& a : doc["annotations"]["list"]) {
    std::string expr = a.value("expr", ""), text = a.value("textFormat", "") + a.value("titleFormat", "");
    if (expr.find("increase(keel_actions_total") == std::string::npos) continue;
    for (const char* label : {"{{knob}}", "{{direction}}", "{{mode}}"})
      EXPECT_NE(text.find(label), std::string::npos)
          << a.value("name", "") << ": annotation text lacks " << label;
    for (const char* d : {"act", "give_back", "revert"})
      if (expr.find(std::string("direction=\"") + d + "\"") != std::string::npos) directions.insert(d);
  }
  EXPECT_EQ(directions, (std::set<std::string>{"act", "give_back", "revert"}))
      << "an annotation on increase(keel_actions_total) per direction";
}

TEST(Dashboards, EveryCatalogueMetricIsShownOrAlerted) {
  std::set<std::string> used;
  auto queries = dashboard_queries(dashboards_dir());
  auto rules = alert_queries(rules_dir() / "keel-alerts.yml");
  queries.insert(queries.end(), rules.begin(), rules.end());
  for (const auto& q : queries)
    for (const auto& name : metric_names(q.expr))
      if (const auto* def = catalogue_entry(name)) used.emplace(def->name);
  std::vector<std::string> unused;
  for (const auto& m : metrics::kCatalogue)
    if (!used.contains(std::string(m.name))) unused.emplace_back(m.name);
  EXPECT_TRUE(unused.empty()) << "no dashboard or alert shows:\n  " << join(unused);
}

TEST(AlertRules, TheRequestedAlertsExist) {
  std::vector<std::string> names;
  for (const auto& r : alert_rules(rules_dir() / "keel-alerts.yml")) names.push_back(r.name);
  EXPECT_THAT(names,
              ::testing::UnorderedElementsAre(
                  "KeelSloViolated", "KeelInterferenceDetected", "KeelDown", "KeelNotScraped", "KeelStalled",
                  "KeelActionsFailing", "KeelSensingFailing", "KeelBpfOverBudget", "KeelBpfMapNearlyFull",
                  "KeelBpfDroppingEvents", "KeelControllerBlocked", "KeelKnobDrift"));
  for (const auto& r : alert_rules(rules_dir() / "keel-alerts.yml"))
    EXPECT_FALSE(r.expr.empty()) << r.name << ": the line scan found no expr";
}

TEST(AlertRules, MetricsLabelsAndValuesAreInTheCatalogue) {
  auto problems = catalogue_problems(alert_queries(rules_dir() / "keel-alerts.yml"));
  EXPECT_TRUE(problems.empty()) << "alert rules use what keel does not export:\n  " << join(problems);
}

TEST(AlertRules, EveryAlertHasAFiringAndAQuietCase) {
  auto problems = untested_alerts(rules_dir() / "keel-alerts.yml", rules_dir() / "keel-alerts.test.yml");
  EXPECT_TRUE(problems.empty()) << "keel-alerts.test.yml:\n  " << join(problems);
}

// Each alert's runbook_url points at its own section of dashboards/README.md where the Debian package
// installs that file (/usr/share/doc/keel/dashboards.md), and the section is there.
TEST(AlertRules, EveryAlertHasARunbookSectionInTheDashboardsReadme) {
  const std::string rules = slurp(rules_dir() / "keel-alerts.yml");
  const std::string readme = slurp(dashboards_dir() / "README.md");
  const std::string rule = "\n      - alert: ";
  size_t alerts = 0;
  for (size_t at = rules.find(rule); at != std::string::npos; ++alerts) {
    size_t name_at = at + rule.size();
    const std::string name = rules.substr(name_at, rules.find('\n', name_at) - name_at);
    const size_t next = rules.find(rule, name_at);
    const std::string block = rules.substr(at, next == std::string::npos ? std::string::npos : next - at);
    std::string anchor = name;
    std::ranges::transform(anchor, anchor.begin(), [](unsigned char c) { return std::tolower(c); });
    EXPECT_NE(block.find("runbook_url: \"file:///usr/share/doc/keel/dashboards.md#" + anchor + "\""),
              std::string::npos)
        << name << " has no runbook_url pointing at #" << anchor;
    EXPECT_NE(readme.find("\n### " + name + "\n"), std::string::npos)
        << "dashboards/README.md has no ### " << name;
    at = next;
  }
  EXPECT_GE(alerts, 10u);
  // The package installs the README under that name.
  EXPECT_NE(
      slurp(testing::source_dir() / "CMakeLists.txt")
          .find(
              "install(FILES dashboards/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} RENAME dashboards.md)"),
      std::string::npos);
}

// render.sh writes the rules for another scrape job name (the job is a parameter of the rules): the
// promtool tests, with every series and expected label moved to that job, pass on its output and fail
// on the rules as shipped; runbook URLs move to the given base; a name that would change the YAML is
// refused.
TEST(AlertRules, RenderedForAnotherJobTheyFireOnThatJobsSeries) {
  REQUIRE_PROMTOOL();
  TempDir tmp;
  const std::string render = "bash '" + (rules_dir() / "render.sh").string() + "'";
  auto [rc, rendered] =
      run_command(render + " --job keel-nodes --runbooks https://wiki.example.com/keel/dashboards.md");
  ASSERT_EQ(rc, 0) << rendered;
  EXPECT_EQ(rendered.find("job=\"keel\""), std::string::npos);
  EXPECT_NE(rendered.find("up{job=\"keel-nodes\"}"), std::string::npos);
  EXPECT_EQ(rendered.find("runbook_url: \"file://"), std::string::npos);
  EXPECT_NE(rendered.find("runbook_url: \"https://wiki.example.com/keel/dashboards.md#keeldown\""),
            std::string::npos);
  auto moved = [](std::string t) {
    for (auto [from, to] : std::vector<std::pair<std::string, std::string>>{
             {"job=\"keel\"", "job=\"keel-nodes\""},
             {"job: keel\n", "job: keel-nodes\n"},
             {"in job keel for", "in job keel-nodes for"},
             {"(job_name: keel)", "(job_name: keel-nodes)"},
             {"file:///usr/share/doc/keel/dashboards.md#", "https://wiki.example.com/keel/dashboards.md#"}})
      for (size_t at = t.find(from); at != std::string::npos; at = t.find(from, at + to.size()))
        t.replace(at, from.size(), to);
    return t;
  };
  const std::string tests = moved(slurp(rules_dir() / "keel-alerts.test.yml"));
  ASSERT_NE(tests.find("job=\"keel-nodes\""), std::string::npos);
  std::ofstream(tmp.path() / "keel-alerts.test.yml") << tests;
  std::ofstream(tmp.path() / "keel-alerts.yml") << rendered;
  auto [trc, tout] =
      run_command("cd '" + tmp.path().string() + "' && promtool test rules keel-alerts.test.yml");
  EXPECT_EQ(trc, 0) << tout;
  // The shipped rules do not fire on the other job's series.
  fs::copy_file(rules_dir() / "keel-alerts.yml", tmp.path() / "keel-alerts.yml",
                fs::copy_options::overwrite_existing);
  auto [src, sout] =
      run_command("cd '" + tmp.path().string() + "' && promtool test rules keel-alerts.test.yml");
  EXPECT_NE(src, 0) << sout;
  for (const char* bad :
       {"--job 'a\"b'", "--job 'x|y'", "--runbooks 'https://x/#a'", "--runbooks 'no-scheme'"}) {
    auto [brc, bout] = run_command(render + " " + bad);
    EXPECT_EQ(brc, 2) << bad << ": " << bout;
  }
}

// ---- the checks themselves, on broken copies ------------------------------------------------------------

// The shipped dashboards copied into a temporary directory, one string replaced in one file.
struct BrokenCopy {
  TempDir tmp;
  BrokenCopy(const std::string& file, const std::string& from, const std::string& to) {
    for (const auto& f : dashboard_files(dashboards_dir())) fs::copy_file(f, tmp.path() / f.filename());
    std::string text = slurp(tmp.path() / file);
    auto at = text.find(from);
    if (at == std::string::npos) throw std::runtime_error(file + " does not contain " + from);
    text.replace(at, from.size(), to);
    std::ofstream(tmp.path() / file, std::ios::trunc) << text;
  }
  const fs::path& dir() const { return tmp.path(); }
};

std::string all_problems(const fs::path& dir) {
  auto queries = dashboard_queries(dir);
  std::vector<std::string> problems = catalogue_problems(queries);
  for (auto& p : filter_problems(queries)) problems.push_back(p);
  for (auto& p : missing_panels(dir)) problems.push_back(p);
  for (const auto& f : dashboard_files(dir))
    for (auto& p : structure_problems(f, has_workload_variable(f))) problems.push_back(p);
  return join(problems);
}

TEST(DashboardChecks, TheShippedDashboardsAreClean) { EXPECT_EQ(all_problems(dashboards_dir()), ""); }

struct Breakage {
  std::string file, from, to, expect;
};

TEST(DashboardChecks, CatchEachKindOfMistakeInACopy) {
  const std::vector<Breakage> cases = {
      {"keel-interference.json", "keel_slo_slack_ratio{", "keel_slo_slack{",
       "metric 'keel_slo_slack' is not in metrics/catalogue.h"},
      {"keel-health.json", "sum by (instance, reason) (rate(keel_bpf_dropped_total",
       "sum by (instance, kind) (rate(keel_bpf_dropped_total", "by (kind) but keel_bpf_dropped_total"},
      {"keel-controller.json", "direction=\\\"revert\\\"", "direction=\\\"reverted\\\"",
       "direction='reverted' is not a value keel exports"},
      {"keel-health.json", "process_resident_memory_bytes{job", "process_resident_memory_bytes{pid",
       "process_resident_memory_bytes has no label 'pid'"},
      {"keel-interference.json",
       "keel_slo_violated{job=~\\\"$job\\\", instance=~\\\"$instance\\\", workload=~\\\"$workload\\\"}",
       "keel_slo_violated{job=~\\\"$job\\\", instance=~\\\"$instance\\\"}",
       "keel_slo_violated lacks workload=~\"$workload\""},
      {"keel-health.json", "keel_ticks_total{job=~\\\"$job\\\", ", "keel_ticks_total{",
       "keel_ticks_total lacks job=~\"$job\""},
      {"keel-controller.json", "\"uid\": \"${datasource}\"", "\"uid\": \"P1809F7CD0C75ACF3\"",
       "P1809F7CD0C75ACF3"},
      {"keel-health.json", "\"type\": \"bargauge\"", "\"type\": \"piechart\"", "no panel for map fullness"},
      {"keel-interference.json", "\"format\": \"heatmap\"", "\"format\": \"time_series\"",
       "no panel for per-workload run-queue latency heatmap"},
      {"keel-health.json", "\"schemaVersion\": 38", "\"id\": 7, \"schemaVersion\": 38", "has an \"id\""},
  };
  for (const auto& c : cases) {
    BrokenCopy copy(c.file, c.from, c.to);
    EXPECT_THAT(all_problems(copy.dir()), ::testing::HasSubstr(c.expect))
        << "after replacing " << c.from << " by " << c.to << " in " << c.file;
  }
}

TEST(DashboardChecks, CatchAnAlertWithoutTests) {
  TempDir tmp;
  make_tree(tmp.path(),
            {{"rules.yml",
              "groups:\n  - name: g\n    rules:\n      - alert: Tested\n        expr: up == 0\n"
              "      - alert: OnlyQuiet\n        expr: |\n          up\n          == 0\n"},
             {"tests.yml",
              "tests:\n  - alert_rule_test:\n      - alertname: Tested\n        exp_alerts: []\n"
              "      - alertname: Tested\n        exp_alerts:\n          - exp_labels:\n              a: b\n"
              "      - alertname: OnlyQuiet\n        exp_alerts: []\n"}});
  EXPECT_THAT(untested_alerts(tmp.path() / "rules.yml", tmp.path() / "tests.yml"),
              ::testing::ElementsAre("OnlyQuiet has no case where it fires"));
  auto rules = alert_rules(tmp.path() / "rules.yml");
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_EQ(rules[1].expr, "up\n== 0\n");
}

// ---- the helpers ---------------------------------------------------------------------------------------

TEST(PromqlScan, MetricNamesSkipFunctionsKeywordsLabelsAndStrings) {
  EXPECT_THAT(
      metric_names("histogram_quantile(0.99, sum by (workload, le) (rate(keel_runqueue_latency_seconds_bucket"
                   "{instance=~\"$instance\", workload=~\"a|b\"}[$__rate_interval])))"),
      ::testing::ElementsAre("keel_runqueue_latency_seconds_bucket"));
  EXPECT_THAT(metric_names("a / on (instance) group_left (version) b or c offset 5m > bool 1 unless d and e"),
              ::testing::ElementsAre("a", "b", "c", "d", "e"));
  EXPECT_THAT(metric_names("sum(x) without (job) * 1e-3 + count_values(\"v\", y) + label_replace(z, \"d\", "
                           "\"$1\", \"s\", \"(.*)\")"),
              ::testing::ElementsAre("x", "y", "z"));
  EXPECT_THAT(
      metric_names("time() - max_over_time(ts{job='k'}[5m:1m]) + vector(0) + {__name__=\"named\", a=\"b\"}"),
      ::testing::ElementsAre("ts", "named"));
  EXPECT_THAT(metric_names("absent(up{job=\"keel\"}) # a comment naming not_a_metric"),
              ::testing::ElementsAre("up"));
  EXPECT_THAT(metric_names("SUM BY (le) (foo) + Inf"), ::testing::ElementsAre("foo"));
  EXPECT_THROW(metric_names("sum(rate(x[5m])"), std::invalid_argument);
}

TEST(PromqlScan, GroupingsKnowTheirAggregatedMetrics) {
  auto scan = scan_promql("sum by (workload) (rate(a[1m])) / sum(rate(b[1m])) by (scope) * on (instance) c");
  ASSERT_EQ(scan.groupings.size(), 3u);
  EXPECT_EQ(scan.groupings[0].clause, "by");
  EXPECT_THAT(scan.groupings[0].labels, ::testing::ElementsAre("workload"));
  EXPECT_THAT(scan.groupings[0].metrics, ::testing::ElementsAre("a"));
  EXPECT_THAT(scan.groupings[1].labels, ::testing::ElementsAre("scope"));
  EXPECT_THAT(scan.groupings[1].metrics, ::testing::ElementsAre("b"));
  EXPECT_EQ(scan.groupings[2].clause, "on");
  EXPECT_THAT(scan.groupings[2].metrics, ::testing::ElementsAre("a", "b", "c"));
  ASSERT_EQ(scan.selectors.size(), 3u);
  EXPECT_TRUE(scan.selectors[0].matchers.empty());
  auto m = scan_promql("x{a=\"1\", b!~\"2|3\"}").selectors.at(0).matchers;
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[1].label, "b");
  EXPECT_EQ(m[1].op, "!~");
  EXPECT_EQ(m[1].value, "2|3");
}

TEST(GrafanaVariables, ExpandReplacesIntervalsAndEveryOtherVariable) {
  EXPECT_EQ(expand_grafana_variables(
                "rate(x{instance=~\"$instance\", workload=~\"${workload}|host\"}[$__rate_interval])", "2m"),
            "rate(x{instance=~\".*\", workload=~\".*|host\"}[2m])");
  EXPECT_EQ(
      expand_grafana_variables(
          "increase(x[${__interval}]) + increase(y[$__range]) + z{a=~\"${v:regex}\", b=~\"[[old]]\"}", "30s"),
      "increase(x[30s]) + increase(y[30s]) + z{a=~\".*\", b=~\".*\"}");
  EXPECT_EQ(expand_grafana_variables("x[5m] * 2 $", "1m"), "x[5m] * 2 $");
  EXPECT_THROW(expand_grafana_variables("x[$__range_ms]", "1m"), std::invalid_argument);
}

TEST(GrafanaVariables, DashboardQueriesFindTargetsRowsAnnotationsAndVariables) {
  TempDir tmp;
  json doc = {
      {"panels",
       {{{"title", "top"}, {"targets", {{{"expr", "a"}}, {{"expr", ""}}}}},
        {{"type", "row"},
         {"title", "row"},
         {"panels", {{{"title", "nested"}, {"targets", {{{"expr", "b"}}}}}}}}}},
      {"annotations",
       {{"list",
         {{{"name", "deploys"}, {"expr", "c > 0"}}, {{"name", "new"}, {"target", {{"expr", "d"}}}}}}}},
      {"templating",
       {{"list",
         {{{"name", "datasource"}, {"type", "datasource"}, {"query", "prometheus"}},
          {{"name", "instance"},
           {"type", "query"},
           {"query", "label_values(e{x=~\"$y\", z=\",\"}, instance)"}},
          {{"name", "w"},
           {"type", "query"},
           {"query", {{"query", "label_values(f, workload)"}, {"refId", "V"}}}},
          {{"name", "labels"}, {"type", "query"}, {"query", "label_values(job)"}},
          {{"name", "res"}, {"type", "query"}, {"query", "query_result(topk(3, g))"}},
          {{"name", "c"}, {"type", "custom"}, {"query", "a,b"}}}}}},
  };
  std::ofstream(tmp.path() / "d.json") << doc.dump(2);
  std::ofstream(tmp.path() / "notes.txt") << "not a dashboard";
  std::vector<std::string> got;
  for (const auto& q : dashboard_queries(tmp.path())) got.push_back(q.file + "|" + q.where + "|" + q.expr);
  EXPECT_THAT(got, ::testing::ElementsAre("d.json|top|a", "d.json|nested|b", "d.json|deploys|c > 0",
                                          "d.json|new|d", "d.json|instance|e{x=~\"$y\", z=\",\"}",
                                          "d.json|w|f", "d.json|res|topk(3, g)"));
  std::ofstream(tmp.path() / "bad.json") << "{ not json";
  EXPECT_THROW(dashboard_queries(tmp.path()), std::runtime_error);
}

}  // namespace
}  // namespace keel::testing
