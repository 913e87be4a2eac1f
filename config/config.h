// keel's configuration: plain data parsed from TOML, validated in one place (config/validate.cpp).
#pragma once

#include <chrono>
#include <expected>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "host/cgroup_files.h"
#include "host/cpuset.h"
#include "host/error.h"

namespace keel::config {

// Where a value came from in the config file (1-based; 0 = not from the file, a default).
struct Pos {
  int line = 0;
  int col = 0;
};

// One problem found in a config file. str() is "FILE:LINE:COL: message".
struct Diagnostic {
  std::string file;
  Pos pos;
  std::string message;
  std::string str() const;
};

enum class Mode { observe, enforce };
// What a stop signal does with the knobs keel set (tuned's rollback): auto gives every one back;
// not_on_exit leaves them and the journal for the next keel to adopt (an upgrade, a restart).
enum class Rollback { automatic, not_on_exit };
enum class Hierarchy { automatic, unified, cpu, cpuset };
enum class WorkloadClass { critical, best_effort };
enum class NumaPolicy { any, single };
// How a VM's vCPU threads are placed on its CPUs: all on all of them, or each vCPU on a CPU of its own,
// one per core before a second thread of a core (what `virsh vcpupin` does by hand).
enum class VcpuPinning { none, one_per_core };

struct IntRange {
  long long min = 0;
  long long max = 0;
  Pos pos;  // the { min, max } table
  Pos min_pos;
  Pos max_pos;
};

struct Daemon {
  Mode mode = Mode::observe;
  std::chrono::nanoseconds period = std::chrono::seconds(1);
  std::filesystem::path state_dir = "/var/lib/keel";
  std::string metrics_listen = "127.0.0.1:9477";
  // /healthz and /readyz alone, for a liveness probe no client of the metrics port can starve; "off".
  std::string health_listen = "off";
  // Workload instances labelled in the metrics (critical ones first); the rest count as "other".
  long long metrics_max_workloads = 256;
  Hierarchy hierarchy = Hierarchy::automatic;
  // A critical cgroup's waits over its SLO wake keel for a tick at once (at most one early tick per
  // 100 ms) instead of at the period's end.
  bool early_ticks = true;
  Rollback rollback = Rollback::automatic;
  Pos period_pos;
  Pos state_dir_pos;
  Pos metrics_listen_pos;
  Pos health_listen_pos;
  Pos metrics_max_workloads_pos;
};

struct HostSection {
  CpuSet reserved_cpus;
  Pos reserved_cpus_pos;
  // Where the runtimes keep their state when not where they do by default (dockerd's data-root,
  // containerd's state directory, ...): absolute paths on the host, under --root when given.
  struct StateRoot {
    std::string key;  // "docker_root", "containerd_state", "crio_state", "podman_store", "libvirt_state",
                      // "kubelet_root"
    std::filesystem::path path;
    Pos pos;
  };
  std::vector<StateRoot> state_roots;
};

// How cgroups are matched to a workload. Exactly one selector is set.
struct Match {
  std::string cgroup;        // glob on the cgroup path from the hierarchy root: * within a level, ** across
  std::string systemd_unit;  // unit name or glob: "redis-server.service", "docker-*.scope"
  std::string docker;        // container name or id (or id prefix, >= 12 hex digits)
  std::string pod;           // Kubernetes pod: its uid (dashes or underscores), or "NAMESPACE/NAME" (globs)
  std::string container;     // with pod: the pod's containers of this name (glob), not the whole pod
  std::string podman;        // podman container name
  std::string vm;            // libvirt domain name (glob)
  std::filesystem::path pid_file;  // a file holding a pid; its cgroup is matched
  bool has_tasks = false;          // only cgroups that hold tasks right now
  bool each = false;               // every matched cgroup is its own instance ("name/<leaf>")
  bool by_path = false;  // (never from a file) each matched cgroup its own instance, named by its path
  Pos pos;
  Pos selector_pos;  // the value of the one selector
  Pos container_pos;
  // The selector keys the file wrote, in the order cgroup, systemd_unit, docker, pod, podman, vm, pid_file
  // (the validator requires exactly one).
  std::vector<std::string> selector_keys;
};

struct Slo {
  std::optional<std::chrono::nanoseconds> runqueue_p99;
  std::optional<double> migrations_per_s;  // at most this many migrations per second (all scopes)
  std::optional<double> mpki;  // at most this many cache misses per 1000 instructions (needs a PMU)
  Pos pos;
  Pos runqueue_p99_pos;
  Pos migrations_per_s_pos;
  Pos mpki_pos;
};

struct Bounds {
  std::optional<IntRange> cpus;    // number of CPUs the workload may hold
  std::optional<CpuSet> cpu_pool;  // CPUs it may be given
  Pos cpu_pool_pos;
  NumaPolicy numa = NumaPolicy::any;
  VcpuPinning vcpu_pinning = VcpuPinning::none;
  Pos vcpu_pinning_pos;
  std::optional<IntRange> shares;       // cgroup v1 cpu.shares (v2 weight is mapped from it)
  std::optional<IntRange> l3_ways;      // resctrl L3 ways
  std::optional<IntRange> mba_percent;  // resctrl memory bandwidth percent
  Pos pos;
  Pos numa_pos;
};

struct Workload {
  std::string name;
  Match match;
  WorkloadClass klass = WorkloadClass::best_effort;
  Slo slo;
  Bounds bounds;
  Pos pos;       // the [[workload]] header
  Pos name_pos;  // the name's value; line 0 when the file has no name
};

// How cgroup v1 shares become a cgroup v2 cpu.weight (host/cgroup_files.h): systemd's linear mapping,
// or runc's newer logarithmic one (which keeps 2 -> 1, 1024 -> 100, 262144 -> 10000 but spreads the
// low end).
using WeightMapping = keel::WeightMapping;

// When best-effort work is put in the preemption class (actuators/cgroup_knobs.h: cpu.idle, or a
// vendor kernel's equivalent): from the first tick while a critical instance shares its CPUs
// (`always`), as the first rung of the ladder when a critical instance is violated (`reactive`), or
// never (`off`).
enum class PreemptMode { always, reactive, off };

struct Actuators {
  bool cpuset = true;
  bool cpu_weight = true;
  bool resctrl = false;
  bool steal_task = false;
  bool irq_affinity = false;
  // While critical instances hold CPUs, top-level cgroups no workload is in are kept off them (with
  // their descendants); with `isolate_root_tasks` also the root cgroup's user-space processes, moved
  // into a cpuset group keel creates (and moved back when it is given back or keel stops).
  bool isolate_unmanaged = false;
  bool isolate_root_tasks = false;
  Pos isolate_unmanaged_pos, isolate_root_tasks_pos;
  WeightMapping weight_mapping = WeightMapping::systemd;
  PreemptMode preempt_class = PreemptMode::always;
  // A best-effort instance in the class that stays runnable and starved (tasks waiting, almost no CPU)
  // this long has it lifted for one tick, so it keeps making progress (openEuler's kernel does the
  // same for its offline class).
  std::chrono::nanoseconds starvation_limit = std::chrono::seconds(5);
  Pos starvation_limit_pos;
  std::vector<std::string> irq_names;  // globs on /proc/interrupts device names, kept off critical CPUs
  Pos pos;
  Pos irq_names_pos;
  bool irq_names_read = false;  // the key was present and well-formed
};

struct Config {
  std::filesystem::path file;
  Daemon daemon;
  HostSection host;
  std::vector<Workload> workloads;
  Actuators actuators;
  // What the file says that keel accepts but will not use ("FILE:L:C: warning: ..."), in file order.
  std::vector<Diagnostic> warnings;
};

// What the host can give, for checks that depend on the machine. Unknown facts skip their checks.
struct HostFacts {
  std::optional<CpuSet> cpus;  // CPUs that exist (online)
  std::optional<unsigned> numa_nodes;
  std::optional<unsigned> l3_ways;       // bits in resctrl info/L3/cbm_mask
  std::optional<unsigned> min_cbm_bits;  // resctrl info/L3/min_cbm_bits
  std::optional<unsigned> mba_min;       // resctrl info/MB/min_bandwidth
  std::vector<CpuSet> numa_cpus;         // CPUs of each NUMA node (empty: unknown)
  std::vector<CpuSet> cores;             // SMT siblings of each core (empty: unknown)
};

using Diagnostics = std::vector<Diagnostic>;

// Parses and validates. On any problem returns every diagnostic found, in file order.
std::expected<Config, Diagnostics> load_file(const std::filesystem::path& file, const HostFacts& facts);
std::expected<Config, Diagnostics> load_string(std::string_view text, const std::string& file_name,
                                               const HostFacts& facts);

// "observe", "critical", ... for printing (the spelling the config file uses).
const char* to_string(Mode m);
const char* to_string(Hierarchy h);
const char* to_string(WorkloadClass c);
const char* to_string(NumaPolicy n);
const char* to_string(PreemptMode p);

// Durations as the config writes them: "1s", "200us", "1.5ms" (units ns, us, ms, s, m, h); > 0 and
// at most what nanoseconds hold (about 2562047h). Error::what says why the text is not a duration.
Result<std::chrono::nanoseconds> parse_duration(std::string_view text);
// The shortest exact form: 1500000ns -> "1500us", 2000000000ns -> "2s".
std::string format_duration(std::chrono::nanoseconds d);

// What is wrong with a metrics listen address ("host:port", "[v6]:port"), or nothing: the check
// daemon.metrics_listen gets, for the same address given another way (keel run --metrics-listen).
std::optional<std::string> listen_address_problem(std::string_view address);

}  // namespace keel::config
