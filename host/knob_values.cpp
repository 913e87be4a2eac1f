#include "host/knob_values.h"

#include <array>
#include <charconv>

#include "host/cpuset.h"
#include "host/fileio.h"

namespace keel {

namespace {

constexpr std::array<std::pair<ValueKind, const char*>, 11> kNames = {{
    {ValueKind::text, "text"},
    {ValueKind::integer, "integer"},
    {ValueKind::cpu_list, "cpu_list"},
    {ValueKind::cpu_mask, "cpu_mask"},
    {ValueKind::cpuset_list, "cpuset_list"},
    {ValueKind::weight, "weight"},
    {ValueKind::idle, "idle"},
    {ValueKind::cfs_quota, "cfs_quota"},
    {ValueKind::cfs_period, "cfs_period"},
    {ValueKind::bandwidth, "bandwidth"},
    {ValueKind::sched_feature, "sched_feature"},
}};

// cpu.max: "max 100000" or "50000 100000"; (-1, period) for no limit.
std::optional<std::pair<int64_t, int64_t>> parse_bandwidth(std::string_view s) {
  s = trim(s);
  size_t sp = s.find(' ');
  if (sp == std::string_view::npos) return std::nullopt;
  auto period = parse_integer(s.substr(sp + 1));
  if (!period) return std::nullopt;
  std::string_view q = s.substr(0, sp);
  if (q == "max") return std::pair<int64_t, int64_t>{-1, *period};
  auto quota = parse_integer(q);
  if (!quota || *quota < 0) return std::nullopt;
  return std::pair{*quota, *period};
}

}  // namespace

const char* to_string(ValueKind k) {
  for (const auto& [kind, name] : kNames)
    if (kind == k) return name;
  return "text";
}

std::optional<ValueKind> parse_value_kind(std::string_view s) {
  for (const auto& [kind, name] : kNames)
    if (s == name) return kind;
  return std::nullopt;
}

std::optional<int64_t> parse_integer(std::string_view s) {
  s = trim(s);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<bool> sched_feature_state(std::string_view features, std::string_view name) {
  while (!features.empty()) {
    size_t start = features.find_first_not_of(" \t\n");
    if (start == std::string_view::npos) break;
    features.remove_prefix(start);
    size_t end = features.find_first_of(" \t\n");
    std::string_view word = features.substr(0, end);
    features.remove_prefix(word.size());
    if (word == name) return true;
    if (word.starts_with("NO_") && word.substr(3) == name) return false;
  }
  return std::nullopt;
}

bool same_value(ValueKind k, std::string_view current, std::string_view wanted) {
  current = trim(current);
  wanted = trim(wanted);
  switch (k) {
    case ValueKind::integer:
    case ValueKind::weight:
    case ValueKind::idle:
    case ValueKind::cfs_quota:
    case ValueKind::cfs_period: {
      auto a = parse_integer(current), b = parse_integer(wanted);
      if (a && b) return *a == *b;
      break;
    }
    case ValueKind::cpu_list:
    case ValueKind::cpuset_list: {
      auto a = CpuSet::parse_list(current), b = CpuSet::parse_list(wanted);
      if (a && b) return *a == *b;
      break;
    }
    case ValueKind::cpu_mask: {
      auto a = CpuSet::parse_mask(current), b = CpuSet::parse_mask(wanted);
      if (a && b) return *a == *b;
      break;
    }
    case ValueKind::bandwidth: {
      auto a = parse_bandwidth(current), b = parse_bandwidth(wanted);
      if (a && b) return *a == *b;
      break;
    }
    case ValueKind::sched_feature: {
      bool want_on = !wanted.starts_with("NO_");
      auto on = sched_feature_state(current, want_on ? wanted : wanted.substr(3));
      return on && *on == want_on;
    }
    case ValueKind::text:
      break;
  }
  return current == wanted;
}

}  // namespace keel
