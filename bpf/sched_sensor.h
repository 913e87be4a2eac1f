// Per-cgroup run-queue latency and migrations from bpf/sched.bpf.c, as deltas per read.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "bpf/features.h"
#include "bpf/sched_shared.h"
#include "bpf/skeleton.h"
#include "host/cgroup.h"
#include "host/error.h"
#include "host/fd.h"
#include "host/topology.h"

struct keel_sched;  // bpftool skeleton

namespace keel::bpf {

// Log-linear run-queue latency histogram (bucket layout in sched_shared.h) of one read interval: waits
// per bucket fit 32 bits (the sensor saturates them), which halves every copy sensing makes of it.
struct RqHistogram {
  std::array<uint32_t, KEEL_HIST_BUCKETS> buckets{};
  uint64_t count = 0;
  uint64_t sum_ns = 0;

  static double bucket_lower_us(unsigned i);
  static double bucket_upper_us(unsigned i);
  static unsigned bucket_of_us(double us);
  // The q-quantile (0..1) in microseconds, interpolated inside its bucket; 0 when empty.
  double quantile_us(double q) const;
  RqHistogram& operator+=(const RqHistogram& o);
};

// Where each of hardware_counters() is counted, in CgroupSched::counters.
enum class Counter : unsigned { cache_misses = 0, cache_references = 1, instructions = 2, cycles = 3 };
inline uint64_t count_of(const std::array<uint64_t, KEEL_MAX_COUNTERS>& counters, Counter c) {
  return counters[static_cast<size_t>(c)];
}

struct CgroupSched {
  CgroupId id;
  RqHistogram rq;
  uint64_t migrations = 0;
  uint64_t cross_llc = 0;
  uint64_t cross_numa = 0;
  // Perf counts while this cgroup's tasks ran, in SchedConfig::counters' order (0 past its size).
  std::array<uint64_t, KEEL_MAX_COUNTERS> counters{};
};

// What a cgroup's entry in the per-cgroup map is worth when room is short, as sensing knows the
// cgroup: the entries of gone cgroups go first, then those of cgroups no workload covers, then
// best-effort ones (the longest idle first of each); a critical workload's never.
enum class Worth : uint8_t { gone, unmatched, best_effort, critical };

// Entries keel removed from the per-cgroup map, by reason.
struct Evictions {
  uint64_t gone = 0;         // its cgroup was removed
  uint64_t idle = 0;         // nothing counted for SchedSensor::kIdleReads reads
  uint64_t unmatched = 0;    // room was short: a cgroup no workload covers
  uint64_t best_effort = 0;  // room was short: a best-effort workload's cgroup
  uint64_t total() const { return gone + idle + unmatched + best_effort; }
  Evictions& operator+=(const Evictions& o) {
    gone += o.gone;
    idle += o.idle;
    unmatched += o.unmatched;
    best_effort += o.best_effort;
    return *this;
  }
};

struct SchedDelta {
  std::vector<CgroupSched> cgroups;  // only cgroups with activity since the previous read
  uint64_t map_full = 0;             // events dropped because the per-cgroup map was full
  uint64_t stamp_full = 0;           // wakeups not stamped
  Evictions evicted;                 // entries removed since the previous read (by tend() and this read)
};

// keel's own cost, per attached program, cumulative since attach (needs BPF stats enabled).
struct ProgStats {
  std::string name;
  uint64_t run_time_ns = 0;
  uint64_t run_count = 0;
};

// keel's cost over the last interval (between two reads) during which BPF stats were on.
struct BpfCost {
  double ns_per_event = 0;                                                // mean run time of keel's programs
  double events_per_s = 0;                                                // program runs per second
  double cpu_share() const { return ns_per_event * events_per_s / 1e9; }  // of one CPU
};

// BPF run-time stats time every BPF program on the host while on (a clock read before and after
// each run), so keel holds them only for one read interval in `stats_every` by default: the second
// interval after open, then every `stats_every`-th.
enum class BpfStats { off, sampled, always };

// A perf event (perf_event_attr type/config), opened on every CPU and read at every switch.
struct PerfCounter {
  uint32_t type = 0;
  uint64_t config = 0;
  const char* name = "";
};
// Cache misses, cache references, instructions and cycles: what MPKI and IPC are made of.
std::vector<PerfCounter> hardware_counters();

struct SchedConfig {
  CgroupHierarchy hierarchy;         // whose cgroup ids key the statistics (v1 controller or v2)
  std::vector<uint16_t> llc_of_cpu;  // by OS CPU number, from the host topology
  std::vector<uint16_t> node_of_cpu;
  AttachChoice attach = AttachChoice::automatic;
  uint32_t max_cgroups = 4096;  // entries of the per-cgroup map
  // Hot slots (bpf/sched_shared.h, tp_btf only): the busiest cgroups, critical ones first, have their
  // waits counted through a slot each task caches, not a hash lookup per wait. 0: none.
  uint32_t hot_slots = 1024;
  BpfStats stats = BpfStats::sampled;
  unsigned stats_every = 10;  // sampled: stats on for one read interval in this many
  // Up to KEEL_MAX_COUNTERS perf events, each read at every switch and charged to the task switched
  // out: hardware_counters() with a PMU; software events (clock, faults) in tests.
  std::vector<PerfCounter> counters;
  // The map read a chunk of entries per call (Linux 5.6); false: key by key, as on older kernels.
  bool batch_reads = true;
};

// A critical cgroup whose run-queue SLO the programs watch (bpf/sched_shared.h, keel_slo_watch).
struct SloWatch {
  CgroupId id;
  uint64_t slo_ns = 0;
  uint32_t threshold = 0;  // waits over the SLO in one window that wake keel
  uint64_t window_ns = 0;
  uint32_t long_us = 0;  // a wait counts once more for each long_us it lasted (0: once)
  bool operator==(const SloWatch&) const = default;
};

// One crossing: `over` waits of the cgroup were longer than its SLO within a window (long ones counted
// once more per SloWatch::long_us).
struct SloEvent {
  CgroupId id;
  uint64_t at_ns = 0;  // CLOCK_MONOTONIC (std::chrono::steady_clock)
  uint64_t wait_ns = 0;
  uint64_t over = 0;
};

class SchedSensor {
 public:
  static Result<SchedSensor> open(const SchedConfig& cfg);

