// What keel run switches off for the host before it compiles the config (compile_for_host): here, a
// sched_ext scheduler that ignores cgroup weights and cpu.idle, on trees with the kernel's files.
#include "loop/daemon.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/tmp_tree.h"

namespace keel::loop {
namespace {

// Issue 38: with scx_lavd loaded (it implements no cgroup callback) keel wrote and verified weights and
// cpu.idle that changed nothing. Now those two steps are off, each with a line; with the fair class
// (no sched_ext, or one that takes only SCHED_EXT tasks) they stay on.
TEST(CompileForHost, ASchedExtSchedulerThatIgnoresWeightsAndIdleTurnsThoseStepsOff) {
  auto topo = Topology::synthetic("pack:1 core:2 pu:1");
  ASSERT_TRUE(topo) << topo.error().message();
  auto compiled = [&](const std::vector<std::pair<std::string, std::string>>& files,
                      std::vector<std::string>& said) {
    testing::TempDir t;
    testing::make_tree(t.path(), files);
    config::Config cfg;
    return compile_for_host(cfg, SysRoots::under(t.path()), *topo,
                            [&](const std::string& line) { said.push_back(line); });
  };
  std::vector<std::string> said;
  config::Spec lavd = compiled({{"sys/kernel/sched_ext/state", "enabled\n"},
                                {"sys/kernel/sched_ext/root/ops", "lavd_1.0.13\n"},
                                {"sys/kernel/sched_ext/switch_all", "1\n"}},
                               said);
  EXPECT_FALSE(lavd.actuators.cpu_weight);
  EXPECT_EQ(lavd.actuators.preempt_class, config::PreemptMode::off);
  EXPECT_TRUE(lavd.actuators.cpuset) << "affinity it keeps";
  ASSERT_EQ(said.size(), 2u);
  EXPECT_EQ(said[0],
            "sched_ext: lavd_1.0.13 enabled (every task); it ignores cpu.weight and cpu.idle: the CPU-weight "
            "step is off");
  EXPECT_NE(said[1].find("the best-effort preemption class (cpu.idle) is off"), std::string::npos);

  for (const auto& files : std::vector<std::vector<std::pair<std::string, std::string>>>{
           {{"sys/kernel/other", "\n"}},
           {{"sys/kernel/sched_ext/state", "disabled\n"}},
           {{"sys/kernel/sched_ext/state", "enabled\n"},
            {"sys/kernel/sched_ext/root/ops", "rusty\n"},
            {"sys/kernel/sched_ext/switch_all", "0\n"}}}) {
    said.clear();
    config::Spec fair = compiled(files, said);
    EXPECT_TRUE(fair.actuators.cpu_weight);
    EXPECT_NE(fair.actuators.preempt_class, config::PreemptMode::off);
    EXPECT_TRUE(said.empty()) << said.front();
  }
}

}  // namespace
}  // namespace keel::loop
