// Makes the host match a Plan: each managed instance's desired knobs (cpusets, CPU weight, resctrl
// ways and bandwidth, steal_task; with actuators.irq_affinity, the named IRQs kept off the CPUs
// critical instances hold) are written through the session's KnobWriter, so every first change
// is journaled and observe mode writes nothing. A knob keel changed that the plan no longer sets goes
// back to the value keel found (give-back), so best-effort work regains what it lent. Only the
// differences are written; a refused write is an error with path, value and reason, and the rest of
// the tick still applies.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "actuators/resctrl.h"
#include "actuators/writer.h"
#include "config/config.h"
#include "controller/controller.h"
#include "controller/snapshot.h"
#include "host/cgroup.h"
#include "host/topology.h"

namespace keel::ctl {

struct Reconciled {
  std::vector<act::Change> changes;  // made this tick (observe: would be made)
  std::vector<std::string> errors;   // writes the kernel or the validation refused
  std::vector<std::string> notes;    // knobs keel cannot act on here, each said once
};

class Reconciler {
 public:
  Reconciler(config::Config cfg, CgroupLayout layout, CgroupHierarchy defining, Topology topo,
             act::KnobWriter& w);
  Reconciled apply(const Plan& plan, const Snapshot& snap);

 private:
  void cpus(const Plan& plan, const Snapshot& snap, Reconciled& out);
  void weights(const Plan& plan, const Snapshot& snap, Reconciled& out);
  void resctrl(const Plan& plan, const Snapshot& snap, Reconciled& out);
  void steal(const Plan& plan, Reconciled& out);
  void irqs(const Plan& plan, const Snapshot& snap, Reconciled& out);
  void note(Reconciled& out, const std::string& n);
  config::Config cfg_;
  CgroupLayout layout_;
  CgroupHierarchy defining_;
  Topology topo_;
  act::KnobWriter* w_;
  std::map<std::string, std::string> found_cpus_;    // cpuset cgroup -> cpuset.cpus as found
  std::map<std::string, std::string> found_weight_;  // cgroup -> cpu.shares / cpu.weight as found
  std::optional<act::Resctrl> resctrl_;
  bool resctrl_opened_ = false;
  std::map<std::string, std::string> groups_;   // instance -> keel's resctrl group
  std::map<unsigned, std::string> found_irqs_;  // IRQ -> smp_affinity_list as found
  bool steal_ = false;
  bool steal_probed_ = false, steal_found_on_ = false;
  std::vector<std::string> said_;
};

}  // namespace keel::ctl
