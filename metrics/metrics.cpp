#include "metrics/metrics.h"

#include <arpa/inet.h>
#include <civetweb.h>
#include <netdb.h>
#include <netinet/in.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string_view>
#include <unordered_set>

#include "metrics/catalogue.h"
#include "metrics/listen.h"

namespace keel::metrics {

namespace {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;
using prometheus::Labels;

const MetricDef& def(std::string_view name) {
  for (const auto& d : kCatalogue)
    if (d.name == name) return d;
  throw std::logic_error("metric not in the catalogue: " + std::string(name));
}

Family<Counter>& counter(prometheus::Registry& r, std::string_view name) {
  const auto& d = def(name);
  return prometheus::BuildCounter().Name(std::string(d.name)).Help(std::string(d.help)).Register(r);
}
Family<Gauge>& gauge(prometheus::Registry& r, std::string_view name) {
  const auto& d = def(name);
  return prometheus::BuildGauge().Name(std::string(d.name)).Help(std::string(d.help)).Register(r);
}
Family<Histogram>& histogram(prometheus::Registry& r, std::string_view name) {
  const auto& d = def(name);
  return prometheus::BuildHistogram().Name(std::string(d.name)).Help(std::string(d.help)).Register(r);
}

// A counter fed with cumulative values read elsewhere (the kernel's BPF stats, keel's CPU time),
// which cannot restart while keel runs: increments by the growth since the last value; a value
// below it is a failed read (zeros) and is ignored.
struct Cumulative {
  Counter* c = nullptr;
  double last = 0;
  void set(double v) {
    if (v <= last) return;
    c->Increment(v - last);
    last = v;
  }
};

// Every series is added through here: each label value made one Prometheus accepts (label_value), so
// no name reaches the exposition unchecked.
template <class T, class... Args>
T& add(Family<T>& f, Labels labels, Args&&... args) {
  for (auto& [k, v] : labels) v = label_value(v);
  return f.Add(labels, std::forward<Args>(args)...);
}

// The length of the valid UTF-8 sequence at the start of `s` (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF), or 0.
size_t utf8_length(std::string_view s) {
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = b(0);
  size_t n = c < 0x80                 ? 1
             : c >= 0xc2 && c <= 0xdf ? 2
             : c >= 0xe0 && c <= 0xef ? 3
             : c >= 0xf0 && c <= 0xf4 ? 4
                                      : 0;
  if (n == 0 || n > s.size()) return 0;
  // The second byte's range depends on the first (what rules out overlong forms and surrogates).
  const unsigned char lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
  const unsigned char hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
  if (n > 1 && (b(1) < lo || b(1) > hi)) return 0;
  for (size_t i = 2; i < n; ++i)
    if (b(i) < 0x80 || b(i) > 0xbf) return 0;
  return n;
}

}  // namespace

std::string label_value(std::string_view name) {
  auto plain = [](char c) { return c >= 0x20 && c < 0x7f; };
  if (name.size() <= kMaxLabelBytes && std::all_of(name.begin(), name.end(), plain)) return std::string(name);
  constexpr size_t kMarker = 4 + 16;  // "...#" and the hash
  std::string out;
  size_t cut = 0;  // the longest prefix of whole characters and escapes that leaves room for the marker
  for (size_t i = 0; i < name.size() && out.size() <= kMaxLabelBytes;) {
    const size_t n = utf8_length(name.substr(i));
    if (n == 0 || (n == 1 && !plain(name[i]))) {
      char esc[5];
      std::snprintf(esc, sizeof esc, "\\x%02x", static_cast<unsigned char>(name[i]));
      out += esc;
      i += 1;
    } else {
      out.append(name, i, n);
      i += n;
    }
    if (out.size() <= kMaxLabelBytes - kMarker) cut = out.size();
  }
  if (out.size() <= kMaxLabelBytes) return out;
  uint64_t h = 14695981039346656037ull;  // FNV-1a, over the whole name
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  char mark[kMarker + 1];
  std::snprintf(mark, sizeof mark, "...#%016llx", static_cast<unsigned long long>(h));
  out.resize(cut);
  return out + mark;
}

std::vector<double> prometheus_bounds(const std::vector<double>& layout_upper_s) {
  std::vector<double> out;
  // The last bucket of the layout is open-ended: it is +Inf.
  for (size_t i = 0; i + 1 < layout_upper_s.size(); ++i) {
    double b = layout_upper_s[i];
    int e = 0;
    double us = b * 1e6;
    bool pow2 = std::frexp(std::round(us), &e) == 0.5 && std::fabs(us - std::round(us)) < 1e-6;
    if (b <= 1.024e-3 + 1e-12 || pow2) out.push_back(b);
  }
  return out;
}

struct Metrics::State {
  Setup setup;
  std::shared_ptr<prometheus::Registry> reg = std::make_shared<prometheus::Registry>();
  std::vector<double> bounds;
  std::vector<size_t> bucket_to_le;  // layout bucket -> index in `bounds` (bounds.size() = +Inf)

