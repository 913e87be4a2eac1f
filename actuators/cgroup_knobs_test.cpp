// cgroup CPU knobs: the pure parts (weight mappings, cpuset write order, checked against cgroup v1's
// rules by a small simulator), cgroup v2 and v1 trees in temporary directories with the kernel's
// file formats (no cgroup v2 controllers on the development machines), and the real cgroup v1
// cpuset and cpu hierarchies (root only).
#include "actuators/cgroup_knobs.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <random>

#include "actuators/restore.h"
#include "host/fileio.h"
#include "tests/support/scene.h"
#include "tests/support/tmp_tree.h"

namespace keel::act {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::slurp;

CpuSet L(std::string_view list) { return *CpuSet::parse_list(list); }

// ---------------------------------------------------------------------------------------------
// Weight mappings

TEST(WeightMapping, SystemdIsLinearAndRoundsDown) {
  auto s = [](uint64_t shares) { return shares_to_weight(shares, WeightMapping::systemd); };
  EXPECT_EQ(s(2), 1u);  // 2 * 100 / 1024 = 0.19, clamped up to 1
  EXPECT_EQ(s(1024), 100u);
  EXPECT_EQ(s(262144), 10000u);  // 25600, clamped down
  EXPECT_EQ(s(1023), 99u);       // 99.9: systemd divides in integers
  EXPECT_EQ(s(1034), 100u);      // 100.98
  EXPECT_EQ(s(512), 50u);
  EXPECT_EQ(s(102400), 10000u);
  EXPECT_EQ(s(102399), 9999u);
}

TEST(WeightMapping, RuncIsAQuadraticInLog2AndRoundsUp) {
  auto r = [](uint64_t shares) { return shares_to_weight(shares, WeightMapping::runc); };
  EXPECT_EQ(r(2), 1u);
  EXPECT_EQ(r(1024), 100u);
  EXPECT_EQ(r(262144), 10000u);
  // By hand: l = 9 gives 10^((81 + 1125) / 612 - 7/34) = 10^1.7647 = 58.2; l = 11 gives 10^2.2386 = 173.2.
  EXPECT_EQ(r(512), 59u);
  EXPECT_EQ(r(2048), 174u);
  EXPECT_EQ(r(1025), 101u);  // just above the default the ceiling moves up
}

TEST(WeightMapping, BothAreMonotonicAndClampOutsideTheSharesRange) {
  for (WeightMapping m : {WeightMapping::systemd, WeightMapping::runc}) {
    uint64_t prev = 0;
    for (uint64_t shares = 2; shares <= 262144; ++shares) {
      uint64_t w = shares_to_weight(shares, m);
      ASSERT_GE(w, prev) << "shares " << shares;
      ASSERT_GE(w, 1u);
      ASSERT_LE(w, 10000u);
      prev = w;
    }
    EXPECT_EQ(shares_to_weight(0, m), 1u);
    EXPECT_EQ(shares_to_weight(1, m), 1u);
    EXPECT_EQ(shares_to_weight(1000000, m), 10000u);
    EXPECT_EQ(shares_to_weight(UINT64_MAX, m), 10000u);  // no overflow
  }
  // The two differ away from the anchors: runc gives small shares more weight.
  EXPECT_LT(shares_to_weight(100, WeightMapping::systemd), shares_to_weight(100, WeightMapping::runc));
}

// ---------------------------------------------------------------------------------------------
// Cpuset write order (pure), checked by simulating cgroup v1's rules

std::string parent_path(const std::string& p) {
  size_t at = p.rfind('/');
  return at == 0 ? "/" : p.substr(0, at);
}

// The writes, or an error naming every target refused (the tests below give valid targets but here).
Result<std::vector<CpusetWrite>> ordered(const std::map<std::string, CpusetState>& tree,
                                         const std::vector<CpusetTarget>& targets, bool v1) {
  auto o = order_cpuset_writes(tree, targets, v1);
  if (!o) return std::unexpected(o.error());
  std::string refused;
  for (const auto& [cg, why] : o->refused) refused += (refused.empty() ? "" : "; ") + why;
  if (!refused.empty()) return fail(refused);
  return o->writes;
}

// Applies `writes` one by one and checks v1's rules after each: every cpuset inside its parent
// (CPUs and nodes), none with tasks ever empty; at the end every target holds.
::testing::AssertionResult applies_under_v1_rules(std::map<std::string, CpusetState> tree,
                                                  const std::vector<CpusetWrite>& writes,
                                                  const std::vector<CpusetTarget>& targets) {
  auto broken = [&]() -> std::string {
    for (const auto& [path, s] : tree) {
      if (path == "/") continue;
      auto up = tree.find(parent_path(path));
      if (up != tree.end() && (!s.cpus.subset_of(up->second.cpus) || !s.mems.subset_of(up->second.mems)))
        return path + " (" + s.cpus.to_list() + ") outside its parent (" + up->second.cpus.to_list() + ")";
      if (s.populated && (s.cpus.empty() || s.mems.empty())) return path + " has tasks and is empty";
    }
    return {};
  };
  for (size_t i = 0; i < writes.size(); ++i) {
    auto& s = tree.at(writes[i].cgroup);
    (writes[i].mems ? s.mems : s.cpus) = writes[i].value;
    if (auto why = broken(); !why.empty())
      return ::testing::AssertionFailure()
             << "after write " << i << " (" << writes[i].cgroup << " " << (writes[i].mems ? "mems" : "cpus")
             << " = " << writes[i].value.to_list() << "): " << why;
  }
  for (const auto& t : targets) {
    const auto& s = tree.at(t.cgroup);
    if (s.cpus != t.cpus || (t.mems && s.mems != *t.mems))
      return ::testing::AssertionFailure() << t.cgroup << " ends at " << s.cpus.to_list() << " / "
                                           << s.mems.to_list() << ", not the target " << t.cpus.to_list();
  }
  return ::testing::AssertionSuccess();
}

std::map<std::string, CpusetState> three_levels() {
  return {
      {"/", {L("0-3"), L("0"), true}},   {"/p", {L("0-1"), L("0"), true}},
      {"/p/a", {L("0"), L("0"), true}},  {"/p/a/l", {L("0"), L("0"), true}},  // the tasks
      {"/p/b", {L("1"), L("0"), false}}, {"/q", {L("2-3"), L("0"), false}},
  };
}

TEST(CpusetOrder, ThreeLevelsWithMixedGrowAndShrinkKeepV1RulesAtEveryStep) {
  auto tree = three_levels();
  // /p gains 2 and loses 0; its populated leaf moves off CPU 0 onto 1-2; /p/b moves to 2; /q shrinks.
  std::vector<CpusetTarget> targets = {
      {"/p/a/l", L("1-2"), {}}, {"/q", L("3"), {}},     {"/p/b", L("2"), {}},
      {"/p", L("1-2"), {}},     {"/p/a", L("1-2"), {}},
  };
  auto writes = ordered(tree, targets, true);
  ASSERT_TRUE(writes) << writes.error().message();
  EXPECT_TRUE(applies_under_v1_rules(tree, *writes, targets));
  // The parent grows before its children do and shrinks after they did.
  auto index = [&](const std::string& cg, const std::string& value) {
    for (size_t i = 0; i < writes->size(); ++i)
      if ((*writes)[i].cgroup == cg && (*writes)[i].value.to_list() == value) return static_cast<int>(i);
    return -1;
  };
  EXPECT_LT(index("/p", "0-2"), index("/p/a", "0-2"));
  EXPECT_LT(index("/p/a", "0-2"), index("/p/a/l", "0-2"));
  EXPECT_LT(index("/p/a/l", "1-2"), index("/p/a", "1-2"));
  EXPECT_LT(index("/p/a", "1-2"), index("/p", "1-2"));
  EXPECT_LT(index("/p/b", "2"), index("/p", "1-2"));
  for (const auto& w : *writes) EXPECT_FALSE(w.mems) << "mems are not targeted: " << w.cgroup;

  // The checker has teeth: the targets written as given break the rules.
  std::vector<CpusetWrite> naive;
  for (const auto& t : targets) naive.push_back({t.cgroup, false, t.cpus});
  EXPECT_FALSE(applies_under_v1_rules(tree, naive, targets));
}

TEST(CpusetOrder, RandomTreesAndTargetsNeverBreakV1Rules) {
  const std::vector<std::string> nodes = {"/", "/p", "/p/a", "/p/a/l", "/p/b", "/q", "/q/x"};
  std::mt19937 rng(20240607);
  auto subset = [&](const CpuSet& of, bool nonempty) {
    CpuSet s;
    for (unsigned c : of.cpus())
      if (rng() % 10 < 6) s.add(c);
    if (nonempty && s.empty() && !of.empty()) s.add(of.cpus()[rng() % of.count()]);
    return s;
  };
  for (int round = 0; round < 500; ++round) {
    std::map<std::string, CpusetState> tree;
    tree["/"] = {L("0-5"), L("0-1"), false};
    for (size_t i = 1; i < nodes.size(); ++i) {
      const auto& up = tree[parent_path(nodes[i])];
      bool tasks = up.populated ? false : rng() % 3 == 0;  // decided below for ancestors
      tree[nodes[i]] = {subset(up.cpus, false), subset(up.mems, false), tasks};
    }
    // Tasks only where the cpuset can hold them; a cgroup with tasks below it is populated too.
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
      auto& s = tree[*it];
      if (s.cpus.empty() || s.mems.empty()) s.populated = false;
      for (const auto& n : nodes)
        if (n != *it && parent_path(n) == *it && tree[n].populated) s.populated = true;
    }
    std::map<std::string, CpusetState> want = tree;
    std::vector<CpusetTarget> targets;
    for (size_t i = 1; i < nodes.size(); ++i) {
      auto& s = want[nodes[i]];
      const auto& up = want[parent_path(nodes[i])];
      s.cpus = subset(up.cpus, s.populated);
      s.mems = subset(up.mems, s.populated);
      bool same_mems = s.mems == tree[nodes[i]].mems && !tree[nodes[i]].mems.empty();
      targets.push_back(
          {nodes[i], s.cpus, same_mems && rng() % 2 ? std::nullopt : std::optional<CpuSet>(s.mems)});
    }
    std::shuffle(targets.begin(), targets.end(), rng);
    auto writes = ordered(tree, targets, true);
    ASSERT_TRUE(writes) << "round " << round << ": " << writes.error().message();
    ASSERT_TRUE(applies_under_v1_rules(tree, *writes, targets)) << "round " << round;
    for (const auto& w : *writes) {  // at most two writes per knob: grow to the union, shrink to the target
      int n = 0;
      for (const auto& x : *writes) n += x.cgroup == w.cgroup && x.mems == w.mems;
      ASSERT_LE(n, 2) << w.cgroup;
    }
  }
}

