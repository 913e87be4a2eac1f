// Where sensing reads the kernel's per-cgroup scheduling counts from: keel's BPF programs
// (bpf/sched_sensor.h) in keel, a fake in tests (sensing then runs without root or BPF).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bpf/sched_sensor.h"
#include "host/cgroup.h"
#include "host/error.h"
#include "host/topology.h"

namespace keel::loop {

class Sensor {
 public:
  virtual ~Sensor() = default;
  // Everything counted since the previous read (the first: since the sensor started).
  virtual Result<bpf::SchedDelta> read() = 0;
  // Once after each read: keeps room for the cgroups that matter (bpf::SchedSensor::tend).
  virtual void tend(const std::function<bpf::Worth(CgroupId)>& worth,
                    const std::vector<CgroupId>& critical) = 0;
  virtual size_t entries() const = 0;   // cgroups it keeps counts of
  virtual size_t capacity() const = 0;  // how many it can
  virtual std::vector<bpf::ProgStats> prog_stats() const = 0;
  virtual std::optional<bpf::BpfCost> cost() const = 0;
  virtual bpf::AttachKind attach() const = 0;
  virtual bool pmu() const = 0;                   // hardware counters are counted
  virtual std::string counters_note() const = 0;  // "hardware counters" or "n/a (why)"
  // The SLO watch (bpf::SchedSensor::watch): sensors without it never wake keel early.
  virtual Result<void> watch(const std::vector<bpf::SloWatch>&) { return {}; }
  virtual int events_fd() const { return -1; }
  virtual std::vector<bpf::SloEvent> take_events() { return {}; }
  // The clock its reads and events are on (CLOCK_MONOTONIC, as the BPF programs' bpf_ktime_get_ns), which
  // sensing times its samples and the demand watch's lulls by; a test's sensor sets its own.
  virtual std::chrono::steady_clock::time_point now() const { return std::chrono::steady_clock::now(); }
};

// keel's BPF programs on `hierarchy` (root): CPU-to-LLC/NUMA tables from `topo`, hardware counters
// where there is a PMU.
Result<std::unique_ptr<Sensor>> open_bpf_sensor(const CgroupHierarchy& hierarchy, const Topology& topo,
                                                bpf::BpfStats stats);

}  // namespace keel::loop
