// One tick's Snapshot from the host: the BPF sensor's per-cgroup deltas, cgroupfs counters (CPU usage,
// throttling, cpuset, weight) and the config's workload matching, summed per workload instance. The
// pure Controller decides from what this builds; `keel run --record` writes it to a trace.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bpf/sched_sensor.h"
#include "config/config.h"
#include "controller/snapshot.h"
#include "host/cgroup.h"
#include "host/error.h"
#include "host/sys_roots.h"
#include "host/topology.h"
#include "inventory/workloads.h"

namespace keel::ctl {

// One tick's raw counts for the metrics: per workload instance, and for the cgroups no workload
// matches (folded into one), plus what the sensor could not record.
struct SensedCounts {
  struct Counts {
    bpf::RqHistogram rq;
    uint64_t migrations = 0, cross_llc = 0, cross_numa = 0;
    std::array<uint64_t, KEEL_MAX_COUNTERS> counters{};  // cache misses, references, instructions, cycles
  };
  std::map<std::string, Counts> instances;
  Counts other;
  uint64_t map_full = 0, stamp_full = 0;  // events dropped this tick
  size_t map_entries = 0, map_capacity = 0;
};

class Sensing {
 public:
  // Loads the BPF programs (root) for the hierarchy that defines the config's workloads; hardware
  // counters where there is a PMU, else cache signals stay unavailable.
  static Result<Sensing> open(const config::Config& cfg, const SysRoots& roots, const Topology& topo,
                              bpf::BpfStats stats = bpf::BpfStats::sampled);
  Sensing(Sensing&&) noexcept;
  Sensing& operator=(Sensing&&) noexcept;
  ~Sensing();

  // The signals since the previous call (or since open), per configured workload instance.
  Result<Snapshot> sample(uint64_t tick);

  const CgroupLayout& layout() const;
  const CgroupHierarchy& hierarchy() const;
  // This tick's cgroups and the workload instance each belongs to (unmatched ones included).
  const std::vector<WorkloadMatch>& matches() const;
  std::optional<bpf::BpfCost> cost() const;
  const SensedCounts& counts() const;  // of the latest sample
  std::vector<bpf::ProgStats> prog_stats() const;
  bool pmu() const;
  std::string counters_note() const;  // "hardware counters" or "n/a (why)"
  bpf::AttachKind attach() const;

 private:
  struct State;
  explicit Sensing(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

// The cpuset cgroup that governs `path` of the defining hierarchy: v2 the same cgroup; v1 the same path
// in the cpuset hierarchy when it exists there, else the cpuset cgroup of its first task. None when
// there is no cpuset controller, or it is the root cpuset (the host's, never a workload's to change).
std::optional<std::string> cpuset_cgroup(const SysRoots& roots, const CgroupLayout& layout,
                                         const CgroupHierarchy& defining, const std::string& path);

// The v2 weight as cpu.shares (systemd's mapping inverted: weight * 1024 / 100).
uint64_t weight_to_shares(uint64_t weight);

}  // namespace keel::ctl