TEST(CpusetOrder, RejectsTargetsThatBreakTheRules) {
  auto tree = three_levels();
  auto err = [&](std::vector<CpusetTarget> t, bool v1) {
    auto r = ordered(tree, t, v1);
    return r ? std::string() : r.error().message();
  };
  EXPECT_NE(err({{"/p/a/l", L("0-2"), {}}}, true).find("would not fit in its parent"), std::string::npos);
  EXPECT_NE(err({{"/p/a/l", CpuSet(), {}}}, true).find("has tasks"), std::string::npos);
  EXPECT_NE(err({{"/p/a/l", CpuSet(), {}}}, false).find("has tasks"), std::string::npos);  // v2 too
  EXPECT_NE(err({{"/p/a/l", L("0"), CpuSet()}}, true).find("without memory nodes"), std::string::npos);
  EXPECT_NE(err({{"/", L("0-3"), {}}}, true).find("root"), std::string::npos);
  EXPECT_NE(err({{"/q", L("2"), {}}, {"q/", L("3"), {}}}, true).find("twice"), std::string::npos);
  EXPECT_NE(err({{"/nowhere", L("2"), {}}}, true).find("no cpuset state"), std::string::npos);
  EXPECT_EQ(err({{"/p/b", CpuSet(), {}}}, true), "");     // no tasks: may be emptied
  EXPECT_EQ(err({{"/p/a/l", L("0-2"), {}}}, false), "");  // v2: the kernel intersects with the parent
}

// A tenant's child cpuset (made empty, by clone_children, or one a rule skipped) that would not fit its
// parent's new set used to fail the whole batch ("cpuset /be/kid (cpus 0-3, mems 0) would not fit in
// its parent /be's (cpus 0-1, mems 0)"), every tick, and the critical workload's own change with it.
// Now the descendants are narrowed with their parent, children first, and the critical one gets its CPUs.
TEST(CpusetOrder, ATenantsChildCpusetIsNarrowedWithItsParentAndBlocksNothing) {
  std::map<std::string, CpusetState> tree = {
      {"/", {L("0-3"), L("0"), true}},
      {"/crit", {L("0-3"), L("0"), true}},
      {"/be", {L("0-3"), L("0"), true}},
      {"/be/kid", {L("0-3"), L("0"), false}},
      {"/be/kid/deep", {L("2-3"), L("0"), false}},
      {"/be/job", {L("1-2"), L("0"), true}},
  };
  std::vector<CpusetTarget> t = {{"/crit", L("2-3"), {}}, {"/be", L("0-1"), {}}};
  auto o = order_cpuset_writes(tree, t, true);
  ASSERT_TRUE(o) << o.error().message();
  EXPECT_TRUE(o->refused.empty());
  EXPECT_TRUE(applies_under_v1_rules(tree, o->writes, t));
  std::map<std::string, CpusetState> end = tree;
  for (const auto& w : o->writes) (w.mems ? end[w.cgroup].mems : end[w.cgroup].cpus) = w.value;
  EXPECT_EQ(end["/crit"].cpus, L("2-3"));
  EXPECT_EQ(end["/be"].cpus, L("0-1"));
  EXPECT_EQ(end["/be/kid"].cpus, L("0-1"));       // its own within the parent's
  EXPECT_EQ(end["/be/kid/deep"].cpus, L("0-1"));  // none of its own left: the parent's whole set
  EXPECT_EQ(end["/be/job"].cpus, L("1"));         // its tasks keep the CPU they had that stays
  EXPECT_EQ(o->fitted, (std::vector<std::string>{"/be/job", "/be/kid", "/be/kid/deep"}));

  // Given back: a child keel narrowed widens back to what it had, within its parent's set.
  std::map<std::string, CpusetState> now = end;
  const std::map<std::string, CpusetState> before = {{"/be/kid", {L("0-3"), CpuSet(), false}},
                                                     {"/be/kid/deep", {L("2-3"), CpuSet(), false}}};
  std::vector<CpusetTarget> back = {{"/crit", L("0-3"), {}}, {"/be", L("0-3"), {}}};
  auto b = order_cpuset_writes(now, back, true, before);
  ASSERT_TRUE(b) << b.error().message();
  EXPECT_TRUE(applies_under_v1_rules(now, b->writes, back));
  for (const auto& w : b->writes) (w.mems ? now[w.cgroup].mems : now[w.cgroup].cpus) = w.value;
  EXPECT_EQ(now["/be/kid"].cpus, L("0-3"));
  EXPECT_EQ(now["/be/kid/deep"].cpus, L("2-3"));
  EXPECT_EQ(now["/be/job"].cpus, L("1"));  // not narrowed by keel (no original): as it is
}

// A target the rules refuse is refused alone: the others are written.
TEST(CpusetOrder, ATargetTheRulesRefuseIsLeftOutAloneAndItsChildrenFollow) {
  auto tree = three_levels();
  // /p/a/l (with tasks) emptied: refused; /q shrinks as asked; /p/a's target outside /p's refused too.
  std::vector<CpusetTarget> t = {{"/p/a/l", CpuSet(), {}}, {"/q", L("3"), {}}, {"/p/a", L("0-2"), {}}};
  auto o = order_cpuset_writes(tree, t, true);
  ASSERT_TRUE(o) << o.error().message();
  ASSERT_EQ(o->refused.size(), 2u);
  EXPECT_NE(o->refused.at("/p/a/l").find("has tasks"), std::string::npos);
  EXPECT_NE(o->refused.at("/p/a").find("would not fit in its parent"), std::string::npos);
  ASSERT_EQ(o->writes.size(), 1u);
  EXPECT_EQ(o->writes[0].cgroup, "/q");
  EXPECT_EQ(o->writes[0].value, L("3"));
  // A parent refused (it would not fit its own parent): its child target, valid only inside the new
  // parent, is refused with it.
  auto chain = order_cpuset_writes(tree, {{"/p/a", L("0-2"), {}}, {"/p", L("0-2"), {}}}, true);
  ASSERT_TRUE(chain);
  EXPECT_TRUE(chain->refused.empty()) << "both fit: /p grows within the root";
  tree["/"].cpus = L("0-1");
  tree.erase("/q");
  chain = order_cpuset_writes(tree, {{"/p/a", L("0-2"), {}}, {"/p", L("0-2"), {}}}, true);
  ASSERT_TRUE(chain);
  EXPECT_EQ(chain->refused.size(), 2u);
  EXPECT_TRUE(chain->writes.empty());
}

TEST(CpusetOrder, AV1CpusetWithoutMemsGetsItsParentsAndV2WritesEachChangeOnce) {
  std::map<std::string, CpusetState> tree = {
      {"/", {L("0-3"), L("0-1"), true}},
      {"/k", {L("0-3"), L("1"), false}},
      {"/k/new", {CpuSet(), CpuSet(), false}},
      {"/k/new/leaf", {CpuSet(), CpuSet(), false}},
  };
  std::vector<CpusetTarget> t = {{"/k/new/leaf", L("2"), {}}, {"/k/new", L("2-3"), {}}};
  auto w = ordered(tree, t, true);
  ASSERT_TRUE(w) << w.error().message();
  ASSERT_TRUE(applies_under_v1_rules(tree, *w, t));
  ASSERT_EQ(w->size(), 4u);
  EXPECT_EQ((*w)[1].cgroup, "/k/new");
  EXPECT_TRUE((*w)[1].mems);
  EXPECT_EQ((*w)[1].value, L("1"));  // the parent's node, not the host's 0-1
  EXPECT_EQ((*w)[3].cgroup, "/k/new/leaf");
  EXPECT_EQ((*w)[3].value, L("1"));

  // v2: a mixed change widens to the union first (see below), and empty mems stay empty (inherit).
  tree["/k/new"].cpus = L("0");
  auto v2 = ordered(tree, {{"/k/new", L("3"), {}}}, false);
  ASSERT_TRUE(v2) << v2.error().message();
  ASSERT_EQ(v2->size(), 2u);
  EXPECT_EQ((*v2)[0].value, L("0,3"));
  EXPECT_EQ((*v2)[1].value, L("3"));
}

