// Every rule about what the configured values mean. The reader has already made sure each value
// has the right type and parses; here they are checked against each other, the kernel and the host.
#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <optional>

#include "config/internal.h"
#include "host/fileio.h"

namespace keel::config::detail {
namespace {

using namespace std::chrono_literals;

constexpr auto kMinPeriod = 10ms;
constexpr auto kMaxPeriod = 1h;

// cpu.shares as the kernel accepts it (MIN_SHARES..MAX_SHARES, host/cgroup_files.h).
constexpr long long kMinShares = static_cast<long long>(kSharesMin);
constexpr long long kMaxShares = static_cast<long long>(kSharesMax);

std::string in_quotes(std::string_view s) { return "\"" + std::string(s) + "\""; }

// "CPU 3" / "CPUs 3-5".
std::string cpus_phrase(const CpuSet& set) { return (set.count() == 1 ? "CPU " : "CPUs ") + set.to_list(); }

template <class Words>
std::string join(const Words& words) {
  std::string out;
  for (const auto& w : words) {
    if (!out.empty()) out += ", ";
    out += std::string(w);
  }
  return out;
}

bool is_hex_digit(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
bool is_alnum(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

bool is_address(int family, std::string_view text) {
  unsigned char buffer[16];
  return inet_pton(family, std::string(text).c_str(), buffer) == 1;
}

// An IPv6 address as written in brackets, with an optional zone: "::1", "fe80::1%eth0".
bool is_ipv6(std::string_view text) {
  size_t zone = text.find('%');
  if (zone != std::string_view::npos) {
    std::string_view name = text.substr(zone + 1);
    if (name.empty() ||
        !std::ranges::all_of(name, [](char c) { return is_alnum(c) || c == '-' || c == '_' || c == '.'; }))
      return false;
    text = text.substr(0, zone);
  }
  return is_address(AF_INET6, text);
}

// Why the host part of an unbracketed listen address is neither an IPv4 address nor a host name.
std::optional<std::string> host_problem(std::string_view host) {
  if (std::ranges::all_of(host, [](char c) { return (c >= '0' && c <= '9') || c == '.'; })) {
    if (is_address(AF_INET, host)) return std::nullopt;
    return in_quotes(host) + " is not an IPv4 address";
  }
  if (!std::ranges::all_of(host, [](char c) { return is_alnum(c) || c == '-' || c == '.'; }))
    return in_quotes(host) +
           " is not a host name or IP address (a host name has only letters, digits, '-' and '.')";
  bool labels_ok = host.size() <= 253;
  for (size_t begin = 0; labels_ok && begin <= host.size();) {
    size_t end = std::min(host.find('.', begin), host.size());
    std::string_view label = host.substr(begin, end - begin);
    labels_ok = !label.empty() && label.size() <= 63 && label.front() != '-' && label.back() != '-';
    begin = end + 1;
  }
  if (!labels_ok)
    return in_quotes(host) +
           " is not a host name (each part between dots is 1 to 63 letters, digits or '-', "
           "and does not start or end with '-')";
  return std::nullopt;
}

constexpr std::string_view kBracketIpv6 = "an IPv6 host must be written in brackets, e.g. \"[::1]:9477\"";

// Why a "host:port" listen address is wrong, or nullopt when it is fine. The host is an IPv4
// address, a host name, or an IPv6 address in brackets.
std::optional<std::string> listen_problem(std::string_view address) {
  std::string_view port;
  if (address.starts_with('[')) {
    size_t close = address.find(']');
    if (close == std::string_view::npos)
      return "the '[' of an IPv6 host has no closing ']' (write e.g. \"[::1]:9477\")";
    std::string_view inside = address.substr(1, close - 1);
    std::string_view rest = address.substr(close + 1);
    if (inside.empty()) return "the brackets hold no IPv6 address (write e.g. \"[::1]:9477\")";
    if (!is_ipv6(inside)) return in_quotes(inside) + " is not an IPv6 address";
    if (rest.empty()) return "missing port (write e.g. \"[" + std::string(inside) + "]:9477\")";
    if (rest.front() != ':') return "expected ':' and a port after ']', got " + in_quotes(rest);
    port = rest.substr(1);
  } else {
    size_t colon = address.rfind(':');
    std::string_view host = address.substr(0, colon);
    // ":9477": every address of the host (keel run says so when it starts).
    if (host.empty() && colon != 0) return "the host part is empty (write e.g. \"127.0.0.1:9477\")";
    if (host.find(':') != std::string_view::npos) return std::string(kBracketIpv6);
    if (!host.empty())
      if (auto why = host_problem(host)) return why;
    if (colon == std::string_view::npos)
      return "missing port (write e.g. \"" + std::string(host) + ":9477\")";
    port = address.substr(colon + 1);
  }
  if (port.empty()) return "missing port after ':' (write e.g. \"127.0.0.1:9477\")";
  long long value = 0;
  for (char c : port) {
    if (c < '0' || c > '9' || value > 65535) return "the port must be a number in 1..65535";
    value = value * 10 + (c - '0');
  }
  if (value < 1 || value > 65535) return "the port must be a number in 1..65535";
  return std::nullopt;
}

// What Kubernetes writes in metadata.uid: 32 hex digits as 8-4-4-4-12. The kubelet's cgroup names
// separate the groups with '-' (cgroupfs driver) or '_' (systemd driver); either matches both.
bool is_pod_uid(std::string_view uid) {
  constexpr std::array<size_t, 5> kGroups = {8, 4, 4, 4, 12};
  size_t i = 0;
  for (size_t g = 0; g < kGroups.size(); ++g) {
    if (g > 0) {
      if (i >= uid.size() || (uid[i] != '-' && uid[i] != '_')) return false;
      ++i;
    }
    for (size_t k = 0; k < kGroups[g]; ++k, ++i)
      if (i >= uid.size() || !is_hex_digit(uid[i])) return false;
  }
  return i == uid.size();
}

std::string selector_value(const Match& m, std::string_view key) {
  if (key == "cgroup") return m.cgroup;
  if (key == "systemd_unit") return m.systemd_unit;
  if (key == "docker") return m.docker;
  if (key == "pod") return m.pod;
  if (key == "podman") return m.podman;
  if (key == "vm") return m.vm;
  return m.pid_file.string();
}

// A Kubernetes name (DNS label or subdomain), or a glob of one.
bool is_k8s_name_glob(std::string_view s) {
  return !s.empty() && s.size() <= 253 && std::ranges::all_of(s, [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '*' || c == '?' ||
           c == '[' || c == ']' || c == '!';
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
    check_actuators(config_.actuators);
  }

 private:
  void error(Pos pos, std::string message) {
    report_.error(pos, std::move(message));
    ++errors_;
  }

  void check_daemon(const Daemon& d) {
    if (d.period < kMinPeriod || d.period > kMaxPeriod)
      error(d.period_pos, "daemon.period must be between " + format_duration(kMinPeriod) + " and " +
                              format_duration(kMaxPeriod) + ", got " + format_duration(d.period));
    if (!d.state_dir.is_absolute())
      error(d.state_dir_pos,
            "daemon.state_dir = " + in_quotes(d.state_dir.string()) + " must be an absolute path");
    if (auto why = listen_problem(d.metrics_listen))
      error(d.metrics_listen_pos, "daemon.metrics_listen = " + in_quotes(d.metrics_listen) + ": " + *why);
    if (d.health_listen != "off")
      if (auto why = listen_problem(d.health_listen))
        error(d.health_listen_pos,
              "daemon.health_listen = " + in_quotes(d.health_listen) + ": " + *why + " (or \"off\")");
    // Each labelled instance is ~90 series (the latency histogram's 80 buckets and the rest).
    if (d.metrics_max_workloads < 0 || d.metrics_max_workloads > 10000)
      error(d.metrics_max_workloads_pos,
            "daemon.metrics_max_workloads must be between 0 and 10000 (about 90 series "
            "each), got " +
                std::to_string(d.metrics_max_workloads));
  }

  void check_actuators(const Actuators& a) {
    bool malformed = a.irq_names_pos.line != 0 && !a.irq_names_read;  // already reported
    if (a.irq_affinity && a.irq_names.empty() && !malformed)
      error(a.irq_names_pos.line ? a.irq_names_pos : a.pos,
            "actuators.irq_affinity = true needs actuators.irq_names: the /proc/interrupts device names to "
            "keep "
            "off critical CPUs, e.g. [\"virtio*-input.*\"]");
    for (const auto& n : a.irq_names)
      if (n.empty() || n.find_first_of(" \t") != std::string::npos)
        error(a.irq_names_pos,
              "actuators.irq_names: \"" + n + "\" is not a device name pattern (empty or with spaces)");
    if (a.isolate_unmanaged && !a.cpuset)
      error(
          a.isolate_unmanaged_pos,
          "actuators.isolate_unmanaged = true needs actuators.cpuset = true: it keeps unmanaged cgroups off "
          "the CPUs critical workloads are given, and without cpusets none are");
    if (a.isolate_root_tasks && !a.isolate_unmanaged)
      error(a.isolate_root_tasks_pos,
            "actuators.isolate_root_tasks = true needs actuators.isolate_unmanaged = true: the root cgroup's "
            "processes are moved only where unmanaged cgroups are kept off critical CPUs");
    if (a.starvation_limit_pos.line != 0 && a.starvation_limit < config_.daemon.period)
      error(a.starvation_limit_pos, "actuators.starvation_limit " + format_duration(a.starvation_limit) +
                                        " is shorter than daemon.period " +
                                        format_duration(config_.daemon.period) +
                                        ": starvation is judged over whole ticks");
  }

  void check_host(const HostSection& h) {
    for (const auto& r : h.state_roots)
      if (!r.path.is_absolute() || r.path.lexically_normal() != r.path)
        error(r.pos, "host." + r.key + " = " + in_quotes(r.path.string()) +
                         " must be an absolute, normal path (where the runtime keeps its state)");
    // Checks that count usable CPUs say nothing more once this is reported.
    all_reserved_ = facts_.cpus && !facts_.cpus->empty() && facts_.cpus->subset_of(h.reserved_cpus);
    if (auto outside = outside_host(h.reserved_cpus))
      error(h.reserved_cpus_pos, "host.reserved_cpus " + *outside);
    else if (all_reserved_ && !config_.workloads.empty())
      error(h.reserved_cpus_pos, "host.reserved_cpus covers every CPU; nothing is left for workloads");
  }

  // "names CPUs 32-35 that this host does not have (it has 0-31)" when the set leaves the host.
  std::optional<std::string> outside_host(const CpuSet& set) const {
    if (!facts_.cpus) return std::nullopt;
    CpuSet missing = set - *facts_.cpus;
    if (missing.empty()) return std::nullopt;
    return "names " + cpus_phrase(missing) + " that this host does not have (it has " +
           facts_.cpus->to_list() + ")";
  }

  // Every CPU of the host, as far as it is known.
  std::optional<CpuSet> host_cpus() const {
    if (facts_.cpus) return facts_.cpus;
    CpuSet all;
    for (const CpuSet& c : facts_.cores) all |= c;
    for (const CpuSet& n : facts_.numa_cpus) all |= n;
    if (all.empty()) return std::nullopt;
    return all;
  }

  void check_workload(size_t index) {
    const Workload& w = config_.workloads[index];
    std::string who = workload_label(w.name, index);
    if (w.name.empty() && w.name_pos.line != 0) error(w.name_pos, who + "name must not be empty");
    if (!w.name.empty() && !valid_workload_name(w.name))
      error(w.name_pos,
            who + "name " + in_quotes(w.name) + " may only contain letters, digits, '.', '_' and '-'");
    // The metrics use these as label values of their own: the cgroups no workload matches, host-wide knobs.
    if (w.name == "other" || w.name == "host")
      error(w.name_pos, who + "name " + in_quotes(w.name) + " is reserved (the metrics' label for " +
                            (w.name == "other" ? "cgroups no workload matches" : "host-wide knobs") + ")");
    if (w.match.pos.line != 0) check_match(who, w.match);  // line 0: no match table was read
    if (w.klass == WorkloadClass::critical && w.match.selector_pos.line != 0 && !w.match.pod.empty()) {
      // Namespaces are Kubernetes' tenancy boundary: a glob there takes any tenant's pod of that name.
      std::string_view ns = std::string_view(w.match.pod).substr(0, w.match.pod.find('/'));
      if (w.match.pod.find('/') != std::string::npos && ns.find_first_of("*?[") != std::string_view::npos)
        error(
            w.match.selector_pos,
            who + "match.pod = " + in_quotes(w.match.pod) +
                " takes pods from any namespace that fits the glob: a critical workload needs its namespace "
                "written out (e.g. \"trading/" +
                w.match.pod.substr(w.match.pod.find('/') + 1) +
                "\"), or any tenant who can create a pod of that name there is made critical");
    }
    // A value that is in the file but did not parse has been reported already.
    bool slo_written = w.slo.runqueue_p99 || w.slo.runqueue_p99_pos.line != 0;
    if (w.klass == WorkloadClass::critical && !slo_written)
      error(w.slo.pos.line != 0 ? w.slo.pos : w.pos,
            who + "class \"critical\" needs slo.runqueue_p99 (e.g. slo = { runqueue_p99 = \"200us\" })");
    // keel judges only critical workloads against an SLO: a best-effort one's is read and never used.
    if (w.klass == WorkloadClass::best_effort && w.slo.pos.line != 0)
      report_.warning(w.slo.pos, who +
                                     "slo is ignored: keel judges only critical workloads against an SLO "
                                     "(drop it, or make the workload class = \"critical\")");
    if (w.slo.migrations_per_s && !(*w.slo.migrations_per_s > 0))
      error(w.slo.migrations_per_s_pos, who + "slo.migrations_per_s must be above 0 (migrations per second)");
    if (w.slo.mpki && !(*w.slo.mpki > 0))
      error(w.slo.mpki_pos, who + "slo.mpki must be above 0 (cache misses per 1000 instructions)");
    check_bounds(who, w);
  }

  void check_match(const std::string& who, const Match& m) {
    if (m.selector_keys.empty()) {
      error(m.pos, who + "match needs one selector: " + join(kSelectors));
      return;
    }
    if (m.selector_keys.size() > 1) {
      error(m.pos, who + "match has several selectors (" + join(m.selector_keys) + "); use exactly one");
      return;
    }
    if (m.selector_pos.line == 0) return;  // not a string: reported already
    const std::string& key = m.selector_keys.front();
    std::string value = selector_value(m, key);
    auto bad = [&](std::string_view why) {
      error(m.selector_pos, who + "match." + key + " = " + in_quotes(value) + " " + std::string(why));
    };
    if (value.empty()) {
      error(m.selector_pos, who + "match." + key + " must not be empty");
    } else if (key == "cgroup") {
      if (!value.starts_with('/'))
        bad("must start with '/' (a path from the cgroup root, e.g. \"/" + value + "\")");
    } else if (key == "systemd_unit") {
      // Units are compared with the last element of the cgroup path, which has no '/'.
      if (value.find('/') != std::string::npos)
        bad("can never match: it is compared with the unit name only (the last element of a cgroup "
            "path); to match a cgroup path write cgroup = " +
            in_quotes(value.starts_with('/') ? value : "/" + value));
    } else if (key == "docker") {
      if (!is_container_ref(value)) bad("is not a container name or id");
    } else if (key == "pod") {
      if (value.find('/') != std::string::npos) {
        size_t slash = value.find('/');
        if (value.find('/', slash + 1) != std::string::npos || slash == 0 || slash + 1 == value.size() ||
            !is_k8s_name_glob(value.substr(0, slash)) || !is_k8s_name_glob(value.substr(slash + 1)))
          bad("is not NAMESPACE/NAME (Kubernetes names: lower case letters, digits, '-' and '.', with "
              "globs * ? [...]; e.g. \"trading/matching-engine-*\")");
      } else if (!is_pod_uid(value)) {
        bad("is neither NAMESPACE/NAME nor a Kubernetes pod uid (32 hex digits as 8-4-4-4-12 separated by "
            "'-' or '_', e.g. \"6f1c2a9e-3b7d-4e52-9a81-0c4d5e6f7a8b\"); a name does not change when the "
            "pod is rescheduled, a uid does");
      }
    } else if (key == "podman") {
      if (!is_container_ref(value)) bad("is not a container name or id");
    } else if (key == "vm") {
      // libvirt domain names: anything but '/'; keel compares them with the names in libvirt's state.
      if (value.find('/') != std::string::npos || value.size() > 256)
        bad("is not a libvirt domain name (no '/', at most 256 characters)");
    } else if (key == "pid_file") {
      if (!m.pid_file.is_absolute()) bad("must be an absolute path");
    }
    if (m.container_pos.line != 0 && key != "pod")
      error(m.container_pos, who +
                                 "match.container names a container in a pod: it needs match.pod "
                                 "(\"NAMESPACE/NAME\", globs allowed: pod = \"*/*\" for every pod)");
    else if (m.container_pos.line != 0 && value.find('/') == std::string::npos && key == "pod")
      error(m.container_pos, who +
                                 "match.container needs the pod as NAMESPACE/NAME: containers are "
                                 "named in the runtime's state, which a uid alone does not read");
    else if (m.container_pos.line != 0 && (m.container.empty() || !is_k8s_name_glob(m.container)))
      error(m.container_pos,
            who + "match.container = " + in_quotes(m.container) +
                " is not a container name (lower case letters, digits and '-', globs allowed)");
  }

  void check_bounds(const std::string& who, const Workload& w) {
    const Bounds& b = w.bounds;
    if (b.vcpu_pinning != VcpuPinning::none && w.match.vm.empty())
      error(b.vcpu_pinning_pos, who + "bounds.vcpu_pinning places a VM's vCPU threads: it needs match.vm");
    size_t errors_before = errors_;
    check_cpu_pool(who, b);
    if (b.cpus) check_cpus(who, b);
    // Whether the planner can place it is only worth asking about bounds that are fine on their own.
    bool pool_unreadable = !b.cpu_pool && b.cpu_pool_pos.line != 0;
    if (errors_ == errors_before && !pool_unreadable) check_room(who, w);
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
    else if (pool.subset_of(reserved) && !all_reserved_)
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
    } else if (facts_.cpus && !reserved.empty() && !all_reserved_) {
      unsigned usable = (*facts_.cpus - reserved).count();
      if (r.max > usable)
        error(r.max_pos, max + std::to_string(usable) + " usable CPUs of this host" + never);
    }
    check_numa_fit(who, b);
  }

  // cpus.min against the size of a whole NUMA node. Without the nodes' CPUs it assumes they are
  // spread evenly, which is how every host keel targets is built.
  void check_numa_fit(const std::string& who, const Bounds& b) {
    if (b.numa != NumaPolicy::single) return;
    unsigned per_node = 0;
    bool even = true;
    if (!facts_.numa_cpus.empty()) {
      for (const CpuSet& node : facts_.numa_cpus) {
        even = even && (per_node == 0 || node.count() == per_node);
        per_node = std::max(per_node, node.count());
      }
    } else if (facts_.cpus && facts_.numa_nodes && *facts_.numa_nodes > 0) {
      per_node = facts_.cpus->count() / *facts_.numa_nodes;
    } else {
      return;
    }
    if (b.cpus->min > per_node)
      error(b.numa_pos, who + "bounds.numa = \"single\" but bounds.cpus.min = " +
                            std::to_string(b.cpus->min) + " is more than the " + std::to_string(per_node) +
                            " CPUs of " + (even ? "one" : "the largest") + " NUMA node");
  }

  // What the CPU planner can give a workload at most, before anyone else holds anything: a critical
  // workload whole cores (every SMT sibling inside its pool and none reserved), a best-effort one any
  // CPU of its pool that is not reserved; with numa = "single" all of it from one NUMA node.
  struct Room {
    unsigned cpus = 0;
    unsigned cores = 0;  // whole cores (critical only)
    CpuSet set;
  };

  Room room_in(const CpuSet& allowed, const CpuSet& within, bool whole_cores) const {
    Room room;
    const CpuSet& reserved = config_.host.reserved_cpus;
    if (!whole_cores) {
      room.set = (allowed & within) - reserved;
      room.cpus = room.set.count();
      return room;
    }
    for (const CpuSet& core : facts_.cores) {
      if (core.empty() || !core.subset_of(allowed) || !core.subset_of(within) || core.intersects(reserved))
        continue;
      room.cpus += core.count();
      room.cores += 1;
      room.set |= core;
    }
    return room;
  }

  // cpus.min (1 for a critical workload without bounds.cpus) must fit what the planner can give.
  // Skipped when the host's cores (critical) or NUMA nodes (numa = "single") are unknown.
  void check_room(const std::string& who, const Workload& w) {
    const Bounds& b = w.bounds;
    bool whole_cores = w.klass == WorkloadClass::critical && !facts_.cores.empty();
    bool single = b.numa == NumaPolicy::single && !facts_.numa_cpus.empty();
    if (all_reserved_ || !(whole_cores || (single && b.cpus))) return;
    auto host = host_cpus();
    if (!host) return;
    const CpuSet allowed = b.cpu_pool ? *b.cpu_pool & *host : *host;
    unsigned long long min = b.cpus ? static_cast<unsigned long long>(b.cpus->min) : 1;

    std::optional<size_t> best_node;
    Room room;
    if (single) {
      for (size_t n = 0; n < facts_.numa_cpus.size(); ++n) {
        Room r = room_in(allowed, facts_.numa_cpus[n], whole_cores);
        if (!best_node || r.cpus > room.cpus) best_node = n, room = r;
      }
    } else {
      room = room_in(allowed, allowed, whole_cores);
    }
    if (room.cpus >= min) return;

    std::string unit_one = whole_cores ? "whole core" : "CPU";
    std::string unit_many = whole_cores ? "whole cores" : "CPUs";
    unsigned width = 1;
    for (const CpuSet& core : facts_.cores) width = std::max(width, core.count());
    unsigned long long needed = whole_cores ? (min + width - 1) / width : min;
    unsigned have = whole_cores ? room.cores : room.cpus;

    std::string message = who;
    if (b.cpus)
      message +=
          "bounds.cpus.min = " + std::to_string(min) + " needs " + count_of(needed, unit_one, unit_many);
    else
      message += "class \"critical\" needs at least 1 whole core";
    bool reserved_counts = config_.host.reserved_cpus.intersects(allowed);
    std::string outside = reserved_counts ? " outside reserved_cpus" : "";
    if (single) {
      message += " in one NUMA node (numa = \"single\"), but the most " + unit_many + " any node has" +
                 (b.cpu_pool ? " in cpu_pool " + b.cpu_pool->to_list() : "") + outside + " is " +
                 std::to_string(have);
      if (have > 0) message += " (node " + std::to_string(*best_node) + ")";
    } else {
      message += ", but " + (b.cpu_pool ? "cpu_pool " + b.cpu_pool->to_list() : std::string("this host")) +
                 outside + " has ";
      if (have == 0)
        message += "no " + unit_one;
      else
        message += "only " + count_of(have, unit_one, unit_many) + " (" + cpus_phrase(room.set) + ")";
    }
    if (whole_cores && !b.cpus)
      message += " (a critical workload gets whole cores: every SMT sibling in the pool, none reserved)";
    Pos pos = b.cpus ? b.cpus->min_pos : b.cpu_pool ? b.cpu_pool_pos : w.pos;
    error(pos, message);
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

  // A critical workload without a cpu_pool may be given any CPU of the host, so its pool is the
  // whole host. Reserved CPUs do not count: the planner never hands them to anyone. A cpu_pool
  // that did not parse has been reported already.
  void check_critical_pools_disjoint() {
    const auto& ws = config_.workloads;
    const CpuSet& reserved = config_.host.reserved_cpus;
    auto critical = [](const Workload& w) {
      bool pool_unreadable = !w.bounds.cpu_pool && w.bounds.cpu_pool_pos.line != 0;
      return w.klass == WorkloadClass::critical && !pool_unreadable;
    };
    auto host = host_cpus();
    // The pool's CPUs; nullopt: the whole host, which is not known.
    auto pool_of = [&](const Workload& w) -> std::optional<CpuSet> {
      return w.bounds.cpu_pool ? w.bounds.cpu_pool : host;
    };
    for (size_t j = 0; j < ws.size(); ++j) {
      if (!critical(ws[j])) continue;
      const Workload& b = ws[j];
      for (size_t i = 0; i < j; ++i) {
        if (!critical(ws[i])) continue;
        const Workload& a = ws[i];
        auto pa = pool_of(a), pb = pool_of(b);
        std::optional<CpuSet> shared;  // nullopt: every CPU of a host that is not known
        if (pa && pb)
          shared = (*pa & *pb) - reserved;
        else if (pa || pb)
          shared = (pa ? *pa : *pb) - reserved;
        if (shared && shared->empty()) continue;
        std::string other = "critical workload '" + a.name + "' (line " + std::to_string(a.pos.line) + ")";
        std::string rule = "; pools of critical workloads must not overlap";
        std::string who = workload_label(b.name, j);
        if (b.bounds.cpu_pool) {
          error(b.bounds.cpu_pool_pos,
                who + "bounds.cpu_pool shares " + cpus_phrase(*shared) + " with " + other +
                    (a.bounds.cpu_pool ? "" : ", which has no cpu_pool (the whole host)") + rule);
          continue;
        }
        Pos pos = b.bounds.pos.line != 0 ? b.bounds.pos : b.pos;
        if (a.bounds.cpu_pool)
          error(pos, who + "has no bounds.cpu_pool (the whole host), so it shares " + cpus_phrase(*shared) +
                         " with " + other + rule + " (give each critical workload its own cpu_pool)");
        else
          error(pos, who + "has no bounds.cpu_pool (the whole host), and neither has " + other + rule +
                         " (give each critical workload its own cpu_pool)");
        break;  // one report for a workload that overlaps everything
      }
    }
  }

  const Config& config_;
  const HostFacts& facts_;
  Report& report_;
  size_t errors_ = 0;
  bool all_reserved_ = false;  // host.reserved_cpus covers every CPU of the host
};

}  // namespace

void validate(const Config& config, const HostFacts& facts, Report& report) {
  Validator(config, facts, report).run();
}

}  // namespace keel::config::detail

namespace keel::config {
std::optional<std::string> listen_address_problem(std::string_view address) {
  return detail::listen_problem(address);
}
}  // namespace keel::config
