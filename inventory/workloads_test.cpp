#include "inventory/workloads.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/tmp_tree.h"

namespace keel {
namespace {

namespace fs = std::filesystem;
using ::keel::testing::make_tree;
using ::keel::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

// ---- Glob ----

struct GlobCase {
  const char* pattern;
  const char* path;
  bool match;
};

TEST(Glob, Cases) {
  const GlobCase cases[] = {
      {"/redis*", "/redis", true},
      {"/redis*", "/redis-1", true},
      {"/redis*", "/redis/child", false},
      {"/redis*", "/rediscover", true},
      {"/system.slice/**", "/system.slice/a.service", true},
      {"/system.slice/**", "/system.slice/a.slice/b.service", true},
      {"/system.slice/**", "/system.slice", false},
      {"/system.slice/**", "/user.slice/x", false},
      {"/**", "/", false},
      {"/**", "/a", true},
      {"/a/**/b", "/a/b", true},
      {"/a/**/b", "/a/x/y/b", true},
      {"/a/**/b", "/a/xb", false},
      {"/**/redis.service", "/system.slice/redis.service", true},
      {"**.service", "/system.slice/redis.service", true},
      {"/docker/*", "/docker/abc", true},
      {"/docker/*", "/docker/abc/def", false},
      {"/a?c", "/abc", true},
      {"/a?c", "/a/c", false},
      {"/a?c", "/ac", false},
      {"/pod[0-9]", "/pod7", true},
      {"/pod[0-9]", "/podx", false},
      {"/pod[!0-9]", "/podx", true},
      {"/pod[^0-9]", "/pod7", false},
      {"/x[]]", "/x]", true},
      {"/x[ab-]", "/x-", true},
      {"/x[a/]", "/x/", false},
      {"/x[", "/x[", true},  // unclosed bracket is literal
      {"/a\\*", "/a*", true},
      {"/a\\*", "/ab", false},
      {"/", "/", true},
      {"", "", true},
      {"/*", "/", true},
      {"/a*b*c", "/aXbYc", true},
      {"/a*b*c", "/aXbY", false},
  };
  for (const GlobCase& c : cases)
    EXPECT_EQ(glob_match(c.pattern, c.path), c.match) << c.pattern << " vs " << c.path;
}

// Plain backtracking tries every way to split the path among the stars: this pattern against a
// 60-character path took seconds (exponential in the number of **), and globs run per cgroup per tick.
TEST(Glob, ManyStarsOnALongPathStayPolynomial) {
  const std::string many = "/**a**a**a**a**a**a**b";
  const std::string as = "/" + std::string(59, 'a');
  EXPECT_FALSE(glob_match(many, as));
  EXPECT_TRUE(glob_match(many, as + "b"));
  EXPECT_FALSE(glob_match(many, as + "/c"));
  EXPECT_TRUE(glob_match(many, "/aaaaaa/b"));  // ** spans levels
  std::string levels;
  for (int i = 0; i < 30; ++i) levels += "/a";
  EXPECT_FALSE(glob_match(many, levels));
  EXPECT_TRUE(glob_match(many, levels + "b"));
  // Single stars stay within their level, however many there are.
  EXPECT_FALSE(glob_match("/*a*a*a*a*a*a*a*a*b", as));
  EXPECT_TRUE(glob_match("/*a*a*a*a*a*a*a*a*b", as + "b"));
  EXPECT_FALSE(glob_match("/*a*a*a*a*a*a*a*a*b", "/aaaa/aaaab"));
}

// A loop over every position where a star could end made "*a*a...*b" cubic in the lengths (a 4 KiB
// pattern and path took minutes under the fuzzer); each position is decided once, in constant work.
TEST(Glob, StarChainsOnALongPathDecideEachPositionOnce) {
  std::string stars = "/", globstars = "/", as = "/" + std::string(1000, 'a'), levels;
  for (int i = 0; i < 100; ++i) stars += "*a";
  stars += "*b";
  for (int i = 0; i < 30; ++i) globstars += "**a";
  globstars += "**b";
  for (int i = 0; i < 500; ++i) levels += "/a";
  EXPECT_FALSE(glob_match(stars, as));
  EXPECT_TRUE(glob_match(stars, as + "b"));
  EXPECT_FALSE(glob_match(globstars, levels));
  EXPECT_TRUE(glob_match(globstars, levels + "b"));
  auto bound = [](const std::string& p, const std::string& s) {
    return 1 + 3 * (p.size() + 1) * (s.size() + 1);
  };
  EXPECT_LE(glob_match_steps(stars, as), bound(stars, as));
  EXPECT_LE(glob_match_steps(globstars, levels), bound(globstars, levels));
  EXPECT_LE(glob_match_steps("/system.slice/redis.service", "/system.slice/redis.service"), 28u);
}

// ---- Container and pod path shapes ----

const std::string kId = "4f3c2b1a09e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2918070605040302010ab";
const std::string kId2 = "aaaa2b1a09e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2918070605040302010ab";
const std::string kUid = "3f1c2d4e-1234-4678-9abc-def012345678";
const std::string kUidUnderscore = "3f1c2d4e_1234_4678_9abc_def012345678";

TEST(PathShapes, DockerContainerId) {
  EXPECT_EQ(docker_container_id("/docker/" + kId), kId);
  EXPECT_EQ(docker_container_id("/system.slice/docker-" + kId + ".scope"), kId);
  EXPECT_EQ(docker_container_id("/kubepods/burstable/pod" + kUid + "/docker-" + kId + ".scope"), kId);
  EXPECT_EQ(docker_container_id("/other/" + kId), "");
  EXPECT_EQ(docker_container_id("/docker"), "");
  EXPECT_EQ(docker_container_id("/docker/abc"), "");
  EXPECT_EQ(docker_container_id("/system.slice/docker.service"), "");
  EXPECT_EQ(docker_container_id("/system.slice/docker-" + kId.substr(1) + ".scope"), "");
}

const std::vector<std::string>& pod_layouts() {
  static const std::vector<std::string> paths = {
      "/kubepods/pod" + kUid,
      "/kubepods/burstable/pod" + kUid,
      "/kubepods/besteffort/pod" + kUid,
      "/kubepods.slice/kubepods-pod" + kUidUnderscore + ".slice",
      "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + kUidUnderscore + ".slice",
      "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + kUidUnderscore + ".slice",
  };
  return paths;
}

TEST(PathShapes, KubepodsPodUid) {
  for (size_t i = 0; i < pod_layouts().size(); ++i)
    EXPECT_EQ(kubepods_pod_uid(pod_layouts()[i]), i < 3 ? kUid : kUidUnderscore) << pod_layouts()[i];
  EXPECT_EQ(kubepods_pod_uid("/kubepods"), "");
  EXPECT_EQ(kubepods_pod_uid("/kubepods/burstable"), "");
  EXPECT_EQ(kubepods_pod_uid("/kubepods.slice/kubepods-burstable.slice"), "");
  EXPECT_EQ(kubepods_pod_uid("/kubepods/burstable/pod" + kUid + "/" + kId), "");
  EXPECT_EQ(kubepods_pod_uid("/other/pod" + kUid), "");
  EXPECT_EQ(kubepods_pod_uid("/burstable/pod" + kUid), "");
}

// Each shape is anchored to the parents its runtime creates: the same last element elsewhere (a subtree
// delegated to a user, a container inside a container, a pod path under another parent, a pod slice in
// another QoS class's slice) is not a container or a pod. Each of these matched before.
TEST(PathShapes, ImpostorsOutsideTheRuntimesParentsAreNotContainersOrPods) {
  const std::string user_app = "/user.slice/user-1000.slice/user@1000.service/app.slice";
  EXPECT_EQ(docker_container_id(user_app + "/docker-" + kId + ".scope"), "");
  EXPECT_EQ(docker_container_id("/x/docker/" + kId), "");
  EXPECT_EQ(docker_container_id("/docker/" + kId + "/docker/" + kId), "");
  EXPECT_EQ(docker_container_id("/machine.slice/docker-" + kId + ".scope"), "");
  EXPECT_EQ(docker_container_id("/x/kubepods/burstable/pod" + kUid + "/" + kId), "");
  EXPECT_EQ(docker_container_id("/kubepods/burstable/pod" + kUid + "/" + kId), kId);
  EXPECT_EQ(kubepods_pod_uid("/x/kubepods/pod" + kUid), "");
  EXPECT_EQ(kubepods_pod_uid(user_app + "/kubepods/pod" + kUid), "");
  EXPECT_EQ(kubepods_pod_uid("/docker/" + kId + "/kubepods/burstable/pod" + kUid), "");
  EXPECT_EQ(kubepods_pod_uid("/kubepods.slice/kubepods-burstable.slice/kubepods-besteffort-pod" +
                             kUidUnderscore + ".slice"),
            "");
  EXPECT_EQ(kubepods_pod_uid("/x.slice/kubepods-pod" + kUidUnderscore + ".slice"), "");
  EXPECT_EQ(kubepods_pod_uid("/kubepods.slice/kubepods-pod.slice"), "");
}

// systemd puts units in slices only: a "unit" below a service or scope (a delegated subtree, or one VM's
// scope inside another's) is not the unit, and matched before.
TEST(PathShapes, SystemdUnitsLiveInSlicesOnly) {
  EXPECT_TRUE(systemd_unit_path("/system.slice/redis-server.service"));
  EXPECT_TRUE(systemd_unit_path("/init.scope"));
  EXPECT_TRUE(systemd_unit_path("/machine.slice/machine-qemu\\x2d1\\x2dvm1.scope"));
  EXPECT_TRUE(systemd_unit_path("/a.slice/a-b.slice/x.service"));
  EXPECT_FALSE(systemd_unit_path("/"));
  EXPECT_FALSE(
      systemd_unit_path("/user.slice/user-1000.slice/user@1000.service/app.slice/redis-server.service"));
  EXPECT_FALSE(
      systemd_unit_path("/machine.slice/machine-qemu\\x2d2\\x2dvm2.scope/machine-qemu\\x2d1\\x2dvm1.scope"));
  EXPECT_FALSE(systemd_unit_path("/docker/" + kId + "/system.slice/redis-server.service"));
}

TEST(PathShapes, HostDaemonsAreInitAndSystemServicesNotContainersScopesNorAServicesContainers) {
  EXPECT_TRUE(host_daemon_path("/init.scope"));
  EXPECT_TRUE(host_daemon_path("/system.slice/systemd-journald.service"));
  EXPECT_TRUE(host_daemon_path("/system.slice/containerd.service"));
  EXPECT_TRUE(host_daemon_path("/system.slice/system-getty.slice/getty@tty1.service"));
  // Below a service, its own subgroups are the daemon's; a container it runs there (a podman
  // quadlet's) is not.
  EXPECT_TRUE(host_daemon_path("/system.slice/systemd-udevd.service/udev"));
  EXPECT_FALSE(host_daemon_path("/system.slice/app.service/libpod-payload-" + kId));
  EXPECT_FALSE(host_daemon_path("/system.slice/app.service/supervisor/libpod-" + kId + ".scope"));
  EXPECT_TRUE(host_daemon_path("/system.slice/app.service/" + kId.substr(1)));  // 63 digits: no id
  EXPECT_FALSE(host_daemon_path("/"));
  EXPECT_FALSE(host_daemon_path("/system.slice"));
  EXPECT_FALSE(host_daemon_path("/system.slice/docker-" + kId + ".scope"));
  EXPECT_FALSE(host_daemon_path("/system.slice/run-r1.scope/x.service"));  // a scope's subtree is its own
  EXPECT_FALSE(host_daemon_path("/system.slice/.service"));
  EXPECT_FALSE(host_daemon_path("/machine.slice/machine-qemu\\x2d1\\x2dvm1.scope"));
  EXPECT_FALSE(host_daemon_path("/user.slice/user-1000.slice/user@1000.service"));
  EXPECT_FALSE(host_daemon_path("/kubepods.slice/kubepods-besteffort.slice"));
  EXPECT_FALSE(host_daemon_path("/docker/" + kId + "/system.slice/sshd.service"));
  EXPECT_FALSE(host_daemon_path("/init.scope.d"));
}

TEST(MatchRules, ARuleNamesOneCgroupOnlyByALiteralPathUnitOrAPidFile) {
  auto exact = [](const char* key, const char* value) {
    config::Match m;
    if (std::string_view(key) == "cgroup") m.cgroup = value;
    if (std::string_view(key) == "unit") m.systemd_unit = value;
    if (std::string_view(key) == "pid_file") m.pid_file = value;
    if (std::string_view(key) == "docker") m.docker = value;
    return MatchRules({{"w", std::move(m), false}}).names_exactly(0);
  };
  EXPECT_TRUE(exact("cgroup", "/system.slice/backup.service"));
  EXPECT_TRUE(exact("unit", "backup.service"));
  EXPECT_TRUE(exact("pid_file", "/run/backup.pid"));
  EXPECT_FALSE(exact("cgroup", "/system.slice/**"));
  EXPECT_FALSE(exact("cgroup", "/system.slice/b?ckup.service"));
  EXPECT_FALSE(exact("unit", "*.service"));
  EXPECT_FALSE(exact("unit", "backup[12].service"));
  EXPECT_FALSE(exact("docker", "backup"));
}

// ---- Matching ----

config::Workload workload(std::string name, config::Match match) {
  config::Workload w;
  w.name = std::move(name);
  w.match = std::move(match);
  return w;
}

// One selector each (designated initializers would leave fields out, which -Wextra rejects).
config::Match by_cgroup(std::string glob) {
  config::Match m;
  m.cgroup = std::move(glob);
  return m;
}
config::Match by_unit(std::string unit) {
  config::Match m;
  m.systemd_unit = std::move(unit);
  return m;
}
config::Match by_docker(std::string container) {
  config::Match m;
  m.docker = std::move(container);
  return m;
}
config::Match by_pod(std::string uid) {
  config::Match m;
  m.pod = std::move(uid);
  return m;
}
config::Match by_pid_file(fs::path file) {
  config::Match m;
  m.pid_file = std::move(file);
  return m;
}
config::Match with_tasks(config::Match m) {
  m.has_tasks = true;
  return m;
}
config::Match each(config::Match m) {
  m.each = true;
  return m;
}

CgroupHierarchy cpu_hierarchy() {
  CgroupHierarchy h;
  h.id = 1;
  h.controllers = {"cpu"};
  return h;
}

std::vector<Cgroup> cgroups_at(const std::vector<std::pair<std::string, unsigned>>& paths_and_procs) {
  std::vector<Cgroup> out;
  uint64_t inode = 100;
  for (const auto& [path, procs] : paths_and_procs) out.push_back(Cgroup{path, CgroupId{1, inode++}, procs});
  return out;
}

// workload name (or "-") per cgroup, in order.
std::vector<std::string> owners(const WorkloadMatches& m) {
  std::vector<std::string> out;
  for (const WorkloadMatch& r : m.cgroups) out.push_back(r.workload.empty() ? "-" : r.workload);
  return out;
}

TEST(MatchWorkloads, CgroupGlobFirstMatchWins) {
  auto cgroups = cgroups_at(
      {{"/", 5}, {"/redis", 1}, {"/redis-1", 1}, {"/system.slice", 0}, {"/system.slice/a.service", 2}});
  std::vector<config::Workload> ws = {workload("redis", by_cgroup("/redis*")),
                                      workload("everything", by_cgroup("/**")),
                                      workload("never", by_cgroup("/nothing"))};
  WorkloadMatches m = match_workloads(ws, cpu_hierarchy(), cgroups, SysRoots::under("/nonexistent"));
  EXPECT_THAT(owners(m), ::testing::ElementsAre("-", "redis", "redis", "everything", "everything"));
  EXPECT_EQ(m.cgroups[1].selector, Selector::cgroup);
  EXPECT_EQ(m.cgroups[1].instance, "redis");
  EXPECT_EQ(m.cgroups[1].id, (CgroupId{1, 101}));
  ASSERT_EQ(m.workloads.size(), 3u);
  EXPECT_EQ(m.workloads[0].cgroups, 2u);
  EXPECT_EQ(m.workloads[0].procs, 2u);
  EXPECT_EQ(m.workloads[1].cgroups, 2u);
  EXPECT_EQ(m.workloads[2].cgroups, 0u);
}

TEST(MatchWorkloads, HasTasksAndEach) {
  auto cgroups = cgroups_at({{"/system.slice", 0},
                             {"/system.slice/a.service", 2},
                             {"/system.slice/b.service", 0},
                             {"/system.slice/c.slice/d.service", 1}});
  std::vector<config::Workload> ws = {workload("services", each(with_tasks(by_cgroup("/system.slice/**"))))};
  WorkloadMatches m = match_workloads(ws, cpu_hierarchy(), cgroups, SysRoots::under("/nonexistent"));
  EXPECT_THAT(owners(m), ::testing::ElementsAre("-", "services", "-", "services"));
  EXPECT_EQ(m.cgroups[1].instance, "services/a.service");
  EXPECT_EQ(m.cgroups[3].instance, "services/d.service");
  EXPECT_EQ(m.workloads[0].cgroups, 2u);
  EXPECT_EQ(m.workloads[0].procs, 3u);
}

TEST(MatchWorkloads, SystemdUnitByNameOrGlob) {
  auto cgroups = cgroups_at({{"/system.slice/redis-server.service", 1},
                             {"/system.slice/docker-" + kId + ".scope", 1},
                             {"/system.slice/redis-server.service.d", 0},
                             {"/system.slice/dev-disk-by\\x2duuid.swap", 0}});
  std::vector<config::Workload> ws = {workload("redis", by_unit("redis-server.service")),
                                      workload("containers", by_unit("docker-*.scope")),
                                      workload("swap", by_unit("dev-disk-by\\x2duuid.swap"))};
  WorkloadMatches m = match_workloads(ws, cpu_hierarchy(), cgroups, SysRoots::under("/nonexistent"));
  EXPECT_THAT(owners(m), ::testing::ElementsAre("redis", "containers", "-", "swap"));
  EXPECT_EQ(m.cgroups[0].selector, Selector::systemd_unit);
}

// A docker state directory with containers `redis` (kId) and `nginx` (kId2).
SysRoots docker_host(const TempDir& tmp) {
  auto config_json = [](const std::string& id, const std::string& name) {
    return R"({"State":{"Running":true},"ID":")" + id + R"(","Config":{"Hostname":"x"},"Name":"/)" + name +
           R"(","MountPoints":{"/data":{"Name":"volume1","Destination":"/data"}}})";
  };
  make_tree(tmp.path(),
            {{"var/lib/docker/containers/" + kId + "/config.v2.json", config_json(kId, "redis")},
             {"var/lib/docker/containers/" + kId2 + "/config.v2.json", config_json(kId2, "nginx")},
             {"var/lib/docker/containers/not-an-id/config.v2.json", config_json(kId, "evil")}});
  return SysRoots::under(tmp.path());
}

