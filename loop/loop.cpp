#include "loop/loop.h"

#include <bpf/libbpf.h>
#include <malloc.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>

#include "actuators/irq.h"
#include "actuators/journal.h"
#include "actuators/sched_features.h"
#include "actuators/session.h"
#include "controller/trace.h"
#include "host/caps.h"
#include "host/json.h"
#include "host/log.h"
#include "host/resctrl_info.h"
#include "inventory/platforms.h"
#include "loop/telemetry.h"

namespace keel::loop {

namespace {

// The levels of keel run's lines (host/log.h): info for what it sees, notice for what it does and its
// start and stop, warning for what it cannot do, error for what failed.
void log(const std::string& line) { logging::line(logging::Level::info, line); }
void notice(const std::string& line) { logging::line(logging::Level::notice, line); }
void warn(const std::string& line) { logging::line(logging::Level::warning, line); }
void log_error(const std::string& line) { logging::line(logging::Level::error, line); }

// Milliseconds from a CLOCK_MONOTONIC stamp (the BPF programs' clock, steady_clock's) to now.
std::string ms_since(uint64_t mono_ns) {
  const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::steady_clock::now().time_since_epoch())
                       .count();
  char b[32];
  std::snprintf(b, sizeof b, "%.1f ms", static_cast<double>(now - static_cast<int64_t>(mono_ns)) / 1e6);
  return b;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// When run()'s next early tick is due and what for: an SLO crossing (at most one tick per gap; none after
// Loop::kIdleEarlyTicks of them in a row changed nothing, until the next periodic tick) or the demand
// watch's lull or rise.
struct EarlyTicks {
  using Clock = std::chrono::steady_clock;
  explicit EarlyTicks(Clock::duration g) : gap(g), last(Clock::now() - g) {}
  Clock::duration gap;
  Clock::time_point last, at;               // the latest tick's start; when the next early one is due
  std::optional<bpf::SloEvent> crossing;    // the crossing it is due for
  std::optional<Sensing::DemandWake> wake;  // or the demand watch's lull or rise
  unsigned idle = 0;                        // early ticks for crossings in a row that changed nothing
  bool crossings_wake = true;

  bool pending() const { return crossing || wake; }
  bool due(Clock::time_point now) const { return pending() && now >= at; }
  void crossed(const std::vector<bpf::SloEvent>& c, Clock::time_point now) {
    if (c.empty() || pending() || !crossings_wake) return;
    crossing = c.front();
    at = std::max(now, last + gap);
  }
  void watched(const std::vector<Sensing::DemandWake>& w, Clock::time_point now) {
    if (w.empty() || pending()) return;
    wake = w.front();
    at = std::max(now, last + gap);
  }
  // A tick started (what was due is taken) and ended (`had_work`: its plan changed something, or a
  // critical p99 is over its SLO); true when crossings stop waking ticks from now on.
  bool ticked(Clock::time_point started, bool periodic, bool for_crossing, bool had_work) {
    crossing.reset();
    wake.reset();
    last = started;
    if (periodic) {
      idle = 0;
      crossings_wake = true;
      return false;
    }
    if (!for_crossing) return false;
    idle = had_work ? 0 : idle + 1;
    if (idle < Loop::kIdleEarlyTicks) return false;
    crossings_wake = false;
    return true;
  }
};

}  // namespace

std::string status_line(const ctl::Plan& plan, const ctl::Snapshot& snap) {
  // Numbers through a buffer, names appended whole: an instance name is never cut.
  std::string out;
  for (const auto& w : snap.workloads) {
    if (!w.critical) continue;
    auto v = plan.workloads.find(w.instance);
    if (v == plan.workloads.end()) continue;
    char b[128];
    std::snprintf(b, sizeof b, " p99 %.0f us (tick %.0f us, %llu waits) slack %.2f rung %u%s",
                  v->second.p99_us, w.rq_p99_us, static_cast<unsigned long long>(w.rq_waits), v->second.slack,
                  v->second.rung, v->second.violated ? " VIOLATED" : "");
    out += (out.empty() ? "" : "; ") + w.instance + b;
  }
  if (out.empty()) {  // no critical workload: the busiest waiters, for a first look
    std::vector<const ctl::WorkloadSignals*> order;
    for (const auto& w : snap.workloads) order.push_back(&w);
    std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->rq_p99_us > b->rq_p99_us; });
    for (size_t i = 0; i < order.size() && i < 5; ++i) {
      char b[96];
      std::snprintf(b, sizeof b, " p99 %.0f us (%llu waits)", order[i]->rq_p99_us,
                    static_cast<unsigned long long>(order[i]->rq_waits));
      out += (i ? "; " : "") + order[i]->instance + b;
    }
    if (out.empty()) out = "no workload matched";
  }
  return out;
}

