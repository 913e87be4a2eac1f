// The usage text and flags of every command, in one place: `keel help`, `keel help CMD`, `keel CMD
// --help`, usage errors and each command's parser all take them from here. And strict number parsing for
// flags (garbage after a number is an error, never ignored).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "cli/args.h"

namespace keel::cli {

struct CommandUsage {
  std::string_view name;      // "run"
  std::string_view synopsis;  // its options, as one usage line continues them
  std::string_view text;      // what it does
  FlagSpec flags;             // what its parser accepts: the synopsis's --flags (a test holds them equal)
};

std::span<const CommandUsage> command_usages();
const CommandUsage* command_usage(std::string_view name);
// The whole `keel help` text.
std::string usage();
// One command's: "usage: keel NAME SYNOPSIS\n\nTEXT\n".
std::string usage_of(const CommandUsage& c);
// The same table as the man page keel(8) (roff) and as a bash completion script (installed as
// /usr/share/bash-completion/completions/keel): both generated at build time, never written by hand.
std::string man_page(std::string_view version);
std::string bash_completion();

// A number that is the whole of `s` ("0.5", "2"; not "1abc", "", " 1"); none otherwise.
std::optional<double> parse_real(std::string_view s);
std::optional<long> parse_whole(std::string_view s);

}  // namespace keel::cli