  // The cgroups to watch (the first KEEL_SLO_WATCH_MAX): entries not listed go, changed ones start a
  // new window. Watching nothing turns the check off in the programs (one lookup per switch saved).
  Result<void> watch(const std::vector<SloWatch>& w);
  // Readable (epoll) when a crossing was sent; -1 without the ring buffer.
  int events_fd() const;
  // The crossings sent since the previous call.
  std::vector<SloEvent> take_events();

  AttachKind kind() const { return kind_; }
  // Everything counted since the previous read (the first: since attach). Counters in the kernel
  // only grow, so a count is never lost or seen twice.
  Result<SchedDelta> read();
  // A cgroup whose counts did not grow for this many reads has its entry dropped from the map (its
  // next event makes a new one, counted from 0): the map's room goes to cgroups that are active. A
  // critical one (tend()) keeps its entry.
  static constexpr unsigned kIdleReads = 64;
  // Keeps room in the per-cgroup map, once after each read (the programs never look further than
  // their own cgroup's entry): drops the entries of gone cgroups; while more than high_water() would
  // be in use, drops the entries of other cgroups by `worth` (the longest idle first of each); and
  // inserts an entry for each of `critical` that has none, so those are counted even when new
  // cgroups fill the map. An entry dropped loses only what was counted since the read; one made again
  // counts from 0. The next read reports what went (SchedDelta::evicted).
  void tend(const std::function<Worth(CgroupId)>& worth, const std::vector<CgroupId>& critical);
  size_t entries() const { return last_.size(); }
  size_t capacity() const { return capacity_; }  // entries the per-cgroup map holds
  // tend() keeps this many in use at most, leaving the rest for cgroups new since the read.
  size_t high_water() const { return capacity_ - capacity_ / 8; }
  bool holds(CgroupId id) const { return last_.contains(id); }  // has an entry (as of the latest read)
  // Hot slots: how many there are, how many are given out, and whether `id` has one. After each read
  // the cgroups that waited and have none get the free ones (critical first, then best-effort, then
  // those no workload covers, as tend() last saw them; each by the most waits); a slot goes back with
  // its cgroup's entry.
  size_t hot_capacity() const { return hot_cap_; }
  size_t hot_in_use() const { return hot_cap_ - hot_free_.size(); }
  bool is_hot(CgroupId id) const {
    auto it = last_.find(id);
    return it != last_.end() && it->second.hot >= 0;
  }
  // Run time and count of each attached program, cumulative (grows only while stats are on).
  std::vector<ProgStats> prog_stats() const;
  bool stats_enabled() const { return stats_fd_.valid(); }
  // keel's cost over the latest read interval that had BPF stats on throughout; none before one.
  std::optional<BpfCost> cost() const { return cost_; }