TEST(MatchWorkloads, DockerByNameBothDrivers) {
  TempDir tmp;
  const SysRoots roots = docker_host(tmp);
  auto cgroups = cgroups_at({{"/docker/" + kId, 1},
                             {"/system.slice/docker-" + kId + ".scope", 1},
                             {"/docker/" + kId2, 1},
                             {"/docker", 0}});
  std::vector<config::Workload> ws = {
      workload("cache", by_docker("redis")), workload("web", by_docker("/nginx")),
      workload("evil", by_docker("evil")), workload("volume", by_docker("volume1"))};
  WorkloadMatches m = match_workloads(ws, cpu_hierarchy(), cgroups, roots);
  EXPECT_THAT(owners(m), ::testing::ElementsAre("cache", "cache", "web", "-"));
  EXPECT_EQ(m.cgroups[0].selector, Selector::docker);
  EXPECT_THAT(m.workloads[2].note, HasSubstr("no container by that name"));
  EXPECT_THAT(m.workloads[3].note, HasSubstr("'volume1'"));
}

TEST(MatchWorkloads, DockerNamesReResolveEachDiscovery) {
  TempDir tmp;
  const SysRoots roots = docker_host(tmp);
  auto cgroups = cgroups_at({{"/docker/" + kId, 1}, {"/docker/" + kId2, 1}});
  std::vector<config::Workload> ws = {workload("cache", by_docker("redis"))};
  EXPECT_THAT(owners(match_workloads(ws, cpu_hierarchy(), cgroups, roots)),
              ::testing::ElementsAre("cache", "-"));
  // redis restarted as a new container (the id of the former nginx), nginx is gone.
  fs::remove_all(roots.docker_state / "containers" / kId);
  make_tree(roots.docker_state, {{"containers/" + kId2 + "/config.v2.json", R"({"Name":"/redis"})"}});
  EXPECT_THAT(owners(match_workloads(ws, cpu_hierarchy(), cgroups, roots)),
              ::testing::ElementsAre("-", "cache"));
}

