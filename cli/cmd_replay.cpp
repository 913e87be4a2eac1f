// keel replay TRACE --config F: the controller over recorded ticks (JSON lines, one Snapshot each),
// deterministically; prints the decisions as the decision log would.
#include <cstdio>
#include <fstream>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/host_facts.h"
#include "cli/usage.h"
#include "config/config.h"
#include "controller/controller.h"
#include "controller/trace.h"
#include "host/topology.h"

namespace keel::cli {

int cmd_replay(const std::vector<std::string>& argv) {
  auto args = parse_args(argv, command_usage("replay")->flags);
  if (!args) return usage_error("replay", args.error().message());
  if (args->positional.size() != 1) return usage_error("replay", "takes one trace file");
  auto file = args->value("config");
  if (!file) return usage_error("replay", "needs --config FILE (the config the decisions are made under)");
  const SysRoots roots = SysRoots::host();
  FactsSource src;
  src.synthetic = args->value("synthetic");
  auto cfg = load_config_for_host("replay", *file, roots, src);
  if (!cfg) return cfg.error();
  auto topo = src.synthetic ? Topology::synthetic(*src.synthetic) : Topology::detect(roots);
  if (!topo) {
    std::fprintf(stderr, "keel replay: %s\n", topo.error().message().c_str());
    return kExitFailure;
  }
  std::ifstream in(args->positional[0]);
  if (!in) {
    std::fprintf(stderr, "keel replay: cannot read %s\n", args->positional[0].c_str());
    return kExitFailure;
  }
  ctl::Controller controller(config::compile(*cfg, topo->online()), *topo);
  size_t n = 0, ticks = 0, actions = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.empty()) continue;
    auto s = ctl::parse_json_line(line);
    if (!s) {
      std::fprintf(stderr, "%s:%zu: %s\n", args->positional[0].c_str(), n, s.error().message().c_str());
      return kExitFailure;
    }
    auto plan = controller.step(*s);
    ++ticks;
    actions += plan.actions.size();
    std::fputs(ctl::format_actions(plan).c_str(), stdout);
  }
  std::printf("keel replay: %zu ticks, %zu actions\n", ticks, actions);
  return kExitOk;
}

}  // namespace keel::cli