// v2 on kernels before 6.1 (5.15: cpuset's validate_change) refuses a parent's cpuset.cpus that does not
// hold each child's own set (EBUSY); a child's set beyond its parent's is no error, and not set ("")
// is no set of its own. Random trees and targets: no write breaks that, whatever order they are given
// in, and every target ends as asked. Without the order (each target written once, as given) the
// rule breaks.
TEST(CpusetOrder, V2NeverNarrowsAParentBelowAChildsOwnSet) {
  const std::vector<std::string> nodes = {"/", "/p", "/p/a", "/p/a/l", "/p/b", "/q", "/q/x"};
  auto breaks = [&](std::map<std::string, CpusetState> tree, const std::vector<CpusetWrite>& writes) {
    for (const auto& w : writes) {
      if (!w.mems && !w.value.empty())
        for (const auto& [child, cs] : tree)
          if (child != "/" && parent_path(child) == w.cgroup && !cs.cpus.empty() &&
              !cs.cpus.subset_of(w.value))
            return w.cgroup + " = " + w.value.to_list() + " below " + child + "'s " + cs.cpus.to_list();
      (w.mems ? tree[w.cgroup].mems : tree[w.cgroup].cpus) = w.value;
    }
    return std::string();
  };
  std::mt19937 rng(515);
  int naive_broke = 0;
  for (int round = 0; round < 500; ++round) {
    std::map<std::string, CpusetState> tree;
    tree["/"] = {L("0-5"), L("0"), true};
    auto some = [&] {
      CpuSet s;
      if (rng() % 4 == 0) return s;  // not set
      for (unsigned c = 0; c < 6; ++c)
        if (rng() % 2) s.add(c);
      return s;
    };
    // A state the kernel could be in: each set holds its children's own sets.
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
      if (*it == "/") continue;
      CpuSet s = some();
      for (const auto& [child, cs] : tree)
        if (parent_path(child) == *it && !s.empty()) s |= cs.cpus;
      tree[*it] = {s, CpuSet(), false};
    }
    std::vector<CpusetTarget> targets;
    std::map<std::string, CpuSet> want;
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
      if (*it == "/" || rng() % 3 == 0) continue;
      CpuSet s = some();
      for (const auto& [child, cs] : want)
        if (parent_path(child) == *it && !s.empty()) s |= cs;
      for (const auto& [child, cs] : tree)
        if (parent_path(child) == *it && !want.contains(child) && !s.empty()) s |= cs.cpus;
      want[*it] = s;
      targets.push_back({*it, s, {}});
    }
    std::shuffle(targets.begin(), targets.end(), rng);
    auto writes = ordered(tree, targets, false);
    ASSERT_TRUE(writes) << "round " << round << ": " << writes.error().message();
    ASSERT_EQ(breaks(tree, *writes), "") << "round " << round;
    std::map<std::string, CpusetState> end = tree;
    for (const auto& w : *writes) (w.mems ? end[w.cgroup].mems : end[w.cgroup].cpus) = w.value;
    for (const auto& t : targets)
      ASSERT_EQ(end[t.cgroup].cpus, t.cpus) << "round " << round << " " << t.cgroup;
    std::vector<CpusetWrite> naive;
    for (const auto& t : targets)
      if (t.cpus != tree[t.cgroup].cpus) naive.push_back({t.cgroup, false, t.cpus});
    naive_broke += !breaks(tree, naive).empty();
  }
  EXPECT_GT(naive_broke, 0) << "the checker has teeth";
}

// ---------------------------------------------------------------------------------------------
// Temporary trees with the kernel's files

std::map<std::string, std::string> snapshot(const fs::path& root) {
  std::map<std::string, std::string> m;
  for (auto& e : fs::recursive_directory_iterator(root))
    if (e.is_regular_file() && e.path().parent_path().filename() != "state")
      m[e.path().lexically_relative(root).string()] = slurp(e.path());
  return m;
}

// A cgroup v2 host: /kubepods with /kubepods/be (tasks) and /kubepods/guaranteed (none).
class CgroupV2Tree : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::pair<std::string, std::string>> files = {
        {"proc/sys/kernel/random/boot_id", "11111111-2222\n"},
        {"sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n"},
        {"sys/fs/cgroup/cgroup.procs", "1\n"},
        {"sys/fs/cgroup/cpuset.cpus.effective", "0-7\n"},
        {"sys/fs/cgroup/cpuset.mems.effective", "0-1\n"},
    };
    for (std::string cg : {"kubepods", "kubepods/be", "kubepods/guaranteed"}) {
      auto f = testing::cgroup_v2_files("sys/fs/cgroup/" + cg, cg == "kubepods/be" ? "4242\n4243\n" : "",
                                        cg == "kubepods" ? "" : "0-7", "0-7", "0-1");
      files.insert(files.end(), f.begin(), f.end());
    }
    testing::make_tree(t_.path(), files);
    roots_ = SysRoots::under(t_.path());
    h_.id = 0;
    h_.unified = true;
    h_.controllers = {"cpuset", "cpu", "io", "memory", "pids"};
    h_.mount = roots_.cgroup;
  }
  std::string file(const std::string& rel) { return slurp(roots_.cgroup / rel); }
  void put(const std::string& rel, const std::string& v) { testing::make_tree(roots_.cgroup, {{rel, v}}); }
  Journal journal() {
    auto j = Journal::open(t_.path() / "state", read_boot_id(roots_.proc));
    EXPECT_TRUE(j) << j.error().message();
    return std::move(*j);
  }
  testing::TempDir t_;
  SysRoots roots_;
  CgroupHierarchy h_;
};

TEST_F(CgroupV2Tree, KnobPathsAreRelativeToTheCgroupRoot) {
  auto k = cgroup_knob(roots_, h_, "/kubepods/be", "cpu.weight");
  ASSERT_TRUE(k) << k.error().message();
  EXPECT_EQ(k->str(), "cgroup:kubepods/be/cpu.weight");
  EXPECT_EQ(k->abs(roots_), roots_.cgroup / "kubepods/be/cpu.weight");
  EXPECT_EQ(cgroup_knob(roots_, h_, "kubepods//be/", "cpu.weight")->str(), "cgroup:kubepods/be/cpu.weight");

  CgroupHierarchy v1{
      3, false, {"cpuset"}, roots_.cgroup / "cpuset", "/"};  // hybrid: one mount per controller
  EXPECT_EQ(cgroup_knob(roots_, v1, "/kubepods", "cpuset.cpus")->str(), "cgroup:cpuset/kubepods/cpuset.cpus");
  EXPECT_EQ(cgroup_knob(roots_, v1, "/", "cpuset.cpus")->str(), "cgroup:cpuset/cpuset.cpus");

  EXPECT_FALSE(cgroup_knob(roots_, h_, "/kubepods/../../etc", "passwd"));
  EXPECT_FALSE(cgroup_knob(roots_, h_, "/kubepods", "be/cpu.weight"));
  CgroupHierarchy elsewhere{4, false, {"cpu"}, t_.path() / "other", "/"};
  auto outside = cgroup_knob(roots_, elsewhere, "/a", "cpu.shares");
  ASSERT_FALSE(outside);
  EXPECT_NE(outside.error().message().find("not mounted under"), std::string::npos);
}

TEST_F(CgroupV2Tree, WritesEveryKnobAndRestoreGivesEachBack) {
  auto before = snapshot(t_.path());
  {
    Journal j = journal();
    KnobWriter w(roots_, Mode::enforce, &j);
    auto cs =
        apply_cpusets(w, h_, {{"/kubepods/be", L("0-3"), {}}, {"/kubepods/guaranteed", L("4-7"), L("1")}});
    ASSERT_TRUE(cs) << cs.error().message();
    ASSERT_EQ(cs->size(), 2u);
    EXPECT_TRUE((*cs)[0].changed);
    EXPECT_EQ(file("kubepods/be/cpuset.cpus"), "0-3");
    EXPECT_EQ(file("kubepods/guaranteed/cpuset.cpus"), "4-7");
    EXPECT_EQ(file("kubepods/guaranteed/cpuset.mems"), "1");
    EXPECT_EQ(file("kubepods/be/cpuset.mems"), "\n");  // v2: empty mems inherit, left alone

    auto weight = set_cpu_weight(w, h_, "/kubepods/be", 512);
    ASSERT_TRUE(weight) << weight.error().message();
    EXPECT_TRUE(*weight);
    EXPECT_EQ(file("kubepods/be/cpu.weight"), "50");  // systemd: 512 * 100 / 1024
    ASSERT_TRUE(set_cpu_weight(w, h_, "/kubepods/guaranteed", 512, WeightMapping::runc));
    EXPECT_EQ(file("kubepods/guaranteed/cpu.weight"), "59");

    auto quota = set_cpu_quota(w, h_, "/kubepods/be", 50ms, 100ms);
    ASSERT_TRUE(quota) << quota.error().message();
    EXPECT_EQ(file("kubepods/be/cpu.max"), "50000 100000");
    ASSERT_TRUE(set_cpu_quota(w, h_, "/kubepods/be", 20ms, 50ms));
    EXPECT_EQ(file("kubepods/be/cpu.max"), "20000 50000");

    auto idle = set_cpu_idle(w, h_, "/kubepods/be", true);  // after its weight
    ASSERT_TRUE(idle) << idle.error().message();
    EXPECT_TRUE(*idle);
    EXPECT_EQ(file("kubepods/be/cpu.idle"), "1");
    EXPECT_EQ(j.entries().size(), 7u);  // be: cpus, weight, max, idle; guaranteed: cpus, mems, weight
  }
  Journal j = journal();
  auto rep = restore(roots_, j);
  ASSERT_TRUE(rep.failed.empty()) << rep.failed[0].message();
  auto after = snapshot(t_.path());
  for (const auto& [path, content] : before) EXPECT_EQ(trim(after[path]), trim(content)) << path;
  EXPECT_TRUE(j.entries().empty());
}

TEST_F(CgroupV2Tree, MakingAGroupIdleJournalsItsWeightWhichTheKernelChanges) {
  {
    Journal j = journal();
    KnobWriter w(roots_, Mode::enforce, &j);
    put("kubepods/guaranteed/cpu.weight", "250\n");
    ASSERT_TRUE(set_cpu_idle(w, h_, "/kubepods/guaranteed", true));
    put("kubepods/guaranteed/cpu.weight", "1\n");  // what the kernel shows for an idle group
  }
  Journal j = journal();
  auto rep = restore(roots_, j);
  ASSERT_TRUE(rep.failed.empty()) << rep.failed[0].message();
  EXPECT_EQ(trim(file("kubepods/guaranteed/cpu.idle")), "0");
  EXPECT_EQ(trim(file("kubepods/guaranteed/cpu.weight")), "250");
}

