// Discovery and workload matching against the host's real cgroups: the v1 cpu and cpuset hierarchies,
// or the unified one under systemd (v2). Needs root; creates keel-test-<pid>/{a,b} (on v1 in both
// hierarchies, on v2 below a Delegate=yes scope: tests/support/scene.h) and removes them (and its child
// process) in TearDown, whatever the test's outcome.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "host/cgroup.h"
#include "host/fileio.h"
#include "inventory/workloads.h"
#include "tests/support/scene.h"
#include "tests/support/tmp_tree.h"

namespace keel {
namespace {

namespace fs = std::filesystem;
using ::keel::testing::TempDir;

// Column 2 of /proc/cgroups for `subsys`, read here without keel's parser.
std::optional<uint32_t> proc_cgroups_hierarchy(const SysRoots& roots, const std::string& subsys) {
  std::ifstream in(roots.proc / "cgroups");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string name;
    uint32_t hierarchy = 0;
    if (fields >> name >> hierarchy && name == subsys) return hierarchy;
  }
  return std::nullopt;
}

uint64_t inode_of(const fs::path& p) {
  struct stat st;
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p << ": " << std::strerror(errno);
  return st.st_ino;
}

const Cgroup* find(const std::vector<Cgroup>& cgroups, const std::string& path) {
  for (const Cgroup& c : cgroups)
    if (c.path == path) return &c;
  return nullptr;
}

config::Workload glob_workload(const std::string& name, const std::string& glob) {
  config::Workload w;
  w.name = name;
  w.match.cgroup = glob;
  w.match.has_tasks = true;
  return w;
}

class CgroupPriv : public ::testing::Test {
 protected:
  // Creates the test cgroups (in the v1 cpu and cpuset hierarchies, or the unified one) and a sleeping
  // child in /a.
  void create() {
    std::string why;
    if (!testing::host_layout(&why)) GTEST_SKIP() << "skipped: " << why;
    auto layout = discover(roots_);
    ASSERT_TRUE(layout) << layout.error().message();
    tree_ = std::make_unique<testing::DelegatedTree>("keel-test-" + std::to_string(::getpid()));
    ASSERT_EQ(tree_->error(), "");
    top_ = tree_->path();
    if (tree_->v2()) {
      hierarchies_ = {*layout->unified()};
      choices_ = {config::Hierarchy::unified};
    } else {
      hierarchies_ = {*layout->v1_with("cpu"), *layout->v1_with("cpuset")};
      choices_ = {config::Hierarchy::cpu, config::Hierarchy::cpuset};
    }
    for (const char* rel : {"a", "b"}) ASSERT_TRUE(tree_->make(rel)) << rel << ": " << std::strerror(errno);
    ASSERT_NO_FATAL_FAILURE(start_child());
    ASSERT_TRUE(tree_->move(child_, "a"));
  }

  // Idempotent.
  void cleanup() {
    if (child_ > 0) {
      ::kill(child_, SIGKILL);
      ::waitpid(child_, nullptr, 0);
      child_ = -1;
    }
    tree_.reset();
  }

  void TearDown() override { cleanup(); }

  fs::path dir(const CgroupHierarchy& h, const std::string& path) const { return h.mount / path.substr(1); }

  SysRoots roots_ = SysRoots::host();
  std::unique_ptr<testing::DelegatedTree> tree_;
  std::string top_;
  std::vector<CgroupHierarchy> hierarchies_;  // v1: cpu, cpuset; v2: the unified one
  std::vector<config::Hierarchy> choices_;    // the config's names of them
  pid_t child_ = -1;

