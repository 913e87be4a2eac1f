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
  std::string refused;   // why it was not (wholly) applied: the rules, or the kernel's reason; the
                         // other targets were applied
};

// Applies the targets, or writes nothing when one names CPUs or nodes outside the host's (`host_cpus`,
// or the hierarchy root's). A target the rules refuse (an empty set for a cgroup with tasks, in it or
// below; on v1 a child not inside its parent) or whose write the kernel refuses is left as it is and
// says why (`refused`); the others are applied. v1 writes grow parents first and shrink children
// first, and the targets' descendants (at most kMaxCpusetDescendants per call) are narrowed with them
// (journaled, and widened back when their parent is). A target held open (`dir`) whose cgroup is
// removed before or while it is applied is left out (`gone`).
inline constexpr size_t kMaxCpusetDescendants = 4096;
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
struct CpusetOrder {
  std::vector<CpusetWrite> writes;
  std::map<std::string, std::string> refused;  // targets left as they are (v1: kept inside their parent), why
  std::vector<std::string> fitted;             // v1: other cgroups narrowed (or widened back) to fit
};
// The writes taking `current` (every target, its parent and its descendants, by normalised path
// "/a/b") to `targets`. With `v1`: every step keeps each child inside its parent (grow parents first
// as the union of old and new, then shrink children first to the target; a populated cpuset is never
// empty), a target without mems on a cpuset without mems gets its parent's, and every other cgroup in
// `current` whose parent changes is kept inside it (its own set within the parent's, or the parent's
// whole set where none of its own would be left: a tenant's child cpuset never blocks its parent).
// A target that would break the rules (a populated cpuset emptied, a child outside its parent) is
// refused, alone: the others are written. v2 has no such rules, but kernels before 6.1 refuse to
// narrow a parent below a child's own set (EBUSY): the same order (widen parents first, narrow
// children first), with "" (not set) as the widest. Errors only for targets named twice or not read.
// `before_keel`: what cgroups no target names had before keel narrowed them (the journal's originals,
// empty sets where it has none), so that they widen back within their parent's set.
Result<CpusetOrder> order_cpuset_writes(const std::map<std::string, CpusetState>& current,
                                        const std::vector<CpusetTarget>& targets, bool v1,
                                        const std::map<std::string, CpusetState>& before_keel = {});

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
