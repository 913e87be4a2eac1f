// The controller: per tick, a Snapshot in, a Plan out. Pure and deterministic (no files, no clocks):
// the same config, host and snapshots give the same plans, which is what replay and the plant-model
// tests rely on. The reconciler turns a plan's desired knob values into actuator writes.
//
// Per critical workload: the run-queue p99 (and migrations/s and MPKI where the SLO declares them and
// they are measured) is smoothed (EWMA); slack = (target - value) / target, the smallest over the
// declared targets; a violation is slack below `act_below` for `violate_ticks` ticks. Then one step per tick
// up a ladder, cheap to strong: (1) the victim's CPU weight up, the antagonists' down (not when they are
// all in the preemption class: its own weight beyond the class gains nothing); (2) whole cores for
// the victim (CPU planner), best-effort work off them (only for a victim that keeps `pin_min_cpus` busy
// when its antagonists are in the class; and before any violation while its demand is high on contended
// CPUs, `demand_pin_cpus`); (3) L3 ways to the victim, (4) antagonists' memory
// bandwidth down (when resctrl is enabled); (5) steal_task on (when enabled and the victim spans
// several CPUs of one LLC). After a step: a cooldown; a step that did not raise slack within
// `revert_after` ticks is reverted and its rung locked out for `lockout_ticks`. With slack above
// `give_back_above` for `give_back_ticks` measured ticks (a tick with too few waits is no evidence of
// slack) and the best-effort load eased since the step (else after `probe_ticks`), one rung is given back
// per tick in reverse order; a give-back that brings a violation back while the load stayed is reverted
// and give-back locked out. When the victim's own demand falls (its wake-ups per second and the CPUs it
// keeps busy both under `eased_ratio` of their peak since the first step), everything is given back in
// that tick and parked; its next SLO crossing (the early tick) or high demand re-applies them at once.
// Between ticks the loop watches the CPU use of each instance holding steps or with parked ones
// (demand_watch()); a lull of `lull_s`, or a rise to `demand_pin_cpus`, wakes an early tick, in which
// what the watch read is evidence however short the tick.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "config/spec.h"
#include "controller/snapshot.h"
#include "host/cpuset.h"
#include "host/topology.h"

