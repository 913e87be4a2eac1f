// keel's view of the host's cgroups, one pass per tick: the hierarchy that defines workloads, every
// cgroup of it held open by its directory and kept up to date incrementally (an inotify watch on each
// directory: a tree that did not change is not walked or read again; when the kernel runs out of
// watches, directories are re-listed each tick), and the workload instance each cgroup belongs to
// under the compiled config's rules. A cgroup is its id (hierarchy, inode), never its path: one made
// again under the same name is a new cgroup, and an instance whose cgroups are all new is fresh.
// Facts that rarely change (whether a cgroup holds tasks while its tasks do not run, where its
// cpuset is) are looked up again every `refresh_ticks`, staggered over the cgroups.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "config/spec.h"
#include "host/cgroup.h"
#include "host/cgroup_files.h"
#include "host/error.h"
#include "host/fd.h"
#include "host/sys_roots.h"
#include "inventory/workloads.h"

namespace keel::inv {

// One cgroup of the hierarchy that defines workloads.
struct Node {
  explicit Node(CgroupDir d) : dir(std::move(d)) {}
  CgroupDir dir;  // its id, its path, and the directory it is read and written through
  Node* parent = nullptr;
  std::vector<Node*> children;
  // Matching, kept across ticks.
  std::vector<uint16_t> candidates;  // the rules whose selectors take its path, in config order
  std::string instance;              // the instance its rule puts it in
  uint64_t joined = 0;               // the tick it joined that instance
  uint64_t tasks_tick = 0;           // when `tasks` was read
  uint64_t ran_tick = 0;             // the last tick its tasks ran
  mutable uint64_t cpuset_tick = 0;  // when `cpuset` was looked up
  int watch = -1;                    // its inotify watch descriptor, -1 without one
  int rule = -1;                     // the rule it matched this tick, -1 none
  Trust trust = Trust::host;  // whom it and its ancestors were delegated to: what a critical rule may take
  bool evaluated = false;     // `candidates` computed (a new cgroup's are, at the next match)
  // A host daemon's (host_daemon_path) that a best-effort rule took as one of a family (a glob): it is
  // measured as that workload's, and never demoted (no class, no lower weight, no narrower cpuset).
  bool spared = false;
  int8_t tasks = -1;  // whether it holds tasks: -1 not known, 0 no, 1 yes
  uint32_t slot = 0;  // a dense index, reused after it goes: for per-cgroup state in vectors
  // Its cpuset cgroup in a v1 cpuset hierarchy apart from the defining one (looked up when asked):
  // -1 not known, 0 none (the root's), 1 the same path, 2 apart->cpuset_path.
  mutable int8_t cpuset = -1;
  // What few cgroups have, kept out of line: a cpuset cgroup elsewhere, and its cgroups in other
  // hierarchies keel writes (v1 cpuset, cpu), held open once keel writes them.
  struct Apart {
    std::string cpuset_path;
    std::vector<std::unique_ptr<CgroupDir>> held;
  };
  mutable std::unique_ptr<Apart> apart;
};

struct Instance {
  std::string name;  // "redis", or "batch/job-1" for an `each` workload's
  const config::WorkloadSpec* spec = nullptr;
  std::vector<const Node*> cgroups;  // by path
  bool fresh = false;                // none of its cgroups was in it the tick before
};

struct IdHash {
  size_t operator()(const CgroupId& id) const {
    return std::hash<uint64_t>{}(id.inode * 1000003u + id.hierarchy);
  }
};

class Inventory {
 public:
  struct Options {
    unsigned refresh_ticks = 8;        // rarely changing facts are looked up again this often
    unsigned idle_ticks = 32;          // and of a cgroup whose tasks have not run, this often
    unsigned resync_ticks = 64;        // the whole tree re-listed this often, even with inotify
    bool inotify = true;               // false: re-list every directory every tick (tests; the fallback)
    size_t max_cgroups = kMaxCgroups;  // the walk's count bound (host/cgroup.h; smaller in tests)
    size_t critical_reserve = 1024;    // admitted beyond it for cgroups a critical rule would take
    // The open-files limit the budgets must fit in, every admitted cgroup being held open (0: this
    // process's RLIMIT_NOFILE at open). A quarter of it, at most 1024, stays for the rest of keel (BPF,
    // perf events, the metrics' clients, the journal, writes and the final restore); the budgets are
    // lowered to fit in the rest, the critical reserve an eighth of it at most.
    size_t open_files = 0;
    // The cgroup keel itself runs in, which no rule takes (keel never classes, weighs or pins itself);
    // none: its own, from /proc/<pid>/cgroup.
    std::optional<std::string> self = std::nullopt;
  };
  // The hierarchy that defines the spec's workloads, walked once. `spec` must outlive the inventory.
  static Result<Inventory> open(const config::Spec& spec, const SysRoots& roots, Options options);
  static Result<Inventory> open(const config::Spec& spec, const SysRoots& roots) {
    return open(spec, roots, Options{});
  }
  Inventory(Inventory&&) noexcept;
  Inventory& operator=(Inventory&&) noexcept;
  ~Inventory();

  // A tick's first step: the tree's changes since the last one. Fails only when the hierarchy's root
  // cannot be read; the inventory is then as it was.
  Result<void> refresh_tree();
  // Every cgroup to its instance under the rules, resolved now. `ran`: whether a cgroup's tasks ran
  // this tick (the sensor saw them wait or migrate): such a cgroup holds tasks without a read.
  void match(const std::function<bool(CgroupId)>& ran);