// Rules kept across ticks (the inventory's): a container renamed or replaced re-resolves, and only
// the rules whose resolution changed get a new generation; an unchanged config is not re-read.
TEST(MatchRules, ResolveAgainFollowsContainersAndBumpsOnlyChangedRules) {
  TempDir tmp;
  const SysRoots roots = docker_host(tmp);
  MatchRules rules({{"cache", by_docker("redis")}, {"web", by_docker("nginx")}, {"all", by_cgroup("/**")}});
  rules.resolve(cpu_hierarchy(), roots);
  EXPECT_TRUE(rules.selects(0, "/docker/" + kId));
  EXPECT_FALSE(rules.selects(0, "/docker/" + kId2));
  EXPECT_TRUE(rules.selects(1, "/docker/" + kId2));
  const uint64_t g0 = rules.generation(0), g1 = rules.generation(1), g2 = rules.generation(2);
  rules.resolve(cpu_hierarchy(), roots);  // nothing changed
  EXPECT_EQ(rules.generation(0), g0);
  EXPECT_EQ(rules.generation(1), g1);
  // nginx renamed to redis (docker rename rewrites config.v2.json): both docker rules change.
  make_tree(roots.docker_state, {{"containers/" + kId2 + "/config.v2.json", R"({"Name":"/redis", "x":1})"}});
  rules.resolve(cpu_hierarchy(), roots);
  EXPECT_TRUE(rules.selects(0, "/docker/" + kId2));
  EXPECT_FALSE(rules.selects(1, "/docker/" + kId2));
  EXPECT_NE(rules.generation(0), g0);
  EXPECT_NE(rules.generation(1), g1);
  EXPECT_EQ(rules.generation(2), g2);
  EXPECT_THAT(rules.note(1), HasSubstr("no container by that name"));
  EXPECT_EQ(rules.instance_name(2, "/a/b"), "all");
}

