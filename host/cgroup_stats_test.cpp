// cgroupfs CPU statistics against temporary trees with the kernel's formats (v1 and v2).
#include "host/cgroup_stats.h"

#include <gtest/gtest.h>

#include "tests/support/tmp_tree.h"

namespace keel {
namespace {

CgroupHierarchy hier(uint32_t id, bool unified, std::vector<std::string> ctl, std::filesystem::path mount) {
  CgroupHierarchy h;
  h.id = id;
  h.unified = unified;
  h.controllers = std::move(ctl);
  h.mount = std::move(mount);
  return h;
}

TEST(CgroupStatsTempTree, V2CpuStatAndPressure) {
  testing::TempDir t;
  testing::make_tree(t.path(), {{"app.slice/web.service/cpu.stat",
                                 "usage_usec 2500\nuser_usec 2000\nsystem_usec 500\nnr_periods 10\n"
                                 "nr_throttled 3\nthrottled_usec 1200\nnr_bursts 0\nburst_usec 0\n"},
                                {"app.slice/web.service/cpu.pressure",
                                 "some avg10=1.50 avg60=0.20 avg300=0.05 total=98765\n"
                                 "full avg10=0.00 avg60=0.00 avg300=0.00 total=111\n"}});
  CgroupLayout layout;
  layout.mode = CgroupMode::v2;
  layout.hierarchies.push_back(hier(0, true, {"cpuset", "cpu", "io", "memory"}, t.path()));
  auto s = read_cpu_stats(layout, "/app.slice/web.service");
  EXPECT_EQ(s.usage_ns, 2'500'000u);
  EXPECT_EQ(s.nr_throttled, 3u);
  EXPECT_EQ(s.throttled_ns, 1'200'000u);
  EXPECT_EQ(s.psi_some_us, 98765u);
}

TEST(CgroupStatsTempTree, V1SplitsCpuAndCpuacct) {
  testing::TempDir t;
  testing::make_tree(t.path(),
                     {{"cpu/docker/abc/cpu.stat",
                       "nr_periods 7\nnr_throttled 2\nthrottled_time 5000000\nnr_bursts 0\nburst_time 0\n"},
                      {"cpuacct/docker/abc/cpuacct.usage", "123456789\n"}});
  CgroupLayout layout;
  layout.mode = CgroupMode::hybrid;
  layout.hierarchies.push_back(hier(1, false, {"cpu"}, t.path() / "cpu"));
  layout.hierarchies.push_back(hier(2, false, {"cpuacct"}, t.path() / "cpuacct"));
  layout.hierarchies.push_back(hier(0, true, {}, t.path() / "unified"));  // no controllers: not used
  auto s = read_cpu_stats(layout, "/docker/abc");
  EXPECT_EQ(s.usage_ns, 123456789u);
  EXPECT_EQ(s.nr_throttled, 2u);
  EXPECT_EQ(s.throttled_ns, 5'000'000u);
  EXPECT_FALSE(s.psi_some_us.has_value());
}

TEST(CgroupStatsTempTree, MissingFilesAreUnavailableNotZero) {
  testing::TempDir t;
  testing::make_tree(t.path(), {{"cpu/only-here/cpu.stat", "nr_throttled 0\nthrottled_time 0\n"}});
  CgroupLayout layout;
  layout.hierarchies.push_back(hier(1, false, {"cpu"}, t.path() / "cpu"));
  layout.hierarchies.push_back(hier(2, false, {"cpuacct"}, t.path() / "cpuacct"));
  auto s = read_cpu_stats(layout, "/only-here");
  EXPECT_FALSE(s.usage_ns.has_value());
  EXPECT_EQ(s.nr_throttled, 0u);
  auto gone = read_cpu_stats(layout, "/vanished");
  EXPECT_FALSE(gone.usage_ns || gone.nr_throttled || gone.throttled_ns);
}

// As sensing reads them: through a directory held open higher up (a v1 hierarchy's root, or an
// ancestor), with the cgroup's path below it; and on v2 one cpu.stat read gives usage and throttling.
TEST(CgroupStatsTempTree, ReadersTakeAPathBelowAHeldDirectory) {
  testing::TempDir t;
  testing::make_tree(t.path(),
                     {{"cpu/docker/abc/cpu.stat", "nr_periods 7\nnr_throttled 2\nthrottled_time 5000000\n"},
                      {"cpuacct/docker/abc/cpuacct.usage", "123456789\n"},
                      {"unified/app.slice/web.service/cpu.stat",
                       "usage_usec 2500\nnr_periods 10\nnr_throttled 3\nthrottled_usec 1200\n"}});
  auto cpu_root = CgroupDir::open(hier(1, false, {"cpu"}, t.path() / "cpu"), "/");
  auto acct_root = CgroupDir::open(hier(2, false, {"cpuacct"}, t.path() / "cpuacct"), "/");
  auto slice = CgroupDir::open(hier(0, true, {"cpu"}, t.path() / "unified"), "/app.slice");
  ASSERT_TRUE(cpu_root && acct_root && slice);
  EXPECT_EQ(read_usage_ns(*acct_root, "docker/abc"), 123456789u);
  EXPECT_FALSE(read_usage_ns(*acct_root, "docker/gone").has_value());
  CgroupCpuStats v1;
  read_throttling(*cpu_root, v1, "docker/abc");
  EXPECT_EQ(v1.nr_throttled, 2u);
  EXPECT_EQ(v1.throttled_ns, 5'000'000u);
  EXPECT_FALSE(v1.usage_ns.has_value());  // v1's cpu.stat has no usage: cpuacct's
  CgroupCpuStats v2;
  read_throttling(*slice, v2, "web.service");
  EXPECT_EQ(v2.usage_ns, 2'500'000u);
  EXPECT_EQ(v2.nr_throttled, 3u);
  EXPECT_EQ(v2.throttled_ns, 1'200'000u);
  EXPECT_EQ(read_usage_ns(*slice, "web.service"), 2'500'000u);
}

TEST(CgroupStats, FieldParsers) {
  EXPECT_EQ(stat_field("a 1\nab 2\n", "ab"), 2u);
  EXPECT_EQ(stat_field("abc 1\n", "ab"), std::nullopt);
  EXPECT_EQ(stat_field("ab x\n", "ab"), std::nullopt);
  EXPECT_EQ(psi_some_total("some avg10=0.00 total=5\n"), 5u);
  EXPECT_EQ(psi_some_total("full avg10=0.00 total=5\n"), std::nullopt);
}

}  // namespace
}  // namespace keel
