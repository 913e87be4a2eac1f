// CPU usage, throttling and pressure of one cgroup from cgroupfs (v1 or v2). Every field is
// optional: a file the hierarchy lacks is "unavailable", never zero.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "host/cgroup.h"
#include "host/cgroup_files.h"

namespace keel {

struct CgroupCpuStats {
  std::optional<uint64_t> usage_ns;      // v1 cpuacct.usage, v2 cpu.stat usage_usec
  std::optional<uint64_t> nr_throttled;  // cpu.stat
  std::optional<uint64_t> throttled_ns;  // v1 throttled_time (ns), v2 throttled_usec
  std::optional<uint64_t> psi_some_us;   // v2 cpu.pressure "some ... total=" (cumulative)
};

// CPU time used, in ns: v1 cpuacct.usage of `acct` (a cgroup of the cpuacct hierarchy), v2 cpu.stat's
// usage_usec. None when unreadable. `below`: of the cgroup that path below `acct` (a held ancestor or
// root, as the inventory places a v1 file), as CgroupDir::read takes it.
std::optional<uint64_t> read_usage_ns(const CgroupDir& acct, std::string_view below = {});
// nr_throttled and the throttled time from `cpu`'s cpu.stat (a cgroup of the cpu hierarchy); on v2 the
// same read gives usage_ns too (cpu.stat's usage_usec).
void read_throttling(const CgroupDir& cpu, CgroupCpuStats& out, std::string_view below = {});

// Everything above: `cpu` and `acct` are the cgroup in the cpu and cpuacct hierarchies (on v2 the same
// cgroup, or on v1 a co-mounted cpu,cpuacct); either may be missing.
CgroupCpuStats read_cpu_stats(const CgroupDir* cpu, const CgroupDir* acct);
// The same for `path` ("/system.slice/x.service") of the layout's cpu hierarchy (v2: the unified one
// when it has the cpu controller); v1 reads cpu and cpuacct at the same path, as systemd, docker and
// kubelet lay them out.
CgroupCpuStats read_cpu_stats(const CgroupLayout& layout, const std::string& path);

// "key value" lines (cpu.stat): the value of `key`, if present.
std::optional<uint64_t> stat_field(std::string_view text, std::string_view key);
// "some avg10=0.00 avg60=0.00 avg300=0.00 total=123" (PSI): the total of the "some" line.
std::optional<uint64_t> psi_some_total(std::string_view text);

}  // namespace keel