std::string format_desired(const std::map<std::string, ctl::KnobState>& desired) {
  Json all = Json::array();
  for (const auto& [inst, k] : desired) {
    if (utf8_safe(inst) != inst) continue;  // would not come back as itself
    Json j = Json::object();
    j["instance"] = inst;
    if (k.shares) j["shares"] = *k.shares;
    if (k.cpus) j["cpus"] = k.cpus->to_list();
    if (k.l3_ways) j["l3_ways"] = *k.l3_ways;
    if (k.mba_percent) j["mba_percent"] = *k.mba_percent;
    if (k.preempt) j["preempt"] = true;
    all.push_back(std::move(j));
  }
  return json_text(all) + "\n";
}

Result<std::map<std::string, ctl::KnobState>> parse_desired(std::string_view text) {
  Json all = Json::parse(text.begin(), text.end(), nullptr, false);
  if (all.is_discarded() || !all.is_array()) return fail("the handover's desired state is not a JSON array");
  std::map<std::string, ctl::KnobState> out;
  auto whole = [](const Json& v, uint64_t max) -> std::optional<uint64_t> {
    if (!v.is_number_unsigned() || v.get<uint64_t>() > max) return std::nullopt;
    return v.get<uint64_t>();
  };
  for (const Json& j : all) {
    if (!j.is_object() || !j.contains("instance") || !j["instance"].is_string())
      return fail("the handover's desired state has an entry without an instance");
    const std::string inst = j["instance"].get<std::string>();
    ctl::KnobState k;
    for (const auto& [key, v] : j.items()) {
      std::optional<uint64_t> n;
      if (key == "instance") continue;
      if (key == "shares" && (n = whole(v, 262144))) {
        k.shares = *n;
      } else if (key == "l3_ways" && (n = whole(v, 64))) {
        k.l3_ways = static_cast<unsigned>(*n);
      } else if (key == "mba_percent" && (n = whole(v, 100))) {
        k.mba_percent = static_cast<unsigned>(*n);
      } else if (key == "cpus" && v.is_string()) {
        auto set = CpuSet::parse_list(v.get<std::string>());
        if (!set) return fail("the handover's cpus of " + inst + " are not a CPU list");
        k.cpus = *set;
      } else if (key == "preempt" && v.is_boolean()) {
        k.preempt = v.get<bool>();
      } else {
        return fail("the handover's desired state of " + inst + " has a bad " + key);
      }
    }
    if (!out.emplace(inst, k).second) return fail("the handover names " + inst + " twice");
  }
  return out;
}

// ---- The loop ----

Loop::Loop(Parts parts)
    : p_(std::move(parts)),
      controller_(std::make_unique<ctl::Controller>(p_.spec, p_.topo)),
      reconciler_(p_.spec, p_.topo, *p_.writer),
      labels_(p_.spec.metrics_max_workloads) {}

// keel's own loop thread runs off the CPUs critical instances hold: on the reserved CPUs where the
// config declares some, else on every CPU no critical instance holds (all of them when none does).
void Loop::keep_off_critical_cpus(const ctl::Plan& plan) {
  const CpuSet& held = plan.critical_cpus;
  if (started_cpus_.empty()) {  // where keel was started (an operator's taskset is kept to)
    started_cpus_ = thread_affinity(p_.topo.online());
    if (started_cpus_.empty()) started_cpus_ = p_.topo.online();
    own_cpus_ = started_cpus_;
  }
  CpuSet want = (!p_.spec.reserved.empty() ? p_.spec.reserved : p_.topo.online() - held) & started_cpus_;
  if (want.empty()) want = started_cpus_;
  if (want == own_cpus_) return;
  if (!set_thread_affinity(want)) {
    warn("cannot move keel's thread to CPUs " + want.to_list() + ": " + std::strerror(errno));
    own_cpus_ = want;  // said once
    return;
  }
  log("keel's thread runs on CPUs " + want.to_list());
  own_cpus_ = want;
}

void Loop::log_early(uint64_t n, const bpf::SloEvent& e) {
  std::string who = e.id.str();
  if (const inv::Node* node = p_.sensing->inventory().find(e.id); node != nullptr && !node->instance.empty())
    who = node->instance;
  char wait[32];
  std::snprintf(wait, sizeof wait, "%.0f us", static_cast<double>(e.wait_ns) / 1e3);
  log("tick " + std::to_string(n) + " early: " + who + " waited longer than its SLO " +
      std::to_string(e.over) + " times within " + std::to_string(Sensing::kEarlyWindow.count()) +
      " ms (a long wait counts once more per " + std::to_string(Sensing::kEarlyLong.count()) +
      " ms or SLO; the last " + wait + "), " + ms_since(e.at_ns) + " ago");
}

