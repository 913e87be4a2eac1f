#include "cli/usage.h"

#include <charconv>
#include <cmath>

namespace keel::cli {

namespace {

constexpr CommandUsage kCommands[] = {
    {"run",
     "--config FILE [--observe] [--once] [--record TRACE] [--state DIR] [--verbose]\n"
     "      [--bpf-stats sampled|always|off] [--metrics-listen HOST:PORT|off]",
     "the daemon: sense -> decide -> act every period; --observe (or mode = \"observe\")\n"
     "logs what it would do and writes nothing; every knob back on SIGINT/SIGTERM;\n"
     "Prometheus metrics on daemon.metrics_listen (default 127.0.0.1:9477)"},
    {"plan", "--config FILE [--window S]",
     "one observation window, then the actions keel would take and why (root)"},
    {"check-config", "FILE [--synthetic SPEC] [--resctrl DIR]",
     "validate a config; errors print as FILE:LINE:COL: message (exit 2)"},
    {"topology", "[--synthetic SPEC] [--json]", "the host (or an hwloc synthetic host) as keel sees it"},
    {"workloads", "[--config FILE] [--json]", "discovered cgroups, their ids and the workload each matches"},
    {"probe", "[--json]", "what this kernel offers keel: BTF, tp_btf/raw_tp, PMU, cgroups, resctrl"},
    {"top", "[--interval S] [--count N] [--json] [--config FILE] [--bpf-stats sampled|always|off]",
     "live per-cgroup (or per-workload) run-queue latency, migrations, CPU (root)"},
    {"restore", "[--state DIR] [--config FILE] [--root DIR] [--json]",
     "every knob keel changed back to its original value, from the journal\n"
     "(default state /var/lib/keel, or the config's daemon.state_dir)"},
    {"replay", "TRACE --config FILE [--synthetic SPEC]",
     "the controller over recorded ticks (JSON lines), printing its decisions"},
    {"help", "[COMMAND]", "this text, or one command's (also: keel COMMAND --help)"},
};

// Each line of `text` indented by `pad` spaces.
std::string indented(std::string_view text, size_t pad) {
  std::string out;
  for (size_t at = 0; at < text.size();) {
    size_t e = text.find('\n', at);
    if (e == std::string_view::npos) e = text.size();
    out.append(pad, ' ').append(text.substr(at, e - at)).append("\n");
    at = e + 1;
  }
  return out;
}

}  // namespace

std::span<const CommandUsage> command_usages() { return kCommands; }

const CommandUsage* command_usage(std::string_view name) {
  for (const auto& c : kCommands)
    if (c.name == name) return &c;
  return nullptr;
}

std::string usage() {
  std::string out =
      "keel: keeps latency-critical workloads steady on shared Linux hosts\n\n"
      "usage: keel <command> [options]    (keel <command> --help: that command's usage)\n\ncommands:\n";
  for (const auto& c : kCommands) {
    out += "  " + std::string(c.name) + " " + std::string(c.synopsis) + "\n";
    out += indented(c.text, 22);
  }
  out += "\nexit codes: 0 ok, 1 runtime failure, 2 bad usage or bad config\n";
  return out;
}

std::string usage_of(const CommandUsage& c) {
  return "usage: keel " + std::string(c.name) + " " + std::string(c.synopsis) + "\n\n" + std::string(c.text) +
         "\n";
}

std::optional<double> parse_real(std::string_view s) {
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc{} || end != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<long> parse_whole(std::string_view s) {
  long v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace keel::cli
