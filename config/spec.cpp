#include "config/spec.h"

#include <algorithm>

#include "host/cgroup_files.h"

namespace keel::config {

namespace {

WorkloadSpec compile_workload(const Workload& w, const CpuSet& online) {
  WorkloadSpec s;
  s.name = w.name;
  s.critical = w.klass == WorkloadClass::critical;
  s.match = w.match;
  if (w.slo.runqueue_p99) s.slo_p99_us = static_cast<double>(w.slo.runqueue_p99->count()) / 1e3;
  s.slo_migrations_per_s = w.slo.migrations_per_s;
  s.slo_mpki = w.slo.mpki;

  const Bounds& b = w.bounds;
  const unsigned best_effort_min = std::max(1u, kDefaults.best_effort_cpus_min);
  s.cpus_min = b.cpus ? std::max(1u, static_cast<unsigned>(b.cpus->min)) : s.critical ? 1u : best_effort_min;
  s.cpus_max = b.cpus ? static_cast<unsigned>(b.cpus->max) : online.count();
  s.has_pool = b.cpu_pool.has_value();
  s.pool = b.cpu_pool ? *b.cpu_pool & online : online;
  s.numa_single = b.numa == NumaPolicy::single;
  s.vcpu_one_per_core = b.vcpu_pinning == VcpuPinning::one_per_core;
  if (b.shares) {
    s.shares_min = static_cast<uint64_t>(b.shares->min);
    s.shares_max = static_cast<uint64_t>(b.shares->max);
  } else if (s.critical) {
    s.shares_min = kSharesMin;
    s.shares_max = kDefaults.critical_shares_max;
  } else {
    s.shares_min = kDefaults.best_effort_shares_min;
    s.shares_max = kSharesMax;
  }
  auto range = [](const std::optional<IntRange>& r) -> std::optional<UnsignedRange> {
    if (!r) return std::nullopt;
    return UnsignedRange{static_cast<unsigned>(r->min), static_cast<unsigned>(r->max)};
  };
  s.l3_ways = range(b.l3_ways);
  s.mba_percent = range(b.mba_percent);
  return s;
}

}  // namespace

const WorkloadSpec* Spec::find(std::string_view name) const {
  for (const auto& w : workloads)
    if (w.name == name) return &w;
  return nullptr;
}

Spec compile(const Config& cfg, const CpuSet& online) {
  Spec s;
  s.mode = cfg.daemon.mode;
  s.rollback = cfg.daemon.rollback;
  s.period = cfg.daemon.period;
  s.state_dir = cfg.daemon.state_dir;
  s.metrics_listen = cfg.daemon.metrics_listen;
  s.metrics_max_workloads = static_cast<size_t>(std::max(0LL, cfg.daemon.metrics_max_workloads));
  s.hierarchy = cfg.daemon.hierarchy;
  s.early_ticks = cfg.daemon.early_ticks;
  s.online = online;
  s.reserved = cfg.host.reserved_cpus;
  for (const auto& w : cfg.workloads) s.workloads.push_back(compile_workload(w, online));
  s.actuators = cfg.actuators;
  return s;
}

}  // namespace keel::config
