// sched_ext's state on trees with the kernel's files (/sys/kernel/sched_ext: state, root/ops,
// switch_all): this machine's kernel has no BPF scheduler loaded.
#include "host/sched_ext.h"

#include <gtest/gtest.h>

#include "tests/support/tmp_tree.h"

namespace keel {
namespace {

SchedExt at(const std::vector<std::pair<std::string, std::string>>& files) {
  testing::TempDir t;
  testing::make_tree(t.path(), files);
  return read_sched_ext(SysRoots::under(t.path()));
}

TEST(SchedExt, NoneOrDisabledHonoursEveryKnob) {
  SchedExt none = at({{"sys/kernel/other", "x\n"}});
  EXPECT_EQ(none.state, "");
  EXPECT_FALSE(none.loaded());
  EXPECT_TRUE(none.honours_weight());
  EXPECT_TRUE(none.honours_idle());
  EXPECT_EQ(none.describe(), "");
  SchedExt off = at({{"sys/kernel/sched_ext/state", "disabled\n"}, {"sys/kernel/sched_ext/root/ops", "\n"}});
  EXPECT_FALSE(off.loaded());
  EXPECT_TRUE(off.honours_weight() && off.honours_idle());
  EXPECT_EQ(off.describe(), "sched_ext: disabled (the fair class schedules every task)");
}

// A scheduler that takes every task and implements no cgroup callback (scx_lavd): keel's weight and
// class would be written, read back and do nothing. scx_flatcg implements the weight.
TEST(SchedExt, ALoadedSchedulerIgnoresTheKnobsItDoesNotImplement) {
  SchedExt lavd = at({{"sys/kernel/sched_ext/state", "enabled\n"},
                      {"sys/kernel/sched_ext/root/ops", "lavd_1.0.13_g5b0c8a1\n"},
                      {"sys/kernel/sched_ext/switch_all", "1\n"}});
  EXPECT_TRUE(lavd.loaded());
  EXPECT_FALSE(lavd.honours_weight());
  EXPECT_FALSE(lavd.honours_idle());
  EXPECT_EQ(lavd.describe(),
            "sched_ext: lavd_1.0.13_g5b0c8a1 enabled (every task); it ignores cpu.weight and cpu.idle");
  SchedExt flatcg = at({{"sys/kernel/sched_ext/state", "enabled\n"},
                        {"sys/kernel/sched_ext/root/ops", "flatcg\n"},
                        {"sys/kernel/sched_ext/switch_all", "1\n"}});
  EXPECT_TRUE(flatcg.honours_weight());
  EXPECT_FALSE(flatcg.honours_idle());
  SchedExt lookalike =
      at({{"sys/kernel/sched_ext/state", "enabled\n"}, {"sys/kernel/sched_ext/root/ops", "flatcgx\n"}});
  EXPECT_FALSE(lookalike.honours_weight()) << "a name that only starts like it";
  // Partial mode: only SCHED_EXT-policy tasks are in it; the fair class (and its knobs) has the rest.
  SchedExt partial = at({{"sys/kernel/sched_ext/state", "enabled\n"},
                         {"sys/kernel/sched_ext/root/ops", "rusty\n"},
                         {"sys/kernel/sched_ext/switch_all", "0\n"}});
  EXPECT_TRUE(partial.honours_weight() && partial.honours_idle());
  EXPECT_NE(partial.describe().find("only SCHED_EXT tasks"), std::string::npos);
}

}  // namespace
}  // namespace keel
