// keel run: sense -> decide -> act every period, until SIGINT/SIGTERM, then every knob back.
// keel plan: one observation window, then the actions keel would take and why.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "actuators/journal.h"
#include "actuators/sched_features.h"
#include "actuators/session.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/host_facts.h"
#include "controller/controller.h"
#include "controller/reconciler.h"
#include "controller/sensing.h"
#include "controller/telemetry.h"
#include "controller/trace.h"
#include "host/resctrl_info.h"
#include "host/topology.h"

namespace keel::cli {

namespace {

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

void log(const std::string& line) {
  std::fprintf(stderr, "keel: %s\n", line.c_str());
  std::fflush(stderr);
}

std::optional<bpf::BpfStats> parse_stats(const std::optional<std::string>& v) {
  if (!v || *v == "sampled") return bpf::BpfStats::sampled;
  if (*v == "always") return bpf::BpfStats::always;
  if (*v == "off") return bpf::BpfStats::off;
  return std::nullopt;
}

// Mechanisms the config enables that this host lacks are turned off for the controller (its ladder
// skips them), each with a line saying so.
void drop_missing(config::Config& cfg, const SysRoots& roots) {
  if (cfg.actuators.resctrl) {
    auto info = read_resctrl_info(roots.resctrl);
    if (!info || !info->has_value()) {
      log("resctrl is not mounted at " + roots.resctrl.string() +
          ": the L3-ways and memory-bandwidth steps are off");
      cfg.actuators.resctrl = false;
    }
  }
  if (cfg.actuators.steal_task) {
    auto p = act::probe_sched_feature(roots, act::kSteal);
    if (!p || p->state == act::FeatureState::unsupported) {
      log("steal_task is unavailable (" + (p ? p->why : p.error().message()) +
          "): the steal_task step is off");
      cfg.actuators.steal_task = false;
    }
  }
}

bool sleep_until(std::chrono::steady_clock::time_point t) {
  while (!g_stop && std::chrono::steady_clock::now() < t)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return !g_stop;
}

std::string status_line(const ctl::Plan& plan, const ctl::Snapshot& snap) {
  std::string out;
  for (const auto& w : snap.workloads) {
    if (!w.critical) continue;
    auto v = plan.workloads.find(w.instance);
    if (v == plan.workloads.end()) continue;
    char b[160];
    std::snprintf(b, sizeof b, "%s%s p99 %.0f us (tick %.0f us, %llu waits) slack %.2f rung %u%s",
                  out.empty() ? "" : "; ", w.instance.c_str(), v->second.p99_us, w.rq_p99_us,
                  static_cast<unsigned long long>(w.rq_waits), v->second.slack, v->second.rung,
                  v->second.violated ? " VIOLATED" : "");
    out += b;
  }
  if (out.empty()) {  // no critical workload: the busiest waiters, for a first look
    std::vector<const ctl::WorkloadSignals*> order;
    for (const auto& w : snap.workloads) order.push_back(&w);
    std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->rq_p99_us > b->rq_p99_us; });
    for (size_t i = 0; i < order.size() && i < 5; ++i) {
      char b[160];
      std::snprintf(b, sizeof b, "%s%s p99 %.0f us (%llu waits)", i ? "; " : "", order[i]->instance.c_str(),
                    order[i]->rq_p99_us, static_cast<unsigned long long>(order[i]->rq_waits));
      out += b;
    }
    if (out.empty()) out = "no workload matched";
  }
  return out;
}

}  // namespace

