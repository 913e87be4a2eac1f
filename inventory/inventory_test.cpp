// The inventory over temporary trees with the kernel's file layout (cgroup v1 with cpu, cpuacct and
// cpuset mounted apart, as on this machine; and cgroup v2): the tree kept by inotify (a tree that did
// not change is not listed again) or by re-listing, cgroups matched to instances, a cgroup made again
// under its name a new one, where each file is read, and the cpuset cgroup that governs a cgroup.
#include "inventory/inventory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "config/config.h"
#include "tests/support/tmp_tree.h"

namespace keel::inv {
namespace {

namespace fs = std::filesystem;
using ::keel::testing::make_tree;
using ::keel::testing::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr const char* kMountinfo =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
    "34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

// A v1 host like this machine: cpu (hierarchy 1), cpuacct (2) and cpuset (3) apart.
SysRoots v1_host(const TempDir& tmp) {
  make_tree(tmp.path(), {{"proc/self/mountinfo", kMountinfo},
                         {"proc/cgroups",
                          "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpuset\t3\t1\t1\ncpu\t1\t3\t1\n"
                          "cpuacct\t2\t1\t1\n"},
                         {"proc/4242/cgroup", "3:cpuset:/pinned\n2:cpuacct:/svc/web\n1:cpu:/svc/web\n"},
                         {"sys/fs/cgroup/cpu/cgroup.procs", "1\n"},
                         {"sys/fs/cgroup/cpu/svc/cgroup.procs", ""},
                         {"sys/fs/cgroup/cpu/svc/redis/cgroup.procs", "10\n"},
                         {"sys/fs/cgroup/cpu/svc/web/cgroup.procs", "4242\n"},
                         {"sys/fs/cgroup/cpu/svc/idle/cgroup.procs", ""},
                         {"sys/fs/cgroup/cpuacct/cgroup.procs", "1\n"},
                         {"sys/fs/cgroup/cpuacct/svc/redis/cpuacct.usage", "1000\n"},
                         {"sys/fs/cgroup/cpuset/cgroup.procs", "1\n"},
                         {"sys/fs/cgroup/cpuset/svc/redis/cpuset.cpus", "0-1\n"},
                         {"sys/fs/cgroup/cpuset/pinned/cpuset.cpus", "1\n"},
                         {"sys/fs/cgroup/unified/cgroup.procs", "1\n"},
                         {"sys/fs/cgroup/unified/cgroup.controllers", ""}});
  return SysRoots::under(tmp.path());
}

config::Spec spec_of(const std::string& toml) {
  auto cfg = config::load_string(toml, "test.toml", {});
  EXPECT_TRUE(cfg) << (cfg ? "" : cfg.error().front().str());
  return config::compile(*cfg, CpuSet::range(0, 3));
}

constexpr const char* kEachWithTasks = R"(
[[workload]]
name = "redis"
match = { cgroup = "/svc/redis" }
class = "critical"
slo = { runqueue_p99 = "200us" }
[[workload]]
name = "svc"
match = { cgroup = "/svc/*", has_tasks = true, each = true }
)";

std::vector<std::string> names(const Inventory& inv) {
  std::vector<std::string> out;
  for (const auto& i : inv.instances()) out.push_back(i.name + (i.fresh ? "*" : ""));
  return out;
}

TEST(InventoryTempTree, MatchesEveryCgroupToItsInstanceFirstRuleWins) {
  TempDir tmp;
  const SysRoots roots = v1_host(tmp);
  const config::Spec spec = spec_of(kEachWithTasks);
  auto inv = Inventory::open(spec, roots);
  ASSERT_TRUE(inv) << inv.error().message();
  EXPECT_EQ(inv->cgroups(), 5u);  // /, /svc, /svc/redis, /svc/web, /svc/idle
  EXPECT_EQ(inv->defining().id, 1u);
  ASSERT_TRUE(inv->refresh_tree());
  inv->match({});
  EXPECT_THAT(names(*inv), ElementsAre("redis*", "svc/web*"));  // idle holds no task; fresh: first sight
  const Instance& redis = inv->instances()[0];
  EXPECT_EQ(redis.spec->name, "redis");
  EXPECT_TRUE(redis.spec->critical);
  ASSERT_EQ(redis.cgroups.size(), 1u);
  EXPECT_EQ(redis.cgroups[0]->dir.path(), "/svc/redis");
  ASSERT_TRUE(inv->refresh_tree());
  inv->match({});
  EXPECT_THAT(names(*inv), ElementsAre("redis", "svc/web"));  // no longer fresh
}

// Issue 38: `each` named an instance by its leaf cgroup, so same-named leaves in different subtrees (a
// tenant's /svc/t1/x beside another's /svc/t2/x) were one instance, whose knobs and numbers mixed both.
// Leaves that share a name are each named by their path; the others keep their short names, and when
// the collision goes the short name comes back.
TEST(InventoryTempTree, EachKeepsSameNamedLeavesOfDifferentSubtreesApart) {
  TempDir tmp;
  const SysRoots roots = v1_host(tmp);
  make_tree(tmp.path() / "sys/fs/cgroup/cpu",
            {{"svc/t1/x/cgroup.procs", "31\n"}, {"svc/t2/x/cgroup.procs", "32\n"}});
  const config::Spec spec = spec_of(
      "[[workload]]\nname = \"svc\"\nmatch = { cgroup = \"/svc/**\", has_tasks = true, each = true }\n");
  auto inv = Inventory::open(spec, roots);
  ASSERT_TRUE(inv) << inv.error().message();
  ASSERT_TRUE(inv->refresh_tree());
  inv->match({});
  EXPECT_THAT(names(*inv), ElementsAre("svc/redis*", "svc/t1/x*", "svc/t2/x*", "svc/web*"));
  std::filesystem::remove_all(tmp.path() / "sys/fs/cgroup/cpu/svc/t2");
  ASSERT_TRUE(inv->refresh_tree());
  inv->match({});
  EXPECT_THAT(names(*inv), ElementsAre("svc/redis", "svc/web", "svc/x"));
}

// The host's own daemons are measured but spared: a best-effort rule that takes them as one of a glob's
// family marks them spared (never classed, weighed down or narrowed), one that names a service exactly
// does not, a critical rule never does, and what a service made below itself is not spared; keel's own
// cgroup is no rule's, however it is named.
TEST(InventoryTempTree, HostDaemonsTakenByAGlobAreSparedAndKeelsOwnCgroupIsNoRules) {
  TempDir tmp;
  const SysRoots roots = v1_host(tmp);
  make_tree(tmp.path() / "sys/fs/cgroup/cpu",
            {{"init.scope/cgroup.procs", "1\n"},
             {"system.slice/systemd-journald.service/cgroup.procs", "20\n"},
             {"system.slice/backup.service/cgroup.procs", "21\n"},
             {"system.slice/crit.service/cgroup.procs", "22\n"},
             {"system.slice/keel.service/cgroup.procs", "23\n"},
             {"system.slice/docker-ab12.scope/cgroup.procs", "24\n"},
             {"system.slice/systemd-udevd.service/udev/cgroup.procs", "25\n"},
             {"system.slice/web.service/cgroup.procs", "26\n"},
             {"system.slice/web.service/libpod-payload-" + std::string(64, 'e') + "/cgroup.procs", "27\n"}});
  const config::Spec spec = spec_of(R"(
[[workload]]
name = "crit"
match = { systemd_unit = "crit.*" }
class = "critical"
slo = { runqueue_p99 = "200us" }
[[workload]]
name = "backup"
match = { systemd_unit = "backup.service" }
[[workload]]
name = "keel"
match = { cgroup = "/system.slice/keel.service" }
[[workload]]
name = "system"
match = { cgroup = "/**", has_tasks = true, each = true }
)");
  Inventory::Options options;
  options.self = "/system.slice/keel.service";
  auto inv = Inventory::open(spec, roots, options);
  ASSERT_TRUE(inv) << inv.error().message();
  ASSERT_TRUE(inv->refresh_tree());
  inv->match({});
  std::vector<std::string> seen;
  for (const Instance& i : inv->instances())
    for (const Node* n : i.cgroups) seen.push_back(i.name + (n->spared ? " spared" : ""));
  // udevd's own subgroup is the daemon's; a podman quadlet's container in web.service is tenants' work.
  EXPECT_THAT(seen, ElementsAre("backup", "crit", "system/docker-ab12.scope", "system/init.scope spared",
                                "system/libpod-payload-" + std::string(64, 'e'), "system/redis",
                                "system/systemd-journald.service spared", "system/udev spared", "system/web",
                                "system/web.service spared"));
  EXPECT_EQ(inv->self(), "/system.slice/keel.service");
}

// keel run's matching: a cgroup whose directory another user owns (a delegated subtree) is never a
// critical workload's, whatever its name; the best-effort rule after it takes it. Root only (chown).
TEST(InventoryTempTree, ADelegatedCgroupIsNeverACriticalWorkloads) {
  if (::geteuid() != 0) GTEST_SKIP() << "skipped: chown needs root";
  TempDir tmp;
  const SysRoots roots = v1_host(tmp);
  ASSERT_EQ(::chown((tmp.path() / "sys/fs/cgroup/cpu/svc/redis").c_str(), 1000, 1000), 0);
  const config::Spec spec = spec_of(kEachWithTasks);
  auto inv = Inventory::open(spec, roots);
  ASSERT_TRUE(inv) << inv.error().message();
  ASSERT_TRUE(inv->refresh_tree());
  inv->match({});
  EXPECT_THAT(names(*inv), ElementsAre("svc/redis*", "svc/web*"));
}

// keel run's matching on what systemd delegates to a root manager (a container's scope): the scope is a
// critical workload's, a cgroup its tenant makes inside is not (the best-effort rule takes it), and the
// log says which rule did not take which cgroup and why. Root only (trusted.* xattrs).
TEST(InventoryTempTree, ADelegatedScopeIsACriticalWorkloadsButNotWhatIsInside) {
  if (::geteuid() != 0) GTEST_SKIP() << "skipped: trusted.* xattrs need root";
  TempDir tmp;
  const SysRoots roots = v1_host(tmp);
  const fs::path scope = tmp.path() / "sys/fs/cgroup/cpu/system.slice/crit.scope";
  make_tree(scope, {{"cgroup.procs", "11\n"}, {"inner/cgroup.procs", "12\n"}});
  if (::setxattr(scope.c_str(), "trusted.delegate", "1", 1, 0) != 0)
    GTEST_SKIP() << "skipped: " << scope << " takes no trusted.* xattr: " << std::strerror(errno);
  const config::Spec spec = spec_of(R"(
[[workload]]
name = "crit"
match = { cgroup = "/system.slice/**", has_tasks = true, each = true }
class = "critical"
slo = { runqueue_p99 = "200us" }
[[workload]]
name = "rest"
match = { cgroup = "/**", has_tasks = true, each = true }
)");
  auto inv = Inventory::open(spec, roots);
  ASSERT_TRUE(inv) << inv.error().message();
  ASSERT_TRUE(inv->refresh_tree());
  ::testing::internal::CaptureStderr();
  inv->match({});
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(names(*inv), ElementsAre("crit/crit.scope*", "rest/inner*", "rest/redis*", "rest/web*"));
  EXPECT_THAT(log, HasSubstr("workload 'crit' does not take /system.slice/crit.scope/inner: it is below a "
                             "cgroup delegated to a container runtime"));
}

// inotify: an unchanged tree is not listed again; a new cgroup is found from its event, with what it
// holds; a removed one goes, and its id is reported for the sensor to drop.
TEST(InventoryTempTree, InotifyFindsChangesWithoutListingAnUnchangedTree) {
  TempDir tmp;
  const SysRoots roots = v1_host(tmp);
  const config::Spec spec = spec_of(kEachWithTasks);
  auto inv = Inventory::open(spec, roots);
  ASSERT_TRUE(inv);
  ASSERT_EQ(inv->watching(), "inotify");
  const size_t after_open = inv->listings();
  ASSERT_TRUE(inv->refresh_tree());
  ASSERT_TRUE(inv->refresh_tree());
  EXPECT_EQ(inv->listings(), after_open);  // nothing changed: nothing listed or read

  make_tree(tmp.path(), {{"sys/fs/cgroup/cpu/svc/new/cgroup.procs", "77\n"},
                         {"sys/fs/cgroup/cpu/svc/new/deep/cgroup.procs", ""}});
  ASSERT_TRUE(inv->refresh_tree());
  EXPECT_EQ(inv->cgroups(), 7u);
  EXPECT_LE(inv->listings(), after_open + 3);  // the new cgroup and what it holds, not the whole tree
  inv->match({});
  EXPECT_THAT(names(*inv), ElementsAre("redis*", "svc/new*", "svc/web*"));

  const CgroupId web = inv->instances()[2].cgroups[0]->dir.id();
  fs::remove_all(tmp.path() / "sys/fs/cgroup/cpu/svc/web");
  ASSERT_TRUE(inv->refresh_tree());
  EXPECT_EQ(inv->cgroups(), 6u);
  EXPECT_EQ(inv->find(web), nullptr);
  auto removed = inv->take_removed();
  EXPECT_THAT(removed, ::testing::Contains(web));
  inv->match({});
  EXPECT_THAT(names(*inv), ElementsAre("redis", "svc/new"));
}

TEST(InventoryTempTree, WithoutInotifyEveryDirectoryIsListedEachTick) {
  TempDir tmp;
  const SysRoots roots = v1_host(tmp);
  const config::Spec spec = spec_of(kEachWithTasks);
  auto inv = Inventory::open(spec, roots,
                             {.refresh_ticks = 8, .idle_ticks = 32, .resync_ticks = 64, .inotify = false});
  ASSERT_TRUE(inv);
  EXPECT_NE(inv->watching(), "inotify");
  size_t before = inv->listings();
  ASSERT_TRUE(inv->refresh_tree());
  EXPECT_EQ(inv->listings(), before + 5);
  make_tree(tmp.path(), {{"sys/fs/cgroup/cpu/svc/new/cgroup.procs", "77\n"}});
  fs::remove_all(tmp.path() / "sys/fs/cgroup/cpu/svc/web");
  ASSERT_TRUE(inv->refresh_tree());
  inv->match({});
  EXPECT_THAT(names(*inv), ElementsAre("redis*", "svc/new*"));
}

// Identity is the id: a cgroup removed and made again under its name is a new cgroup, and the
// instance it makes up is fresh (nothing decided for the old one carries over).
TEST(InventoryTempTree, ACgroupMadeAgainUnderItsNameIsANewCgroupAndItsInstanceFresh) {
  TempDir tmp;
  const SysRoots roots = v1_host(tmp);
  const config::Spec spec = spec_of(kEachWithTasks);
  for (bool inotify : {true, false}) {
    auto inv = Inventory::open(spec, roots,
                               {.refresh_ticks = 8, .idle_ticks = 8, .resync_ticks = 64, .inotify = inotify});
    ASSERT_TRUE(inv);
    ASSERT_TRUE(inv->refresh_tree());
    inv->match({});
    ASSERT_TRUE(inv->refresh_tree());
    inv->match({});
    const CgroupId old = inv->instances()[0].cgroups[0]->dir.id();
    ASSERT_FALSE(inv->instances()[0].fresh);
    // Made again before the old directory goes, so the temp file system cannot reuse its inode.
    fs::rename(tmp.path() / "sys/fs/cgroup/cpu/svc/redis", tmp.path() / "sys/fs/cgroup/cpu/old-redis");
    make_tree(tmp.path(), {{"sys/fs/cgroup/cpu/svc/redis/cgroup.procs", "11\n"}});
    fs::remove_all(tmp.path() / "sys/fs/cgroup/cpu/old-redis");
    ASSERT_TRUE(inv->refresh_tree());
    inv->match({});
    ASSERT_EQ(inv->instances()[0].name, "redis");
    EXPECT_TRUE(inv->instances()[0].fresh) << "inotify " << inotify;
    EXPECT_NE(inv->instances()[0].cgroups[0]->dir.id(), old);
    EXPECT_EQ(inv->find(old), nullptr);
  }
}

// has_tasks: a cgroup whose tasks ran holds tasks without a read; one that emptied stops matching
// within refresh_ticks ticks; one that filled starts.
TEST(InventoryTempTree, HasTasksIsReadAgainEveryFewTicksUnlessItsTasksRan) {
  TempDir tmp;
  const SysRoots roots = v1_host(tmp);
  const config::Spec spec = spec_of(kEachWithTasks);
  auto inv = Inventory::open(spec, roots,
                             {.refresh_ticks = 4, .idle_ticks = 4, .resync_ticks = 64, .inotify = true});
  ASSERT_TRUE(inv);
  ASSERT_TRUE(inv->refresh_tree());
  inv->match({});
  EXPECT_THAT(names(*inv), ElementsAre("redis*", "svc/web*"));
  make_tree(tmp.path(), {{"sys/fs/cgroup/cpu/svc/web/cgroup.procs", ""},
                         {"sys/fs/cgroup/cpu/svc/idle/cgroup.procs", "5\n"}});
  unsigned ticks = 0, web_gone = 0, idle_came = 0;
  for (; ticks < 8 && !(web_gone && idle_came); ++ticks) {
    ASSERT_TRUE(inv->refresh_tree());
    inv->match({});
    auto now = names(*inv);
    if (!web_gone && std::ranges::find(now, "svc/web") == now.end()) web_gone = ticks + 1;
    if (!idle_came && std::ranges::find(now, "svc/idle*") != now.end()) idle_came = ticks + 1;
  }
  EXPECT_GE(web_gone, 1u);
  EXPECT_LE(web_gone, 4u);
  EXPECT_GE(idle_came, 1u);
  EXPECT_LE(idle_came, 4u);
  // Its tasks ran (the sensor saw them): it holds tasks, whatever cgroup.procs said last.
  const Node* web = nullptr;
  inv->for_each_cgroup([&](const Node& n) {
    if (n.dir.path() == "/svc/web") web = &n;
  });
  ASSERT_NE(web, nullptr);
  const CgroupId id = web->dir.id();
  ASSERT_TRUE(inv->refresh_tree());
  inv->match([&](CgroupId c) { return c == id; });
  auto now = names(*inv);
  EXPECT_NE(std::ranges::find(now, "svc/web*"), now.end());
}

TEST(InventoryTempTree, WhereEachFileIsReadAndTheCpusetThatGovernsACgroup) {
  TempDir tmp;
  const SysRoots roots = v1_host(tmp);
  const config::Spec spec = spec_of(kEachWithTasks);
  auto inv = Inventory::open(spec, roots);
  ASSERT_TRUE(inv);
  ASSERT_TRUE(inv->refresh_tree());
  inv->match({});
  const Node& redis = *inv->instances()[0].cgroups[0];
  const Node& web = *inv->instances()[1].cgroups[0];
  auto procs = inv->place(redis, CgroupFile::procs);
  ASSERT_TRUE(procs);
  EXPECT_EQ(procs->dir, &redis.dir);  // the defining hierarchy: the cgroup itself
  auto usage = inv->place(redis, CgroupFile::usage);
  ASSERT_TRUE(usage);
  EXPECT_EQ(usage->dir->hierarchy().id, 2u);  // cpuacct, at the same path
  EXPECT_EQ(usage->below, "svc/redis");
  EXPECT_EQ(usage->dir->read_u64(CgroupFile::usage, usage->below), 1000u);
  EXPECT_FALSE(inv->place(redis, CgroupFile::cpu_max));  // v2 only
  ASSERT_NE(inv->cpuset_hierarchy(), nullptr);
  EXPECT_EQ(inv->cpuset_hierarchy()->id, 3u);
  EXPECT_EQ(inv->cpuset_cgroup(redis), "/svc/redis");  // laid out alike
  EXPECT_EQ(inv->cpuset_cgroup(web), "/pinned");       // not: its first task's
  const Node* svc = inv->find(redis.parent->dir.id());
  ASSERT_NE(svc, nullptr);
  EXPECT_EQ(inv->cpuset_cgroup(*svc), "/svc");
  const Node* root = inv->find(svc->parent->dir.id());
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(root->dir.path(), "/");
  EXPECT_EQ(inv->cpuset_cgroup(*root), std::nullopt);  // the host's, never a workload's
}

// The cpuset of a cgroup laid out apart is its task's, and only of a task that is still in the cgroup:
// the first pid of cgroup.procs was reused by a process elsewhere (in /other, pinned to CPU 0) before its
// /proc/PID/cgroup was read. Its cpuset is not taken; the next task's is.
TEST(InventoryTempTree, ACpusetFromAReusedPidIsNotTaken) {
  TempDir tmp;
  const SysRoots roots = v1_host(tmp);
  make_tree(tmp.path(), {{"sys/fs/cgroup/cpu/svc/web/cgroup.procs", "5000\n4242\n"},
                         {"proc/5000/cgroup", "3:cpuset:/other\n2:cpuacct:/other\n1:cpu:/other\n"},
                         {"sys/fs/cgroup/cpuset/other/cpuset.cpus", "0\n"}});
  const config::Spec spec = spec_of(kEachWithTasks);  // outlives the inventory
  auto inv = Inventory::open(spec, roots);
  ASSERT_TRUE(inv);
  ASSERT_TRUE(inv->refresh_tree());
  inv->match({});
  const Node& web = *inv->instances()[1].cgroups[0];
  ASSERT_EQ(web.dir.path(), "/svc/web");
  EXPECT_EQ(inv->cpuset_cgroup(web), "/pinned");
}

TEST(InventoryTempTree, V2EveryFileIsTheCgroupsOwn) {
  TempDir tmp;
  make_tree(tmp.path(), {{"proc/self/mountinfo", "41 23 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"},
                         {"proc/cgroups", "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t0\t3\t1\n"},
                         {"sys/fs/cgroup/cgroup.controllers", "cpuset cpu\n"},
                         {"sys/fs/cgroup/cgroup.procs", "1\n"},
                         {"sys/fs/cgroup/app/cgroup.procs", "3\n"},
                         {"sys/fs/cgroup/app/cpu.stat", "usage_usec 5\n"}});
  const config::Spec spec = spec_of("[[workload]]\nname = \"app\"\nmatch = { cgroup = \"/app\" }\n");
  auto inv = Inventory::open(spec, SysRoots::under(tmp.path()));
  ASSERT_TRUE(inv) << inv.error().message();
  EXPECT_TRUE(inv->defining().unified);
  ASSERT_TRUE(inv->refresh_tree());
  inv->match({});
  ASSERT_EQ(inv->instances().size(), 1u);
  const Node& app = *inv->instances()[0].cgroups[0];
  for (CgroupFile f : {CgroupFile::cpu_stat, CgroupFile::weight, CgroupFile::cpus}) {
    auto p = inv->place(app, f);
    ASSERT_TRUE(p);
    EXPECT_EQ(p->dir, &app.dir);
    EXPECT_EQ(p->below, "");
  }
  EXPECT_FALSE(inv->place(app, CgroupFile::usage));
  EXPECT_EQ(inv->cpuset_cgroup(app), "/app");
}

// A pid file rule follows its process: when the process moves to another cgroup the rule's generation
// changes and the cgroups are matched again.
TEST(InventoryTempTree, ARuleWhoseResolutionChangesIsMatchedAgain) {
  TempDir tmp;
  const SysRoots roots = v1_host(tmp);
  // The process started before its pid file was written (pid_file's identity check): btime and
  // starttime (clock ticks) put its start 100 s ago.
  const int64_t boot = ::time(nullptr) - 1000;
  make_tree(tmp.path(), {{"run/app.pid", "4242\n"},
                         {"proc/stat", "btime " + std::to_string(boot) + "\n"},
                         {"proc/4242/stat", "4242 (app) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 " +
                                                std::to_string(900 * ::sysconf(_SC_CLK_TCK)) + " 0 0\n"}});
  const config::Spec spec = spec_of("[[workload]]\nname = \"app\"\nmatch = { pid_file = \"" +
                                    (tmp.path() / "run/app.pid").string() + "\" }\n");
  auto inv = Inventory::open(spec, roots);
  ASSERT_TRUE(inv);
  ASSERT_TRUE(inv->refresh_tree());
  inv->match({});
  ASSERT_EQ(inv->instances().size(), 1u);
  EXPECT_EQ(inv->instances()[0].cgroups[0]->dir.path(), "/svc/web");
  make_tree(tmp.path(), {{"proc/4242/cgroup", "3:cpuset:/pinned\n2:cpuacct:/svc/redis\n1:cpu:/svc/redis\n"}});
  ASSERT_TRUE(inv->refresh_tree());
  inv->match({});
  ASSERT_EQ(inv->instances().size(), 1u);
  EXPECT_EQ(inv->instances()[0].cgroups[0]->dir.path(), "/svc/redis");
  EXPECT_TRUE(inv->instances()[0].fresh);
}

// Every admitted cgroup is held open: the budgets fit the open-files limit with files to spare for the
// rest of keel (its writes and its final restore), so a tenant's thousands of cgroups cannot run keel
// into EMFILE. Limit 40: 10 kept, 5 for critical cgroups past the budget, 25 for the rest.
TEST(InventoryTempTree, TheBudgetsFitTheOpenFilesLimitWithFilesToSpare) {
  TempDir tmp;
  const SysRoots roots = v1_host(tmp);
  for (int i = 0; i < 40; ++i)
    make_tree(tmp.path(), {{"sys/fs/cgroup/cpu/many/" + std::to_string(i) + "/cgroup.procs", ""}});
  const config::Spec spec = spec_of(R"(
[[workload]]
name = "crit"
match = { cgroup = "/svc/crit*" }
class = "critical"
slo = { runqueue_p99 = "200us" }
)");
  auto inv = Inventory::open(spec, roots, {.resync_ticks = 1, .inotify = false, .open_files = 40});
  ASSERT_TRUE(inv) << inv.error().message();
  EXPECT_EQ(inv->cgroups(), 25u);
  make_tree(tmp.path(), {{"sys/fs/cgroup/cpu/svc/crit2/cgroup.procs", "77\n"}});
  ASSERT_TRUE(inv->refresh_tree());
  inv->match({});
  ASSERT_EQ(inv->instances().size(), 1u);
  EXPECT_EQ(inv->cgroups(), 26u) << "the critical one within its reserve";
  // A limit far above the budgets changes nothing.
  auto roomy = Inventory::open(spec, roots, {.inotify = false, .open_files = 1 << 20});
  ASSERT_TRUE(roomy);
  EXPECT_EQ(roomy->cgroups(), 47u);
}

}  // namespace
}  // namespace keel::inv

