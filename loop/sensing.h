// One tick's Snapshot from the host: the inventory refreshed (which cgroups there are and the
// instance each belongs to), the sensor's per-cgroup counts since the last tick, and cgroupfs (CPU
// usage every tick, throttling where a quota is set, the cpuset and the weight every few ticks and
// right after keel changed them), summed per workload instance. keel run, keel plan and keel top are
// its clients; the controller decides from what it builds and `keel run --record` writes it.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bpf/sched_sensor.h"
#include "config/spec.h"
#include "controller/controller.h"
#include "controller/snapshot.h"
#include "host/error.h"
#include "host/sys_roots.h"
#include "host/topology.h"
#include "inventory/inventory.h"
#include "loop/sensor.h"

namespace keel::loop {

// One tick's raw counts for the metrics: per workload instance whose tasks did anything (an instance
// missing here counted nothing), for the cgroups no workload matches (folded into one), and what the
// sensor could not record.
struct SensedCounts {
  struct Counts {
    bpf::RqHistogram rq;
    uint64_t migrations = 0, cross_llc = 0, cross_numa = 0;
    std::array<uint64_t, KEEL_MAX_COUNTERS> counters{};  // bpf::Counter order
  };
  std::map<std::string, Counts> instances;
  Counts other;
  uint64_t map_full = 0, stamp_full = 0;  // events dropped this tick
  bpf::Evictions evicted;                 // entries the sensor's map lost since the last tick
  size_t map_entries = 0, map_capacity = 0;
};

// One instance of the latest sample, at the index of its signals in the Snapshot: the inventory's
// instance (its cgroups), the sensor's counts (none when its tasks did nothing) and its spec. What the
// loop, telemetry and keel top use instead of looking names up; valid until the next sample.
struct InstanceRecord {
  const inv::Instance* instance = nullptr;
  const SensedCounts::Counts* counts = nullptr;
  const config::WorkloadSpec* spec = nullptr;
};

class Sensing {
 public:
  // The inventory of the hierarchy that defines `spec`'s workloads and `sensor` on it; cgroupfs
  // counters start now, like the sensor's.
  static Result<Sensing> open(config::Spec spec, const SysRoots& roots, const Topology& topo,
                              std::unique_ptr<Sensor> sensor, inv::Inventory::Options options = {});
  // The same with keel's BPF sensor (root), the open-files limit raised first.
  static Result<Sensing> open(config::Spec spec, const SysRoots& roots, const Topology& topo,
                              bpf::BpfStats stats);
  Sensing(Sensing&&) noexcept;
  Sensing& operator=(Sensing&&) noexcept;
  ~Sensing();

  // The signals since the previous call (or since open), per configured workload instance, in name
  // order. A failure (the hierarchy or the sensor unreadable) leaves the counts for the next call.
  Result<ctl::Snapshot> sample(uint64_t tick);
  // The same into `snap`, whose storage is reused (what keel run does every tick).
  Result<void> sample(uint64_t tick, ctl::Snapshot& snap);
  // These cgroups' cpuset and weight are read again at the next sample (keel just changed them); the
  // `unheld` ones' directories held for writing are dropped (a read through them failed).
  void touched(const std::vector<CgroupId>& cgroups, const std::vector<CgroupId>& unheld = {});
  // Early wake-ups (daemon.early_ticks): each sample keeps the sensor watching the cgroups of the
  // critical instances with an SLO, for kEarlyOver waits over it within kEarlyWindow, a wait counted
  // once more for each kEarlyLong (or SLO, if longer) it lasted: a victim starved to waits of tens of
  // milliseconds wakes too seldom to wait over its SLO 5 times in 100 ms. events_fd() is readable when
  // one crossed (-1: never); take_events() drains them.
  static constexpr uint32_t kEarlyOver = 5;
  static constexpr std::chrono::milliseconds kEarlyWindow{100};
  static constexpr std::chrono::milliseconds kEarlyLong{5};
  int events_fd() const;
  std::vector<bpf::SloEvent> take_events();
  // The demand watch, between ticks: reads the CPU use of the `watch` instances since the previous
  // call and returns those whose use has stayed under their cpu_below for `lull` or longer with no SLO
  // crossing (take_events) of theirs in it (each once per lull), or reached their cpu_above (once per
  // rise). The next sample reports each one's lull so
  // far and its latest CPU use (ctl::WorkloadSignals::lull_s, watch_cpu); instances no longer watched
  // are forgotten.
  struct DemandWake {
    std::string instance;
    bool rose = false;  // its CPU use reached cpu_above (else: a lull)
    double cpus = 0;    // CPUs busy over the latest read
  };
  std::vector<DemandWake> watch_demand(const std::vector<ctl::DemandWatch>& watch,
                                       std::chrono::duration<double> lull);

  const SensedCounts& counts() const;                  // of the latest sample
  const std::vector<InstanceRecord>& records() const;  // of the latest sample, by the Snapshot's index
  inv::Inventory& inventory();
  const inv::Inventory& inventory() const;
  const Sensor& sensor() const;
  const config::Spec& spec() const;

 private:
  struct State;
  explicit Sensing(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

}  // namespace keel::loop
