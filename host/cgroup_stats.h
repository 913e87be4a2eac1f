// CPU usage, throttling and pressure of one cgroup from cgroupfs (v1 or v2). Every field is
// optional: a file the hierarchy lacks is "unavailable", never zero.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "host/cgroup.h"

namespace keel {

struct CgroupCpuStats {
  std::optional<uint64_t> usage_ns;      // v1 cpuacct.usage, v2 cpu.stat usage_usec
  std::optional<uint64_t> nr_throttled;  // cpu.stat
  std::optional<uint64_t> throttled_ns;  // v1 throttled_time (ns), v2 throttled_usec
  std::optional<uint64_t> psi_some_us;   // v2 cpu.pressure "some ... total=" (cumulative)
};

// `path` is the cgroup's path from the hierarchy root ("/system.slice/x.service"); v1 reads the cpu
// and cpuacct hierarchies at the same path, as systemd, docker and kubelet lay them out.
CgroupCpuStats read_cpu_stats(const CgroupLayout& layout, const std::string& path);

// "key value" lines (cpu.stat): the value of `key`, if present.
std::optional<uint64_t> stat_field(std::string_view text, std::string_view key);
// "some avg10=0.00 avg60=0.00 avg300=0.00 total=123" (PSI): the total of the "some" line.
std::optional<uint64_t> psi_some_total(std::string_view text);

}  // namespace keel
