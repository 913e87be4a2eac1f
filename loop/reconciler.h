// Makes the host match a Plan: each managed instance's desired knobs (cpusets, CPU weight, resctrl
// ways and bandwidth, steal_task; with actuators.irq_affinity, the named IRQs kept off the CPUs
// critical instances hold) are written through the session's KnobWriter and the inventory's held
// cgroups, so every first change is journaled, observe mode writes nothing, and a cgroup made again
// under the same name is never written for the old one. A knob keel changed that the plan no longer
// sets goes back to the value keel found (give-back), so best-effort work regains what it lent; the
// values found are kept by cgroup id, so a new cgroup's are read afresh. Only the differences are
// written; a refused write is an error with path, value and reason, and the rest of the tick applies.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "actuators/cgroup_knobs.h"
#include "actuators/resctrl.h"
#include "actuators/unmanaged.h"
#include "actuators/writer.h"
#include "config/spec.h"
#include "controller/controller.h"
#include "controller/snapshot.h"
#include "host/cgroup.h"
#include "host/topology.h"
#include "inventory/inventory.h"
#include "loop/questions.h"

namespace keel::loop {

struct Reconciled {
  std::vector<act::Change> changes;       // made this tick (observe: would be made)
  std::vector<std::string> errors;        // writes the kernel or the validation refused
  std::vector<std::string> notes;         // knobs keel cannot act on here, each said once
  std::vector<CgroupId> touched;          // cgroups (of the inventory) whose cpuset or weight was written
  std::vector<CgroupId> unheld;           // cgroups whose held directories a read failed through (to drop)
  std::vector<act::Drift> drifts;         // knobs another manager changed after keel: given up, locked out
  std::vector<act::Reapplied> reapplied;  // knobs systemd realised again from its unit: written again
};

class Reconciler {
 public:
  static constexpr uint64_t kPruneTicks = 64;  // what gone cgroups left is dropped this often
  Reconciler(config::Spec spec, Topology topo, act::KnobWriter& w);
  // `inv` is this tick's inventory, the one the plan's snapshot was sensed from: the instances and their
  // cgroups the plan's knobs go to.
  Reconciled apply(const ctl::Plan& plan, const inv::Inventory& inv);
  // A keel that handed over changed these knobs: at the next apply, each managed cgroup's knobs the
  // journal holds count as found with the journal's original (not what is there now, which that keel
  // set), so a give-back writes the original.
  void adopt() { adopting_ = true; }
  // A reloaded config: the values found stay (knobs of instances the new config no longer has go back
  // to them at the next apply, like those of instances that went away).
  void respec(config::Spec spec) { spec_ = std::move(spec); }
  // Waits for the questions to systemd in flight (tests: their answers are said at the next apply).
  void settle() { questions_.drain(); }