  uint64_t tick() const { return tick_; }
  const std::vector<Instance>& instances() const { return instances_; }  // by name
  const Node* find(CgroupId id) const;
  size_t cgroups() const { return nodes_.size(); }
  size_t user_cgroups() const { return user_nodes_; }  // of them, in a user's subtree (Trust::user)
  // One more than the largest Node::slot in use.
  size_t slots() const { return slots_; }
  template <class F>
  void for_each_cgroup(F&& f) const {
    for (const auto& [id, n] : nodes_) f(n);
  }
  // The cgroups removed since the last call.
  std::vector<CgroupId> take_removed();
  const MatchRules& rules() const { return rules_; }
  // The cgroup keel runs in, which no rule takes ("" when not known, or the root).
  const std::string& self() const { return self_; }

  const CgroupLayout& layout() const { return layout_; }
  const CgroupHierarchy& defining() const { return *defining_; }
  // How the tree is kept: "inotify", or why every directory is re-listed every tick.
  const std::string& watching() const { return watching_; }
  // Cgroups that could not be held (out of file descriptors: RLIMIT_NOFILE), since open.
  size_t unheld() const { return unheld_; }
  // Cgroups left out as beyond the walk's bounds (too deep, too long a path, too many: host/cgroup.h),
  // counted since the last whole re-listing. A warning is logged when what is left out changes.
  const CgroupSkips& skipped() const { return skipped_; }
  // Directories listed since open (what keeping the tree costs: an unchanged tree lists none).
  size_t listings() const { return listings_; }

  // Where file `f` of cgroup `n` is read: through `dir`, `below` it. On v2 and for the defining
  // hierarchy's controllers that is the cgroup itself; on v1 a hierarchy of its own (cpuacct, cpuset)
  // at the same path. None when no hierarchy has the file.
  struct Place {
    const CgroupDir* dir = nullptr;
    std::string_view below;  // a view of the node's path
  };
  std::optional<Place> place(const Node& n, CgroupFile f) const;
  // The hierarchy that holds cpuset files for these cgroups, and the cgroup of it that governs `n`:
  // on v2 `n` itself; on v1 the same path when the cpuset hierarchy has it, else the cpuset cgroup of
  // its first task. None without a cpuset controller, or when that is the root cpuset (the host's,
  // never a workload's).
  const CgroupHierarchy* cpuset_hierarchy() const { return cpuset_; }
  std::optional<std::string> cpuset_cgroup(const Node& n) const;
  // For writing, held open: the cgroup's directory in the hierarchy of `f` (its own, or on v1 the same
  // path in f's hierarchy, opened when first asked for and kept with the node), and the cpuset cgroup
  // that governs it. None where there is none. forget_held() drops a cgroup's (a read or write through
  // them failed: the reconciler says which, Reconciled::unheld), to be opened afresh when next asked.
  const CgroupDir* held(const Node& n, CgroupFile f) const;
  const CgroupDir* cpuset_dir(const Node& n) const;
  void forget_held(CgroupId id) {
    if (const Node* n = find(id); n != nullptr && n->apart) n->apart->held.clear();
  }
  // The root of a hierarchy keel reads, held open.
  const CgroupDir* root_of(const CgroupHierarchy& h) const;
  // Whether a fact read at `last` is due to be read again now: every refresh_ticks, or idle_ticks
  // for a cgroup whose tasks have not run; staggered over the cgroups by id.
  bool due(uint64_t last, CgroupId id, bool idle = false) const;

 private:
  Inventory() = default;
  Node* add(Node* parent, CgroupDir dir);
  // Within the walk's bounds and the budgets (max_cgroups, of which a user's subtrees take at most half;
  // a cgroup a critical rule would take comes in beyond it, up to kCriticalReserve more), else counted
  // as skipped.
  bool admit(const Node& parent, const std::string& path);
  size_t user_nodes_ = 0;  // nodes of Trust::user
  void say_skipped();
  bool takes(size_t rule, const Node& n);  // MatchRules::selects, saying why trust refused it
  void remove(Node* n);
  Result<void> relist(Node* n, bool deep);
  void watch(Node* n);
  bool drain_events();  // false: the queue overflowed
  bool holds_tasks(Node& n, const std::function<bool(CgroupId)>& ran);
  const CgroupDir* hold(const Node& n, const CgroupHierarchy& h, const std::string& path) const;
  bool is_defining(const CgroupHierarchy& h) const {
    return h.unified == defining_->unified && h.id == defining_->id;
  }

  SysRoots roots_;
  const config::Spec* spec_ = nullptr;
  std::string self_;  // keel's own cgroup (Options::self), "" when not known or the root
  Options options_;
  CgroupLayout layout_;
  std::shared_ptr<const CgroupHierarchy> defining_;
  const CgroupHierarchy* cpuset_ = nullptr;
  std::vector<std::unique_ptr<CgroupDir>>
      roots_held_;  // of the hierarchies keel reads besides the defining one
  std::unordered_map<CgroupId, Node, IdHash> nodes_;
  std::unordered_map<std::string_view, Node*> by_path_;  // views of the nodes' paths
  std::unordered_map<int, Node*> by_watch_;
  Node* root_ = nullptr;
  Fd inotify_;
  std::string watching_;
  MatchRules rules_{{}};
  std::vector<uint64_t> generations_;  // each rule's, when its candidates were last evaluated
  std::vector<Instance> instances_;
  std::vector<CgroupId> removed_;
  uint32_t slots_ = 0;
  std::vector<uint32_t> free_slots_;
  uint64_t tick_ = 0;
  uint64_t synced_ = 0;  // the tick of the last whole re-listing
  size_t unheld_ = 0;
  CgroupSkips skipped_;
  std::string skipped_said_;             // what the last warning was about
  std::vector<unsigned> refusals_said_;  // per rule, the cgroups trust refused that were logged
  bool tree_changed_ = true;             // cgroups came or went since the instances were built
  size_t listings_ = 0;
};

}  // namespace keel::inv
