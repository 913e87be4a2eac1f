// keel run's loop: every period, sense (loop/sensing.h) -> decide (controller/controller.h) -> act
// (loop/reconciler.h) -> publish (the decision log, metrics) -> record (--record), owned by one class;
// between ticks it sleeps in Events until the next tick is due or a stop signal comes. run() is the
// daemon from its first step (the metrics port, the session that restores a crashed run's journal)
// to its last (every knob given back); cli/ only parses the command line and calls it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "actuators/writer.h"
#include "bpf/sched_sensor.h"
#include "config/config.h"
#include "config/spec.h"
#include "controller/controller.h"
#include "host/sys_roots.h"
#include "host/topology.h"
#include "loop/events.h"
#include "loop/notify.h"
#include "loop/reconciler.h"
#include "loop/sensing.h"
#include "metrics/metrics.h"

namespace keel::loop {

// keel run's flags (the config file has the rest).
struct RunOptions {
  bool observe = false;               // --observe: decide and log, write nothing (also mode = "observe")
  bool once = false;                  // stop after one tick
  bool verbose = false;               // a status line every tick
  std::optional<std::string> record;  // --record TRACE
  std::optional<std::filesystem::path> state;  // --state DIR (else daemon.state_dir)
  bpf::BpfStats stats = bpf::BpfStats::sampled;
  std::optional<std::string> metrics_listen;  // --metrics-listen, checked already ("off": none)
  std::string version;
};

// The daemon: returns the process's exit code (0, or 1 on a runtime failure or a knob that could not
// be given back). Logs on stderr.
int run(config::Config cfg, const RunOptions& options, const SysRoots& roots);

// Turns off the mechanisms the config enables that this host lacks (resctrl not mounted, no STEAL
// sched feature), each with a line to `log`: the controller's ladder then skips them.
void drop_missing(config::Config& cfg, const SysRoots& roots,
                  const std::function<void(const std::string&)>& log);

// Raises the soft limit on open files to the hard one: the inventory holds a directory per cgroup.
void raise_open_files_limit();

// A tick's status line: each critical instance's p99, slack and rung (else the five busiest waiters),
// names whole however long.
std::string status_line(const ctl::Plan& plan, const ctl::Snapshot& snap);

// One running loop, its parts built by run().
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
  };
  explicit Loop(Parts parts);
  // At most one early tick (daemon.early_ticks: a critical cgroup's waits crossed its SLO) per this.
  static constexpr std::chrono::milliseconds kEarlyGap{100};
  // Ticks every period, and early when the sensing's SLO watch wakes it, until a stop signal (or
  // after one tick with `once`).
  void run(Events& events, bool once);
  // One tick: sense -> decide -> act -> publish -> record.
  void tick(uint64_t n);

 private:
  void log_early(uint64_t n, const bpf::SloEvent& e);
  void keep_off_critical_cpus(const ctl::Plan& plan, const ctl::Snapshot& snap);
  CpuSet started_cpus_, own_cpus_;  // where keel's loop thread was started, and may run now
  Parts p_;
  ctl::Controller controller_;
  Reconciler reconciler_;
  ctl::Snapshot snap_;                    // this tick's, its storage kept from tick to tick
  metrics::TickReport report_;            // likewise
  metrics::LabelCap labels_;              // which instances' reports are folded before publishing
  std::map<std::string, bool> violated_;  // per critical instance, for status lines when it turns
  std::set<std::string> gaps_said_;       // class_gaps lines logged already
};

}  // namespace keel::loop
