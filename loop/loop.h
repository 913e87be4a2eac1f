// keel run's loop: every period, sense (loop/sensing.h) -> decide (controller/controller.h) -> act
// (loop/reconciler.h) -> publish (the decision log, metrics) -> record (--record), owned by one class;
// between ticks it sleeps in Events until the next tick is due or a stop signal comes. The daemon around
// it (start, reload, stop) is loop/daemon.h.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "actuators/writer.h"
#include "bpf/sched_sensor.h"
#include "config/config.h"
#include "config/spec.h"
#include "controller/controller.h"
#include "host/log.h"
#include "host/sys_roots.h"
#include "host/topology.h"
#include "loop/events.h"
#include "loop/notify.h"
#include "loop/reconciler.h"
#include "loop/sensing.h"
#include "metrics/metrics.h"

namespace keel::loop {

// keel's desired knob values per instance as text (JSON) for a handover, and back. Instance names are
// kept byte for byte where they are valid UTF-8 (others do not come back: those instances start as
// found). Bad text is an error, never a partial map.
std::string format_desired(const std::map<std::string, ctl::KnobState>& desired);
Result<std::map<std::string, ctl::KnobState>> parse_desired(std::string_view text);

// A tick's status line: each critical instance's p99, slack and rung (else the five busiest waiters),
// names whole however long.
std::string status_line(const ctl::Plan& plan, const ctl::Snapshot& snap);

// One running loop, its parts built by the daemon (loop/daemon.h).
class Loop {
 public:
  struct Parts {
    config::Spec spec;
    bool observe = false;
    bool verbose = false;
    Topology topo;
    Sensing* sensing = nullptr;
    act::KnobWriter* writer = nullptr;
    metrics::Metrics* metrics = nullptr;
    std::ofstream* record = nullptr;  // open: each tick's snapshot is written to it
    SysRoots roots;
    const Notifier* notifier = nullptr;  // WATCHDOG=1 to systemd, at its interval, while the loop lives
    metrics::Health* health = nullptr;   // each tick reported, for /healthz and /readyz
  };
  explicit Loop(Parts parts);
  enum class Exit { stop, reload };
  // At most one early tick (daemon.early_ticks: a critical cgroup's waits crossed its SLO) per this.
  static constexpr std::chrono::milliseconds kEarlyGap{100};
  // SLO crossings that keep coming while the controller finds nothing to do (a run-queue p99 within its
  // SLO can still have a few waits over it every 100 ms): after this many early ticks for crossings in
  // a row that changed nothing while every critical p99 met its SLO, crossings wake no tick until the
  // next periodic one. Each early tick
  // starts a new sample window; without this no window would be half a period long, and evidence that
  // needs one (a critical workload's demand for whole cores) would never come.
  static constexpr unsigned kIdleEarlyTicks = 2;
  // The demand watch (with early ticks): while the controller holds steps for critical instances, their
  // CPU use is read this often between ticks; a lull of Policy::lull_s wakes an early tick.
  static constexpr std::chrono::milliseconds kWatchEvery{100};
  // While one's steps are parked, this often: its rise to Policy::demand_pin_cpus wakes an early tick,
  // and until then its next busy spell runs with the class alone.
  static constexpr std::chrono::milliseconds kRiseWatchEvery{25};
  // Ticks every period, and early when the sensing's SLO watch wakes it, until a stop signal (or
  // after one tick with `once`) or a reload signal.
  Exit run(Events& events, bool once);
  // What the controller wants now (for a handover).
  const std::map<std::string, ctl::KnobState>& desired() const { return controller_->desired(); }
  // A handover's desired state and journal taken over: from the next tick.
  void adopt(std::map<std::string, ctl::KnobState> desired);
  // A reloaded config and the sensing built for it: the controller starts anew, holding what the old
  // one wanted for the instances the new config still has; the reconciler keeps the values it found
  // (so knobs of instances no longer managed go back to them). Ticks go on counting.
  void reload(config::Spec spec, Sensing* sensing);
  // One tick: sense -> decide -> act -> publish -> record.
  void tick(uint64_t n);

 private:
  void log_early(uint64_t n, const bpf::SloEvent& e);
  void log_watch(uint64_t n, const Sensing::DemandWake& wake, std::chrono::duration<double> lull) const;
  std::vector<ctl::DemandWatch> watch_;  // after the latest tick: the instances the demand watch reads
  void keep_off_critical_cpus(const ctl::Plan& plan);
  CpuSet started_cpus_, own_cpus_;  // where keel's loop thread was started, and may run now
  Parts p_;
  std::unique_ptr<ctl::Controller> controller_;
  uint64_t n_ = 1;                                             // the next tick's number
  std::optional<std::chrono::steady_clock::time_point> next_;  // when the next periodic tick is due
  Reconciler reconciler_;
  ctl::Snapshot snap_;                    // this tick's, its storage kept from tick to tick
  metrics::TickReport report_;            // likewise
  metrics::LabelCap labels_;              // which instances' reports are folded before publishing
  std::map<std::string, bool> violated_;  // per critical instance, for status lines when it turns
  std::set<std::string> gaps_said_;       // class_gaps lines logged already
  logging::Repeats error_repeats_;        // the reconciler's errors, said less often as they repeat
  bool had_work_ = false;  // the latest tick's plan changed something, or a critical p99 is over its SLO
};

}  // namespace keel::loop
