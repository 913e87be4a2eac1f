// keel run: the daemon (loop/loop.h). keel plan: one observation window, then the actions keel would
// take and why. Both only parse the command line and start what loop/ builds.
#include <chrono>
#include <cstdio>

#include "actuators/unmanaged.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/host_facts.h"
#include "cli/usage.h"
#include "controller/controller.h"
#include "controller/trace.h"
#include "host/log.h"
#include "host/topology.h"
#include "loop/daemon.h"
#include "loop/events.h"
#include "loop/loop.h"
#include "loop/sensing.h"

namespace keel::cli {

namespace {

void log(const std::string& line) { logging::line(logging::Level::info, line); }

}  // namespace

std::optional<bpf::BpfStats> parse_bpf_stats(const std::optional<std::string>& v) {
  if (!v || *v == "sampled") return bpf::BpfStats::sampled;
  if (*v == "always") return bpf::BpfStats::always;
  if (*v == "off") return bpf::BpfStats::off;
  return std::nullopt;
}

int cmd_run(const std::vector<std::string>& argv) {
  auto args = parse_args(argv, command_usage("run")->flags);
  if (!args) return usage_error("run", args.error().message());
  auto level = logging::parse_level(args->value("log-level").value_or("info"));
  if (!level) return usage_error("run", "--log-level takes error, warning, notice, info or debug");
  logging::setup(*level);
  if (!args->positional.empty()) return usage_error("run", "takes no arguments");
  auto file = args->value("config");
  if (!file) return usage_error("run", "needs --config FILE");
  loop::RunOptions o;
  auto stats = parse_bpf_stats(args->value("bpf-stats"));
  if (!stats) return usage_error("run", "--bpf-stats takes sampled (one interval in ten), always or off");
  o.stats = *stats;
  o.metrics_listen = args->value("metrics-listen");
  if (o.metrics_listen && *o.metrics_listen != "off")
    if (auto why = config::listen_address_problem(*o.metrics_listen))
      return usage_error("run", "--metrics-listen " + *o.metrics_listen + ": " + *why + " (or off)");
  o.health_listen = args->value("health-listen");
  if (o.health_listen && *o.health_listen != "off")
    if (auto why = config::listen_address_problem(*o.health_listen))
      return usage_error("run", "--health-listen " + *o.health_listen + ": " + *why + " (or off)");
  o.observe = args->has("observe");
  o.once = args->has("once");
  o.verbose = args->has("verbose");
  o.record = args->value("record");
  if (auto s = args->value("state")) o.state = *s;
  o.version = KEEL_VERSION;
  o.revision = KEEL_GIT_REVISION;
  o.compiler = "g++ " __VERSION__;
  // --root DIR: the host's /sys, /proc and the runtimes' state are under DIR (keel in a container).
  const auto root = args->value("root");
  if (root && (root->empty() || (*root)[0] != '/'))
    return usage_error("run", "--root takes an absolute directory, got '" + *root + "'");
  SysRoots roots = root ? SysRoots::under(*root) : SysRoots::host();
  auto cfg = load_config_for_host("run", *file, roots);
  if (!cfg) return cfg.error();
  roots =
      with_state_roots(roots, cfg->host, root);  // where the runtimes keep their state (a restart moves it)
  // SIGHUP: the same file read and validated again (its errors printed as at start).
  o.reload = [path = *file, roots]() -> std::optional<config::Config> {
    auto c = load_config_for_host("run", path, roots);
    if (!c) return std::nullopt;
    return std::move(*c);
  };
  return loop::run(std::move(*cfg), o, roots);
}

namespace {

// actuators.isolate_unmanaged: what keel run would keep off the critical CPUs, and what it would leave.
void print_unmanaged(const config::Spec& spec, const SysRoots& roots, const inv::Inventory& inv,
                     const ctl::Plan& plan) {
  const CgroupHierarchy* cs = inv.cpuset_hierarchy();
  if (cs == nullptr) {
    std::printf("unmanaged work: no cpuset controller, nothing is kept off critical CPUs\n");
    return;
  }
  std::vector<std::string> managed;
  for (const inv::Instance& ins : inv.instances())
    for (const inv::Node* n : ins.cgroups)
      if (const CgroupDir* d = inv.cpuset_dir(*n)) managed.push_back(d->path());
  auto s = act::survey_unmanaged(roots, *cs, managed, spec.actuators.isolate_root_tasks);
  if (!s) {
    std::printf("unmanaged work: %s\n", s.error().message().c_str());
    return;
  }
  const CpuSet& held = plan.critical_cpus;
  std::printf(
      "unmanaged work, kept off %s: %s\n",
      held.empty() ? "the CPUs critical instances are given (none this window)"
                   : ("CPUs " + held.to_list() + " (critical instances')").c_str(),
      s->groups.empty() ? "no top-level cgroup without a workload" : act::describe_groups(*s).c_str());
  for (const auto& g : s->groups)
    for (size_t i = 0; i < g.cgroups.size(); ++i)
      if (!held.empty() && (g.cpus[i] - held).empty())
        std::printf("  not isolated: %s: %s has only CPUs critical workloads hold (%s)\n",
                    act::printable(g.top, 256).c_str(), act::printable(g.cgroups[i].path(), 256).c_str(),
                    g.cpus[i].to_list().c_str());
  if (spec.actuators.isolate_root_tasks)
    std::printf(
        "  the root cgroup: %zu user-space processes would move into %s (a move the kernel refuses is "
        "logged by keel run, with its reason)\n",
        s->movable.size(), std::string(act::kRootTasksGroup).c_str());
  for (const auto& n : s->not_isolated)
    std::printf("  not isolated: %s: %s\n", n.what.c_str(), n.why.c_str());
  for (const auto& p : s->pinned)
    std::printf("  not isolated: pid %d (%s): pinned to CPUs %s by its own affinity, left where it is\n",
                p.pid, p.comm.c_str(), p.cpus.to_list().c_str());
  if (!s->kernel_threads.empty()) {
    std::string names;
    for (size_t i = 0; i < s->kernel_threads.size() && i < 8; ++i)
      names += (i ? ", " : "") + s->kernel_threads[i];
    std::printf("  kernel threads: %zu (%s%s)\n", s->kernel_threads.size(), names.c_str(),
                s->kernel_threads.size() > 8 ? ", ..." : "");
  }
}

}  // namespace

int cmd_plan(const std::vector<std::string>& argv) {
  auto args = parse_args(argv, command_usage("plan")->flags);
  if (!args) return usage_error("plan", args.error().message());
  if (!args->positional.empty()) return usage_error("plan", "takes no arguments");
  auto file = args->value("config");
  if (!file) return usage_error("plan", "needs --config FILE");
  std::optional<double> window_arg;  // usage errors before the config is read
  if (auto v = args->value("window")) {
    window_arg = parse_real(*v);
    if (!window_arg) return usage_error("plan", "--window takes seconds (e.g. 2), got '" + *v + "'");
  }
  auto events = loop::Events::open();  // before anything else: stop signals end the window
  if (!events) {
    log("plan: " + events.error().message());
    return kExitFailure;
  }
  SysRoots roots = SysRoots::host();
  auto loaded = load_config_for_host("plan", *file, roots);
  if (!loaded) return loaded.error();
  config::Config cfg = *loaded;
  roots = with_state_roots(roots, cfg.host);
  double window = std::chrono::duration<double>(cfg.daemon.period).count();
  if (window_arg) window = *window_arg;
  if (!(window >= 0.05 && window <= 3600))
    return usage_error("plan", "--window must be 0.05 .. 3600 seconds");
  auto topo = Topology::detect(roots);
  if (!topo) {
    log("plan: " + topo.error().message());
    return kExitFailure;
  }
  const config::Spec spec = loop::compile_for_host(cfg, roots, *topo, log);
  auto sensing = loop::Sensing::open(spec, roots, *topo, bpf::BpfStats::sampled);
  if (!sensing) {
    log("plan: " + sensing.error().message());
    return kExitFailure;
  }
  const auto until =
      std::chrono::steady_clock::now() +
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(window));
  if (events->wait_until(until) == loop::Events::Wake::stop) return kExitFailure;
  auto snap = sensing->sample(1);
  if (!snap) {
    log("plan: " + snap.error().message());
    return kExitFailure;
  }
  // One window is all there is: a violation counts from its first tick.
  ctl::Policy policy;
  policy.violate_ticks = 1;
  ctl::Controller controller(spec, *topo, policy);
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
  for (const auto& gap : ctl::class_gaps(*snap, plan)) std::printf("note: %s\n", gap.c_str());
  if (spec.actuators.isolate_unmanaged) print_unmanaged(spec, roots, sensing->inventory(), plan);
  std::string decisions = ctl::format_actions(plan, "observe");
  if (decisions.empty())
    std::printf("no action: every critical workload meets its SLO (or has none)\n");
  else
    std::fputs(decisions.c_str(), stdout);
  return kExitOk;
}

}  // namespace keel::cli
