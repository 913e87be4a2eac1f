// /proc/PID/cgroup (host/cgroup.h parse_process_cgroups): whatever parses prints back as the kernel
// prints it ("4:cpu,cpuacct:/a/b", "0::/a/b") to text that parses to the same lines. Each path read from
// a cgroup namespace's root (host_cgroup_path) is a clean path from the hierarchy's root, or refused.
#include <string>

#include "fuzz/check.h"
#include "host/cgroup.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace keel;
  auto lines = parse_process_cgroups(fuzz::as_text(data, size));
  if (!lines) {
    FUZZ_CHECK(lines.error().what.starts_with("line "));
    return 0;
  }
  SysRoots ns;
  ns.cgroupns_roots = {{0, "/kubepods/pod1/c1"}, {1, "/"}};
  std::string text;
  for (const auto& l : *lines) {
    for (uint32_t h : {0u, 1u}) {
      auto host = host_cgroup_path(ns, h, l.path);
      if (!host) continue;
      FUZZ_CHECK(host->starts_with('/') && (host->size() == 1 || !host->ends_with('/')));
      FUZZ_CHECK(host->find("//") == std::string::npos && host->find("/../") == std::string::npos &&
                 !host->ends_with("/.."));
      if (h == 0 && l.path.find("..") == std::string::npos && l.path.starts_with('/') &&
          l.path.find("//") == std::string::npos && !l.path.ends_with('/'))
        FUZZ_CHECK(*host == "/kubepods/pod1/c1" + l.path);
    }
    FUZZ_CHECK(l.path.find('\n') == std::string::npos);
    for (const auto& c : l.controllers) FUZZ_CHECK(c.find_first_of(",:\n") == std::string::npos);
    text += std::to_string(l.hierarchy) + ":";
    for (size_t i = 0; i < l.controllers.size(); ++i) text += (i ? "," : "") + l.controllers[i];
    text += ":" + l.path + "\n";
  }
  auto again = parse_process_cgroups(text);
  FUZZ_CHECK(again && again->size() == lines->size());
  for (size_t i = 0; i < lines->size(); ++i) {
    const auto &a = (*again)[i], &b = (*lines)[i];
    FUZZ_CHECK(a.hierarchy == b.hierarchy && a.controllers == b.controllers && a.path == b.path);
  }
  return 0;
}
