// Every kernel path keel touches is built from these roots; tests point them at temporary trees.
#pragma once

#include <filesystem>

namespace keel {

struct SysRoots {
  std::filesystem::path cgroup = "/sys/fs/cgroup";
  std::filesystem::path resctrl = "/sys/fs/resctrl";
  std::filesystem::path proc = "/proc";
  std::filesystem::path sys = "/sys";
  std::filesystem::path debugfs = "/sys/kernel/debug";
  // Not a kernel path, but host state keel reads to resolve docker container names to ids.
  std::filesystem::path docker_state = "/var/lib/docker";

  // The running host.
  static SysRoots host() { return SysRoots{}; }
  // Everything under one directory: root/sys/fs/cgroup, root/proc, ... as on the host.
  static SysRoots under(const std::filesystem::path& root) {
    return SysRoots{root / "sys/fs/cgroup", root / "sys/fs/resctrl",   root / "proc",
                    root / "sys",           root / "sys/kernel/debug", root / "var/lib/docker"};
  }
};

}  // namespace keel