void Loop::log_watch(uint64_t n, const Sensing::DemandWake& wake, std::chrono::duration<double> lull) const {
  double bound = 0;
  for (const auto& w : watch_)
    if (w.instance == wake.instance) bound = wake.rose ? w.cpu_above : w.cpu_below;
  char text[96];
  if (wake.rose)
    std::snprintf(text, sizeof text,
                  " kept %.2f CPUs busy over the last read (%.2f or more: its demand is high)", wake.cpus,
                  bound);
  else
    std::snprintf(text, sizeof text, " kept under %.2f CPUs busy for %d ms", bound,
                  static_cast<int>(lull.count() * 1000));
  log("tick " + std::to_string(n) + " early: " + wake.instance + text + " (its demand watch)");
}

void Loop::adopt(std::map<std::string, ctl::KnobState> desired) {
  controller_->adopt(std::move(desired));
  reconciler_.adopt();
}

void Loop::reload(config::Spec spec, Sensing* sensing) {
  auto desired = controller_->desired();
  const bool steal = controller_->steal();
  p_.spec = std::move(spec);
  p_.sensing = sensing;
  controller_ = std::make_unique<ctl::Controller>(p_.spec, p_.topo);
  controller_->adopt(std::move(desired), steal);
  reconciler_.respec(p_.spec);
  labels_ = metrics::LabelCap(p_.spec.metrics_max_workloads);
  gaps_said_.clear();
}

Loop::Exit Loop::run(Events& events, bool once) {
  using Clock = std::chrono::steady_clock;
  const auto period = std::chrono::duration_cast<Clock::duration>(p_.spec.period);
  if (int fd = p_.sensing->events_fd(); fd >= 0)
    if (auto r = events.add(fd); !r) warn("early ticks off: " + r.error().message());
  // After a reload the tick that was due stays due: SIGHUPs faster than the period do not stop ticks.
  auto next = next_.value_or(Clock::now() + period);
  EarlyTicks early(std::chrono::duration_cast<Clock::duration>(kEarlyGap));
  // Every kWatchEvery, or kRiseWatchEvery while one is watched for its rise.
  auto watch_every = [&] {
    const bool rise = std::any_of(watch_.begin(), watch_.end(), [](const ctl::DemandWatch& d) {
      return d.cpu_above < std::numeric_limits<double>::infinity();
    });
    return std::chrono::duration_cast<Clock::duration>(rise ? kRiseWatchEvery : kWatchEvery);
  };
  const std::chrono::duration<double> lull_for(controller_->policy().lull_s);
  auto watch_at = Clock::now() + watch_every();
  // systemd's watchdog: pinged from this thread between ticks, so a tick that hangs stops the pings.
  const auto ping_every = p_.notifier != nullptr ? p_.notifier->watchdog_every() : std::nullopt;
  auto ping_at = Clock::now();
  for (uint64_t& n = n_;;) {
    auto until = early.pending() ? std::min(next, early.at) : next;
    if (ping_every) until = std::min(until, ping_at);
    if (!watch_.empty() && !early.pending()) until = std::min(until, watch_at);
    const auto w = events.wait_until(until);
    if (w == Events::Wake::stop) break;
    if (w == Events::Wake::reload) {
      next_ = next;
      return Exit::reload;
    }
    auto now = Clock::now();
    if (ping_every && now >= ping_at) {
      if (auto r = p_.notifier->send("WATCHDOG=1"); !r) warn("watchdog: " + r.error().message());
      ping_at = now + std::chrono::duration_cast<Clock::duration>(*ping_every);
    }
    if (w == Events::Wake::event) early.crossed(p_.sensing->take_events(), now);
    if (!watch_.empty() && now >= watch_at && !early.pending()) {
      watch_at = now + watch_every();
      early.watched(p_.sensing->watch_demand(watch_, lull_for), now);
    }
    const bool periodic = now >= next;
    if (!periodic && !early.due(now)) continue;
    if (periodic) {
      next += period;
      if (next < now) next = now + period;  // fell behind
    }
    const bool for_crossing = !periodic && early.crossing;
    if (for_crossing) log_early(n, *early.crossing);
    if (!periodic && early.wake) log_watch(n, *early.wake, lull_for);
    const uint64_t crossed_at = early.crossing ? early.crossing->at_ns : 0;
    tick(n);
    if (for_crossing)
      log("tick " + std::to_string(n) + " early: done " + ms_since(crossed_at) + " after the crossing");
    if (early.ticked(now, periodic, for_crossing, had_work_))
      log("tick " + std::to_string(n) + " early: " + std::to_string(early.idle) +
          " early ticks in a row for SLO crossings changed nothing: crossings wake no tick until the next "
          "periodic one");
    // The demand watch follows what the controller holds now (none left: its state goes too).
    const bool watched = !watch_.empty();
    watch_ = p_.spec.early_ticks ? controller_->demand_watch() : std::vector<ctl::DemandWatch>{};
    if (watched && watch_.empty()) (void)p_.sensing->watch_demand({}, lull_for);
    watch_at = std::min(watch_at, now + watch_every());
    ++n;
    if (once) break;
  }
  return Exit::stop;
}

