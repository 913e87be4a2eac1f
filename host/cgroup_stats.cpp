#include "host/cgroup_stats.h"

#include <charconv>

#include "host/fileio.h"

namespace keel {

namespace {

std::optional<uint64_t> to_u64(std::string_view s) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::filesystem::path in(const CgroupHierarchy& h, const std::string& path) {
  return path == "/" ? h.mount : h.mount / path.substr(1);
}

}  // namespace

std::optional<uint64_t> stat_field(std::string_view text, std::string_view key) {
  while (!text.empty()) {
    auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (line.size() > key.size() && line.starts_with(key) && line[key.size()] == ' ')
      return to_u64(trim(line.substr(key.size() + 1)));
  }
  return std::nullopt;
}

std::optional<uint64_t> psi_some_total(std::string_view text) {
  if (!text.starts_with("some ")) return std::nullopt;
  auto line = text.substr(0, text.find('\n'));
  auto t = line.find("total=");
  if (t == std::string_view::npos) return std::nullopt;
  return to_u64(trim(line.substr(t + 6)));
}

CgroupCpuStats read_cpu_stats(const CgroupLayout& layout, const std::string& path) {
  CgroupCpuStats s;
  if (const CgroupHierarchy* u = layout.unified(); u != nullptr && u->has("cpu")) {
    if (auto text = read_file(in(*u, path) / "cpu.stat")) {
      if (auto us = stat_field(*text, "usage_usec")) s.usage_ns = *us * 1000;
      s.nr_throttled = stat_field(*text, "nr_throttled");
      if (auto us = stat_field(*text, "throttled_usec")) s.throttled_ns = *us * 1000;
    }
    if (auto text = read_file(in(*u, path) / "cpu.pressure")) s.psi_some_us = psi_some_total(*text);
    return s;
  }
  if (const CgroupHierarchy* acct = layout.v1_with("cpuacct")) {
    if (auto line = read_line(in(*acct, path) / "cpuacct.usage")) s.usage_ns = to_u64(*line);
  }
  if (const CgroupHierarchy* cpu = layout.v1_with("cpu")) {
    if (auto text = read_file(in(*cpu, path) / "cpu.stat")) {
      s.nr_throttled = stat_field(*text, "nr_throttled");
      s.throttled_ns = stat_field(*text, "throttled_time");
    }
  }
  return s;
}

}  // namespace keel
