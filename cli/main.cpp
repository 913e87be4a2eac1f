#include <bpf/libbpf.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/usage.h"

namespace {

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
  const std::string all = keel::cli::usage();
  if (args.empty()) {
    std::fputs(all.c_str(), stderr);
    return keel::cli::kExitUsage;
  }
  const std::string cmd = args.front();
  args.erase(args.begin());
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    if (cmd == "help" && !args.empty()) {  // keel help COMMAND
      const auto* c = keel::cli::command_usage(args.front());
      if (c == nullptr || args.size() > 1) {
        std::fprintf(stderr, "keel help: no command '%s'\n\n%s", args.front().c_str(), all.c_str());
        return keel::cli::kExitUsage;
      }
      std::fputs(keel::cli::usage_of(*c).c_str(), stdout);
      return keel::cli::kExitOk;
    }
    std::fputs(all.c_str(), stdout);
    return keel::cli::kExitOk;
  }
  if (cmd == "--version" || cmd == "version") {
    // The release, the git revision it was built from, the compiler and the libbpf it runs with.
    std::printf("keel %s (git %s, %s, libbpf %s)\n", KEEL_VERSION, KEEL_GIT_REVISION, "g++ " __VERSION__,
                libbpf_version_string());
    return keel::cli::kExitOk;
  }
  for (const auto& c : kCommands) {
    if (cmd != c.name) continue;
    // COMMAND --help / -h (before a "--", after which everything is an argument): its usage.
    for (const auto& a : args) {
      if (a == "--") break;
      if (a == "--help" || a == "-h") {
        std::fputs(keel::cli::usage_of(*keel::cli::command_usage(cmd)).c_str(), stdout);
        return keel::cli::kExitOk;
      }
    }
    return c.run(args);
  }
  std::fprintf(stderr, "keel: unknown command '%s'\n\n%s", cmd.c_str(), all.c_str());
  return keel::cli::kExitUsage;
}
