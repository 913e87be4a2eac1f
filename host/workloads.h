// Workload discovery: which cgroups of the chosen hierarchy belong to which configured workload.
// Lives in keel_discovery (not keel_host) because it reads config types.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "host/cgroup.h"
#include "host/error.h"
#include "host/sys_roots.h"

namespace keel {

// The hierarchy whose cgroups define workloads. automatic: unified if its root has the cpu
// controller, else v1 cpu, else v1 cpuset.
Result<CgroupHierarchy> choose_hierarchy(const CgroupLayout& layout, config::Hierarchy choice);

// Glob on cgroup paths: `*`, `?` and `[...]` (`[!...]` negates) stay within one path level, `**`
// spans levels ("/a/**" matches every descendant of /a but not /a; "/a/**/b" also matches "/a/b").
// `\` quotes the next character.
bool glob_match(std::string_view pattern, std::string_view path);

// Container id in a docker cgroup path: ".../docker/<64 hex>" (cgroupfs driver) or
// ".../docker-<64 hex>.scope" (systemd driver); empty if the path is not a container's.
std::string_view docker_container_id(std::string_view cgroup_path);
// Pod uid of a pod-level kubepods cgroup (both drivers, every QoS class), as written in the path
// (dashes for cgroupfs, underscores for systemd); empty if the path is not a pod's.
std::string_view kubepods_pod_uid(std::string_view cgroup_path);

enum class Selector { none, cgroup, systemd_unit, docker, pod, pid_file };
const char* to_string(Selector s);

// One cgroup and the workload it belongs to.
struct WorkloadMatch {
  std::string path;
  CgroupId id;
  unsigned nr_procs = 0;
  std::string workload;  // empty: no workload
  std::string instance;  // the workload's name, or "<workload>/<leaf>" with match.each
  Selector selector = Selector::none;
};

// One configured workload, over all cgroups.
struct WorkloadSummary {
  std::string name;
  size_t cgroups = 0;
  unsigned long long procs = 0;
  std::string note;  // why it cannot match now (unknown container, dead pid, ...), or empty
};

struct WorkloadMatches {
  std::vector<WorkloadMatch> cgroups;      // one per cgroup, in the order given
  std::vector<WorkloadSummary> workloads;  // config order
};

// Matches each cgroup against the workloads, first matching workload in config order wins.
// Docker names and pid files are resolved now (they change as containers and services restart);
// what cannot be resolved matches nothing and is explained in the summary's note, never an error.
WorkloadMatches match_workloads(const std::vector<config::Workload>& workloads,
                                const CgroupHierarchy& hierarchy, const std::vector<Cgroup>& cgroups,
                                const SysRoots& roots);

struct WorkloadReport {
  CgroupMode mode = CgroupMode::v1;
  CgroupHierarchy hierarchy;  // the chosen one
  WorkloadMatches matches;
};

// discover + choose_hierarchy + enumerate_cgroups + match_workloads.
Result<WorkloadReport> discover_workloads(const std::vector<config::Workload>& workloads,
                                          config::Hierarchy choice, const SysRoots& roots);

// For `keel workloads`: a table of cgroups (path, "hier:inode", procs, workload) and per workload how
// many cgroups it matched, or why it matched nothing.
std::string format_workloads_text(const WorkloadReport& report);
std::string format_workloads_json(const WorkloadReport& report);

}  // namespace keel
