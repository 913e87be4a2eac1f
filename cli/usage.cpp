#include "cli/usage.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <vector>

namespace keel::cli {

namespace {

const CommandUsage kCommands[] = {
    {"run",
     "--config FILE [--observe] [--once] [--record TRACE] [--state DIR] [--verbose]\n"
     "      [--bpf-stats sampled|always|off] [--metrics-listen HOST:PORT|off]\n"
     "      [--health-listen HOST:PORT|off] [--root DIR]\n"
     "      [--log-level error|warning|notice|info|debug]",
     "the daemon: sense -> decide -> act every period; --observe (or mode = \"observe\")\n"
     "logs what it would do and writes nothing; every knob back on SIGINT/SIGTERM (with\n"
     "daemon.rollback = \"not_on_exit\" handed over to the next keel instead); SIGHUP reloads the config;\n"
     "Prometheus metrics on daemon.metrics_listen (default 127.0.0.1:9477), /healthz and\n"
     "/readyz alone on daemon.health_listen (default off; the liveness probe's); --root DIR:\n"
     "the host's /sys, /proc and the runtimes' state (docker, containerd, CRI-O, podman,\n"
     "libvirt) are under DIR (keel in a container);\n"
     "log lines carry a level (syslog priorities when stderr is the journal), --log-level\n"
     "drops those below it (default info)",
     {{"observe", "once", "verbose"},
      {"config", "record", "state", "bpf-stats", "metrics-listen", "health-listen", "root", "log-level"}}},
    {"plan",
     "--config FILE [--window S]",
     "one observation window, then the actions keel would take and why (root)",
     {{}, {"config", "window"}}},
    {"check-config",
     "FILE [--synthetic SPEC] [--resctrl DIR]",
     "validate a config; errors print as FILE:LINE:COL: message (exit 2)",
     {{}, {"synthetic", "resctrl"}}},
    {"topology",
     "[--synthetic SPEC] [--json]",
     "the host (or an hwloc synthetic host) as keel sees it",
     {{"json"}, {"synthetic"}}},
    {"workloads",
     "[--config FILE] [--json]",
     "discovered cgroups, their ids and the workload each matches",
     {{"json"}, {"config"}}},
    {"probe",
     "[--json]",
     "what this kernel offers keel (BTF, tp_btf/raw_tp, PMU, cgroups, resctrl) and, per feature, what "
     "privilege keel lacks for it",
     {{"json"}, {}}},
    {"top",
     "[--interval S] [--count N] [--json] [--config FILE] [--bpf-stats sampled|always|off]",
     "live per-cgroup (or per-workload) run-queue latency, migrations, CPU (root)",
     {{"json"}, {"interval", "count", "config", "bpf-stats"}}},
    {"restore",
     "[--state DIR] [--config FILE] [--root DIR] [--json]",
     "every knob keel changed back to its original value, from the journal\n"
     "(default state /var/lib/keel, or the config's daemon.state_dir)",
     {{"json"}, {"state", "config", "root"}}},
    {"replay",
     "TRACE --config FILE [--synthetic SPEC]",
     "the controller over recorded ticks (JSON lines), printing its decisions",
     {{}, {"config", "synthetic"}}},
    {"help", "[COMMAND]", "this text, or one command's (also: keel COMMAND --help)", {{}, {}}},
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

namespace {

// roff-safe text: backslashes and hyphens escaped, a leading '.' or '\'' made literal.
std::string roff(std::string_view text) {
  std::string out;
  bool line_start = true;
  for (char ch : text) {
    if (line_start && (ch == '.' || ch == '\'')) out += "\\&";
    if (ch == '\\')
      out += "\\e";
    else if (ch == '-')
      out += "\\-";
    else
      out += ch;
    line_start = ch == '\n';
  }
  return out;
}

// The options a synopsis names, each with what its argument is ("" none, "FILE", "DIR", "a|b|c", ...).
struct Option {
  std::string name, arg;
};
std::vector<Option> options_of(std::string_view synopsis) {
  std::vector<Option> out;
  std::vector<std::string> words;
  for (size_t at = 0; at < synopsis.size();) {
    size_t e = synopsis.find_first_of(" \n[]", at);
    if (e == std::string_view::npos) e = synopsis.size();
    if (e > at) words.emplace_back(synopsis.substr(at, e - at));
    at = e + 1;
  }
  for (size_t i = 0; i < words.size(); ++i) {
    if (!words[i].starts_with("--")) continue;
    Option o{words[i], ""};
    if (i + 1 < words.size() && !words[i + 1].starts_with("--")) o.arg = words[i + 1];
    out.push_back(o);
  }
  return out;
}

}  // namespace

std::string man_page(std::string_view version) {
  std::string v(version);
  std::string out = ".TH KEEL 8 \"\" \"keel " + v + "\" \"System Administration\"\n";
  out += ".SH NAME\nkeel \\- keeps latency\\-critical workloads steady on shared Linux hosts\n";
  out += ".SH SYNOPSIS\n";
  for (const auto& c : kCommands) {
    out += ".B keel\n.B " + roff(c.name) + "\n";
    std::string syn(c.synopsis);
    for (auto& ch : syn)
      if (ch == '\n') ch = ' ';
    size_t sp = std::string::npos;
    while ((sp = syn.find("  ")) != std::string::npos) syn.erase(sp, 1);
    out += roff(syn) + "\n.br\n";
  }
  out += ".B keel \\-\\-version\n";
  out +=
      ".SH DESCRIPTION\n"
      "keel measures how long the tasks of each cgroup wait for a CPU (BPF programs on the scheduler's "
      "tracepoints), who migrates and who thrashes the cache, and in enforce mode moves cpusets, CPU "
      "weights, the preemption class, resctrl memory bandwidth and cache ways for critical workloads, "
      "always within the bounds the configuration declares. Every knob it changes is journaled before "
      "the first write and put back on exit or by\n.BR \"keel restore\" .\n"
      "Every command answers\n.B \\-\\-help\nand\n.B \\-h\nwith its own usage.\n";
  out += ".SH COMMANDS\n";
  for (const auto& c : kCommands) {
    out += ".TP\n.B " + roff(c.name) + "\n" + roff(c.text) + "\n";
    out += ".br\nOptions: " + (options_of(c.synopsis).empty() ? std::string("none") : "") + "\n";
    for (const auto& o : options_of(c.synopsis))
      out += ".B " + roff(o.name) + (o.arg.empty() ? "" : "\n.I " + roff(o.arg)) + "\n";
  }
  out +=
      ".SH EXIT STATUS\n0 ok, 1 runtime failure, 2 bad usage or bad configuration.\n"
      ".SH SIGNALS\n.TP\n.B SIGTERM, SIGINT\nstop: every knob back, or with daemon.rollback = "
      "\"not_on_exit\" every knob left as set for the next keel to adopt (keel restore gives them back).\n"
      ".TP\n.B SIGHUP\nread the config again: a valid one is used from the next tick (knobs of instances "
      "it no longer manages go back), an invalid one is reported and the running one stays.\n"
      ".SH FILES\n.TP\n.I /etc/keel/keel.toml\nthe configuration (observe mode as shipped); reference in "
      "/usr/share/doc/keel/config.md.\n"
      ".TP\n.I /var/lib/keel\nthe state directory: the journal of original knob values, the lock, and after "
      "a "
      "stop that handed over (daemon.rollback = \"not_on_exit\") the handover the next keel adopts.\n"
      ".TP\n.I /usr/share/keel\nGrafana dashboards and Prometheus alert rules.\n"
      ".SH SEE ALSO\n.BR bpftool (8),\n.BR systemd.exec (5)\n";
  return out;
}

std::string bash_completion() {
  std::string cmds;
  for (const auto& c : kCommands) cmds += (cmds.empty() ? "" : " ") + std::string(c.name);
  std::string out =
      "# bash completion for keel, generated from keel's usage table (cli/usage.cpp)\n"
      "_keel() {\n"
      "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n"
      "  if [[ $COMP_CWORD -eq 1 ]]; then\n"
      "    COMPREPLY=($(compgen -W '" +
      cmds +
      " --version --help' -- \"$cur\")); return\n"
      "  fi\n"
      "  local opts=''\n"
      "  case ${COMP_WORDS[1]} in\n";
  for (const auto& c : kCommands) {
    std::string opts, values;
    for (const auto& o : options_of(c.synopsis)) {
      opts += o.name + " ";
      if (o.arg.find('|') != std::string::npos) {
        std::string words;  // the literal choices; placeholders (HOST:PORT) offer nothing
        for (size_t at = 0; at <= o.arg.size();) {
          size_t e = std::min(o.arg.find('|', at), o.arg.size());
          std::string w = o.arg.substr(at, e - at);
          if (!w.empty() && w.find_first_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ:") == std::string::npos)
            words += (words.empty() ? "" : " ") + w;
          at = e + 1;
        }
        values += "      " + o.name + ") COMPREPLY=($(compgen -W '" + words + "' -- \"$cur\")); return ;;\n";
      } else if (o.arg == "DIR") {
        values += "      " + o.name + ") COMPREPLY=($(compgen -d -- \"$cur\")); return ;;\n";
      } else if (o.arg == "FILE" || o.arg == "TRACE") {
        values += "      " + o.name + ") COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n";
      } else if (!o.arg.empty()) {
        values += "      " + o.name + ") return ;;\n";  // a number, a spec: nothing to offer
      }
    }
    out += "    " + std::string(c.name) + ")\n";
    if (c.name == "help") {
      out += "      COMPREPLY=($(compgen -W '" + cmds + "' -- \"$cur\")); return ;;\n";
      continue;
    }
    if (!values.empty()) out += "      case $prev in\n" + values + "      esac\n";
    out += "      opts='" + opts + "--help' ;;\n";
  }
  out +=
      "    *) return ;;\n"
      "  esac\n"
      "  if [[ $cur == -* ]]; then\n"
      "    COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
      "  else\n"
      "    COMPREPLY=($(compgen -f -- \"$cur\"))\n"
      "  fi\n"
      "}\n"
      "complete -F _keel keel\n";
  return out;
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
