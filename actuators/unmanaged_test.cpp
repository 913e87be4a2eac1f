#include "actuators/unmanaged.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/support/tmp_tree.h"

namespace keel::act {
namespace {

using testing::make_tree;

// A /proc/PID pair as the kernel prints it: stat (comm in parentheses, flags as field 9) and status.
std::vector<std::pair<std::string, std::string>> proc_files(int pid, const std::string& comm, unsigned flags,
                                                            const std::string& cpus) {
  const std::string dir = "proc/" + std::to_string(pid) + "/";
  return {{dir + "stat", std::to_string(pid) + " (" + comm + ") S 0 1 1 0 -1 " + std::to_string(flags) +
                             " 100 0 0 0 0 0 0 0 20 0 1 0 5 1000 100\n"},
          {dir + "status", "Name:\t" + comm + "\nCpus_allowed:\tf\nCpus_allowed_list:\t" + cpus + "\n"}};
}

class UnmanagedTree : public ::testing::Test {
 protected:
  void SetUp() override {
    roots_ = SysRoots::under(t_.path());
    cs_ = CgroupHierarchy{3, false, {"cpuset"}, roots_.cgroup / "cpuset", "/"};
    auto cpuset = [](const std::string& dir, const std::string& cpus) {
      return std::vector<std::pair<std::string, std::string>>{
          {"sys/fs/cgroup/cpuset" + dir + "/cpuset.cpus", cpus},
          {"sys/fs/cgroup/cpuset" + dir + "/cgroup.procs", ""}};
    };
    std::vector<std::pair<std::string, std::string>> files;
    for (auto [dir, cpus] : std::vector<std::pair<std::string, std::string>>{
             {"", "0-3"},
             {"/system.slice", "0-3"},
             {"/system.slice/sshd.service", "0-3"},
             {"/system.slice/db.service", "2-3"},
             {"/user.slice", "0-3"},
             {"/kubepods", "0-3"},
             {"/kubepods/pod1", "0-3"},  // a workload is here: the whole top-level group is keel's
             {"/keel-root-tasks", "1-3"},
             {"/never-set", ""}})
      for (auto& f : cpuset(dir, cpus)) files.push_back(f);
    files.push_back({"sys/fs/cgroup/cpuset/cgroup.procs", "1\n2\n100\n101\n102\n999\n"});
    for (auto& f : proc_files(1, "init", 0x400100, "0-3")) files.push_back(f);
    for (auto& f : proc_files(2, "kthreadd", 0x00208040, "0-3")) files.push_back(f);
    for (auto& f : proc_files(100, "redis-bench", 0x400000, "0-3")) files.push_back(f);
    for (auto& f : proc_files(101, "pinned", 0x400000, "1")) files.push_back(f);
    // A process name is whatever the process set: parentheses, spaces, a newline, a byte over 0x7f.
    for (auto& f : proc_files(102, "a) S 1 (b\n\xff", 0x400000, "0-3")) files.push_back(f);
    make_tree(t_.path(), files);
  }
  testing::TempDir t_;
  SysRoots roots_;
  CgroupHierarchy cs_;
};

TEST_F(UnmanagedTree, TopLevelGroupsWithoutAWorkloadAndTheirDescendantsParentsFirst) {
  auto s = survey_unmanaged(roots_, cs_, {"/kubepods/pod1"}, false);
  ASSERT_TRUE(s) << s.error().message();
  ASSERT_EQ(s->groups.size(), 2u);  // not kubepods (a workload), not keel's group, not a cpuset without CPUs
  EXPECT_EQ(s->groups[0].top, "/system.slice");
  ASSERT_EQ(s->groups[0].cgroups.size(), 3u);
  EXPECT_EQ(s->groups[0].cgroups[0].path(), "/system.slice");
  EXPECT_EQ(s->groups[0].cgroups[1].path(), "/system.slice/db.service");
  EXPECT_EQ(s->groups[0].cgroups[2].path(), "/system.slice/sshd.service");
  EXPECT_EQ(s->groups[0].cpus[1].to_list(), "2-3");
  EXPECT_EQ(s->groups[1].top, "/user.slice");
  EXPECT_EQ(describe_groups(*s), "/system.slice (3 cgroups), /user.slice (1 cgroup)");
  EXPECT_TRUE(s->movable.empty()) << "root processes are read only with root_tasks";
  EXPECT_TRUE(s->kernel_threads.empty());
}

// On v2 a child's effective CPUs stay within its parent's: the top-level cgroup is all keel writes, and
// one whose cpuset.cpus is not set counts with its effective CPUs.
TEST_F(UnmanagedTree, OnV2OnlyTheTopLevelCgroupIsWrittenAndNotSetMeansItsEffectiveCpus) {
  testing::make_tree(t_.path(), {{"sys/fs/cgroup/cpuset/user.slice/cpuset.cpus", "\n"},
                                 {"sys/fs/cgroup/cpuset/user.slice/cpuset.cpus.effective", "0-3\n"}});
  cs_.unified = true;
  auto s = survey_unmanaged(roots_, cs_, {"/kubepods/pod1"}, false);
  ASSERT_TRUE(s) << s.error().message();
  ASSERT_EQ(s->groups.size(), 2u) << "system.slice and user.slice (never-set has no effective CPUs here)";
  for (const auto& g : s->groups) EXPECT_EQ(g.cgroups.size(), 1u) << g.top;
  EXPECT_EQ(s->groups[1].top, "/user.slice");
  EXPECT_EQ(s->groups[1].found[0], "");
  EXPECT_EQ(s->groups[1].cpus[0].to_list(), "0-3");
}

TEST_F(UnmanagedTree, RootProcessesSplitIntoMovablePinnedKernelThreadsAndInit) {
  auto s = survey_unmanaged(roots_, cs_, {"/kubepods/pod1"}, true);
  ASSERT_TRUE(s) << s.error().message();
  ASSERT_EQ(s->movable.size(), 2u);  // 999 exited (no /proc entry)
  EXPECT_EQ(s->movable[0].pid, 100);
  EXPECT_EQ(s->movable[0].comm, "redis-bench");
  EXPECT_EQ(s->movable[1].pid, 102);
  EXPECT_EQ(s->movable[1].comm, "a) S 1 (b\\x0a\\xff") << "escaped, and the last ')' ends the name";
  ASSERT_EQ(s->pinned.size(), 1u);
  EXPECT_EQ(s->pinned[0].pid, 101);
  EXPECT_EQ(s->pinned[0].cpus.to_list(), "1");
  ASSERT_EQ(s->kernel_threads.size(), 1u);
  EXPECT_EQ(s->kernel_threads[0], "kthreadd");
  std::vector<std::string> what;
  for (const auto& n : s->not_isolated) what.push_back(n.what);
  EXPECT_EQ(what, (std::vector<std::string>{"pid 1 (init)", "kernel threads in the root cgroup"}));

  // A workload that is the root cgroup itself: its processes are keel's to place, none is moved.
  auto r = survey_unmanaged(roots_, cs_, {"/"}, true);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->movable.empty());
  EXPECT_EQ(r->groups.size(), 3u)
      << "a workload of the root cgroup is its own processes, not the cgroups below";
}

TEST_F(UnmanagedTree, HostileTreesAreBoundedAndSaidNotIsolated) {
  // A chain deeper than kMaxDepth under one top-level group, and more cgroups than kMaxGroupCgroups
  // under another: both are left with the reason, the rest is surveyed.
  std::string deep = "sys/fs/cgroup/cpuset/deep";
  std::vector<std::pair<std::string, std::string>> files;
  for (size_t i = 0; i <= kMaxDepth + 1; ++i) {
    files.push_back({deep + "/cpuset.cpus", "0-3"});
    deep += "/d";
  }
  // A chain of 14 levels of 255-byte names: within kMaxDepth, but its paths pass kMaxCgroupPath.
  std::string lengthy = "sys/fs/cgroup/cpuset/long";
  for (size_t i = 0; i <= 14; ++i) {
    files.push_back({lengthy + "/cpuset.cpus", "0-3"});
    lengthy += "/" + std::string(255, 'n');
  }
  files.push_back({"sys/fs/cgroup/cpuset/wide/cpuset.cpus", "0-3"});
  for (size_t i = 0; i <= kMaxGroupCgroups; ++i)
    files.push_back({"sys/fs/cgroup/cpuset/wide/c" + std::to_string(i) + "/cpuset.cpus", "0-3"});
  make_tree(t_.path(), files);
  auto s = survey_unmanaged(roots_, cs_, {}, false);
  ASSERT_TRUE(s) << s.error().message();
  std::map<std::string, std::string> why;
  for (const auto& n : s->not_isolated) why[n.what] = n.why;
  EXPECT_NE(why["/deep"].find("levels deep"), std::string::npos) << why["/deep"];
  EXPECT_NE(why["/wide"].find("more than 1024 cgroups"), std::string::npos) << why["/wide"];
  EXPECT_EQ(why["/long"], "a cgroup path longer than 3072 bytes");
  std::vector<std::string> tops;
  for (const auto& g : s->groups) tops.push_back(g.top);
  EXPECT_EQ(tops, (std::vector<std::string>{"/kubepods", "/system.slice", "/user.slice"}));
}

TEST(Printable, EscapesControlAndHighBytesAndBoundsTheLength) {
  EXPECT_EQ(printable("redis"), "redis");
  EXPECT_EQ(printable("a\tb\\c"), "a\\x09b\\x5cc");
  EXPECT_EQ(printable(std::string(100, 'x'), 4), "xxxx...");
}

}  // namespace
}  // namespace keel::act