 private:
  static Result<SchedSensor> open_programs(const SchedConfig& cfg);
  SchedSensor(Skeleton<keel_sched> skel, AttachKind kind, const SchedConfig& cfg)
      : skel_(std::move(skel)),
        kind_(kind),
        hierarchy_(cfg.hierarchy.id),
        stats_(cfg.stats),
        stats_every_(std::max(1u, cfg.stats_every)),
        capacity_(cfg.max_cgroups),
        batch_(cfg.batch_reads),
        hot_cap_(kind == AttachKind::tp_btf ? cfg.hot_slots : 0) {
    for (uint32_t i = hot_cap_; i > 0; --i) hot_free_.push_back(i - 1);  // slot 0 first
  }
  void update_stats();
  void for_each_entry(int fd, const std::function<void(const keel_cg_key&, const keel_cg_stats&)>& f);
  Skeleton<keel_sched> skel_;
  AttachKind kind_ = AttachKind::tp_btf;
  uint32_t hierarchy_ = 0;
  // A cgroup's cumulative counts at the previous read, its histogram kept sparse (most buckets stay 0),
  // and how many reads since they last grew.
  struct Last {
    std::vector<std::pair<uint16_t, uint64_t>> buckets;  // the non-zero ones
    uint64_t sum_ns = 0, migrations = 0, cross_llc = 0, cross_numa = 0;
    std::array<uint64_t, KEEL_MAX_COUNTERS> counters{};
    unsigned idle_reads = 0;
    bool fresh = true;  // first seen at the latest read: its cgroup may be newer than sensing's view
    int32_t hot = -1;   // its hot slot; -1: none
    uint8_t rank = 1;   // who gets a free hot slot first: 3 critical, 2 best-effort, 1 other (tend())
  };
  struct IdHash {
    size_t operator()(const CgroupId& id) const {
      return std::hash<uint64_t>{}(id.inode * 1000003u + id.hierarchy);
    }
  };
  std::unordered_map<CgroupId, Last, IdHash> last_;
  // Gives `id` a free hot slot (zeroed, keyed, then published); false when none is free or a write fails.
  bool give_hot(const CgroupId& id, Last& l);
  // Takes `l`'s slot back (unpublished, then zeroed): what it counted since the read goes with it.
  void release_hot(const CgroupId& id, Last& l);
  // The pieces of read(): idle entries deleted, free hot slots handed out.
  void drop_idle(const std::vector<keel_cg_key>& idle);
  void hand_out_hot(const SchedDelta& out);
  size_t last_out_ = 16;  // how many cgroups the previous read returned
  std::vector<keel_cg_key> batch_keys_;
  std::vector<keel_cg_stats> batch_vals_;
  uint64_t last_map_full_ = 0, last_stamp_full_ = 0;
  Evictions evicted_;                              // since the previous read
  std::unordered_set<CgroupId, IdHash> critical_;  // entries tend() keeps (and read() does not drop idle)
  BpfStats stats_ = BpfStats::sampled;
  unsigned stats_every_ = 10;
  size_t capacity_ = 0;
  uint64_t reads_ = 0;
  bool batch_ = true;  // batch map lookups (until one fails as unknown to the kernel)
  uint32_t hot_cap_ = 0;
  std::vector<uint32_t> hot_free_;  // free hot slots, the next one to give at the back
  Fd stats_fd_;                     // bpf_enable_stats(): stats stay on only while this fd is open
  // Totals and time when stats were turned on (or at the previous read while they stayed on).
  uint64_t win_run_ns_ = 0, win_runs_ = 0;
  std::chrono::steady_clock::time_point win_start_{};
  std::optional<BpfCost> cost_;
  std::vector<Fd> counter_fds_;  // one perf event per (CPU, counter), closed with the sensor
  struct Ring;                   // the SLO events' ring buffer, at a stable address for its callback
  std::shared_ptr<Ring> ring_;
  std::vector<SloWatch> watched_;
};

// Raises the soft limit on open files to the hard one (each perf event, and each cgroup directory the
// inventory holds, is a descriptor); returns the soft limit then. Every command that opens the sensor
// does, through open_counting().
uint64_t raise_open_files_limit();
// Descriptors kept for keel besides the perf events: the BPF objects', the inventory's cgroup
// directories (it re-lists those it cannot hold), the metrics endpoint's, the journal's.
constexpr uint64_t kOtherFiles = 1024;

// The sensor as keel's commands open it: CPU-to-LLC/NUMA tables from `topo`, and the four
// hardware_counters() where there is a PMU. Without one (or when the PMU lacks one of the events)
// it opens without counters: cache signals are then unavailable, never 0; `counters_note` says which.
struct HostSensor {
  SchedSensor sensor;
  bool pmu = false;
  std::string counters_note;  // "hardware counters" or "n/a (why)"
};
Result<HostSensor> open_host_sensor(const CgroupHierarchy& hierarchy, const Topology& topo,
                                    BpfStats stats = BpfStats::sampled);
// The same from `sc`, whose counters are those wanted (`counted` names them in the note): the
// open-files limit raised first, and the counters left out, with the note saying what they need and
// what the limit is, where one perf event per counter and CPU would not leave kOtherFiles; also when
// one of them cannot be opened.
Result<HostSensor> open_counting(SchedConfig sc, std::string counted = "hardware counters");

}  // namespace keel::bpf
