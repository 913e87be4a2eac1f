#include "loop/daemon.h"

#include <bpf/libbpf.h>
#include <malloc.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>

#include "actuators/irq.h"
#include "actuators/journal.h"
#include "actuators/sched_features.h"
#include "actuators/session.h"
#include "host/log.h"
#include "host/resctrl_info.h"
#include "host/sched_ext.h"
#include "inventory/platforms.h"
#include "loop/events.h"
#include "loop/loop.h"
#include "loop/notify.h"
#include "loop/sensing.h"
#include "loop/telemetry.h"
#include "metrics/metrics.h"

namespace keel::loop {

namespace {

void notice(const std::string& line) { logging::line(logging::Level::notice, line); }
void warn(const std::string& line) { logging::line(logging::Level::warning, line); }
void log_error(const std::string& line) { logging::line(logging::Level::error, line); }

constexpr int kOk = 0, kFailure = 1;

// Turns off the mechanisms the config enables that this host lacks, each with a line to `say`.
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
  // A sched_ext scheduler that ignores cgroup weights or cpu.idle: keel would write them, read them
  // back and change nothing, so those steps are off (cpusets are CPU affinity, which it keeps).
  const SchedExt scx = read_sched_ext(roots);
  if (cfg.actuators.cpu_weight && !scx.honours_weight()) {
    say(scx.describe() + ": the CPU-weight step is off");
    cfg.actuators.cpu_weight = false;
  }
  if (cfg.actuators.preempt_class != config::PreemptMode::off && !scx.honours_idle()) {
    say(scx.describe() + ": the best-effort preemption class (cpu.idle) is off");
    cfg.actuators.preempt_class = config::PreemptMode::off;
  }
}
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

config::Spec compile_for_host(config::Config& cfg, const SysRoots& roots, const Topology& topo,
                              const std::function<void(const std::string&)>& say, const Privileges* privs,
                              bpf::BpfStats* stats) {
  drop_missing(cfg, roots, say);
  if (privs != nullptr) drop_unprivileged(cfg, *privs, stats, say);
  return config::compile(cfg, topo.online());
}

// keel run from its first step to its last. The members are in the order they are made; the metrics
// endpoint, whose threads read `metrics_` and `health_`, is declared after them so it stops first.
class Daemon {
 public:
  Daemon(config::Config cfg, const RunOptions& o, const SysRoots& roots)
      : cfg_(std::move(cfg)),
        o_(o),
        roots_(roots),
        observe_(o.observe || cfg_.daemon.mode == config::Mode::observe),
        mode_(observe_ ? "observe" : "enforce"),
        state_(o.state.value_or(cfg_.daemon.state_dir)),
        stats_(o.stats) {}
  // Everything up to READY=1; an exit code when keel cannot start (nothing changed then, except a
  // crashed run's journal restored).
  std::optional<int> start();
  // Ticks until a stop signal (false) or a reload signal (true).
  bool serve() { return loop_->run(*events_, o_.once) == Loop::Exit::reload; }
  // SIGHUP: the config read again; a valid one is used from the next tick, else the running one stays.
  void reload();
  // Every knob given back (or handed over): the exit code.
  int stop();

 private:
  bool prepare();        // events, notifier, malloc, topology, privileges, the spec, keel's CPUs
  bool open_endpoint();  // the metrics port (a taken one stops keel before it changes a thing)
  bool open_health();    // the health listener, the same way
  void restore_before_stopping();
  bool open_session();  // the trace, the journal a crashed keel left restored
  bool open_sensing();  // BPF and the inventory; the metrics and their server
  void say_started() const;
  void adopt_handover();  // what a previous keel handed over, taken on
  config::Spec compile_next(config::Config& next) const;

