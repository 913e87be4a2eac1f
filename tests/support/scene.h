// The cgroups a privileged test makes, on the layout this host has:
//  - cgroup v1 (the cpu, cpuacct and cpuset hierarchies): directories of the test's own at each
//    hierarchy's root, as the v1 hosts' runtimes make them (docker's cgroupfs driver, kubelet's);
//  - cgroup v2 under systemd: units that systemd makes, as services, containers and VMs get there. A
//    `Scene` is a slice with one unit per leaf (a service or a scope); a `DelegatedTree` is a scope with
//    Delegate=yes, systemd's way to hand a program a subtree to make cgroups in by hand.
// Tests are written once against these and run on both: the v1 development host and the v2 guest of
// scripts/vm-test.sh. Everything made is removed on destruction, with the processes in it.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace keel::testing {

enum class Layout { v1, v2 };
const char* to_string(Layout layout);  // "cgroup v1" | "cgroup v2 under systemd"

// The layout this host gives privileged tests; nullopt with the reason in *why when neither: v1 needs
// the cpu, cpuacct and cpuset hierarchies, v2 the unified hierarchy with cpu and cpuset at its root and
// systemd as PID 1 (its units are how cgroups are made there).
std::optional<Layout> host_layout(std::string* why = nullptr);

// Whether this host's CPUs are emulated (the v2 guest under qemu's TCG: scripts/vm-test.sh sets
// KEEL_VM_ACCEL=tcg): run-queue waits and timings there are the emulator's, not a machine's, so tests
// print them instead of asserting them and check what keel does.
bool emulated_cpus();

// A sleeping child process (its own process group) that populates a cgroup, killed and reaped when it
// goes out of scope.
struct Parked {
  Parked();
  ~Parked();
  Parked(const Parked&) = delete;
  Parked& operator=(const Parked&) = delete;
  pid_t pid;
};

// systemd's manager over D-Bus (busctl), for transient units. Each returns "" or the error.
namespace systemd {
// `properties` are busctl's (name, signature, values...) triples as one string each:
// "CPUWeight t 100", "Delegate b true", "AllowedCPUs ay 1 3".
std::string start_scope(const std::string& unit, const std::string& slice, const std::vector<pid_t>& pids,
                        const std::vector<std::string>& properties = {});
// A transient service running `command` (a shell-free argv: words joined by spaces).
std::string start_service(const std::string& unit, const std::string& slice, const std::string& command,
                          const std::vector<std::string>& properties = {});
std::string attach(const std::string& unit, pid_t pid);
// Stops the unit (its processes killed) and forgets it if it failed.
void stop(const std::string& unit);
// systemctl show -p NAME --value UNIT.
std::string property(const std::string& unit, const std::string& name);
}  // namespace systemd

// The cgroup v2 path of process `pid` ("/system.slice/x.service"), or v1 path in the hierarchy with
// `controller`; "" when it is gone.
std::string cgroup_of(pid_t pid, const char* controller = "cpu");

// What a test starts in a leaf: runs `body` in a child of its own process group, in the leaf's cgroup
// (in every hierarchy) before `body` starts.
using Body = std::function<void()>;

// A test's leaves side by side under one parent: crit, be1, be2, ... On v1 the parent is `/NAME` in each
// hierarchy and the leaves its directories (cpuset.cpus and mems set to all); on v2 the parent is the
// slice `NAME.slice` (dashes in NAME become underscores: in a slice's name they nest) and each leaf a
// unit in it, `NAME-LEAF.service` (a transient service whose main process sleeps) or `NAME-LEAF.scope`
// (a scope holding a parked process), with CPUWeight=100 and AllowedCPUs=<all> unless `bare`, so that
// systemd gives them the cpu and cpuset controllers. Every leaf exists once constructed.
class Scene {
 public:
  struct Leaf {
    std::string name;
    bool service = false;            // v2: a service (else a scope)
    bool delegate = false;           // v2: Delegate=yes (what container runtimes ask for their scopes)
    std::vector<std::string> extra;  // v2: more unit properties (busctl triples)
  };
  Scene(const std::string& name, const std::vector<Leaf>& leaves, bool bare = false);
  ~Scene();
  Scene(const Scene&) = delete;
  Scene& operator=(const Scene&) = delete;

