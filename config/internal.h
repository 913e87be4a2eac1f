// Shared by the config module's own files (reader, validator, loader); not a public interface.
#pragma once

#include <toml++/toml.h>

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "config/config.h"

namespace keel::config::detail {

// Collects diagnostics for one file.
class Report {
 public:
  explicit Report(std::string file) : file_(std::move(file)) {}
  void error(Pos pos, std::string message) { diags_.push_back({file_, pos, std::move(message)}); }
  // Accepted, but worth saying: a setting that has no effect.
  void warning(Pos pos, std::string message) {
    warnings_.push_back({file_, pos, "warning: " + std::move(message)});
  }
  bool empty() const { return diags_.empty(); }
  Diagnostics take_warnings() { return std::move(warnings_); }
  // Every diagnostic, in file order (reading and validation find them in different orders).
  Diagnostics take_sorted();

 private:
  std::string file_;
  Diagnostics diags_;
  Diagnostics warnings_;
};

// The keys of match that select cgroups; a workload's match has exactly one of them.
inline constexpr std::array<std::string_view, 7> kSelectors = {"cgroup", "systemd_unit", "docker",  "pod",
                                                               "podman", "vm",           "pid_file"};

// "workload 'redis': " when the name is usable in a message, else "workload #2: " (1-based).
std::string workload_label(std::string_view name, size_t index);
bool valid_workload_name(std::string_view name);

// Bounds a config keeps, checked on the text before toml++ reads it: toml++ 3.3 walks what it built
// recursively (update_region_ends, the tables' destructors) and overflows the stack on a key of 50,000
// dotted parts; its own limit of 256 nested arrays and inline tables does not count dotted keys.
// A keel config needs a few of each.
inline constexpr size_t kMaxConfigBytes = 1 << 20, kMaxKeyParts = 16, kMaxNesting = 16;

// The first bound `text` breaks, as (position, message); nullopt when within them all.
std::optional<std::pair<Pos, std::string>> prescan(std::string_view text);

// TOML document -> Config. Reports syntax-level problems only: unknown keys, wrong types, missing
// required keys, values that do not parse (durations, CPU lists, enum words). Whether a value makes
// sense (empty strings, how many selectors a match has, ...) is left to validate().
Config read_config(const toml::table& root, Report& report);

// Every rule about what the values mean, in one place: ranges, cross-references, host limits.
void validate(const Config& config, const HostFacts& facts, Report& report);

}  // namespace keel::config::detail
