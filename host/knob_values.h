// The kinds of value kernel knobs hold, and how two of them compare: kernel files print a value in
// their own normal form ("0-3" for "0,1,2,3", "0000050" for "50"), so "already there" is decided by
// kind, never by text alone. The kind also tells restore in which order knobs go back. The writer
// records each knob's kind in the journal with its original value.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace keel {

enum class ValueKind : uint8_t {
  text,         // compared trimmed (resctrl schemata, anything else)
  integer,      // compared as numbers
  cpu_list,     // "0-3,8" (smp_affinity_list, resctrl cpus_list): compared as sets
  cpu_mask,     // "ff,00000000" (smp_affinity, rps_cpus, resctrl cpus): compared as sets
  cpuset_list,  // a cgroup's cpuset CPUs or memory nodes: a list that nests (v1 parents hold their
                // children), restored parents first when growing and children first when shrinking
  weight,       // cpu.shares / cpu.weight: a number the kernel fixes while the group is idle
  idle,         // cpu.idle: restored before weights (an idle group refuses a weight)
  cfs_quota,    // v1 cpu.cfs_quota_us and cpu.cfs_period_us: a pair restored through "no limit"
  cfs_period,
  bandwidth,      // v2 cpu.max "QUOTA PERIOD" ("max PERIOD" = no limit): compared as the pair
  sched_feature,  // a sched features token (FOO / NO_FOO) against the features file that lists it
};

const char* to_string(ValueKind k);  // "cpu_list", the journal's spelling
std::optional<ValueKind> parse_value_kind(std::string_view s);

// Whether the kernel's `current` value already is `wanted`. For sched_feature, `current` is the whole
// features file and `wanted` one token.
bool same_value(ValueKind k, std::string_view current, std::string_view wanted);

// A decimal integer, surrounding blanks and newline allowed; nothing else.
std::optional<int64_t> parse_integer(std::string_view s);

// Whether a sched features file (every feature on one line, NO_-prefixed when off) lists `name`,
// and if so whether it is on.
std::optional<bool> sched_feature_state(std::string_view features, std::string_view name);

}  // namespace keel
