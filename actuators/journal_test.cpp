#include "actuators/journal.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/support/tmp_tree.h"

namespace keel::act {
namespace {

namespace fs = std::filesystem;

TEST(Journal, TextFormRoundTripsValuesWithNewlinesSpacesAndPercents) {
  std::vector<JournalEntry> in{
      {EntryKind::file, {Root::resctrl, "schemata"}, "    L3:0=7ff;1=7ff\n    MB:0=100;1=100\n"},
      {EntryKind::file, {Root::cgroup, "cpu/a b/cpu.shares"}, "1024"},
      {EntryKind::created_dir, {Root::resctrl, "keel-redis"}, ""},
      {EntryKind::sched_feature, {Root::debugfs, "sched/features"}, "NO_STEAL"},
      {EntryKind::file, {Root::proc, "irq/24/smp_affinity_list"}, "100% odd=value%"},
  };
  std::string text = format_journal("3f2a-boot", in);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 6) << text;  // header + one line per entry
  auto out = parse_journal(text);
  ASSERT_TRUE(out) << out.error().message();
  EXPECT_EQ(out->first, "3f2a-boot");
  ASSERT_EQ(out->second.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out->second[i].kind, in[i].kind) << i;
    EXPECT_EQ(out->second[i].path, in[i].path) << i;
    EXPECT_EQ(out->second[i].original, in[i].original) << i;
  }
}

TEST(Journal, MalformedTextIsRefusedWithTheLine) {
  EXPECT_FALSE(parse_journal("something else\n"));
  auto bad_kind = parse_journal("keel-journal 1 boot_id=x\nfiel cgroup cpu.shares 1024\n");
  ASSERT_FALSE(bad_kind);
  EXPECT_NE(bad_kind.error().what.find("line 2"), std::string::npos) << bad_kind.error().what;
  EXPECT_FALSE(parse_journal("keel-journal 1 boot_id=x\nfile nowhere cpu.shares 1024\n"));
  EXPECT_FALSE(parse_journal("keel-journal 1 boot_id=x\nfile cgroup cpu.shares 10%2\n"));
  auto escape = parse_journal("keel-journal 1 boot_id=x\nfile cgroup ../../etc/passwd x\n");
  ASSERT_FALSE(escape);
  EXPECT_NE(escape.error().what.find("under its root"), std::string::npos);
}

TEST(Journal, EntriesAreDurableFirstOriginalWinsAndTheStateDirIsExclusive) {
  testing::TempDir t;
  fs::path state = t.path() / "state";
  {
    auto j = Journal::open(state, "boot-1");
    ASSERT_TRUE(j) << j.error().message();
    EXPECT_TRUE(j->entries().empty());
    EXPECT_FALSE(fs::exists(state / "journal"));  // nothing journaled, nothing written

    auto second = Journal::open(state, "boot-1");  // a second keel on the same state
    ASSERT_FALSE(second);
    EXPECT_NE(second.error().message().find("another keel holds this state directory"), std::string::npos)
        << second.error().message();

    KnobPath k{Root::cgroup, "cpu/be/cpu.shares"};
    ASSERT_TRUE(j->record({EntryKind::file, k, "1024"}));
    ASSERT_TRUE(j->record({EntryKind::file, k, "512"}));  // a later value is not the original
    ASSERT_EQ(j->entries().size(), 1u);
    EXPECT_EQ(j->entries()[0].original, "1024");
    EXPECT_TRUE(fs::exists(state / "journal"));
    EXPECT_FALSE(fs::exists(state / "journal.tmp"));
  }
  auto again = Journal::open(state, "boot-2");  // the lock went with the first
  ASSERT_TRUE(again) << again.error().message();
  ASSERT_EQ(again->entries().size(), 1u);
  EXPECT_EQ(again->entries()[0].original, "1024");
  EXPECT_EQ(again->boot_id(), "boot-1");  // the journal's own boot, not the opener's
  ASSERT_TRUE(again->replace({}));
  EXPECT_FALSE(fs::exists(state / "journal"));
}

