// cgroup hierarchies (v1, v2, hybrid) as mounted on the host, and the cgroups of one hierarchy.
// A cgroup's id is (hierarchy, inode): inodes are unique only within one hierarchy, and the inode of
// a cgroup directory is the kernfs id BPF programs read (kn->id).
#pragma once

#include <sys/types.h>

#include <compare>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "host/error.h"
#include "host/sys_roots.h"

namespace keel {

// ---- Parsers of the kernel's text files (pure) ----

// One line of /proc/<pid>/mountinfo, the fields cgroup discovery needs.
struct MountInfo {
  std::string root;                        // field 4: the directory of the filesystem the mount shows
  std::string mount_point;                 // field 5, octal escapes (\040) decoded
  std::string fs_type;                     // after " - ": "cgroup", "cgroup2", "tmpfs", ...
  std::vector<std::string> super_options;  // last field split at ',': "rw", "cpu", "name=systemd"
};

Result<MountInfo> parse_mountinfo_line(std::string_view line);
// Every mount; an error names the 1-based line.
Result<std::vector<MountInfo>> parse_mountinfo(std::string_view text);
// "\040" -> " ": mountinfo escapes space, tab, newline and backslash as 3-digit octal.
std::string unescape_mount_field(std::string_view field);
// The controllers (and "name=X") a v1 cgroup mount carries: its super options minus mount flags
// ("rw", "noprefix", "xattr", "clone_children", "release_agent=...", ...).
std::vector<std::string> v1_mount_controllers(const MountInfo& mount);

// One line of /proc/cgroups.
struct ProcCgroupsEntry {
  std::string subsys;
  uint32_t hierarchy = 0;  // 0: not bound to a v1 hierarchy (free for v2, or unused)
  uint64_t num_cgroups = 0;
  bool enabled = false;
};
Result<std::vector<ProcCgroupsEntry>> parse_proc_cgroups(std::string_view text);

// One line of /proc/<pid>/cgroup: "4:cpu,cpuacct:/a/b", or "0::/a/b" for the unified hierarchy.
struct ProcessCgroup {
  uint32_t hierarchy = 0;
  std::vector<std::string> controllers;  // empty for the unified hierarchy
  std::string path;
};
Result<std::vector<ProcessCgroup>> parse_process_cgroups(std::string_view text);

// ---- Hierarchies ----

enum class CgroupMode { v1, v2, hybrid };  // hybrid: controllers on v1 and a cgroup2 mount beside them
const char* to_string(CgroupMode mode);

struct CgroupHierarchy {
  uint32_t id = 0;  // column 2 of /proc/cgroups; 0 is the unified (v2) hierarchy
  bool unified = false;
  // v1: the mount's controllers ("cpu", "cpuacct") or "name=systemd"; v2: cgroup.controllers of its root.
  std::vector<std::string> controllers;
  std::filesystem::path mount;   // its root directory, under SysRoots::cgroup
  std::string mount_root = "/";  // the cgroup the mount shows; "/" unless only a subtree is mounted
  bool noprefix = false;         // v1 mounted with `noprefix` (cpuset only): "cpus" for "cpuset.cpus"

  bool has(std::string_view controller) const;
  std::string name() const;  // "cpu,cpuacct", "name=systemd", "unified"
};

struct CgroupLayout {
  CgroupMode mode = CgroupMode::v1;
  std::vector<CgroupHierarchy> hierarchies;  // v1 ones in mount order, then the unified one if mounted