namespace keel::ctl {

enum class Knob { shares, cpus, l3_ways, mba_percent, steal, preempt_class };
const char* to_string(Knob k);

// What keel wants a workload instance's knobs to be; unset = keel leaves the knob as it found it.
struct KnobState {
  std::optional<uint64_t> shares;
  std::optional<CpuSet> cpus;
  std::optional<unsigned> l3_ways;
  std::optional<unsigned> mba_percent;
  // In the best-effort preemption class (actuators/cgroup_knobs.h); false: as found.
  bool preempt = false;
  bool operator==(const KnobState&) const = default;
};

struct Action {
  uint64_t tick = 0;
  std::string instance;  // "" for host-wide knobs (steal)
  Knob knob = Knob::shares;
  std::string from, to;  // as the kernel would print them ("" = as found)
  enum class Kind { act, give_back, revert } kind = Kind::act;
  std::string reason;  // in numbers: "rq p99 7.3 ms > SLO 5 ms (slack -0.46) for 2 ticks; antagonist batch"
};

// An action's kind as the decision log spells it: "act", "give-back", "revert".
const char* to_string(Action::Kind k);

struct Interference {
  std::string victim, antagonist;
  double score = 0;  // CPUs it keeps busy or queued on the victim's CPUs (CPU time + waiting tasks),
                     // MPKI-weighted with a PMU
};

struct WorkloadView {  // for logs and metrics
  double p99_us = 0;   // smoothed
  double slack = 0;    // (target - p99) / target; critical workloads with an SLO only
  bool violated = false;
  unsigned rung = 0;    // ladder steps in use (0 = nothing applied)
  std::string blocked;  // violated but no step is possible: why (bounds, placement, lockouts)
};

struct Plan {
  uint64_t tick = 0;
  std::vector<Action> actions;  // this tick's changes, in order
  // Every managed instance's knob values after them (kept from tick to tick: the controller's state).
  // An instance in Plan::starvation_lifts is out of the class this tick whatever `preempt` says.
  std::map<std::string, KnobState> desired;
  bool steal = false;                      // steal_task wanted on
  std::vector<Interference> interference;  // victims' antagonists, strongest first
  std::map<std::string, WorkloadView> workloads;
  // Best-effort instances whose class is lifted this tick because they starved.
  std::vector<std::string> starvation_lifts;
  // The CPUs critical instances are given this tick (their desired cpusets): what best-effort work,
  // IRQs, keel's own thread and unmanaged work are kept off.
  CpuSet critical_cpus;
};

// Whether `instance` is to be in the preemption class this tick (desired, and not lifted).
bool in_class(const Plan& p, const std::string& instance);

struct Policy {
  double act_below = 0.05;
  double give_back_above = 0.20;
  unsigned violate_ticks = 2;
  unsigned give_back_ticks = 5;
  unsigned cooldown_ticks = 2;
  unsigned revert_after = 3;
  unsigned lockout_ticks = 30;
  double ewma_alpha = 0.5;  // weight of the newest tick
  // A tick with fewer waits than this is no evidence of latency (a p99 of 5 waits is their maximum:
  // an idle service's timer wake-up behind a hog is not a violation); it counts as an idle tick.
  unsigned min_waits = 20;
  // A tick whose slack is below this (p99 over twice the target) over at least 5 x min_waits waits
  // is a violation at once: a busy service hit hard is not kept waiting for violate_ticks.
  double severe_below = -1.0;
  // A violation with slack at or below this (p99 four times the target or more) over at least
  // 5 x min_waits waits jumps to the rung that suffices: whole cores at once, not weights first.
  double jump_below = -3.0;
  // Give-back on slack needs the best-effort load to have eased since the step (its CPUs busy or queued
  // halved); under unchanged load it is only probed, after this many good ticks.
  unsigned probe_ticks = 30;
  // The victim's demand fell: this tick's wake-ups per second and CPUs busy both under this fraction of
  // their (smoothed) peak since its first step, over a tick at least half a period long. Everything it
  // holds is given back at once and parked until its next SLO crossing.
  double eased_ratio = 0.5;
  // Whole cores only for a victim that keeps at least this many CPUs busy (smoothed) when every antagonist
  // is in the preemption class already.
  double pin_min_cpus = 0.25;
  // A critical workload keeping at least this many CPUs busy over a whole tick, on CPUs where it and the
  // best-effort work beside it want more than there is, gets whole cores while that lasts, before any
  // violation: the class orders the run queue but leaves it sharing cores with the noise (end-to-end
  // p99 up to 1.6x static pinning's while the run-queue SLO held, bench/README.md).
  double demand_pin_cpus = 0.5;
  // A lull the demand watch saw between ticks (its CPUs busy under eased_ratio of the peak) this long is
  // evidence that its demand fell, in a tick of any length, when its wake-ups did not rise.
  double lull_s = 0.2;
};

// An instance whose CPU use the loop reads between ticks: while it holds steps, a lull (CPUs busy under
// `cpu_below`) wakes an early tick, so what it holds goes back within a fraction of a period; while its
// steps are parked, a rise (`cpu_above` or more) does, so they come back as soon as its demand does.
struct DemandWatch {
  std::string instance;
  double cpu_below = 0;
  double cpu_above = std::numeric_limits<double>::infinity();
};

// Where the preemption class cannot help: the class orders a cgroup against its siblings only, so a
// best-effort cgroup in it yields to a critical cgroup only when its parent is an ancestor of the
// critical one (they meet as siblings there, or the critical one is below a sibling). Elsewhere their
// non-idle ancestors meet and weights decide. One line per (best-effort, critical) instance pair.
std::vector<std::string> class_gaps(const Snapshot& s, const Plan& plan);

class Controller {
 public:
  // `spec` compiled for `topo`'s CPUs (config::compile).
  Controller(config::Spec spec, Topology topo, Policy policy = {});
  // The plan stays valid until the next step().
  const Plan& step(const Snapshot& s);
  // What keel wants each instance's knobs to be now (the last plan's), for a handover or a reload.
  const std::map<std::string, KnobState>& desired() const { return plan_.desired; }
  bool steal() const { return steal_; }
  // The instances holding steps with a measured peak (the CPU use under which their demand fell), and
  // those whose steps are parked (the CPU use at which their demand is high again: demand_pin_cpus).
  std::vector<DemandWatch> demand_watch() const;
  // Takes over what another controller (a keel that handed over, or this one before a reload) wanted:
  // at the next step, the instances of `desired` that the snapshot has keep those values, held as one
  // verified step per critical instance (its own state; the first also holds the best-effort ones), so
  // nothing is given back at once and each is given back as the ladder would give back its own step.
  // Every critical instance with an SLO owns such a step (an empty one when only others' knobs
  // protect it); the first holds the best-effort states. Knobs of mechanisms this spec turns off are
  // dropped (the reconciler gives them back). `steal`: steal_task stays on, where this spec allows it.
  void adopt(std::map<std::string, KnobState> desired, bool steal = false);
  const Policy& policy() const { return policy_; }

