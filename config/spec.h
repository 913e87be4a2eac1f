// The config compiled for the loop: once, after validation, each workload's class, SLO and bounds with
// every default applied, so nothing downstream asks "is this bound set?" per tick. The defaults live
// here; the kernel's limits in host/cgroup_files.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "host/cpuset.h"

namespace keel::config {

// What replaces the bounds a config leaves out.
struct Defaults {
  uint64_t critical_shares_max = 8192;    // a critical workload's weight goes up to 8x the kernel default
  uint64_t best_effort_shares_min = 128;  // best-effort work's down to 1/8 of it
  unsigned best_effort_cpus_min = 1;      // best-effort work always keeps a CPU
};
inline constexpr Defaults kDefaults{};

struct UnsignedRange {
  unsigned min = 0, max = 0;
};

struct WorkloadSpec {
  std::string name;
  bool critical = false;
  Match match;
  // The SLO: a critical workload with runqueue_p99 is judged against it.
  std::optional<double> slo_p99_us;
  std::optional<double> slo_migrations_per_s;
  std::optional<double> slo_mpki;
  // Bounds, each default applied.
  unsigned cpus_min = 1;  // critical: bounds.cpus.min or 1; best-effort: the CPUs it always keeps
  unsigned cpus_max = 0;  // bounds.cpus.max, else every CPU of the host
  CpuSet pool;            // bounds.cpu_pool on this host, else every CPU of the host
  bool has_pool = false;  // bounds.cpu_pool was given
  bool numa_single = false;
  bool vcpu_one_per_core = false;           // bounds.vcpu_pinning = "one_per_core" (a vm workload)
  uint64_t shares_min = 0, shares_max = 0;  // critical: [2, 8192], best-effort: [128, 262144] by default
  std::optional<UnsignedRange> l3_ways, mba_percent;

  bool judged() const { return critical && slo_p99_us.has_value(); }
};

struct Spec {
  Mode mode = Mode::observe;
  std::chrono::nanoseconds period = std::chrono::seconds(1);
  std::filesystem::path state_dir;
  std::string metrics_listen;
  size_t metrics_max_workloads = 256;
  Hierarchy hierarchy = Hierarchy::automatic;
  bool early_ticks = true;
  Rollback rollback = Rollback::automatic;
  CpuSet online;                        // the host's CPUs the bounds were compiled for
  CpuSet reserved;                      // host.reserved_cpus: never handed to workloads
  std::vector<WorkloadSpec> workloads;  // config order: the first that matches a cgroup wins
  Actuators actuators;

  const WorkloadSpec* find(std::string_view name) const;
};

// `cfg` must be one the validator accepted; `online` is the host's CPUs (a synthetic host's for replay).
Spec compile(const Config& cfg, const CpuSet& online);

}  // namespace keel::config