int cmd_run(const std::vector<std::string>& argv) {
  auto args = parse_args(argv, {.switches = {"observe", "once", "verbose"},
                                .with_value = {"config", "record", "state", "bpf-stats", "metrics-listen"}});
  if (!args) return usage_error("run", args.error().message());
  if (!args->positional.empty()) return usage_error("run", "takes no arguments");
  auto file = args->value("config");
  if (!file) return usage_error("run", "needs --config FILE");
  auto stats = parse_stats(args->value("bpf-stats"));
  if (!stats) return usage_error("run", "--bpf-stats takes sampled (one interval in ten), always or off");
  auto flag = args->value("metrics-listen");
  if (flag && *flag != "off")
    if (auto why = config::listen_address_problem(*flag))
      return usage_error("run", "--metrics-listen " + *flag + ": " + *why + " (or off)");
  const SysRoots roots = SysRoots::host();
  auto loaded = load_config_for_host("run", *file, roots);
  if (!loaded) return loaded.error();
  config::Config cfg = *loaded;
  const bool observe = args->has("observe") || cfg.daemon.mode == config::Mode::observe;
  const char* mode = observe ? "observe" : "enforce";
  std::filesystem::path state =
      args->value("state") ? std::filesystem::path(*args->value("state")) : cfg.daemon.state_dir;
  auto topo = Topology::detect(roots);
  if (!topo) {
    log("run: " + topo.error().message());
    return kExitFailure;
  }
  drop_missing(cfg, roots);

  // The metrics endpoint before anything else: a taken port stops keel before it changes a thing
  // (or truncates a trace). Only a journal a crashed keel left is still restored (enforce mode).
  const std::string listen = flag.value_or(cfg.daemon.metrics_listen);
  const std::string listen_source =
      flag ? "--metrics-listen " + *flag : "daemon.metrics_listen = \"" + cfg.daemon.metrics_listen + "\"";
  std::unique_ptr<metrics::Endpoint> endpoint;
  if (listen != "off") {
    auto e = metrics::Endpoint::listen(listen);
    if (!e) {
      log("run: metrics: " + listen_source + ": " + e.error().message());
      if (!observe && act::journal_exists(state)) {
        auto s = act::Session::start(roots, state, act::Mode::enforce);
        if (s) {
          s->finish();
          log("run: restored what a previous keel left changed (" + std::to_string(s->recovered().restored) +
              " knobs) before stopping");
        } else {
          log("run: " + s.error().message());
        }
      }
      return kExitFailure;
    }
    endpoint = std::move(*e);
  }

  std::ofstream record;
  if (auto r = args->value("record")) {
    record.open(*r, std::ios::trunc);
    if (!record) {
      log("run: cannot write the trace " + *r);
      return kExitFailure;
    }
  }
  // The session first: a journal a crashed keel left behind is restored before anything is sensed.
  auto session = act::Session::start(roots, state, observe ? act::Mode::observe : act::Mode::enforce);
  if (!session) {
    log("run: " + session.error().message());
    return kExitFailure;
  }
  if (session->recovered_entries() > 0) {
    const auto& r = session->recovered();
    log("restored what a previous keel left changed: " + std::to_string(r.restored) + " restored, " +
        std::to_string(r.unchanged) + " unchanged, " + std::to_string(r.gone) + " gone, " +
        std::to_string(r.failed.size()) + " failed");
    for (const auto& e : r.failed) log("restore: " + e.message());
    if (!r.failed.empty()) {
      log("run: not starting while knobs of a previous run could not be restored (see above; keel restore "
          "retries)");
      return kExitFailure;
    }
  }
  auto sensing = ctl::Sensing::open(cfg, roots, *topo, *stats);
  if (!sensing) {
    log("run: " + sensing.error().message());
    return kExitFailure;
  }
  const config::Spec spec = config::compile(cfg, topo->online());
  metrics::Metrics metrics(ctl::metrics_setup(spec, observe, sensing->pmu(), KEEL_VERSION));
  if (endpoint) endpoint->serve(metrics);
  ctl::Controller controller(spec, *topo);
  ctl::Reconciler reconciler(cfg, sensing->layout(), sensing->hierarchy(), *topo, session->writer());
  size_t critical = 0;
  for (const auto& w : cfg.workloads) critical += w.klass == config::WorkloadClass::critical;
  const auto period = std::chrono::duration_cast<std::chrono::steady_clock::duration>(cfg.daemon.period);
  log(std::string("run: ") + mode + ", period " + config::format_duration(cfg.daemon.period) + ", " +
      std::to_string(cfg.workloads.size()) + " workloads (" + std::to_string(critical) +
      " critical), hierarchy " + sensing->hierarchy().name() + ", sensors " +
      bpf::to_string(sensing->attach()) + ", cache counters " + sensing->counters_note() + ", state " +
      state.string() +
      (endpoint ? ", metrics on http://" + endpoint->address() + "/metrics" : ", metrics off"));

  // SIGHUP too: a terminal that closes must not end keel without giving the host back.
  ::signal(SIGINT, on_signal);
  ::signal(SIGTERM, on_signal);
  ::signal(SIGHUP, on_signal);
  ::signal(SIGPIPE, SIG_IGN);
  int rc = kExitOk;
  std::map<std::string, bool> violated;
  auto seconds_since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  auto unix_now = [] {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  };
  auto next = std::chrono::steady_clock::now() + period;
  for (uint64_t tick = 1; !g_stop; ++tick) {
    if (!sleep_until(next)) break;
    next += period;
    if (next < std::chrono::steady_clock::now())
      next = std::chrono::steady_clock::now() + period;  // fell behind
    const auto started = std::chrono::steady_clock::now();
    auto snap = sensing->sample(tick);
    if (!snap) {
      log("tick " + std::to_string(tick) + " sensing failed: " + snap.error().message());
      metrics.sensing_failed(seconds_since(started), unix_now());
      continue;
    }
    if (record.is_open()) {
      record << ctl::to_json_line(*snap) << '\n';
      record.flush();
    }
    ctl::Plan plan = controller.step(*snap);
    auto done = reconciler.apply(plan, *snap);
    // The decision log: status when a critical workload's state turns (or every tick with --verbose),
    // then the decisions, then what was written (or would be).
    bool turned = false;
    for (const auto& [inst, v] : plan.workloads) {
      if (violated[inst] != v.violated) turned = true;
      violated[inst] = v.violated;
    }
    if (turned || args->has("verbose"))
      log("tick " + std::to_string(tick) + " " + mode + " status " + status_line(plan, *snap));
    std::string decisions = ctl::format_actions(plan, mode);
    for (size_t i = 0; i < decisions.size();) {
      size_t e = decisions.find('\n', i);
      log(decisions.substr(i, e - i));
      i = e + 1;
    }
    for (const auto& c : done.changes)
      log("tick " + std::to_string(tick) + " " + mode + (observe ? " would write " : " wrote ") +
          c.path.str() + ": " + (c.from.empty() ? "\"\"" : c.from) + " -> " + c.to);
    for (const auto& n : done.notes) log("tick " + std::to_string(tick) + " note: " + n);
    for (const auto& e : done.errors) log("tick " + std::to_string(tick) + " error: " + e);
    metrics.publish(
        ctl::tick_report(spec, *snap, ctl::sensor_view(*sensing), plan, done,
                         {observe, seconds_since(started), unix_now(), ctl::process_usage(roots)}));
    if (args->has("once")) break;
  }
  auto back = session->finish();
  if (!observe || back.restored + back.failed.size() > 0)
    log("run: stopped; " + std::to_string(back.restored) + " knobs restored, " +
        std::to_string(back.unchanged) + " already at their original value, " + std::to_string(back.gone) +
        " gone, " + std::to_string(back.kept) + " kept, " + std::to_string(back.failed.size()) + " failed");
  for (const auto& e : back.failed) log("restore: " + e.message());
  if (!back.failed.empty()) {
    log("run: the failed knobs stay journaled in " + state.string() + "; run keel restore");
    rc = kExitFailure;
  }
  return rc;
}

