#include "actuators/knob.h"

namespace keel::act {

const char* to_string(Root r) {
  switch (r) {
    case Root::cgroup:
      return "cgroup";
    case Root::resctrl:
      return "resctrl";
    case Root::proc:
      return "proc";
    case Root::sys:
      return "sys";
    case Root::debugfs:
      return "debugfs";
  }
  return "?";
}

bool parse_root(std::string_view s, Root& out) {
  for (Root r : {Root::cgroup, Root::resctrl, Root::proc, Root::sys, Root::debugfs})
    if (s == to_string(r)) {
      out = r;
      return true;
    }
  return false;
}

std::filesystem::path KnobPath::abs(const SysRoots& roots) const {
  const std::filesystem::path* base = &roots.cgroup;
  switch (root) {
    case Root::cgroup:
      base = &roots.cgroup;
      break;
    case Root::resctrl:
      base = &roots.resctrl;
      break;
    case Root::proc:
      base = &roots.proc;
      break;
    case Root::sys:
      base = &roots.sys;
      break;
    case Root::debugfs:
      base = &roots.debugfs;
      break;
  }
  return rel.empty() ? *base : *base / rel.relative_path();
}

std::string KnobPath::str() const {
  return std::string(to_string(root)) + ":" + rel.relative_path().string();
}

}  // namespace keel::act
