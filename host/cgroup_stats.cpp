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

std::optional<uint64_t> read_usage_ns(const CgroupDir& acct, std::string_view below) {
  if (acct.hierarchy().unified) {
    auto text = acct.read(CgroupFile::cpu_stat, below);
    if (!text) return std::nullopt;
    if (auto us = stat_field(*text, "usage_usec")) return *us * 1000;
    return std::nullopt;
  }
  auto ns = acct.read_u64(CgroupFile::usage, below);
  if (!ns) return std::nullopt;
  return *ns;
}

void read_throttling(const CgroupDir& cpu, CgroupCpuStats& out, std::string_view below) {
  auto text = cpu.read(CgroupFile::cpu_stat, below);
  if (!text) return;
  out.nr_throttled = stat_field(*text, "nr_throttled");
  if (cpu.hierarchy().unified) {
    if (auto us = stat_field(*text, "usage_usec")) out.usage_ns = *us * 1000;
    if (auto us = stat_field(*text, "throttled_usec")) out.throttled_ns = *us * 1000;
  } else {
    out.throttled_ns = stat_field(*text, "throttled_time");
  }
}

CgroupCpuStats read_cpu_stats(const CgroupDir* cpu, const CgroupDir* acct) {
  CgroupCpuStats s;
  // On v2 the cpu cgroup's cpu.stat holds the usage too: one read (read_throttling) gives both.
  if (acct && (cpu == nullptr || !cpu->hierarchy().unified)) s.usage_ns = read_usage_ns(*acct);
  if (cpu) read_throttling(*cpu, s);
  if (cpu && cpu->hierarchy().unified)
    if (auto text = cpu->read(CgroupFile::pressure)) s.psi_some_us = psi_some_total(*text);
  return s;
}

CgroupCpuStats read_cpu_stats(const CgroupLayout& layout, const std::string& path) {
  auto open = [&](const CgroupHierarchy* h) -> std::optional<CgroupDir> {
    if (!h) return std::nullopt;
    auto d = CgroupDir::open(*h, path);
    return d ? std::optional<CgroupDir>(std::move(*d)) : std::nullopt;
  };
  if (const CgroupHierarchy* u = layout.unified(); u != nullptr && u->has("cpu")) {
    auto d = open(u);
    return read_cpu_stats(d ? &*d : nullptr, d ? &*d : nullptr);
  }
  auto cpu = open(layout.v1_with("cpu"));
  auto acct = open(layout.v1_with("cpuacct"));
  return read_cpu_stats(cpu ? &*cpu : nullptr, acct ? &*acct : nullptr);
}

}  // namespace keel