int cmd_plan(const std::vector<std::string>& argv) {
  auto args = parse_args(argv, {.switches = {}, .with_value = {"config", "window"}});
  if (!args) return usage_error("plan", args.error().message());
  if (!args->positional.empty()) return usage_error("plan", "takes no arguments");
  auto file = args->value("config");
  if (!file) return usage_error("plan", "needs --config FILE");
  const SysRoots roots = SysRoots::host();
  auto loaded = load_config_for_host("plan", *file, roots);
  if (!loaded) return loaded.error();
  config::Config cfg = *loaded;
  double window = std::chrono::duration<double>(cfg.daemon.period).count();
  try {
    if (auto v = args->value("window")) window = std::stod(*v);
  } catch (const std::exception&) {
    return usage_error("plan", "--window takes seconds (e.g. 2)");
  }
  if (!(window >= 0.05 && window <= 3600))
    return usage_error("plan", "--window must be 0.05 .. 3600 seconds");
  auto topo = Topology::detect(roots);
  if (!topo) {
    log("plan: " + topo.error().message());
    return kExitFailure;
  }
  drop_missing(cfg, roots);
  auto sensing = ctl::Sensing::open(cfg, roots, *topo);
  if (!sensing) {
    log("plan: " + sensing.error().message());
    return kExitFailure;
  }
  ::signal(SIGINT, on_signal);
  ::signal(SIGTERM, on_signal);
  if (!sleep_until(std::chrono::steady_clock::now() +
                   std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                       std::chrono::duration<double>(window))))
    return kExitFailure;
  auto snap = sensing->sample(1);
  if (!snap) {
    log("plan: " + snap.error().message());
    return kExitFailure;
  }
  // One window is all there is: a violation counts from its first tick.
  ctl::Policy policy;
  policy.violate_ticks = 1;
  ctl::Controller controller(config::compile(cfg, topo->online()), *topo, policy);
  ctl::Plan plan = controller.step(*snap);
  std::printf("keel plan: %.1f s window, %zu workload instances\n", snap->period_s, snap->workloads.size());
  for (const auto& w : snap->workloads) {
    auto v = plan.workloads.at(w.instance);
    std::printf(
        "  %-24s %-11s rq p99 %8.0f us  waits %6llu  cpu %5s  cpus %s%s\n", w.instance.c_str(),
        w.critical ? "critical" : "best-effort", w.rq_p99_us, static_cast<unsigned long long>(w.rq_waits),
        w.cpu_usage ? std::to_string(static_cast<int>(*w.cpu_usage * 100 + 0.5)).append("%").c_str() : "n/a",
        w.cpus.to_list().c_str(), w.critical ? (v.violated ? "  SLO violated" : "  SLO met") : "");
  }
  std::string decisions = ctl::format_actions(plan, "observe");
  if (decisions.empty())
    std::printf("no action: every critical workload meets its SLO (or has none)\n");
  else
    std::fputs(decisions.c_str(), stdout);
  return kExitOk;
}

}  // namespace keel::cli
