// What the CLI tells the config validator about a host: this one, or one described by
// --synthetic SPEC and --resctrl DIR (to check a config meant for another machine).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "host/error.h"
#include "host/sys_roots.h"

namespace keel::cli {

struct FactsSource {
  std::optional<std::string> synthetic;  // hwloc synthetic spec instead of this host
  std::optional<std::string> resctrl;    // a resctrl root (real or a copy of one) to read info/ from
};

struct GatheredFacts {
  config::HostFacts facts;
  std::vector<std::string> notes;  // checks that could not run, and why
};

Result<GatheredFacts> gather_host_facts(const SysRoots& roots, const FactsSource& src);

// Loads and validates `file` against this host for command `cmd`. On failure prints the reason
// (diagnostics as FILE:LINE:COL: message) to stderr and returns the exit code to use.
// `src` describes another host (--synthetic, --resctrl) instead of this one.
std::expected<config::Config, int> load_config_for_host(const std::string& cmd, const std::string& file,
                                                        const SysRoots& roots, const FactsSource& src = {});

// `roots` with the runtimes' state where host.docker_root, containerd_state, ... put it (under `under`,
// --root, when given).
SysRoots with_state_roots(SysRoots roots, const config::HostSection& host,
                          const std::optional<std::string>& under = std::nullopt);

}  // namespace keel::cli
