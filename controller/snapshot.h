// One tick's signals, per workload instance: what the controller decides from. Plain data, built by
// the sensing side (BPF sensor, cgroupfs) or read back from a recorded trace; immutable for the tick.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "host/cpuset.h"

namespace keel::ctl {

struct WorkloadSignals {
  std::string instance;  // "redis", or "batch/job-1" for an `each` workload's instance
  std::string workload;  // the config workload's name
  bool critical = false;
  // Best-effort by a glob, but the host's own daemons (init.scope, system.slice's services: every cgroup
  // of it spared by the inventory): measured, never demoted (no class, lower weight or narrower CPUs).
  bool host_daemon = false;
  std::vector<std::string> cgroups;  // its cgroups, paths inside the hierarchy that defines workloads
  // The first tick of this instance, or of a new one under its name (its cgroup made again): nothing
  // decided for the old one carries over.
  bool fresh = false;
  // Run-queue latency over this tick (zeros when it did not wait at all).
  uint64_t rq_waits = 0;
  double rq_p50_us = 0;
  double rq_p99_us = 0;
  double rq_wait_s_per_s =
      0;  // time its tasks spent runnable but waiting, per second: how many wait on average
  double migrations_per_s = 0;
  double cross_llc_per_s = 0;
  double cross_numa_per_s = 0;
  std::optional<double> cache_misses_per_s;  // none without a PMU
  std::optional<double> mpki;
  std::optional<double> cpu_usage;  // CPUs busy: CPU-seconds per second, from cgroupfs
  std::optional<double> throttled_per_s;
  // How long, up to this sample, its CPU use has stayed under the demand watch's bound (the controller's
  // DemandWatch) as read between ticks; 0 when it is not watched or was busy at the last read.
  double lull_s = 0;
  // CPUs busy over the demand watch's latest read between ticks (about 100 ms), where it watches it.
  std::optional<double> watch_cpu;
  // The longest one of its threads was runnable without running, as the demand watch saw it between
  // ticks (two reads, 25-100 ms apart, each finding it runnable with the same CPU time): a victim starved
  // of CPU, whose open wait no SLO crossing has reported yet. 0: none seen.
  double starved_s = 0;
  CpuSet cpus;                     // where it may run now (its cpuset's effective CPUs)
  std::optional<uint64_t> shares;  // its CPU weight now, as cpu.shares (v2 weight mapped back)
  // In the preemption class now (every cgroup of it: cpu.idle 1, or openEuler's cpu.qos_level / Anolis's
  // cpu.bvt_warp_ns at -1); none where the kernel has no such file.
  std::optional<bool> in_class;
};

struct Snapshot {
  uint64_t tick = 0;
  double period_s = 1.0;
  std::vector<WorkloadSignals> workloads;
};

}  // namespace keel::ctl