TEST_F(CgroupV2Tree, ObserveModeComputesEveryWriteAndChangesNoByte) {
  put("kubepods/guaranteed/cpu.idle", "1\n");
  auto before = snapshot(t_.path());
  KnobWriter w(roots_, Mode::observe, nullptr);
  auto cs = apply_cpusets(w, h_, {{"/kubepods/be", L("0-3"), {}}, {"/kubepods/guaranteed", L("4-7"), {}}});
  ASSERT_TRUE(cs) << cs.error().message();
  EXPECT_EQ((*cs)[0].effective, L("0-3"));  // observe: the target
  ASSERT_TRUE(set_cpu_weight(w, h_, "/kubepods/be", 2048));
  ASSERT_TRUE(set_cpu_quota(w, h_, "/kubepods/be", 30ms));
  ASSERT_TRUE(set_cpu_idle(w, h_, "/kubepods/be", true));
  // An idle group's weight: the observed cpu.idle=0 comes first, so the weight is accepted.
  ASSERT_TRUE(set_cpu_idle(w, h_, "/kubepods/guaranteed", false));
  auto weight = set_cpu_weight(w, h_, "/kubepods/guaranteed", 4096);
  ASSERT_TRUE(weight) << weight.error().message();

  EXPECT_EQ(snapshot(t_.path()), before);  // byte for byte
  EXPECT_FALSE(fs::exists(t_.path() / "state"));
  std::vector<std::pair<std::string, std::string>> want = {
      {"cgroup:kubepods/be/cpuset.cpus", "0-3"},
      {"cgroup:kubepods/guaranteed/cpuset.cpus", "4-7"},
      {"cgroup:kubepods/be/cpu.weight", "200"},
      {"cgroup:kubepods/be/cpu.max", "30000 100000"},
      {"cgroup:kubepods/be/cpu.idle", "1"},
      {"cgroup:kubepods/guaranteed/cpu.idle", "0"},
      {"cgroup:kubepods/guaranteed/cpu.weight", "400"},
  };
  ASSERT_EQ(w.changes().size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(w.changes()[i].path.str(), want[i].first);
    EXPECT_EQ(w.changes()[i].to, want[i].second);
    EXPECT_FALSE(w.changes()[i].written);
  }
  EXPECT_EQ(w.changes()[0].from, "0-7");
}

TEST_F(CgroupV2Tree, InvalidValuesAreErrorsThatWriteNothing) {
  put("kubepods/guaranteed/cpu.max.burst", "20000\n");
  auto before = snapshot(t_.path());
  Journal j = journal();
  KnobWriter w(roots_, Mode::enforce, &j);
  auto expect_error = [&](auto r, std::string_view words) {
    ASSERT_FALSE(r) << "accepted; wanted an error with '" << words << "'";
    EXPECT_NE(r.error().message().find(words), std::string::npos) << r.error().message();
  };
  // A valid target first: a bad one later in the same call still means no write at all.
  expect_error(apply_cpusets(w, h_, {{"/kubepods/be", L("0-3"), {}}, {"/kubepods/guaranteed", L("6-9"), {}}}),
               "CPUs 8-9 are not on this host (0-7)");
  expect_error(apply_cpusets(w, h_, {{"/kubepods/be", L("0-3"), {}}}, L("4-7")),
               "CPUs 0-3 are not on this host");
  expect_error(apply_cpusets(w, h_, {{"/kubepods/guaranteed", L("1"), L("2")}}), "memory nodes 2");
  // The rules refuse a target alone (the others are written: ATargetTheRulesRefuse... above).
  auto expect_refused = [&](auto r, std::string_view words) {
    ASSERT_TRUE(r) << r.error().message();
    ASSERT_EQ(r->size(), 1u);
    EXPECT_NE(r->front().refused.find(words), std::string::npos) << "'" << r->front().refused << "'";
    EXPECT_FALSE(r->front().changed);
  };
  expect_refused(apply_cpusets(w, h_, {{"/kubepods/be", CpuSet(), {}}}),
                 "cannot take every CPU from /kubepods/be");
  expect_refused(apply_cpusets(w, h_, {{"/kubepods", CpuSet(), {}}}), "below it");  // tasks in a child
  expect_error(apply_cpusets(w, h_, {{"/kubepods/nowhere", L("1"), {}}}), "no such cgroup");
  expect_error(apply_cpusets(w, h_, {{"/", L("1"), {}}}), "root");
  expect_error(set_cpu_weight(w, h_, "/kubepods/be", 1), "outside [2, 262144]");
  expect_error(set_cpu_weight(w, h_, "/kubepods/be", 262145), "outside [2, 262144]");
  expect_error(set_cpu_weight(w, h_, "/kubepods/../x", 1024), "'..'");
  expect_error(set_cpu_quota(w, h_, "/kubepods/be", 999us, 100ms), "outside [1000,");
  expect_error(set_cpu_quota(w, h_, "/kubepods/be", 10ms, 999us), "period 999 us");
  expect_error(set_cpu_quota(w, h_, "/kubepods/be", 10ms, 1000001us), "period 1000001 us");
  expect_error(set_cpu_quota(w, h_, "/kubepods/guaranteed", 10ms, 100ms), "below its burst (20000 us)");
  put("kubepods/be/cpu.idle", "1\n");
  before["sys/fs/cgroup/kubepods/be/cpu.idle"] = "1\n";
  expect_error(set_cpu_weight(w, h_, "/kubepods/be", 2048), "set cpu.idle=0 first");
  CgroupHierarchy no_cpu = h_;
  no_cpu.controllers = {"memory"};
  expect_error(set_cpu_idle(w, no_cpu, "/kubepods/be", false), "no cpu controller");
  expect_error(apply_cpusets(w, no_cpu, {{"/kubepods/be", L("1"), {}}}), "no cpuset controller");

  EXPECT_EQ(snapshot(t_.path()), before);
  EXPECT_TRUE(j.entries().empty());
  EXPECT_TRUE(w.changes().empty());
}

TEST_F(CgroupV2Tree, ValuesAlreadyInPlaceAreNotWritten) {
  put("kubepods/be/cpuset.cpus", "0,1,2,3\n");  // the same set, written differently
  put("kubepods/be/cpu.weight", "59\n");
  Journal j = journal();
  KnobWriter w(roots_, Mode::enforce, &j);
  auto cs = apply_cpusets(w, h_, {{"/kubepods/be", L("0-3"), {}}});
  ASSERT_TRUE(cs) << cs.error().message();
  EXPECT_FALSE((*cs)[0].changed);
  EXPECT_EQ(set_cpu_weight(w, h_, "/kubepods/be", 512, WeightMapping::runc), false);
  EXPECT_EQ(set_cpu_quota(w, h_, "/kubepods/be", std::nullopt), false);  // "max 100000"
  EXPECT_EQ(set_cpu_idle(w, h_, "/kubepods/be", false), false);
  EXPECT_TRUE(j.entries().empty());
  EXPECT_TRUE(w.changes().empty());
  EXPECT_EQ(file("kubepods/be/cpuset.cpus"), "0,1,2,3\n");
}

TEST_F(CgroupV2Tree, ReportsTheCpusTheKernelGrantedAndEmptiesACgroupWithoutTasks) {
  // The kernel intersects with the parent's: simulated by the effective file it would show.
  put("kubepods/guaranteed/cpuset.cpus.effective", "2-3\n");
  Journal j = journal();
  KnobWriter w(roots_, Mode::enforce, &j);
  auto cs = apply_cpusets(w, h_, {{"/kubepods/guaranteed", L("2-5"), {}}});
  ASSERT_TRUE(cs) << cs.error().message();
  EXPECT_EQ((*cs)[0].effective, L("2-3"));
  auto empty = apply_cpusets(w, h_, {{"/kubepods/guaranteed", CpuSet(), {}}});
  ASSERT_TRUE(empty) << empty.error().message();
  EXPECT_EQ(file("kubepods/guaranteed/cpuset.cpus"), "\n");  // a newline: kernfs ignores a 0-byte write
}

// Tasks far below a cgroup (a tenant's tree, its path past PATH_MAX) keep it from being emptied: the
// search for them is bounded (host/cgroup.h) and what lies beyond the bound counts as holding tasks
// (the recursive search stopped at PATH_MAX and called the cgroup empty).
TEST_F(CgroupV2Tree, TasksBelowTheWalksBoundsKeepACgroupFromBeingEmptied) {
  ASSERT_TRUE(testing::make_deep_chain(roots_.cgroup / "kubepods/guaranteed", 45, std::string(100, 'n'),
                                       "cgroup.procs", "4242\n"));
  Journal j = journal();
  KnobWriter w(roots_, Mode::enforce, &j);
  auto empty = apply_cpusets(w, h_, {{"/kubepods/guaranteed", CpuSet(), {}}});
  ASSERT_TRUE(empty) << empty.error().message();
  EXPECT_NE(empty->front().refused.find("has tasks"), std::string::npos) << empty->front().refused;
  EXPECT_EQ(file("kubepods/guaranteed/cpuset.cpus"), "0-7\n");
}

