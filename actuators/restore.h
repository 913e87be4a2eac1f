// Gives the host back: every journaled knob to its original value, in an order the kernel accepts
// (keel's resctrl groups removed first so the default group can grow back; cpusets grown parents
// first and shrunk children first, retried while any write makes progress; systemd units' properties
// last, through DirOps::unit_property). Idempotent: a knob already at its original value is left alone;
// a knob whose cgroup is gone counts as gone.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "actuators/journal.h"
#include "actuators/writer.h"
#include "host/error.h"
#include "host/sys_roots.h"

namespace keel::act {

struct RestoreReport {
  size_t restored = 0;   // written back
  size_t unchanged = 0;  // already at the original value
  size_t gone = 0;       // the file or directory no longer exists
  size_t kept = 0;       // left as is because going back would harm: an empty cpuset for a cgroup with tasks
  // Left as another manager set it: no longer the value keel wrote ("PATH: keel wrote X, now Y").
  std::vector<std::string> changed_since;
  // v2 cpuset.cpus found not set, of cgroups that have tasks: the kernel refuses to unset them again
  // (ENOSPC), so each got every CPU of the hierarchy, which gives it its parent's as not set did
  // ("PATH (0-63)"). Counted as restored.
  std::vector<std::string> every_cpu;
  std::vector<Error> failed;  // still journaled: a later restore tries again
};

// Restores every entry of `journal` and leaves in it only the entries that failed. A journal from
// another boot is not applied (its cgroups and groups are gone, its other knobs were reset by the
// reboot): its entries are dropped and reported as gone.
// `wrote`: the values this keel last wrote (KnobWriter::written()); a knob that no longer holds its
// value was changed by another manager since, and is left as that one set it (and said so).
RestoreReport restore(const SysRoots& roots, Journal& journal, const DirOps& dirs = DirOps::real(),
                      const KnobWriter::Written* wrote = nullptr);
// The same for the entries `which` selects; the others stay journaled as they are (one durable
// rewrite: no moment where an entry is in neither).
RestoreReport restore_where(const SysRoots& roots, Journal& journal,
                            const std::function<bool(const JournalEntry&)>& which,
                            const DirOps& dirs = DirOps::real(), const KnobWriter::Written* wrote = nullptr);

// What stands in for "not set" in the v2 cpuset.cpus of the cgroup at `dir` where the kernel refuses to
// unset it (a populated cgroup whose cpuset.cpus is set: ENOSPC): every CPU of its hierarchy (the
// root's cpuset.cpus.effective), with which it gets what its parent has, as when not set.
Result<std::string> every_cpu_of_hierarchy(const std::filesystem::path& dir);

// Moves every process of the cgroup at `dir` (its cgroup.procs) into its parent's cgroup.procs, so a
// cgroup keel created can be removed. A process that exits meanwhile is no error. The number moved.
Result<size_t> move_procs_to_parent(const std::filesystem::path& dir);

}  // namespace keel::act
