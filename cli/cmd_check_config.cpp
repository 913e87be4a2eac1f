#include <cstdio>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/host_facts.h"
#include "cli/usage.h"
#include "config/config.h"

namespace keel::cli {

int usage_error(const std::string& cmd, const std::string& message) {
  const CommandUsage* c = command_usage(cmd);
  std::fprintf(stderr, "keel %s: %s\n", cmd.c_str(), message.c_str());
  if (c != nullptr)
    std::fprintf(stderr, "usage: keel %s %s\n", cmd.c_str(), std::string(c->synopsis).c_str());
  std::fprintf(stderr, "run 'keel %s --help' for more\n", cmd.c_str());
  return kExitUsage;
}

int cmd_check_config(const std::vector<std::string>& argv) {
  auto args = parse_args(argv, command_usage("check-config")->flags);
  if (!args) return usage_error("check-config", args.error().message());
  if (args->positional.size() != 1) return usage_error("check-config", "expects exactly one FILE");
  const std::string file = args->positional[0];

  auto facts = gather_host_facts(SysRoots::host(),
                                 {.synthetic = args->value("synthetic"), .resctrl = args->value("resctrl")});
  if (!facts) {
    std::fprintf(stderr, "keel check-config: cannot describe the host: %s\n",
                 facts.error().message().c_str());
    // A bad --synthetic spec or --resctrl directory is bad usage; failing to read this host is not.
    return args->value("synthetic") || args->value("resctrl") ? kExitUsage : kExitFailure;
  }
  auto cfg = config::load_file(file, facts->facts);
  if (!cfg) {
    for (const auto& d : cfg.error()) std::fprintf(stderr, "%s\n", d.str().c_str());
    std::fprintf(stderr, "%s: %zu error%s\n", file.c_str(), cfg.error().size(),
                 cfg.error().size() == 1 ? "" : "s");
    return kExitUsage;
  }
  for (const auto& w : cfg->warnings) std::fprintf(stderr, "%s\n", w.str().c_str());
  for (const auto& n : facts->notes) std::fprintf(stderr, "note: %s\n", n.c_str());
  std::printf("%s: ok (mode %s, %zu workload%s)\n", file.c_str(), config::to_string(cfg->daemon.mode),
              cfg->workloads.size(), cfg->workloads.size() == 1 ? "" : "s");
  return kExitOk;
}

}  // namespace keel::cli
