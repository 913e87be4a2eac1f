// The writer and restore over temporary trees that mirror kernel files (the writes themselves are
// plain file writes here; the kernel's refusals are simulated where said).
#include "actuators/restore.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "actuators/writer.h"
#include "host/cpuset.h"
#include "host/fileio.h"
#include "tests/support/tmp_tree.h"

namespace keel::act {
namespace {

namespace fs = std::filesystem;
using testing::slurp;

// A tree of every file kind restore handles, and the bytes of each file before keel runs.
class Tree : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::make_tree(t_.path(), {
                                      {"proc/sys/kernel/random/boot_id", "11111111-2222\n"},
                                      {"sys/fs/cgroup/kubepods/cpu.weight", "100\n"},
                                      {"sys/fs/cgroup/kubepods/cpuset.cpus", "0-7\n"},
                                      {"sys/fs/cgroup/kubepods/be/cpu.weight", "100\n"},
                                      {"sys/fs/cgroup/kubepods/be/cpu.idle", "0\n"},
                                      {"sys/fs/cgroup/kubepods/be/cpuset.cpus", "0-7\n"},
                                      {"sys/fs/cgroup/kubepods/be/cpu.max", "max 100000\n"},
                                      {"sys/fs/resctrl/schemata", "    L3:0=7ff;1=7ff\n    MB:0=100;1=100\n"},
                                      {"sys/fs/resctrl/info/last_cmd_status", "ok\n"},
                                      {"proc/irq/24/smp_affinity_list", "0-7\n"},
                                      {"sys/kernel/debug/sched/features",
                                       "GENTLE_FAIR_SLEEPERS START_DEBIT NO_STEAL TTWU_QUEUE\n"},
                                  });
    roots_ = SysRoots::under(t_.path());
  }
  std::map<std::string, std::string> snapshot() { return testing::tree_files(t_.path(), "state"); }
  Journal journal() {
    auto j = Journal::open(t_.path() / "state", read_boot_id(roots_.proc));
    EXPECT_TRUE(j) << j.error().message();
    return std::move(*j);
  }
  // Changes one knob of each kind through the writer.
  void change_everything(KnobWriter& w) {
    ASSERT_TRUE(w.set({Root::cgroup, "kubepods/be/cpu.idle"}, "1", ValueKind::idle));
    ASSERT_TRUE(w.set({Root::cgroup, "kubepods/be/cpu.weight"}, "10", ValueKind::weight));
    ASSERT_TRUE(w.set({Root::cgroup, "kubepods/be/cpuset.cpus"}, "4-7", ValueKind::cpuset_list));
    ASSERT_TRUE(w.set({Root::cgroup, "kubepods/be/cpu.max"}, "50000 100000", ValueKind::bandwidth));
    ASSERT_TRUE(w.set({Root::resctrl, "schemata"}, "L3:0=7f0;1=7f0", ValueKind::text));
    ASSERT_TRUE(w.set({Root::proc, "irq/24/smp_affinity_list"}, "4-7", ValueKind::cpu_list));
    ASSERT_TRUE(w.write_journaled({Root::debugfs, "sched/features"}, "STEAL",
                                  {EntryKind::sched_feature, {Root::debugfs, "sched/features"}, "NO_STEAL"}));
  }
  testing::TempDir t_;
  SysRoots roots_;
};

TEST_F(Tree, ObserveModeComputesEveryChangeAndWritesNothing) {
  auto before = snapshot();
  KnobWriter w(roots_, Mode::observe, nullptr);
  change_everything(w);
  ASSERT_TRUE(w.make_dir({Root::resctrl, "keel-redis"}));
  // In a group not made:
  ASSERT_TRUE(w.set({Root::resctrl, "keel-redis/schemata"}, "L3:0=00f", ValueKind::text));
  ASSERT_TRUE(w.append({Root::resctrl, "keel-redis/tasks"}, "4242"));
  EXPECT_EQ(snapshot(), before);  // byte for byte
  EXPECT_FALSE(fs::exists(t_.path() / "sys/fs/resctrl/keel-redis"));
  EXPECT_FALSE(fs::exists(t_.path() / "state"));
  ASSERT_EQ(w.changes().size(), 10u);
  for (const auto& c : w.changes()) EXPECT_FALSE(c.written) << c.path.str();
  EXPECT_EQ(w.changes()[1].from, "100");
  EXPECT_EQ(w.changes()[1].to, "10");
}