namespace keel::inv {
namespace {

// A cgroup whose tasks do not run is read for tasks only every idle_ticks (they change then only
// when one is moved while asleep); one whose tasks ran and stopped is read the very next tick, so an
// instance whose tasks exited goes at once.
TEST(InventoryTempTree, TasksThatStopRunningAreLookedForAtOnce) {
  TempDir tmp;
  const SysRoots roots = v1_host(tmp);
  const config::Spec spec = spec_of(kEachWithTasks);
  auto inv = Inventory::open(spec, roots,
                             {.refresh_ticks = 4, .idle_ticks = 1000, .resync_ticks = 64, .inotify = true});
  ASSERT_TRUE(inv);
  ASSERT_TRUE(inv->refresh_tree());
  inv->match({});
  CgroupId web{};
  inv->for_each_cgroup([&](const Node& n) {
    if (n.dir.path() == "/svc/web") web = n.dir.id();
  });
  ASSERT_TRUE(inv->refresh_tree());
  inv->match([&](CgroupId c) { return c == web; });                         // its task runs
  make_tree(tmp.path(), {{"sys/fs/cgroup/cpu/svc/web/cgroup.procs", ""}});  // and exits
  ASSERT_TRUE(inv->refresh_tree());
  inv->match({});
  EXPECT_THAT(names(*inv), ElementsAre("redis"));
  // A task moved in asleep (none runs) is found when the cgroup's idle read is due: every idle_ticks
  // (40 here) after the last read, or earlier at the tick its inode staggers it to; not at once.
  const unsigned k = 40;
  auto slow = Inventory::open(spec, roots,
                              {.refresh_ticks = 4, .idle_ticks = k, .resync_ticks = 64, .inotify = true});
  ASSERT_TRUE(slow);
  struct stat st {};
  ASSERT_EQ(::stat((tmp.path() / "sys/fs/cgroup/cpu/svc/idle").c_str(), &st), 0);
  const uint64_t inode = st.st_ino;
  uint64_t last = 0;  // when the idle cgroup was last read: at once on its first tick, then when due
  auto due = [&](uint64_t t) { return last == 0 || t - last >= k || (t + inode) % k == 0; };
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(slow->refresh_tree());
    slow->match({});
    if (due(slow->tick())) last = slow->tick();
  }
  EXPECT_THAT(names(*slow), ElementsAre("redis"));
  make_tree(tmp.path(), {{"sys/fs/cgroup/cpu/svc/idle/cgroup.procs", "6\n"}});
  uint64_t expected = 0;
  for (uint64_t t = slow->tick() + 1; expected == 0; ++t)
    if (due(t)) expected = t;
  ASSERT_LE(expected - slow->tick(), k);
  uint64_t found = 0;
  for (unsigned i = 0; i <= k && found == 0; ++i) {
    ASSERT_TRUE(slow->refresh_tree());
    slow->match({});
    if (names(*slow).size() == 2) found = slow->tick();
  }
  EXPECT_EQ(found, expected);
}

// A tenant's 1100-level tree with paths far past PATH_MAX: keel run's inventory keeps what is within
// the walk's bounds (host/cgroup.h) and matches it (a glob over a 100 KiB path recursed once per byte
// and overflowed the stack), both when found at open and when made later (inotify).
constexpr const char* kEverythingUnderSvc = R"(
[[workload]]
name = "svc"
match = { cgroup = "/svc/**", each = true }
)";

