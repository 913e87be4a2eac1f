#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <thread>

#include "bpf/features.h"
#include "bpf/sched_sensor.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/host_facts.h"
#include "config/config.h"
#include "host/cgroup_stats.h"
#include "host/json.h"
#include "host/topology.h"
#include "inventory/workloads.h"

namespace keel::cli {

namespace {

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

// One line of the table: a cgroup, or (with a config) a workload instance over its cgroups.
struct Row {
  std::string name;    // cgroup path, or instance name
  std::string cgroup;  // first cgroup path
  std::string workload;
  bpf::RqHistogram rq;
  uint64_t migrations = 0, cross_llc = 0, cross_numa = 0;
  std::array<uint64_t, KEEL_MAX_COUNTERS> counters{};  // hardware_counters() order, with a PMU
  std::optional<double> cpu_pct;
  std::optional<double> throttled_per_s;
};

struct Prev {
  std::optional<uint64_t> usage_ns, nr_throttled;
};

std::string fmt_opt(const std::optional<double>& v, const char* f) {
  if (!v) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, f, *v);
  return buf;
}

}  // namespace

int cmd_top(const std::vector<std::string>& argv) {
  auto args =
      parse_args(argv, {.switches = {"json"}, .with_value = {"interval", "count", "config", "bpf-stats"}});
  if (!args) return usage_error("top", args.error().message());
  if (!args->positional.empty()) return usage_error("top", "takes no arguments");
  double interval = 1.0;
  long count = -1;
  try {
    if (auto v = args->value("interval")) interval = std::stod(*v);
    if (auto v = args->value("count")) count = std::stol(*v);
  } catch (const std::exception&) {
    return usage_error("top", "--interval takes seconds (e.g. 0.5), --count a whole number");
  }
  if (!(interval >= 0.05 && interval <= 3600))
    return usage_error("top", "--interval must be 0.05 .. 3600 seconds");
  if (args->value("count") && count < 1) return usage_error("top", "--count must be at least 1");

  const SysRoots roots = SysRoots::host();
  std::vector<config::Workload> workloads;
  config::Hierarchy choice = config::Hierarchy::automatic;
  if (auto file = args->value("config")) {
    auto cfg = load_config_for_host("top", *file, roots);
    if (!cfg) return cfg.error();
    workloads = cfg->workloads;
    choice = cfg->daemon.hierarchy;
  }
  auto layout = discover(roots);
  if (!layout) {
    std::fprintf(stderr, "keel top: %s\n", layout.error().message().c_str());
    return kExitFailure;
  }
  auto hierarchy = choose_hierarchy(*layout, choice);
  if (!hierarchy) {
    std::fprintf(stderr, "keel top: %s\n", hierarchy.error().message().c_str());
    return kExitFailure;
  }
  auto topo = Topology::detect(roots);
  if (!topo) {
    std::fprintf(stderr, "keel top: %s\n", topo.error().message().c_str());
    return kExitFailure;
  }
  // BPF run-time stats cost every BPF program on the host two clock reads per run: sampled (one
  // interval in ten) by default.
  bpf::BpfStats stats = bpf::BpfStats::sampled;
  if (auto v = args->value("bpf-stats")) {
    if (*v == "off")
      stats = bpf::BpfStats::off;
    else if (*v == "sampled")
      stats = bpf::BpfStats::sampled;
    else if (*v == "always")
      stats = bpf::BpfStats::always;
    else
      return usage_error("top", "--bpf-stats takes sampled (one interval in ten), always or off");
  }
  // Cache misses, references, instructions and cycles where there is a PMU; "n/a", never 0, without.
  auto opened = bpf::open_host_sensor(*hierarchy, *topo, stats);
  if (!opened) {
    std::fprintf(stderr, "keel top: %s%s\n", opened.error().message().c_str(),
                 ::geteuid() != 0 ? " (keel top needs root: it loads BPF programs)" : "");
    return kExitFailure;
  }
  bpf::SchedSensor* sensor = &opened->sensor;
  const bool pmu = opened->pmu;
  const std::string counters_note = opened->counters_note;

  ::signal(SIGINT, on_signal);
  ::signal(SIGTERM, on_signal);
  std::map<std::string, Prev> prev;
  std::vector<Cgroup> cgroups;
  auto last = std::chrono::steady_clock::now();
  for (long n = 0; (count < 0 || n < count) && !g_stop; ++n) {
    auto until = last + std::chrono::duration<double>(interval);
    while (!g_stop && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (g_stop) break;
    auto now = std::chrono::steady_clock::now();
    double secs = std::chrono::duration<double>(now - last).count();
    last = now;

    auto delta = sensor->read();
    if (!delta) {
      std::fprintf(stderr, "keel top: %s\n", delta.error().message().c_str());
      return kExitFailure;
    }
    if (auto r = enumerate_cgroups(*hierarchy, cgroups); !r) {
      std::fprintf(stderr, "keel top: %s\n", r.error().message().c_str());
      return kExitFailure;
    }
    std::vector<CgroupId> live;
    std::map<CgroupId, const WorkloadMatch*> by_id;
    auto matches = match_workloads(workloads, *hierarchy, cgroups, roots);
    for (const auto& m : matches.cgroups) {
      live.push_back(m.id);
      by_id[m.id] = &m;
    }
    sensor->reclaim(live);

    std::map<std::string, Row> rows;
    for (const auto& c : delta->cgroups) {
      auto it = by_id.find(c.id);
      if (it == by_id.end()) continue;  // vanished since
      const WorkloadMatch& m = *it->second;
      if (!workloads.empty() && m.workload.empty()) continue;  // with a config: workloads only
      std::string key = workloads.empty() ? m.path : m.instance;
      Row& r = rows[key];
      if (r.name.empty()) {
        r.name = key;
        r.cgroup = m.path;
        r.workload = m.instance;
      }
      r.rq += c.rq;
      r.migrations += c.migrations;
      r.cross_llc += c.cross_llc;
      r.cross_numa += c.cross_numa;
      for (size_t k = 0; k < r.counters.size(); ++k) r.counters[k] += c.counters[k];
    }
    for (auto& [key, r] : rows) {
      CgroupCpuStats st = read_cpu_stats(*layout, r.cgroup);
      Prev& p = prev[r.cgroup];
      if (st.usage_ns && p.usage_ns && *st.usage_ns >= *p.usage_ns)
        r.cpu_pct = static_cast<double>(*st.usage_ns - *p.usage_ns) / (secs * 1e9) * 100.0;
      if (st.nr_throttled && p.nr_throttled && *st.nr_throttled >= *p.nr_throttled)
        r.throttled_per_s = static_cast<double>(*st.nr_throttled - *p.nr_throttled) / secs;
      p.usage_ns = st.usage_ns;
      p.nr_throttled = st.nr_throttled;
    }
    // keel's own cost, from the latest interval that had BPF run-time stats on.
    auto cost = sensor->cost();
    // Misses per thousand instructions and instructions per cycle, only from real counts.
    auto mpki = [&](const Row& r) -> std::optional<double> {
      if (!pmu || r.counters[2] == 0) return std::nullopt;
      return static_cast<double>(r.counters[0]) * 1000.0 / static_cast<double>(r.counters[2]);
    };
    auto ipc = [&](const Row& r) -> std::optional<double> {
      if (!pmu || r.counters[3] == 0) return std::nullopt;
      return static_cast<double>(r.counters[2]) / static_cast<double>(r.counters[3]);
    };
    auto per_s = [&](const Row& r, size_t k) -> std::optional<double> {
      if (!pmu) return std::nullopt;
      return static_cast<double>(r.counters[k]) / secs;
    };
    auto opt = [](JsonWriter& j, const char* key, const std::optional<double>& v) {
      j.key(key);
      v ? j.value(*v) : j.null();
    };

    std::vector<const Row*> order;
    for (const auto& [k, r] : rows) order.push_back(&r);
    std::sort(order.begin(), order.end(),
              [](const Row* a, const Row* b) { return a->rq.quantile_us(0.99) > b->rq.quantile_us(0.99); });

    if (args->has("json")) {
      JsonWriter j;
      j.begin_object()
          .field("time", static_cast<long long>(std::time(nullptr)))
          .field("interval_s", secs)
          .field("attach", bpf::to_string(sensor->kind()))
          .field("hierarchy", hierarchy->name())
          .field("hw_pmu", pmu)
          .field("dropped_map_full", delta->map_full)
          .field("dropped_stamps", delta->stamp_full);
      opt(j, "bpf_events_per_s", cost ? std::optional(cost->events_per_s) : std::nullopt);
      opt(j, "bpf_ns_per_event", cost ? std::optional(cost->ns_per_event) : std::nullopt);
      j.key("rows").begin_array();
      for (const Row* r : order) {
        j.begin_object().field("cgroup", r->cgroup);
        if (!workloads.empty()) j.field("workload", r->workload);
        j.field("rq_p50_us", r->rq.quantile_us(0.5))
            .field("rq_p99_us", r->rq.quantile_us(0.99))
            .field("rq_waits_per_s", static_cast<double>(r->rq.count) / secs)
            .field("rq_mean_us",
                   r->rq.count ? static_cast<double>(r->rq.sum_ns) / 1e3 / static_cast<double>(r->rq.count)
                               : 0.0)
            .field("migrations_per_s", static_cast<double>(r->migrations) / secs)
            .field("cross_llc_per_s", static_cast<double>(r->cross_llc) / secs)
            .field("cross_numa_per_s", static_cast<double>(r->cross_numa) / secs);
        j.key("cpu_usage_pct");
        r->cpu_pct ? j.value(*r->cpu_pct) : j.null();
        j.key("throttled_per_s");
        r->throttled_per_s ? j.value(*r->throttled_per_s) : j.null();
        opt(j, "cache_misses_per_s", per_s(*r, 0));
        opt(j, "cache_refs_per_s", per_s(*r, 1));
        opt(j, "instructions_per_s", per_s(*r, 2));
        opt(j, "cycles_per_s", per_s(*r, 3));
        opt(j, "mpki", mpki(*r));
        opt(j, "ipc", ipc(*r));
        j.end_object();
      }
      j.end_array().end_object();
      std::printf("%s\n", j.str().c_str());
    } else {
      char ts[32];
      std::time_t t = std::time(nullptr);
      std::strftime(ts, sizeof ts, "%H:%M:%S", std::localtime(&t));
      std::printf("keel top  %s  %.1fs  %s  hierarchy %s  MPKI %s\n", ts, secs,
                  bpf::to_string(sensor->kind()), hierarchy->name().c_str(), counters_note.c_str());
      std::printf("%-40s %9s %9s %8s %7s %7s %7s %6s %6s %5s %4s\n",
                  workloads.empty() ? "CGROUP" : "WORKLOAD", "RQ_P50us", "RQ_P99us", "WAITS/s", "MIGR/s",
                  "XLLC/s", "XNUMA/s", "CPU%", "THR/s", "MPKI", "IPC");
      for (const Row* r : order)
        std::printf("%-40s %9.0f %9.0f %8.0f %7.1f %7.1f %7.1f %6s %6s %5s %4s\n",
                    r->name.substr(0, 40).c_str(), r->rq.quantile_us(0.5), r->rq.quantile_us(0.99),
                    static_cast<double>(r->rq.count) / secs, static_cast<double>(r->migrations) / secs,
                    static_cast<double>(r->cross_llc) / secs, static_cast<double>(r->cross_numa) / secs,
                    fmt_opt(r->cpu_pct, "%.1f").c_str(), fmt_opt(r->throttled_per_s, "%.1f").c_str(),
                    fmt_opt(mpki(*r), "%.1f").c_str(), fmt_opt(ipc(*r), "%.2f").c_str());
      if (delta->map_full || delta->stamp_full)
        std::printf("dropped: %llu events (cgroup map full), %llu wakeups (stamp map full)\n",
                    static_cast<unsigned long long>(delta->map_full),
                    static_cast<unsigned long long>(delta->stamp_full));
      if (cost)
        std::printf("keel's BPF cost: %.0f ns/event, %.0f events/s (%.3f%% of one CPU)\n", cost->ns_per_event,
                    cost->events_per_s, cost->cpu_share() * 100.0);
      std::printf("\n");
    }
    std::fflush(stdout);
  }
  return kExitOk;
}

}  // namespace keel::cli
