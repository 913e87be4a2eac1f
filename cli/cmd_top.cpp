// keel top: keel's sensing (loop/sensing.h) shown live, one row per cgroup (or per workload instance
// with a config) whose tasks did anything in the interval.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <expected>
#include <optional>
#include <string>
#include <vector>

#include "bpf/sched_sensor.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/host_facts.h"
#include "cli/usage.h"
#include "config/spec.h"
#include "host/json.h"
#include "host/topology.h"
#include "loop/daemon.h"
#include "loop/events.h"
#include "loop/loop.h"
#include "loop/sensing.h"

namespace keel::cli {

namespace {

std::string fmt_opt(const std::optional<double>& v, const char* f) {
  if (!v) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, f, *v);
  return buf;
}

Json opt(const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); }

// Without a config every cgroup is its own row, named by its path (the root's too).
config::Config every_cgroup() {
  config::Config c;
  for (const char* glob : {"/", "/**"}) {
    config::Workload w;
    w.name = "cgroup";
    w.match.cgroup = glob;
    w.match.by_path = true;
    c.workloads.push_back(std::move(w));
  }
  return c;
}

// One row: an instance whose tasks did anything this interval.
struct Row {
  const ctl::WorkloadSignals* signals;
  const loop::SensedCounts::Counts* counts;
};

// One interval's rows (by their p99, highest first) and what every row's numbers need.
struct Frame {
  const loop::Sensor& sensor;
  const loop::SensedCounts& counts;
  std::string hierarchy;
  bool by_workload = false;
  bool pmu = false;
  double secs = 0;
  std::vector<Row> rows;
  std::optional<bpf::BpfCost> cost;  // keel's own, from the latest interval that had BPF run-time stats on

  double counter(const Row& r, bpf::Counter c) const {
    return static_cast<double>(bpf::count_of(r.counts->counters, c));
  }
  // Misses per thousand instructions and instructions per cycle, only from real counts.
  std::optional<double> mpki(const Row& r) const {
    if (!pmu || counter(r, bpf::Counter::instructions) == 0) return std::nullopt;
    return counter(r, bpf::Counter::cache_misses) * 1000.0 / counter(r, bpf::Counter::instructions);
  }
  std::optional<double> ipc(const Row& r) const {
    if (!pmu || counter(r, bpf::Counter::cycles) == 0) return std::nullopt;
    return counter(r, bpf::Counter::instructions) / counter(r, bpf::Counter::cycles);
  }
  std::optional<double> per_s(const Row& r, bpf::Counter c) const {
    if (!pmu) return std::nullopt;
    return counter(r, c) / secs;
  }
  static std::optional<double> cpu_pct(const Row& r) {
    if (!r.signals->cpu_usage) return std::nullopt;
    return *r.signals->cpu_usage * 100.0;
  }
};

void print_json(const Frame& f) {
  const loop::SensedCounts& counts = f.counts;
  const auto& cost = f.cost;
  Json j = {{"time", static_cast<long long>(std::time(nullptr))},
            {"interval_s", f.secs},
            {"attach", bpf::to_string(f.sensor.attach())},
            {"hierarchy", f.hierarchy},
            {"hw_pmu", f.pmu},
            {"dropped_map_full", counts.map_full},
            {"dropped_stamps", counts.stamp_full},
            {"map_entries", counts.map_entries},
            {"map_capacity", counts.map_capacity},
            {"evicted_gone", counts.evicted.gone},
            {"evicted_idle", counts.evicted.idle},
            {"evicted_unmatched", counts.evicted.unmatched},
            {"evicted_best_effort", counts.evicted.best_effort},
            {"bpf_events_per_s", opt(cost ? std::optional(cost->events_per_s) : std::nullopt)},
            {"bpf_ns_per_event", opt(cost ? std::optional(cost->ns_per_event) : std::nullopt)}};
  Json list = Json::array();
  for (const Row& r : f.rows) {
    const bpf::RqHistogram& rq = r.counts->rq;
    const double secs = f.secs;
    Json row = {{"cgroup", r.signals->cgroups.front()}};
    if (f.by_workload) row["workload"] = r.signals->instance;
    row["rq_p50_us"] = rq.quantile_us(0.5);
    row["rq_p99_us"] = rq.quantile_us(0.99);
    row["rq_waits_per_s"] = static_cast<double>(rq.count) / secs;
    row["rq_mean_us"] = rq.count ? static_cast<double>(rq.sum_ns) / 1e3 / static_cast<double>(rq.count) : 0.0;
    row["migrations_per_s"] = static_cast<double>(r.counts->migrations) / secs;
    row["cross_llc_per_s"] = static_cast<double>(r.counts->cross_llc) / secs;
    row["cross_numa_per_s"] = static_cast<double>(r.counts->cross_numa) / secs;
    row["cpu_usage_pct"] = opt(Frame::cpu_pct(r));
    row["throttled_per_s"] = opt(r.signals->throttled_per_s);
    row["cache_misses_per_s"] = opt(f.per_s(r, bpf::Counter::cache_misses));
    row["cache_refs_per_s"] = opt(f.per_s(r, bpf::Counter::cache_references));
    row["instructions_per_s"] = opt(f.per_s(r, bpf::Counter::instructions));
    row["cycles_per_s"] = opt(f.per_s(r, bpf::Counter::cycles));
    row["mpki"] = opt(f.mpki(r));
    row["ipc"] = opt(f.ipc(r));
    list.push_back(std::move(row));
  }
  j["rows"] = std::move(list);
  std::printf("%s\n", json_text(j).c_str());
}

