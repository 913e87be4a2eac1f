// The translation of one tick into the metrics' report, on plain data: units (us and ns to seconds,
// CPU usage to CPU-seconds), which workloads get SLO gauges, knob values in effect (nothing keel did
// not set in observe mode), counts per instance and for unmatched cgroups, action names; and keel's
// own CPU and memory from proc files in the kernel's format, malformed ones refused.
#include "loop/telemetry.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "loop/loop.h"
#include "tests/support/tmp_tree.h"

namespace keel::loop {

using ctl::Action;
using ctl::Interference;
using ctl::Knob;
using ctl::KnobState;
using ctl::Plan;
using ctl::Snapshot;
using ctl::WorkloadSignals;
using ctl::WorkloadView;
namespace {

using namespace std::chrono_literals;

config::Spec two_workloads(bool steal) {
  config::Config c;
  config::Workload crit;
  crit.name = "crit";
  crit.klass = config::WorkloadClass::critical;
  crit.slo.runqueue_p99 = 300us;
  config::Workload be;
  be.name = "batch";
  be.klass = config::WorkloadClass::best_effort;
  be.slo.runqueue_p99 = 5ms;  // best-effort: not judged, so no SLO gauges
  c.workloads = {crit, be};
  c.actuators.steal_task = steal;
  return config::compile(c, CpuSet::range(0, 3));
}

struct Tick {
  Snapshot snap;
  SensedCounts counts;
  std::vector<InstanceRecord> records;
  SensorView sensor{counts, false, {}, std::nullopt, {}};  // refers to `counts`: a Tick is never copied
  Plan plan;
  Reconciled done;
  Tick() = default;
  Tick(const Tick&) = delete;
  // The records sensing keeps by the snapshot's index (here without an inventory): counts and spec.
  const SensorView& view(const config::Spec& spec) {
    records.clear();
    for (const auto& w : snap.workloads) {
      auto c = counts.instances.find(w.instance);
      records.push_back({nullptr, c != counts.instances.end() ? &c->second : nullptr, spec.find(w.workload)});
    }
    sensor.records = records;
    return sensor;
  }
};

void fill(Tick& t) {
  t.snap.period_s = 0.5;
  WorkloadSignals crit;
  crit.instance = crit.workload = "crit";
  crit.critical = true;
  crit.cpu_usage = 0.8;
  crit.throttled_per_s = 6;
  crit.cpus = CpuSet::range(2, 3);
  crit.shares = 2048;
  WorkloadSignals be;
  be.instance = "batch/job-1";
  be.workload = "batch";
  be.cpus = CpuSet::range(0, 7);
  t.snap.workloads = {crit, be};

  auto& c = t.counts.instances["crit"];
  c.rq.buckets[5] = 7;
  c.rq.buckets[100] = 3;
  c.rq.sum_ns = 2'000'000;
  c.migrations = 11;
  c.cross_llc = 4;
  c.counters = {500, 900, 100'000, 200'000};
  t.counts.instances["batch/job-1"].migrations = 2;
  t.counts.other.rq.buckets[1] = 9;
  t.counts.map_entries = 12;
  t.counts.map_capacity = 4096;
  t.counts.stamp_full = 1;
  t.counts.evicted.gone = 3;
  t.counts.evicted.best_effort = 2;
  t.sensor.pmu = true;
  t.sensor.programs = {{"keel_switch_btf", 5000, 20}};
  t.sensor.cost = bpf::BpfCost{250, 4000};

  t.plan.workloads["crit"] =
      WorkloadView{.p99_us = 450, .slack = -0.5, .violated = true, .rung = 2, .blocked = "no CPU left"};
  t.plan.workloads["batch/job-1"] =
      WorkloadView{.p99_us = 900, .slack = 0, .violated = false, .rung = 0, .blocked = ""};
  t.plan.desired["crit"].l3_ways = 4;
  t.plan.desired["crit"].mba_percent = 70;
  t.plan.steal = true;
  t.plan.actions = {Action{.tick = 1,
                           .instance = "crit",
                           .knob = Knob::cpus,
                           .from = "",
                           .to = "2-3",
                           .kind = Action::Kind::act,
                           .reason = ""},
                    Action{.tick = 1,
                           .instance = "",
                           .knob = Knob::steal,
                           .from = "0",
                           .to = "1",
                           .kind = Action::Kind::revert,
                           .reason = ""}};
  t.plan.interference = {{"crit", "batch/job-1", 1.25}};
  t.done.errors = {"one", "two"};
}

TEST(TickReport, EnforceReportsSignalsInSecondsAndTheKnobsKeelSet) {
  Tick t;
  fill(t);
  const config::Spec spec = two_workloads(true);
  auto r = tick_report(
      spec, t.snap, t.view(spec), t.plan, t.done,
      {.observe = false, .tick_seconds = 0.004, .unix_time = 1e9, .process = ProcessUsage{3, 4096}});
  ASSERT_EQ(r.workloads.size(), 3u);
  const auto& crit = r.workloads[0];
  EXPECT_EQ(crit.workload, "crit");
  EXPECT_EQ(crit.klass, "critical");
  ASSERT_EQ(crit.rq_buckets.size(), static_cast<size_t>(KEEL_HIST_BUCKETS));
  EXPECT_EQ(crit.rq_buckets[5], 7u);
  EXPECT_EQ(crit.rq_buckets[100], 3u);
  EXPECT_DOUBLE_EQ(crit.rq_sum_s, 0.002);
  EXPECT_EQ(crit.migrations, 11u);
  EXPECT_EQ(crit.cross_llc, 4u);
  EXPECT_EQ(crit.cache_misses, 500u);            // counter 0
  EXPECT_EQ(crit.instructions, 100'000u);        // counter 2
  EXPECT_DOUBLE_EQ(*crit.cpu_seconds, 0.4);      // 0.8 CPUs over 0.5 s
  EXPECT_DOUBLE_EQ(*crit.throttled_periods, 3);  // 6/s over 0.5 s
  EXPECT_DOUBLE_EQ(*crit.p99_s, 450e-6);
  EXPECT_DOUBLE_EQ(*crit.slo_target_s, 300e-6);
  EXPECT_DOUBLE_EQ(*crit.slack, -0.5);
  EXPECT_TRUE(crit.violated);
  EXPECT_TRUE(crit.blocked);
  EXPECT_EQ(crit.rung, 2u);
  EXPECT_EQ(crit.knobs, (std::map<std::string, double>{
                            {"cpus", 2}, {"shares", 2048}, {"l3_ways", 4}, {"mba_percent", 70}}));

  const auto& be = r.workloads[1];
  EXPECT_EQ(be.klass, "best_effort");
  EXPECT_FALSE(be.slack);  // best-effort work is not judged against an SLO
  EXPECT_FALSE(be.p99_s);
  EXPECT_FALSE(be.cpu_seconds);
  EXPECT_FALSE(be.throttled_periods);
  EXPECT_EQ(be.migrations, 2u);
  EXPECT_EQ(be.knobs, (std::map<std::string, double>{{"cpus", 8}}));

  const auto& other = r.workloads[2];
  EXPECT_EQ(other.workload, "other");
  EXPECT_EQ(other.klass, "other");
  EXPECT_EQ(other.rq_buckets[1], 9u);

  EXPECT_EQ(r.actions,
            (std::vector<std::pair<std::string, std::string>>{{"cpus", "act"}, {"steal_task", "revert"}}));
  ASSERT_EQ(r.interference.size(), 1u);
  EXPECT_EQ(r.interference[0].antagonist, "batch/job-1");
  EXPECT_EQ(r.steal, true);
  EXPECT_EQ(r.health.actuator_errors, 2u);
  EXPECT_DOUBLE_EQ(*r.health.bpf_seconds_per_event, 250e-9);
  EXPECT_DOUBLE_EQ(*r.health.bpf_events_per_s, 4000);
  EXPECT_EQ(r.health.map_entries, 12u);
  EXPECT_EQ(r.health.map_max_entries, 4096u);
  EXPECT_EQ(r.health.dropped_stamp_full, 1u);
  EXPECT_EQ(r.health.evicted_gone, 3u);
  EXPECT_EQ(r.health.evicted_idle, 0u);
  EXPECT_EQ(r.health.evicted_best_effort, 2u);
  ASSERT_EQ(r.health.programs.size(), 1u);
  EXPECT_EQ(r.health.programs[0].run_time_ns, 5000u);
  EXPECT_DOUBLE_EQ(*r.health.process_cpu_seconds, 3);
  EXPECT_DOUBLE_EQ(r.health.tick_seconds, 0.004);
}

TEST(TickReport, ObserveReportsNoKnobKeelDidNotSetAndNoCacheCountsWithoutAPmu) {
  Tick t;
  fill(t);
  t.sensor.pmu = false;
  const config::Spec with_steal = two_workloads(true), without = two_workloads(false);
  auto r = tick_report(with_steal, t.snap, t.view(with_steal), t.plan, t.done,
                       {.observe = true, .tick_seconds = 0, .unix_time = 0, .process = std::nullopt});
  EXPECT_EQ(r.workloads[0].knobs, (std::map<std::string, double>{{"cpus", 2}, {"shares", 2048}}));
  EXPECT_FALSE(r.steal);
  EXPECT_FALSE(r.workloads[0].cache_misses);
  EXPECT_FALSE(r.workloads[0].instructions);
  EXPECT_EQ(r.actions.size(), 2u);  // would-act decisions are still counted (mode="observe")
  // steal_task not enabled: no host knob in enforce mode either.
  auto e = tick_report(without, t.snap, t.view(without), t.plan, t.done,
                       {.observe = false, .tick_seconds = 0, .unix_time = 0, .process = std::nullopt});
  EXPECT_FALSE(e.steal);
}

TEST(ProcessUsageTree, ReadsCpuTimeAndResidentMemoryAndRefusesMalformedFiles) {
  testing::TempDir dir;
  const double hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(::sysconf(_SC_PAGESIZE));
  // A command name with spaces and a ')' of its own; utime 250, stime 50 ticks; 1000 pages resident.
  std::string stat =
      "4242 (keel (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 100 1000000 1000\n";
  testing::make_tree(dir.path(),
                     {{"proc/self/stat", stat}, {"proc/self/statm", "5000 1000 200 10 0 800 0\n"}});
  auto u = process_usage(SysRoots::under(dir.path()));
  ASSERT_TRUE(u);
  EXPECT_DOUBLE_EQ(u->cpu_seconds, 300 / hz);
  EXPECT_DOUBLE_EQ(u->rss_bytes, 1000 * page);
  for (std::string bad : {std::string("4242 (keel)"), std::string("4242 keel S 1"),
                          std::string("4242 (keel) S 1 4242 4242 0 -1 4194560 100 0 0 0 2x0 50 0\n"),
                          std::string("4242 (keel) S 1 4242 4242 0 -1 4194560 100 0 0 0 250\n")}) {
    testing::make_tree(dir.path(), {{"proc/self/stat", bad}});
    EXPECT_FALSE(process_usage(SysRoots::under(dir.path()))) << bad;
  }
  // The real file of this process parses.
  EXPECT_TRUE(process_usage(SysRoots::host()));
}

// keel run folds the instances past the label cap into "other" while it builds the report (one
// report each would cost megabytes at 10,000 instances): what the metrics then show is what they show
// when they fold those instances themselves, tick after tick, as instances come and go (labels are
// kept while an instance lasts, a new critical one takes a free slot first).
TEST(TickReport, InstancesPastTheLabelCapFoldedWhileReportingShowAsTheMetricsFoldingThem) {
  config::Spec spec = two_workloads(false);
  spec.metrics_max_workloads = 2;
  metrics::Metrics folded_by_metrics(metrics_setup(spec, false, false, "test"));
  metrics::Metrics folded_here(metrics_setup(spec, false, false, "test"));
  metrics::LabelCap cap(spec.metrics_max_workloads);
  metrics::TickReport reused;
  const std::vector<std::vector<std::string>> ticks = {
      {"batch/a", "batch/b", "batch/c", "batch/d"},
      {"batch/b", "batch/c", "batch/d", "crit"},  // a left: its slot goes to crit, not to c or d
      {"batch/c", "batch/d", "batch/e", "crit"},  // b left: c takes its slot
      {"batch/d", "batch/e"}};
  const std::vector<std::vector<std::string>> labelled = {
      {"batch/a", "batch/b"}, {"batch/b", "crit"}, {"batch/c", "crit"}, {"batch/d", "batch/e"}};
  for (size_t k = 0; k < ticks.size(); ++k) {
    Tick t;
    t.snap.period_s = 1;
    for (size_t i = 0; i < ticks[k].size(); ++i) {
      const std::string& name = ticks[k][i];
      WorkloadSignals w;
      w.instance = name;
      w.workload = name == "crit" ? "crit" : "batch";
      w.critical = name == "crit";
      w.cpu_usage = 0.1 * static_cast<double>(i + 1);
      w.throttled_per_s = static_cast<double>(i);
      w.cpus = CpuSet::range(0, static_cast<unsigned>(i));
      w.shares = 1024 * (i + 1);
      t.snap.workloads.push_back(w);
      auto& c = t.counts.instances[name];
      c.rq.buckets[3 + i] = static_cast<uint32_t>(5 * (k + 1));
      c.rq.sum_ns = 1000 * (i + 1);
      c.migrations = i + k;
    }
    t.counts.other.rq.buckets[1] = 2;
    t.plan.workloads["crit"] =
        WorkloadView{.p99_us = 100, .slack = 0.6, .violated = false, .rung = 0, .blocked = ""};
    const TickMeta meta{false, 0.01, 1000.0 + static_cast<double>(k), std::nullopt};
    folded_by_metrics.publish(tick_report(spec, t.snap, t.view(spec), t.plan, t.done, meta));
    tick_report(spec, t.snap, t.sensor, t.plan, t.done, meta, reused, &cap);
    EXPECT_LE(reused.workloads.size(), spec.metrics_max_workloads + 1) << k;
    size_t folded = 0;
    for (const auto& [klass, n] : reused.folded) folded += n;
    EXPECT_EQ(folded + reused.workloads.size() - 1, ticks[k].size()) << k;
    folded_here.publish(reused);
    const std::string text = folded_here.render();
    EXPECT_EQ(text, folded_by_metrics.render()) << "tick " << k;
    for (const std::string& name : ticks[k]) {
      const bool own = std::ranges::find(labelled[k], name) != labelled[k].end();
      EXPECT_EQ(text.find("workload=\"" + name + "\"") != std::string::npos, own) << name << " at tick " << k;
    }
  }
}

}  // namespace
}  // namespace keel::loop

namespace keel::loop {
namespace {

// The status line names each instance whole: a 300-byte instance name (a pod or container named by its
// platform) was cut at 160 bytes with everything after it.
TEST(StatusLine, NamesLongInstancesWholeWithTheirNumbers) {
  const std::string longname = "kubepods/" + std::string(290, 'x') + "-end";
  ctl::Snapshot snap;
  snap.workloads.resize(2);
  snap.workloads[0].instance = longname;
  snap.workloads[0].critical = true;
  snap.workloads[0].rq_p99_us = 812;
  snap.workloads[0].rq_waits = 44;
  snap.workloads[1].instance = "crit2";
  snap.workloads[1].critical = true;
  ctl::Plan plan;
  plan.workloads[longname] =
      ctl::WorkloadView{.p99_us = 900, .slack = -2, .violated = true, .rung = 3, .blocked = ""};
  plan.workloads["crit2"] =
      ctl::WorkloadView{.p99_us = 10, .slack = 0.5, .violated = false, .rung = 0, .blocked = ""};
  const std::string line = status_line(plan, snap);
  EXPECT_EQ(
      line,
      longname +
          " p99 900 us (tick 812 us, 44 waits) slack -2.00 rung 3 VIOLATED; crit2 p99 10 us (tick 0 us, "
          "0 waits) slack 0.50 rung 0");
  // Without a critical instance: the busiest waiters, names whole too.
  snap.workloads[0].critical = snap.workloads[1].critical = false;
  EXPECT_EQ(status_line(plan, snap), longname + " p99 812 us (44 waits); crit2 p99 0 us (0 waits)");
}

// The desired state a handover carries: every field back as it was, names byte for byte (a name that
// is not valid UTF-8 is left out: it could not come back as itself); bad text is an error, not a
// partial map.
TEST(Handover, DesiredStateRoundTripsAndBadTextIsRefused) {
  std::map<std::string, ctl::KnobState> d;
  d["crit \"quoted\" \\ name"] = ctl::KnobState{2048, *CpuSet::parse_list("0-1,4"), 3u, 40u, false};
  d["noise/be1"] = ctl::KnobState{std::nullopt, *CpuSet::parse_list("2-3"), std::nullopt, std::nullopt, true};
  d[std::string("bad\xff")] = ctl::KnobState{2, std::nullopt, std::nullopt, std::nullopt, false};
  auto back = parse_desired(format_desired(d));
  ASSERT_TRUE(back) << back.error().message();
  d.erase(std::string("bad\xff"));
  EXPECT_EQ(*back, d);
  for (const char* bad :
       {"", "{}", "[1]", "[{\"shares\":2}]", "[{\"instance\":\"a\",\"shares\":-1}]",
        "[{\"instance\":\"a\",\"shares\":300000}]", "[{\"instance\":\"a\",\"cpus\":\"0-x\"}]",
        "[{\"instance\":\"a\",\"mba_percent\":101}]", "[{\"instance\":\"a\",\"what\":1}]",
        "[{\"instance\":\"a\"},{\"instance\":\"a\"}]", "[{\"instance\":\"a\"}"})
    EXPECT_FALSE(parse_desired(bad)) << bad;
}

}  // namespace
}  // namespace keel::loop
