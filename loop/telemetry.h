// keel run's tick in the metrics' plain terms: the Snapshot and the sensor's raw counts, the plan
// and what the reconciler did, keel's own cost. The metrics library knows none of these types; this
// translation is pure (tested on plain data), the reads it needs are in sensor_view() and process_usage().
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "config/spec.h"
#include "controller/controller.h"
#include "controller/snapshot.h"
#include "host/sys_roots.h"
#include "loop/reconciler.h"
#include "loop/sensing.h"
#include "metrics/metrics.h"

namespace keel::loop {

// What the sensor adds to a Snapshot for the metrics (the counts by reference: the latest sample's),
// and each instance's record at its index in the Snapshot (Sensing::records()).
struct SensorView {
  const SensedCounts& counts;
  bool pmu = false;
  std::vector<bpf::ProgStats> programs;
  std::optional<bpf::BpfCost> cost;
  std::span<const InstanceRecord> records;
};
SensorView sensor_view(const Sensing& sensing);

// keel's own CPU time (user + system, seconds) and resident memory (bytes), from proc/self; none when
// the files cannot be read or parsed.
struct ProcessUsage {
  double cpu_seconds = 0;
  double rss_bytes = 0;
};
std::optional<ProcessUsage> process_usage(const SysRoots& roots);

// The exporter's fixed part: mode, version, the sensor's latency buckets, what is available here.
metrics::Setup metrics_setup(const config::Spec& spec, bool observe, bool pmu, std::string version);

struct TickMeta {
  bool observe = false;
  double tick_seconds = 0;
  double unix_time = 0;
  std::optional<ProcessUsage> process;
};

// Knob values are what is in effect: cpus and shares as sensed; L3 ways, bandwidth and steal_task as
// keel set them (enforce mode only: in observe mode keel set nothing and does not read them).
metrics::TickReport tick_report(const config::Spec& spec, const ctl::Snapshot& snap, const SensorView& sensor,
                                const ctl::Plan& plan, const Reconciled& done, const TickMeta& meta);
// The same into `t`, whose storage is reused (what keel run does every tick). With `cap`, instances
// past the metrics' label cap are folded into "other" here (counted in t.folded) instead of each
// getting a report the metrics would fold.
void tick_report(const config::Spec& spec, const ctl::Snapshot& snap, const SensorView& sensor,
                 const ctl::Plan& plan, const Reconciled& done, const TickMeta& meta, metrics::TickReport& t,
                 metrics::LabelCap* cap = nullptr);

}  // namespace keel::loop
