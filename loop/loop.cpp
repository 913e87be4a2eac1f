#include "loop/loop.h"

#include <bpf/libbpf.h>
#include <malloc.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

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

void drop_missing(config::Config& cfg, const SysRoots& roots,
                  const std::function<void(const std::string&)>& say) {
  if (cfg.actuators.resctrl) {
    auto info = read_resctrl_info(roots.resctrl);
    if (!info || !info->has_value()) {
      say("resctrl is not mounted at " + roots.resctrl.string() +
          ": the L3-ways and memory-bandwidth steps are off");
      cfg.actuators.resctrl = false;
    }
  }
  if (cfg.actuators.steal_task) {
    auto p = act::probe_sched_feature(roots, act::kSteal);
    if (!p || p->state == act::FeatureState::unsupported) {
      say("steal_task is unavailable (" + (p ? p->why : p.error().message()) +
          "): the steal_task step is off");
      cfg.actuators.steal_task = false;
    }
  }
  if (cfg.actuators.irq_affinity)
    if (std::string why = act::irq_affinity_unwritable(roots); !why.empty()) {
      say("IRQ affinity is unavailable (" + why + "): IRQs stay where they are");
      cfg.actuators.irq_affinity = false;
    }
}

// ---- The loop ----

Loop::Loop(Parts parts)
    : p_(std::move(parts)),
      controller_(std::make_unique<ctl::Controller>(p_.spec, p_.topo)),
      reconciler_(p_.spec, p_.topo, *p_.writer),
      labels_(p_.spec.metrics_max_workloads) {}

namespace {

// The calling thread's CPUs, among `online`.
CpuSet thread_affinity(const CpuSet& online) {
  CpuSet out;
  cpu_set_t now;
  CPU_ZERO(&now);
  if (::sched_getaffinity(0, sizeof now, &now) == 0)
    for (unsigned c : online.cpus())
      if (c < CPU_SETSIZE && CPU_ISSET(c, &now)) out.add(c);
  return out;
}

bool set_thread_affinity(const CpuSet& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (unsigned c : cpus.cpus())
    if (c < CPU_SETSIZE) CPU_SET(c, &set);
  return ::sched_setaffinity(0, sizeof set, &set) == 0;
}

}  // namespace

// keel's own loop thread runs off the CPUs critical instances hold: on the reserved CPUs where the
// config declares some, else on every CPU no critical instance holds (all of them when none does).
void Loop::keep_off_critical_cpus(const ctl::Plan& plan, const ctl::Snapshot& snap) {
  const CpuSet held = ctl::critical_cpus(plan, snap);
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
      " ms (the last " + wait + "), " + ms_since(e.at_ns) + " ago");
}

