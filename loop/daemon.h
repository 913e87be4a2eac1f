// keel run as a daemon (loop/daemon.cpp): start (the metrics port first, then the session that restores
// what a crashed keel left, the sensing, READY=1), serve (the loop's ticks until a signal), reload (the
// config read again on SIGHUP) and stop (every knob given back, or handed over). cli/ only parses the
// command line and calls run().
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "bpf/sched_sensor.h"
#include "config/config.h"
#include "config/spec.h"
#include "host/caps.h"
#include "host/sys_roots.h"
#include "host/topology.h"

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
  std::optional<std::string> health_listen;   // --health-listen, checked already ("off": none)
  std::string version;
  std::string revision, compiler;  // for keel_build_info, as keel --version prints them
  // SIGHUP: the config read again and validated (its errors printed, file:line:col); none keeps the
  // running one. Unset: SIGHUP is ignored with a line saying so.
  std::function<std::optional<config::Config>()> reload;
};

// The daemon: returns the process's exit code (0, or 1 on a runtime failure or a knob that could not
// be given back). Logs on stderr.
int run(config::Config cfg, const RunOptions& options, const SysRoots& roots);

// The config as this host runs it, for keel run (and its reloads), keel plan and keel top: the
// mechanisms it enables that the host lacks (resctrl not mounted, no STEAL sched feature, IRQ affinity
// unwritable) turned off, and with `privs` those keel lacks the privilege for (and BPF run-time stats,
// given `stats`), each with a line to `say`; then compiled for the host's online CPUs. The controller's
// ladder skips what is off.
config::Spec compile_for_host(config::Config& cfg, const SysRoots& roots, const Topology& topo,
                              const std::function<void(const std::string&)>& say,
                              const Privileges* privs = nullptr, bpf::BpfStats* stats = nullptr);

}  // namespace keel::loop
