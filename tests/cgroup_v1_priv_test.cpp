// Discovery and workload matching against the host's real cgroup v1 cpu and cpuset hierarchies.
// Needs root; creates keel-test-<pid>/{a,b} in both and removes them (and its child process) in
// TearDown, whatever the test's outcome.
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
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "host/cgroup.h"
#include "host/fileio.h"
#include "inventory/workloads.h"
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

class CgroupV1Priv : public ::testing::Test {
 protected:
  // Creates the test cgroups in the v1 cpu and cpuset hierarchies and a sleeping child in /a.
  void create() {
    auto layout = discover(roots_);
    ASSERT_TRUE(layout) << layout.error().message();
    if (!layout->v1_with("cpu") || !layout->v1_with("cpuset"))
      GTEST_SKIP() << "needs cgroup v1 cpu and cpuset hierarchies; this host is " << to_string(layout->mode);
    cpu_ = *layout->v1_with("cpu");
    cpuset_ = *layout->v1_with("cpuset");
    for (const CgroupHierarchy* h : {&cpu_, &cpuset_})
      for (const char* rel : {"", "/a", "/b"}) ASSERT_NO_FATAL_FAILURE(make_cgroup(*h, top_ + rel));
    ASSERT_NO_FATAL_FAILURE(start_child());
    for (const CgroupHierarchy* h : {&cpu_, &cpuset_}) {
      auto moved = write_file(dir(*h, top_ + "/a") / "cgroup.procs", std::to_string(child_));
      ASSERT_TRUE(moved) << moved.error().message();
    }
  }

  // Idempotent; children before parents.
  void cleanup() {
    if (child_ > 0) {
      ::kill(child_, SIGKILL);
      ::waitpid(child_, nullptr, 0);
      child_ = -1;
    }
    for (auto it = created_.rbegin(); it != created_.rend(); ++it) remove_cgroup(*it);
    created_.clear();
  }

  void TearDown() override { cleanup(); }

  fs::path dir(const CgroupHierarchy& h, const std::string& path) const { return h.mount / path.substr(1); }

  SysRoots roots_ = SysRoots::host();
  const std::string top_ = "/keel-test-" + std::to_string(::getpid());
  CgroupHierarchy cpu_, cpuset_;
  pid_t child_ = -1;

 private:
  void make_cgroup(const CgroupHierarchy& h, const std::string& path) {
    const fs::path d = dir(h, path);
    ASSERT_EQ(::mkdir(d.c_str(), 0755), 0) << d << ": " << std::strerror(errno);
    created_.push_back(d);
    // A v1 cpuset holds no task until it has CPUs and memory nodes; take the parent's.
    if (h.has("cpuset"))
      for (const char* file : {"cpuset.cpus", "cpuset.mems"}) {
        auto value = read_line(d.parent_path() / file);
        ASSERT_TRUE(value) << value.error().message();
        auto written = write_file(d / file, *value);
        ASSERT_TRUE(written) << written.error().message();
      }
  }

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

  // The kernel may still hold a just-reaped task's css for a moment: rmdir says EBUSY then.
  static void remove_cgroup(const fs::path& d) {
    for (int attempt = 0; attempt < 200; ++attempt) {
      if (::rmdir(d.c_str()) == 0 || errno == ENOENT) return;
      if (errno != EBUSY) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "cannot remove test cgroup " << d << ": " << std::strerror(errno);
  }

  std::vector<fs::path> created_;  // creation order: parents first
};

TEST_F(CgroupV1Priv, AutomaticChoiceIsV1CpuWithItsProcCgroupsId) {
  KEEL_REQUIRE_ROOT();
  ASSERT_NO_FATAL_FAILURE(create());
  if (IsSkipped()) return;
  auto layout = discover(roots_);
  ASSERT_TRUE(layout) << layout.error().message();
  EXPECT_NE(layout->mode, CgroupMode::v2);
  auto chosen = choose_hierarchy(*layout, config::Hierarchy::automatic);
  ASSERT_TRUE(chosen) << chosen.error().message();
  if (const CgroupHierarchy* u = layout->unified(); u && u->has("cpu"))
    GTEST_SKIP() << "the unified hierarchy has the cpu controller here, so auto picks it";
  EXPECT_FALSE(chosen->unified);
  EXPECT_TRUE(chosen->has("cpu"));
  EXPECT_EQ(chosen->mount, cpu_.mount);
  EXPECT_EQ(std::optional<uint32_t>(chosen->id), proc_cgroups_hierarchy(roots_, "cpu"));
  EXPECT_EQ(std::optional<uint32_t>(cpuset_.id), proc_cgroups_hierarchy(roots_, "cpuset"));
  EXPECT_NE(chosen->id, cpuset_.id);
}

TEST_F(CgroupV1Priv, EnumeratedIdsAreStatInodesAndProcsAreCounted) {
  KEEL_REQUIRE_ROOT();
  ASSERT_NO_FATAL_FAILURE(create());
  if (IsSkipped()) return;
  for (const CgroupHierarchy* h : {&cpu_, &cpuset_}) {
    auto cgroups = enumerate_cgroups(*h);
    ASSERT_TRUE(cgroups) << cgroups.error().message();
    ASSERT_NE(find(*cgroups, "/"), nullptr);
    EXPECT_EQ(find(*cgroups, "/")->id, (CgroupId{h->id, inode_of(h->mount)}));
    for (const std::string rel : {"", "/a", "/b"}) {
      const Cgroup* c = find(*cgroups, top_ + rel);
      ASSERT_NE(c, nullptr) << h->name() << " " << top_ + rel;
      EXPECT_EQ(c->id, (CgroupId{h->id, inode_of(dir(*h, top_ + rel))})) << c->path;
      EXPECT_EQ(c->nr_procs, rel == "/a" ? 1u : 0u) << h->name() << " " << c->path;
    }
  }
}

TEST_F(CgroupV1Priv, GlobWithTasksMatchesOnlyTheBusyCgroup) {
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

  for (config::Hierarchy choice : {config::Hierarchy::cpu, config::Hierarchy::cpuset}) {
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
  auto report = discover_workloads(pid_only, config::Hierarchy::cpu, roots_);
  ASSERT_TRUE(report) << report.error().message();
  EXPECT_EQ(report->matches.workloads[0].cgroups, 1u);
  for (const WorkloadMatch& m : report->matches.cgroups) {
    if (!m.workload.empty()) {
      EXPECT_EQ(m.path, top_ + "/a");
    }
  }
}

TEST_F(CgroupV1Priv, RemovedCgroupsVanishFromRediscovery) {
  KEEL_REQUIRE_ROOT();
  ASSERT_NO_FATAL_FAILURE(create());
  if (IsSkipped()) return;
  const std::vector<config::Workload> workloads = {glob_workload("test", top_ + "/**")};
  auto before = discover_workloads(workloads, config::Hierarchy::cpu, roots_);
  ASSERT_TRUE(before) << before.error().message();
  EXPECT_EQ(before->matches.workloads[0].cgroups, 1u);

  cleanup();
  for (config::Hierarchy choice : {config::Hierarchy::cpu, config::Hierarchy::cpuset}) {
    auto after = discover_workloads(workloads, choice, roots_);
    ASSERT_TRUE(after) << after.error().message();
    for (const WorkloadMatch& m : after->matches.cgroups)
      EXPECT_FALSE(m.path.starts_with(top_)) << m.path << " still listed";
    EXPECT_EQ(after->matches.workloads[0].cgroups, 0u);
  }
}

}  // namespace
}  // namespace keel
