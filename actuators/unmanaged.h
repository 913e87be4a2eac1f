// Work no workload declares, kept off the CPUs critical instances hold (actuators.isolate_unmanaged):
// the survey finds the cpuset hierarchy's top-level cgroups that hold no managed cgroup (system.slice,
// user.slice, docker without a declared container, ...) with their descendants, and the root
// cgroup's processes: user-space ones keel may move into a group it creates (isolate_root_tasks),
// kernel threads and pinned processes it leaves, each with the reason. The survey reads and never
// writes; the reconciler applies it through the KnobWriter (journaled, observe writes nothing).
// Cgroup and process names are the host's tenants' words: bounded in number and length, printed
// escaped.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actuators/knob.h"
#include "host/cgroup.h"
#include "host/cgroup_files.h"
#include "host/cpuset.h"
#include "host/error.h"
#include "host/sys_roots.h"

namespace keel::act {

// Bounds on what one survey reads: top-level cgroups, cgroups below one of them, depth, root processes.
inline constexpr size_t kMaxTopGroups = 256, kMaxGroupCgroups = 1024, kMaxDepth = 16, kMaxRootProcs = 65536;

struct UnmanagedGroup {
  std::string top;                 // "/system.slice"
  std::vector<CgroupDir> cgroups;  // the top one first, every parent before its children (v2: the top only)
  std::vector<CpuSet> cpus;        // the CPUs of each: its cpuset.cpus, or (v2, not set) the effective ones
  std::vector<std::string> found;  // cpuset.cpus of each as read ("" on v2: not set, the parent's)
};

struct NotIsolated {
  std::string what;  // "/foo", "pid 1 (init)", "kernel threads in the root cgroup"
  std::string why;
};

struct RootProcess {
  pid_t pid = 0;
  std::string comm;  // escaped, at most 64 bytes of it
  CpuSet cpus;       // its affinity (Cpus_allowed_list)
};

struct UnmanagedSurvey {
  std::vector<UnmanagedGroup> groups;
  std::vector<NotIsolated> not_isolated;  // what keel leaves where it is, and why
  std::vector<RootProcess> movable;       // root's user-space processes keel may move (root_tasks)
  // Root's processes whose affinity is narrower than the host's CPUs: moving them into a cpuset would
  // reset it on kernels before 6.2, so keel leaves them (isolated already when it avoids critical CPUs).
  std::vector<RootProcess> pinned;
  std::vector<std::string> kernel_threads;  // names of the root's kernel threads (the kernel places them)
};

// `managed`: the cpuset cgroups of every instance keel manages ("/" when one is the root: then no
// root process is moved). With `root_tasks` the root cgroup's processes are read (from
// `roots.proc`); keel's own group is never a group to isolate.
Result<UnmanagedSurvey> survey_unmanaged(const SysRoots& roots, const CgroupHierarchy& cs,
                                         const std::vector<std::string>& managed, bool root_tasks);

// One line for logs: "/system.slice (12 cgroups), /user.slice (3 cgroups)".
std::string describe_groups(const UnmanagedSurvey& s);

// `s` with control characters and non-ASCII bytes escaped (\xNN), at most `max` bytes of `s` read.
std::string printable(std::string_view s, size_t max = 64);

}  // namespace keel::act