TEST_F(Tree, EnforceJournalsBeforeWritingAndRestoreGivesEverythingBackIdempotently) {
  auto before = snapshot();
  {
    Journal j = journal();
    KnobWriter w(roots_, Mode::enforce, &j);
    change_everything(w);
    // A value already in place is not a change and not journaled.
    auto same = w.set({Root::cgroup, "kubepods/cpu.weight"}, "100", ValueKind::weight);
    ASSERT_TRUE(same);
    EXPECT_FALSE(*same);
    // Kernel lists normalise: "4,5,6,7" is what "4-7" reads back as.
    auto list = w.set({Root::cgroup, "kubepods/be/cpuset.cpus"}, "4,5,6,7", ValueKind::cpuset_list);
    ASSERT_TRUE(list);
    EXPECT_FALSE(*list);
    EXPECT_EQ(j.entries().size(), 7u);
    EXPECT_EQ(slurp(t_.path() / "sys/fs/cgroup/kubepods/be/cpu.weight"), "10");
    EXPECT_NE(snapshot(), before);
  }
  Journal j = journal();  // as `keel restore` would: a new process reads the journal
  ASSERT_EQ(j.entries().size(), 7u);
  auto rep = restore(roots_, j);
  EXPECT_TRUE(rep.failed.empty()) << rep.failed[0].message();
  EXPECT_EQ(rep.restored, 7u);
  // Kernel files print what was written plus a newline; the tree holds the bare write. Compare values.
  // The features file is a toggle in the kernel (a write of NO_STEAL switches one feature); here it
  // holds the last write.
  for (const auto& [file, content] : before)
    if (file.ends_with("sched/features"))
      EXPECT_EQ(std::string(trim(slurp(t_.path() / file))), "NO_STEAL");
    else
      EXPECT_EQ(std::string(trim(slurp(t_.path() / file))), std::string(trim(content))) << file;
  EXPECT_TRUE(j.entries().empty());
  EXPECT_FALSE(fs::exists(t_.path() / "state/journal"));
  auto again = restore(roots_, j);  // idempotent: nothing left to do
  EXPECT_EQ(again.restored + again.unchanged + again.gone, 0u);
}

TEST_F(Tree, RestoreLeavesKnobsAlreadyBackAloneAndCountsVanishedCgroupsAsGone) {
  {
    Journal j = journal();
    KnobWriter w(roots_, Mode::enforce, &j);
    ASSERT_TRUE(w.set({Root::cgroup, "kubepods/be/cpu.weight"}, "10", ValueKind::weight));
    ASSERT_TRUE(w.set({Root::cgroup, "kubepods/cpu.weight"}, "500", ValueKind::weight));
    ASSERT_TRUE(w.set({Root::proc, "irq/24/smp_affinity_list"}, "4-7", ValueKind::cpu_list));
  }
  testing::make_tree(t_.path(),
                     {{"proc/irq/24/smp_affinity_list", "0,1,2,3,4,5,6,7\n"}});  // put back by hand
  fs::remove_all(t_.path() / "sys/fs/cgroup/kubepods/be");                       // the pod ended
  Journal j = journal();
  auto rep = restore(roots_, j);
  EXPECT_TRUE(rep.failed.empty());
  EXPECT_EQ(rep.restored, 1u);
  EXPECT_EQ(rep.unchanged, 1u);
  EXPECT_EQ(rep.gone, 1u);
  EXPECT_EQ(std::string(trim(slurp(t_.path() / "sys/fs/cgroup/kubepods/cpu.weight"))), "100");
}

TEST_F(Tree, ARefusedWriteNamesPathValueAndResctrlsReasonAndKeepsTheJournalUsable) {
  // The kernel's refusal, simulated: the group's schemata cannot be opened for writing.
  testing::make_tree(t_.path(),
                     {{"sys/fs/resctrl/info/last_cmd_status", "mask f7 has non-consecutive 1-bits\n"},
                      {"sys/fs/resctrl/keel-g1/schemata/", ""}});
  Journal j = journal();
  KnobWriter w(roots_, Mode::enforce, &j);
  ASSERT_TRUE(w.set({Root::cgroup, "kubepods/be/cpu.weight"}, "10", ValueKind::weight));
  auto bad = w.write_journaled({Root::resctrl, "keel-g1/schemata"}, "L3:0=f7",
                               {EntryKind::file, {Root::resctrl, "keel-g1/schemata"}, ""});
  ASSERT_FALSE(bad);
  std::string m = bad.error().message();
  EXPECT_NE(m.find("sys/fs/resctrl/keel-g1/schemata"), std::string::npos) << m;
  EXPECT_NE(m.find("'L3:0=f7'"), std::string::npos) << m;
  EXPECT_NE(m.find("mask f7 has non-consecutive 1-bits"), std::string::npos) << m;
  // The earlier knob is still journaled with its original, so restore gives it back.
  ASSERT_FALSE(j.entries().empty());
  EXPECT_EQ(j.entries()[0].original, "100");
}

