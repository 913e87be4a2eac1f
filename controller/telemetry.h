// keel run's tick in the metrics' plain terms: the Snapshot and the sensor's raw counts, the plan
// and what the reconciler did, keel's own cost. The metrics library knows none of these types.
#pragma once

#include <optional>
#include <string>

#include "config/config.h"
#include "controller/controller.h"
#include "controller/reconciler.h"
#include "controller/sensing.h"
#include "controller/snapshot.h"
#include "host/sys_roots.h"
#include "metrics/metrics.h"

namespace keel::ctl {

// The exporter's fixed part: mode, version, the sensor's latency buckets, what is available here.
metrics::Setup metrics_setup(const config::Config& cfg, bool observe, const Sensing& sensing, std::string version);

struct TickCost {
  double tick_seconds = 0;
  double unix_time = 0;
};

metrics::TickReport tick_report(const config::Config& cfg, const Snapshot& snap, const Sensing& sensing,
                                const Plan& plan, const Reconciled& done, const SysRoots& roots, TickCost cost);

// keel's own CPU time (user + system, seconds) and resident memory (bytes), from proc/self.
struct ProcessUsage {
  double cpu_seconds = 0;
  double rss_bytes = 0;
};
std::optional<ProcessUsage> process_usage(const SysRoots& roots);

}  // namespace keel::ctl