// A cgroup v1 host in a tree: the cpu hierarchy, and a cpuset hierarchy mounted with noprefix.
class CgroupV1Tree : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::vector<std::pair<std::string, std::string>> files = {
        {"sys/fs/cgroup/cpu/cpu.shares", "1024\n"},
        {"sys/fs/cgroup/cpu/job/cpu.shares", "1024\n"},
        {"sys/fs/cgroup/cpu/job/cpu.cfs_quota_us", "-1\n"},
        {"sys/fs/cgroup/cpu/job/cpu.cfs_period_us", "100000\n"},
        {"sys/fs/cgroup/cpu/job/cpu.cfs_burst_us", "0\n"},
        {"sys/fs/cgroup/cpu/job/cpu.idle", "0\n"},
        {"sys/fs/cgroup/cpuset/cpus", "0-3\n"},
        {"sys/fs/cgroup/cpuset/mems", "0\n"},
        {"sys/fs/cgroup/cpuset/tasks", "1\n"},
        {"sys/fs/cgroup/cpuset/new/cpus", "\n"},
        {"sys/fs/cgroup/cpuset/new/mems", "\n"},
        {"sys/fs/cgroup/cpuset/new/effective_cpus", "\n"},
        {"sys/fs/cgroup/cpuset/new/cgroup.procs", ""},
        {"sys/fs/cgroup/cpuset/new/tasks", ""},
    };
    testing::make_tree(t_.path(), files);
    roots_ = SysRoots::under(t_.path());
    cpu_ = {1, false, {"cpu"}, roots_.cgroup / "cpu", "/"};
    cpuset_ = {3, false, {"cpuset"}, roots_.cgroup / "cpuset", "/", /*noprefix=*/true};
  }
  // The v1 bandwidth writes (file=value) going from `from` (quota, period) to `to`.
  std::vector<std::string> steps(const std::string& quota, const std::string& period,
                                 std::optional<std::chrono::microseconds> q, std::chrono::microseconds p) {
    testing::make_tree(roots_.cgroup,
                       {{"cpu/job/cpu.cfs_quota_us", quota}, {"cpu/job/cpu.cfs_period_us", period}});
    KnobWriter w(roots_, Mode::observe, nullptr);
    auto r = set_cpu_quota(w, cpu_, "/job", q, p);
    EXPECT_TRUE(r) << r.error().message();
    std::vector<std::string> out;
    for (const auto& c : w.changes()) out.push_back(c.path.rel.filename().string() + "=" + c.to);
    return out;
  }
  testing::TempDir t_;
  SysRoots roots_;
  CgroupHierarchy cpu_, cpuset_;
};

TEST_F(CgroupV1Tree, QuotaAndPeriodAreWrittenInAnOrderTheKernelAccepts) {
  using V = std::vector<std::string>;
  // From no limit: the period first, then the limit.
  EXPECT_EQ(steps("-1", "100000", 50ms, 200ms), (V{"cpu.cfs_period_us=200000", "cpu.cfs_quota_us=50000"}));
  // To no limit: the limit off first.
  EXPECT_EQ(steps("50000", "100000", std::nullopt, 200ms),
            (V{"cpu.cfs_quota_us=-1", "cpu.cfs_period_us=200000"}));
  // Quota down, period up (0.5 -> 0.2): period first passes 0.25, between old and new.
  EXPECT_EQ(steps("50000", "100000", 40ms, 200ms), (V{"cpu.cfs_period_us=200000", "cpu.cfs_quota_us=40000"}));
  // Both up (0.4 -> 0.4): either order passes 0.16 or 1.0, which a parent at 0.4 or a child at 0.4
  // refuses; the limit comes off for the switch.
  EXPECT_EQ(steps("40000", "100000", 100ms, 250ms),
            (V{"cpu.cfs_quota_us=-1", "cpu.cfs_period_us=250000", "cpu.cfs_quota_us=100000"}));
  // Only the quota: one write.
  EXPECT_EQ(steps("40000", "100000", 60ms, 100ms), (V{"cpu.cfs_quota_us=60000"}));
  EXPECT_EQ(steps("40000", "100000", 40ms, 100ms), V{});
}

TEST_F(CgroupV1Tree, NoprefixCpusetGetsItsParentsMemsAndSharesAreWrittenAsIs) {
  Journal j = *Journal::open(t_.path() / "state", "boot");
  KnobWriter w(roots_, Mode::enforce, &j);
  auto cs = apply_cpusets(w, cpuset_, {{"/new", L("2-3"), {}}});
  ASSERT_TRUE(cs) << cs.error().message();
  EXPECT_EQ(slurp(roots_.cgroup / "cpuset/new/cpus"), "2-3");
  EXPECT_EQ(slurp(roots_.cgroup / "cpuset/new/mems"), "0");
  EXPECT_EQ(w.changes().size(), 2u);
  auto weight = set_cpu_weight(w, cpu_, "/job", 512, WeightMapping::runc);  // v1: no mapping
  ASSERT_TRUE(weight) << weight.error().message();
  EXPECT_EQ(slurp(roots_.cgroup / "cpu/job/cpu.shares"), "512");
  auto bad = apply_cpusets(w, cpuset_, {{"/new", L("4"), {}}});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("CPUs 4 are not on this host (0-3)"), std::string::npos);
}

// Churn: a cgroup the caller held open is removed before its cpuset is written (the inventory saw it,
// the tenant removed it). That target is left out, said in `gone`, and the others are applied: before,
// the whole batch failed with "cannot open: No such file or directory" and keel logged an error.
TEST_F(CgroupV1Tree, ATargetRemovedMeanwhileIsLeftOutAndTheRestApplied) {
  testing::make_tree(roots_.cgroup, {{"cpuset/went/cpus", "\n"},
                                     {"cpuset/went/mems", "\n"},
                                     {"cpuset/went/cgroup.procs", ""},
                                     {"cpuset/went/tasks", ""}});
  auto held_new = CgroupDir::open(cpuset_, "/new");
  auto held_went = CgroupDir::open(cpuset_, "/went");
  ASSERT_TRUE(held_new && held_went);
  EXPECT_FALSE(held_went->removed());
  fs::remove_all(roots_.cgroup / "cpuset/went");
  EXPECT_TRUE(held_went->removed());
  EXPECT_FALSE(held_new->removed());

  Journal j = *Journal::open(t_.path() / "state", "boot");
  KnobWriter w(roots_, Mode::enforce, &j);
  auto cs =
      apply_cpusets(w, cpuset_, {{"/went", L("1"), {}, &*held_went}, {"/new", L("2-3"), {}, &*held_new}});
  ASSERT_TRUE(cs) << cs.error().message();
  ASSERT_EQ(cs->size(), 2u);
  EXPECT_TRUE((*cs)[0].gone);
  EXPECT_FALSE((*cs)[0].changed);
  EXPECT_FALSE((*cs)[1].gone);
  EXPECT_TRUE((*cs)[1].changed);
  EXPECT_EQ(slurp(roots_.cgroup / "cpuset/new/cpus"), "2-3");
  for (const auto& c : w.changes()) EXPECT_EQ(c.path.str().find("went"), std::string::npos) << c.path.str();

  // Not held: a target named by a path that has no cgroup is still the caller's error.
  auto named = apply_cpusets(w, cpuset_, {{"/went", L("1"), {}}});
  ASSERT_FALSE(named);
  EXPECT_NE(named.error().message().find("no such cgroup"), std::string::npos) << named.error().message();
}

// A cgroup replaced by another of the same name (removed and made again) is removed for what held the
// first one.
TEST_F(CgroupV1Tree, ACgroupReplacedUnderItsNameCountsAsRemoved) {
  auto held = CgroupDir::open(cpuset_, "/new");
  ASSERT_TRUE(held);
  fs::rename(roots_.cgroup / "cpuset/new", roots_.cgroup / "cpuset/old");
  fs::create_directory(roots_.cgroup / "cpuset/new");
  EXPECT_TRUE(held->removed());
  fs::remove(roots_.cgroup / "cpuset/new");
  fs::rename(roots_.cgroup / "cpuset/old", roots_.cgroup / "cpuset/new");
  EXPECT_FALSE(held->removed());
}

TEST_F(CgroupV1Tree, ObserveModeAcceptsACgroupNotMadeYetAndEnforceRefusesIt) {
  auto before = snapshot(t_.path());
  KnobWriter w(roots_, Mode::observe, nullptr);
  auto cs = apply_cpusets(w, cpuset_, {{"/later", L("2-3"), {}}});
  ASSERT_TRUE(cs) << cs.error().message();
  auto q = set_cpu_quota(w, cpu_, "/later", 50ms);
  ASSERT_TRUE(q) << q.error().message();
  auto idle = set_cpu_idle(w, cpu_, "/later", true);
  ASSERT_TRUE(idle) << idle.error().message();
  std::vector<std::string> got;
  for (const auto& c : w.changes()) got.push_back(c.path.str() + "=" + c.to);
  EXPECT_EQ(got, (std::vector<std::string>{"cgroup:cpuset/later/cpus=2-3", "cgroup:cpuset/later/mems=0",
                                           "cgroup:cpu/later/cpu.cfs_quota_us=50000",
                                           "cgroup:cpu/later/cpu.idle=1"}));
  EXPECT_EQ(snapshot(t_.path()), before);

  Journal j = *Journal::open(t_.path() / "state", "");
  KnobWriter e(roots_, Mode::enforce, &j);
  auto cs_e = apply_cpusets(e, cpuset_, {{"/later", L("2-3"), {}}});
  ASSERT_FALSE(cs_e);
  EXPECT_EQ(cs_e.error().err, ENOENT) << cs_e.error().message();
  for (auto r : {set_cpu_quota(e, cpu_, "/later", 50ms), set_cpu_idle(e, cpu_, "/later", true)}) {
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().err, ENOENT) << r.error().message();
  }
  EXPECT_TRUE(j.entries().empty());
}

// ---------------------------------------------------------------------------------------------
// Real cgroup v1 hierarchies (root)

// Cgroups and processes a test made, removed in reverse (processes first) even when it fails.
class Scratch {
 public:
  explicit Scratch(fs::path mount) : mount_(std::move(mount)) {}
  ~Scratch() {
    for (pid_t p : pids_) {
      ::kill(p, SIGKILL);
      ::waitpid(p, nullptr, 0);
    }
    for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it)
      for (int tries = 0; tries < 50 && ::rmdir(it->c_str()) != 0 && errno == EBUSY; ++tries) ::usleep(20000);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  fs::path make(const std::string& cg) {
    fs::path p = mount_ / cg.substr(1);
    if (::mkdir(p.c_str(), 0755) == 0)
      dirs_.push_back(p);
    else
      ADD_FAILURE() << "mkdir " << p << ": " << std::strerror(errno);
    return p;
  }
  // A sleeping child process (not a thread of the test), to populate a cgroup.
  pid_t sleeper() {
    pid_t p = ::fork();
    if (p == 0) {
      for (;;) ::pause();
    }
    if (p > 0) pids_.push_back(p);
    return p;
  }
  fs::path path(const std::string& cg) const { return mount_ / cg.substr(1); }

