// The one table of cgroup files (names on v1, v1 noprefix and v2, controllers, value kinds), the
// shares <-> weight mappings both ways, value comparison by kind, and CgroupDir over temporary trees
// with the kernel's file formats.
#include "host/cgroup_files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <bit>
#include <filesystem>

#include "host/knob_values.h"
#include "tests/support/tmp_tree.h"

namespace keel {
namespace {

namespace fs = std::filesystem;

CgroupHierarchy hier(uint32_t id, bool unified, std::vector<std::string> ctl, fs::path mount,
                     bool noprefix = false) {
  CgroupHierarchy h;
  h.id = id;
  h.unified = unified;
  h.controllers = std::move(ctl);
  h.mount = std::move(mount);
  h.noprefix = noprefix;
  return h;
}

constexpr CgroupFile kAll[] = {
    CgroupFile::procs,     CgroupFile::threads,   CgroupFile::controllers,    CgroupFile::weight,
    CgroupFile::idle,      CgroupFile::cpu_stat,  CgroupFile::usage,          CgroupFile::pressure,
    CgroupFile::cpu_max,   CgroupFile::cfs_quota, CgroupFile::cfs_period,     CgroupFile::burst,
    CgroupFile::cpus,      CgroupFile::mems,      CgroupFile::effective_cpus, CgroupFile::effective_mems,
    CgroupFile::qos_level, CgroupFile::bvt_warp,  CgroupFile::subtree_control};

TEST(CgroupFiles, NamesOnV1V2AndNoprefix) {
  EXPECT_EQ(cgroup_file_name(CgroupFile::weight, false), "cpu.shares");
  EXPECT_EQ(cgroup_file_name(CgroupFile::weight, true), "cpu.weight");
  EXPECT_EQ(cgroup_file_name(CgroupFile::effective_cpus, false), "cpuset.effective_cpus");
  EXPECT_EQ(cgroup_file_name(CgroupFile::effective_cpus, true), "cpuset.cpus.effective");
  EXPECT_EQ(cgroup_file_name(CgroupFile::threads, false), "tasks");
  EXPECT_EQ(cgroup_file_name(CgroupFile::threads, true), "cgroup.threads");
  // noprefix (a cpuset-only v1 mount): controller files lose "cpuset.", core files keep their names.
  EXPECT_EQ(cgroup_file_name(CgroupFile::cpus, false, true), "cpus");
  EXPECT_EQ(cgroup_file_name(CgroupFile::mems, false, true), "mems");
  EXPECT_EQ(cgroup_file_name(CgroupFile::effective_cpus, false, true), "effective_cpus");
  EXPECT_EQ(cgroup_file_name(CgroupFile::procs, false, true), "cgroup.procs");
  EXPECT_EQ(cgroup_file_name(CgroupFile::threads, false, true), "tasks");
  // What a version lacks has no name.
  EXPECT_EQ(cgroup_file_name(CgroupFile::usage, true), "");
  EXPECT_EQ(cgroup_file_name(CgroupFile::cpu_max, false), "");
  EXPECT_EQ(cgroup_file_name(CgroupFile::pressure, false), "");
  EXPECT_EQ(cgroup_file_name(CgroupFile::cfs_quota, true), "");
  EXPECT_EQ(cgroup_file_name(CgroupFile::subtree_control, true), "cgroup.subtree_control");
  EXPECT_EQ(cgroup_file_name(CgroupFile::subtree_control, false), "");
}

TEST(CgroupFiles, EverySpellingNamesItsFile) {
  for (CgroupFile f : kAll)
    for (bool unified : {false, true})
      for (bool noprefix : {false, true}) {
        std::string_view n = cgroup_file_name(f, unified, noprefix);
        if (n.empty()) continue;
        auto back = cgroup_file_named(n);
        ASSERT_TRUE(back) << n;
        EXPECT_EQ(*back, f) << n;
      }
  EXPECT_FALSE(cgroup_file_named("memory.max"));
  EXPECT_FALSE(cgroup_file_named(""));
}

TEST(CgroupFiles, KindsAndControllers) {
  EXPECT_EQ(cgroup_file_kind(CgroupFile::cpus), ValueKind::cpuset_list);
  EXPECT_EQ(cgroup_file_kind(CgroupFile::mems), ValueKind::cpuset_list);
  EXPECT_EQ(cgroup_file_kind(CgroupFile::weight), ValueKind::weight);
  EXPECT_EQ(cgroup_file_kind(CgroupFile::idle), ValueKind::idle);
  EXPECT_EQ(cgroup_file_kind(CgroupFile::cpu_max), ValueKind::bandwidth);
  EXPECT_EQ(cgroup_file_kind(CgroupFile::cfs_quota), ValueKind::cfs_quota);
  EXPECT_EQ(cgroup_file_kind(CgroupFile::cfs_period), ValueKind::cfs_period);
  EXPECT_EQ(cgroup_file_controller(CgroupFile::usage, false), "cpuacct");
  EXPECT_EQ(cgroup_file_controller(CgroupFile::cpu_stat, true), "");  // a core file on v2 (usage_usec)
  EXPECT_EQ(cgroup_file_controller(CgroupFile::procs, false), "");
}

TEST(CgroupFiles, HierarchyForEachFile) {
  CgroupLayout split;  // this machine: cpu, cpuacct and cpuset mounted apart, a cgroup2 without controllers
  split.hierarchies = {hier(1, false, {"cpu"}, "/c/cpu"), hier(2, false, {"cpuacct"}, "/c/cpuacct"),
                       hier(3, false, {"cpuset"}, "/c/cpuset", true), hier(0, true, {}, "/c/unified")};
  const CgroupHierarchy& cpu = split.hierarchies[0];
  EXPECT_EQ(hierarchy_for(split, cpu, CgroupFile::weight), &cpu);
  EXPECT_EQ(hierarchy_for(split, cpu, CgroupFile::usage), &split.hierarchies[1]);
  EXPECT_EQ(hierarchy_for(split, cpu, CgroupFile::cpus), &split.hierarchies[2]);
  EXPECT_EQ(hierarchy_for(split, cpu, CgroupFile::procs), &cpu);
  EXPECT_EQ(hierarchy_for(split, cpu, CgroupFile::cpu_max), nullptr);
  CgroupLayout comounted;
  comounted.hierarchies = {hier(4, false, {"cpu", "cpuacct"}, "/c/cpu,cpuacct")};
  EXPECT_EQ(hierarchy_for(comounted, comounted.hierarchies[0], CgroupFile::usage), &comounted.hierarchies[0]);
  EXPECT_EQ(hierarchy_for(comounted, comounted.hierarchies[0], CgroupFile::cpus), nullptr);
  CgroupLayout v2;
  v2.hierarchies = {hier(0, true, {"cpu", "memory"}, "/c")};
  EXPECT_EQ(hierarchy_for(v2, v2.hierarchies[0], CgroupFile::weight), &v2.hierarchies[0]);
  EXPECT_EQ(hierarchy_for(v2, v2.hierarchies[0], CgroupFile::usage), nullptr);  // cpu.stat has it
  EXPECT_EQ(hierarchy_for(v2, v2.hierarchies[0], CgroupFile::cpu_stat), &v2.hierarchies[0]);
  EXPECT_EQ(hierarchy_for(v2, v2.hierarchies[0], CgroupFile::cpus), nullptr);  // no cpuset controller
}

// ---- shares <-> weight ----

TEST(WeightToShares, WhatKeelWritesReadsBackAsWritten) {
  for (WeightMapping m : {WeightMapping::systemd, WeightMapping::runc})
    for (uint64_t p = kSharesMin; p <= kSharesMax; p *= 2) {
      uint64_t w = shares_to_weight(p, m), back = weight_to_shares(w, m);
      // Where several powers of two share a weight (systemd's 2..16 are all weight 1, and 131072 and
      // 262144 both 10000) the smallest of them is read back; every other one reads back as itself.
      uint64_t q = kSharesMin;
      while (shares_to_weight(q, m) != w) q *= 2;
      EXPECT_EQ(back, q) << "shares " << p << " mapping " << int(m);
    }
  EXPECT_EQ(weight_to_shares(shares_to_weight(32, WeightMapping::systemd), WeightMapping::systemd), 32u);
  EXPECT_EQ(weight_to_shares(shares_to_weight(65536, WeightMapping::systemd), WeightMapping::systemd),
            65536u);
  EXPECT_EQ(weight_to_shares(shares_to_weight(4, WeightMapping::runc), WeightMapping::runc), 4u);
  // The two the old sensing got wrong: runc's 8192 is weight 532 (systemd's inverse made it 5447), and
  // systemd's 128 is weight 12 (weight * 1024 / 100 made it 122).
  EXPECT_EQ(shares_to_weight(8192, WeightMapping::runc), 532u);
  EXPECT_EQ(weight_to_shares(532, WeightMapping::runc), 8192u);
  EXPECT_EQ(shares_to_weight(128, WeightMapping::systemd), 12u);
  EXPECT_EQ(weight_to_shares(12, WeightMapping::systemd), 128u);
  EXPECT_EQ(weight_to_shares(100, WeightMapping::systemd), 1024u);
  EXPECT_EQ(weight_to_shares(100, WeightMapping::runc), 1024u);
}

TEST(WeightToShares, WritingWhatWasReadBackKeepsTheWeight) {
  for (WeightMapping m : {WeightMapping::systemd, WeightMapping::runc}) {
    std::vector<bool> given(kWeightMax + 1, false);  // the weights some shares map to
    for (uint64_t s = kSharesMin; s <= kSharesMax; ++s) given[shares_to_weight(s, m)] = true;
    for (uint64_t w = kWeightMin; w <= kWeightMax; ++w) {
      uint64_t s = weight_to_shares(w, m);
      ASSERT_GE(s, kSharesMin);
      ASSERT_LE(s, kSharesMax);
      uint64_t back = shares_to_weight(s, m);
      if (given[w]) {
        ASSERT_EQ(back, w) << "mapping " << int(m);
      } else {  // a weight the mapping skips (runc's low end): the nearest one it gives
        ASSERT_TRUE(given[back]);
        uint64_t d = 1;  // the distance to the nearest weight it gives
        while (!(w > d && given[w - d]) && !(w + d <= kWeightMax && given[w + d])) ++d;
        ASSERT_EQ(back > w ? back - w : w - back, d) << "weight " << w;
      }
    }
  }
  // Out of range weights clamp.
  EXPECT_EQ(weight_to_shares(0, WeightMapping::systemd), kSharesMin);
  EXPECT_EQ(weight_to_shares(20000, WeightMapping::runc), kSharesMax);
}

// ---- values by kind ----

TEST(KnobValues, SameValueByKind) {
  EXPECT_TRUE(same_value(ValueKind::cpu_list, "0-3\n", "0,1,2,3"));
  EXPECT_TRUE(same_value(ValueKind::cpuset_list, "0-1,4", "0,1,4"));
  EXPECT_FALSE(same_value(ValueKind::cpu_list, "0-3", "0-2"));
  EXPECT_TRUE(same_value(ValueKind::cpu_mask, "00000000,0000000f", "f"));
  EXPECT_TRUE(same_value(ValueKind::integer, "0050", "50"));
  EXPECT_TRUE(same_value(ValueKind::weight, " 100\n", "100"));
  EXPECT_FALSE(same_value(ValueKind::idle, "1", "0"));
  EXPECT_TRUE(same_value(ValueKind::bandwidth, "max 100000\n", "max 100000"));
  EXPECT_FALSE(same_value(ValueKind::bandwidth, "50000 100000", "max 100000"));
  EXPECT_TRUE(same_value(ValueKind::text, "L3:0=ff\n", "L3:0=ff"));
  EXPECT_FALSE(same_value(ValueKind::text, "0-3", "0,1,2,3"));
  // Unparsable values fall back to text.
  EXPECT_TRUE(same_value(ValueKind::integer, "max", "max"));
  EXPECT_FALSE(same_value(ValueKind::cpu_list, "x", "0"));
  // A sched feature token against the features file.
  EXPECT_TRUE(same_value(ValueKind::sched_feature, "GENTLE_FAIR_SLEEPERS NO_STEAL TTWU_QUEUE", "NO_STEAL"));
  EXPECT_FALSE(same_value(ValueKind::sched_feature, "GENTLE_FAIR_SLEEPERS NO_STEAL", "STEAL"));
  EXPECT_FALSE(same_value(ValueKind::sched_feature, "GENTLE_FAIR_SLEEPERS", "STEAL"));
}

TEST(KnobValues, SchedFeatureStateAndKindNames) {
  EXPECT_EQ(sched_feature_state("A NO_STEAL B\n", "STEAL"), false);
  EXPECT_EQ(sched_feature_state("A STEAL B", "STEAL"), true);
  EXPECT_EQ(sched_feature_state("A STEALX NO_STEALY", "STEAL"), std::nullopt);
  for (ValueKind k : {ValueKind::text, ValueKind::integer, ValueKind::cpu_list, ValueKind::cpu_mask,
                      ValueKind::cpuset_list, ValueKind::weight, ValueKind::idle, ValueKind::cfs_quota,
                      ValueKind::cfs_period, ValueKind::bandwidth, ValueKind::sched_feature})
    EXPECT_EQ(parse_value_kind(to_string(k)), k);
  EXPECT_FALSE(parse_value_kind("list"));
}

// ---- CgroupDir ----

TEST(CgroupDirTempTree, ReadsWritesAndIsTheInodeItOpened) {
  testing::TempDir t;
  testing::make_tree(t.path(), {{"cpu/a/cpu.shares", "1024\n"},
                                {"cpu/a/cgroup.procs", "12\n13\n"},
                                {"cpu/a/b/cpu.shares", "2\n"},
                                {"cpu/a/b/cgroup.procs", ""},
                                {"cpuset/x/cpus", "0-3\n"}});
  auto h = std::make_shared<const CgroupHierarchy>(hier(1, false, {"cpu"}, t.path() / "cpu"));
  auto a = CgroupDir::open(h, "/a");
  ASSERT_TRUE(a) << a.error().message();
  struct stat st;
  ASSERT_EQ(::stat((t.path() / "cpu/a").c_str(), &st), 0);
  EXPECT_EQ(a->id(), (CgroupId{1, st.st_ino}));
  EXPECT_EQ(a->read_u64(CgroupFile::weight), 1024u);
  EXPECT_EQ(a->has_tasks(), true);
  ASSERT_TRUE(a->write(CgroupFile::weight, "512"));
  EXPECT_EQ(testing::slurp(t.path() / "cpu/a/cpu.shares"), "512");
  auto b = a->child("b");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->path(), "/a/b");
  EXPECT_EQ(b->has_tasks(), false);
  EXPECT_FALSE(a->child(".."));
  EXPECT_FALSE(a->child("b/../../x"));
  EXPECT_FALSE(a->read(CgroupFile::cpu_max));  // not on v1
  EXPECT_EQ(a->read(CgroupFile::cpu_max).error().err, ENOENT);
  auto root = CgroupDir::open(h, "/");
  ASSERT_TRUE(root);
  EXPECT_EQ(root->file_path(CgroupFile::weight), t.path() / "cpu/cpu.shares");
  EXPECT_FALSE(CgroupDir::open(h, "/nope"));
  EXPECT_FALSE(CgroupDir::open(h, "relative"));
  // noprefix names.
  auto cs = CgroupDir::open(hier(3, false, {"cpuset"}, t.path() / "cpuset", true), "/x");
  ASSERT_TRUE(cs);
  EXPECT_EQ(cs->read(CgroupFile::cpus).value_or(""), "0-3\n");
}

// A cgroup removed and made again under the same name is another cgroup: the held directory never
// reads or writes the new one.
TEST(CgroupDirTempTree, ARecreatedCgroupIsNotTheOneHeld) {
  testing::TempDir t;
  testing::make_tree(t.path(), {{"cpu/job/cpu.shares", "1024\n"}});
  auto h = std::make_shared<const CgroupHierarchy>(hier(1, false, {"cpu"}, t.path() / "cpu"));
  auto old = CgroupDir::open(h, "/job");
  ASSERT_TRUE(old);
  fs::remove_all(t.path() / "cpu/job");
  testing::make_tree(t.path(), {{"cpu/job/cpu.shares", "4096\n"}});
  auto fresh = CgroupDir::open(h, "/job");
  ASSERT_TRUE(fresh);
  EXPECT_NE(fresh->id(), old->id());
  EXPECT_EQ(fresh->read_u64(CgroupFile::weight), 4096u);
  EXPECT_FALSE(old->read(CgroupFile::weight));
  EXPECT_FALSE(old->write(CgroupFile::weight, "2"));
  EXPECT_EQ(testing::slurp(t.path() / "cpu/job/cpu.shares"), "4096\n");
}

}  // namespace
}  // namespace keel
