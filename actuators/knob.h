// Knobs: kernel files keel may change, named by one of SysRoots' roots and a path under it, so a
// journal written on one host (or a test tree) restores under the same roots.
#pragma once

#include <filesystem>
#include <string>

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

// Observe mode computes every write and makes none.
enum class Mode { enforce, observe };

}  // namespace keel::act
