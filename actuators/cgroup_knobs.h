// cgroup CPU knobs on v1 and v2: cpusets (resized in an order the kernel accepts), CPU weight
// (cpu.shares / cpu.weight), CPU quota and cpu.idle. Every write goes through KnobWriter, so the first
// change of a knob is journaled and observe mode writes nothing. Values are validated before the first
// write: a bad value is an error that writes nothing. A cgroup is named by its hierarchy and its path
// inside it ("/kubepods/besteffort", as enumerate_cgroups gives it).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actuators/writer.h"
#include "host/cgroup.h"
#include "host/cgroup_files.h"
#include "host/cpuset.h"
#include "host/error.h"

namespace keel::act {

// ---- cpusets ----

struct CpusetTarget {
  std::string cgroup;              // "/kubepods/besteffort"
  CpuSet cpus;                     // empty: only for a cgroup without tasks
  std::optional<CpuSet> mems;      // unset: unchanged (v1: the parent's when the cpuset has none yet)
  const CgroupDir* dir = nullptr;  // the cgroup held open (written through it); else opened by path
};

struct CpusetGranted {
  std::string cgroup;
  bool changed = false;  // written (observe: would be)
  CpuSet effective;      // what the kernel granted (v2 cpuset.cpus.effective, v1 cpuset.effective_cpus);
                         // observe: the target
  bool gone = false;     // its cgroup (held by the caller) was removed meanwhile: left out, not an error
};

// Applies every target, or writes nothing when one is invalid: CPUs or nodes outside the host's
// (`host_cpus`, or the hierarchy root's), an empty set for a cgroup with tasks (in it or below), and
// on v1 a child not inside its parent. v1 writes grow parents first and shrink children first. A target
// held open (`dir`) whose cgroup is removed before or while it is applied is left out (`gone`).
Result<std::vector<CpusetGranted>> apply_cpusets(KnobWriter& w, const CgroupHierarchy& h,
                                                 const std::vector<CpusetTarget>& targets,
                                                 const std::optional<CpuSet>& host_cpus = std::nullopt);

// The cpuset of one cgroup as read, for the ordering below. `populated`: it or a descendant has tasks.
struct CpusetState {
  CpuSet cpus, mems;
  bool populated = false;
};
struct CpusetWrite {
  std::string cgroup;
  bool mems = false;  // cpuset.mems, else cpuset.cpus
  CpuSet value;
};
// The writes taking `current` (every target, its parent and its children, by normalised path "/a/b")
// to `targets`. With `v1`: every step keeps each child inside its parent (grow parents first as the
// union of old and new, then shrink children first to the target; a populated cpuset is never
// empty), and a target without mems on a cpuset without mems gets its parent's. Errors when the
// targets break those rules. v2 has no such rules, but kernels before 6.1 refuse to narrow a parent
// below a child's own set (EBUSY): the same order (widen parents first, narrow children first), with
// "" (not set) as the widest.
Result<std::vector<CpusetWrite>> order_cpuset_writes(const std::map<std::string, CpusetState>& current,
                                                     const std::vector<CpusetTarget>& targets, bool v1);

// ---- CPU weight, quota, idle ----

// v1 cpu.shares = shares; v2 cpu.weight = shares_to_weight(shares, m) (host/cgroup_files.h). Shares
// must be in [kSharesMin, kSharesMax].
// The kernel refuses a weight on an idle group: call set_cpu_idle(false) first (which resets the
// weight to the default), and set the weight before set_cpu_idle(true).
Result<bool> set_cpu_weight(KnobWriter& w, const CgroupHierarchy& h, const std::string& cgroup,
                            uint64_t shares, WeightMapping m = WeightMapping::systemd);
Result<bool> set_cpu_weight(KnobWriter& w, const CgroupDir& dir, uint64_t shares,
                            WeightMapping m = WeightMapping::systemd);

// `quota` per `period`, or no limit (nullopt). Period in [1 ms, 1 s], quota >= 1 ms (and >= the
// group's burst). v2: cpu.max; v1: cpu.cfs_period_us and cpu.cfs_quota_us in an order that keeps a
// child's quota/period within its parent's at every step.
Result<bool> set_cpu_quota(KnobWriter& w, const CgroupHierarchy& h, const std::string& cgroup,
                           std::optional<std::chrono::microseconds> quota,
                           std::chrono::microseconds period = std::chrono::microseconds(100000));

// cpu.idle. Making a group idle journals its weight first: the kernel sets it to 3 meanwhile.
Result<bool> set_cpu_idle(KnobWriter& w, const CgroupHierarchy& h, const std::string& cgroup, bool idle);

// ---- The best-effort preemption class ----

// How a cgroup is made to yield the CPU at once to any other work that wants it, and to use every CPU
// nothing else wants (work-conserving): cgroup cpu.idle (mainline 5.15+, v1 and v2), openEuler's
// cpu.qos_level = -1 (offline), Anolis' cpu.bvt_warp_ns = -1. Where the kernel has none of them, the
// minimum weight, which the caller writes as a weight.
enum class PreemptClass { cpu_idle, qos_level, bvt_warp, min_weight };
// The first of them the cgroup offers, in that order.
PreemptClass preempt_class_of(const CgroupDir& dir);
// Puts the cgroup into the class (`on`) or takes it out, by `how` (not min_weight). Only this cgroup:
// never a parent another manager writes weights to. cpu.idle on journals the weight first (the
// kernel sets it to its minimum meanwhile); cpu.idle off makes the kernel set the default weight, so
// `weight_before` (the weight before the class, as read) is written back then. True when it changed.
Result<bool> set_preempt_class(KnobWriter& w, const CgroupDir& dir, PreemptClass how, bool on,
                               const std::string* weight_before = nullptr);

}  // namespace keel::act