TEST(MatchWorkloads, DockerByIdOrPrefix) {
  auto cgroups = cgroups_at({{"/docker/" + kId, 1}, {"/system.slice/docker-" + kId2 + ".scope", 1}});
  const SysRoots nowhere = SysRoots::under("/nonexistent");
  std::vector<config::Workload> full = {workload("a", by_docker(kId))};
  EXPECT_THAT(owners(match_workloads(full, cpu_hierarchy(), cgroups, nowhere)),
              ::testing::ElementsAre("a", "-"));
  std::vector<config::Workload> prefix = {workload("b", by_docker(kId2.substr(0, 12)))};
  EXPECT_THAT(owners(match_workloads(prefix, cpu_hierarchy(), cgroups, nowhere)),
              ::testing::ElementsAre("-", "b"));
  // Shorter than 12 hex digits: a name, which no container has here.
  std::vector<config::Workload> short_prefix = {workload("c", by_docker(kId2.substr(0, 11)))};
  WorkloadMatches m = match_workloads(short_prefix, cpu_hierarchy(), cgroups, nowhere);
  EXPECT_THAT(owners(m), ::testing::ElementsAre("-", "-"));
  EXPECT_THAT(m.workloads[0].note,
              HasSubstr("no container by that name in /nonexistent/var/lib/docker/containers"));
}

TEST(MatchWorkloads, PodUidInEveryKubepodsLayout) {
  std::vector<std::pair<std::string, unsigned>> paths = {{"/kubepods", 0}, {"/kubepods/burstable", 0}};
  for (const std::string& p : pod_layouts()) paths.emplace_back(p, 1);
  paths.emplace_back("/kubepods/burstable/pod" + kUid + "/" + kId, 1);  // a container of the pod: its tasks
  auto cgroups = cgroups_at(paths);
  for (const std::string& uid : {kUid, kUidUnderscore}) {
    std::vector<config::Workload> ws = {workload("pod", by_pod(uid))};
    WorkloadMatches m = match_workloads(ws, cpu_hierarchy(), cgroups, SysRoots::under("/nonexistent"));
    EXPECT_THAT(owners(m), ::testing::ElementsAre("-", "-", "pod", "pod", "pod", "pod", "pod", "pod", "pod"))
        << uid;
    EXPECT_EQ(m.cgroups[2].selector, Selector::pod);
  }
  std::vector<config::Workload> other = {workload("pod", by_pod("00000000-1234-4678-9abc-def012345678"))};
  EXPECT_EQ(
      match_workloads(other, cpu_hierarchy(), cgroups, SysRoots::under("/nonexistent")).workloads[0].cgroups,
      0u);
}