 private:
  void cpus(const ctl::Plan& plan, const inv::Inventory& inv, Reconciled& out);
  struct CpusetBatch;  // the pieces of cpus()
  bool beside_kubelet(const inv::Instance& ins, const inv::Node& n, const KubeletCpus& kube,
                      std::optional<CpuSet>& want, Reconciled& out);
  void cpuset_of(const inv::Instance& ins, const inv::Node& n, const std::optional<CpuSet>& want,
                 const inv::Inventory& inv, const CgroupHierarchy& cs, CpusetBatch& b, Reconciled& out);
  void write_cpusets(const inv::Inventory& inv, const CgroupHierarchy& cs, CpusetBatch& b, Reconciled& out);
  void weights(const ctl::Plan& plan, const inv::Inventory& inv, Reconciled& out);
  // One cgroup's weight: `shares` where wanted (what it had kept first), else back to what it had.
  void weigh(const inv::Instance& ins, const inv::Node& n, const CgroupDir& dir, const CgroupHierarchy& cpu,
             bool want, uint64_t shares, const inv::Inventory& inv, Reconciled& out);
  std::string no_weight(const inv::Instance& ins, const inv::Node& n, const CgroupHierarchy& cpu,
                        std::string_view file);  // the note for a cgroup without a weight file
  // Cgroups into and out of the preemption class (before weights: the kernel refuses a weight in it).
  void classes(const ctl::Plan& plan, const inv::Inventory& inv, Reconciled& out);
  void resctrl(const ctl::Plan& plan, const inv::Inventory& inv, Reconciled& out);
  void steal(const ctl::Plan& plan, Reconciled& out);
  void irqs(const ctl::Plan& plan, Reconciled& out);
  // actuators.isolate_unmanaged: top-level cgroups no workload is in (and the root's processes, with
  // isolate_root_tasks) kept off the CPUs critical instances hold; given back when none holds any.
  void unmanaged(const ctl::Plan& plan, const inv::Inventory& inv, Reconciled& out);
  struct FoundUnmanaged;
  void isolate(const act::UnmanagedGroup& g, const CgroupHierarchy& cs, const CpuSet& held, Reconciled& out);
  void give_back_unmanaged(const inv::Inventory& inv, const CgroupHierarchy& cs, Reconciled& out);
  // Cpusets of unmanaged cgroups keel wrote back to the text found ("" on v2: not set, or every CPU
  // where the kernel refuses that); one another writer changed since is left as it is. Each given back
  // (or left) has its `wrote` reset; false when a write failed (that one is tried again next tick).
  bool give_back_cpusets(const CgroupHierarchy& cs,
                         const std::vector<std::pair<const CgroupDir*, FoundUnmanaged*>>& back,
                         Reconciled& out);
  void root_tasks(const act::UnmanagedSurvey& survey, const CgroupHierarchy& cs, const CpuSet& held,
                  Reconciled& out);
  void note(Reconciled& out, const std::string& n);
  // On cgroup v2 a cgroup has a controller's files only when its parent's cgroup.subtree_control enables
  // it: why `n` has none of `controller`'s, for a note ("" when that is not why). A systemd unit's
  // parent is systemd's (it rewrites subtree_control whenever it realises the slice): keel asks systemd
  // for the unit property that makes it enable the controller (host/systemd.h: CPUWeight=100,
  // StartupAllowedCPUs=<every CPU>), once per cgroup and controller, journaled and given back like every
  // knob; the question is asked off the tick thread and its answer said at a later tick, and the files
  // come at a later one still. Elsewhere the note names the parent to enable it in.
  std::string missing_controller(const inv::Node& n, const CgroupHierarchy& h, std::string_view controller);
  std::map<std::pair<CgroupId, UnitProperty>, std::string> asked_;  // systemd asked: what it answered
  Questions questions_;                                             // those being asked, off the tick thread
  void spare(Reconciled& out, const inv::Instance& ins, const inv::Node& n);  // says a host daemon is spared
  void adopt_journaled(const inv::Inventory& inv, Reconciled& out);
  bool adopting_ = false;
  config::Spec spec_;
  Topology topo_;
  act::KnobWriter* w_;
  // A value as keel found it, by the id of the cgroup it was found in (and that cgroup's path, to give
  // it back once its instance is gone: only if the cgroup there still has that id).
  struct Found {
    std::string path;
    std::string value;
    // What keel set there last (it is not written again while it is, except to check every few ticks
    // that no one else changed it), and when.
    std::optional<CpuSet> cpus;
    std::optional<uint64_t> shares;
    uint64_t set_tick = 0;
  };
  std::map<CgroupId, Found> found_cpus_;    // cpuset cgroup -> cpuset.cpus as found
  std::map<CgroupId, Found> found_weight_;  // cgroup -> cpu.shares / cpu.weight as found
  // Cgroups keel put in the preemption class: how, and the weight before (written back when the
  // kernel resets it on leaving cpu.idle).
  struct Classed {
    std::string path;
    act::PreemptClass how = act::PreemptClass::cpu_idle;
    std::string weight_before;
    uint64_t seen = 0;  // the classes() pass that saw it last
  };
  std::map<CgroupId, Classed> classed_;
  size_t min_weight_classed_ = 0;  // of classed_, those the minimum weight stands for
  uint64_t class_pass_ = 0;
  void enter_class(const inv::Instance& ins, const inv::Node& n, const CgroupDir& dir,
                   const CgroupHierarchy& cpu, uint64_t stamp, Reconciled& out);
  bool leave_class(const CgroupDir& dir, const Classed& c, Reconciled& out, const std::string& who);
  KubeletState kubelet_;  // kubelet's static CPU manager: its CPUs and its pods' cpusets are not keel's
  std::optional<act::Resctrl> resctrl_;
  bool resctrl_opened_ = false;
  std::map<std::string, std::string> groups_;   // instance -> keel's resctrl group
  std::map<unsigned, std::string> found_irqs_;  // IRQ -> smp_affinity_list as found
  // An unmanaged cpuset cgroup: cpuset.cpus as found (text; "" on v2: not set), the CPUs it had then
  // (its effective ones when not set), and what keel wrote there last (none: never written).
  struct FoundUnmanaged {
    std::string path;
    std::string value;
    CpuSet as_found;
    std::optional<CpuSet> wrote;
  };
  std::map<CgroupId, FoundUnmanaged> found_unmanaged_;
  std::vector<std::string> unmanaged_managed_;  // the managed cpuset cgroups the last survey knew
  CpuSet unmanaged_held_;                       // the CPUs the last survey kept unmanaged work off
  uint64_t unmanaged_tick_ = 0;                 // and its tick
  bool root_group_ = false;                     // keel made act::kRootTasksGroup and moved processes in
  std::map<pid_t, std::string> refused_;        // root processes the kernel refused to move, and why
  bool steal_ = false;
  bool steal_probed_ = false, steal_found_on_ = false;
  std::vector<std::string> said_;
};

}  // namespace keel::loop