TEST(Journal, AnUnreadableJournalIsAnErrorNotAnEmptyOne) {
  testing::TempDir t;
  testing::make_tree(t.path(), {{"state/journal", "garbage\n"}});
  auto j = Journal::open(t.path() / "state", "b");
  ASSERT_FALSE(j);
  EXPECT_NE(j.error().message().find("state/journal"), std::string::npos) << j.error().message();
}

}  // namespace
}  // namespace keel::act

namespace keel::act {
namespace {

// Format 2 carries each knob's value kind and its cgroup directory's inode; a format 1 journal (a
// keel from before them, crashed) still restores: the kinds come from the cgroup file table and the
// other knobs' file names.
TEST(Journal, ValueKindsAndInodesRoundTripAndFormatOneStillReads) {
  std::vector<JournalEntry> in{
      {EntryKind::file, {Root::cgroup, "cpuset/a/cpuset.cpus"}, "0-3", ValueKind::cpuset_list, 4242},
      {EntryKind::file, {Root::cgroup, "cpu/a/cpu.idle"}, "0", ValueKind::idle, 17},
      {EntryKind::file, {Root::sys, "class/net/eth0/queues/rx-0/rps_cpus"}, "0", ValueKind::cpu_mask, 0},
  };
  auto out = parse_journal(format_journal("b", in));
  ASSERT_TRUE(out) << out.error().message();
  ASSERT_EQ(out->second.size(), 3u);
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out->second[i].value, in[i].value) << i;
    EXPECT_EQ(out->second[i].dir_inode, in[i].dir_inode) << i;
  }
  EXPECT_TRUE(format_journal("b", in).starts_with("keel-journal 2 "));

  auto old = parse_journal(
      "keel-journal 1 boot_id=b\n"
      "file cgroup cpuset/a/cpus 0-3\n"  // noprefix
      "file cgroup cpu/a/cpu.shares 1024\n"
      "file cgroup cpu/a/cpu.cfs_quota_us -1\n"
      "file proc irq/24/smp_affinity_list 0-7\n"
      "file sys class/net/eth0/queues/tx-0/xps_cpus ff\n"
      "file resctrl schemata L3:0=ff\n"
      "sched_feature debugfs sched/features NO_STEAL\n");
  ASSERT_TRUE(old) << old.error().message();
  std::vector<ValueKind> kinds;
  for (const auto& e : old->second) kinds.push_back(e.value);
  EXPECT_EQ(kinds, (std::vector<ValueKind>{ValueKind::cpuset_list, ValueKind::weight, ValueKind::cfs_quota,
                                           ValueKind::cpu_list, ValueKind::cpu_mask, ValueKind::text,
                                           ValueKind::sched_feature}));
  EXPECT_EQ(old->second[0].dir_inode, 0u);
  EXPECT_FALSE(parse_journal("keel-journal 3 boot_id=b\n"));  // a newer keel's
  EXPECT_FALSE(parse_journal("keel-journal 2 boot_id=b\nfile cgroup cpu/a/cpu.shares nokind 1 1024\n"));
}

// A cgroup removed and made again under its name is another cgroup: its first change journals its own
// original, replacing the gone one's.
TEST(Journal, AKnobOfARecreatedCgroupReplacesTheGoneOnesEntry) {
  testing::TempDir t;
  auto j = Journal::open(t.path() / "state", "b");
  ASSERT_TRUE(j);
  KnobPath k{Root::cgroup, "cpu/job/cpu.shares"};
  ASSERT_TRUE(j->record({EntryKind::file, k, "1024", ValueKind::weight, 100}));
  ASSERT_TRUE(j->record({EntryKind::file, k, "512", ValueKind::weight, 100}));  // same cgroup: kept
  EXPECT_TRUE(j->has(k, 100));
  EXPECT_FALSE(j->has(k, 200));
  ASSERT_TRUE(j->record({EntryKind::file, k, "4096", ValueKind::weight, 200}));
  ASSERT_EQ(j->entries().size(), 1u);
  EXPECT_EQ(j->entries()[0].original, "4096");
  EXPECT_EQ(j->entries()[0].dir_inode, 200u);
}

}  // namespace
}  // namespace keel::act