// A fake /proc where each pid started `ago` seconds before now (btime and /proc/PID/stat's starttime).
std::vector<std::pair<std::string, std::string>> started(const std::map<pid_t, int64_t>& ago) {
  const int64_t now = ::time(nullptr), hz = ::sysconf(_SC_CLK_TCK), boot = now - 100000;
  std::vector<std::pair<std::string, std::string>> files = {
      {"proc/stat", "cpu  1 2 3\nbtime " + std::to_string(boot) + "\n"}};
  for (const auto& [pid, s] : ago)
    files.emplace_back("proc/" + std::to_string(pid) + "/stat",
                       std::to_string(pid) + " (a (b) c) S 1 1 1 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 " +
                           std::to_string((now - s - boot) * hz) + " 1000 100\n");
  return files;
}

TEST(MatchWorkloads, PidFile) {
  TempDir tmp;
  make_tree(tmp.path(), started({{4242, 60}, {1, 100000}}));
  make_tree(tmp.path(), {{"run/redis.pid", "4242\n"},
                         {"run/dead.pid", "999\n"},
                         {"run/garbage.pid", "abc\n"},
                         {"proc/4242/cgroup", "3:cpuset:/\n1:cpu:/system.slice/redis.service\n0::/\n"}});
  const SysRoots roots = SysRoots::under(tmp.path());
  auto cgroups = cgroups_at({{"/", 10}, {"/system.slice", 0}, {"/system.slice/redis.service", 1}});
  std::vector<config::Workload> ws = {workload("redis", by_pid_file(tmp.path() / "run/redis.pid")),
                                      workload("dead", by_pid_file(tmp.path() / "run/dead.pid")),
                                      workload("missing", by_pid_file(tmp.path() / "run/missing.pid")),
                                      workload("garbage", by_pid_file(tmp.path() / "run/garbage.pid"))};
  WorkloadMatches m = match_workloads(ws, cpu_hierarchy(), cgroups, roots);
  EXPECT_THAT(owners(m), ::testing::ElementsAre("-", "-", "redis"));
  EXPECT_EQ(m.cgroups[2].selector, Selector::pid_file);
  EXPECT_THAT(m.workloads[1].note, HasSubstr("pid 999"));
  EXPECT_THAT(m.workloads[1].note, HasSubstr("is not running"));
  EXPECT_THAT(m.workloads[2].note, HasSubstr("missing.pid"));
  EXPECT_THAT(m.workloads[3].note, HasSubstr("not a pid"));
}

// Issue 38: a pid_file rule re-resolved the pid every tick with no check of the process's identity, so
// after the critical daemon died and left its pid file, a tenant given the same pid was matched as
// critical (and got pool CPUs). Now the process must have started no later than the file was written,
// and while the file stays as it is, be the very process first matched.
TEST(MatchWorkloads, AStalePidFileMatchesNothingAndAPidReusedSinceIsNotThePinnedProcess) {
  TempDir tmp;
  const fs::path file = tmp.path() / "run/redis.pid";
  make_tree(tmp.path(), started({{4242, 600}}));
  make_tree(tmp.path(), {{"run/redis.pid", "4242\n"},
                         {"proc/4242/cgroup", "1:cpu:/system.slice/redis.service\n0::/\n"},
                         {"proc/5353/cgroup", "1:cpu:/user.slice/tenant\n0::/\n"}});
  auto mtime_ago = [&](int64_t s) {
    const timespec t[2] = {{::time(nullptr) - s, 0}, {::time(nullptr) - s, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, file.c_str(), t, 0), 0);
  };
  mtime_ago(300);  // written 5 minutes after its daemon started
  const SysRoots roots = SysRoots::under(tmp.path());
  auto cgroups = cgroups_at({{"/", 10},
                             {"/system.slice", 0},
                             {"/system.slice/redis.service", 1},
                             {"/user.slice", 0},
                             {"/user.slice/tenant", 1}});
  const std::vector<NamedMatch> redis = {{"redis", by_pid_file(file), true}};
  MatchRules rules(redis);
  auto owners_now = [&] {
    rules.resolve(cpu_hierarchy(), roots);
    std::vector<std::string> out;
    for (const auto& c : cgroups) out.push_back(rules.selects(0, c.path) ? "redis" : "-");
    return out;
  };
  EXPECT_THAT(owners_now(), ::testing::ElementsAre("-", "-", "redis", "-", "-"));
  EXPECT_EQ(rules.note(0), "");

  // redis dies, its file stays; the pid goes to a tenant's process started a minute ago.
  make_tree(tmp.path(), started({{4242, 60}}));
  make_tree(tmp.path(), {{"proc/4242/cgroup", "1:cpu:/user.slice/tenant\n0::/\n"}});
  EXPECT_THAT(owners_now(), ::testing::ElementsAre("-", "-", "-", "-", "-"));
  EXPECT_THAT(rules.note(0), HasSubstr("is another process than the one it named"));

  // A keel started after that (nothing pinned): the process started after the file was written.
  MatchRules fresh(redis);
  fresh.resolve(cpu_hierarchy(), roots);
  EXPECT_FALSE(fresh.selects(0, "/user.slice/tenant"));
  EXPECT_THAT(fresh.note(0), HasSubstr("started 240 s after the file was last written: a stale pid file"));

  // redis starts again and writes its file: matched again, pinned anew.
  make_tree(tmp.path(), started({{5353, 2}}));
  make_tree(tmp.path(),
            {{"run/redis.pid", "5353\n"}, {"proc/5353/cgroup", "1:cpu:/system.slice/redis.service\n0::/\n"}});
  EXPECT_THAT(owners_now(), ::testing::ElementsAre("-", "-", "redis", "-", "-"));
  EXPECT_EQ(rules.note(0), "");
}

// The unit selector takes the unit, not a same-named cgroup inside another unit's delegated subtree.
TEST(MatchWorkloads, ASystemdUnitInsideAnotherUnitsSubtreeIsNotTheUnit) {
  auto cgroups =
      cgroups_at({{"/system.slice/redis-server.service", 1},
                  {"/user.slice/user-1000.slice/user@1000.service/app.slice/redis-server.service", 1}});
  std::vector<config::Workload> ws = {workload("redis", by_unit("redis-server.service"))};
  WorkloadMatches m = match_workloads(ws, cpu_hierarchy(), cgroups, SysRoots::under("/nonexistent"));
  EXPECT_THAT(owners(m), ::testing::ElementsAre("redis", "-"));
}

