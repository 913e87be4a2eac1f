// keel's Prometheus metrics (prometheus-cpp): one tick's plain-data report in, the families of
// metrics/catalogue.h out, served over HTTP by an Endpoint. Knows nothing of BPF, cgroups or the
// controller: the control loop fills a TickReport (loop/telemetry.h).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "host/error.h"

namespace prometheus {
class Registry;
}

struct mg_connection;  // civetweb's

namespace keel::metrics {

// One workload instance's signals over one tick. Counts are this tick's increments.
struct WorkloadReport {
  std::string workload;              // instance name ("redis", "batch/job-1"); "other" = unmatched cgroups
  std::string klass;                 // critical | best_effort | other
  std::vector<uint64_t> rq_buckets;  // waits per bucket of the latency layout given to Metrics
  double rq_sum_s = 0;               // their total wait
  uint64_t migrations = 0, cross_llc = 0, cross_numa = 0;
  std::optional<uint64_t> cache_misses, instructions;  // only with a PMU
  std::optional<double> cpu_seconds;                   // CPU time used this tick
  std::optional<double> throttled_periods;             // CFS periods throttled this tick
  // The controller's view; only for workloads it judges against an SLO.
  std::optional<double> p99_s, slo_target_s, slack;
  bool violated = false, blocked = false;
  unsigned rung = 0;
  std::map<std::string, double> knobs;  // knob -> value now (cpus, shares, l3_ways, mba_percent)
};

struct InterferenceReport {
  std::string workload, antagonist;
  double score = 0;
};

struct ProgramReport {
  std::string program;
  uint64_t run_time_ns = 0, run_count = 0;  // cumulative since attach
};

struct HealthReport {
  double tick_seconds = 0;
  double unix_time = 0;  // when the tick finished
  unsigned sensing_errors = 0, actuator_errors = 0;
  unsigned drifts = 0;  // knobs another manager changed after keel this tick
  std::vector<ProgramReport> programs;
  std::optional<double> bpf_seconds_per_event, bpf_events_per_s;  // latest sampled window
  uint64_t map_entries = 0, map_max_entries = 0;
  uint64_t dropped_map_full = 0, dropped_stamp_full = 0;  // this tick
  std::optional<double> process_cpu_seconds;              // cumulative
  std::optional<double> process_rss_bytes;
  // Entries evicted from the per-cgroup BPF map this tick, by reason.
  uint64_t evicted_gone = 0, evicted_idle = 0, evicted_unmatched = 0, evicted_best_effort = 0;
};

// keel_actions_total's label values: the knobs, and the directions in the controller's Action::Kind
// order (act, give_back, revert; the decision log spells the second "give-back"). Every pair is a series
// from the start.
inline constexpr const char* kActionKnobs[] = {"cpus",        "shares",     "l3_ways",
                                               "mba_percent", "steal_task", "class"};
inline constexpr const char* kActionDirections[] = {"act", "give_back", "revert"};

struct TickReport {
  std::vector<WorkloadReport> workloads;
  // Instances already folded into "other" by the report's builder (past the label cap, see LabelCap),
  // by class (critical | best_effort): counted as instances and as folded.
  std::map<std::string, size_t> folded;
  std::vector<InterferenceReport> interference;              // strongest first per victim
  std::vector<std::pair<std::string, std::string>> actions;  // (kActionKnobs, kActionDirections)
  std::optional<bool> steal;                                 // host-wide steal_task, when keel manages it
  size_t starvation_lifts = 0;  // best-effort instances whose preemption class was lifted this tick
  HealthReport health;
};

struct Setup {
  std::string mode;  // enforce | observe
  std::string version;
  std::string revision = "unknown", compiler = "unknown", libbpf = "unknown";  // keel_build_info's labels
  std::vector<double> latency_bucket_upper_s;  // the sensor's layout; the last bucket is open-ended
  std::map<std::string, bool> sensors;         // runqueue, hardware_counters
  std::map<std::string, bool> mechanisms;      // cpuset, cpu_weight, resctrl, steal_task, irq_affinity
  std::string map_name = "cgroup_stats";
  size_t max_workloads = 256;  // labelled instances; the rest count as "other"
  size_t max_antagonists = 5;  // per victim
};

// The Prometheus `le` bounds for a sensor layout: every bound up to 1 ms kept (no precision lost
// there), above it only powers of two (each is a bound of the layout, so buckets merge exactly).
std::vector<double> prometheus_bounds(const std::vector<double>& layout_upper_s);

// The longest label value keel exports, in bytes.
inline constexpr size_t kMaxLabelBytes = 256;

// `name` as a Prometheus label value. Names come from tenants (cgroup paths, container, pod and VM
// names) and a scrape with one invalid UTF-8 byte is rejected whole, so every label value Metrics
// exports passes through here: a name of at most kMaxLabelBytes of valid UTF-8 without control
// characters is itself; otherwise each invalid byte and control character becomes "\xNN" (distinct
// names stay distinct unless one spells out another's escape), and a value still too long keeps its
// start and ends in "...#" and the 16 hex digits of the name's FNV-1a hash (so names sharing a long
// start stay apart).
std::string label_value(std::string_view name);

// Adds `w`'s counts to `to`'s (what "other" gets for an instance past the cap); its SLO view and
// knobs are its own and not added.
void fold_into(WorkloadReport& to, const WorkloadReport& w);

// Which instances keep their own series, across ticks, as Metrics decides it: those labelled the tick
// before while they last, then new ones up to the cap, critical ones first. A report's builder that
// asks folds the rest into "other" itself, so 10,000 instances cost max_workloads reports, not 10,000.
class LabelCap {
 public:
  explicit LabelCap(size_t max) : max_(max) {}
  // `name(i)` and `critical(i)` for the tick's n instances; keep[i] says whether instance i keeps its
  // label.
  template <class Name, class Critical>
  void select(size_t n, Name name, Critical critical, std::vector<char>& keep) {
    keep.assign(n, 0);
    size_t own = 0;
    for (size_t i = 0; i < n; ++i)
      if (labelled_.contains(name(i))) keep[i] = 1, ++own;
    for (int pass = 0; pass < 2; ++pass)
      for (size_t i = 0; i < n && own < max_; ++i)
        if (!keep[i] && critical(i) == (pass == 0)) keep[i] = 1, ++own;
    now_.clear();
    for (size_t i = 0; i < n; ++i)
      if (keep[i]) now_.insert(name(i));
    std::erase_if(labelled_, [&](const std::string& l) { return !now_.contains(l); });
    for (std::string_view l : now_)
      if (!labelled_.contains(l)) labelled_.emplace(l);
  }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  size_t max_;
  std::unordered_set<std::string, Hash, std::equal_to<>> labelled_;  // the names, kept across ticks
  std::unordered_set<std::string_view> now_;                         // this tick's, into its names
};

class Metrics {
 public:
  explicit Metrics(Setup setup);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  void publish(const TickReport& t);
  // A tick whose sensing failed: counted (ticks, errors{kind="sensing"}); the workloads' series stay.
  void sensing_failed(double tick_seconds, double unix_time);
  // The text exposition a scrape returns now.
  std::string render() const;
  // The same, rendered at most once per publish: scrapes between two ticks share one text, and one
  // rendering runs at a time however many scrapes come at once (what the endpoint serves).
  std::shared_ptr<const std::string> text() const;
  std::shared_ptr<prometheus::Registry> registry() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// keel's liveness and readiness for /healthz and /readyz, set by the loop and read by the HTTP server's
// threads. Healthy: a tick ran within 3 periods + 2 s (before the first one: since keel started).
// Ready: healthy, a tick's sensing has worked, and keel is not stopping.
class Health {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Health(std::chrono::nanoseconds period, Clock::time_point started = Clock::now());
  void ticked(bool sensed, Clock::time_point at = Clock::now());
  void set_period(std::chrono::nanoseconds period) { period_ns_.store(period.count()); }
  void stopping() { stopping_.store(true); }
  struct Answer {
    int status = 200;
    std::string body;  // one line, for a person or a probe's log
  };
  Answer healthz(Clock::time_point now = Clock::now()) const;
  Answer readyz(Clock::time_point now = Clock::now()) const;

