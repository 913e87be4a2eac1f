// Knobs: kernel files keel may change, named by one of SysRoots' roots and a path under it, so a
// journal written on one host (or a test tree) restores under the same roots.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "host/cgroup.h"
#include "host/error.h"
#include "host/sys_roots.h"

namespace keel::act {

enum class Root { cgroup, resctrl, proc, sys, debugfs };

struct KnobPath {
  Root root = Root::cgroup;
  std::filesystem::path rel;  // relative to the root, never absolute

  std::filesystem::path abs(const SysRoots& roots) const;
  std::string str() const;  // "cgroup:cpu/best-effort/cpu.shares"
  auto operator<=>(const KnobPath&) const = default;
};

const char* to_string(Root r);
bool parse_root(std::string_view s, Root& out);

// The knob `file` ("cpu.shares", or "" for the cgroup's directory) of `cgroup` ("/a/b") in `h`,
// relative to roots.cgroup (h.mount must be under it). No "." or ".." in the cgroup, no '/' in the file.
Result<KnobPath> cgroup_knob(const SysRoots& roots, const CgroupHierarchy& h, std::string_view cgroup,
                             std::string_view file);
// "/a/b" from "a/b", "/a//b/", "/"; an error for "." or "..".
Result<std::string> normalize_cgroup(std::string_view cgroup);

// The cpuset group keel creates for the root cgroup's processes (top level of the cpuset hierarchy):
// the one cgroup keel makes, so the one the journal accepts as created (journal.h, check_entry).
inline constexpr std::string_view kRootTasksGroup = "/keel-root-tasks";

// Observe mode computes every write and makes none.
enum class Mode { enforce, observe };

}  // namespace keel::act
