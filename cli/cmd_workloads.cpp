#include <cstdio>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/host_facts.h"
#include "cli/usage.h"
#include "config/config.h"
#include "inventory/workloads.h"

namespace keel::cli {

int cmd_workloads(const std::vector<std::string>& argv) {
  auto args = parse_args(argv, command_usage("workloads")->flags);
  if (!args) return usage_error("workloads", args.error().message());
  if (!args->positional.empty()) return usage_error("workloads", "takes no arguments (use --config FILE)");
  SysRoots roots = SysRoots::host();

  // Without a config every cgroup is listed, none matched, in the hierarchy keel would choose.
  std::vector<config::Workload> workloads;
  config::Hierarchy hierarchy = config::Hierarchy::automatic;
  if (auto file = args->value("config")) {
    auto cfg = load_config_for_host("workloads", *file, roots);
    if (!cfg) return cfg.error();
    workloads = cfg->workloads;
    roots = with_state_roots(roots, cfg->host);
    hierarchy = cfg->daemon.hierarchy;
  }
  auto report = discover_workloads(workloads, hierarchy, roots);
  if (!report) {
    std::fprintf(stderr, "keel workloads: %s\n", report.error().message().c_str());
    return kExitFailure;
  }
  std::fputs(
      (args->has("json") ? format_workloads_json(*report) + "\n" : format_workloads_text(*report)).c_str(),
      stdout);
  return kExitOk;
}

}  // namespace keel::cli
