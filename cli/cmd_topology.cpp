#include <cstdio>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/usage.h"
#include "host/topology.h"

namespace keel::cli {

int cmd_topology(const std::vector<std::string>& argv) {
  auto args = parse_args(argv, command_usage("topology")->flags);
  if (!args) return usage_error("topology", args.error().message());
  if (!args->positional.empty()) return usage_error("topology", "takes no arguments");
  auto spec = args->value("synthetic");
  auto topo = spec ? Topology::synthetic(*spec) : Topology::detect(SysRoots::host());
  if (!topo) {
    std::fprintf(stderr, "keel topology: %s\n", topo.error().message().c_str());
    return spec ? kExitUsage : kExitFailure;  // a bad --synthetic spec is bad usage
  }
  std::fputs((args->has("json") ? format_json(*topo) + "\n" : format_text(*topo)).c_str(), stdout);
  return kExitOk;
}

}  // namespace keel::cli