 private:
  void start_child() {
    const pid_t parent = ::getpid();
    child_ = ::fork();
    ASSERT_GE(child_, 0) << std::strerror(errno);
    if (child_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a crashed test
      if (::getppid() != parent) ::_exit(0);
      for (;;) ::pause();
    }
  }
};

// auto picks the v1 cpu hierarchy (its /proc/cgroups id) on a v1 host, the unified one (id 0) where it
// has the cpu controller.
TEST_F(CgroupPriv, AutomaticChoiceIsTheCpuHierarchyWithItsProcCgroupsId) {
  KEEL_REQUIRE_ROOT();
  ASSERT_NO_FATAL_FAILURE(create());
  if (IsSkipped()) return;
  auto layout = discover(roots_);
  ASSERT_TRUE(layout) << layout.error().message();
  auto chosen = choose_hierarchy(*layout, config::Hierarchy::automatic);
  ASSERT_TRUE(chosen) << chosen.error().message();
  if (tree_->v2()) {
    EXPECT_EQ(layout->mode, CgroupMode::v2);
    EXPECT_TRUE(chosen->unified);
    EXPECT_EQ(chosen->id, 0u);
    EXPECT_TRUE(chosen->has("cpu"));
    EXPECT_TRUE(chosen->has("cpuset"));
    EXPECT_EQ(std::optional<uint32_t>(0), proc_cgroups_hierarchy(roots_, "cpu"));
    return;
  }
  EXPECT_NE(layout->mode, CgroupMode::v2);
  if (const CgroupHierarchy* u = layout->unified(); u && u->has("cpu"))
    GTEST_SKIP() << "the unified hierarchy has the cpu controller here, so auto picks it";
  const CgroupHierarchy &cpu = hierarchies_[0], &cpuset = hierarchies_[1];
  EXPECT_FALSE(chosen->unified);
  EXPECT_TRUE(chosen->has("cpu"));
  EXPECT_EQ(chosen->mount, cpu.mount);
  EXPECT_EQ(std::optional<uint32_t>(chosen->id), proc_cgroups_hierarchy(roots_, "cpu"));
  EXPECT_EQ(std::optional<uint32_t>(cpuset.id), proc_cgroups_hierarchy(roots_, "cpuset"));
  EXPECT_NE(chosen->id, cpuset.id);
}

TEST_F(CgroupPriv, EnumeratedIdsAreStatInodesAndProcsAreCounted) {
  KEEL_REQUIRE_ROOT();
  ASSERT_NO_FATAL_FAILURE(create());
  if (IsSkipped()) return;
  for (const CgroupHierarchy& hier : hierarchies_) {
    const CgroupHierarchy* h = &hier;
    auto cgroups = enumerate_cgroups(*h);
    ASSERT_TRUE(cgroups) << cgroups.error().message();
    ASSERT_NE(find(*cgroups, "/"), nullptr);
    EXPECT_EQ(find(*cgroups, "/")->id, (CgroupId{h->id, inode_of(h->mount)}));
    for (const std::string rel : {"", "/a", "/b"}) {
      const Cgroup* c = find(*cgroups, top_ + rel);
      ASSERT_NE(c, nullptr) << h->name() << " " << top_ + rel;
      EXPECT_EQ(c->id, (CgroupId{h->id, inode_of(dir(*h, top_ + rel))})) << c->path;
      // (On v2 the scope's own parked process sits in its child `parked`, not in these.)
      EXPECT_EQ(c->nr_procs, rel == "/a" ? 1u : 0u) << h->name() << " " << c->path;
    }
  }
}

TEST_F(CgroupPriv, GlobWithTasksMatchesOnlyTheBusyCgroup) {
  KEEL_REQUIRE_ROOT();
  ASSERT_NO_FATAL_FAILURE(create());
  if (IsSkipped()) return;
  TempDir tmp;
  const fs::path pid_file = tmp.path() / "child.pid";
  ::keel::testing::make_tree(tmp.path(), {{"child.pid", std::to_string(child_) + "\n"}});
  config::Workload by_pid;
  by_pid.name = "by-pid";
  by_pid.match.pid_file = pid_file;
  const std::vector<config::Workload> workloads = {glob_workload("test", top_ + "/*"), by_pid};

  for (config::Hierarchy choice : choices_) {
    auto report = discover_workloads(workloads, choice, roots_);
    ASSERT_TRUE(report) << report.error().message();
    std::vector<std::string> matched;
    for (const WorkloadMatch& m : report->matches.cgroups)
      if (!m.workload.empty()) matched.push_back(m.workload + " " + m.path);
    EXPECT_THAT(matched, ::testing::ElementsAre("test " + top_ + "/a")) << config::to_string(choice);
    EXPECT_EQ(report->matches.workloads[0].cgroups, 1u);
    EXPECT_EQ(report->matches.workloads[0].procs, 1u);
    // /a is taken by the first workload; the pid file resolves to that same cgroup.
    EXPECT_EQ(report->matches.workloads[1].cgroups, 0u);
    EXPECT_EQ(report->matches.workloads[1].note, "");
  }
  const std::vector<config::Workload> pid_only = {by_pid};
  auto report = discover_workloads(pid_only, choices_[0], roots_);
  ASSERT_TRUE(report) << report.error().message();
  EXPECT_EQ(report->matches.workloads[0].cgroups, 1u);
  for (const WorkloadMatch& m : report->matches.cgroups) {
    if (!m.workload.empty()) {
      EXPECT_EQ(m.path, top_ + "/a");
    }
  }
}

TEST_F(CgroupPriv, RemovedCgroupsVanishFromRediscovery) {
  KEEL_REQUIRE_ROOT();
  ASSERT_NO_FATAL_FAILURE(create());
  if (IsSkipped()) return;
  const std::vector<config::Workload> workloads = {glob_workload("test", top_ + "/**")};
  auto before = discover_workloads(workloads, choices_[0], roots_);
  ASSERT_TRUE(before) << before.error().message();
  EXPECT_EQ(before->matches.workloads[0].cgroups, 1u);

  const std::vector<config::Hierarchy> choices = choices_;
  cleanup();
  for (config::Hierarchy choice : choices) {
    auto after = discover_workloads(workloads, choice, roots_);
    ASSERT_TRUE(after) << after.error().message();
    for (const WorkloadMatch& m : after->matches.cgroups)
      EXPECT_FALSE(m.path.starts_with(top_)) << m.path << " still listed";
    EXPECT_EQ(after->matches.workloads[0].cgroups, 0u);
  }
}

// A test process killed before its DelegatedTree's destructor ran leaves its tree behind: on cgroup v1 a
// directory per hierarchy (leaves inside), on v2 a systemd scope kept alive by its parked process, which
// outlives the test. The next tree of that name removes it first. The child here makes a tree with a
// leaf and exits without destructors, as a killed test would.
TEST(DelegatedTreePriv, TheTreeOfAKilledTestIsRemovedByTheNextOne) {
  if (::geteuid() != 0) GTEST_SKIP() << "skipped: needs root";
  std::string why;
  auto layout = testing::host_layout(&why);
  if (!layout) GTEST_SKIP() << "skipped: " << why;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto* tree = new testing::DelegatedTree("keel-stale-" + std::to_string(::getpid()));
    const bool made = tree->error().empty() && tree->make("leaf");
    std::ofstream(fs::path("/run") / ("keel-stale-" + std::to_string(::getpid()))) << tree->dir().string();
    ::_exit(made ? 0 : 1);  // no destructor: left behind
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  const fs::path said = fs::path("/run") / ("keel-stale-" + std::to_string(child));
  const fs::path left = testing::slurp(said);
  fs::remove(said);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_TRUE(fs::exists(left / "leaf")) << left << ": the child's tree was not made";
  {
    testing::DelegatedTree next("keel-stale-" + std::to_string(::getpid()));
    ASSERT_TRUE(next.error().empty()) << next.error();
    EXPECT_FALSE(fs::exists(left)) << left << " is left behind";
    if (*layout == testing::Layout::v2) {
      EXPECT_NE(testing::systemd::property("keel_stale_" + std::to_string(child) + ".scope", "ActiveState"),
                "active");
    }
  }
  if (!fs::exists(left)) return;
  // The test failed: clean up after it.
  if (*layout == testing::Layout::v2) {
    testing::systemd::stop("keel_stale_" + std::to_string(child) + ".scope");
    return;
  }
  for (const char* c : {"cpu", "cpuacct", "cpuset"}) {
    const fs::path d = fs::path("/sys/fs/cgroup") / c / ("keel-stale-" + std::to_string(child));
    (void)::rmdir((d / "leaf").c_str());
    (void)::rmdir(d.c_str());
  }
}

}  // namespace
}  // namespace keel
