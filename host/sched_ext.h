// sched_ext (Linux 6.12+): a BPF scheduler loaded in place of the fair class takes the tasks it
// schedules out of CFS, and with them out of reach of cgroup cpu.weight (cpu.shares) and cpu.idle,
// unless the scheduler implements the cgroup callbacks (few do). keel reads what is loaded from
// /sys/kernel/sched_ext and switches off the mechanisms whose knobs would be written and read back
// while doing nothing.
#pragma once

#include <string>

#include "host/sys_roots.h"

namespace keel {

struct SchedExt {
  std::string state;       // "disabled", "enabling", "enabled", "disabling"; "" without sched_ext
  std::string ops;         // the loaded scheduler's name ("lavd_1.0.13_g1234", "flatcg")
  bool switch_all = true;  // every task is in it (else only tasks of the SCHED_EXT policy)
  bool loaded() const { return state == "enabled" || state == "enabling"; }
  // Whether the loaded scheduler (loaded(), switch_all) honours the knob; true when none is loaded or
  // only SCHED_EXT tasks are in it (the fair class still has the rest).
  bool honours_weight() const;
  bool honours_idle() const;
  // "sched_ext: lavd_1.0.13 loaded (every task); it ignores cpu.weight and cpu.idle" and the like; ""
  // when the kernel has no sched_ext.
  std::string describe() const;
};

// roots.sys/kernel/sched_ext: state, root/ops, switch_all.
SchedExt read_sched_ext(const SysRoots& roots);

}  // namespace keel