TEST_F(Tree, GroupsKeelCreatedAreRemovedFirstAndTheirFilesGoWithThem) {
  // A resctrl-like mkdir: the kernel populates a new group with its files.
  DirOps fake{[](const fs::path& p) {
                if (::mkdir(p.c_str(), 0755) != 0) return -1;
                testing::make_tree(p, {{"schemata", "    L3:0=7ff;1=7ff\n"}, {"tasks", ""}});
                return 0;
              },
              [](const fs::path& p) {
                std::error_code ec;
                return fs::remove_all(p, ec) > 0 && !ec ? 0 : -1;
              }};
  {
    Journal j = journal();
    KnobWriter w(roots_, Mode::enforce, &j, fake);
    auto made = w.make_dir({Root::resctrl, "keel-redis"});
    ASSERT_TRUE(made) << made.error().message();
    EXPECT_TRUE(*made);
    ASSERT_TRUE(w.set({Root::resctrl, "keel-redis/schemata"}, "L3:0=00f;1=00f", ValueKind::text));
    ASSERT_TRUE(w.set({Root::resctrl, "schemata"}, "L3:0=7f0;1=7f0", ValueKind::text));
    auto pid = w.append({Root::resctrl, "keel-redis/tasks"}, "4242");
    ASSERT_TRUE(pid);
    EXPECT_EQ(slurp(t_.path() / "sys/fs/resctrl/keel-redis/tasks"),
              "4242\n");  // resctrl input ends in a newline
  }
  Journal j = journal();
  auto rep = restore(roots_, j, fake);
  EXPECT_TRUE(rep.failed.empty()) << rep.failed[0].message();
  EXPECT_EQ(rep.restored, 2u);  // the group, then the default group's schemata
  EXPECT_EQ(rep.gone, 0u);      // the group's own schemata is not reported: it went with the group
  EXPECT_FALSE(fs::exists(t_.path() / "sys/fs/resctrl/keel-redis"));
  EXPECT_NE(slurp(t_.path() / "sys/fs/resctrl/schemata").find("L3:0=7ff;1=7ff"), std::string::npos);
}

TEST_F(Tree, AFailedMkdirLeavesNoJournalEntryThatWouldRemoveSomeoneElsesGroup) {
  DirOps full{[](const fs::path&) {
                errno = ENOSPC;
                return -1;
              },
              [](const fs::path&) { return -1; }};
  Journal j = journal();
  KnobWriter w(roots_, Mode::enforce, &j, full);
  auto made = w.make_dir({Root::resctrl, "keel-redis"});
  ASSERT_FALSE(made);
  EXPECT_NE(made.error().message().find("no free CLOSID"), std::string::npos) << made.error().message();
  EXPECT_TRUE(j.entries().empty());
}

TEST_F(Tree, AJournalFromAnotherBootIsNotApplied) {
  {
    Journal j = journal();
    KnobWriter w(roots_, Mode::enforce, &j);
    ASSERT_TRUE(w.set({Root::cgroup, "kubepods/be/cpu.weight"}, "10", ValueKind::weight));
  }
  testing::make_tree(t_.path(), {{"proc/sys/kernel/random/boot_id", "99999999-0000\n"},
                                 {"sys/fs/cgroup/kubepods/be/cpu.weight", "55\n"}});  // after a reboot
  Journal j = journal();
  auto rep = restore(roots_, j);
  EXPECT_EQ(rep.restored, 0u);
  EXPECT_EQ(rep.gone, 1u);
  EXPECT_EQ(slurp(t_.path() / "sys/fs/cgroup/kubepods/be/cpu.weight"), "55\n");  // untouched
  EXPECT_TRUE(j.entries().empty());
}

TEST_F(Tree, ACpusetKeelGaveCpusIsNotEmptiedOnceItHoldsTasks) {
  testing::make_tree(t_.path(), {{"sys/fs/cgroup/kubepods/new/cpuset.cpus", "\n"},
                                 {"sys/fs/cgroup/kubepods/new/cgroup.procs", ""}});
  {
    Journal j = journal();
    KnobWriter w(roots_, Mode::enforce, &j);
    ASSERT_TRUE(w.set({Root::cgroup, "kubepods/new/cpuset.cpus"}, "2-3", ValueKind::cpuset_list));
  }
  testing::make_tree(t_.path(), {{"sys/fs/cgroup/kubepods/new/cgroup.procs", "4242\n"}});  // a task joined
  Journal j = journal();
  auto rep = restore(roots_, j);
  EXPECT_TRUE(rep.failed.empty());
  EXPECT_EQ(rep.kept, 1u);
  EXPECT_EQ(std::string(trim(slurp(t_.path() / "sys/fs/cgroup/kubepods/new/cpuset.cpus"))), "2-3");
  EXPECT_TRUE(j.entries().empty());
}

// On cgroup v2 an empty cpuset.cpus is "not set" (the parent's CPUs), not an empty set: a populated
// v2 cgroup found so is given back so, where v1's rule above would keep keel's value for good.
TEST_F(Tree, AV2CpusetFoundNotSetIsNotSetAgainOnRestoreThoughItHasTasks) {
  testing::make_tree(t_.path(), {{"sys/fs/cgroup/system.slice/cgroup.controllers", "cpuset cpu\n"},
                                 {"sys/fs/cgroup/system.slice/cpuset.cpus", "\n"},
                                 {"sys/fs/cgroup/system.slice/cgroup.procs", "300\n"}});
  {
    Journal j = journal();
    KnobWriter w(roots_, Mode::enforce, &j);
    ASSERT_TRUE(w.set({Root::cgroup, "system.slice/cpuset.cpus"}, "2-7", ValueKind::cpuset_list));
  }
  Journal j = journal();
  auto rep = restore(roots_, j);
  EXPECT_TRUE(rep.failed.empty());
  EXPECT_EQ(rep.kept, 0u);
  EXPECT_EQ(rep.restored, 1u);
  EXPECT_EQ(std::string(trim(slurp(t_.path() / "sys/fs/cgroup/system.slice/cpuset.cpus"))), "");
  EXPECT_TRUE(j.entries().empty());
}

}  // namespace
}  // namespace keel::act