  const std::string& error() const { return error_; }  // "" when every leaf was made
  Layout layout() const { return layout_; }
  bool v2() const { return layout_ == Layout::v2; }
  // daemon.hierarchy for keel's config: "cpu" on v1, "unified" on v2.
  const char* hierarchy() const { return v2() ? "unified" : "cpu"; }
  // The leaf's cgroup path from the hierarchy root ("" for the parent), as keel's config names it.
  std::string path(const std::string& leaf = "") const;
  // A glob for the leaves whose names start with `prefix`: "/NAME/be*" or "/NAME.slice/NAME-be*.scope".
  std::string glob(const std::string& prefix, bool service = false) const;
  // The unit of a leaf (v2), "" on v1.
  std::string unit(const std::string& leaf) const;
  // The leaf's directory in the hierarchy that has `controller` ("cpu", "cpuacct", "cpuset").
  std::filesystem::path dir(const std::string& leaf, const char* controller = "cpu") const;
  // File names in this layout: the weight ("cpu.shares" | "cpu.weight"), the quota's files.
  const char* weight_file() const { return v2() ? "cpu.weight" : "cpu.shares"; }
  // A leaf's CPU time in ns (cpuacct.usage | cpu.stat usage_usec).
  uint64_t usage_ns(const std::string& leaf = "") const;
  // The whole host's CPU time in ns (the hierarchy root's), for "what others used".
  uint64_t host_usage_ns() const;
  // cpuset.cpus of a leaf, trimmed; on v2 where a leaf has set none, what it has (.effective).
  std::string cpus(const std::string& leaf) const;

  // A child running `body` in the leaf; -1 (error() says why) when it could not join.
  pid_t spawn(const std::string& leaf, const Body& body);
  // The same in any cgroup `path` from the hierarchy root (a container's). On v2 a delegated unit (a
  // container's scope) is asked to take it (AttachProcessesToUnit); systemd 252 refuses that for other
  // units ("Process migration not available on non-delegated units"), so there the child is written
  // into the unit's cgroup.procs, as root may: the unit and its cgroup stay systemd's (made with its
  // properties, realised again on daemon-reload, its processes killed when it stops).
  pid_t spawn_at(const std::string& path, const Body& body);
  // The root of the hierarchy with `controller` (the v1 mount, or /sys/fs/cgroup).
  std::filesystem::path root(const char* controller = "cpu") const;
  // Every knob keel may change on the parent and the leaves, as the kernel prints it now.
  std::map<std::string, std::string> knobs() const;
  // Kills every process the test started in the leaves (the parked ones stay).
  void kill_started();
  const std::vector<pid_t>& started() const { return started_; }

 private:
  std::string leaf_unit(const Leaf& l) const;
  Layout layout_ = Layout::v1;
  std::string name_;  // as given (v1), slice base (v2)
  std::vector<Leaf> leaves_;
  std::vector<std::filesystem::path> mounts_;  // v1: cpu, cpuacct, cpuset mounts; v2: the one
  std::filesystem::path cpu_, cpuacct_, cpuset_;
  std::vector<pid_t> started_, parked_;
  std::string error_;
};

// A subtree to make cgroups in by hand: on v1 `/NAME` in the cpu, cpuacct and cpuset hierarchies; on v2
// `tree` below the scope `NAME.scope` with Delegate=yes (in `slice`, systemd's default when empty),
// whose process is parked beside it in `parked` (a scope ends when it is empty; a cgroup that gives its
// children controllers holds no processes). Both have the cpu and cpuset controllers for children.
class DelegatedTree {
 public:
  // NAME-PID trees (v1) or NAME_PID scopes (v2) of the same NAME whose process is gone (a test killed
  // before its destructor ran) are removed first.
  explicit DelegatedTree(const std::string& name, const std::string& slice = "");
  ~DelegatedTree();
  DelegatedTree(const DelegatedTree&) = delete;
  DelegatedTree& operator=(const DelegatedTree&) = delete;

  const std::string& error() const { return error_; }
  Layout layout() const { return layout_; }
  bool v2() const { return layout_ == Layout::v2; }
  // The subtree's root path from the hierarchy root ("/NAME" | "/system.slice/NAME.scope/tree").
  const std::string& path() const { return path_; }
  // Its directory in the hierarchy with `controller`.
  std::filesystem::path dir(const char* controller = "cpu") const;
  // The hierarchies' mounts (v1: each distinct one; v2: the unified one).
  const std::vector<std::filesystem::path>& mounts() const { return mounts_; }
  // Makes `rel` ("a", "a/leaf") below the root in every hierarchy: v1 cpusets get their parent's CPUs
  // and memory nodes; on v2 the parent's subtree_control gets +cpu +cpuset. false with errno kept.
  bool make(const std::string& rel);
  // Removes `rel` (children first is the caller's order) in every hierarchy, retrying while busy.
  void remove(const std::string& rel);
  // Moves `pid` into `rel` ("" for the root) in every hierarchy.
  bool move(pid_t pid, const std::string& rel);

 private:
  Layout layout_ = Layout::v1;
  std::string name_, unit_, path_;
  std::vector<std::filesystem::path> mounts_;
  std::filesystem::path cpuset_;
  std::vector<std::string> made_;
  pid_t parked_ = -1;
  std::string error_;
};

}  // namespace keel::testing
