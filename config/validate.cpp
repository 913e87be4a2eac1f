// Every rule about what the configured values mean. The reader has already made sure each value
// has the right type and parses; here they are checked against each other, the kernel and the host.
#include <algorithm>
#include <optional>

#include "config/internal.h"

namespace keel::config::detail {
namespace {

using namespace std::chrono_literals;

constexpr auto kMinPeriod = 10ms;
constexpr auto kMaxPeriod = 1h;

// cpu.shares as the kernel accepts it (MIN_SHARES..MAX_SHARES).
constexpr long long kMinShares = 2;
constexpr long long kMaxShares = 262144;

std::string in_quotes(std::string_view s) { return "\"" + std::string(s) + "\""; }

// "CPU 3" / "CPUs 3-5".
std::string cpus_phrase(const CpuSet& set) { return (set.count() == 1 ? "CPU " : "CPUs ") + set.to_list(); }

// Why a "host:port" listen address is wrong, or nullopt when it is fine.
std::optional<std::string> listen_problem(std::string_view address) {
  size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) return "expected host:port, e.g. \"127.0.0.1:9477\" or \"[::1]:9477\"";
  std::string_view host = address.substr(0, colon);
  std::string_view port = address.substr(colon + 1);
  if (host.empty()) return "the host part is empty (write e.g. \"127.0.0.1:9477\")";
  bool bracketed = host.front() == '[';
  if (bracketed && (host.size() < 3 || host.back() != ']'))
    return "an IPv6 host must be written in brackets, e.g. \"[::1]:9477\"";
  if (!bracketed && host.find(':') != std::string_view::npos)
    return "an IPv6 host must be written in brackets, e.g. \"[::1]:9477\"";
  long long value = 0;
  for (char c : port) {
    if (c < '0' || c > '9' || value > 65535) return "the port must be a number in 1..65535";
    value = value * 10 + (c - '0');
  }
  if (port.empty() || value < 1 || value > 65535) return "the port must be a number in 1..65535";
  return std::nullopt;
}

bool is_pod_uid(std::string_view uid) {
  return std::ranges::all_of(uid, [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == '-' || c == '_';
  });
}

// Docker names are [a-zA-Z0-9][a-zA-Z0-9_.-]*, shown as "/name" by docker inspect; ids are hex.
bool is_container_ref(std::string_view ref) {
  if (ref.starts_with('/')) ref.remove_prefix(1);
  return valid_workload_name(ref) && ref.front() != '.' && ref.front() != '-';
}

class Validator {
 public:
  Validator(const Config& c, const HostFacts& f, Report& r) : config_(c), facts_(f), report_(r) {}

  void run() {
    check_daemon(config_.daemon);
    check_host(config_.host);
    for (size_t i = 0; i < config_.workloads.size(); ++i) check_workload(i);
    check_unique_names();
    check_critical_pools_disjoint();
  }

 private:
  void error(Pos pos, std::string message) { report_.error(pos, std::move(message)); }

  void check_daemon(const Daemon& d) {
    if (d.period < kMinPeriod || d.period > kMaxPeriod)
      error(d.period_pos, "daemon.period must be between " + format_duration(kMinPeriod) + " and " +
                              format_duration(kMaxPeriod) + ", got " + format_duration(d.period));
    if (!d.state_dir.is_absolute())
      error(d.state_dir_pos,
            "daemon.state_dir = " + in_quotes(d.state_dir.string()) + " must be an absolute path");
    if (auto why = listen_problem(d.metrics_listen))
      error(d.metrics_listen_pos, "daemon.metrics_listen = " + in_quotes(d.metrics_listen) + ": " + *why);
  }

  void check_host(const HostSection& h) {
    if (auto outside = outside_host(h.reserved_cpus))
      error(h.reserved_cpus_pos, "host.reserved_cpus " + *outside);
  }

  // "names CPUs 32-35 that this host does not have (it has 0-31)" when the set leaves the host.
  std::optional<std::string> outside_host(const CpuSet& set) const {
    if (!facts_.cpus) return std::nullopt;
    CpuSet missing = set - *facts_.cpus;
    if (missing.empty()) return std::nullopt;
    return "names " + cpus_phrase(missing) + " that this host does not have (it has " +
           facts_.cpus->to_list() + ")";
  }