void print_table(const Frame& f) {
  const loop::SensedCounts& counts = f.counts;
  const double secs = f.secs;
  char ts[32];
  std::time_t t = std::time(nullptr);
  std::strftime(ts, sizeof ts, "%H:%M:%S", std::localtime(&t));
  std::printf("keel top  %s  %.1fs  %s  hierarchy %s  MPKI %s\n", ts, secs, bpf::to_string(f.sensor.attach()),
              f.hierarchy.c_str(), f.sensor.counters_note().c_str());
  std::printf("%-40s %9s %9s %8s %7s %7s %7s %6s %6s %5s %4s\n", f.by_workload ? "WORKLOAD" : "CGROUP",
              "RQ_P50us", "RQ_P99us", "WAITS/s", "MIGR/s", "XLLC/s", "XNUMA/s", "CPU%", "THR/s", "MPKI",
              "IPC");
  for (const Row& r : f.rows) {
    const bpf::RqHistogram& rq = r.counts->rq;
    std::printf("%-40s %9.0f %9.0f %8.0f %7.1f %7.1f %7.1f %6s %6s %5s %4s\n",
                r.signals->instance.substr(0, 40).c_str(), rq.quantile_us(0.5), rq.quantile_us(0.99),
                static_cast<double>(rq.count) / secs, static_cast<double>(r.counts->migrations) / secs,
                static_cast<double>(r.counts->cross_llc) / secs,
                static_cast<double>(r.counts->cross_numa) / secs, fmt_opt(Frame::cpu_pct(r), "%.1f").c_str(),
                fmt_opt(r.signals->throttled_per_s, "%.1f").c_str(), fmt_opt(f.mpki(r), "%.1f").c_str(),
                fmt_opt(f.ipc(r), "%.2f").c_str());
  }
  if (counts.map_full || counts.stamp_full)
    std::printf("dropped: %llu events (cgroup map full), %llu wakeups (stamp map full)\n",
                static_cast<unsigned long long>(counts.map_full),
                static_cast<unsigned long long>(counts.stamp_full));
  if (counts.evicted.total())
    std::printf(
        "cgroup map %zu of %zu entries; evicted: %llu gone, %llu idle, %llu no workload's, %llu "
        "best-effort\n",
        counts.map_entries, counts.map_capacity, static_cast<unsigned long long>(counts.evicted.gone),
        static_cast<unsigned long long>(counts.evicted.idle),
        static_cast<unsigned long long>(counts.evicted.unmatched),
        static_cast<unsigned long long>(counts.evicted.best_effort));
  if (f.cost)
    std::printf("keel's BPF cost: %.0f ns/event, %.0f events/s (%.3f%% of one CPU)\n", f.cost->ns_per_event,
                f.cost->events_per_s, f.cost->cpu_share() * 100.0);
  std::printf("\n");
}

