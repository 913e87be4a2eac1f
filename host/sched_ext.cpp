#include "host/sched_ext.h"

#include <array>
#include <string_view>

#include "host/fileio.h"

namespace keel {

namespace {

std::string line(const std::filesystem::path& file) {
  auto v = read_file(file, 256);
  return v ? std::string(trim(*v)) : std::string();
}

// The schedulers known to implement ops.cgroup_set_weight (the scx project's scx_flatcg); the ops name
// is the scheduler's short name, possibly with a version after an '_' ("flatcg", "lavd_1.0.13_g...").
// None is known to apply cpu.idle.
constexpr std::array<std::string_view, 1> kHonoursWeight = {"flatcg"};

bool named(std::string_view ops, std::string_view name) {
  return ops == name || (ops.starts_with(name) && ops.size() > name.size() && ops[name.size()] == '_');
}

}  // namespace

bool SchedExt::honours_weight() const {
  if (!loaded() || !switch_all) return true;
  for (std::string_view n : kHonoursWeight)
    if (named(ops, n)) return true;
  return false;
}

bool SchedExt::honours_idle() const { return !loaded() || !switch_all; }

std::string SchedExt::describe() const {
  if (state.empty()) return "";
  if (!loaded()) return "sched_ext: " + state + " (the fair class schedules every task)";
  std::string s = "sched_ext: " + (ops.empty() ? std::string("a BPF scheduler") : ops) + " " + state +
                  (switch_all ? " (every task)" : " (only SCHED_EXT tasks; the rest stay in the fair class)");
  std::string ignored;
  if (!honours_weight()) ignored = "cpu.weight";
  if (!honours_idle()) ignored += std::string(ignored.empty() ? "" : " and ") + "cpu.idle";
  if (!ignored.empty()) s += "; it ignores " + ignored;
  return s;
}

SchedExt read_sched_ext(const SysRoots& roots) {
  const std::filesystem::path dir = roots.sys / "kernel/sched_ext";
  SchedExt s;
  s.state = line(dir / "state");
  if (s.state.empty()) return s;
  s.ops = line(dir / "root/ops");
  const std::string all = line(dir / "switch_all");
  s.switch_all = all != "0";
  return s;
}

}  // namespace keel