namespace keel::act {
namespace {

// Knobs written through a held cgroup are journaled with its directory's inode. When the cgroup is
// removed and made again under its name, the new one is not the one keel changed: restore leaves it
// as it is (gone), and keel's first change of the new one journals the new one's original.
TEST_F(Tree, ACgroupMadeAgainUnderItsNameIsNotRestoredToTheOldOnesValue) {
  CgroupHierarchy h{0, true, {"cpu", "cpuset"}, roots_.cgroup, "/"};
  // The new one made before the old one's directory goes, so a file system that reuses inode numbers
  // cannot give it the old one's (cgroupfs never reuses a cgroup's id).
  auto recreate = [&](const std::string& weight) {
    fs::rename(t_.path() / "sys/fs/cgroup/kubepods/be", t_.path() / "sys/fs/cgroup/kubepods/be.gone");
    testing::make_tree(t_.path(), {{"sys/fs/cgroup/kubepods/be/cpu.weight", weight}});
    fs::remove_all(t_.path() / "sys/fs/cgroup/kubepods/be.gone");
  };
  {
    Journal j = journal();
    KnobWriter w(roots_, Mode::enforce, &j);
    auto be = CgroupDir::open(h, "/kubepods/be");
    ASSERT_TRUE(be);
    ASSERT_TRUE(w.set(*be, CgroupFile::weight, "10"));
    ASSERT_EQ(j.entries().size(), 1u);
    EXPECT_EQ(j.entries()[0].value, ValueKind::weight);
    EXPECT_EQ(j.entries()[0].dir_inode, be->id().inode);
  }
  recreate("300\n");  // the pod ended and one of that name came
  {
    Journal j = journal();
    auto rep = restore(roots_, j);
    EXPECT_TRUE(rep.failed.empty());
    EXPECT_EQ(rep.gone, 1u);
    EXPECT_EQ(rep.restored, 0u);
    EXPECT_EQ(slurp(t_.path() / "sys/fs/cgroup/kubepods/be/cpu.weight"), "300\n");
    EXPECT_TRUE(j.entries().empty());
  }
  // And while keel runs: the old entry is replaced by the new cgroup's own original.
  recreate("100\n");
  Journal j = journal();
  KnobWriter w(roots_, Mode::enforce, &j);
  auto first = CgroupDir::open(h, "/kubepods/be");
  ASSERT_TRUE(first);
  ASSERT_TRUE(w.set(*first, CgroupFile::weight, "10"));
  recreate("300\n");
  EXPECT_FALSE(w.set(*first, CgroupFile::weight, "20"));  // the held one is gone: nothing written
  EXPECT_EQ(slurp(t_.path() / "sys/fs/cgroup/kubepods/be/cpu.weight"), "300\n");
  auto second = CgroupDir::open(h, "/kubepods/be");
  ASSERT_TRUE(second);
  ASSERT_TRUE(w.set(*second, CgroupFile::weight, "20"));
  ASSERT_EQ(j.entries().size(), 1u);
  EXPECT_EQ(j.entries()[0].original, "300");
  auto rep = restore(roots_, j);
  EXPECT_EQ(rep.restored, 1u);
  EXPECT_EQ(std::string(trim(slurp(t_.path() / "sys/fs/cgroup/kubepods/be/cpu.weight"))), "300");
}

}  // namespace
}  // namespace keel::act