TEST(InventoryTempTree, A1100LevelTreeIsCutAtTheBoundsAndMatchedWithoutCrashing) {
  for (bool inotify : {false, true}) {
    SCOPED_TRACE(inotify ? "made after open (inotify)" : "there at open");
    TempDir tmp;
    const SysRoots roots = v1_host(tmp);
    const fs::path svc = tmp.path() / "sys/fs/cgroup/cpu/svc";
    const std::string name(100, 'n');
    if (!inotify) {
      ASSERT_TRUE(testing::make_deep_chain(svc, 1100, name, "cgroup.procs"));
    }
    const config::Spec spec = spec_of(kEverythingUnderSvc);
    auto inv = Inventory::open(spec, roots, {.inotify = inotify});
    ASSERT_TRUE(inv) << inv.error().message();
    if (inotify) {
      ASSERT_EQ(inv->watching(), "inotify");
      ASSERT_TRUE(testing::make_deep_chain(svc, 1100, name, "cgroup.procs"));
    }
    ASSERT_TRUE(inv->refresh_tree());
    inv->match({});
    // /, /svc, /svc/{redis,web,idle} and the chain while its path fits 3072 bytes (29 levels below /svc).
    const size_t levels = (kMaxCgroupPath - 4) / (name.size() + 1);
    EXPECT_EQ(inv->cgroups(), 5 + levels);
    size_t longest = 0;
    inv->for_each_cgroup([&](const Node& n) { longest = std::max(longest, n.dir.path().size()); });
    EXPECT_EQ(longest, 4 + levels * (name.size() + 1));
    EXPECT_EQ(inv->skipped().count[CgroupSkips::too_long], 1u);
    EXPECT_THAT(inv->skipped().message(), ::testing::HasSubstr("1 with a path longer than 3072 bytes"));
    EXPECT_THAT(names(*inv), ::testing::Contains("svc/" + name + "*"));
  }
}