// A pid file is trusted only as root's small regular file, read without following links or blocking,
// and its process's cgroup must be a workload's: a FIFO (which hung keel), a link to /dev/zero (which
// read until it aborted), an oversized file, another user's file and pid 1 in the root cgroup are each
// refused with the reason, and the rule matches nothing.
TEST(MatchWorkloads, APidFileIsTrustedOnlyAsRootsSmallRegularFileOfAWorkloadsProcess) {
  TempDir tmp;
  make_tree(tmp.path(), started({{4242, 60}, {1, 100000}}));
  make_tree(tmp.path(), {{"run/big.pid", "4242\n" + std::string(100, ' ') + "\n"},
                         {"run/init.pid", "1\n"},
                         {"run/other.pid", "4242\n"},
                         {"proc/1/cgroup", "1:cpu:/\n0::/\n"},
                         {"proc/4242/cgroup", "1:cpu:/system.slice/redis.service\n0::/\n"}});
  ASSERT_EQ(::mkfifo((tmp.path() / "run/fifo.pid").c_str(), 0600), 0);
  fs::create_symlink("/dev/zero", tmp.path() / "run/zero.pid");
  const bool root = ::geteuid() == 0;
  if (root) {
    ASSERT_EQ(::chown((tmp.path() / "run/other.pid").c_str(), 65534, 65534), 0);
  }
  const SysRoots roots = SysRoots::under(tmp.path());
  auto cgroups = cgroups_at({{"/", 10}, {"/system.slice", 0}, {"/system.slice/redis.service", 1}});
  std::vector<config::Workload> ws;
  for (const char* f : {"fifo", "zero", "big", "init", "other"})
    ws.push_back(workload(f, by_pid_file(tmp.path() / "run" / (std::string(f) + ".pid"))));
  WorkloadMatches m = match_workloads(ws, cpu_hierarchy(), cgroups, roots);
  EXPECT_THAT(m.workloads[0].note, HasSubstr("fifo.pid: not a regular file"));
  EXPECT_THAT(m.workloads[1].note, HasSubstr("zero.pid: a symbolic link"));
  EXPECT_THAT(m.workloads[2].note, HasSubstr("big.pid: 106 bytes, more than the 64 such a file holds"));
  EXPECT_THAT(m.workloads[3].note, HasSubstr("pid 1 from "));
  EXPECT_THAT(m.workloads[3].note, HasSubstr("is in the root cgroup"));
  if (root) {
    EXPECT_THAT(m.workloads[4].note, HasSubstr("other.pid: owned by uid 65534, not root"));
    EXPECT_THAT(owners(m), ::testing::ElementsAre("-", "-", "-"));
  } else {
    std::printf("skipped the other user's pid file: needs root to chown\n");
  }
}

// A critical workload's rule never takes a cgroup in a subtree delegated to someone else (its directory
// not root's, or systemd's trusted.delegate attribute on it or an ancestor); a best-effort rule still
// does. Real directories as the hierarchy (root only: chown and trusted.* attributes).
TEST(MatchWorkloads, ACriticalRuleNeverTakesACgroupInADelegatedSubtree) {
  if (::geteuid() != 0) GTEST_SKIP() << "skipped: chown and trusted.* xattrs need root";
  TempDir tmp;
  for (const char* d : {"user/app", "delegated/app", "plain"}) fs::create_directories(tmp.path() / d);
  ASSERT_EQ(::chown((tmp.path() / "user").c_str(), 1000, 1000), 0);
  if (::setxattr((tmp.path() / "delegated").c_str(), "trusted.delegate", "1", 1, 0) != 0)
    GTEST_SKIP() << "skipped: " << tmp.path() << " takes no trusted.* xattr: " << std::strerror(errno);
  CgroupHierarchy h = cpu_hierarchy();
  h.mount = tmp.path();
  auto cgroups =
      cgroups_at({{"/delegated", 0}, {"/delegated/app", 1}, {"/plain", 1}, {"/user", 0}, {"/user/app", 1}});
  auto crit = workload("crit", with_tasks(by_cgroup("/**")));
  crit.klass = config::WorkloadClass::critical;
  std::vector<config::Workload> ws = {crit, workload("be", with_tasks(by_cgroup("/**")))};
  WorkloadMatches m = match_workloads(ws, h, cgroups, SysRoots::under("/nonexistent"));
  EXPECT_THAT(owners(m), ::testing::ElementsAre("-", "be", "crit", "-", "be"));
}

// What systemd makes on v2 for a container runtime, a VM manager or a user: the unit delegated to a
// root manager is trusted (systemd names it, and only root asks for one), what is below it is its
// tenant's, and a user's is never trusted, root's directories or not.
TEST(Trust, FromDelegationAndShape) {
  using D = CgroupDir::Delegation;
  EXPECT_EQ(trust_of(std::nullopt, "/", D::user), Trust::host);
  EXPECT_EQ(trust_of(Trust::host, "/system.slice", D::none), Trust::host);
  EXPECT_EQ(trust_of(Trust::host, "/system.slice/docker-" + kId + ".scope", D::root), Trust::unit);
  EXPECT_EQ(trust_of(Trust::host, "/machine.slice/machine-qemu\\x2d1\\x2dvm1.scope", D::root), Trust::unit);
  EXPECT_EQ(trust_of(Trust::unit, "/machine.slice/machine-qemu\\x2d1\\x2dvm1.scope/libvirt", D::none),
            Trust::inside);
  EXPECT_EQ(trust_of(Trust::inside, "/system.slice/x.scope/a/b", D::root), Trust::inside);
  EXPECT_EQ(trust_of(Trust::unit, "/system.slice/x.scope/u", D::user), Trust::user);
  EXPECT_EQ(trust_of(Trust::host, "/system.slice/x.service", D::user), Trust::user);
  // A delegate mark where systemd makes no unit (below a plain cgroup) was set by someone else.
  EXPECT_EQ(trust_of(Trust::host, "/docker/" + kId, D::root), Trust::user);
  // A user's manager and all below it, even with directories root's.
  EXPECT_EQ(trust_of(Trust::host, "/user.slice/user-1000.slice/user@1000.service", D::none), Trust::user);
  EXPECT_EQ(trust_of(Trust::user, "/user.slice/user-1000.slice/user@1000.service/app.slice", D::none),
            Trust::user);
  EXPECT_EQ(trust_of(Trust::host, "/user.slice/user-1000.slice/session-3.scope", D::none), Trust::host);
}