namespace keel::act {
namespace {

// Observe mode decides like enforce: what it would have written is what is there for it, so a knob
// it would set again to the same value is no change (no "would write" every tick), and the changes it
// reported are not kept once taken (a long observed run's memory and work do not grow).
// Another manager (kubelet, systemctl set-property, docker update) changes a knob after keel wrote it:
// the next set() finds it, writes nothing, reports the drift, drops the journal entry (the old original
// is no longer keel's to restore) and leaves the knob alone for the lockout, doubled at the next drift.
// Without drift detection the second set() would write 20 over the other manager's 300 (a write-war).
TEST_F(Tree, AKnobAnotherManagerChangedIsGivenUpLockedOutAndNotRestored) {
  CgroupHierarchy h{0, true, {"cpu", "cpuset"}, roots_.cgroup, "/"};
  Journal j = journal();
  KnobWriter w(roots_, Mode::enforce, &j);
  auto be = CgroupDir::open(h, "/kubepods/be");
  ASSERT_TRUE(be);
  const fs::path weight = t_.path() / "sys/fs/cgroup/kubepods/be/cpu.weight";
  w.set_tick(1);
  ASSERT_TRUE(*w.set(*be, CgroupFile::weight, "10"));
  ASSERT_EQ(j.entries().size(), 1u);
  testing::make_tree(t_.path(), {{"sys/fs/cgroup/kubepods/be/cpu.weight", "300\n"}});  // someone else
  w.set_tick(2);
  auto again = w.set(*be, CgroupFile::weight, "20");
  ASSERT_TRUE(again) << again.error().message();
  EXPECT_FALSE(*again);
  EXPECT_EQ(slurp(weight), "300\n");
  auto drifts = w.take_drifts();
  ASSERT_EQ(drifts.size(), 1u);
  EXPECT_EQ(drifts[0].path.str(), "cgroup:kubepods/be/cpu.weight");
  EXPECT_EQ(drifts[0].wrote, "10");
  EXPECT_EQ(drifts[0].now, "300");
  EXPECT_EQ(drifts[0].cgroup, be->id());
  EXPECT_TRUE(j.entries().empty()) << "given up: restore must not write 100 over the other manager's 300";
  // Locked out: nothing written for kDriftLockoutTicks.
  w.set_tick(2 + kDriftLockoutTicks - 1);
  EXPECT_FALSE(*w.set(*be, CgroupFile::weight, "20"));
  EXPECT_EQ(slurp(weight), "300\n");
  // Then keel may set it again, journaling what is there now (the other manager's value) as original.
  w.set_tick(2 + kDriftLockoutTicks);
  EXPECT_TRUE(*w.set(*be, CgroupFile::weight, "20"));
  ASSERT_EQ(j.entries().size(), 1u);
  EXPECT_EQ(j.entries()[0].original, "300");
  // A second drift: twice the lockout.
  testing::make_tree(t_.path(), {{"sys/fs/cgroup/kubepods/be/cpu.weight", "400\n"}});
  const uint64_t at = 3 + kDriftLockoutTicks;
  w.set_tick(at);
  EXPECT_FALSE(*w.set(*be, CgroupFile::weight, "20"));
  EXPECT_EQ(w.take_drifts().size(), 1u);
  w.set_tick(at + 2 * kDriftLockoutTicks - 1);
  EXPECT_TRUE(w.locked_out(drifts[0].path));
  w.set_tick(at + 2 * kDriftLockoutTicks);
  EXPECT_FALSE(w.locked_out(drifts[0].path));
  // The kernel's own side effect (cpu.idle resets the weight) is not another manager's drift.
  EXPECT_TRUE(*w.set(*be, CgroupFile::weight, "30"));
  ASSERT_TRUE(w.journal(*be, CgroupFile::weight));
  testing::make_tree(t_.path(), {{"sys/fs/cgroup/kubepods/be/cpu.weight", "1\n"}});
  EXPECT_TRUE(*w.set(*be, CgroupFile::weight, "30"));
  EXPECT_TRUE(w.take_drifts().empty());
}

// systemd realises a unit's cgroup again from the unit's settings (daemon-reload): the knob is back at
// what keel found there (the journal's original). For a cgroup whose owner re-applies (systemd's units)
// that is no other manager's change: the next set() writes keel's value again at once, keeps the
// journal's original and reports it as re-applied, up to kReapplyMax times a window (then a drift, as
// is the same change where the owner does not re-apply, or a value that is not the original). Without
// the rule the knob is given up and locked out for a minute: protection gone.
TEST_F(Tree, AValueSystemdRealisesAgainIsWrittenAgainNotGivenUp) {
  CgroupHierarchy h{0, true, {"cpu", "cpuset"}, roots_.cgroup, "/"};
  Journal j = journal();
  KnobWriter w(roots_, Mode::enforce, &j);
  std::vector<std::string> asked;
  w.set_reapplied_by_owner([&](std::string_view path) {
    asked.emplace_back(path);
    return path == "/kubepods/be";
  });
  auto be = CgroupDir::open(h, "/kubepods/be");
  ASSERT_TRUE(be);
  const fs::path weight = t_.path() / "sys/fs/cgroup/kubepods/be/cpu.weight";
  const std::string found = std::string(trim(slurp(weight)));
  w.set_tick(1);
  ASSERT_TRUE(*w.set(*be, CgroupFile::weight, "10"));
  for (unsigned i = 0; i < kReapplyMax; ++i) {
    testing::make_tree(t_.path(), {{"sys/fs/cgroup/kubepods/be/cpu.weight", found + "\n"}});  // realised
    w.set_tick(2 + i);
    auto again = w.set(*be, CgroupFile::weight, "10");
    ASSERT_TRUE(again) << again.error().message();
    EXPECT_TRUE(*again) << i;
    EXPECT_EQ(slurp(weight), "10");
  }
  EXPECT_TRUE(w.take_drifts().empty());
  auto re = w.take_reapplied();
  ASSERT_EQ(re.size(), kReapplyMax);
  EXPECT_EQ(re[0].found, found);
  EXPECT_EQ(re[0].wrote, "10");
  ASSERT_FALSE(asked.empty());
  for (const std::string& a : asked) EXPECT_EQ(a, "/kubepods/be");
  ASSERT_EQ(j.entries().size(), 1u);
  EXPECT_EQ(j.entries()[0].original, found);
  // One more in the window: a fight, not a realisation.
  testing::make_tree(t_.path(), {{"sys/fs/cgroup/kubepods/be/cpu.weight", found + "\n"}});
  w.set_tick(2 + kReapplyMax);
  EXPECT_FALSE(*w.set(*be, CgroupFile::weight, "10"));
  EXPECT_EQ(w.take_drifts().size(), 1u);
  EXPECT_TRUE(j.entries().empty());
  // A value that is not what keel found is another manager's, realised by an owner or not.
  w.set_tick(2 + kReapplyMax + kDriftLockoutMaxTicks);
  KnobWriter fresh(roots_, Mode::enforce, &j);
  fresh.set_reapplied_by_owner([](std::string_view) { return true; });
  fresh.set_tick(1);
  ASSERT_TRUE(*fresh.set(*be, CgroupFile::weight, "10"));
  testing::make_tree(t_.path(), {{"sys/fs/cgroup/kubepods/be/cpu.weight", "777\n"}});
  fresh.set_tick(2);
  EXPECT_FALSE(*fresh.set(*be, CgroupFile::weight, "10"));
  EXPECT_EQ(fresh.take_drifts().size(), 1u);
  EXPECT_TRUE(fresh.take_reapplied().empty());
  // Where the owner does not re-apply, the original back is a drift too.
  testing::make_tree(t_.path(), {{"sys/fs/cgroup/kubepods/be/cpu.weight", "300\n"}});
  KnobWriter plain(roots_, Mode::enforce, &j);
  plain.set_tick(1);
  ASSERT_TRUE(*plain.set(*be, CgroupFile::weight, "10"));
  testing::make_tree(t_.path(), {{"sys/fs/cgroup/kubepods/be/cpu.weight", "300\n"}});
  plain.set_tick(2);
  EXPECT_FALSE(*plain.set(*be, CgroupFile::weight, "10"));
  EXPECT_EQ(plain.take_drifts().size(), 1u);
}

// At exit a knob changed after keel's last write (before keel could see it) is left as it is now, and
// the report says so; the knobs still at keel's value go back.
TEST_F(Tree, RestoreLeavesAKnobChangedSinceKeelWroteItAndSaysSo) {
  Journal j = journal();
  KnobWriter w(roots_, Mode::enforce, &j);
  ASSERT_TRUE(*w.set({Root::cgroup, "kubepods/be/cpu.weight"}, "10", ValueKind::weight));
  ASSERT_TRUE(*w.set({Root::cgroup, "kubepods/be/cpuset.cpus"}, "4-7", ValueKind::cpuset_list));
  testing::make_tree(t_.path(), {{"sys/fs/cgroup/kubepods/be/cpuset.cpus", "2-3\n"}});  // docker update
  auto rep = restore(roots_, j, DirOps::real(), &w.written());
  EXPECT_TRUE(rep.failed.empty());
  EXPECT_EQ(rep.restored, 1u);
  ASSERT_EQ(rep.changed_since.size(), 1u);
  EXPECT_NE(rep.changed_since[0].find("kubepods/be/cpuset.cpus: keel wrote 4-7, now 2-3"), std::string::npos)
      << rep.changed_since[0];
  EXPECT_EQ(slurp(t_.path() / "sys/fs/cgroup/kubepods/be/cpuset.cpus"), "2-3\n");
  EXPECT_EQ(std::string(trim(slurp(t_.path() / "sys/fs/cgroup/kubepods/be/cpu.weight"))), "100");
  EXPECT_TRUE(j.entries().empty());
}

// Issue 38: keel wrote a best-effort knob, another manager rewrote it, keel was killed before its next
// tick, and `keel restore` put the original back over the other manager's value. The journal now
// records each value keel writes (before the write), so a restore after a crash leaves a knob at
// neither keel's values nor its original, and says so; the knobs still at keel's value go back.
TEST_F(Tree, AfterACrashRestoreLeavesAKnobAnotherManagerChangedSinceAndGivesTheRestBack) {
  {
    Journal j = journal();
    KnobWriter w(roots_, Mode::enforce, &j);
    ASSERT_TRUE(*w.set({Root::cgroup, "kubepods/be/cpu.weight"}, "50", ValueKind::weight));
    ASSERT_TRUE(*w.set({Root::cgroup, "kubepods/be/cpuset.cpus"}, "4-7", ValueKind::cpuset_list));
    ASSERT_TRUE(*w.set({Root::cgroup, "kubepods/cpuset.cpus"}, "2-7", ValueKind::cpuset_list));
    ASSERT_TRUE(*w.set({Root::cgroup, "kubepods/cpuset.cpus"}, "3-7", ValueKind::cpuset_list));
    // Killed here: no restore, no handover; the writer's memory is lost.
  }
  testing::make_tree(t_.path(),
                     {{"sys/fs/cgroup/kubepods/be/cpu.weight", "300\n"}});  // systemctl set-property
  // As if the last write had been cut short by the kill: the knob still holds keel's value before.
  testing::make_tree(t_.path(), {{"sys/fs/cgroup/kubepods/cpuset.cpus", "2-7\n"}});
  Journal j = journal();  // the next keel, or `keel restore`
  auto rep = restore(roots_, j);
  EXPECT_TRUE(rep.failed.empty());
  ASSERT_EQ(rep.changed_since.size(), 1u);
  EXPECT_NE(rep.changed_since[0].find("kubepods/be/cpu.weight: keel wrote 50, now 300"), std::string::npos)
      << rep.changed_since[0];
  EXPECT_EQ(slurp(t_.path() / "sys/fs/cgroup/kubepods/be/cpu.weight"), "300\n");  // the other manager's
  EXPECT_EQ(std::string(trim(slurp(t_.path() / "sys/fs/cgroup/kubepods/be/cpuset.cpus"))), "0-7");
  EXPECT_EQ(std::string(trim(slurp(t_.path() / "sys/fs/cgroup/kubepods/cpuset.cpus"))), "0-7");
  EXPECT_EQ(rep.restored, 2u);
  EXPECT_TRUE(j.entries().empty());
}

TEST_F(Tree, ObserveModeSeesItsOwnWritesAndKeepsNoHistory) {
  KnobWriter w(roots_, Mode::observe, nullptr);
  for (int tick = 0; tick < 1000; ++tick) {
    auto r = w.set({Root::cgroup, "kubepods/be/cpu.weight"}, "10", ValueKind::weight);
    ASSERT_TRUE(r);
    EXPECT_EQ(*r, tick == 0) << tick;
    auto taken = w.take_changes();
    EXPECT_EQ(taken.size(), tick == 0 ? 1u : 0u);
    EXPECT_TRUE(w.changes().empty());
  }
  ASSERT_NE(w.observed({Root::cgroup, "kubepods/be/cpu.weight"}), nullptr);
  EXPECT_EQ(*w.observed({Root::cgroup, "kubepods/be/cpu.weight"}), "10");
  // Back to what the file holds: a change again, from the value it would have left.
  auto back = w.set({Root::cgroup, "kubepods/be/cpu.weight"}, "100", ValueKind::weight);
  ASSERT_TRUE(back);
  EXPECT_TRUE(*back);
  ASSERT_EQ(w.changes().size(), 1u);
  EXPECT_EQ(w.changes()[0].from, "10");
  EXPECT_EQ(slurp(t_.path() / "sys/fs/cgroup/kubepods/be/cpu.weight"), "100\n");  // never written
}

}  // namespace
}  // namespace keel::act

