// A small command-line parser: positionals plus --flag / --flag VALUE / --flag=VALUE, each
// command declaring which flags it takes, so a typo is a usage error (exit 2), never ignored.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "host/error.h"

namespace keel::cli {

struct FlagSpec {
  std::set<std::string> switches;    // --json
  std::set<std::string> with_value;  // --config F
};

struct Args {
  std::vector<std::string> positional;
  std::set<std::string> switches;
  std::map<std::string, std::string> values;

  bool has(const std::string& s) const { return switches.contains(s); }
  std::optional<std::string> value(const std::string& k) const {
    auto it = values.find(k);
    return it == values.end() ? std::nullopt : std::optional(it->second);
  }
};

Result<Args> parse_args(const std::vector<std::string>& argv, const FlagSpec& spec);

}  // namespace keel::cli