// On v2 under systemd (issue 26): a Delegate=yes scope made for root (a container's) is a critical
// workload's when its rule names it; a cgroup below it is not, by path (its tenant names it), nor is
// anything of a user's manager; the best-effort rule after takes those, and `keel workloads` says
// which cgroup the critical rule did not take and why. Real directories (root: trusted.* xattrs).
TEST(MatchWorkloads, ACriticalRuleTakesADelegatedScopeButNotWhatItsTenantNames) {
  if (::geteuid() != 0) GTEST_SKIP() << "skipped: trusted.* xattrs need root";
  TempDir tmp;
  const std::string scope = "system.slice/crit.scope", mgr = "user.slice/user-1000.slice/user@1000.service";
  for (const std::string& d : {scope + "/inner", mgr + "/app.slice/crit.scope"})
    fs::create_directories(tmp.path() / d);
  if (::setxattr((tmp.path() / scope).c_str(), "trusted.delegate", "1", 1, 0) != 0)
    GTEST_SKIP() << "skipped: " << tmp.path() << " takes no trusted.* xattr: " << std::strerror(errno);
  CgroupHierarchy h = cpu_hierarchy();
  h.mount = tmp.path();
  auto cgroups = cgroups_at({{"/", 0},
                             {"/system.slice", 0},
                             {"/system.slice/crit.scope", 1},
                             {"/system.slice/crit.scope/inner", 1},
                             {"/user.slice", 0},
                             {"/user.slice/user-1000.slice", 0},
                             {"/" + mgr, 0},
                             {"/" + mgr + "/app.slice", 0},
                             {"/" + mgr + "/app.slice/crit.scope", 1}});
  auto crit = workload("crit", with_tasks(by_cgroup("/**/crit.scope")));
  crit.klass = config::WorkloadClass::critical;
  auto inner = workload("inner", with_tasks(by_cgroup("/system.slice/crit.scope/inner")));
  inner.klass = config::WorkloadClass::critical;
  std::vector<config::Workload> ws = {crit, inner, workload("be", with_tasks(by_cgroup("/**")))};
  WorkloadMatches m = match_workloads(ws, h, cgroups, SysRoots::under("/nonexistent"));
  EXPECT_THAT(owners(m), ::testing::ElementsAre("-", "-", "crit", "be", "-", "-", "-", "-", "be"));
  EXPECT_THAT(m.workloads[0].refused, HasSubstr("/" + mgr + "/app.slice/crit.scope: "));
  EXPECT_THAT(m.workloads[0].refused, HasSubstr("user@.service"));
  EXPECT_THAT(m.workloads[1].refused, HasSubstr("/system.slice/crit.scope/inner: "));
  EXPECT_THAT(m.workloads[1].refused, HasSubstr("match it by its container, pod or VM"));
  EXPECT_EQ(m.workloads[2].refused, "");
}

TEST(MatchWorkloads, NoSelectorMatchesNothing) {
  auto cgroups = cgroups_at({{"/", 1}});
  std::vector<config::Workload> ws = {workload("empty", with_tasks(config::Match{}))};
  WorkloadMatches m = match_workloads(ws, cpu_hierarchy(), cgroups, SysRoots::under("/nonexistent"));
  EXPECT_THAT(owners(m), ::testing::ElementsAre("-"));
  EXPECT_EQ(m.workloads[0].note, "no match rule");
}

// ---- Hierarchy choice ----

CgroupHierarchy hierarchy(uint32_t id, std::vector<std::string> controllers, bool unified = false) {
  CgroupHierarchy h;
  h.id = id;
  h.unified = unified;
  h.controllers = std::move(controllers);
  return h;
}

TEST(ChooseHierarchy, Automatic) {
  CgroupLayout hybrid{CgroupMode::hybrid,
                      {hierarchy(1, {"cpu"}), hierarchy(3, {"cpuset"}), hierarchy(0, {"hugetlb"}, true)}};
  EXPECT_EQ(choose_hierarchy(hybrid, config::Hierarchy::automatic)->id, 1u);
  CgroupLayout v2{CgroupMode::v2, {hierarchy(0, {"cpuset", "cpu"}, true)}};
  EXPECT_TRUE(choose_hierarchy(v2, config::Hierarchy::automatic)->unified);
  CgroupLayout cpuset_only{CgroupMode::v1, {hierarchy(3, {"cpuset"}), hierarchy(0, {}, true)}};
  EXPECT_EQ(choose_hierarchy(cpuset_only, config::Hierarchy::automatic)->id, 3u);
  CgroupLayout neither{CgroupMode::v1, {hierarchy(4, {"memory"})}};
  auto r = choose_hierarchy(neither, config::Hierarchy::automatic);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("no cgroup hierarchy has the cpu or cpuset controller"));
  EXPECT_THAT(r.error().message(), HasSubstr("mounted: memory"));
}

TEST(ChooseHierarchy, ExplicitChoices) {
  CgroupLayout hybrid{CgroupMode::hybrid,
                      {hierarchy(2, {"cpu", "cpuacct"}), hierarchy(3, {"cpuset"}), hierarchy(0, {}, true)}};
  EXPECT_EQ(choose_hierarchy(hybrid, config::Hierarchy::cpu)->id, 2u);
  EXPECT_EQ(choose_hierarchy(hybrid, config::Hierarchy::cpuset)->id, 3u);
  EXPECT_TRUE(choose_hierarchy(hybrid, config::Hierarchy::unified)->unified);

  CgroupLayout v1{CgroupMode::v1, {hierarchy(2, {"cpu", "cpuacct"})}};
  auto no_unified = choose_hierarchy(v1, config::Hierarchy::unified);
  ASSERT_FALSE(no_unified);
  EXPECT_THAT(no_unified.error().message(), HasSubstr("no cgroup2 hierarchy is mounted"));
  auto no_cpuset = choose_hierarchy(v1, config::Hierarchy::cpuset);
  ASSERT_FALSE(no_cpuset);
  EXPECT_THAT(no_cpuset.error().message(), HasSubstr("no cgroup v1 hierarchy has the cpuset controller"));

  CgroupLayout v2{CgroupMode::v2, {hierarchy(0, {"cpu"}, true)}};
  auto cpu_on_v2 = choose_hierarchy(v2, config::Hierarchy::cpu);
  ASSERT_FALSE(cpu_on_v2);
  EXPECT_THAT(cpu_on_v2.error().message(), HasSubstr("use hierarchy = \"unified\""));
}

// ---- End to end on a temporary hybrid host, and printing ----

constexpr const char* kMountinfo =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