 private:
  fs::path mount_;
  std::vector<fs::path> dirs_;
  std::vector<pid_t> pids_;
};

std::string value(const fs::path& f) {
  auto s = read_file(f);
  return s ? std::string(trim(*s)) : "(unreadable: " + s.error().message() + ")";
}

CpuSet cpus_of(const fs::path& dir) { return *CpuSet::parse_list(value(dir / "cpuset.cpus")); }

int write_errno(const fs::path& f, std::string_view v) {
  auto r = write_file(f, v);
  return r ? 0 : r.error().err;
}

TEST(CgroupV1Actuators, NestedCpusetsResizeInBothDirectionsAndRestoreGivesThemBack) {
  KEEL_REQUIRE_ROOT();
  auto layout = discover(SysRoots::host());
  ASSERT_TRUE(layout) << layout.error().message();
  const CgroupHierarchy* h = layout->v1_with("cpuset");
  if (h == nullptr) GTEST_SKIP() << "skipped: no cgroup v1 cpuset hierarchy on this host";
  CpuSet host = cpus_of(h->mount);
  if (host.count() < 2) GTEST_SKIP() << "skipped: needs 2 CPUs, host has " << host.to_list();
  const std::string c0 = std::to_string(host.cpus()[0]), c1 = std::to_string(host.cpus()[1]);
  const CpuSet s0 = L(c0), s1 = L(c1), both = L(c0 + "," + c1);
  const std::string mems = value(h->mount / "cpuset.mems");

  // P = c0,c1 with A = c0 (holding L = c0, with a task) and B = c1.
  const std::string P = "/keel-test-cpuset-" + std::to_string(::getpid()), A = P + "/a", Lf = A + "/l",
                    B = P + "/b";
  Scratch s(h->mount);
  for (const auto& [cg, cpus] :
       std::vector<std::pair<std::string, CpuSet>>{{P, both}, {A, s0}, {Lf, s0}, {B, s1}}) {
    fs::path d = s.make(cg);
    ASSERT_EQ(write_errno(d / "cpuset.cpus", cpus.to_list()), 0) << cg;
    ASSERT_EQ(write_errno(d / "cpuset.mems", mems), 0) << cg;
  }
  pid_t task = s.sleeper();
  ASSERT_GT(task, 0);
  ASSERT_EQ(write_errno(s.path(Lf) / "cgroup.procs", std::to_string(task)), 0);

  std::map<fs::path, std::string> before;
  for (const auto& cg : {P, A, Lf, B})
    for (const char* f : {"cpuset.cpus", "cpuset.mems"}) before[s.path(cg) / f] = value(s.path(cg) / f);

  testing::TempDir state;
  auto j = Journal::open(state.path(), read_boot_id("/proc"));
  ASSERT_TRUE(j) << j.error().message();
  KnobWriter w(SysRoots::host(), Mode::enforce, &*j);
  auto cpus = [&](const std::string& cg) { return cpus_of(s.path(cg)); };

  // 1. Shrink the parent below a child: the kernel refuses it before B is shrunk.
  EXPECT_EQ(write_errno(s.path(P) / "cpuset.cpus", c0), EBUSY);
  auto r = apply_cpusets(w, *h, {{P, s0, {}}, {B, s0, {}}});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(cpus(P), s0);
  EXPECT_EQ(cpus(B), s0);

  // 2. Grow children beyond their parent: the kernel refuses it before P grows. Given leaf first.
  EXPECT_EQ(write_errno(s.path(A) / "cpuset.cpus", both.to_list()), EACCES);
  r = apply_cpusets(w, *h, {{Lf, both, {}}, {A, both, {}}, {P, both, {}}});
  ASSERT_TRUE(r) << r.error().message();
  for (const auto& cg : {P, A, Lf}) EXPECT_EQ(cpus(cg), both) << cg;
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].effective, both);  // effective_cpus as the kernel reports it

  // 3. A mixed move: CPU c1 leaves A (and its populated leaf) and joins B, in one call.
  r = apply_cpusets(w, *h, {{B, both, {}}, {A, s0, {}}, {Lf, s0, {}}});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(cpus(A), s0);
  EXPECT_EQ(cpus(Lf), s0);
  EXPECT_EQ(cpus(B), both);

  // 4. Emptying the populated leaf is refused, alone: the valid target is written.
  size_t journaled = j->entries().size(), changes = w.changes().size();
  r = apply_cpusets(w, *h, {{B, s1, {}}, {Lf, CpuSet(), {}}});
  ASSERT_TRUE(r) << r.error().message();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].refused, "");
  EXPECT_NE((*r)[1].refused.find("has tasks"), std::string::npos) << (*r)[1].refused;
  EXPECT_FALSE((*r)[1].changed);
  EXPECT_EQ(cpus(B), s1);
  EXPECT_EQ(cpus(Lf), s0);
  EXPECT_EQ(j->entries().size(), journaled);  // B's was journaled in step 1
  EXPECT_EQ(w.changes().size(), changes + 1);
  EXPECT_EQ(value(s.path(Lf) / "cgroup.procs"), std::to_string(task));

  // 5. Grow A and its leaf again, so restore has to shrink the leaf before A.
  r = apply_cpusets(w, *h, {{Lf, both, {}}, {A, both, {}}});
  ASSERT_TRUE(r) << r.error().message();

  auto rep = restore(SysRoots::host(), *j);
  EXPECT_TRUE(rep.failed.empty()) << rep.failed[0].message();
  for (const auto& [f, v] : before) EXPECT_EQ(*CpuSet::parse_list(value(f)), *CpuSet::parse_list(v)) << f;
  EXPECT_TRUE(j->entries().empty());
}

// The reproduction from issue 38 on the real v1 cpuset hierarchy: a tenant made an empty child cpuset
// under its best-effort cgroup (`be/kid`, both CPUs, and `be/kid/deep` on the second); narrowing `be`
// failed the whole batch ("would not fit in its parent") every tick, so `crit` never got its CPU. Now
// the children are narrowed with `be` (journaled), `crit` gets its CPU, the children widen back with
// `be`, and restore gives everything back.
TEST(CgroupV1Actuators, ATenantsChildCpusetIsNarrowedWithItsParentAndTheCriticalOneGetsItsCpu) {
  KEEL_REQUIRE_ROOT();
  auto layout = discover(SysRoots::host());
  ASSERT_TRUE(layout) << layout.error().message();
  const CgroupHierarchy* h = layout->v1_with("cpuset");
  if (h == nullptr) GTEST_SKIP() << "skipped: no cgroup v1 cpuset hierarchy on this host";
  CpuSet host = cpus_of(h->mount);
  if (host.count() < 2) GTEST_SKIP() << "skipped: needs 2 CPUs, host has " << host.to_list();
  const std::string c0 = std::to_string(host.cpus()[0]), c1 = std::to_string(host.cpus()[1]);
  const CpuSet s0 = L(c0), s1 = L(c1), both = L(c0 + "," + c1);
  const std::string mems = value(h->mount / "cpuset.mems");
  const std::string P = "/keel-test-kid-" + std::to_string(::getpid()), crit = P + "/crit", be = P + "/be",
                    kid = be + "/kid", deep = kid + "/deep";
  Scratch s(h->mount);
  for (const auto& [cg, cpus] : std::vector<std::pair<std::string, CpuSet>>{
           {P, both}, {crit, both}, {be, both}, {kid, both}, {deep, s1}}) {
    fs::path d = s.make(cg);
    ASSERT_EQ(write_errno(d / "cpuset.cpus", cpus.to_list()), 0) << cg;
    ASSERT_EQ(write_errno(d / "cpuset.mems", mems), 0) << cg;
  }
  pid_t task = s.sleeper();
  ASSERT_GT(task, 0);
  ASSERT_EQ(write_errno(s.path(be) / "cgroup.procs", std::to_string(task)), 0);
  EXPECT_EQ(write_errno(s.path(be) / "cpuset.cpus", c0), EBUSY) << "the kernel's rule the batch has to keep";

  testing::TempDir state;
  auto j = Journal::open(state.path(), read_boot_id("/proc"));
  ASSERT_TRUE(j) << j.error().message();
  KnobWriter w(SysRoots::host(), Mode::enforce, &*j);
  auto cpus = [&](const std::string& cg) { return cpus_of(s.path(cg)); };
  auto r = apply_cpusets(w, *h, {{crit, s1, {}}, {be, s0, {}}});
  ASSERT_TRUE(r) << r.error().message();
  for (const auto& g : *r) EXPECT_EQ(g.refused, "") << g.cgroup;
  EXPECT_EQ(cpus(crit), s1);
  EXPECT_EQ(cpus(be), s0);
  EXPECT_EQ(cpus(kid), s0);
  EXPECT_EQ(cpus(deep), s0);  // none of its own left: its parent's
  EXPECT_TRUE(j->has(*cgroup_knob(SysRoots::host(), *h, kid, "cpuset.cpus")));

  // Given back: `be` widens, and the children keel narrowed widen back to what they had.
  r = apply_cpusets(w, *h, {{crit, both, {}}, {be, both, {}}});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(cpus(be), both);
  EXPECT_EQ(cpus(kid), both);
  EXPECT_EQ(cpus(deep), s1);

  // Narrowed again, then restore (after an exit or a crash) gives every one back.
  r = apply_cpusets(w, *h, {{crit, s1, {}}, {be, s0, {}}});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(cpus(deep), s0);
  auto rep = restore(SysRoots::host(), *j);
  EXPECT_TRUE(rep.failed.empty()) << rep.failed[0].message();
  EXPECT_EQ(cpus(crit), both);
  EXPECT_EQ(cpus(be), both);
  EXPECT_EQ(cpus(kid), both);
  EXPECT_EQ(cpus(deep), s1);
}

