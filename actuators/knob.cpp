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

Result<std::string> normalize_cgroup(std::string_view cgroup) {
  std::string out;
  size_t i = 0;
  while (i <= cgroup.size()) {
    size_t j = cgroup.find('/', i);
    if (j == std::string_view::npos) j = cgroup.size();
    std::string_view part = cgroup.substr(i, j - i);
    if (part == "." || part == "..") return fail("cgroup path '" + std::string(cgroup) + "' has '.' or '..'");
    if (!part.empty()) out.append(1, '/').append(part);
    i = j + 1;
  }
  return out.empty() ? "/" : out;
}

Result<KnobPath> cgroup_knob(const SysRoots& roots, const CgroupHierarchy& h, std::string_view cgroup,
                             std::string_view file) {
  auto cg = normalize_cgroup(cgroup);
  if (!cg) return std::unexpected(cg.error());
  std::filesystem::path mount = h.mount.lexically_relative(roots.cgroup);
  if (mount.empty() || (mount.begin() != mount.end() && *mount.begin() == ".."))
    return fail("hierarchy " + h.name() + " is not mounted under " + roots.cgroup.string(), h.mount.string());
  if (file.find('/') != std::string_view::npos) return fail("not a file name: '" + std::string(file) + "'");
  std::filesystem::path rel = (mount / cg->substr(1) / file).lexically_normal();
  if (rel == ".") rel.clear();
  if (!rel.empty() && !rel.has_filename()) rel = rel.parent_path();  // "cpuset/a/" -> "cpuset/a"
  return KnobPath{Root::cgroup, rel};
}

std::string KnobPath::str() const {
  return std::string(to_string(root)) + ":" + rel.relative_path().string();
}

}  // namespace keel::act