void Loop::tick(uint64_t n) {
  const char* mode = p_.observe ? "observe" : "enforce";
  const std::string head = "tick " + std::to_string(n) + " ";
  const auto started = std::chrono::steady_clock::now();
  had_work_ = false;
  // Sense.
  if (auto sensed = p_.sensing->sample(n, snap_); !sensed) {
    log_error(head + "sensing failed: " + sensed.error().message());
    p_.metrics->sensing_failed(seconds_since(started), unix_now());
    if (p_.health != nullptr) p_.health->ticked(false);
    return;
  }
  const ctl::Snapshot* snap = &snap_;
  // Decide, act.
  const ctl::Plan& plan = controller_->step(*snap);
  // Something to do: it acted, or a critical workload's smoothed p99 is over its SLO (a violation
  // building up: the next crossing's tick may act).
  had_work_ = !plan.actions.empty() ||
              std::any_of(plan.workloads.begin(), plan.workloads.end(),
                          [](const auto& w) { return w.second.violated || w.second.slack < 0; });
  auto done = reconciler_.apply(plan, p_.sensing->inventory());
  keep_off_critical_cpus(plan);
  p_.sensing->touched(done.touched, done.unheld);
  // Publish: status when a critical workload's state turns (or every tick with --verbose), then the
  // decisions, then what was written (or would be); the metrics.
  bool turned = false;
  std::map<std::string, bool> violated;  // of the critical instances: their SLO state
  for (const auto& w : snap->workloads) {
    if (!w.critical) continue;
    auto v = plan.workloads.find(w.instance);
    const bool now = v != plan.workloads.end() && v->second.violated;
    auto was = violated_.find(w.instance);
    if ((was != violated_.end() && was->second) != now) turned = true;
    violated.emplace(w.instance, now);
  }
  violated_ = std::move(violated);
  if (turned || p_.verbose)
    logging::line(turned ? logging::Level::notice : logging::Level::info,
                  head + mode + " status " + status_line(plan, *snap));
  std::string decisions = ctl::format_actions(plan, mode);
  for (size_t i = 0; i < decisions.size();) {
    size_t e = decisions.find('\n', i);
    notice(decisions.substr(i, e - i));
    i = e + 1;
  }
  for (const auto& c : done.changes)
    notice(head + mode + (p_.observe ? " would write " : " wrote ") + c.path.str() + ": " +
           (c.from.empty() ? "\"\"" : c.from) + " -> " + c.to);
  for (const auto& d : done.drifts)
    warn(head + "drift " + d.path.abs(p_.roots).string() + ": keel wrote " + d.wrote + ", now " + d.now +
         " (another manager changed it: keel leaves it alone for " + std::to_string(act::kDriftLockoutTicks) +
         "+ ticks and will not restore its old value)");
  for (const auto& r : done.reapplied)
    notice(head + "systemd realised " + r.path.abs(p_.roots).string() + " again from its unit (" +
           (r.found.empty() ? "\"\"" : r.found) + "): keel wrote " + r.wrote + " again");
  for (const auto& note : done.notes) warn(head + "note: " + note);
  // Where the class cannot help (the cgroups do not meet as siblings), said once per pair.
  if (std::any_of(plan.actions.begin(), plan.actions.end(),
                  [](const ctl::Action& a) { return a.knob == ctl::Knob::preempt_class; }))
    for (const auto& gap : ctl::class_gaps(*snap, plan))
      if (gaps_said_.insert(gap).second) {
        warn(head + "note: " + gap);
        // Gaps name cgroups, which come and go: the set is forgotten (and may be said again) past 1024.
        if (gaps_said_.size() > 1024) gaps_said_ = {gap};
      }
  // A per-instance error that comes back every tick is said less and less often (logging::Repeats).
  for (const auto& e : error_repeats_.filter(snap->tick, done.errors)) log_error(head + e);
  tick_report(p_.spec, *snap, sensor_view(*p_.sensing), plan, done,
              {p_.observe, seconds_since(started), unix_now(), process_usage(p_.roots)}, report_, &labels_);
  p_.metrics->publish(report_);
  if (p_.health != nullptr) p_.health->ticked(true);
  // Record.
  if (p_.record != nullptr && p_.record->is_open()) {
    *p_.record << ctl::to_json_line(*snap) << '\n';
    p_.record->flush();
  }
}

}  // namespace keel::loop