TEST(CgroupV1Actuators, SharesQuotaAndIdleOnTheCpuHierarchyAndRestoreGivesThemBack) {
  KEEL_REQUIRE_ROOT();
  auto layout = discover(SysRoots::host());
  ASSERT_TRUE(layout) << layout.error().message();
  const CgroupHierarchy* h = layout->v1_with("cpu");
  if (h == nullptr) GTEST_SKIP() << "skipped: no cgroup v1 cpu hierarchy on this host";
  const std::string P = "/keel-test-cpu-" + std::to_string(::getpid()), C = P + "/c";
  Scratch s(h->mount);
  s.make(P);
  s.make(C);
  bool has_idle = fs::exists(s.path(C) / "cpu.idle");
  std::map<fs::path, std::string> before;
  for (const auto& cg : {P, C})
    for (const char* f : {"cpu.shares", "cpu.cfs_quota_us", "cpu.cfs_period_us", "cpu.idle"})
      if (fs::exists(s.path(cg) / f)) before[s.path(cg) / f] = value(s.path(cg) / f);

  testing::TempDir state;
  auto j = Journal::open(state.path(), read_boot_id("/proc"));
  ASSERT_TRUE(j) << j.error().message();
  KnobWriter w(SysRoots::host(), Mode::enforce, &*j);
  auto at = [&](const std::string& cg, const char* f) { return value(s.path(cg) / f); };

  auto q = set_cpu_quota(w, *h, P, 50ms, 100ms);  // the parent: half a CPU
  ASSERT_TRUE(q) << q.error().message();
  EXPECT_EQ(at(P, "cpu.cfs_quota_us"), "50000");
  q = set_cpu_quota(w, *h, C, 40ms, 100ms);
  ASSERT_TRUE(q) << q.error().message();
  EXPECT_EQ(at(C, "cpu.cfs_quota_us"), "40000");
  // The child's 0.4 CPU as 100 ms per 250 ms: the quota first would ask 1.0 of a 0.5 parent.
  EXPECT_EQ(write_errno(s.path(C) / "cpu.cfs_quota_us", "100000"), EINVAL);
  q = set_cpu_quota(w, *h, C, 100ms, 250ms);
  ASSERT_TRUE(q) << q.error().message();
  EXPECT_EQ(at(C, "cpu.cfs_quota_us"), "100000");
  EXPECT_EQ(at(C, "cpu.cfs_period_us"), "250000");
  auto bad = set_cpu_quota(w, *h, C, 500us, 100ms);
  ASSERT_FALSE(bad);
  EXPECT_EQ(at(C, "cpu.cfs_quota_us"), "100000");

  auto wt = set_cpu_weight(w, *h, C, 512);
  ASSERT_TRUE(wt) << wt.error().message();
  EXPECT_EQ(at(C, "cpu.shares"), "512");
  EXPECT_FALSE(set_cpu_weight(w, *h, C, 1));
  EXPECT_EQ(at(C, "cpu.shares"), "512");

  if (has_idle) {
    auto idle = set_cpu_idle(w, *h, C, true);
    ASSERT_TRUE(idle) << idle.error().message();
    EXPECT_EQ(at(C, "cpu.idle"), "1");
    EXPECT_EQ(at(C, "cpu.shares"), "3");  // the kernel's weight for an idle group
    auto refused = set_cpu_weight(w, *h, C, 700);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message().find("cpu.idle=0 first"), std::string::npos)
        << refused.error().message();
  }

  auto rep = restore(SysRoots::host(), *j);
  EXPECT_TRUE(rep.failed.empty()) << rep.failed[0].message();
  for (const auto& [f, v] : before) EXPECT_EQ(value(f), v) << f;  // shares 512 -> 3 -> 1024 included
  EXPECT_TRUE(j->entries().empty());
}

}  // namespace
}  // namespace keel::act

namespace keel::act {
namespace {

// A quota change the kernel refuses midway (the child would exceed its parent's ratio) is rolled
// back: the cgroup keeps its old limit, never the lifted one (-1) of the intermediate step.
TEST(CgroupV1Actuators, ARefusedQuotaChangeIsRolledBackNotLeftUnlimited) {
  KEEL_REQUIRE_ROOT();
  auto layout = discover(SysRoots::host());
  ASSERT_TRUE(layout) << layout.error().message();
  const CgroupHierarchy* h = layout->v1_with("cpu");
  if (h == nullptr) GTEST_SKIP() << "skipped: no cgroup v1 cpu hierarchy on this host";
  const std::string P = "/keel-test-quota-" + std::to_string(::getpid()), C = P + "/c";
  Scratch s(h->mount);
  s.make(P);
  s.make(C);
  testing::TempDir state;
  auto j = Journal::open(state.path(), read_boot_id("/proc"));
  ASSERT_TRUE(j) << j.error().message();
  KnobWriter w(SysRoots::host(), Mode::enforce, &*j);
  ASSERT_TRUE(set_cpu_quota(w, *h, P, std::chrono::microseconds(50000), std::chrono::microseconds(100000)));
  ASSERT_TRUE(set_cpu_quota(w, *h, C, std::chrono::microseconds(40000), std::chrono::microseconds(100000)));
  // 150000/200000 = 0.75 > the parent's 0.5: both orders need the limit lifted first, then refused.
  auto r = set_cpu_quota(w, *h, C, std::chrono::microseconds(150000), std::chrono::microseconds(200000));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().err, EINVAL) << r.error().message();
  EXPECT_EQ(value(s.path(C) / "cpu.cfs_quota_us"), "40000");
  EXPECT_EQ(value(s.path(C) / "cpu.cfs_period_us"), "100000");
  auto rep = restore(SysRoots::host(), *j);
  EXPECT_TRUE(rep.failed.empty()) << rep.failed.front().message();
  EXPECT_EQ(value(s.path(C) / "cpu.cfs_quota_us"), "-1");
}

// Restore of a v1 quota and period changed together, between a limited parent and a limited child:
// quota first (0.2 < the grandchild's 0.3) and period first (0.9 > the parent's 0.5) are both refused;
// restore goes through "no limit".
TEST(CgroupV1Actuators, RestoreOfQuotaAndPeriodTogetherGoesThroughNoLimit) {
  KEEL_REQUIRE_ROOT();
  auto layout = discover(SysRoots::host());
  ASSERT_TRUE(layout) << layout.error().message();
  const CgroupHierarchy* h = layout->v1_with("cpu");
  if (h == nullptr) GTEST_SKIP() << "skipped: no cgroup v1 cpu hierarchy on this host";
  const std::string P = "/keel-test-bw-" + std::to_string(::getpid()), C = P + "/c", G = C + "/g";
  Scratch s(h->mount);
  s.make(P);
  s.make(C);
  s.make(G);
  auto put = [&](const std::string& cg, const char* q, const char* per) {
    ASSERT_TRUE(write_file(s.path(cg) / "cpu.cfs_period_us", per));
    ASSERT_TRUE(write_file(s.path(cg) / "cpu.cfs_quota_us", q));
  };
  put(P, "50000", "100000");
  put(C, "40000", "100000");
  put(G, "30000", "100000");
  testing::TempDir state;
  {
    auto j = Journal::open(state.path(), read_boot_id("/proc"));
    ASSERT_TRUE(j) << j.error().message();
    KnobWriter w(SysRoots::host(), Mode::enforce, &*j);
    auto r = set_cpu_quota(w, *h, C, std::chrono::microseconds(90000), std::chrono::microseconds(200000));
    ASSERT_TRUE(r) << r.error().message();
    ASSERT_EQ(value(s.path(C) / "cpu.cfs_quota_us"), "90000");
  }
  auto j = Journal::open(state.path(), read_boot_id("/proc"));
  ASSERT_TRUE(j);
  auto rep = restore(SysRoots::host(), *j);
  EXPECT_TRUE(rep.failed.empty()) << rep.failed.front().message();
  EXPECT_EQ(value(s.path(C) / "cpu.cfs_quota_us"), "40000");
  EXPECT_EQ(value(s.path(C) / "cpu.cfs_period_us"), "100000");
}

}  // namespace
}  // namespace keel::act

// ---- The same on cgroup v2 under systemd (the guest of scripts/vm-test.sh) ----
// In a Delegate=yes scope of the test's own (tests/support/scene.h). On a v1 host these skip: the
// CgroupV1Actuators tests above are their twins there.