namespace keel::act {
namespace {

// What the writer holds of cgroups that went away goes with them: the journal entries of a removed
// cgroup and of one removed and made again under its name (another inode), the values written there and
// their lockouts; what is still there stays, and restore still gives it back.
TEST(WriterPrune, GoneCgroupsLeaveNothingInTheWriterOrTheJournal) {
  testing::TempDir t;
  testing::make_tree(t.path(), {{"proc/sys/kernel/random/boot_id", "b\n"},
                                {"sys/fs/cgroup/cpu/stay/cpu.shares", "1024\n"},
                                {"sys/fs/cgroup/cpu/gone/cpu.shares", "1024\n"},
                                {"sys/fs/cgroup/cpu/again/cpu.shares", "1024\n"}});
  const SysRoots roots = SysRoots::under(t.path());
  auto j = Journal::open(t.path() / "state", "b");
  ASSERT_TRUE(j) << j.error().message();
  KnobWriter w(roots, Mode::enforce, &*j);
  for (const char* cg : {"stay", "gone", "again"})
    ASSERT_TRUE(w.set({Root::cgroup, std::string("cpu/") + cg + "/cpu.shares"}, "2", ValueKind::weight));
  ASSERT_EQ(j->entries().size(), 3u);
  auto none = w.prune_gone();
  ASSERT_TRUE(none);
  EXPECT_EQ(j->entries().size(), 3u) << "nothing is gone yet";
  fs::remove_all(t.path() / "sys/fs/cgroup/cpu/gone");
  fs::remove_all(t.path() / "sys/fs/cgroup/cpu/again");
  testing::make_tree(t.path(), {{"sys/fs/cgroup/cpu/again/cpu.shares", "1024\n"}});
  // A knob journaled with its cgroup's inode: one made again under the name is another cgroup.
  const uint64_t old_inode = 1;  // not the new directory's
  ASSERT_TRUE(j->forget({Root::cgroup, "cpu/again/cpu.shares"}));
  ASSERT_TRUE(j->record(
      {EntryKind::file, {Root::cgroup, "cpu/again/cpu.shares"}, "1024", ValueKind::weight, old_inode}));
  auto pruned = w.prune_gone();
  ASSERT_TRUE(pruned) << pruned.error().message();
  EXPECT_GE(*pruned, 2u);
  ASSERT_EQ(j->entries().size(), 1u);
  EXPECT_EQ(j->entries()[0].path.rel, "cpu/stay/cpu.shares");
  auto rep = restore(roots, *j);
  EXPECT_EQ(rep.restored, 1u);
  EXPECT_EQ(slurp(t.path() / "sys/fs/cgroup/cpu/stay/cpu.shares"), "1024");
  EXPECT_EQ(slurp(t.path() / "sys/fs/cgroup/cpu/again/cpu.shares"), "1024\n")
      << "another cgroup's: untouched";
}

}  // namespace
}  // namespace keel::act