void Loop::log_lull(uint64_t n, const std::string& instance, std::chrono::duration<double> lull) const {
  double below = 0;
  for (const auto& w : watch_)
    if (w.instance == instance) below = w.cpu_below;
  char cpus[32];
  std::snprintf(cpus, sizeof cpus, "%.2f", below);
  log("tick " + std::to_string(n) + " early: " + instance + " kept under " + cpus + " CPUs busy for " +
      std::to_string(static_cast<int>(lull.count() * 1000)) + " ms (its demand watch)");
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
  const auto gap = std::chrono::duration_cast<Clock::duration>(kEarlyGap);
  if (int fd = p_.sensing->events_fd(); fd >= 0)
    if (auto r = events.add(fd); !r) warn("early ticks off: " + r.error().message());
  // After a reload the tick that was due stays due: SIGHUPs faster than the period do not stop ticks.
  auto next = next_.value_or(Clock::now() + period);
  auto last = Clock::now() - gap;      // the latest tick's start
  std::optional<bpf::SloEvent> early;  // the crossing an early tick is due for
  std::string lull;                    // or the instance whose lull it is due for
  Clock::time_point early_at;
  const auto watch_every = std::chrono::duration_cast<Clock::duration>(kWatchEvery);
  const std::chrono::duration<double> lull_for(controller_->policy().lull_s);
  auto watch_at = Clock::now() + watch_every;
  // systemd's watchdog: pinged from this thread between ticks, so a tick that hangs stops the pings.
  const auto ping_every = p_.notifier != nullptr ? p_.notifier->watchdog_every() : std::nullopt;
  auto ping_at = Clock::now();
  for (uint64_t& n = n_;;) {
    const bool due = early || !lull.empty();
    auto until = due ? std::min(next, early_at) : next;
    if (ping_every) until = std::min(until, ping_at);
    if (!watch_.empty() && !due) until = std::min(until, watch_at);
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
    if (w == Events::Wake::event) {
      auto crossings = p_.sensing->take_events();
      if (!crossings.empty() && !early && lull.empty()) {
        early = crossings.front();
        early_at = std::max(now, last + gap);  // at most one early tick per gap
      }
    }
    if (!watch_.empty() && now >= watch_at && !early && lull.empty()) {
      watch_at = now + watch_every;
      if (auto quiet = p_.sensing->watch_demand(watch_, lull_for); !quiet.empty()) {
        lull = quiet.front();
        early_at = std::max(now, last + gap);
      }
    }
    const bool periodic = now >= next;
    const bool early_now = (early || !lull.empty()) && now >= early_at;
    if (!periodic && !early_now) continue;
    if (periodic) {
      next += period;
      if (next < now) next = now + period;  // fell behind
    }
    if (!periodic && early) log_early(n, *early);
    if (!periodic && !lull.empty()) log_lull(n, lull, lull_for);
    const bool was_early = early.has_value() && !periodic;
    const bpf::SloEvent cause = early.value_or(bpf::SloEvent{});
    early.reset();
    lull.clear();
    last = now;
    tick(n);
    if (was_early)
      log("tick " + std::to_string(n) + " early: done " + ms_since(cause.at_ns) + " after the crossing");
    // The demand watch follows what the controller holds now (none left: its state goes too).
    const bool watched = !watch_.empty();
    watch_ = p_.spec.early_ticks ? controller_->demand_watch() : std::vector<ctl::DemandWatch>{};
    if (watched && watch_.empty()) (void)p_.sensing->watch_demand({}, lull_for);
    watch_at = std::min(watch_at, now + watch_every);
    ++n;
    if (once) break;
  }
  return Exit::stop;
}