// The command line: the interval, how many (-1: until stopped), the BPF stats mode; else the exit code.
struct TopOptions {
  double interval = 1.0;
  long count = -1;
  bpf::BpfStats stats{};
};
std::expected<TopOptions, int> top_options(const Args& args) {
  TopOptions o;
  if (!args.positional.empty()) return std::unexpected(usage_error("top", "takes no arguments"));
  if (auto v = args.value("interval")) {
    auto n = parse_real(*v);
    if (!n)
      return std::unexpected(usage_error("top", "--interval takes seconds (e.g. 0.5), got '" + *v + "'"));
    o.interval = *n;
  }
  if (auto v = args.value("count")) {
    auto n = parse_whole(*v);
    if (!n) return std::unexpected(usage_error("top", "--count takes a whole number, got '" + *v + "'"));
    o.count = *n;
  }
  if (!(o.interval >= 0.05 && o.interval <= 3600))
    return std::unexpected(usage_error("top", "--interval must be 0.05 .. 3600 seconds"));
  if (args.value("count") && o.count < 1)
    return std::unexpected(usage_error("top", "--count must be at least 1"));
  // BPF run-time stats cost every BPF program on the host two clock reads per run: sampled (one
  // interval in ten) by default.
  auto stats = parse_bpf_stats(args.value("bpf-stats"));
  if (!stats)
    return std::unexpected(
        usage_error("top", "--bpf-stats takes sampled (one interval in ten), always or off"));
  o.stats = *stats;
  return o;
}

}  // namespace

int cmd_top(const std::vector<std::string>& argv) {
  auto args = parse_args(argv, command_usage("top")->flags);
  if (!args) return usage_error("top", args.error().message());
  auto o = top_options(*args);
  if (!o) return o.error();
  auto events = loop::Events::open();
  if (!events) {
    std::fprintf(stderr, "keel top: %s\n", events.error().message().c_str());
    return kExitFailure;
  }
  const SysRoots roots = SysRoots::host();
  config::Config cfg = every_cgroup();
  const bool by_workload = args->value("config").has_value();
  if (auto file = args->value("config")) {
    auto loaded = load_config_for_host("top", *file, roots);
    if (!loaded) return loaded.error();
    cfg = *loaded;
  }
  auto topo = Topology::detect(roots);
  if (!topo) {
    std::fprintf(stderr, "keel top: %s\n", topo.error().message().c_str());
    return kExitFailure;
  }
  // Cache misses, references, instructions and cycles where there is a PMU; "n/a", never 0, without.
  auto sensing = loop::Sensing::open(loop::compile_for_host(cfg, roots, *topo, [](const std::string&) {}),
                                     roots, *topo, o->stats);
  if (!sensing) {
    std::fprintf(stderr, "keel top: %s\n", sensing.error().message().c_str());
    return kExitFailure;
  }
  auto last = std::chrono::steady_clock::now();
  for (long n = 0; o->count < 0 || n < o->count; ++n) {
    auto until = last + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(o->interval));
    if (events->wait_until(until) == loop::Events::Wake::stop) break;
    last = std::chrono::steady_clock::now();
    auto snap = sensing->sample(static_cast<uint64_t>(n) + 1);
    if (!snap) {
      std::fprintf(stderr, "keel top: %s\n", snap.error().message().c_str());
      return kExitFailure;
    }
    Frame f{sensing->sensor(),
            sensing->counts(),
            sensing->inventory().defining().name(),
            by_workload,
            sensing->sensor().pmu(),
            snap->period_s,
            {},
            sensing->sensor().cost()};
    const auto& records = sensing->records();  // by the snapshot's index
    for (size_t i = 0; i < snap->workloads.size() && i < records.size(); ++i)
      if (records[i].counts != nullptr) f.rows.push_back({&snap->workloads[i], records[i].counts});
    std::sort(f.rows.begin(), f.rows.end(), [](const Row& a, const Row& b) {
      return a.counts->rq.quantile_us(0.99) > b.counts->rq.quantile_us(0.99);
    });
    if (args->has("json"))
      print_json(f);
    else
      print_table(f);
    std::fflush(stdout);
  }
  return kExitOk;
}

}  // namespace keel::cli