  void check_workload(size_t index) {
    const Workload& w = config_.workloads[index];
    std::string who = workload_label(w.name, index);
    if (!w.name.empty() && !valid_workload_name(w.name))
      error(w.name_pos,
            who + "name " + in_quotes(w.name) + " may only contain letters, digits, '.', '_' and '-'");
    check_match(who, w.match);
    // A value that is in the file but did not parse has been reported already.
    bool slo_written = w.slo.runqueue_p99 || w.slo.runqueue_p99_pos.line != 0;
    if (w.klass == WorkloadClass::critical && !slo_written)
      error(w.slo.pos.line != 0 ? w.slo.pos : w.pos,
            who + "class \"critical\" needs slo.runqueue_p99 (e.g. slo = { runqueue_p99 = \"200us\" })");
    check_bounds(who, w.bounds);
  }

  void check_match(const std::string& who, const Match& m) {
    auto bad = [&](std::string_view key, std::string_view value, std::string_view why) {
      error(m.selector_pos,
            who + "match." + std::string(key) + " = " + in_quotes(value) + " " + std::string(why));
    };
    if (!m.cgroup.empty() && !m.cgroup.starts_with('/'))
      bad("cgroup", m.cgroup,
          "must start with '/' (a path from the cgroup root, e.g. \"/" + m.cgroup + "\")");
    if (!m.docker.empty() && !is_container_ref(m.docker))
      bad("docker", m.docker, "is not a container name or id");
    if (!m.pod.empty() && !is_pod_uid(m.pod))
      bad("pod", m.pod, "is not a pod uid (hex digits with '-' or '_')");
    if (!m.pid_file.empty() && !m.pid_file.is_absolute())
      bad("pid_file", m.pid_file.string(), "must be an absolute path");
  }

  void check_bounds(const std::string& who, const Bounds& b) {
    check_cpu_pool(who, b);
    if (b.cpus) check_cpus(who, b);
    if (b.shares)
      check_range(who, "shares", *b.shares, kMinShares, kMaxShares, "the kernel's cpu.shares range");
    if (b.l3_ways) check_l3_ways(who, *b.l3_ways);
    if (b.mba_percent) check_mba(who, *b.mba_percent);
  }

  void check_cpu_pool(const std::string& who, const Bounds& b) {
    if (!b.cpu_pool) return;
    const CpuSet& pool = *b.cpu_pool;
    const CpuSet& reserved = config_.host.reserved_cpus;
    if (pool.empty())
      error(b.cpu_pool_pos, who + "bounds.cpu_pool is empty");
    else if (auto outside = outside_host(pool))
      error(b.cpu_pool_pos, who + "bounds.cpu_pool " + *outside);
    else if (pool.subset_of(reserved))
      error(b.cpu_pool_pos, who + "bounds.cpu_pool " + pool.to_list() +
                                " has no CPU outside host.reserved_cpus " + reserved.to_list());
  }

  // min <= max, and both inside [lo, hi] (hi < 0: no upper limit). Reports the first problem only.
  bool check_range(const std::string& who, const std::string& key, const IntRange& r, long long lo,
                   long long hi, std::string_view what) {
    std::string name = "bounds." + key;
    std::string limits =
        hi < 0 ? "must be at least " + std::to_string(lo)
               : "is outside " + std::string(what) + " " + std::to_string(lo) + ".." + std::to_string(hi);
    auto outside = [&](long long v) { return v < lo || (hi >= 0 && v > hi); };
    if (outside(r.min)) {
      error(r.min_pos, who + name + ".min = " + std::to_string(r.min) + " " + limits);
      return false;
    }
    if (outside(r.max)) {
      error(r.max_pos, who + name + ".max = " + std::to_string(r.max) + " " + limits);
      return false;
    }
    if (r.min > r.max) {
      error(r.min_pos, who + name + ".min = " + std::to_string(r.min) + " is greater than " + name +
                           ".max = " + std::to_string(r.max));
      return false;
    }
    return true;
  }