  Family<Histogram>* rq = nullptr;
  Family<Gauge>*p99 = nullptr, *target = nullptr, *slack = nullptr, *violated = nullptr, *blocked = nullptr,
  *rung = nullptr, *knob = nullptr, *interference = nullptr, *score = nullptr, *instances = nullptr;
  Family<Counter>*migrations = nullptr, *cpu = nullptr, *throttled = nullptr, *misses = nullptr,
  *instructions = nullptr, *actions = nullptr;

  // Every series of one labelled instance, removed together when it goes.
  struct Series {
    std::string klass;
    Histogram* rq = nullptr;
    Counter *same_llc = nullptr, *llc = nullptr, *numa = nullptr, *cpu = nullptr, *throttled = nullptr,
            *misses = nullptr, *instr = nullptr;
    Gauge *p99 = nullptr, *target = nullptr, *slack = nullptr, *violated = nullptr, *blocked = nullptr,
          *rung = nullptr;
    std::map<std::string, Gauge*> knobs;
  };
  std::map<std::string, Series> series;                                            // by workload label
  std::map<std::pair<std::string, std::string>, std::pair<Gauge*, Gauge*>> pairs;  // interference, score
  std::map<std::pair<std::string, std::string>, Counter*> action;
  Gauge* steal = nullptr;

  Histogram* tick = nullptr;
  Counter* lifts = nullptr;
  Counter* drifts = nullptr;
  Counter *ticks = nullptr, *sense_err = nullptr, *act_err = nullptr, *map_full = nullptr,
          *stamp_full = nullptr;
  Counter *evicted_gone = nullptr, *evicted_idle = nullptr, *evicted_unmatched = nullptr,
          *evicted_best_effort = nullptr;
  Gauge *last_tick = nullptr, *cost = nullptr, *events = nullptr, *cpu_ratio = nullptr, *entries = nullptr,
        *max_entries = nullptr, *rss = nullptr, *folded = nullptr;
  Cumulative process_cpu;
  Family<Counter>*run_time = nullptr, *run_count = nullptr;
  std::map<std::string, std::pair<Cumulative, Cumulative>> programs;

  // The latest rendering and the publish it shows (`published` counts publishes, each done).
  std::atomic<uint64_t> published{0};
  std::mutex text_mutex;
  uint64_t text_of = 0;
  std::shared_ptr<const std::string> text;

