#include "loop/telemetry.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <sstream>
#include <string_view>

#include "host/fileio.h"
#include "host/proc_stat.h"

namespace keel::loop {

using ctl::Action;
using ctl::Knob;

namespace {

void fill_counts(metrics::WorkloadReport& r, const SensedCounts::Counts& c, bool pmu) {
  r.rq_buckets.assign(c.rq.buckets.begin(), c.rq.buckets.end());
  r.rq_sum_s = static_cast<double>(c.rq.sum_ns) / 1e9;
  r.migrations = c.migrations;
  r.cross_llc = c.cross_llc;
  r.cross_numa = c.cross_numa;
  if (pmu) {
    r.cache_misses = bpf::count_of(c.counters, bpf::Counter::cache_misses);
    r.instructions = bpf::count_of(c.counters, bpf::Counter::instructions);
  }
}

// keel_actions_total's direction label: metrics' list is in Action::Kind's order.
const char* direction(Action::Kind k) {
  static_assert(std::size(metrics::kActionDirections) == static_cast<size_t>(Action::Kind::revert) + 1);
  return metrics::kActionDirections[static_cast<size_t>(k)];
}

}  // namespace

SensorView sensor_view(const Sensing& sensing) {
  return SensorView{sensing.counts(), sensing.sensor().pmu(), sensing.sensor().prog_stats(),
                    sensing.sensor().cost(), sensing.records()};
}

metrics::Setup metrics_setup(const config::Spec& spec, bool observe, bool pmu, std::string version) {
  metrics::Setup s;
  s.mode = observe ? "observe" : "enforce";
  s.version = std::move(version);
  for (unsigned i = 0; i < KEEL_HIST_BUCKETS; ++i)
    s.latency_bucket_upper_s.push_back(bpf::RqHistogram::bucket_upper_us(i) / 1e6);
  s.sensors = {{"runqueue", true}, {"hardware_counters", pmu}};
  s.max_workloads = spec.metrics_max_workloads;
  const auto& a = spec.actuators;
  // The config's switches after the host's check (keel run turns off what the host lacks); observe
  // mode decides with the same ones, so the gauges say what it would use.
  s.mechanisms = {{"cpuset", a.cpuset},
                  {"cpu_weight", a.cpu_weight},
                  {"resctrl", a.resctrl},
                  {"steal_task", a.steal_task},
                  {"irq_affinity", a.irq_affinity},
                  {"preempt_class", a.preempt_class != config::PreemptMode::off}};
  return s;
}

namespace {

// `r` cleared for a new tick, the storage of its strings and knobs kept (its histogram's too while it
// counts something: an idle instance keeps none).
void reuse(metrics::WorkloadReport& r, bool counted) {
  std::string workload = std::move(r.workload), klass = std::move(r.klass);
  std::vector<uint64_t> buckets = std::move(r.rq_buckets);
  auto knobs = std::move(r.knobs);
  r = metrics::WorkloadReport{};
  r.workload = std::move(workload);
  r.klass = std::move(klass);
  if (counted) r.rq_buckets = std::move(buckets);
  r.knobs = std::move(knobs);
}

void set_knob(metrics::WorkloadReport& r, const char* knob, std::optional<double> v) {
  if (v)
    r.knobs[knob] = *v;
  else if (auto it = r.knobs.find(knob); it != r.knobs.end())
    r.knobs.erase(it);
}

}  // namespace

metrics::TickReport tick_report(const config::Spec& spec, const ctl::Snapshot& snap, const SensorView& sensor,
                                const ctl::Plan& plan, const Reconciled& done, const TickMeta& meta) {
  metrics::TickReport t;
  tick_report(spec, snap, sensor, plan, done, meta, t, nullptr);
  return t;
}

namespace {

// Instance `w`'s report: its counts, and (when it keeps its label) its SLO view and knobs.
void instance_report(const ctl::WorkloadSignals& w, const InstanceRecord& rec, const SensorView& sensor,
                     const ctl::Plan& plan, const TickMeta& meta, double period_s, bool own,
                     metrics::WorkloadReport& r) {
  reuse(r, rec.counts != nullptr);
  if (!own) r.knobs.clear();
  r.workload = w.instance;
  r.klass = w.critical ? "critical" : "best_effort";
  if (rec.counts != nullptr) fill_counts(r, *rec.counts, sensor.pmu);
  if (w.cpu_usage) r.cpu_seconds = *w.cpu_usage * period_s;
  if (w.throttled_per_s) r.throttled_periods = *w.throttled_per_s * period_s;
  if (!own) return;
  const config::WorkloadSpec* sp = w.critical ? rec.spec : nullptr;
  auto v = w.critical ? plan.workloads.find(w.instance) : plan.workloads.end();
  if (sp && sp->slo_p99_us && v != plan.workloads.end()) {
    r.p99_s = v->second.p99_us / 1e6;
    r.slo_target_s = *sp->slo_p99_us / 1e6;
    r.slack = v->second.slack;
    r.violated = v->second.violated;
    r.blocked = !v->second.blocked.empty();
    r.rung = v->second.rung;
  }
  set_knob(r, "cpus", w.cpus.empty() ? std::nullopt : std::optional<double>(w.cpus.count()));
  set_knob(r, "shares", w.shares ? std::optional<double>(static_cast<double>(*w.shares)) : std::nullopt);
  auto d = meta.observe ? plan.desired.end() : plan.desired.find(w.instance);
  const bool set = d != plan.desired.end();
  set_knob(r, "l3_ways", set && d->second.l3_ways ? std::optional<double>(*d->second.l3_ways) : std::nullopt);
  set_knob(r, "mba_percent",
           set && d->second.mba_percent ? std::optional<double>(*d->second.mba_percent) : std::nullopt);
  // The class (1 in it, 0 not, none where the kernel has no class file): observing, what the kernel
  // has, as for cpus and shares; enforcing, where keel puts it this tick.
  std::optional<double> classed;
  if (!meta.observe && ctl::in_class(plan, w.instance))
    classed = 1;
  else if (w.in_class)
    classed = meta.observe && *w.in_class ? 1 : 0;
  set_knob(r, "class", classed);
}

}  // namespace

void tick_report(const config::Spec& spec, const ctl::Snapshot& snap, const SensorView& sensor,
                 const ctl::Plan& plan, const Reconciled& done, const TickMeta& meta, metrics::TickReport& t,
                 metrics::LabelCap* cap) {
  const SensedCounts& counts = sensor.counts;
  // Past the label cap an instance's report is only added to "other": built in one scratch report.
  std::vector<char> keep;
  const size_t n = snap.workloads.size();
  if (cap != nullptr)
    cap->select(
        n, [&](size_t i) -> std::string_view { return snap.workloads[i].instance; },
        [&](size_t i) { return snap.workloads[i].critical; }, keep);
  else
    keep.assign(n, 1);
  const size_t own = static_cast<size_t>(std::count(keep.begin(), keep.end(), 1));
  t.workloads.resize(own + 1);
  t.folded.clear();
  t.interference.clear();
  t.actions.clear();
  t.steal.reset();
  t.health = metrics::HealthReport{};
  metrics::WorkloadReport& other = t.workloads.back();
  reuse(other, true);
  other.workload = "other";
  other.klass = "other";
  fill_counts(other, counts.other, sensor.pmu);
  metrics::WorkloadReport scratch;
  const InstanceRecord none;  // a view without records: no counts, no spec
  for (size_t i = 0, j = 0; i < n; ++i) {
    const auto& w = snap.workloads[i];
    const InstanceRecord& rec = i < sensor.records.size() ? sensor.records[i] : none;
    if (keep[i]) {
      instance_report(w, rec, sensor, plan, meta, snap.period_s, true, t.workloads[j++]);
    } else {
      instance_report(w, rec, sensor, plan, meta, snap.period_s, false, scratch);
      metrics::fold_into(other, scratch);
      ++t.folded[w.critical ? "critical" : "best_effort"];
    }
  }

  for (const auto& i : plan.interference) t.interference.push_back({i.victim, i.antagonist, i.score});
  for (const auto& a : plan.actions)
    t.actions.emplace_back(a.knob == Knob::steal ? "steal_task" : to_string(a.knob), direction(a.kind));
  if (spec.actuators.steal_task && !meta.observe) t.steal = plan.steal;
  t.starvation_lifts = plan.starvation_lifts.size();

  metrics::HealthReport& h = t.health;
  h.tick_seconds = meta.tick_seconds;
  h.unix_time = meta.unix_time;
  h.actuator_errors = static_cast<unsigned>(done.errors.size());
  h.drifts = static_cast<unsigned>(done.drifts.size());
  for (const auto& p : sensor.programs) h.programs.push_back({p.name, p.run_time_ns, p.run_count});
  if (sensor.cost) {
    h.bpf_seconds_per_event = sensor.cost->ns_per_event / 1e9;
    h.bpf_events_per_s = sensor.cost->events_per_s;
  }
  h.map_entries = counts.map_entries;
  h.map_max_entries = counts.map_capacity;
  h.dropped_map_full = counts.map_full;
  h.dropped_stamp_full = counts.stamp_full;
  h.evicted_gone = counts.evicted.gone;
  h.evicted_idle = counts.evicted.idle;
  h.evicted_unmatched = counts.evicted.unmatched;
  h.evicted_best_effort = counts.evicted.best_effort;
  if (meta.process) {
    h.process_cpu_seconds = meta.process->cpu_seconds;
    h.process_rss_bytes = meta.process->rss_bytes;
  }
}

std::optional<ProcessUsage> process_usage(const SysRoots& roots) {
  auto stat = read_file(roots.proc / "self/stat");
  auto statm = read_file(roots.proc / "self/statm");
  if (!stat || !statm) return std::nullopt;
  // utime is field 14 and stime 15 (clock ticks).
  auto parsed = parse_proc_stat(*stat);
  if (!parsed) return std::nullopt;
  auto utime = parsed->number(14), stime = parsed->number(15);
  std::istringstream m(*statm);
  double size = 0, resident = 0;
  if (!utime || !stime || !(m >> size >> resident)) return std::nullopt;
  const double hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(::sysconf(_SC_PAGESIZE));
  return ProcessUsage{static_cast<double>(*utime + *stime) / hz, resident * page};
}

}  // namespace keel::loop