namespace keel::act {
namespace {

// Skips unless this host is cgroup v2 under systemd; else the unified hierarchy and a tree below a
// delegated scope of the test's own.
#define KEEL_REQUIRE_V2_TREE(tree, h)                                                              \
  KEEL_REQUIRE_ROOT();                                                                             \
  if (testing::host_layout() != testing::Layout::v2)                                               \
    GTEST_SKIP() << "skipped: needs cgroup v2 under systemd (scripts/vm-test.sh boots one); this " \
                    "host is v1: CgroupV1Actuators are the twins here";                            \
  testing::DelegatedTree tree("keel-test-v2-" + std::to_string(::getpid()));                       \
  ASSERT_EQ(tree.error(), "");                                                                     \
  auto h##_layout = discover(SysRoots::host());                                                    \
  ASSERT_TRUE(h##_layout) << h##_layout.error().message();                                         \
  const CgroupHierarchy h = *h##_layout->unified()

std::string effective(const fs::path& dir) { return value(dir / "cpuset.cpus.effective"); }

// v2 takes a parent narrower than its child and a child wider than its parent (no EBUSY, no EACCES):
// what a cgroup gets is the intersection (cpuset.cpus.effective), which apply_cpusets reports. A
// populated leaf never ends up with nothing; restore gives every cpuset.cpus back as found.
TEST(CgroupV2Actuators, NestedCpusetsTakeEitherOrderAndTheKernelIntersectsAndRestoreGivesThemBack) {
  KEEL_REQUIRE_V2_TREE(tree, h);
  CpuSet host = *CpuSet::parse_list(effective(h.mount));
  if (host.count() < 2) GTEST_SKIP() << "skipped: needs 2 CPUs, host has " << host.to_list();
  const std::string c0 = std::to_string(host.cpus()[0]), c1 = std::to_string(host.cpus()[1]);
  const CpuSet s0 = L(c0), s1 = L(c1), both = L(c0 + "," + c1);
  const std::string P = tree.path(), A = P + "/a", Lf = A + "/l", B = P + "/b";
  for (const char* rel : {"a", "a/l", "b"}) ASSERT_TRUE(tree.make(rel)) << rel;
  auto dir = [&](const std::string& cg) { return h.mount / cg.substr(1); };
  for (const auto& [cg, cpus] :
       std::vector<std::pair<std::string, CpuSet>>{{P, both}, {A, s0}, {Lf, s0}, {B, s1}})
    ASSERT_EQ(write_errno(dir(cg) / "cpuset.cpus", cpus.to_list()), 0) << cg;
  const testing::Parked parked;
  const pid_t task = parked.pid;
  ASSERT_TRUE(tree.move(task, "a/l"));
  std::map<fs::path, std::string> before;
  for (const auto& cg : {P, A, Lf, B})
    for (const char* f : {"cpuset.cpus", "cpuset.mems"}) before[dir(cg) / f] = value(dir(cg) / f);

  testing::TempDir state;
  auto j = Journal::open(state.path(), read_boot_id("/proc"));
  ASSERT_TRUE(j) << j.error().message();
  KnobWriter w(SysRoots::host(), Mode::enforce, &*j);
  auto cpus = [&](const std::string& cg) { return cpus_of(dir(cg)); };

  // 1. The parent below a child: v2 takes it (v1 says EBUSY); the child keeps what it set and gets
  // the intersection.
  auto r = apply_cpusets(w, h, {{P, s1, {}}});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(cpus(P), s1);
  EXPECT_EQ(cpus(A), s0) << "what the child set stays";
  EXPECT_EQ(*CpuSet::parse_list(effective(dir(B))), s1);
  // A, whose own CPUs are all outside its parent's, falls back to the parent's (cgroup-v2.rst).
  EXPECT_EQ(*CpuSet::parse_list(effective(dir(A))), s1);
  EXPECT_EQ(value(dir(Lf) / "cgroup.procs"), std::to_string(task)) << "the task stays where it is";

  // 2. Children wider than their parent, given leaf first: taken, and clipped to the parent.
  r = apply_cpusets(w, h, {{Lf, both, {}}, {A, both, {}}});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(cpus(Lf), both);
  EXPECT_EQ(cpus(A), both);
  ASSERT_EQ(r->size(), 2u);
  for (const auto& g : *r) EXPECT_EQ(g.effective, s1) << g.cgroup << ": the kernel's intersection";

  // 3. The parent grows back: the children get what they set.
  r = apply_cpusets(w, h, {{P, both, {}}});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*CpuSet::parse_list(effective(dir(Lf))), both);

  // 4. Emptying the populated leaf is refused, alone: the valid target is written.
  r = apply_cpusets(w, h, {{B, s0, {}}, {Lf, CpuSet(), {}}});
  ASSERT_TRUE(r) << r.error().message();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].refused, "");
  EXPECT_NE((*r)[1].refused.find("has tasks"), std::string::npos) << (*r)[1].refused;
  EXPECT_EQ(cpus(B), s0);

  auto rep = restore(SysRoots::host(), *j);
  EXPECT_TRUE(rep.failed.empty()) << rep.failed[0].message();
  for (const auto& [f, v] : before) EXPECT_EQ(value(f), v) << f;
  EXPECT_TRUE(j->entries().empty());
}

// cpu.weight (shares mapped as systemd does: 512 -> 50), cpu.max (quota and period in one write; a
// child may ask more than its parent: v2 clips at run time instead of refusing) and cpu.idle, whose
// group refuses a weight (EINVAL) until it leaves the class; restore gives every file back as found.
TEST(CgroupV2Actuators, WeightQuotaAndIdleOnTheUnifiedHierarchyAndRestoreGivesThemBack) {
  KEEL_REQUIRE_V2_TREE(tree, h);
  const std::string P = tree.path() + "/p", C = P + "/c";
  ASSERT_TRUE(tree.make("p"));
  ASSERT_TRUE(tree.make("p/c"));
  auto dir = [&](const std::string& cg) { return h.mount / cg.substr(1); };
  std::map<fs::path, std::string> before;
  for (const auto& cg : {P, C})
    for (const char* f : {"cpu.weight", "cpu.max", "cpu.idle"}) before[dir(cg) / f] = value(dir(cg) / f);
  testing::TempDir state;
  auto j = Journal::open(state.path(), read_boot_id("/proc"));
  ASSERT_TRUE(j) << j.error().message();
  KnobWriter w(SysRoots::host(), Mode::enforce, &*j);
  auto at = [&](const std::string& cg, const char* f) { return value(dir(cg) / f); };

  auto q = set_cpu_quota(w, h, P, 50ms, 100ms);
  ASSERT_TRUE(q) << q.error().message();
  EXPECT_EQ(at(P, "cpu.max"), "50000 100000");
  q = set_cpu_quota(w, h, C, 100ms, 250ms);  // 0.4 CPU below a 0.5 parent, in one write
  ASSERT_TRUE(q) << q.error().message();
  EXPECT_EQ(at(C, "cpu.max"), "100000 250000");
  q = set_cpu_quota(w, h, C, 90ms, 100ms);  // more than the parent's: v2 takes it (and clips at run time)
  ASSERT_TRUE(q) << q.error().message();
  EXPECT_EQ(at(C, "cpu.max"), "90000 100000");
  EXPECT_FALSE(set_cpu_quota(w, h, C, 500us, 100ms)) << "below the kernel's 1 ms";
  EXPECT_EQ(at(C, "cpu.max"), "90000 100000");

  auto wt = set_cpu_weight(w, h, C, 512);
  ASSERT_TRUE(wt) << wt.error().message();
  EXPECT_EQ(at(C, "cpu.weight"), "50");
  EXPECT_FALSE(set_cpu_weight(w, h, C, 1));
  EXPECT_EQ(at(C, "cpu.weight"), "50");

  auto idle = set_cpu_idle(w, h, C, true);
  ASSERT_TRUE(idle) << idle.error().message();
  EXPECT_EQ(at(C, "cpu.idle"), "1");
  EXPECT_EQ(write_errno(dir(C) / "cpu.weight", "70"), EINVAL) << "the kernel refuses a weight while idle";
  auto refused = set_cpu_weight(w, h, C, 700);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message().find("cpu.idle=0 first"), std::string::npos)
      << refused.error().message();

  auto rep = restore(SysRoots::host(), *j);
  EXPECT_TRUE(rep.failed.empty()) << rep.failed[0].message();
  for (const auto& [f, v] : before) EXPECT_EQ(value(f), v) << f;  // idle first, then the weight
  EXPECT_TRUE(j->entries().empty());
}

// The v2 kernel refuses to unset the cpuset.cpus of a cgroup with tasks once it is set (ENOSPC; the
// temporary trees above cannot show it): restore gives such a cgroup, found not set, every CPU of the
// hierarchy, with which it has its parent's as before, and says so. One without tasks is unset again.
TEST(CgroupV2Actuators, ACpusetFoundNotSetIsGivenEveryCpuWhereTheKernelRefusesToUnsetIt) {
  KEEL_REQUIRE_V2_TREE(tree, h);
  ASSERT_TRUE(tree.make("busy"));
  ASSERT_TRUE(tree.make("empty"));
  const fs::path busy = tree.dir("cpuset") / "busy", empty = tree.dir("cpuset") / "empty";
  ASSERT_EQ(value(busy / "cpuset.cpus"), "");
  const testing::Parked parked;
  const pid_t task = parked.pid;
  ASSERT_TRUE(tree.move(task, "busy"));
  const std::string all = effective(h.mount);
  const std::string one = std::to_string(CpuSet::parse_list(all)->cpus()[0]);
  testing::TempDir state;
  auto j = Journal::open(state.path(), read_boot_id("/proc"));
  ASSERT_TRUE(j) << j.error().message();
  {
    KnobWriter w(SysRoots::host(), Mode::enforce, &*j);
    ASSERT_TRUE(
        apply_cpusets(w, h, {{tree.path() + "/busy", L(one), {}}, {tree.path() + "/empty", L(one), {}}}));
  }
  ASSERT_EQ(value(busy / "cpuset.cpus"), one);
  // "\n", not "": kernfs never passes a write of 0 bytes to the cgroup, so "" would "succeed" unread.
  EXPECT_EQ(write_errno(busy / "cpuset.cpus", "\n"), ENOSPC) << "the kernel's rule this test is about";
  auto rep = restore(SysRoots::host(), *j);
  EXPECT_TRUE(rep.failed.empty()) << rep.failed[0].message();
  EXPECT_EQ(rep.restored, 2u);
  EXPECT_EQ(value(empty / "cpuset.cpus"), "") << "no tasks: not set again";
  EXPECT_EQ(value(busy / "cpuset.cpus"), all) << "every CPU of the hierarchy";
  EXPECT_EQ(effective(busy), effective(tree.dir("cpuset"))) << "what its parent has, as when not set";
  ASSERT_EQ(rep.every_cpu.size(), 1u);
  EXPECT_NE(rep.every_cpu[0].find((busy / "cpuset.cpus").string()), std::string::npos) << rep.every_cpu[0];
  EXPECT_TRUE(j->entries().empty());
}

}  // namespace
}  // namespace keel::act