  void remove(Series& s);
  Series& labelled(const std::string& name, const std::string& klass);
  void workload(const WorkloadReport& w, const std::string& name, Series& s, bool own);
  // The pieces of publish().
  void workloads(const TickReport& t);
  void pairs_of(const TickReport& t);
  void health(const HealthReport& h);
};

Metrics::State::Series& Metrics::State::labelled(const std::string& name, const std::string& klass) {
  auto it = series.find(name);
  if (it != series.end()) return it->second;
  Series& s = series[name];
  s.klass = klass;
  s.rq = &add(*rq, {{"workload", name}, {"class", klass}}, bounds);
  s.same_llc = &add(*migrations, {{"workload", name}, {"scope", "same_llc"}});
  s.llc = &add(*migrations, {{"workload", name}, {"scope", "cross_llc"}});
  s.numa = &add(*migrations, {{"workload", name}, {"scope", "cross_numa"}});
  s.cpu = &add(*cpu, {{"workload", name}, {"class", klass}});
  return s;
}

void Metrics::State::remove(Series& s) {
  rq->Remove(s.rq);
  for (Counter* c : {s.same_llc, s.llc, s.numa}) migrations->Remove(c);
  cpu->Remove(s.cpu);
  if (s.throttled) throttled->Remove(s.throttled);
  if (s.misses) misses->Remove(s.misses);
  if (s.instr) instructions->Remove(s.instr);
  std::pair<Family<Gauge>*, Gauge*> gauges[] = {{p99, s.p99},         {target, s.target},
                                                {slack, s.slack},     {violated, s.violated},
                                                {blocked, s.blocked}, {rung, s.rung}};
  for (auto [f, g] : gauges)
    if (g) f->Remove(g);
  for (auto& [k, g] : s.knobs) knob->Remove(g);
}

// `w`'s signals into its series `s`, labelled `name`.
void Metrics::State::workload(const WorkloadReport& w, const std::string& name, Series& s, bool own) {
  std::vector<double> inc(bounds.size() + 1, 0.0);
  for (size_t i = 0; i < w.rq_buckets.size() && i < bucket_to_le.size(); ++i)
    inc[bucket_to_le[i]] += static_cast<double>(w.rq_buckets[i]);
  s.rq->ObserveMultiple(inc, w.rq_sum_s);
  // Disjoint scopes (the sensor counts each migration in at most one of cross_llc, cross_numa): a sum
  // over scope is every migration.
  const uint64_t crossing = w.cross_llc + w.cross_numa;
  s.same_llc->Increment(static_cast<double>(w.migrations > crossing ? w.migrations - crossing : 0));
  s.llc->Increment(static_cast<double>(w.cross_llc));
  s.numa->Increment(static_cast<double>(w.cross_numa));
  if (w.cpu_seconds) s.cpu->Increment(std::max(0.0, *w.cpu_seconds));
  if (w.throttled_periods) {
    if (!s.throttled) s.throttled = &add(*throttled, {{"workload", name}});
    s.throttled->Increment(std::max(0.0, *w.throttled_periods));
  }
  if (w.cache_misses) {
    if (!s.misses) s.misses = &add(*misses, {{"workload", name}});
    s.misses->Increment(static_cast<double>(*w.cache_misses));
  }
  if (w.instructions) {
    if (!s.instr) s.instr = &add(*instructions, {{"workload", name}});
    s.instr->Increment(static_cast<double>(*w.instructions));
  }
  if (!own) return;  // folded instances: their counts only
  auto set = [&](Family<Gauge>* f, Gauge*& g, std::optional<double> v) {
    if (!v) {
      if (g) f->Remove(g);
      g = nullptr;
      return;
    }
    if (!g) g = &add(*f, {{"workload", name}});
    g->Set(*v);
  };
  set(p99, s.p99, w.p99_s);
  set(target, s.target, w.slo_target_s);
  set(slack, s.slack, w.slack);
  bool judged = w.slack.has_value();
  set(violated, s.violated, judged ? std::optional<double>(w.violated ? 1 : 0) : std::nullopt);
  set(blocked, s.blocked, judged ? std::optional<double>(w.blocked ? 1 : 0) : std::nullopt);
  set(rung, s.rung, judged ? std::optional<double>(w.rung) : std::nullopt);
  for (auto it = s.knobs.begin(); it != s.knobs.end();) {
    if (w.knobs.count(it->first)) {
      ++it;
    } else {
      knob->Remove(it->second);
      it = s.knobs.erase(it);
    }
  }
  for (const auto& [k, v] : w.knobs) {
    Gauge*& g = s.knobs[k];
    if (!g) g = &add(*knob, {{"workload", name}, {"knob", k}});
    g->Set(v);
  }
}

Metrics::Metrics(Setup setup) : s_(std::make_unique<State>()) {
  State& s = *s_;
  s.setup = std::move(setup);
  auto& r = *s.reg;
  s.bounds = prometheus_bounds(s.setup.latency_bucket_upper_s);
  for (double upper : s.setup.latency_bucket_upper_s) {
    size_t j = static_cast<size_t>(std::lower_bound(s.bounds.begin(), s.bounds.end(), upper * (1 - 1e-9)) -
                                   s.bounds.begin());
    s.bucket_to_le.push_back(j);
  }
  if (!s.bucket_to_le.empty()) s.bucket_to_le.back() = s.bounds.size();  // open-ended: +Inf

  s.rq = &histogram(r, "keel_runqueue_latency_seconds");
  s.p99 = &gauge(r, "keel_runqueue_latency_p99_seconds");
  s.target = &gauge(r, "keel_slo_target_seconds");
  s.slack = &gauge(r, "keel_slo_slack_ratio");
  s.violated = &gauge(r, "keel_slo_violated");
  s.migrations = &counter(r, "keel_migrations_total");
  s.cpu = &counter(r, "keel_cpu_usage_seconds_total");
  s.throttled = &counter(r, "keel_cpu_throttled_periods_total");
  s.misses = &counter(r, "keel_cache_misses_total");
  s.instructions = &counter(r, "keel_instructions_total");
  s.interference = &gauge(r, "keel_interference_detected");
  s.score = &gauge(r, "keel_antagonist_score");
  s.knob = &gauge(r, "keel_knob_value");
  s.rung = &gauge(r, "keel_controller_rung");
  s.blocked = &gauge(r, "keel_controller_blocked");
  s.actions = &counter(r, "keel_actions_total");
  // Every (knob, direction) of this mode exists from the start at 0, so rates and increases are
  // defined before the first action (and a dashboard shows 0, not "no data").
  for (const char* k : kActionKnobs)
    for (const char* d : kActionDirections)
      s.action[{k, d}] = &add(*s.actions, {{"knob", k}, {"direction", d}, {"mode", s.setup.mode}});
  add(gauge(r, "keel_mode"), {{"mode", s.setup.mode}}).Set(1);
  s.instances = &gauge(r, "keel_workload_instances");
  for (const char* c : {"critical", "best_effort"}) add(*s.instances, {{"class", c}}).Set(0);
  s.folded = &add(gauge(r, "keel_metrics_folded_instances"), {});

  s.tick = &add(
      histogram(r, "keel_tick_duration_seconds"), {},
      Histogram::BucketBoundaries{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5});
  s.ticks = &add(counter(r, "keel_ticks_total"), {});
  s.lifts = &add(counter(r, "keel_starvation_lifts_total"), {});
  s.last_tick = &add(gauge(r, "keel_last_tick_timestamp_seconds"), {});
  auto& errors = counter(r, "keel_errors_total");
  s.sense_err = &add(errors, {{"kind", "sensing"}});
  s.act_err = &add(errors, {{"kind", "actuator"}});
  s.drifts = &add(counter(r, "keel_drift_total"), {});
  auto& sensors = gauge(r, "keel_sensor_available");
  for (const auto& [k, v] : s.setup.sensors) add(sensors, {{"sensor", k}}).Set(v ? 1 : 0);
  auto& mech = gauge(r, "keel_mechanism_enabled");
  for (const auto& [k, v] : s.setup.mechanisms) add(mech, {{"mechanism", k}}).Set(v ? 1 : 0);
  s.run_time = &counter(r, "keel_bpf_run_time_seconds_total");
  s.run_count = &counter(r, "keel_bpf_run_count_total");
  s.cost = &add(gauge(r, "keel_bpf_cost_seconds_per_event"), {});
  s.events = &add(gauge(r, "keel_bpf_events_per_second"), {});
  s.cpu_ratio = &add(gauge(r, "keel_bpf_cpu_ratio"), {});
  s.entries = &add(gauge(r, "keel_bpf_map_entries"), {{"map", s.setup.map_name}});
  s.max_entries = &add(gauge(r, "keel_bpf_map_max_entries"), {{"map", s.setup.map_name}});
  auto& dropped = counter(r, "keel_bpf_dropped_total");
  s.map_full = &add(dropped, {{"reason", "map_full"}});
  s.stamp_full = &add(dropped, {{"reason", "stamp_full"}});
  auto& evicted = counter(r, "keel_bpf_map_evictions_total");
  s.evicted_gone = &add(evicted, {{"reason", "gone"}});
  s.evicted_idle = &add(evicted, {{"reason", "idle"}});
  s.evicted_unmatched = &add(evicted, {{"reason", "unmatched"}});
  s.evicted_best_effort = &add(evicted, {{"reason", "best_effort"}});
  s.process_cpu.c = &add(counter(r, "process_cpu_seconds_total"), {});
  s.rss = &add(gauge(r, "process_resident_memory_bytes"), {});
  add(gauge(r, "keel_build_info"), {{"version", s.setup.version},
                                    {"revision", s.setup.revision},
                                    {"compiler", s.setup.compiler},
                                    {"libbpf", s.setup.libbpf}})
      .Set(1);
}

Metrics::~Metrics() = default;

std::shared_ptr<prometheus::Registry> Metrics::registry() const { return s_->reg; }

std::string Metrics::render() const { return prometheus::TextSerializer().Serialize(s_->reg->Collect()); }

std::shared_ptr<const std::string> Metrics::text() const {
  State& s = *s_;
  std::lock_guard lock(s.text_mutex);
  // Read before rendering: a publish that ends during it makes the next scrape render again.
  const uint64_t now = s.published.load();
  if (!s.text || s.text_of != now) {
    s.text = std::make_shared<const std::string>(render());
    s.text_of = now;
  }
  return s.text;
}

void fold_into(WorkloadReport& to, const WorkloadReport& w) {
  if (to.rq_buckets.size() < w.rq_buckets.size()) to.rq_buckets.resize(w.rq_buckets.size(), 0);
  for (size_t i = 0; i < w.rq_buckets.size(); ++i) to.rq_buckets[i] += w.rq_buckets[i];
  to.rq_sum_s += w.rq_sum_s;
  to.migrations += w.migrations;
  to.cross_llc += w.cross_llc;
  to.cross_numa += w.cross_numa;
  auto sum = [](auto& a, const auto& b) {
    if (b) a = a.value_or(0) + *b;
  };
  sum(to.cpu_seconds, w.cpu_seconds);
  sum(to.throttled_periods, w.throttled_periods);
  sum(to.cache_misses, w.cache_misses);
  sum(to.instructions, w.instructions);
}

// Each instance's label (series are keyed by it: two names with one label share their series), and
// which instances keep their own: those labelled before, then new ones up to the cap.
void Metrics::State::workloads(const TickReport& t) {
  const size_t count = t.workloads.size();
  std::vector<std::string> labels(count);
  std::unordered_set<std::string_view> present;
  present.reserve(count);
  for (size_t i = 0; i < count; ++i)
    if (t.workloads[i].workload != "other") present.insert(labels[i] = label_value(t.workloads[i].workload));
  for (auto it = series.begin(); it != series.end();) {
    if (it->first != "other" && !present.count(it->first)) {
      remove(it->second);
      it = series.erase(it);
    } else {
      ++it;
    }
  }
  size_t own = 0, past_cap = 0;
  for (size_t i = 0; i < count; ++i) {
    if (t.workloads[i].workload == "other") continue;
    own += series.count(labels[i]);
  }
  std::map<std::string, double> per_class{{"critical", 0}, {"best_effort", 0}};
  // Critical instances take free slots first: their latency is what the SLOs are about.
  std::vector<size_t> order;
  for (size_t i = 0; i < count; ++i)
    if (t.workloads[i].klass == "critical") order.push_back(i);
  for (size_t i = 0; i < count; ++i)
    if (t.workloads[i].klass != "critical") order.push_back(i);
  WorkloadReport other;  // unmatched cgroups and the instances past the cap, added up
  for (size_t i : order) {
    const WorkloadReport& w = t.workloads[i];
    if (w.workload == "other") {
      fold_into(other, w);
      continue;
    }
    per_class[w.klass] += 1;
    bool keep = series.count(labels[i]) > 0;
    if (!keep && own < setup.max_workloads) {
      keep = true;
      ++own;
    }
    if (keep) {
      workload(w, labels[i], labelled(labels[i], w.klass), true);
    } else {
      ++past_cap;
      fold_into(other, w);
    }
  }
  workload(other, "other", labelled("other", "other"), false);
  for (const auto& [c, n] : t.folded) {
    per_class[c] += static_cast<double>(n);
    past_cap += n;
  }
  for (const auto& [c, n] : per_class) add(*instances, {{"class", c}}).Set(n);
  folded->Set(static_cast<double>(past_cap));
}

// Interference pairs: this tick's only, at most max_antagonists per victim.
void Metrics::State::pairs_of(const TickReport& t) {
  std::map<std::pair<std::string, std::string>, double> now;
  std::map<std::string, size_t> per_victim;
  for (const auto& i : t.interference) {
    std::string victim = label_value(i.workload);
    if (!series.count(victim) || per_victim[victim] >= setup.max_antagonists) continue;
    if (now.emplace(std::make_pair(victim, label_value(i.antagonist)), i.score).second) ++per_victim[victim];
  }
  for (auto it = pairs.begin(); it != pairs.end();) {
    if (now.count(it->first)) {
      ++it;
      continue;
    }
    interference->Remove(it->second.first);
    score->Remove(it->second.second);
    it = pairs.erase(it);
  }
  for (const auto& [key, value] : now) {
    auto& p = pairs[key];
    Labels l{{"workload", key.first}, {"antagonist", key.second}};
    if (!p.first) p = {&add(*interference, l), &add(*score, l)};
    p.first->Set(1);
    p.second->Set(value);
  }
}

void Metrics::State::health(const HealthReport& h) {
  tick->Observe(h.tick_seconds);
  ticks->Increment();
  last_tick->Set(h.unix_time);
  sense_err->Increment(h.sensing_errors);
  act_err->Increment(h.actuator_errors);
  drifts->Increment(h.drifts);
  for (const auto& p : h.programs) {
    auto& c = programs[p.program];
    if (!c.first.c) {
      c.first.c = &add(*run_time, {{"program", p.program}});
      c.second.c = &add(*run_count, {{"program", p.program}});
    }
    c.first.set(static_cast<double>(p.run_time_ns) / 1e9);
    c.second.set(static_cast<double>(p.run_count));
  }
  if (h.bpf_seconds_per_event && h.bpf_events_per_s) {
    cost->Set(*h.bpf_seconds_per_event);
    events->Set(*h.bpf_events_per_s);
    cpu_ratio->Set(*h.bpf_seconds_per_event * *h.bpf_events_per_s);
  }
  entries->Set(static_cast<double>(h.map_entries));
  max_entries->Set(static_cast<double>(h.map_max_entries));
  map_full->Increment(static_cast<double>(h.dropped_map_full));
  stamp_full->Increment(static_cast<double>(h.dropped_stamp_full));
  evicted_gone->Increment(static_cast<double>(h.evicted_gone));
  evicted_idle->Increment(static_cast<double>(h.evicted_idle));
  evicted_unmatched->Increment(static_cast<double>(h.evicted_unmatched));
  evicted_best_effort->Increment(static_cast<double>(h.evicted_best_effort));
  if (h.process_cpu_seconds) process_cpu.set(*h.process_cpu_seconds);
  if (h.process_rss_bytes) rss->Set(*h.process_rss_bytes);
}

void Metrics::publish(const TickReport& t) {
  State& s = *s_;
  s.workloads(t);
  s.pairs_of(t);
  for (const auto& [k, d] : t.actions) {
    Counter*& c = s.action[{k, d}];
    if (!c) c = &add(*s.actions, {{"knob", k}, {"direction", d}, {"mode", s.setup.mode}});
    c->Increment();
  }
  s.lifts->Increment(static_cast<double>(t.starvation_lifts));
  if (t.steal) {
    if (!s.steal) s.steal = &add(*s.knob, {{"workload", "host"}, {"knob", "steal_task"}});
    s.steal->Set(*t.steal ? 1 : 0);
  }

  s.health(t.health);
  s.published.fetch_add(1);
}

void Metrics::sensing_failed(double tick_seconds, double unix_time) {
  s_->tick->Observe(tick_seconds);
  s_->ticks->Increment();
  s_->last_tick->Set(unix_time);
  s_->sense_err->Increment();
  s_->published.fetch_add(1);
}

// ---- the HTTP endpoint ----

Health::Health(std::chrono::nanoseconds period, Clock::time_point started)
    : period_ns_(period.count()), last_ns_(started.time_since_epoch().count()) {}

void Health::ticked(bool sensed, Clock::time_point at) {
  last_ns_.store(at.time_since_epoch().count());
  if (sensed) sensed_.store(true);
  ticked_.store(true);
}

Health::Answer Health::healthz(Clock::time_point now) const {
  const double age = static_cast<double>(now.time_since_epoch().count() - last_ns_.load()) / 1e9;
  const double period = static_cast<double>(period_ns_.load()) / 1e9, limit = 3 * period + 2;
  char b[160];
  std::snprintf(b, sizeof b, "%s %.1f s ago (period %.3g s, unhealthy after %.3g s)",
                ticked_.load() ? "last tick" : "started, no tick yet,", age, period, limit);
  return {age <= limit ? 200 : 503, std::string(age <= limit ? "ok: " : "stalled: ") + b};
}

Health::Answer Health::readyz(Clock::time_point now) const {
  if (stopping_.load()) return {503, "stopping: giving the knobs back or handing them over"};
  Answer h = healthz(now);
  if (h.status != 200) return h;
  if (!sensed_.load()) return {503, "starting: no tick has sensed yet"};
  return {200, "ready: sensing and deciding every period"};
}

struct Endpoint::State {
  std::string address;
  mg_context* ctx = nullptr;
  std::atomic<const Metrics*> metrics{nullptr};
  std::atomic<const Health*> health{nullptr};
};

namespace {

int reply(mg_connection* conn, int status, const char* type, const std::string& body) {
  const char* reason = status == 200 ? "OK" : status == 404 ? "Not Found" : "Service Unavailable";
  mg_printf(conn,
            "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nCache-Control: no-store\r\n"
            "Connection: close\r\n\r\n",
            status, reason, type, body.size());
  mg_write(conn, body.data(), body.size());
  return status;
}

}  // namespace

// /healthz or /readyz: what `probe` of the loop's Health says (503 "starting" before serve()).
template <Health::Answer (Health::*probe)(Health::Clock::time_point) const>
int Endpoint::answer(mg_connection* conn, void* data) {
  const Health* h = static_cast<State*>(data)->health.load();
  if (h == nullptr) return reply(conn, 503, "text/plain", "starting\n");
  auto a = (h->*probe)(Health::Clock::now());
  return reply(conn, a.status, "text/plain", a.body + "\n");
}

Endpoint::Endpoint(std::unique_ptr<State> s) : s_(std::move(s)) {}
Endpoint::~Endpoint() {
  if (s_ && s_->ctx != nullptr) mg_stop(s_->ctx);
}
std::string Endpoint::address() const { return s_->address; }

namespace {

struct HostPort {
  std::string host, port;
};

Result<HostPort> split(const std::string& a) {
  if (!a.empty() && a[0] == '[') {
    auto close = a.find("]:");
    if (close == std::string::npos) return fail("not [IPv6]:port", a);
    return HostPort{a.substr(1, close - 1), a.substr(close + 2)};
  }
  auto colon = a.rfind(':');
  if (colon == std::string::npos) return fail("not host:port", a);
  // ":PORT": every IPv4 address of the host.
  return HostPort{colon == 0 ? "0.0.0.0" : a.substr(0, colon), a.substr(colon + 1)};
}

// Why binding `sa` fails (errno), or 0 when it would not.
int bind_error(const sockaddr* sa, socklen_t len) {
  int fd = ::socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // as civetweb does
  int err = ::bind(fd, sa, len) == 0 ? 0 : errno;
  ::close(fd);
  return err;
}

}  // namespace

void Endpoint::serve(const Metrics& metrics, const Health* health) {
  s_->health.store(health);
  s_->metrics.store(&metrics);
}

Result<Resolved> resolve_listen(const std::string& address, bool ipv6) {
  auto hp = split(address);
  if (!hp) return fail(hp.error().what);
  if (!ipv6 && address.front() == '[')
    return fail(
        "this build's HTTP server (civetweb) has no IPv6 support: use an IPv4 address such as 127.0.0.1:" +
        hp->port);
  addrinfo hints{};
  hints.ai_family = ipv6 ? AF_UNSPEC : AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(hp->host.c_str(), hp->port.c_str(), &hints, &res); rc != 0)
    return fail("cannot resolve \"" + hp->host + "\"" + (ipv6 ? "" : " to an IPv4 address") + ": " +
                ::gai_strerror(rc));
  char host[NI_MAXHOST] = "";
  ::getnameinfo(res->ai_addr, res->ai_addrlen, host, sizeof host, nullptr, 0, NI_NUMERICHOST);
  const bool v6 = res->ai_family == AF_INET6;
  Resolved out;
  out.numeric = v6 ? "[" + std::string(host) + "]:" + hp->port : std::string(host) + ":" + hp->port;
  const std::string& numeric = out.numeric;
  std::memcpy(&out.sa, res->ai_addr, res->ai_addrlen);
  out.len = res->ai_addrlen;
  int taken = bind_error(res->ai_addr, res->ai_addrlen);
  ::freeaddrinfo(res);
  auto refuse = [&](int err) {
    std::string why = std::strerror(err);
    if (err == EADDRINUSE)
      why += " (another process listens there: another keel or exporter? choose a free port)";
    if (err == EADDRNOTAVAIL) why += " (no interface of this host has that address)";
    if (err == EACCES) why += " (ports below 1024 need privileges)";
    return fail("cannot listen on " + numeric + ": " + why);
  };
  // Asked first: civetweb's own failure says only that it could not start.
  if (taken != 0) return refuse(taken);
  return out;
}