  config::Config cfg_;
  RunOptions o_;
  SysRoots roots_;
  std::string cgroupns_error_;  // why keel's cgroup namespace's root was not found ("" found, or the host's)
  bool observe_;
  const char* mode_;
  std::filesystem::path state_;
  bpf::BpfStats stats_;
  std::optional<Events> events_;
  std::optional<Notifier> notifier_;
  std::optional<Topology> topo_;
  Privileges privs_;
  config::Spec spec_;
  std::ofstream record_;
  std::optional<act::Session> session_;
  std::unique_ptr<Sensing> sensing_;  // by pointer: a reload replaces it, the loop points at the one in use
  std::unique_ptr<metrics::Metrics> metrics_;
  std::unique_ptr<metrics::Health> health_;
  std::unique_ptr<metrics::Endpoint> endpoint_;
  std::unique_ptr<metrics::HealthListener> health_listener_;
  std::unique_ptr<Loop> loop_;
};

bool Daemon::prepare() {
  // Before any thread starts: stop signals become events.
  auto events = Events::open(/*hup_reloads=*/true);
  if (!events) {
    log_error("run: " + events.error().message());
    return false;
  }
  events_.emplace(std::move(*events));
  auto notifier = Notifier::from_environment();  // systemd's Type=notify (nothing outside a unit)
  if (!notifier) {
    log_error("run: " + notifier.error().message());
    return false;
  }
  notifier_.emplace(std::move(*notifier));
  // A tick's vectors on a large host are megabytes (a snapshot, a report): mapped and given back each
  // tick rather than kept in the heap (glibc would raise its threshold to the largest one freed).
  ::mallopt(M_MMAP_THRESHOLD, 256 * 1024);
  ::mallopt(M_TRIM_THRESHOLD, 1024 * 1024);
  // One arena: the exporter's threads would each keep one as large as the biggest scrape they built
  // (megabytes on a large host), for a few scrapes a minute that need no malloc parallelism.
  ::mallopt(M_ARENA_MAX, 1);
  // In a cgroup namespace of its own (a Kubernetes pod's on cgroup v2) keel reads the kernel's paths,
  // which are relative to that namespace, back as the host's.
  if (auto ns = with_cgroupns(roots_))
    roots_ = std::move(*ns);
  else
    cgroupns_error_ = ns.error().message();
  auto topo = Topology::detect(roots_);
  if (!topo) {
    log_error("run: " + topo.error().message());
    return false;
  }
  topo_.emplace(std::move(*topo));
  privs_ = current_privileges(roots_);
  spec_ = compile_for_host(cfg_, roots_, *topo_, notice, &privs_, &stats_);
  // keel on the reserved CPUs when the config has them, before any thread starts (the metrics server's
  // inherit it); within the affinity it was started with (a unit's CPUAffinity=, a taskset).
  if (!spec_.reserved.empty()) {
    const CpuSet allowed = thread_affinity(topo_->online()), want = spec_.reserved & allowed;
    if (want.empty())
      warn("run: the reserved CPUs " + spec_.reserved.to_list() + " are outside keel's affinity " +
           allowed.to_list() + ": keel stays there");
    else if (!set_thread_affinity(want))
      warn("run: cannot place keel on the reserved CPUs " + want.to_list() + ": " + std::strerror(errno));
  }
  return true;
}

bool Daemon::open_endpoint() {
  if (!open_health()) return false;
  const std::string listen = o_.metrics_listen.value_or(cfg_.daemon.metrics_listen);
  if (listen == "off") return true;
  const std::string source = o_.metrics_listen
                                 ? "--metrics-listen " + *o_.metrics_listen
                                 : "daemon.metrics_listen = \"" + cfg_.daemon.metrics_listen + "\"";
  auto e = metrics::Endpoint::listen(listen);
  if (!e) {
    log_error("run: metrics: " + source + ": " + e.error().message());
    restore_before_stopping();
    return false;
  }
  endpoint_ = std::move(*e);
  if (listen.starts_with(':'))
    warn("run: metrics on every address of this host (" + source + "): anyone who can reach " +
         endpoint_->address() + " can read them; give a host (127.0.0.1" + listen + ") to keep them local");
  return true;
}

bool Daemon::open_health() {
  const std::string listen = o_.health_listen.value_or(cfg_.daemon.health_listen);
  if (listen == "off") return true;
  auto h = metrics::HealthListener::listen(listen);
  if (!h) {
    log_error("run: health: " +
              (o_.health_listen ? "--health-listen " + listen : "daemon.health_listen = \"" + listen + "\"") +
              ": " + h.error().message());
    restore_before_stopping();
    return false;
  }
  health_listener_ = std::move(*h);
  return true;
}

// A listener that cannot open stops keel before it changes a thing; only a journal a crashed keel left is
// still restored (enforce mode).
void Daemon::restore_before_stopping() {
  if (observe_ || !act::journal_exists(state_)) return;
  auto s = act::Session::start(roots_, state_, act::Mode::enforce);
  if (s) {
    const size_t restored = s->recovered().restored + s->finish().restored;
    notice("run: restored what a previous keel left changed (" + std::to_string(restored) +
           " knobs) before stopping");
  } else {
    log_error("run: " + s.error().message());
  }
}

bool Daemon::open_session() {
  if (o_.record) {
    record_.open(*o_.record, std::ios::trunc);
    if (!record_) {
      log_error("run: cannot write the trace " + *o_.record);
      return false;
    }
  }
  if (auto v = check(Feature::cgroup_knobs, privs_); !observe_ && !v.held) {
    log_error("run: " + unprivileged(Feature::cgroup_knobs, v) + " (keel has " + describe_held(privs_) + ")");
    return false;
  }
  // The session first: a journal a crashed keel left behind is restored before anything is sensed.
  auto session = act::Session::start(roots_, state_, observe_ ? act::Mode::observe : act::Mode::enforce);
  if (!session) {
    log_error("run: " + session.error().message());
    return false;
  }
  session_.emplace(std::move(*session));
  if (const act::Journal* j = session_->writer().journal())
    for (const auto& s : j->salvaged())
      log_error("journal " + j->file().string() + ": " + s +
                " skipped (damaged); the records around it were kept and restored or adopted");
  if (session_->recovered_entries() > 0) {
    const auto& r = session_->recovered();
    notice("restored what a previous keel left changed: " + std::to_string(r.restored) + " restored, " +
           std::to_string(r.unchanged) + " unchanged, " + std::to_string(r.gone) + " gone, " +
           std::to_string(r.failed.size()) + " failed");
    for (const auto& c : r.changed_since)
      notice("restore: left " + c + ": another manager changed it after keel, its value stays");
    for (const auto& e : r.failed) log_error("restore: " + e.message());
    if (!r.failed.empty()) {
      log_error(
          "run: not starting while knobs of a previous run could not be restored (see above; keel restore "
          "retries)");
      return false;
    }
  }
  return true;
}

bool Daemon::open_sensing() {
  if (auto v = check(Feature::bpf_sensing, privs_); !v.held) {
    log_error("run: " + unprivileged(Feature::bpf_sensing, v) + " (keel has " + describe_held(privs_) + ")");
    return false;
  }
  auto opened = Sensing::open(spec_, roots_, *topo_, stats_);  // raises the open-files limit first
  if (!opened) {
    log_error("run: " + opened.error().message());
    return false;
  }
  sensing_ = std::make_unique<Sensing>(std::move(*opened));
  metrics::Setup setup = metrics_setup(spec_, observe_, sensing_->sensor().pmu(), o_.version);
  if (!o_.revision.empty()) setup.revision = o_.revision;
  if (!o_.compiler.empty()) setup.compiler = o_.compiler;
  setup.libbpf = libbpf_version_string();
  metrics_ = std::make_unique<metrics::Metrics>(std::move(setup));
  health_ = std::make_unique<metrics::Health>(spec_.period);
  if (endpoint_) endpoint_->serve(*metrics_, health_.get());
  if (health_listener_) health_listener_->serve(health_.get());
  return true;
}

void Daemon::say_started() const {
  size_t critical = 0;
  for (const auto& w : spec_.workloads) critical += w.critical;
  const inv::Inventory& inv = sensing_->inventory();
  notice(std::string("run: ") + mode_ + ", period " + config::format_duration(spec_.period) + ", " +
         std::to_string(spec_.workloads.size()) + " workloads (" + std::to_string(critical) +
         " critical), hierarchy " + inv.defining().name() + " (" + std::to_string(inv.cgroups()) +
         " cgroups, " + inv.watching() + "), sensors " + bpf::to_string(sensing_->sensor().attach()) +
         ", cache counters " + sensing_->sensor().counters_note() + ", state " + state_.string() +
         (endpoint_ ? ", metrics on http://" + endpoint_->address() + "/metrics" : ", metrics off") +
         (health_listener_ ? ", health on http://" + health_listener_->address() + "/healthz" : ""));
  // In a cgroup namespace of its own (a container's default on cgroup v2) /proc/PID/cgroup names
  // cgroups relative to that namespace: read back as the host's paths where its root was found, said
  // where it was not (pid_file rules, keel's own cgroup and the root cgroup's tasks would be read wrong).
  if (!roots_.cgroupns_roots.empty()) {
    std::string where;
    for (const auto& [id, root] : roots_.cgroupns_roots)
      where += (where.empty() ? "" : ", ") +
               (id == 0 ? std::string("unified") : "hierarchy " + std::to_string(id)) + " " + root;
    notice("run: keel runs in a cgroup namespace of its own, rooted at " + where +
           ": the kernel's cgroup paths are read from there as the host's");
  } else if (!cgroupns_error_.empty()) {
    warn("run: keel runs in a cgroup namespace of its own and " + cgroupns_error_ +
         ": /proc/PID/cgroup paths are relative to it, so pid_file rules match nothing, keel's own cgroup "
         "is not left out of the rules and the root cgroup's tasks are not moved; run keel in the host's "
         "cgroup namespace (docker --cgroupns=host; deploy/README.md)");
  }
}

void Daemon::adopt_handover() {
  const auto& handed = session_->adopted();
  if (!handed) return;
  auto desired = parse_desired(*handed);
  if (!desired) {
    // The journal still holds every original: adopted as found, given back as the plan lets go.
    warn("run: " + desired.error().message() + ": the knobs a previous keel left are adopted as found");
    desired.emplace();
  }
  notice("run: adopted what a previous keel handed over: " + std::to_string(session_->writer().journaled()) +
         " journaled knobs, the desired state of " + std::to_string(desired->size()) +
         " instances; nothing given back");
  loop_->adopt(std::move(*desired));
}

std::optional<int> Daemon::start() {
  if (!prepare()) return kFailure;
  // The metrics endpoint before anything else: a taken port stops keel before it changes a thing (or
  // truncates a trace).
  if (!open_endpoint() || !open_session() || !open_sensing()) return kFailure;
  say_started();
  // systemd realises its units' cgroups again from their settings (daemon-reload, a unit's start,
  // set-property): a knob of one found back at its original value is systemd's own, written again.
  if (systemd_runs(roots_))
    session_->writer().set_reapplied_by_owner([](std::string_view path) { return systemd_unit_path(path); });
  loop_ = std::make_unique<Loop>(Loop::Parts{spec_, observe_, o_.verbose, *topo_, sensing_.get(),
                                             &session_->writer(), metrics_.get(), &record_, roots_,
                                             &*notifier_, health_.get()});
  adopt_handover();
  if (auto r = notifier_->send("READY=1\nSTATUS=" + std::string(mode_) + ", " +
                               std::to_string(spec_.workloads.size()) + " workloads");
      !r)
    log_error("run: " + r.error().message());
  return std::nullopt;
}

// A reloaded config as this keel can use it: what needs a restart said and kept as it runs.
config::Spec Daemon::compile_next(config::Config& next) const {
  auto restart_only = [&](const char* key, bool changed) {
    if (changed) warn(std::string("reload: ") + key + " changed: a restart applies it; the rest is used now");
  };
  restart_only("daemon.state_dir", !o_.state && next.daemon.state_dir != cfg_.daemon.state_dir);
  restart_only("daemon.metrics_listen",
               !o_.metrics_listen && next.daemon.metrics_listen != cfg_.daemon.metrics_listen);
  restart_only("daemon.health_listen",
               !o_.health_listen && next.daemon.health_listen != cfg_.daemon.health_listen);
  restart_only("daemon.hierarchy", next.daemon.hierarchy != cfg_.daemon.hierarchy);
  config::Spec spec = compile_for_host(next, roots_, *topo_, notice, &privs_);
  restart_only("daemon.mode", spec.mode != spec_.mode);
  spec.mode = spec_.mode;
  spec.hierarchy = spec_.hierarchy;
  return spec;
}

void Daemon::reload() {
  (void)notifier_->send("RELOADING=1");
  std::optional<config::Config> next;
  if (o_.reload)
    next = o_.reload();
  else
    warn("reload: SIGHUP ignored: no config file to read again");
  if (next) {
    config::Spec next_spec = compile_next(*next);
    auto s = Sensing::open(next_spec, roots_, *topo_, stats_);
    if (!s) {
      log_error("reload: " + s.error().message() + ": the running config stays");
    } else {
      auto fresh = std::make_unique<Sensing>(std::move(*s));
      loop_->reload(next_spec, fresh.get());
      sensing_ = std::move(fresh);  // the old sensing (its BPF programs) goes
      spec_ = std::move(next_spec);
      health_->set_period(spec_.period);
      notice("reload: the new config is in use: " + std::to_string(spec_.workloads.size()) +
             " workloads; knobs of instances it no longer manages go back at the next tick");
    }
  } else if (o_.reload) {
    log_error("reload: the config is not valid (above): the running config stays");
  }
  (void)notifier_->send("READY=1");
}

int Daemon::stop() {
  health_->stopping();
  if (auto r = notifier_->send("STOPPING=1"); !r) log_error("run: " + r.error().message());
  if (!observe_ && spec_.rollback == config::Rollback::not_on_exit) {
    // Hand over (daemon.rollback = "not_on_exit"): knobs as they are, the journal and the desired state
    // kept for the next keel; `keel restore` gives them back.
    const size_t journaled = session_->writer().journaled();
    if (auto r = session_->hand_over(format_desired(loop_->desired())); !r) {
      log_error("run: " + r.error().message() + ": giving every knob back instead");
    } else {
      notice("run: stopped and handed over (daemon.rollback = \"not_on_exit\"): " +
             std::to_string(journaled) + " knobs left as keel set them, their originals journaled in " +
             state_.string() + "; the next keel adopts them, keel restore gives them back");
      return kOk;
    }
  }
  // The loop, the inventory's descriptors and watches and the BPF sensor go before the final restore,
  // so a keel a tenant ran short of file descriptors still has them for giving every knob back.
  loop_.reset();
  sensing_.reset();
  auto back = session_->finish();
  if (!observe_ || back.restored + back.failed.size() > 0)
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
    log_error("run: the failed knobs stay journaled in " + state_.string() + "; run keel restore");
    return kFailure;
  }
  return kOk;
}

int run(config::Config cfg, const RunOptions& o, const SysRoots& roots) {
  Daemon daemon(std::move(cfg), o, roots);
  if (auto failed = daemon.start()) return *failed;
  while (daemon.serve()) daemon.reload();
  return daemon.stop();
}

}  // namespace keel::loop
