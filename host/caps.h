// Which privilege each of keel's features needs, in one table: keel run checks it at start-up (a
// feature it lacks the privilege for is turned off with a line naming it; BPF sensing stops keel) and
// keel probe explains from it. Each row is what the kernel checks (deploy/README.md has the sources);
// tests/caps_priv_test.cpp runs each check against the kernel with capabilities dropped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "host/sys_roots.h"

namespace keel {

enum class Cap : unsigned {
  dac_override = 1,
  sys_admin = 21,
  sys_nice = 23,
  perfmon = 38,  // 5.8+, as CAP_BPF
  bpf = 39,
};
std::string_view cap_name(Cap c);  // "CAP_BPF"

// The calling process's privileges, as the kernel checks them.
struct Privileges {
  bool uid0 = false;  // effective uid 0: the owner of the kernel's files
  uint32_t euid = 0;
  uint64_t effective = 0;       // effective capabilities, bit N for capability N
  unsigned last_cap = 40;       // the highest capability this kernel knows (CAP_BPF: 5.8+)
  int perf_event_paranoid = 2;  // at <= 0 CPU-wide counters need no capability

  bool has(Cap c) const { return ((effective >> static_cast<unsigned>(c)) & 1) != 0; }
  bool knows(Cap c) const { return static_cast<unsigned>(c) <= last_cap; }
};
// This process's (capget, the bounding set for the kernel's last capability, and
// <proc>/sys/kernel/perf_event_paranoid).
Privileges current_privileges(const SysRoots& roots);

enum class Feature {
  bpf_sensing,   // the scheduler tracepoint programs and their maps: keel cannot run without them
  hw_counters,   // perf_event_open on every CPU for the cache counters
  bpf_stats,     // BPF_ENABLE_STATS, keel's own BPF cost
  cgroup_knobs,  // cgroup files (cpusets, weights, quota, idle): enforce mode cannot run without them
  root_moves,    // isolate_root_tasks: the root cgroup's processes moved into a cpuset
  resctrl,       // resctrl groups, schemata and tasks
  steal_task,    // debugfs's sched features
  irq_affinity,  // /proc/irq/N/smp_affinity_list
};

// One way to hold a feature: all of `caps`, and uid 0 where `uid0`; where `paranoid_at_most` is set,
// only while kernel.perf_event_paranoid is at most that.
struct Way {
  std::vector<Cap> caps;
  bool uid0 = false;
  std::optional<int> paranoid_at_most = std::nullopt;
};

struct FeatureRow {
  Feature feature;
  std::string_view id;     // keel probe --json's key
  std::string_view label;  // keel probe's and keel run's name for it
  std::vector<Way> ways;   // any one of them; a way naming a capability the kernel lacks does not count
  std::optional<int> paranoid_at_most;  // also held at kernel.perf_event_paranoid <= this
  bool partial = false;                 // without it the feature works in part
  std::string_view without;             // what keel does without it
};

const std::vector<FeatureRow>& privilege_table();
const FeatureRow& privilege_row(Feature f);
// The capabilities the table names, ascending.
std::vector<Cap> table_caps();

struct Verdict {
  bool held = false;
  bool partial = false;      // not held, but a partial feature works in part (it has the uid it needs)
  std::vector<Cap> missing;  // of the first way the kernel knows: the capabilities not held
  std::string needs;         // held: empty; else "CAP_PERFMON, or CAP_SYS_ADMIN"
};
Verdict check(Feature f, const Privileges& p);

// "uid 0, CAP_PERFMON CAP_BPF": the table's capabilities that `p` holds.
std::string describe_held(const Privileges& p);

}  // namespace keel
