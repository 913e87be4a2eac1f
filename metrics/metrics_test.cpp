// The exporter on plain reports: the contract's names and types, the latency histogram's buckets
// (exact against the sensor's), bounded cardinality, series that go when their workload goes, and the
// HTTP endpoint on a real socket (served text, a taken port).
#include "metrics/metrics.h"

#include <civetweb.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "bpf/sched_sensor.h"
#include "metrics/catalogue.h"
#include "tests/support/http.h"
#include "tests/support/tmp_tree.h"

namespace keel::metrics {
namespace {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// The text exposition, one sample per line (comments skipped).
std::vector<Sample> parse(const std::string& text) {
  std::vector<Sample> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    Sample s;
    size_t i = line.find_first_of("{ ");
    s.name = line.substr(0, i);
    if (line[i] == '{') {
      size_t end = line.find("} ", i);
      std::string body = line.substr(i + 1, end - i - 1);
      for (size_t k = 0; k < body.size();) {
        size_t eq = body.find("=\"", k), c = eq + 2;
        std::string v;  // unescaped: \\, \" and \n
        for (; body[c] != '"'; ++c) v += body[c] != '\\' ? body[c] : body[++c] == 'n' ? '\n' : body[c];
        s.labels[body.substr(k, eq - k)] = v;
        k = c + 2;  // past `",`
      }
      i = end + 1;
    }
    s.value = std::stod(line.substr(i + 1));
    out.push_back(s);
  }
  return out;
}

// Samples named `name` whose labels include `want`.
std::vector<Sample> find(const std::string& text, const std::string& name,
                         const std::map<std::string, std::string>& want = {}) {
  std::vector<Sample> out;
  for (auto& s : parse(text)) {
    if (s.name != name) continue;
    bool ok = true;
    for (const auto& [k, v] : want) ok = ok && s.labels.count(k) && s.labels.at(k) == v;
    if (ok) out.push_back(s);
  }
  return out;
}

double value(const std::string& text, const std::string& name,
             const std::map<std::string, std::string>& want = {}) {
  auto v = find(text, name, want);
  EXPECT_EQ(v.size(), 1u) << name << " with the given labels: " << v.size() << " samples";
  return v.empty() ? -1 : v[0].value;
}

std::vector<double> layout() {
  std::vector<double> out;
  for (unsigned i = 0; i < KEEL_HIST_BUCKETS; ++i) out.push_back(bpf::RqHistogram::bucket_upper_us(i) / 1e6);
  return out;
}

Setup setup(size_t max_workloads = 256) {
  Setup s;
  s.mode = "observe";
  s.version = "9.9.9";
  s.latency_bucket_upper_s = layout();
  s.sensors = {{"runqueue", true}, {"hardware_counters", false}};
  s.mechanisms = {{"cpuset", true}, {"resctrl", false}};
  s.max_workloads = max_workloads;
  return s;
}

WorkloadReport workload(const std::string& name, const std::string& klass,
                        std::vector<double> waits_us = {}) {
  WorkloadReport w;
  w.workload = name;
  w.klass = klass;
  w.rq_buckets.assign(KEEL_HIST_BUCKETS, 0);
  for (double us : waits_us) {
    w.rq_buckets[bpf::RqHistogram::bucket_of_us(us)] += 1;
    w.rq_sum_s += us / 1e6;
  }
  return w;
}

TEST(PrometheusBounds, KeepEverySensorBoundUpTo1msAndPowersOfTwoAbove) {
  auto l = layout();
  auto b = prometheus_bounds(l);
  size_t below = 0;
  for (size_t i = 0; i + 1 < l.size(); ++i) below += l[i] <= 1.024e-3;
  size_t n_below = 0;
  for (double x : b) {
    // Each bound is one of the sensor's, so no sensor bucket straddles a Prometheus bucket.
    EXPECT_NE(std::find(l.begin(), l.end(), x), l.end()) << x;
    if (x <= 1.024e-3)
      ++n_below;
    else
      EXPECT_EQ(std::exp2(std::round(std::log2(x * 1e6))), x * 1e6) << x << " is not a power of two of us";
  }
  EXPECT_EQ(n_below, below);
  EXPECT_TRUE(std::is_sorted(b.begin(), b.end()));
  EXPECT_EQ(b.front(), 1e-6);
  EXPECT_EQ(b.back(), std::exp2(25) / 1e6);  // the last sensor bucket (>= 2^26 us... ) is +Inf
  EXPECT_LT(b.size(), 100u);
}

TEST(Metrics, LatencyHistogramCountsEachWaitInTheBucketOfItsSensorBucket) {
  Metrics m(setup());
  TickReport t;
  // 3 us, 100 us (in [96,104)), 700 us ([640,704) -> le 0.000704), 1.5 ms (le 2.048 ms), 100 s (past the last
  // bound: +Inf).
  t.workloads.push_back(workload("redis", "critical", {3, 100, 700, 1500, 100e6}));
  m.publish(t);
  m.publish(t);  // counters add up across ticks
  std::string text = m.render();
  std::map<std::string, std::string> l{{"workload", "redis"}, {"class", "critical"}};
  // By the bound's value: the serializer prints bounds with 17 digits (0.00064 as 0.0006400000000000001).
  auto cum = [&](const std::string& le) {
    for (const auto& s : find(text, "keel_runqueue_latency_seconds_bucket", l))
      if (s.labels.at("le") == le || (le != "+Inf" && s.labels.at("le") != "+Inf" &&
                                      std::fabs(std::stod(s.labels.at("le")) - std::stod(le)) < 1e-12))
        return s.value;
    ADD_FAILURE() << "no bucket le=" << le;
    return -1.0;
  };
  EXPECT_EQ(cum("3e-06"), 0);  // [3,4) us ends at 4 us
  EXPECT_EQ(cum("4e-06"), 2);
  EXPECT_EQ(cum("9.6e-05"), 2);
  EXPECT_EQ(cum("0.000104"), 4);
  EXPECT_EQ(cum("0.00064"), 4);
  EXPECT_EQ(cum("0.000704"), 6);
  EXPECT_EQ(cum("0.001024"), 6);
  EXPECT_EQ(cum("0.002048"), 8);
  EXPECT_EQ(cum("33.554432"), 8);
  EXPECT_EQ(cum("+Inf"), 10);
  EXPECT_EQ(value(text, "keel_runqueue_latency_seconds_count", l), 10);
  EXPECT_NEAR(value(text, "keel_runqueue_latency_seconds_sum", l), 2 * (3 + 100 + 700 + 1500 + 100e6) / 1e6,
              1e-9);
}

// The migration scopes are disjoint: within an LLC, to another LLC of the node, to another node; the
// sensor counts a migration in at most one of its crossing scopes, and a sum over scope is every migration.
TEST(Metrics, MigrationScopesAreDisjointAndAddUpToEveryMigration) {
  Metrics m(setup());
  TickReport t;
  auto w = workload("redis", "critical", {3});
  w.migrations = 10;
  w.cross_llc = 3;
  w.cross_numa = 2;
  t.workloads.push_back(w);
  m.publish(t);
  const std::string text = m.render();
  std::map<std::string, double> by_scope;
  double sum = 0;
  for (const auto& sample : find(text, "keel_migrations_total", {{"workload", "redis"}})) {
    by_scope[sample.labels.at("scope")] = sample.value;
    sum += sample.value;
  }
  EXPECT_EQ(by_scope, (std::map<std::string, double>{{"same_llc", 5}, {"cross_llc", 3}, {"cross_numa", 2}}));
  EXPECT_EQ(sum, 10);
}

TEST(Metrics, EveryCatalogueMetricIsExportedWithItsTypeAndLabels) {
  Metrics m(setup());
  TickReport t;
  auto w = workload("redis", "critical", {50});
  w.cache_misses = 10;
  w.instructions = 1000;
  w.cpu_seconds = 0.5;
  w.throttled_periods = 2;
  w.p99_s = 50e-6;
  w.slo_target_s = 200e-6;
  w.slack = 0.75;
  w.knobs = {{"cpus", 2}, {"shares", 1024}};
  t.workloads.push_back(w);
  t.workloads.push_back(workload("noise", "best_effort", {20}));
  t.interference.push_back({"redis", "noise", 1.5});
  t.actions.push_back({"cpus", "act"});
  t.steal = false;
  t.health.programs.push_back({"handle_switch", 5000, 10});
  t.health.bpf_seconds_per_event = 300e-9;
  t.health.bpf_events_per_s = 1000;
  t.health.process_cpu_seconds = 1.0;
  t.health.process_rss_bytes = 1 << 20;
  t.health.evicted_gone = 4;
  m.publish(t);
  std::string text = m.render();
  for (const auto& d : kCatalogue) {
    const char* type = d.type == Type::counter ? "counter" : d.type == Type::gauge ? "gauge" : "histogram";
    EXPECT_NE(text.find("# TYPE " + std::string(d.name) + " " + type + "\n"), std::string::npos) << d.name;
    std::string sample = std::string(d.name) + (d.type == Type::histogram ? "_count" : "");
    auto got = find(text, sample);
    ASSERT_FALSE(got.empty()) << d.name << " has no sample";
    std::set<std::string> want;
    std::string labels(d.labels);
    for (size_t i = 0; i < labels.size();) {
      size_t c = labels.find(',', i);
      if (c == std::string::npos) c = labels.size();
      want.insert(labels.substr(i, c - i));
      i = c + 1;
    }
    for (const auto& s : got) {
      std::set<std::string> have;
      for (const auto& [k, v] : s.labels) have.insert(k);
      EXPECT_EQ(have, want) << d.name;
    }
  }
  EXPECT_EQ(value(text, "keel_build_info", {{"version", "9.9.9"}}), 1);
  EXPECT_EQ(value(text, "keel_mode", {{"mode", "observe"}}), 1);
  EXPECT_EQ(value(text, "keel_knob_value", {{"workload", "redis"}, {"knob", "cpus"}}), 2);
  EXPECT_EQ(value(text, "keel_knob_value", {{"workload", "host"}, {"knob", "steal_task"}}), 0);
  EXPECT_EQ(value(text, "keel_sensor_available", {{"sensor", "hardware_counters"}}), 0);
  EXPECT_NEAR(value(text, "keel_bpf_cpu_ratio"), 300e-9 * 1000, 1e-12);
  EXPECT_EQ(value(text, "keel_bpf_map_evictions_total", {{"reason", "gone"}}), 4);
  EXPECT_EQ(value(text, "keel_bpf_map_evictions_total", {{"reason", "best_effort"}}), 0);
  // A best-effort workload without an SLO view has no slack series.
  EXPECT_TRUE(find(text, "keel_slo_slack_ratio", {{"workload", "noise"}}).empty());
}

TEST(Metrics, ActionCountersStartAtZeroForEveryKnobAndDirectionOfTheMode) {
  Metrics m(setup());
  std::string text = m.render();
  EXPECT_EQ(find(text, "keel_actions_total").size(), 18u);  // 6 knobs x 3 directions
  EXPECT_EQ(
      value(text, "keel_actions_total", {{"knob", "cpus"}, {"direction", "revert"}, {"mode", "observe"}}), 0);
  TickReport t;
  t.actions = {{"cpus", "act"}, {"shares", "act"}, {"cpus", "act"}, {"cpus", "give_back"}};
  m.publish(t);
  text = m.render();
  EXPECT_EQ(value(text, "keel_actions_total", {{"knob", "cpus"}, {"direction", "act"}}), 2);
  EXPECT_EQ(value(text, "keel_actions_total", {{"knob", "cpus"}, {"direction", "give_back"}}), 1);
  EXPECT_EQ(value(text, "keel_actions_total", {{"knob", "shares"}, {"direction", "act"}}), 1);
  EXPECT_EQ(value(text, "keel_ticks_total"), 1);
}

TEST(Metrics, StarvationLiftsAreCountedFromZero) {
  Metrics m(setup());
  EXPECT_EQ(value(m.render(), "keel_starvation_lifts_total"), 0);
  TickReport t;
  t.starvation_lifts = 2;
  m.publish(t);
  t.starvation_lifts = 0;
  m.publish(t);
  t.starvation_lifts = 1;
  m.publish(t);
  EXPECT_EQ(value(m.render(), "keel_starvation_lifts_total"), 3);
}

TEST(Metrics, InstancesPastTheCapAndUnmatchedCgroupsCountAsOther) {
  Metrics m(setup(2));
  TickReport t;
  t.workloads = {workload("a", "best_effort", {10}), workload("b", "best_effort", {10}),
                 workload("c", "best_effort", {10, 10}), workload("d", "critical", {10, 10, 10}),
                 workload("other", "other", {10, 10, 10, 10})};
  t.workloads[2].p99_s = 1e-5;  // a folded instance's gauges are not exported
  t.workloads[2].slack = 0.5;
  m.publish(t);
  std::string text = m.render();
  // The critical instance takes a slot first, though listed last; then "a".
  EXPECT_EQ(value(text, "keel_runqueue_latency_seconds_count", {{"workload", "d"}, {"class", "critical"}}),
            3);
  EXPECT_EQ(value(text, "keel_runqueue_latency_seconds_count", {{"workload", "a"}}), 1);
  EXPECT_TRUE(find(text, "keel_runqueue_latency_seconds_count", {{"workload", "b"}}).empty());
  EXPECT_TRUE(find(text, "keel_runqueue_latency_seconds_count", {{"workload", "c"}}).empty());
  EXPECT_EQ(value(text, "keel_runqueue_latency_seconds_count", {{"workload", "other"}, {"class", "other"}}),
            1 + 2 + 4);
  EXPECT_TRUE(find(text, "keel_slo_slack_ratio").empty());
  EXPECT_EQ(value(text, "keel_metrics_folded_instances"), 2);
  EXPECT_EQ(value(text, "keel_workload_instances", {{"class", "best_effort"}}), 3);
  EXPECT_EQ(value(text, "keel_workload_instances", {{"class", "critical"}}), 1);

  // "a" goes: its series go with it, and the freed slot goes to the next instance.
  t.workloads.erase(t.workloads.begin());
  m.publish(t);
  text = m.render();
  EXPECT_TRUE(find(text, "keel_runqueue_latency_seconds_count", {{"workload", "a"}}).empty());
  EXPECT_TRUE(find(text, "keel_migrations_total", {{"workload", "a"}}).empty());
  EXPECT_EQ(value(text, "keel_runqueue_latency_seconds_count", {{"workload", "b"}}), 1);
  EXPECT_EQ(value(text, "keel_runqueue_latency_seconds_count", {{"workload", "d"}}), 6);
  EXPECT_EQ(value(text, "keel_metrics_folded_instances"), 1);
  size_t workloads = 0;
  for (const auto& s : find(text, "keel_runqueue_latency_seconds_count"))
    workloads += s.labels.at("workload") != "other";
  EXPECT_EQ(workloads, 2u);
}

TEST(Metrics, InterferenceSeriesAreThisTicksTopAntagonistsOnly) {
  auto s = setup();
  s.max_antagonists = 2;
  Metrics m(s);
  TickReport t;
  t.workloads = {workload("redis", "critical"), workload("x", "best_effort"), workload("y", "best_effort"),
                 workload("z", "best_effort")};
  t.interference = {{"redis", "x", 1.2}, {"redis", "y", 0.5}, {"redis", "z", 0.1}};
  m.publish(t);
  std::string text = m.render();
  EXPECT_EQ(find(text, "keel_interference_detected").size(), 2u);
  EXPECT_EQ(value(text, "keel_antagonist_score", {{"workload", "redis"}, {"antagonist", "x"}}), 1.2);
  EXPECT_TRUE(find(text, "keel_antagonist_score", {{"antagonist", "z"}}).empty());
  t.interference = {{"redis", "y", 0.7}};
  m.publish(t);
  text = m.render();
  EXPECT_TRUE(find(text, "keel_interference_detected", {{"antagonist", "x"}}).empty());
  EXPECT_EQ(value(text, "keel_interference_detected", {{"workload", "redis"}, {"antagonist", "y"}}), 1);
  t.interference.clear();
  m.publish(t);
  EXPECT_TRUE(find(m.render(), "keel_interference_detected").empty());
}

TEST(Metrics, AFailedSensingTickCountsAnErrorAndKeepsTheWorkloadsSeries) {
  Metrics m(setup());
  TickReport t;
  t.workloads = {workload("redis", "critical", {10})};
  t.interference = {{"redis", "noise", 1}};
  t.workloads.push_back(workload("noise", "best_effort", {10}));
  m.publish(t);
  m.sensing_failed(0.002, 1234);
  std::string text = m.render();
  EXPECT_EQ(value(text, "keel_errors_total", {{"kind", "sensing"}}), 1);
  EXPECT_EQ(value(text, "keel_errors_total", {{"kind", "actuator"}}), 0);
  EXPECT_EQ(value(text, "keel_ticks_total"), 2);
  EXPECT_EQ(value(text, "keel_last_tick_timestamp_seconds"), 1234);
  EXPECT_EQ(value(text, "keel_tick_duration_seconds_count"), 2);
  EXPECT_EQ(value(text, "keel_runqueue_latency_seconds_count", {{"workload", "redis"}}), 1);
  EXPECT_EQ(value(text, "keel_interference_detected", {{"workload", "redis"}, {"antagonist", "noise"}}), 1);
}

TEST(Metrics, CumulativeSourcesBecomeCountersThatOnlyGrow) {
  Metrics m(setup());
  TickReport t;
  t.health.programs = {{"handle_switch", 2'000'000'000, 100}};
  t.health.process_cpu_seconds = 3;
  m.publish(t);
  t.health.programs = {{"handle_switch", 2'500'000'000, 150}};
  t.health.process_cpu_seconds = 3.5;
  m.publish(t);
  std::string text = m.render();
  EXPECT_DOUBLE_EQ(value(text, "keel_bpf_run_time_seconds_total", {{"program", "handle_switch"}}), 2.5);
  EXPECT_DOUBLE_EQ(value(text, "keel_bpf_run_count_total", {{"program", "handle_switch"}}), 150);
  EXPECT_DOUBLE_EQ(value(text, "process_cpu_seconds_total"), 3.5);
  // A failed read (zeros) in between is ignored: the counter neither drops nor counts the value twice.
  t.health.programs = {{"handle_switch", 0, 0}};
  t.health.process_cpu_seconds = 0;
  m.publish(t);
  t.health.programs = {{"handle_switch", 2'600'000'000, 160}};
  t.health.process_cpu_seconds = 3.6;
  m.publish(t);
  text = m.render();
  EXPECT_DOUBLE_EQ(value(text, "keel_bpf_run_time_seconds_total", {{"program", "handle_switch"}}), 2.6);
  EXPECT_DOUBLE_EQ(value(text, "keel_bpf_run_count_total", {{"program", "handle_switch"}}), 160);
  EXPECT_DOUBLE_EQ(value(text, "process_cpu_seconds_total"), 3.6);
}

// ---- label values: names are tenants' ----

TEST(LabelValue, AValidPrintableNameIsItself) {
  for (const std::string& n : std::vector<std::string>{
           "redis", "batch/job-1", "/system.slice/system-serial\\x2dgetty.slice",
           "/machine.slice/machine-qemu\\x2d1\\x2dvm.scope/libvirt/vcpu0", "caf\xc3\xa9",
           "\xe6\x97\xa5\xe6\x9c\xac", "emoji \xf0\x9f\x99\x82", std::string(kMaxLabelBytes, 'a')})
    EXPECT_EQ(label_value(n), n);
}

TEST(LabelValue, InvalidUtf8AndControlCharactersAreEscapedByteByByte) {
  EXPECT_EQ(label_value("bad\xff"
                        "name"),
            "bad\\xffname");
  EXPECT_EQ(label_value("cut\xe6\x97"), "cut\\xe6\\x97");                       // a sequence cut short
  EXPECT_EQ(label_value("over\xc0\xaf"), "over\\xc0\\xaf");                     // an overlong '/'
  EXPECT_EQ(label_value("surrogate\xed\xa0\x80"), "surrogate\\xed\\xa0\\x80");  // U+D800
  EXPECT_EQ(label_value("big\xf4\x90\x80\x80"), "big\\xf4\\x90\\x80\\x80");     // above U+10FFFF
  EXPECT_EQ(label_value("line\nfeed\ttab\r\x1b[31m\x7f"), "line\\x0afeed\\x09tab\\x0d\\x1b[31m\\x7f");
  EXPECT_EQ(label_value(std::string("nul\0byte", 8)), "nul\\x00byte");
  EXPECT_EQ(label_value("quote\"back\\slash"), "quote\"back\\slash") << "left to the exposition's escaping";
  // Deterministic, and what comes out goes through unchanged.
  const std::string v = label_value("x\xfe\xc3\xa9\x01");
  EXPECT_EQ(v, "x\\xfe\xc3\xa9\\x01");
  EXPECT_EQ(label_value(v), v);
}

TEST(LabelValue, ALongNameIsCutWithAMarkerAndLongNamesSharingAStartStayApart) {
  const std::string start = "/machine.slice/" + std::string(400, 'x');
  const std::string a = label_value(start + "/a"), b = label_value(start + "/b");
  EXPECT_EQ(a.size(), kMaxLabelBytes);
  EXPECT_EQ(a.substr(0, 200), start.substr(0, 200));
  EXPECT_EQ(a.substr(kMaxLabelBytes - 20, 4), "...#") << a;
  EXPECT_NE(a, b);
  EXPECT_EQ(label_value(start + "/a"), a) << "deterministic";
  EXPECT_EQ(label_value(a), a);
  // A huge name costs its hash, and the cut never splits a character or an escape.
  EXPECT_EQ(label_value(std::string(1 << 20, 'y')).size(), kMaxLabelBytes);
  for (size_t pad = 0; pad < 4; ++pad) {
    std::string multi = std::string(pad, 'p');
    for (int i = 0; i < 200; ++i) multi += i % 2 ? "\xc3\xa9" : "\xff";
    const std::string cut = label_value(multi);
    EXPECT_LE(cut.size(), kMaxLabelBytes);
    EXPECT_EQ(label_value(cut), cut) << "valid, complete characters and escapes: " << cut;
    const std::string kept = cut.substr(0, cut.find("...#"));
    const size_t escape = kept.rfind('\\');
    EXPECT_TRUE(escape == std::string::npos || kept.size() - escape >= 4) << "an escape cut short: " << kept;
  }
}

// The review's finding: a cgroup under /machine.slice named with invalid UTF-8 became a workload label
// and Prometheus rejected the whole scrape. Every label value keel exports, from every source, now
// reaches a real parser (promtool, the text parser Prometheus's own tools use) valid.
TEST(Metrics, ScrapeWithHostileNamesIsAcceptedByPromtool) {
  if (testing::run_command("command -v promtool").first != 0)
    FAIL() << "promtool not found: run scripts/deps.sh";
  auto st = setup();
  st.version = "9.9\xff";
  Metrics m(st);
  TickReport t;
  const std::string bad = "/machine.slice/vm\xff\xfe.scope",
                    huge = "/machine.slice/" + std::string(100000, 'h');
  t.workloads = {workload(bad, "best_effort", {10}), workload(huge, "best_effort", {10}),
                 workload("crit\xc3\x28", "critical", {10}),
                 workload("quote\"back\\slash\nnew", "best_effort", {10}), workload("other", "other", {10})};
  t.workloads[2].slack = 0.5;
  t.workloads[2].knobs = {{"cpus", 2}};
  t.interference = {{"crit\xc3\x28", bad, 1.0}};
  t.health.programs = {{"prog\x80", 10, 1}};
  m.publish(t);
  const std::string text = m.render();
  testing::TempDir tmp;
  testing::make_tree(tmp.path(), {{"scrape", text}});
  auto [rc, out] =
      testing::run_command("promtool check metrics < '" + (tmp.path() / "scrape").string() + "'");
  // promtool exits 1 on a text it cannot parse, 3 on style remarks (there are none either).
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(
      value(text, "keel_runqueue_latency_seconds_count", {{"workload", "/machine.slice/vm\\xff\\xfe.scope"}}),
      1);
  EXPECT_EQ(value(text, "keel_antagonist_score",
                  {{"workload", "crit\\xc3("}, {"antagonist", "/machine.slice/vm\\xff\\xfe.scope"}}),
            1);
  EXPECT_EQ(value(text, "keel_bpf_run_count_total", {{"program", "prog\\x80"}}), 1);
  EXPECT_EQ(value(text, "keel_build_info", {{"version", "9.9\\xff"}}), 1);
  EXPECT_EQ(find(text, "keel_runqueue_latency_seconds_count", {{"workload", label_value(huge)}}).size(), 1u);
  // The exposition escapes what stays: backslash, quote and newline (prometheus-cpp).
  EXPECT_NE(text.find("workload=\"quote\\\"back\\\\slash\\\\x0anew\""), std::string::npos);
  for (char c : text) EXPECT_TRUE(c == '\n' || (c >= 0x20 && c != 0x7f) || (c & 0x80)) << int(c);
}

// Two names with one label share its series: one going does not take the other's (or free it under
// it), and the label stays while a name that has it lasts.
TEST(Metrics, NamesWithOneLabelShareItsSeriesSafely) {
  Metrics m(setup());
  TickReport t;
  t.workloads = {workload("a\xff", "best_effort", {10}), workload("a\\xff", "best_effort", {10, 10})};
  m.publish(t);
  EXPECT_EQ(value(m.render(), "keel_runqueue_latency_seconds_count", {{"workload", "a\\xff"}}), 3);
  t.workloads.erase(t.workloads.begin());
  m.publish(t);
  m.publish(t);
  EXPECT_EQ(value(m.render(), "keel_runqueue_latency_seconds_count", {{"workload", "a\\xff"}}), 7);
  t.workloads.clear();
  m.publish(t);
  EXPECT_TRUE(find(m.render(), "keel_runqueue_latency_seconds_count", {{"workload", "a\\xff"}}).empty());
}

// ---- the endpoint, on real sockets ----

TEST(Endpoint, ServesTheMetricsOverHttpOnTheConfiguredAddress) {
  Metrics m(setup());
  TickReport t;
  t.workloads = {workload("redis", "critical", {42})};
  m.publish(t);
  uint16_t port = testing::free_port();
  auto e = Endpoint::listen("localhost:" + std::to_string(port));
  ASSERT_TRUE(e) << e.error().message();
  (*e)->serve(m);
  EXPECT_EQ((*e)->address(), "127.0.0.1:" + std::to_string(port));  // the name resolved
  auto reply = testing::http_get(port, "/metrics");
  ASSERT_EQ(reply.status, 200) << reply.body.substr(0, 200);
  EXPECT_EQ(value(reply.body, "keel_runqueue_latency_seconds_count", {{"workload", "redis"}}), 1);
  // The next tick is in the next scrape.
  m.publish(t);
  EXPECT_EQ(value(testing::http_get(port, "/metrics").body, "keel_runqueue_latency_seconds_count",
                  {{"workload", "redis"}}),
            2);
}

// A client on 127.0.0.1:port that has sent `request`, with a receive buffer of `rcvbuf` bytes when
// given; -1 when it cannot connect.
int client(uint16_t port, const std::string& request, int rcvbuf = 0) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (rcvbuf > 0) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Whether the server has neither answered on `fd` nor closed it.
bool held(int fd) {
  char c;
  return ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) < 0 && errno == EAGAIN;
}

// The review's finding: civetweb gives a connection a worker until its request is read, so two clients
// that sent half a request line and idled held both workers and every other scrape timed out. Sixteen
// now hold sixteen of the workers, and a scrape beside them is served, whole, while they still wait.
// (The deadline only guards against a hang: the scrape takes milliseconds, the old server ~40 s.)
TEST(Endpoint, AScrapeIsServedWhileSixteenClientsHoldHalfSentRequests) {
  Metrics m(setup());
  TickReport t;
  t.workloads = {workload("redis", "critical", {42})};
  m.publish(t);
  uint16_t port = testing::free_port();
  auto e = Endpoint::listen("127.0.0.1:" + std::to_string(port));
  ASSERT_TRUE(e) << e.error().message();
  (*e)->serve(m);
  std::vector<int> slow;
  for (int i = 0; i < 16; ++i) {
    slow.push_back(client(port, "GET /metr"));
    ASSERT_GE(slow.back(), 0);
  }
  auto reply = testing::http_get(port, "/metrics", "127.0.0.1", 20);
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body, *m.text());
  EXPECT_EQ(value(reply.body, "keel_runqueue_latency_seconds_count", {{"workload", "redis"}}), 1);
  for (int fd : slow) {
    EXPECT_TRUE(held(fd)) << "a half-sent request was let go before the scrape was served";
    ::close(fd);
  }
}

// A client that asks for a scrape larger than a connection's kernel buffers and never reads it holds
// its worker in a write (until 5 s pass without progress). Sixteen of them do not keep a scrape from
// being served, whole, nor take a rendering each (they share one).
TEST(Endpoint, AScrapeIsServedWhileSixteenClientsNeverReadALargeOne) {
  Metrics m(setup(1024));
  TickReport t;
  for (int i = 0; i < 1024; ++i)
    t.workloads.push_back(workload("w" + std::to_string(i), "best_effort", {10}));
  m.publish(t);
  const auto text = m.text();
  ASSERT_GT(text->size(), 6u << 20) << "larger than a connection's buffers (tcp_wmem's 4 MiB at most)";
  uint16_t port = testing::free_port();
  auto e = Endpoint::listen("127.0.0.1:" + std::to_string(port));
  ASSERT_TRUE(e) << e.error().message();
  (*e)->serve(m);
  std::vector<int> stuck;
  for (int i = 0; i < 16; ++i) {
    stuck.push_back(client(port, "GET /metrics HTTP/1.0\r\n\r\n", 4096));
    ASSERT_GE(stuck.back(), 0);
  }
  auto reply = testing::http_get(port, "/metrics", "127.0.0.1", 20);
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body.size(), text->size());
  EXPECT_TRUE(reply.body == *text) << "the scrape is the whole text";
  EXPECT_EQ(m.text(), text) << "rendered once for all of them";
  for (int fd : stuck) {
    pollfd p{fd, POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 20000), 1) << "a client that does not read was not served either";
    ::close(fd);
  }
}

// Issue 38: with 300 silent TCP connections held open to the metrics port, GET /healthz there took
// 27-32 s, past the DaemonSet's liveness probe (5 s, 3 failures): keel was restarted, and every stop
// restored every knob. The health listener is the probe's: with those 300 connections on the metrics
// listener, and 300 more on the health listener itself, /healthz answers at once. (The deadline is
// the probe's own, a bound on a hang, not a measure: the answer takes milliseconds.)
TEST(HealthListener, AnswersWhileHundredsOfSilentConnectionsHoldBothListeners) {
  using namespace std::chrono_literals;
  Metrics m(setup());
  Health h(1s);
  h.ticked(true);
  const uint16_t metrics_port = testing::free_port();
  auto e = Endpoint::listen("127.0.0.1:" + std::to_string(metrics_port));
  ASSERT_TRUE(e) << e.error().message();
  (*e)->serve(m, &h);
  const uint16_t health_port = testing::free_port();
  auto l = HealthListener::listen("127.0.0.1:" + std::to_string(health_port));
  ASSERT_TRUE(l) << l.error().message();
  EXPECT_EQ(testing::http_get(health_port, "/healthz").status, 503) << "starting: not served yet";
  (*l)->serve(&h);
  std::vector<int> silent;
  for (int i = 0; i < 300; ++i) silent.push_back(client(metrics_port, ""));
  for (int i = 0; i < 300; ++i) silent.push_back(client(health_port, ""));
  ASSERT_EQ(std::count(silent.begin(), silent.end(), -1), 0) << "every silent client connected";
  h.ticked(true);  // connecting them took seconds (the metrics listener's queue was full)
  for (int round = 0; round < 3; ++round) {
    auto live = testing::http_get(health_port, "/healthz", "127.0.0.1", 1);
    EXPECT_EQ(live.status, 200) << "round " << round << ": " << live.body;
    EXPECT_EQ(live.body.rfind("ok: last tick", 0), 0u) << live.body;
    auto ready = testing::http_get(health_port, "/readyz?verbose", "127.0.0.1", 1);
    EXPECT_EQ(ready.status, 200) << ready.body;
  }
  EXPECT_EQ(testing::http_get(health_port, "/metrics", "127.0.0.1", 1).status, 404) << "health only";
  // The metrics listener's own /healthz, beside it, is what the silent clients starve (the reason for
  // the listener above): not asserted, it only has to end.
  for (int fd : silent) ::close(fd);
  // A stalled keel is unhealthy there too; a request longer than the bound is answered and closed.
  Health stalled(1s, Health::Clock::now() - 10s);
  (*l)->serve(&stalled);
  EXPECT_EQ(testing::http_get(health_port, "/healthz", "127.0.0.1", 1).status, 503);
  int big = client(health_port, "GET /healthz HTTP/1.1\r\nX: " + std::string(4096, 'a'));
  ASSERT_GE(big, 0);
  pollfd p{big, POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 5000), 1) << "an oversized request is neither kept nor ignored";
  ::close(big);
}

// Health: healthy while ticks come (3 periods + 2 s), stalled after; ready once a tick sensed, not while
// starting, stalled or stopping. Over HTTP, /healthz and /readyz answer with those codes and lines, and
// a ":PORT" endpoint listens on every address (reached here on loopback).
TEST(Health, LivenessFollowsTheTicksAndReadinessTheSensing) {
  using namespace std::chrono_literals;
  const auto t0 = Health::Clock::now();
  Health h(1s, t0);
  EXPECT_EQ(h.healthz(t0 + 1s).status, 200);
  EXPECT_NE(h.healthz(t0 + 1s).body.find("no tick yet"), std::string::npos) << h.healthz(t0 + 1s).body;
  EXPECT_EQ(h.readyz(t0 + 1s).status, 503);
  EXPECT_EQ(h.healthz(t0 + 6s).status, 503) << "no first tick within 3 periods + 2 s";
  h.ticked(false, t0 + 2s);  // sensing failed: alive, not ready
  EXPECT_EQ(h.healthz(t0 + 3s).status, 200);
  EXPECT_EQ(h.readyz(t0 + 3s).status, 503);
  h.ticked(true, t0 + 4s);
  EXPECT_EQ(h.readyz(t0 + 5s).status, 200);
  EXPECT_EQ(h.healthz(t0 + 8900ms).status, 200);
  const auto stalled = h.healthz(t0 + 9100ms);
  EXPECT_EQ(stalled.status, 503);
  EXPECT_NE(stalled.body.find("stalled: last tick 5.1 s ago"), std::string::npos) << stalled.body;
  EXPECT_EQ(h.readyz(t0 + 9100ms).status, 503);
  h.set_period(10s);
  EXPECT_EQ(h.healthz(t0 + 9100ms).status, 200) << "judged against the period now in use";
  h.stopping();
  EXPECT_EQ(h.readyz(t0 + 5s).status, 503);
  EXPECT_NE(h.readyz(t0 + 5s).body.find("stopping"), std::string::npos);
}

TEST(Endpoint, ServesHealthAndReadinessOnEveryAddressWithPort) {
  Metrics m(setup());
  uint16_t port = testing::free_port();
  auto e = Endpoint::listen(":" + std::to_string(port));
  ASSERT_TRUE(e) << e.error().message();
  EXPECT_EQ((*e)->address(), "0.0.0.0:" + std::to_string(port));
  EXPECT_EQ(testing::http_get(port, "/metrics").status, 503) << "nothing served before serve()";
  EXPECT_EQ(testing::http_get(port, "/healthz").status, 503);
  Health h(std::chrono::seconds(1));
  (*e)->serve(m, &h);
  auto live = testing::http_get(port, "/healthz");
  EXPECT_EQ(live.status, 200) << live.body;
  auto ready = testing::http_get(port, "/readyz");
  EXPECT_EQ(ready.status, 503) << ready.body;
  EXPECT_NE(ready.body.find("starting"), std::string::npos) << ready.body;
  h.ticked(true);
  EXPECT_EQ(testing::http_get(port, "/readyz").status, 200);
  EXPECT_EQ(testing::http_get(port, "/metrics").status, 200);
  EXPECT_EQ(testing::http_get(port, "/nothing").status, 404);
  EXPECT_EQ(testing::http_get(port, "/healthzz").status, 404) << "exact paths only";
}

TEST(Endpoint, ATakenPortIsAClearErrorNamingTheAddress) {
  Metrics m(setup());
  uint16_t port = 0;
  int fd = testing::listen_on_loopback(&port);
  ASSERT_GE(fd, 0);
  auto e = Endpoint::listen("127.0.0.1:" + std::to_string(port));
  ::close(fd);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().message(),
            "cannot listen on 127.0.0.1:" + std::to_string(port) +
                ": Address already in use (another process listens there: another keel or "
                "exporter? choose a free port)");
}

TEST(Endpoint, AnAddressNoInterfaceHasOrANameThatDoesNotResolveIsRefused) {
  Metrics m(setup());
  auto e = Endpoint::listen("192.0.2.1:9477");  // TEST-NET-1: not this host's
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message().find(
                "Cannot assign requested address (no interface of this host has that address)"),
            std::string::npos)
      << e.error().message();
  auto n = Endpoint::listen("no-such-host.invalid:9477");
  ASSERT_FALSE(n);
  EXPECT_NE(n.error().message().find("cannot resolve \"no-such-host.invalid\""), std::string::npos)
      << n.error().message();
}

TEST(Endpoint, ListensOnIpv6LoopbackOrSaysTheHttpServerHasNoIpv6) {
  int probe = ::socket(AF_INET6, SOCK_STREAM, 0);
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  bool v6 = probe >= 0 && ::bind(probe, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  if (probe >= 0) ::close(probe);
  if (!v6) GTEST_SKIP() << "skipped: this host has no IPv6 loopback";
  Metrics m(setup());
  uint16_t port = testing::free_port();
  auto e = Endpoint::listen("[::1]:" + std::to_string(port));
  if (mg_check_feature(8) == 0) {
    ASSERT_FALSE(e);
    EXPECT_EQ(e.error().message(),
              "this build's HTTP server (civetweb) has no IPv6 support: use an IPv4 "
              "address such as 127.0.0.1:" +
                  std::to_string(port));
    return;
  }
  ASSERT_TRUE(e) << e.error().message();
  EXPECT_EQ((*e)->address(), "[::1]:" + std::to_string(port));
}

}  // namespace
}  // namespace keel::metrics
