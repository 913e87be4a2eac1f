#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace {

constexpr const char* kUsage = R"(keel: keeps latency-critical workloads steady on shared Linux hosts

usage: keel <command> [options]

commands:
  run --config FILE [--observe] [--once] [--record TRACE] [--state DIR] [--verbose]
      [--bpf-stats sampled|always|off] [--metrics-listen HOST:PORT|off]
                      the daemon: sense -> decide -> act every period; --observe (or mode = "observe")
                      logs what it would do and writes nothing; every knob back on SIGINT/SIGTERM;
                      Prometheus metrics on daemon.metrics_listen (default 127.0.0.1:9477)
  plan --config FILE [--window S]
                      one observation window, then the actions keel would take and why (root)
  check-config FILE [--synthetic SPEC] [--resctrl DIR]
                      validate a config; errors print as FILE:LINE:COL: message (exit 2)
  topology [--synthetic SPEC] [--json]
                      the host (or an hwloc synthetic host) as keel sees it
  workloads [--config FILE] [--json]
                      discovered cgroups, their ids and the workload each matches
  probe [--json]      what this kernel offers keel: BTF, tp_btf/raw_tp, PMU, cgroups, resctrl
  top [--interval S] [--count N] [--json] [--config FILE] [--bpf-stats sampled|always|off]
                      live per-cgroup (or per-workload) run-queue latency, migrations, CPU (root)
  restore [--state DIR] [--config FILE] [--root DIR] [--json]
                      every knob keel changed back to its original value, from the journal
                      (default state /var/lib/keel, or the config's daemon.state_dir)
  replay TRACE --config FILE [--synthetic SPEC]
                      the controller over recorded ticks (JSON lines), printing its decisions
  help                this text

exit codes: 0 ok, 1 runtime failure, 2 bad usage or bad config
)";

struct Command {
  const char* name;
  int (*run)(const std::vector<std::string>&);
};

constexpr Command kCommands[] = {
    {"run", keel::cli::cmd_run},
    {"plan", keel::cli::cmd_plan},
    {"check-config", keel::cli::cmd_check_config},
    {"topology", keel::cli::cmd_topology},
    {"workloads", keel::cli::cmd_workloads},
    {"probe", keel::cli::cmd_probe},
    {"top", keel::cli::cmd_top},
    {"restore", keel::cli::cmd_restore},
    {"replay", keel::cli::cmd_replay},
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::fputs(kUsage, stderr);
    return keel::cli::kExitUsage;
  }
  const std::string cmd = args.front();
  args.erase(args.begin());
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    std::fputs(kUsage, stdout);
    return keel::cli::kExitOk;
  }
  if (cmd == "--version") {
    std::puts("keel " KEEL_VERSION);
    return keel::cli::kExitOk;
  }
  for (const auto& c : kCommands)
    if (cmd == c.name) return c.run(args);
  std::fprintf(stderr, "keel: unknown command '%s'\n\n%s", cmd.c_str(), kUsage);
  return keel::cli::kExitUsage;
}
