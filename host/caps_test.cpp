// The privilege table's verdicts for given privileges (what the kernel does with them:
// tests/caps_priv_test.cpp).
#include "host/caps.h"

#include <gtest/gtest.h>

#include <initializer_list>

#include "tests/support/tmp_tree.h"

namespace keel {
namespace {

Privileges with(std::initializer_list<Cap> caps, bool uid0 = true, unsigned last_cap = 40, int paranoid = 2) {
  Privileges p;
  p.uid0 = uid0;
  p.euid = uid0 ? 0 : 65534;
  p.last_cap = last_cap;
  p.perf_event_paranoid = paranoid;
  for (Cap c : caps) p.effective |= uint64_t{1} << static_cast<unsigned>(c);
  return p;
}

TEST(Caps, BpfSensingNeedsBpfAndPerfmonOrSysAdmin) {
  EXPECT_TRUE(check(Feature::bpf_sensing, with({Cap::bpf, Cap::perfmon})).held);
  EXPECT_TRUE(check(Feature::bpf_sensing, with({Cap::sys_admin})).held);
  auto none = check(Feature::bpf_sensing, with({}));
  EXPECT_FALSE(none.held);
  EXPECT_EQ(none.needs, "CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN");
  auto bpf_only = check(Feature::bpf_sensing, with({Cap::bpf}));
  EXPECT_FALSE(bpf_only.held);
  EXPECT_EQ(bpf_only.needs, "CAP_PERFMON, or CAP_SYS_ADMIN");
  EXPECT_EQ(bpf_only.missing, std::vector<Cap>{Cap::perfmon});
  EXPECT_EQ(check(Feature::bpf_sensing, with({Cap::perfmon})).needs, "CAP_BPF, or CAP_SYS_ADMIN");
}

// A kernel before 5.8 knows neither CAP_BPF nor CAP_PERFMON (its last capability is 37): holding
// their bits means nothing there, and only CAP_SYS_ADMIN is named.
TEST(Caps, BeforeCapBpfOnlySysAdminCounts) {
  auto v = check(Feature::bpf_sensing, with({Cap::bpf, Cap::perfmon}, true, 37));
  EXPECT_FALSE(v.held);
  EXPECT_EQ(v.needs, "CAP_SYS_ADMIN");
  EXPECT_TRUE(check(Feature::bpf_sensing, with({Cap::sys_admin}, true, 37)).held);
  EXPECT_EQ(check(Feature::hw_counters, with({}, true, 37)).needs,
            "CAP_SYS_ADMIN, or kernel.perf_event_paranoid <= 0 (it is 2)");
}

TEST(Caps, HardwareCountersNeedPerfmonOrAParanoidOfZero) {
  EXPECT_TRUE(check(Feature::hw_counters, with({Cap::perfmon})).held);
  EXPECT_TRUE(check(Feature::hw_counters, with({}, true, 40, 0)).held);
  EXPECT_TRUE(check(Feature::hw_counters, with({}, true, 40, -1)).held);
  auto v = check(Feature::hw_counters, with({Cap::bpf}, true, 40, 1));
  EXPECT_FALSE(v.held);
  EXPECT_EQ(v.needs, "CAP_PERFMON, or CAP_SYS_ADMIN, or kernel.perf_event_paranoid <= 0 (it is 1)");
}

// Debian's and Ubuntu's kernels default to perf_event_paranoid 3, where their patch lets only
// CAP_SYS_ADMIN open perf events (found on the Debian 12 guest: CAP_PERFMON got EACCES there).
TEST(Caps, AtParanoidThreeHardwareCountersNeedSysAdmin) {
  auto v = check(Feature::hw_counters, with({Cap::perfmon}, true, 40, 3));
  EXPECT_FALSE(v.held);
  EXPECT_EQ(v.needs,
            "CAP_SYS_ADMIN, or kernel.perf_event_paranoid <= 0 (it is 3) (CAP_PERFMON is not enough at "
            "kernel.perf_event_paranoid 3; it is at 2 or less)");
  EXPECT_TRUE(check(Feature::hw_counters, with({Cap::sys_admin}, true, 40, 3)).held);
  EXPECT_TRUE(check(Feature::hw_counters, with({Cap::perfmon}, true, 40, 2)).held);
}

TEST(Caps, BpfStatsNeedSysAdminAlone) {
  auto v = check(Feature::bpf_stats, with({Cap::bpf, Cap::perfmon}));
  EXPECT_FALSE(v.held);
  EXPECT_EQ(v.needs, "CAP_SYS_ADMIN");
  EXPECT_TRUE(check(Feature::bpf_stats, with({Cap::sys_admin})).held);
}

TEST(Caps, KernelFilesNeedUidZeroOrDacOverride) {
  for (Feature f : {Feature::cgroup_knobs, Feature::steal_task, Feature::irq_affinity}) {
    EXPECT_TRUE(check(f, with({})).held);
    EXPECT_TRUE(check(f, with({Cap::dac_override}, false)).held);
    EXPECT_EQ(check(f, with({Cap::bpf}, false)).needs, "uid 0, or CAP_DAC_OVERRIDE");
  }
  // A resctrl tasks write checks the uid itself: no capability stands in.
  EXPECT_EQ(check(Feature::resctrl, with({Cap::dac_override, Cap::sys_admin}, false)).needs, "uid 0");
}

TEST(Caps, RootMovesNeedSysNiceBesidesUidZero) {
  auto v = check(Feature::root_moves, with({Cap::bpf, Cap::perfmon}));
  EXPECT_FALSE(v.held);
  EXPECT_EQ(v.needs, "CAP_SYS_NICE");
  EXPECT_TRUE(v.partial) << "processes holding no capability keel lacks still move";
  auto nobody = check(Feature::root_moves, with({}, false));
  EXPECT_EQ(nobody.needs, "uid 0 and CAP_SYS_NICE");
  EXPECT_FALSE(nobody.partial) << "cgroup.procs refuses another user's process to any uid but 0";
  EXPECT_FALSE(check(Feature::bpf_stats, with({})).partial);
  EXPECT_TRUE(check(Feature::root_moves, with({Cap::sys_nice})).held);
}

TEST(Caps, DescribeNamesTheHeldCapabilitiesTheTableUses) {
  EXPECT_EQ(describe_held(with({Cap::bpf, Cap::perfmon})), "uid 0, CAP_PERFMON CAP_BPF");
  EXPECT_EQ(describe_held(with({}, false)), "uid 65534, no capability keel uses");
  EXPECT_EQ(describe_held(with({Cap::bpf, Cap::perfmon}, true, 37)), "uid 0, no capability keel uses");
}

// This process, read through the kernel: capget agrees with /proc/self/status.
TEST(Caps, CurrentPrivilegesAreThisProcesssOwn) {
  const Privileges p = current_privileges(SysRoots::host());
  const std::string status = testing::slurp("/proc/self/status");
  const std::string eff = testing::between(status, "CapEff:\t", "\n");
  ASSERT_FALSE(eff.empty()) << status;
  EXPECT_EQ(p.effective, std::stoull(eff, nullptr, 16));
  EXPECT_EQ(p.uid0, ::geteuid() == 0);
  EXPECT_EQ(p.last_cap, std::stoul(testing::slurp("/proc/sys/kernel/cap_last_cap")));
  EXPECT_EQ(p.perf_event_paranoid, std::stoi(testing::slurp("/proc/sys/kernel/perf_event_paranoid")));
}

}  // namespace
}  // namespace keel