namespace keel::act {
namespace {

// A systemd unit's runtime property keel asked for (so that systemd enables a controller for the unit)
// is journaled as not set before systemd is asked, and goes back last, after the files below it: the
// unit's weight is back when systemd is asked for "not set". A unit systemd no longer knows is gone;
// one systemd refuses stays journaled, and a later restore asks again. Observe mode asks nothing.
TEST_F(Tree, AUnitsPropertyIsJournaledFirstAndGoesBackAfterItsFiles) {
  CgroupHierarchy h{0, true, {"cpu", "cpuset"}, roots_.cgroup, "/"};
  for (const char* unit : {"a.service", "gone.service", "stuck.service"})
    testing::make_tree(t_.path(),
                       {{std::string("sys/fs/cgroup/system.slice/") + unit + "/cpu.weight", "100\n"}});
  std::vector<std::string> asked;  // "unit Property=value (a.service's weight then)"
  bool refuse = true;
  DirOps ops = DirOps::real();
  ops.unit_property = [&](const SysRoots& r, std::string_view unit, UnitProperty p,
                          std::string_view value) -> Result<void> {
    EXPECT_EQ(r.cgroup, roots_.cgroup);
    asked.push_back(std::string(unit) + " " + std::string(to_string(p)) + "=" + std::string(value) + " (" +
                    std::string(trim(slurp(t_.path() / "sys/fs/cgroup/system.slice/a.service/cpu.weight"))) +
                    ")");
    if (unit == "gone.service" && value.empty()) return fail("Unit gone.service not loaded.", "", ENOENT);
    if (unit == "stuck.service" && value.empty() && refuse) return fail("Access denied");
    return {};
  };
  {
    KnobWriter observe(roots_, Mode::observe, nullptr, ops);
    auto a = CgroupDir::open(h, "/system.slice/a.service");
    ASSERT_TRUE(a);
    EXPECT_TRUE(*observe.set_unit_property(*a, UnitProperty::cpu_weight, "100"));
    EXPECT_TRUE(asked.empty());
  }
  {
    Journal j = journal();
    KnobWriter w(roots_, Mode::enforce, &j, ops);
    for (const char* unit : {"a.service", "gone.service", "stuck.service"}) {
      auto dir = CgroupDir::open(h, std::string("/system.slice/") + unit);
      ASSERT_TRUE(dir);
      ASSERT_TRUE(w.set_unit_property(*dir, UnitProperty::cpu_weight, "100"));
    }
    auto a = CgroupDir::open(h, "/system.slice/a.service");
    ASSERT_TRUE(a);
    ASSERT_TRUE(w.set_unit_property(*a, UnitProperty::startup_allowed_cpus, "0-7"));
    ASSERT_TRUE(w.set(*a, CgroupFile::weight, "400"));
    // A slice is a unit too; a directory that names no unit (kubelet's cgroupfs driver's kubepods) is
    // refused before anything is journaled or asked.
    auto slice = CgroupDir::open(h, "/system.slice");
    ASSERT_TRUE(slice);
    ASSERT_TRUE(w.set_unit_property(*slice, UnitProperty::cpu_weight, "100"));
    auto kube = CgroupDir::open(h, "/kubepods");
    ASSERT_TRUE(kube);
    EXPECT_FALSE(w.set_unit_property(*kube, UnitProperty::cpu_weight, "100"));
    ASSERT_EQ(j.entries().size(), 6u);  // 3 + 1 properties, the weight, and system.slice's
    for (const auto& e : j.entries()) {
      if (e.kind == EntryKind::unit_property) {
        EXPECT_EQ(e.original, "") << e.path.str();
      }
    }
  }
  EXPECT_EQ(asked.size(), 5u);
  asked.clear();
  {
    Journal j = journal();
    auto rep = restore(roots_, j, ops);
    EXPECT_EQ(std::string(trim(slurp(t_.path() / "sys/fs/cgroup/system.slice/a.service/cpu.weight"))), "100");
    ASSERT_EQ(asked.size(), 5u);
    for (const std::string& a : asked) EXPECT_TRUE(a.ends_with("= (100)")) << a;  // not set, after the weight
    EXPECT_EQ(rep.gone, 1u);
    ASSERT_EQ(rep.failed.size(), 1u);
    EXPECT_NE(rep.failed[0].message().find("Access denied"), std::string::npos) << rep.failed[0].message();
    ASSERT_EQ(j.entries().size(), 1u);
    EXPECT_EQ(j.entries()[0].path.rel, "system.slice/stuck.service/CPUWeight");
  }
  refuse = false;
  asked.clear();
  Journal j = journal();
  auto rep = restore(roots_, j, ops);
  EXPECT_TRUE(rep.failed.empty());
  EXPECT_EQ(asked, std::vector<std::string>{"stuck.service CPUWeight= (100)"});
  EXPECT_TRUE(j.entries().empty());
}

}  // namespace
}  // namespace keel::act
