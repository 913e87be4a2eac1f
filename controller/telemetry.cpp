#include "controller/telemetry.h"

#include <unistd.h>

#include <sstream>

#include "host/fileio.h"

namespace keel::ctl {

namespace {

const config::Workload* find(const config::Config& cfg, const std::string& name) {
  for (const auto& w : cfg.workloads)
    if (w.name == name) return &w;
  return nullptr;
}

void fill_counts(metrics::WorkloadReport& r, const SensedCounts::Counts& c, bool pmu) {
  r.rq_buckets.assign(c.rq.buckets.begin(), c.rq.buckets.end());
  r.rq_sum_s = static_cast<double>(c.rq.sum_ns) / 1e9;
  r.migrations = c.migrations;
  r.cross_llc = c.cross_llc;
  r.cross_numa = c.cross_numa;
  if (pmu) {  // hardware_counters(): cache misses, references, instructions, cycles
    r.cache_misses = c.counters[0];
    r.instructions = c.counters[2];
  }
}

const char* direction(Action::Kind k) {
  switch (k) {
    case Action::Kind::act: return "act";
    case Action::Kind::give_back: return "give_back";
    case Action::Kind::revert: return "revert";
  }
  return "act";
}

}  // namespace

metrics::Setup metrics_setup(const config::Config& cfg, bool observe, const Sensing& sensing, std::string version) {
  metrics::Setup s;
  s.mode = observe ? "observe" : "enforce";
  s.version = std::move(version);
  for (unsigned i = 0; i < KEEL_HIST_BUCKETS; ++i) s.latency_bucket_upper_s.push_back(bpf::RqHistogram::bucket_upper_us(i) / 1e6);
  s.sensors = {{"runqueue", true}, {"hardware_counters", sensing.pmu()}};
  const auto& a = cfg.actuators;
  // The config's switches after the host's check (keel run turns off what the host lacks); observe
  // mode decides with the same ones, so the gauges say what it would use.
  s.mechanisms = {{"cpuset", a.cpuset},
                  {"cpu_weight", a.cpu_weight},
                  {"resctrl", a.resctrl},
                  {"steal_task", a.steal_task},
                  {"irq_affinity", a.irq_affinity}};
  return s;
}

metrics::TickReport tick_report(const config::Config& cfg, const Snapshot& snap, const Sensing& sensing,
                                const Plan& plan, const Reconciled& done, const SysRoots& roots, TickCost cost) {
  metrics::TickReport t;
  const SensedCounts& counts = sensing.counts();
  const bool pmu = sensing.pmu();
  for (const auto& w : snap.workloads) {
    metrics::WorkloadReport r;
    r.workload = w.instance;
    r.klass = w.critical ? "critical" : "best_effort";
    if (auto c = counts.instances.find(w.instance); c != counts.instances.end()) fill_counts(r, c->second, pmu);
    if (w.cpu_usage) r.cpu_seconds = *w.cpu_usage * snap.period_s;
    const config::Workload* cw = find(cfg, w.workload);
    auto v = plan.workloads.find(w.instance);
    if (w.critical && cw && cw->slo.runqueue_p99 && v != plan.workloads.end()) {
      r.p99_s = v->second.p99_us / 1e6;
      r.slo_target_s = static_cast<double>(cw->slo.runqueue_p99->count()) / 1e9;
      r.slack = v->second.slack;
      r.violated = v->second.violated;
      r.blocked = !v->second.blocked.empty();
      r.rung = v->second.rung;
    }
    if (!w.cpus.empty()) r.knobs["cpus"] = w.cpus.count();
    if (w.shares) r.knobs["shares"] = static_cast<double>(*w.shares);
    if (auto d = plan.desired.find(w.instance); d != plan.desired.end()) {
      if (d->second.l3_ways) r.knobs["l3_ways"] = *d->second.l3_ways;
      if (d->second.mba_percent) r.knobs["mba_percent"] = *d->second.mba_percent;
    }
    t.workloads.push_back(std::move(r));
  }
  metrics::WorkloadReport other;
  other.workload = "other";
  other.klass = "other";
  fill_counts(other, counts.other, pmu);
  t.workloads.push_back(std::move(other));

  for (const auto& i : plan.interference) t.interference.push_back({i.victim, i.antagonist, i.score});
  for (const auto& a : plan.actions)
    t.actions.emplace_back(a.knob == Knob::steal ? "steal_task" : to_string(a.knob), direction(a.kind));
  if (cfg.actuators.steal_task) t.steal = plan.steal;

  metrics::HealthReport& h = t.health;
  h.tick_seconds = cost.tick_seconds;
  h.unix_time = cost.unix_time;
  h.actuator_errors = static_cast<unsigned>(done.errors.size());
  for (const auto& p : sensing.prog_stats()) h.programs.push_back({p.name, p.run_time_ns, p.run_count});
  if (auto c = sensing.cost()) {
    h.bpf_seconds_per_event = c->ns_per_event / 1e9;
    h.bpf_events_per_s = c->events_per_s;
  }
  h.map_entries = counts.map_entries;
  h.map_max_entries = counts.map_capacity;
  h.dropped_map_full = counts.map_full;
  h.dropped_stamp_full = counts.stamp_full;
  if (auto u = process_usage(roots)) {
    h.process_cpu_seconds = u->cpu_seconds;
    h.process_rss_bytes = u->rss_bytes;
  }
  return t;
}

std::optional<ProcessUsage> process_usage(const SysRoots& roots) {
  auto stat = read_file(roots.proc / "self/stat");
  auto statm = read_file(roots.proc / "self/statm");
  if (!stat || !statm) return std::nullopt;
  // Fields after the command (which may hold spaces and parentheses): state is field 3, utime 14, stime 15.
  auto close = stat->rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream in(stat->substr(close + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14) utime = std::stod(field);
    if (i == 15) stime = std::stod(field);
  }
  std::istringstream m(*statm);
  double size = 0, resident = 0;
  if (!(m >> size >> resident)) return std::nullopt;
  const double hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(::sysconf(_SC_PAGESIZE));
  return ProcessUsage{(utime + stime) / hz, resident * page};
}

}  // namespace keel::ctl