  const CgroupHierarchy* unified() const;
  const CgroupHierarchy* v1_with(std::string_view controller) const;
  const CgroupHierarchy* by_id(uint32_t id) const;
};

// Reads <proc>/self/mountinfo, <proc>/cgroups (and <proc>/self/cgroup for named v1 hierarchies) and
// the unified root's cgroup.controllers. Mounts outside the host's cgroup root and second mounts of a
// hierarchy are left out.
Result<CgroupLayout> discover(const SysRoots& roots);

// `roots` with cgroupns_roots set when keel runs in a cgroup namespace of its own, unchanged in the
// host's. A mount of a whole hierarchy shows its root as "/.." once per level of the namespace's root
// (mountinfo's root field); that root is the cgroup at that depth, below which
// <proc>/self/cgroup's path holds keel's own process (its cgroup.procs lists keel's pid: no tenant can
// put keel's process in a cgroup of theirs). Fails when a hierarchy's root cannot be found that way.
Result<SysRoots> with_cgroupns(SysRoots roots);
// A path the kernel showed relative to keel's cgroup namespace, as the host's: with the namespace's
// root at /kubepods/pod1/c1, "/../../../init.scope" is "/init.scope" and "/" is "/kubepods/pod1/c1".
// nullopt for a path above the hierarchy's root. Unchanged in the host's namespace.
std::optional<std::string> host_cgroup_path(const SysRoots& roots, uint32_t hierarchy, std::string_view path);

// ---- Cgroups ----

struct CgroupId {
  uint32_t hierarchy = 0;
  uint64_t inode = 0;
  auto operator<=>(const CgroupId&) const = default;
  std::string str() const;  // "1:4026531835"
};

struct Cgroup {
  std::string path;  // from the hierarchy root: "/", "/system.slice/redis.service"
  CgroupId id;
  unsigned nr_procs = 0;  // lines of cgroup.procs
};

// Bounds on every walk of a cgroup tree: any tenant that can make cgroups can make them deep, long
// and many. A cgroup more than kMaxCgroupDepth levels below the root, or whose path from the root is
// longer than kMaxCgroupPath bytes (with the mount point and a file name it would pass the kernel's
// PATH_MAX of 4096: no absolute path to its files opens), is left out with everything below it, and
// so is every cgroup past the first kMaxCgroups (the memory controller allows 65535 in all). A walk
// keeps at most kMaxCgroupDepth directories open and takes at most kMaxCgroups x kMaxCgroupPath bytes.
inline constexpr size_t kMaxCgroupDepth = 64, kMaxCgroupPath = 3072, kMaxCgroups = 65536;

// What a walk left out, for a warning.
struct CgroupSkips {
  enum Why { too_deep, too_long, too_many };
  size_t count[3] = {0, 0, 0};       // by Why: the cgroups left out (each with its subtree, never walked)
  std::string example;               // the first one, escaped and shortened
  size_t max_cgroups = kMaxCgroups;  // the count bound the walk had
  bool empty() const { return count[too_deep] + count[too_long] + count[too_many] == 0; }
  // "cgroups left out, each with what is below it: 1 more than 64 levels deep (the first: /a/...)";
  // "" when none.
  std::string message() const;
  void add(Why why, std::string_view path);
};
// Why a cgroup at `path` ("/a/b") is beyond the depth or length bound; nullopt when it is within.
std::optional<CgroupSkips::Why> beyond_walk_bounds(std::string_view path);

// Every cgroup of the hierarchy within the bounds above, sorted by path; `skipped` (when given) says
// what was left out. Cgroups that vanish during the walk are left out. The overload with `out` reuses
// its elements' storage, for callers that enumerate every tick.
// `max_cgroups` is kMaxCgroups but in tests.
Result<std::vector<Cgroup>> enumerate_cgroups(const CgroupHierarchy& hierarchy,
                                              CgroupSkips* skipped = nullptr,
                                              size_t max_cgroups = kMaxCgroups);
Result<void> enumerate_cgroups(const CgroupHierarchy& hierarchy, std::vector<Cgroup>& out,
                               CgroupSkips* skipped = nullptr, size_t max_cgroups = kMaxCgroups);

// The path of process `pid`'s cgroup in `hierarchy`, from <proc>/<pid>/cgroup, relative to the
// hierarchy's mount. Fails with ENOENT when the process is gone.
Result<std::string> process_cgroup_path(const SysRoots& roots, pid_t pid, const CgroupHierarchy& hierarchy);
// Its paths in several hierarchies from one read of the file: one moment of one process (a pid read
// twice may be two processes' when it is reused between the reads).
Result<std::vector<std::string>> process_cgroup_paths(const SysRoots& roots, pid_t pid,
                                                      std::span<const CgroupHierarchy* const> hierarchies);

}  // namespace keel