 private:
  std::atomic<int64_t> period_ns_, last_ns_;  // last: of the latest tick, or the start
  std::atomic<bool> ticked_{false}, sensed_{false}, stopping_{false};
};

// The HTTP endpoint: GET /metrics, /healthz and /readyz. `address` is daemon.metrics_listen
// ("127.0.0.1:9477", "localhost:9477"), already checked as the config checks it; a name is resolved first (to
// IPv4 while the HTTP server has no IPv6). A taken port is a clear error; errors do not name the address's
// source. It listens from the start (so a taken port stops keel before it changes anything) and serves
// nothing until serve() hands it the metrics.
class Endpoint {
 public:
  // ":9477" listens on every (IPv4) address.
  static Result<std::unique_ptr<Endpoint>> listen(const std::string& address);
  // /metrics from `metrics`; /healthz and /readyz from `health` (503 "starting" until then).
  void serve(const Metrics& metrics, const Health* health = nullptr);
  ~Endpoint();
  std::string address() const;  // what it listens on, numeric ("127.0.0.1:9477")

 private:
  struct State;
  explicit Endpoint(std::unique_ptr<State> s);
  template <Health::Answer (Health::*probe)(Health::Clock::time_point) const>
  static int answer(::mg_connection* conn, void* data);
  std::unique_ptr<State> s_;
};

// /healthz and /readyz alone on an address of their own (daemon.health_listen), for a liveness probe no
// client of the metrics endpoint can starve: one thread over non-blocking sockets, a connection given
// kHealthRequestTimeout to send its request (at most kMaxHealthRequest bytes), at most
// kMaxHealthClients open at once (a new one closes the oldest), the answer one small write.
inline constexpr size_t kMaxHealthClients = 64, kMaxHealthRequest = 2048;
inline constexpr std::chrono::milliseconds kHealthRequestTimeout{1000};
class HealthListener {
 public:
  static Result<std::unique_ptr<HealthListener>> listen(const std::string& address);
  void serve(const Health* health);  // 503 "starting" until then
  ~HealthListener();
  std::string address() const;  // numeric

 private:
  struct State;
  explicit HealthListener(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

}  // namespace keel::metrics