void Loop::tick(uint64_t n) {
  const char* mode = p_.observe ? "observe" : "enforce";
  const std::string head = "tick " + std::to_string(n) + " ";
  const auto started = std::chrono::steady_clock::now();
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
  auto done = reconciler_.apply(plan, *snap, p_.sensing->inventory());
  keep_off_critical_cpus(plan, *snap);
  p_.sensing->touched(done.touched);
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
  for (const auto& e : done.errors) log_error(head + e);
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

// ---- keel run ----

namespace {

// "BPF run-time stats: needs CAP_SYS_ADMIN, which keel does not have: keel's own BPF cost is not measured"
std::string unprivileged(Feature f, const Verdict& v) {
  const FeatureRow& row = privilege_row(f);
  return std::string(row.label) + ": needs " + v.needs +
         ", which keel does not have: " + std::string(row.without);
}

// As drop_missing, for privileges (host/caps.h): the mechanisms the config enables that keel lacks the
// privilege for are turned off, and BPF run-time stats (`stats`, where given), each with a line.
void drop_unprivileged(config::Config& cfg, const Privileges& p, bpf::BpfStats* stats,
                       const std::function<void(const std::string&)>& say) {
  for (auto [f, on] : {std::pair{Feature::resctrl, &cfg.actuators.resctrl},
                       std::pair{Feature::steal_task, &cfg.actuators.steal_task},
                       std::pair{Feature::irq_affinity, &cfg.actuators.irq_affinity}})
    if (auto v = check(f, p); *on && !v.held) {
      say("run: " + unprivileged(f, v));
      *on = false;
    }
  if (cfg.actuators.isolate_unmanaged && cfg.actuators.isolate_root_tasks)
    if (auto v = check(Feature::root_moves, p); !v.held) say("run: " + unprivileged(Feature::root_moves, v));
  if (stats != nullptr && *stats != bpf::BpfStats::off)
    if (auto v = check(Feature::bpf_stats, p); !v.held) {
      say("run: " + unprivileged(Feature::bpf_stats, v));
      *stats = bpf::BpfStats::off;
    }
}

}  // namespace

int run(config::Config cfg, const RunOptions& o, const SysRoots& roots) {
  constexpr int kOk = 0, kFailure = 1;
  // Before any thread starts: stop signals become events.
  auto events = Events::open(/*hup_reloads=*/true);
  if (!events) {
    log_error("run: " + events.error().message());
    return kFailure;
  }
  auto notifier = Notifier::from_environment();  // systemd's Type=notify (nothing outside a unit)
  if (!notifier) {
    log_error("run: " + notifier.error().message());
    return kFailure;
  }
  // A tick's vectors on a large host are megabytes (a snapshot, a report): mapped and given back each
  // tick rather than kept in the heap (glibc would raise its threshold to the largest one freed).
  ::mallopt(M_MMAP_THRESHOLD, 256 * 1024);
  ::mallopt(M_TRIM_THRESHOLD, 1024 * 1024);
  // One arena: the exporter's threads would each keep one as large as the biggest scrape they built
  // (megabytes on a large host), for a few scrapes a minute that need no malloc parallelism.
  ::mallopt(M_ARENA_MAX, 1);
  const bool observe = o.observe || cfg.daemon.mode == config::Mode::observe;
  const char* mode = observe ? "observe" : "enforce";
  const std::filesystem::path state = o.state.value_or(cfg.daemon.state_dir);
  auto topo = Topology::detect(roots);
  if (!topo) {
    log_error("run: " + topo.error().message());
    return kFailure;
  }
  drop_missing(cfg, roots, notice);
  const Privileges privs = current_privileges(roots);
  bpf::BpfStats stats = o.stats;
  drop_unprivileged(cfg, privs, &stats, notice);
  config::Spec spec = config::compile(cfg, topo->online());
  // keel on the reserved CPUs when the config has them, before any thread starts (the metrics server's
  // inherit it); within the affinity it was started with (a unit's CPUAffinity=, a taskset).
  if (!spec.reserved.empty()) {
    const CpuSet allowed = thread_affinity(topo->online()), want = spec.reserved & allowed;
    if (want.empty())
      warn("run: the reserved CPUs " + spec.reserved.to_list() + " are outside keel's affinity " +
           allowed.to_list() + ": keel stays there");
    else if (!set_thread_affinity(want))
      warn("run: cannot place keel on the reserved CPUs " + want.to_list() + ": " + std::strerror(errno));
  }

  // The metrics endpoint before anything else: a taken port stops keel before it changes a thing
  // (or truncates a trace). Only a journal a crashed keel left is still restored (enforce mode).
  const std::string listen = o.metrics_listen.value_or(cfg.daemon.metrics_listen);
  const std::string listen_source = o.metrics_listen
                                        ? "--metrics-listen " + *o.metrics_listen
                                        : "daemon.metrics_listen = \"" + cfg.daemon.metrics_listen + "\"";
  std::unique_ptr<metrics::Endpoint> endpoint;
  if (listen != "off") {
    auto e = metrics::Endpoint::listen(listen);
    if (!e) {
      log_error("run: metrics: " + listen_source + ": " + e.error().message());
      if (!observe && act::journal_exists(state)) {
        auto s = act::Session::start(roots, state, act::Mode::enforce);
        if (s) {
          const size_t restored = s->recovered().restored + s->finish().restored;
          notice("run: restored what a previous keel left changed (" + std::to_string(restored) +
                 " knobs) before stopping");
        } else {
          log_error("run: " + s.error().message());
        }
      }
      return kFailure;
    }
    endpoint = std::move(*e);
    if (listen.starts_with(':'))
      warn("run: metrics on every address of this host (" + listen_source + "): anyone who can reach " +
           endpoint->address() + " can read them; give a host (127.0.0.1" + listen + ") to keep them local");
  }

  std::ofstream record;
  if (o.record) {
    record.open(*o.record, std::ios::trunc);
    if (!record) {
      log_error("run: cannot write the trace " + *o.record);
      return kFailure;
    }
  }
  if (auto v = check(Feature::cgroup_knobs, privs); !observe && !v.held) {
    log_error("run: " + unprivileged(Feature::cgroup_knobs, v) + " (keel has " + describe_held(privs) + ")");
    return kFailure;
  }
  // The session first: a journal a crashed keel left behind is restored before anything is sensed.
  auto session = act::Session::start(roots, state, observe ? act::Mode::observe : act::Mode::enforce);
  if (!session) {
    log_error("run: " + session.error().message());
    return kFailure;
  }
  if (session->recovered_entries() > 0) {
    const auto& r = session->recovered();
    notice("restored what a previous keel left changed: " + std::to_string(r.restored) + " restored, " +
           std::to_string(r.unchanged) + " unchanged, " + std::to_string(r.gone) + " gone, " +
           std::to_string(r.failed.size()) + " failed");
    for (const auto& e : r.failed) log_error("restore: " + e.message());
    if (!r.failed.empty()) {
      log_error(
          "run: not starting while knobs of a previous run could not be restored (see above; keel restore "
          "retries)");
      return kFailure;
    }
  }
  if (auto v = check(Feature::bpf_sensing, privs); !v.held) {
    log_error("run: " + unprivileged(Feature::bpf_sensing, v) + " (keel has " + describe_held(privs) + ")");
    return kFailure;
  }
  auto opened = Sensing::open(spec, roots, *topo, stats);  // raises the open-files limit first
  if (!opened) {
    log_error("run: " + opened.error().message());
    return kFailure;
  }
  // Held by pointer: a reload replaces it, and the loop keeps pointing at the one in use.
  auto sensing = std::make_unique<Sensing>(std::move(*opened));
  metrics::Setup setup = metrics_setup(spec, observe, sensing->sensor().pmu(), o.version);
  if (!o.revision.empty()) setup.revision = o.revision;
  if (!o.compiler.empty()) setup.compiler = o.compiler;
  setup.libbpf = libbpf_version_string();
  metrics::Metrics metrics(std::move(setup));
  metrics::Health health(spec.period);
  if (endpoint) endpoint->serve(metrics, &health);
  // The server's threads read `metrics` and `health`: it stops before they go, on every return below.
  struct StopServing {
    std::unique_ptr<metrics::Endpoint>& e;
    ~StopServing() { e.reset(); }
  } stop_serving{endpoint};
  size_t critical = 0;
  for (const auto& w : spec.workloads) critical += w.critical;
  notice(std::string("run: ") + mode + ", period " + config::format_duration(spec.period) + ", " +
         std::to_string(spec.workloads.size()) + " workloads (" + std::to_string(critical) +
         " critical), hierarchy " + sensing->inventory().defining().name() + " (" +
         std::to_string(sensing->inventory().cgroups()) + " cgroups, " + sensing->inventory().watching() +
         "), sensors " + bpf::to_string(sensing->sensor().attach()) + ", cache counters " +
         sensing->sensor().counters_note() + ", state " + state.string() +
         (endpoint ? ", metrics on http://" + endpoint->address() + "/metrics" : ", metrics off"));

  // In a cgroup namespace of its own (a container's default on cgroup v2) /proc/PID/cgroup names
  // cgroups relative to that namespace: pid_file rules, keel's own cgroup and the root cgroup's tasks
  // would be read wrong. Said, not guessed around (deploy/README.md).
  {
    std::error_code e1, e2;
    const auto own = std::filesystem::read_symlink(roots.proc / "self/ns/cgroup", e1);
    const auto init = std::filesystem::read_symlink(roots.proc / "1/ns/cgroup", e2);
    if (!e1 && !e2 && own != init)
      warn("run: keel runs in a cgroup namespace of its own (" + own.string() + ", pid 1's is " +
           init.string() +
           "): /proc/PID/cgroup paths are relative to it, so pid_file rules match nothing, keel's own cgroup "
           "is not left out of the rules and the root cgroup's tasks are not moved; run keel in the host's "
           "cgroup namespace (docker --cgroupns=host; deploy/README.md)");
  }
  // systemd realises its units' cgroups again from their settings (daemon-reload, a unit's start,
  // set-property): a knob of one found back at its original value is systemd's own, written again.
  if (systemd_runs(roots))
    session->writer().set_reapplied_by_owner([](std::string_view path) { return systemd_unit_path(path); });
  Loop loop({spec, observe, o.verbose, *topo, sensing.get(), &session->writer(), &metrics, &record, roots,
             &*notifier, &health});
  if (const auto& handed = session->adopted()) {
    auto desired = parse_desired(*handed);
    if (!desired) {
      // The journal still holds every original: adopted as found, given back as the plan lets go.
      warn("run: " + desired.error().message() + ": the knobs a previous keel left are adopted as found");
      desired.emplace();
    }
    notice("run: adopted what a previous keel handed over: " + std::to_string(session->writer().journaled()) +
           " journaled knobs, the desired state of " + std::to_string(desired->size()) +
           " instances; nothing given back");
    loop.adopt(std::move(*desired));
  }
  if (auto r = notifier->send("READY=1\nSTATUS=" + std::string(mode) + ", " +
                              std::to_string(spec.workloads.size()) + " workloads");
      !r)
    log_error("run: " + r.error().message());
  while (loop.run(*events, o.once) == Loop::Exit::reload) {
    (void)notifier->send("RELOADING=1");
    std::optional<config::Config> next;
    if (o.reload)
      next = o.reload();
    else
      warn("reload: SIGHUP ignored: no config file to read again");
    if (next) {
      auto restart_only = [&](const char* key, bool changed) {
        if (changed)
          warn(std::string("reload: ") + key + " changed: a restart applies it; the rest is used now");
      };
      restart_only("daemon.state_dir", !o.state && next->daemon.state_dir != cfg.daemon.state_dir);
      restart_only("daemon.metrics_listen",
                   !o.metrics_listen && next->daemon.metrics_listen != cfg.daemon.metrics_listen);
      restart_only("daemon.hierarchy", next->daemon.hierarchy != cfg.daemon.hierarchy);
      drop_missing(*next, roots, notice);
      drop_unprivileged(*next, privs, nullptr, notice);
      config::Spec next_spec = config::compile(*next, topo->online());
      restart_only("daemon.mode", next_spec.mode != spec.mode);
      next_spec.mode = spec.mode;
      next_spec.hierarchy = spec.hierarchy;
      auto s = Sensing::open(next_spec, roots, *topo, stats);
      if (!s) {
        log_error("reload: " + s.error().message() + ": the running config stays");
      } else {
        auto fresh = std::make_unique<Sensing>(std::move(*s));
        loop.reload(next_spec, fresh.get());
        sensing = std::move(fresh);  // the old sensing (its BPF programs) goes
        spec = std::move(next_spec);
        health.set_period(spec.period);
        notice("reload: the new config is in use: " + std::to_string(spec.workloads.size()) +
               " workloads; knobs of instances it no longer manages go back at the next tick");
      }
    } else if (o.reload) {
      log_error("reload: the config is not valid (above): the running config stays");
    }
    (void)notifier->send("READY=1");
  }
  health.stopping();
  if (auto r = notifier->send("STOPPING=1"); !r) log_error("run: " + r.error().message());
  if (!observe && spec.rollback == config::Rollback::not_on_exit) {
    // Hand over (daemon.rollback = "not_on_exit"): knobs as they are, the journal and the desired state
    // kept for the next keel; `keel restore` gives them back.
    const size_t journaled = session->writer().journaled();
    if (auto r = session->hand_over(format_desired(loop.desired())); !r) {
      log_error("run: " + r.error().message() + ": giving every knob back instead");
    } else {
      notice("run: stopped and handed over (daemon.rollback = \"not_on_exit\"): " +
             std::to_string(journaled) + " knobs left as keel set them, their originals journaled in " +
             state.string() + "; the next keel adopts them, keel restore gives them back");
      return kOk;
    }
  }

  int rc = kOk;
  auto back = session->finish();
  if (!observe || back.restored + back.failed.size() > 0)
    notice("run: stopped; " + std::to_string(back.restored) + " knobs restored, " +
           std::to_string(back.unchanged) + " already at their original value, " + std::to_string(back.gone) +
           " gone, " + std::to_string(back.kept) + " kept, " + std::to_string(back.failed.size()) +
           " failed");
  for (const auto& c : back.changed_since)
    notice("restore: left " + c + ": another manager changed it after keel, its value stays");
  for (const auto& c : back.every_cpu)
    notice("restore: " + c +
           ": cpuset.cpus was not set; the kernel refuses to unset it while the cgroup "
           "has tasks, so it has every CPU, and with it its parent's, as before");
  for (const auto& e : back.failed) log_error("restore: " + e.message());
  if (!back.failed.empty()) {
    log_error("run: the failed knobs stay journaled in " + state.string() + "; run keel restore");
    rc = kFailure;
  }
  return rc;
}

}  // namespace keel::loop