TEST(InventoryTempTree, CgroupsPastTheCountBoundAreLeftOutAndComeInWhenThereIsRoom) {
  TempDir tmp;
  const SysRoots roots = v1_host(tmp);
  for (int i = 0; i < 10; ++i)
    make_tree(tmp.path(), {{"sys/fs/cgroup/cpu/many/" + std::to_string(i) + "/cgroup.procs", ""}});
  const config::Spec spec = spec_of(kEachWithTasks);
  // 5 cgroups of v1_host, /many and 10 below it: 16, of which 12 are kept.
  auto inv = Inventory::open(spec, roots, {.resync_ticks = 1, .inotify = false, .max_cgroups = 12});
  ASSERT_TRUE(inv) << inv.error().message();
  // 12 of them, and /svc/redis, which the critical rule takes, past them where the listing order put it
  // after the 12th (tmpfs here; the guest's ext4 lists it earlier).
  ASSERT_TRUE(inv->refresh_tree());
  inv->match({});
  EXPECT_TRUE(std::ranges::any_of(inv->instances(), [](const Instance& i) { return i.name == "redis"; }))
      << "the critical cgroup is in, wherever it was listed";
  EXPECT_GE(inv->cgroups(), 12u);
  EXPECT_LE(inv->cgroups(), 13u);
  EXPECT_EQ(inv->cgroups() + inv->skipped().count[CgroupSkips::too_many], 16u);
  EXPECT_THAT(inv->skipped().message(), ::testing::HasSubstr(" past the first 12 cgroups"));
  for (int i = 0; i < 10; ++i) fs::remove_all(tmp.path() / "sys/fs/cgroup/cpu/many" / std::to_string(i));
  ASSERT_TRUE(inv->refresh_tree());
  EXPECT_EQ(inv->cgroups(), 6u);
  EXPECT_TRUE(inv->skipped().empty());
}

