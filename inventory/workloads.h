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
#include "inventory/platforms.h"

namespace keel {

// The hierarchy whose cgroups define workloads. automatic: unified if its root has the cpu
// controller, else v1 cpu, else v1 cpuset.
Result<CgroupHierarchy> choose_hierarchy(const CgroupLayout& layout, config::Hierarchy choice);

// Glob on cgroup paths: `*`, `?` and `[...]` (`[!...]` negates) stay within one path level, `**`
// spans levels ("/a/**" matches every descendant of /a but not /a; "/a/**/b" also matches "/a/b").
// `\` quotes the next character.
bool glob_match(std::string_view pattern, std::string_view path);
// The positions glob_match decides on the way (for a test of its bound: at most
// 1 + 3 x (|pattern| + 1) x (|path| + 1), each in constant work).
size_t glob_match_steps(std::string_view pattern, std::string_view path);

enum class Selector { none, cgroup, systemd_unit, docker, pod, podman, vm, pid_file };
const char* to_string(Selector s);

// One cgroup and the workload it belongs to.
struct WorkloadMatch {
  std::string path;
  CgroupId id;
  unsigned nr_procs = 0;
  std::string workload;  // empty: no workload
  std::string instance;  // the workload's name, or "<workload>/<leaf>" with match.each
  Selector selector = Selector::none;
  std::string platform;  // what its platform calls it (Platforms::name_of), or empty
};

// One configured workload, over all cgroups.
struct WorkloadSummary {
  std::string name;
  size_t cgroups = 0;
  unsigned long long procs = 0;
  std::string note;     // why it cannot match now (unknown container, dead pid, ...), or empty
  std::string refused;  // a critical workload's: the first cgroup its selectors took but trust refused, why
  // cgroup v2: how many of its cgroups lack the cpu or cpuset controller, the first of them, and what
  // keel does about it (asks systemd for a unit's property, or which parent to enable it in); or empty
  std::string controllers;
};

// How far a cgroup's name can be trusted, from whom it was delegated to (CgroupDir::delegation of it
// and its ancestors). A critical workload's rule takes only what a tenant cannot name into it.
enum class Trust : uint8_t {
  host,    // nobody's but root's managers': every rule takes it
  unit,    // a systemd unit delegated to a manager running as root (a container's, pod's or VM's scope):
           // named by systemd, which only root asks for units: every rule takes it
  inside,  // below a cgroup delegated to root's manager: named by what runs inside; a critical rule
           // takes it only by its container, pod or VM (a platform's anchored shape), never by path
  user,    // delegated to another user (its or an ancestor's directory not root's, or below a
           // user@.service), or delegated where systemd puts no unit: no critical rule takes it
};
// A cgroup's trust from its parent's (none for the root) and its own delegation.
Trust trust_of(std::optional<Trust> parent, std::string_view path, CgroupDir::Delegation own);

struct WorkloadMatches {
  std::vector<WorkloadMatch> cgroups;      // one per cgroup, in the order given
  std::vector<WorkloadSummary> workloads;  // config order
};

// A workload's name and match rule.
struct NamedMatch {
  std::string name;
  config::Match match;
  bool critical = false;  // a critical workload's rule takes only trusted cgroups (Trust)
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
  // Whether rule i selects the cgroup at `path`: every selector it sets, has_tasks aside, and the
  // cgroup's trust allows it (refused() is empty).
  bool selects(size_t i, std::string_view path, Trust trust = Trust::host) const {
    return refused(i, trust) == nullptr && selects_path(i, path);
  }
  // Why rule i may not take a cgroup of this trust whatever its path (a critical workload's), or null.
  const char* refused(size_t i, Trust trust) const;
  // Whether rule i's selectors take `path`, trust aside.
  bool selects_path(size_t i, std::string_view path) const;
  // Whether a critical rule's selectors take `path`, trust aside (the inventory admits it first).
  bool critical_could_take(std::string_view path) const {
    for (size_t i = 0; i < rules_.size(); ++i)
      if (rules_[i].named.critical && selects_path(i, path)) return true;
    return false;
  }
  // Whether rule i names one cgroup (a cgroup path or systemd unit without a glob, or a pid file), not
  // a family of them: a host daemon is a best-effort workload's only when its rule names it so.
  bool names_exactly(size_t i) const;
  // The instance a cgroup it matches belongs to: the workload's name, or "<workload>/<leaf>" with each
  // (`full`: "<workload>/<path below the glob's fixed part>", for leaves that share a name).
  std::string instance_name(size_t i, std::string_view path, bool full = false) const;
  // Whether rule i names each cgroup by its leaf (`each` without a platform's names).
  bool named_by_leaf(size_t i) const;

  // What the platform's state says of a cgroup (`keel workloads`' PLATFORM column), as last resolved.
  const Platforms& platforms() const { return platforms_; }

 private:
  struct Rule {
    NamedMatch named;
    Selector selector = Selector::none;
    // Resolved: docker or podman container ids, pod uids (pod_uid_key) or libvirt domain ids.
    std::vector<std::string> ids;
    std::vector<std::string> container_ids;  // with match.container: those containers of the pods
    std::string id_prefix;                   // match.docker or podman when it can be an id (prefix)
    std::optional<std::string> pid_cgroup;   // the cgroup of the pid file's process
    // The process the pid file named when it first matched, pinned: its pid, start time (clock ticks
    // after boot) and the file's mtime. The same file naming the same pid of another start is stale.
    struct PidIdentity {
      pid_t pid = 0;
      uint64_t start_ticks = 0;
      int64_t file_mtime_ns = 0;
    };
    std::optional<PidIdentity> pinned;
    std::string note;
    uint64_t generation = 0;
    bool resolved = false;
  };
  void resolve_container(Rule& r, const SysRoots& roots, Platforms::Kind kind) const;
  void resolve_pod(Rule& r, const SysRoots& roots) const;
  void resolve_vm(Rule& r, const SysRoots& roots) const;
  void resolve_pid_file(Rule& r, const CgroupHierarchy& hierarchy, const SysRoots& roots) const;
  std::vector<Rule> rules_;
  Platforms platforms_;
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
  CgroupSkips skipped;  // cgroups beyond the walk's bounds, left out (host/cgroup.h)
};

// discover + choose_hierarchy + enumerate_cgroups + match_workloads.
Result<WorkloadReport> discover_workloads(const std::vector<config::Workload>& workloads,
                                          config::Hierarchy choice, const SysRoots& roots);

// For `keel workloads`: a table of cgroups (path, "hier:inode", procs, workload, what the platform calls it)
// and per workload how many cgroups it matched, or why it matched nothing.
std::string format_workloads_text(const WorkloadReport& report);
std::string format_workloads_json(const WorkloadReport& report);

}  // namespace keel