Result<std::unique_ptr<Endpoint>> Endpoint::listen(const std::string& address) {
  // Debian's civetweb (prometheus-cpp's HTTP server) is built without IPv6: an IPv6 address is
  // refused, and a name is resolved to its IPv4 address ("localhost" is ::1 first on Debian).
  auto where = resolve_listen(address, mg_check_feature(8) != 0);
  if (!where) return std::unexpected(where.error());
  const std::string& numeric = where->numeric;
  auto st = std::make_unique<State>();
  st->address = numeric;
  // civetweb's own server (what prometheus-cpp's Exposer wraps), for the health paths beside /metrics.
  // A connection holds a worker from its first byte to its last, so a client that sends half a request
  // (5 s to send it all) or stops reading (5 s per write without progress) holds one: 32 workers let 31
  // such clients at once not delay a scrape (README, "How it works"). No keep-alive, no linger on close.
  const std::pair<const char*, const char*> settings[] = {
      {"num_threads", "32"},       {"request_timeout_ms", "2000"}, {"max_request_size", "8192"},
      {"enable_keep_alive", "no"}, {"connection_queue", "20"},     {"listen_backlog", "200"}};
  std::vector<const char*> options = {"listening_ports", numeric.c_str()};
  for (const auto& [name, value] : settings) options.insert(options.end(), {name, value});
  options.push_back(nullptr);
  mg_callbacks callbacks{};
  callbacks.log_message = [](const mg_connection*, const char*) { return 1; };  // errors come back to keel
  st->ctx = mg_start(&callbacks, nullptr, options.data());
  if (st->ctx == nullptr) return fail("cannot listen on " + numeric + ": the HTTP server did not start");
  mg_set_request_handler(
      st->ctx, "/metrics$",
      [](mg_connection* conn, void* data) {
        const Metrics* m = static_cast<State*>(data)->metrics.load();
        if (m == nullptr) return reply(conn, 503, "text/plain", "starting\n");
        const auto text = m->text();  // shared with other scrapes of this tick, kept while it is sent
        return reply(conn, 200, "text/plain; version=0.0.4; charset=utf-8", *text);
      },
      st.get());
  mg_set_request_handler(st->ctx, "/healthz$", answer<&Health::healthz>, st.get());
  mg_set_request_handler(st->ctx, "/readyz$", answer<&Health::readyz>, st.get());
  return std::unique_ptr<Endpoint>(new Endpoint(std::move(st)));
}

}  // namespace keel::metrics