// Issue 38: admission was first come. Whoever can make cgroups (a user's systemd session, a container
// with a delegated subtree) filled the budget, and a critical container started after that was never
// seen. A user's subtrees now share half the budget, and a cgroup a critical rule would take comes in
// past a full one.
TEST(InventoryTempTree, AUserCannotFillTheBudgetAndACriticalCgroupIsAdmittedPastAFullOne) {
  TempDir tmp;
  const SysRoots roots = v1_host(tmp);
  const std::string user = "sys/fs/cgroup/cpu/user.slice/user-1000.slice/user@1000.service/";
  for (int i = 0; i < 20; ++i)
    make_tree(tmp.path(), {{user + "app-" + std::to_string(i) + "/cgroup.procs", ""}});
  const config::Spec spec = spec_of(R"(
[[workload]]
name = "crit"
match = { cgroup = "/svc/crit*" }
class = "critical"
slo = { runqueue_p99 = "200us" }
)");
  auto inv = Inventory::open(spec, roots, {.resync_ticks = 1, .inotify = false, .max_cgroups = 16});
  ASSERT_TRUE(inv) << inv.error().message();
  EXPECT_EQ(inv->user_cgroups(), 8u) << "half the budget";
  EXPECT_LT(inv->cgroups(), 16u) << "room left for the host's cgroups";
  // The host's own cgroups fill the rest; the critical one made after them still comes in.
  for (int i = 0; i < 10; ++i)
    make_tree(tmp.path(), {{"sys/fs/cgroup/cpu/many/" + std::to_string(i) + "/cgroup.procs", ""}});
  ASSERT_TRUE(inv->refresh_tree());
  EXPECT_EQ(inv->cgroups(), 16u);
  make_tree(tmp.path(), {{"sys/fs/cgroup/cpu/svc/crit2/cgroup.procs", "77\n"},
                         {"sys/fs/cgroup/cpu/svc/other/cgroup.procs", ""}});
  ASSERT_TRUE(inv->refresh_tree());
  inv->match({});
  ASSERT_EQ(inv->instances().size(), 1u);
  EXPECT_EQ(inv->instances()[0].cgroups[0]->dir.path(), "/svc/crit2");
  EXPECT_EQ(inv->cgroups(), 17u) << "the critical one past the budget, not the other";
}

}  // namespace
}  // namespace keel::inv
