// Per-cgroup run-queue latency and migrations from bpf/sched.bpf.c, as deltas per read.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "bpf/features.h"
#include "bpf/sched_shared.h"
#include "host/cgroup.h"
#include "host/error.h"

struct keel_sched;  // bpftool skeleton

namespace keel::bpf {

// Log-linear run-queue latency histogram (bucket layout in sched_shared.h).
struct RqHistogram {
  std::array<uint64_t, KEEL_HIST_BUCKETS> buckets{};
  uint64_t count = 0;
  uint64_t sum_ns = 0;

  static double bucket_lower_us(unsigned i);
  static double bucket_upper_us(unsigned i);
  static unsigned bucket_of_us(double us);
  // The q-quantile (0..1) in microseconds, interpolated inside its bucket; 0 when empty.
  double quantile_us(double q) const;
  RqHistogram& operator+=(const RqHistogram& o);
};

struct CgroupSched {
  CgroupId id;
  RqHistogram rq;
  uint64_t migrations = 0;
  uint64_t cross_llc = 0;
  uint64_t cross_numa = 0;
  uint64_t counter = 0;  // the configured perf counter's count while this cgroup's tasks ran
};

struct SchedDelta {
  std::vector<CgroupSched> cgroups;  // only cgroups with activity since the previous read
  uint64_t map_full = 0;             // events dropped because the per-cgroup map was full
  uint64_t stamp_full = 0;           // wakeups not stamped
};

// keel's own cost, per attached program, cumulative since attach (needs BPF stats enabled).
struct ProgStats {
  std::string name;
  uint64_t run_time_ns = 0;
  uint64_t run_count = 0;
};

struct SchedConfig {
  CgroupHierarchy hierarchy;            // whose cgroup ids key the statistics (v1 controller or v2)
  std::vector<uint16_t> llc_of_cpu;     // by OS CPU number, from the host topology
  std::vector<uint16_t> node_of_cpu;
  AttachChoice attach = AttachChoice::automatic;
  uint32_t max_cgroups = 4096;          // entries of the per-cgroup map
  bool collect_stats = true;            // hold BPF run-time stats on while the sensor lives
  // A per-CPU perf event read at every switch and charged to the task switched out
  // (perf_event_attr type/config: hardware cache misses with a PMU, a software clock in tests).
  struct Counter {
    uint32_t type = 0;
    uint64_t config = 0;
  };
  std::optional<Counter> counter;
};

class SchedSensor {
 public:
  static Result<SchedSensor> open(const SchedConfig& cfg);
  SchedSensor(SchedSensor&& o) noexcept;
  SchedSensor& operator=(SchedSensor&& o) noexcept;
  SchedSensor(const SchedSensor&) = delete;
  SchedSensor& operator=(const SchedSensor&) = delete;
  ~SchedSensor();

  AttachKind kind() const { return kind_; }
  // Everything counted since the previous read (the first: since attach). Counters in the kernel
  // only grow, so a count is never lost or seen twice.
  Result<SchedDelta> read();
  // Drops the entries of cgroups that are gone (not in `live`); returns how many.
  size_t reclaim(const std::vector<CgroupId>& live);
  size_t entries() const { return last_.size(); }
  // Run time and count of each attached program (zeros when BPF stats could not be enabled).
  std::vector<ProgStats> prog_stats() const;
  bool stats_enabled() const { return stats_fd_ >= 0; }

 private:
  static Result<SchedSensor> open_programs(const SchedConfig& cfg);
  SchedSensor(keel_sched* skel, AttachKind kind, uint32_t hierarchy)
      : skel_(skel), kind_(kind), hierarchy_(hierarchy) {}
  keel_sched* skel_ = nullptr;
  AttachKind kind_ = AttachKind::tp_btf;
  uint32_t hierarchy_ = 0;
  std::map<CgroupId, CgroupSched> last_;  // cumulative values at the previous read
  uint64_t last_map_full_ = 0, last_stamp_full_ = 0;
  int stats_fd_ = -1;  // bpf_enable_stats(): stats stay on only while this fd is open
  std::vector<int> counter_fds_;  // one perf event per CPU, closed with the sensor
  void close_fds();
};

}  // namespace keel::bpf
