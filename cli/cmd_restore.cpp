// keel restore: every knob keel changed back to its original value, from the journal in the state
// directory. Safe to run at any time and more than once; refuses while a running keel holds the state
// (that keel restores on exit).
#include <cstdio>

#include "actuators/journal.h"
#include "actuators/restore.h"
#include "actuators/session.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/host_facts.h"
#include "cli/usage.h"
#include "config/config.h"
#include "host/json.h"

namespace keel::cli {

int cmd_restore(const std::vector<std::string>& argv) {
  auto args = parse_args(argv, command_usage("restore")->flags);
  if (!args) return usage_error("restore", args.error().message());
  if (!args->positional.empty())
    return usage_error("restore", "takes no arguments (the journal is in --state DIR)");
  // Kernel files under another root: a container that mounts the host's /sys and /proc at /host/...
  SysRoots roots = SysRoots::host();
  if (auto r = args->value("root")) roots = SysRoots::under(*r);

  std::filesystem::path state = config::Daemon{}.state_dir;
  if (auto f = args->value("config")) {
    auto cfg = load_config_for_host("restore", *f, roots);  // prints why it failed; --state works without
    if (!cfg) return cfg.error();
    state = cfg->daemon.state_dir;
  }
  if (auto s = args->value("state")) state = *s;

  if (!std::filesystem::exists(state / "journal") && !args->has("json")) {  // creates nothing on a clean host
    std::printf("keel restore: nothing to restore (no journal in %s)\n", state.string().c_str());
    return kExitOk;
  }
  auto journal = act::Journal::open(state, act::read_boot_id(roots.proc));
  if (!journal) {
    std::fprintf(stderr, "keel restore: %s\n", journal.error().message().c_str());
    return kExitFailure;
  }
  size_t entries = journal->entries().size();
  for (const auto& s : journal->salvaged())
    std::fprintf(stderr, "keel restore: %s: journal %s skipped (damaged); the records around it were kept\n",
                 journal->file().string().c_str(), s.c_str());
  // A handover (daemon.rollback = "not_on_exit") goes first: whatever this restore cannot give back is
  // then a crash's leftover, which the next keel restores (or refuses to start over), never adopts.
  act::remove_handover(journal->dir());
  auto rep = act::restore(roots, *journal);
  if (args->has("json")) {
    Json failed = Json::array(), every = Json::array(), changed = Json::array();
    for (const auto& e : rep.failed) failed.push_back(e.message());
    for (const auto& c : rep.changed_since) changed.push_back(c);
    for (const auto& e : rep.every_cpu) every.push_back(e);
    Json j = {{"state", state.string()},
              {"entries", entries},
              {"restored", rep.restored},
              {"unchanged", rep.unchanged},
              {"gone", rep.gone},
              {"kept", rep.kept},
              {"failed", std::move(failed)},
              {"every_cpu", std::move(every)},
              {"changed_since", std::move(changed)}};
    std::printf("%s\n", json_text(j).c_str());
  } else if (entries == 0) {
    std::printf("keel restore: nothing to restore (no journal in %s)\n", state.string().c_str());
  } else {
    std::printf(
        "keel restore: %zu restored, %zu already at their original value, %zu gone with their cgroup, "
        "%zu kept (an empty cpuset would strand tasks), %zu left as another manager set them since, %zu "
        "failed\n",
        rep.restored, rep.unchanged, rep.gone, rep.kept, rep.changed_since.size(), rep.failed.size());
  }
  if (!args->has("json"))
    for (const auto& c : rep.changed_since)
      std::printf("keel restore: left %s: another manager changed it after keel, its value stays\n",
                  c.c_str());
  for (const auto& e : rep.every_cpu)
    std::printf(
        "keel restore: %s: cpuset.cpus was not set; the kernel refuses to unset it while the cgroup has "
        "tasks, so it has every CPU, and with it its parent's, as before\n",
        e.c_str());
  for (const auto& e : rep.failed) std::fprintf(stderr, "keel restore: %s\n", e.message().c_str());
  if (!rep.failed.empty()) {
    std::fprintf(stderr, "keel restore: the failed knobs stay journaled in %s; run keel restore again\n",
                 journal->file().string().c_str());
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace keel::cli
