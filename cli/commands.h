// keel's subcommands. Each returns the process exit code: 0 ok, 1 runtime failure, 2 bad usage
// or bad config. Thin: they only wire modules together and print.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace keel::bpf {
enum class BpfStats;
}

namespace keel::cli {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

int cmd_check_config(const std::vector<std::string>& argv);
int cmd_topology(const std::vector<std::string>& argv);
int cmd_workloads(const std::vector<std::string>& argv);
int cmd_probe(const std::vector<std::string>& argv);
int cmd_top(const std::vector<std::string>& argv);
int cmd_restore(const std::vector<std::string>& argv);
int cmd_replay(const std::vector<std::string>& argv);
int cmd_run(const std::vector<std::string>& argv);
int cmd_plan(const std::vector<std::string>& argv);

// --bpf-stats sampled (the default: one interval in ten) | always | off; none when it is something else.
std::optional<bpf::BpfStats> parse_bpf_stats(const std::optional<std::string>& value);

// Prints "keel <cmd>: message" and the command's usage line to stderr; returns kExitUsage.
int usage_error(const std::string& cmd, const std::string& message);

}  // namespace keel::cli