SysRoots hybrid_host(const TempDir& tmp) {
  make_tree(tmp.path(), {{"proc/self/mountinfo", kMountinfo},
                         {"proc/cgroups",
                          "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpuset\t3\t1\t1\ncpu\t1\t3\t1\n"},
                         {"sys/fs/cgroup/cpu/cgroup.procs", "1\n2\n"},
                         {"sys/fs/cgroup/cpu/redis/cgroup.procs", "10\n11\n"},
                         {"sys/fs/cgroup/cpu/batch/cgroup.procs", ""},
                         {"sys/fs/cgroup/cpuset/cgroup.procs", "1\n"},
                         {"sys/fs/cgroup/unified/cgroup.procs", "1\n"},
                         {"sys/fs/cgroup/unified/cgroup.controllers", ""}});
  return SysRoots::under(tmp.path());
}

TEST(DiscoverWorkloads, HybridTreeEndToEnd) {
  TempDir tmp;
  const SysRoots roots = hybrid_host(tmp);
  std::vector<config::Workload> ws = {workload("redis", by_cgroup("/redis*")),
                                      workload("batch", with_tasks(by_cgroup("/batch")))};
  auto report = discover_workloads(ws, config::Hierarchy::automatic, roots);
  ASSERT_TRUE(report) << report.error().message();
  EXPECT_EQ(report->mode, CgroupMode::hybrid);
  EXPECT_EQ(report->hierarchy.id, 1u);
  EXPECT_EQ(report->hierarchy.mount, roots.cgroup / "cpu");
  EXPECT_THAT(owners(report->matches), ::testing::ElementsAre("-", "-", "redis"));

  auto cpuset = discover_workloads(ws, config::Hierarchy::cpuset, roots);
  ASSERT_TRUE(cpuset) << cpuset.error().message();
  EXPECT_EQ(cpuset->hierarchy.id, 3u);
  EXPECT_EQ(cpuset->matches.cgroups.size(), 1u);
}

TEST(FormatWorkloads, TextTableAndFooter) {
  TempDir tmp;
  const SysRoots roots = hybrid_host(tmp);
  std::vector<config::Workload> ws = {workload("redis", by_cgroup("/redis*")),
                                      workload("batch", with_tasks(by_cgroup("/batch"))),
                                      workload("web", by_docker("nginx"))};
  auto report = discover_workloads(ws, config::Hierarchy::automatic, roots);
  ASSERT_TRUE(report) << report.error().message();
  const std::string text = format_workloads_text(*report);
  const std::string redis_id = report->matches.cgroups[2].id.str();
  EXPECT_THAT(text, HasSubstr("hierarchy: cpu (cgroup v1, hierarchy 1)"));
  EXPECT_THAT(text, HasSubstr("cgroup mode hybrid"));
  EXPECT_THAT(text, ::testing::ContainsRegex("CGROUP +ID +PROCS +WORKLOAD +PLATFORM +MATCHED BY\n"));
  EXPECT_THAT(text, ::testing::ContainsRegex("\n/redis +" + redis_id + " +2 +redis +- +cgroup\n"));
  EXPECT_THAT(text, ::testing::ContainsRegex("\n/batch +1:[0-9]+ +0 +- +-\n"));
  EXPECT_THAT(text, HasSubstr("3 cgroups, 1 matched\n"));
  EXPECT_THAT(text, HasSubstr("workload redis: 1 cgroup, 2 processes\n"));
  EXPECT_THAT(text, HasSubstr("workload batch: matched nothing\n"));
  EXPECT_THAT(text,
              HasSubstr("workload web: matched nothing (docker 'nginx': no container by that name in "));
}

TEST(FormatWorkloads, Json) {
  TempDir tmp;
  const SysRoots roots = hybrid_host(tmp);
  std::vector<config::Workload> ws = {workload("redis", each(by_cgroup("/redis*")))};
  auto report = discover_workloads(ws, config::Hierarchy::automatic, roots);
  ASSERT_TRUE(report) << report.error().message();
  const std::string json = format_workloads_json(*report);
  const WorkloadMatch& redis = report->matches.cgroups[2];
  EXPECT_THAT(json,
              HasSubstr(R"({"mode":"hybrid","hierarchy":{"name":"cpu","id":1,"unified":false,"mount":")"));
  EXPECT_THAT(json, HasSubstr(R"("controllers":["cpu"]})"));
  EXPECT_THAT(
      json,
      HasSubstr(
          R"({"path":"/redis","id":")" + redis.id.str() + R"(","hierarchy":1,"inode":)" +
          std::to_string(redis.id.inode) +
          R"(,"procs":2,"workload":"redis","instance":"redis/redis","selector":"cgroup","platform":null})"));
  EXPECT_THAT(json,
              HasSubstr(R"("procs":0,"workload":null,"instance":null,"selector":null,"platform":null})"));
  EXPECT_THAT(
      json,
      HasSubstr(
          R"("workloads":[{"name":"redis","cgroups":1,"procs":2,"note":null,"refused":null,"controllers":null}],"skipped":null})"));
  EXPECT_THAT(json, Not(HasSubstr("\n")));
}

// keel workloads on a tenant's 1100-level tree (it crashed: the walk recursed with 8 KiB per level):
// the tree is cut at the depth bound, and the table and the JSON say what was left out.
TEST(FormatWorkloads, ATreeDeeperThanTheBoundIsCutAndSaidSo) {
  TempDir tmp;
  const SysRoots roots = hybrid_host(tmp);
  ASSERT_TRUE(testing::make_deep_chain(roots.cgroup / "cpu/batch", 1100, "a", "cgroup.procs"));
  std::vector<config::Workload> ws = {workload("batch", each(by_cgroup("/batch/**")))};
  auto report = discover_workloads(ws, config::Hierarchy::automatic, roots);
  ASSERT_TRUE(report) << report.error().message();
  EXPECT_EQ(report->matches.cgroups.size(), 3 + kMaxCgroupDepth - 1);  // /, /redis, /batch/a... to level 64
  EXPECT_EQ(report->skipped.count[CgroupSkips::too_deep], 1u);
  EXPECT_THAT(
      format_workloads_text(*report),
      HasSubstr("matched\nwarning: cgroups left out, each with what is below it: 1 more than 64 levels deep "
                "(the first: /batch/a/a/a/a"));
  EXPECT_THAT(
      format_workloads_json(*report),
      HasSubstr(R"("skipped":"cgroups left out, each with what is below it: 1 more than 64 levels deep)"));
  EXPECT_THAT(format_workloads_json(*discover_workloads(ws, config::Hierarchy::cpuset, roots)),
              HasSubstr(R"("skipped":null)"));
}

}  // namespace
}  // namespace keel