  void check_cpus(const std::string& who, const Bounds& b) {
    const IntRange& r = *b.cpus;
    if (!check_range(who, "cpus", r, 1, -1, "")) return;
    std::string max = who + "bounds.cpus.max = " + std::to_string(r.max) + " is more than the ";
    const CpuSet& reserved = config_.host.reserved_cpus;
    if (facts_.cpus && r.max > facts_.cpus->count()) {
      error(r.max_pos, max + std::to_string(facts_.cpus->count()) + " CPUs of this host");
      return;
    }
    std::string never = " (host.reserved_cpus " + reserved.to_list() + " are never given out)";
    if (b.cpu_pool) {
      unsigned usable = (*b.cpu_pool - reserved).count();
      if (usable > 0 && r.max > usable)
        error(r.max_pos, max + std::to_string(usable) + " usable CPUs of bounds.cpu_pool " +
                             b.cpu_pool->to_list() + never);
    } else if (facts_.cpus && !reserved.empty()) {
      unsigned usable = (*facts_.cpus - reserved).count();
      if (r.max > usable)
        error(r.max_pos, max + std::to_string(usable) + " usable CPUs of this host" + never);
    }
    check_numa_fit(who, b);
  }

  // Assumes CPUs are spread evenly over the nodes, which is how every host keel targets is built.
  void check_numa_fit(const std::string& who, const Bounds& b) {
    if (b.numa != NumaPolicy::single || !facts_.cpus || !facts_.numa_nodes || *facts_.numa_nodes == 0) return;
    unsigned per_node = facts_.cpus->count() / *facts_.numa_nodes;
    if (b.cpus->min > per_node)
      error(b.numa_pos, who +
                            "bounds.numa = \"single\" but bounds.cpus.min = " + std::to_string(b.cpus->min) +
                            " is more than the " + std::to_string(per_node) + " CPUs of one NUMA node");
  }

  void check_l3_ways(const std::string& who, const IntRange& r) {
    if (!check_range(who, "l3_ways", r, 1, -1, "")) return;
    if (facts_.l3_ways && r.max > *facts_.l3_ways)
      error(r.max_pos, who + "bounds.l3_ways.max = " + std::to_string(r.max) + " is more than the " +
                           std::to_string(*facts_.l3_ways) +
                           " ways of this host's L3 cache (resctrl cbm_mask)");
    else if (facts_.min_cbm_bits && r.min < *facts_.min_cbm_bits)
      error(r.min_pos, who + "bounds.l3_ways.min = " + std::to_string(r.min) +
                           " is below resctrl's min_cbm_bits " + std::to_string(*facts_.min_cbm_bits));
  }

  void check_mba(const std::string& who, const IntRange& r) {
    if (!check_range(who, "mba_percent", r, 1, 100, "the kernel's range")) return;
    if (facts_.mba_min && r.min < *facts_.mba_min)
      error(r.min_pos, who + "bounds.mba_percent.min = " + std::to_string(r.min) +
                           " is below this host's minimum " + std::to_string(*facts_.mba_min) +
                           " (resctrl MB min_bandwidth)");
  }

  void check_unique_names() {
    const auto& ws = config_.workloads;
    for (size_t j = 0; j < ws.size(); ++j) {
      if (ws[j].name.empty()) continue;
      for (size_t i = 0; i < j; ++i) {
        if (ws[i].name != ws[j].name) continue;
        error(ws[j].name_pos, workload_label(ws[j].name, j) + "duplicate name, first used on line " +
                                  std::to_string(ws[i].name_pos.line));
        break;
      }
    }
  }

  // Reserved CPUs do not count: the planner never hands them to anyone.
  void check_critical_pools_disjoint() {
    const auto& ws = config_.workloads;
    auto critical_pool = [](const Workload& w) {
      return w.klass == WorkloadClass::critical && w.bounds.cpu_pool.has_value();
    };
    for (size_t j = 0; j < ws.size(); ++j) {
      if (!critical_pool(ws[j])) continue;
      for (size_t i = 0; i < j; ++i) {
        if (!critical_pool(ws[i])) continue;
        CpuSet shared = (*ws[i].bounds.cpu_pool & *ws[j].bounds.cpu_pool) - config_.host.reserved_cpus;
        if (shared.empty()) continue;
        error(ws[j].bounds.cpu_pool_pos, workload_label(ws[j].name, j) + "bounds.cpu_pool shares " +
                                             cpus_phrase(shared) + " with critical workload '" + ws[i].name +
                                             "' (line " + std::to_string(ws[i].pos.line) +
                                             "); pools of critical workloads must not overlap");
      }
    }
  }

  const Config& config_;
  const HostFacts& facts_;
  Report& report_;
};

}  // namespace

void validate(const Config& config, const HostFacts& facts, Report& report) {
  Validator(config, facts, report).run();
}

}  // namespace keel::config::detail
