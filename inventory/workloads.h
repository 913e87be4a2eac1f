// Workload discovery: which cgroups of the chosen hierarchy belong to which configured workload.
// Lives in keel_inventory (not keel_host) because it reads config types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
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

// Container id in a docker cgroup path where docker puts its containers: "/docker/<64 hex>" (cgroupfs
// driver), "/system.slice/docker-<64 hex>.scope" (systemd driver), or either name directly in a pod's
// cgroup (kubelet with docker); empty anywhere else.
std::string_view docker_container_id(std::string_view cgroup_path);
// Pod uid of a pod-level kubepods cgroup where kubelet puts it: "/kubepods/[burstable/|besteffort/]pod<uid>"
// (cgroupfs driver) or "/kubepods.slice/[kubepods-QOS.slice/]kubepods-[QOS-]pod<uid_>.slice" (systemd
// driver), as written in the path (dashes, or underscores); empty anywhere else.
std::string_view kubepods_pod_uid(std::string_view cgroup_path);
// Whether the path can be a systemd unit's cgroup: below the root, every element above the leaf a
// slice (a "unit" inside another unit's subtree is not one).
bool systemd_unit_path(std::string_view cgroup_path);

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

// A workload's name and match rule.
struct NamedMatch {
  std::string name;
  config::Match match;
  bool critical = false;  // a critical workload's rule never takes a cgroup in a delegated subtree
};
std::vector<NamedMatch> named_matches(const std::vector<config::Workload>& workloads);

// The workloads' match rules with what they refer to on the host resolved: docker container names to
// ids (a container's config re-read only when it changed), pid files to their process's cgroup. They
// are tried in config order; the first that selects a cgroup (and finds tasks in it, when it asks for
// them) wins. What cannot be resolved selects nothing and is explained in the rule's note.
class MatchRules {
 public:
  explicit MatchRules(std::vector<NamedMatch> rules);
  // Resolves every rule now (containers and services restart); a rule whose resolution changed gets a
  // new generation, so what was matched by it is matched again.
  void resolve(const CgroupHierarchy& hierarchy, const SysRoots& roots);

  size_t size() const { return rules_.size(); }
  const NamedMatch& rule(size_t i) const { return rules_[i].named; }
  Selector selector(size_t i) const { return rules_[i].selector; }
  const std::string& note(size_t i) const { return rules_[i].note; }
  uint64_t generation(size_t i) const { return rules_[i].generation; }
  bool needs_tasks(size_t i) const { return rules_[i].named.match.has_tasks; }
  // Whether rule i selects the cgroup at `path`: every selector it sets, has_tasks aside. `delegated`:
  // the cgroup is in a subtree delegated to someone else (CgroupDir::delegated() of it or an ancestor),
  // which a critical workload's rule never takes.
  bool selects(size_t i, std::string_view path, bool delegated = false) const;
  // The instance a cgroup it matches belongs to: the workload's name, or "<workload>/<leaf>" with each.
  std::string instance_name(size_t i, std::string_view path) const;

 private:
  struct Rule {
    NamedMatch named;
    Selector selector = Selector::none;
    std::vector<std::string> docker_ids;    // containers named match.docker
    std::string docker_prefix;              // match.docker when it can be an id (prefix)
    std::optional<std::string> pid_cgroup;  // the cgroup of the pid file's process
    std::string note;
    uint64_t generation = 0;
    bool resolved = false;
  };
  struct Container {
    long long mtime_ns = 0;
    long long size = 0;
    unsigned long long inode = 0;
    std::string name;  // without the leading '/'
  };
  void read_containers(const SysRoots& roots);
  void resolve_docker(Rule& r, const SysRoots& roots) const;
  void resolve_pid_file(Rule& r, const CgroupHierarchy& hierarchy, const SysRoots& roots) const;
  std::vector<Rule> rules_;
  std::map<std::string, Container> containers_;  // by id
  std::string containers_error_;                 // why docker's state could not be listed
};

// Matches each cgroup against the workloads (MatchRules, resolved now), first matching workload in
// config order wins.
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