 private:
  config::Spec spec_;
  Topology topo_;
  Policy policy_;
  double period_s_ = 1.0;  // the tick period the spec declares
  Plan plan_;
  config::WorkloadSpec fallback_critical_, fallback_best_effort_;  // for workloads the config lacks
  std::unordered_map<std::string, const config::WorkloadSpec*> by_name_;
  // This tick's snapshot, indexed once: instance -> position, and each signal's spec.
  const Snapshot* cur_ = nullptr;
  std::unordered_map<std::string_view, size_t> at_;
  std::vector<const config::WorkloadSpec*> specs_;
  void index(const Snapshot& s);
  const config::WorkloadSpec& spec_of(const WorkloadSignals& w) const;  // w is one of cur_'s
  enum class Rung { preempt_class, weight, cpus, l3_ways, mba, steal };
  // One applied step: the knob values it changed, as they were before (nullopt = as found).
  struct Step {
    Rung rung = Rung::weight;
    std::map<std::string, KnobState> before;  // instance -> every field as it was (whole state)
    std::map<std::string, KnobState> after;
    std::optional<bool> steal_before, steal_after;
    uint64_t tick = 0;
    double slack_before = 0;
    bool verified = false;
    double be_usage = 0;     // best-effort CPUs busy or queued when the step was taken
    bool by_demand = false;  // whole cores taken for the victim's high demand, not for a violation
  };
  struct InstanceState {
    double p99_us = 0;
    double migrations_per_s = 0;         // smoothed like the p99
    std::optional<double> mpki;          // smoothed, where counted
    std::string binding;                 // the signal whose slack is the smallest, in numbers
    double rate = 0, cpu = 0;            // wake-ups (run-queue waits) per second and CPUs busy, smoothed
    double peak_rate = 0, peak_cpu = 0;  // their highest since the first step it holds
    // The steps it held when its demand fell, oldest first: its next SLO crossing re-applies them at
    // once (they worked then), without cooldowns or verdicts.
    std::vector<Step> parked;
    bool seen = false;
    unsigned bad = 0, good = 0;  // consecutive ticks below act_below / above give_back_above
    uint64_t quiet_until = 0;    // cooldown: no step before this tick
    std::vector<Step> steps;     // applied, oldest first; give-back pops from the back
    std::map<Rung, uint64_t> locked_until;
    uint64_t give_back_locked_until = 0;
    unsigned give_back_failures = 0;
    std::unique_ptr<Step>
        given_back;  // the last give-back, re-applied if the violation returns (rare: not inline)
    uint64_t given_back_tick = 0;
    std::optional<uint64_t> shares_found;  // as found, before keel changed anything
  };
  std::unordered_map<std::string, InstanceState> states_;  // by instance (its order matters to nothing)
  // Pieces of step(), in controller.cpp.
  void begin(const Snapshot& s, Plan& plan);  // what every tick does before the victims
  // One victim's tick: its state, this tick's view and antagonists, and the numbers its reasons quote.
  struct Turn {
    const WorkloadSignals& v;
    InstanceState& st;
    const WorkloadView& view;
    std::vector<Interference> antagonists;
    std::string numbers, named;
  };
  void decide(const Snapshot& s, const WorkloadSignals& v, Plan& plan);
  bool revert_give_back(const Snapshot& s, Turn& t, Plan& plan);
  bool cores_for_demand(const Snapshot& s, Turn& t, Plan& plan);
  bool judge_last_step(const Snapshot& s, Turn& t, Plan& plan);
  void escalate(const Snapshot& s, Turn& t, Plan& plan);
  void give_back_one(const Snapshot& s, Turn& t, Plan& plan);
  void best_effort_cpus(const Snapshot& s, Plan& plan);
  void smooth(const Snapshot& s, Plan& plan);
  std::vector<Interference> rank(const Snapshot& s, const WorkloadSignals& victim) const;
  struct Ladder;  // the rungs of next_step()
  // `jump`: a violation many times the SLO skips the cheap rungs (class, weights) for whole cores.
  std::optional<Step> next_step(const Snapshot& s, const WorkloadSignals& victim, InstanceState& st,
                                const std::vector<Interference>& antagonists, std::string& why_not,
                                bool jump = false) const;
  std::optional<Step> cores_step(const Snapshot& s, const WorkloadSignals& victim,
                                 std::vector<std::string>& notes) const;
  void apply(const Step& step, Plan& plan, Action::Kind kind, const std::string& reason);
  void apply_merged(const std::vector<const Step*>& steps, Plan& plan, Action::Kind kind,
                    const std::string& reason);
  bool wants_cores(const Snapshot& s, const WorkloadSignals& v, const InstanceState& st,
                   const std::vector<Interference>& antagonists, bool any_window = false) const;
  bool demand_fell(const Snapshot& s, const WorkloadSignals& v, const InstanceState& st) const;
  bool park(const Snapshot& s, const WorkloadSignals& v, InstanceState& st, Plan& plan,
            const std::string& numbers);
  bool unpark(const Snapshot& s, InstanceState& st, Plan& plan, const std::string& numbers);
  bool fits(const Snapshot& s, const std::map<std::string, KnobState>& to, std::string& why) const;
  bool clashes(const Step& step, const Plan& plan, bool forward) const;
  void preempt_classes(const Snapshot& s, Plan& plan);
  std::optional<std::map<std::string, KnobState>> adopting_;  // until the next step
  bool adopting_steal_ = false;
  void take_adopted(const Snapshot& s);
  unsigned starvation_ticks_ = 5;
  std::vector<std::string> last_lifts_;                // the last tick's starvation lifts
  std::unordered_map<std::string, unsigned> starved_;  // best-effort instance -> ticks starved in the class
  double be_usage_ = 0;                                // best-effort CPUs busy or queued, smoothed
  bool steal_ = false;
};

}  // namespace keel::ctl
