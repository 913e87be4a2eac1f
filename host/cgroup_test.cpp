#include "host/cgroup.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/scene.h"
#include "tests/support/tmp_tree.h"

namespace keel {
namespace {

namespace fs = std::filesystem;
using ::keel::testing::make_tree;
using ::keel::testing::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// This development machine: v1 controllers, name=systemd, and a cgroup2 mount without cpu.
constexpr const char* kHybridMountinfo =
    "22 1 253:0 / / rw,relatime - ext4 /dev/vda rw\n"
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
    "34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

constexpr const char* kHybridProcCgroups =
    "#subsys_name\thierarchy\tnum_cgroups\tenabled\n"
    "cpuset\t3\t1\t1\n"
    "cpu\t1\t1\t1\n"
    "cpuacct\t2\t1\t1\n"
    "memory\t4\t17\t1\n"
    "hugetlb\t0\t1\t1\n";

constexpr const char* kHybridSelfCgroup =
    "9:name=systemd:/\n4:memory:/\n3:cpuset:/\n2:cpuacct:/\n1:cpu:/\n0::/\n";

// Debian 12 / current systemd: everything on cgroup2 at /sys/fs/cgroup.
constexpr const char* kV2Mountinfo =
    "25 1 252:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro\n"
    "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n";

constexpr const char* kV2ProcCgroups =
    "#subsys_name\thierarchy\tnum_cgroups\tenabled\n"
    "cpuset\t0\t90\t1\n"
    "cpu\t0\t90\t1\n"
    "memory\t0\t90\t1\n";

// openEuler / Debian 10: cpu and cpuacct co-mounted, with symlinks cpu and cpuacct beside.
constexpr const char* kCoMountedMountinfo =
    "24 18 0:21 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:4 - tmpfs tmpfs ro,mode=755\n"
    "26 24 0:23 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:6 - cgroup cgroup "
    "rw,xattr,release_agent=/usr/lib/systemd/systemd-cgroups-agent,name=systemd\n"
    "29 24 0:26 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:10 - cgroup cgroup "
    "rw,cpu,cpuacct\n"
    "30 24 0:27 / /sys/fs/cgroup/cpuset rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup "
    "rw,cpuset\n";

constexpr const char* kCoMountedProcCgroups =
    "#subsys_name\thierarchy\tnum_cgroups\tenabled\n"
    "cpuset\t5\t4\t1\n"
    "cpu\t2\t60\t1\n"
    "cpuacct\t2\t60\t1\n";

// ---- Parsers ----

TEST(ParseMountinfo, HybridLayoutOfThisMachine) {
  auto mounts = parse_mountinfo(kHybridMountinfo);
  ASSERT_TRUE(mounts) << mounts.error().message();
  ASSERT_EQ(mounts->size(), 8u);
  const MountInfo& cpu = (*mounts)[2];
  EXPECT_EQ(cpu.root, "/");
  EXPECT_EQ(cpu.mount_point, "/sys/fs/cgroup/cpu");
  EXPECT_EQ(cpu.fs_type, "cgroup");
  EXPECT_THAT(cpu.super_options, ElementsAre("rw", "cpu"));
  EXPECT_THAT(v1_mount_controllers(cpu), ElementsAre("cpu"));
  EXPECT_THAT(v1_mount_controllers((*mounts)[6]), ElementsAre("name=systemd"));
  EXPECT_EQ((*mounts)[7].fs_type, "cgroup2");
  EXPECT_EQ((*mounts)[1].fs_type, "tmpfs");
}

TEST(ParseMountinfo, PureV2WithOptionalFields) {
  auto mounts = parse_mountinfo(kV2Mountinfo);
  ASSERT_TRUE(mounts) << mounts.error().message();
  ASSERT_EQ(mounts->size(), 2u);
  EXPECT_EQ((*mounts)[1].mount_point, "/sys/fs/cgroup");
  EXPECT_EQ((*mounts)[1].fs_type, "cgroup2");
  EXPECT_THAT((*mounts)[1].super_options, ElementsAre("rw", "nsdelegate", "memory_recursiveprot"));
}

TEST(ParseMountinfo, CoMountedControllersAndMountFlags) {
  auto mounts = parse_mountinfo(kCoMountedMountinfo);
  ASSERT_TRUE(mounts) << mounts.error().message();
  ASSERT_EQ(mounts->size(), 4u);
  EXPECT_EQ((*mounts)[2].mount_point, "/sys/fs/cgroup/cpu,cpuacct");
  EXPECT_THAT(v1_mount_controllers((*mounts)[2]), ElementsAre("cpu", "cpuacct"));
  EXPECT_THAT(v1_mount_controllers((*mounts)[1]), ElementsAre("name=systemd"));
}

TEST(ParseMountinfo, OctalEscapes) {
  auto m =
      parse_mountinfo_line("50 31 0:40 /a\\134b /sys/fs/cgroup/my\\040cpu\\011x rw - cgroup cgroup rw,cpu");
  ASSERT_TRUE(m) << m.error().message();
  EXPECT_EQ(m->root, "/a\\b");
  EXPECT_EQ(m->mount_point, "/sys/fs/cgroup/my cpu\tx");
  EXPECT_EQ(unescape_mount_field("a\\012b"), "a\nb");
  EXPECT_EQ(unescape_mount_field("trailing\\04"), "trailing\\04");  // incomplete escape stays
}

TEST(ParseMountinfo, MalformedLineNamesItsNumber) {
  auto r = parse_mountinfo(std::string(kV2Mountinfo) + "garbage without separator\n");
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().what, HasSubstr("line 3"));
  EXPECT_FALSE(parse_mountinfo_line("1 2 3:4 / /x rw - cgroup"));  // no super options
}

TEST(ParseProcCgroups, ThisMachine) {
  auto entries = parse_proc_cgroups(kHybridProcCgroups);
  ASSERT_TRUE(entries) << entries.error().message();
  ASSERT_EQ(entries->size(), 5u);
  EXPECT_EQ((*entries)[1].subsys, "cpu");
  EXPECT_EQ((*entries)[1].hierarchy, 1u);
  EXPECT_EQ((*entries)[3].num_cgroups, 17u);
  EXPECT_TRUE((*entries)[3].enabled);
  EXPECT_EQ((*entries)[4].hierarchy, 0u);
}

TEST(ParseProcCgroups, Malformed) {
  auto r = parse_proc_cgroups("#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\tx\t1\t1\n");
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().what, HasSubstr("line 2"));
  EXPECT_FALSE(parse_proc_cgroups("cpu 1 1\n"));
}

TEST(ParseProcessCgroups, V1AndV2Lines) {
  auto lines =
      parse_process_cgroups("12:cpu,cpuacct:/system.slice/a.service\n1:name=systemd:/x:y\n0::/user.slice\n");
  ASSERT_TRUE(lines) << lines.error().message();
  ASSERT_EQ(lines->size(), 3u);
  EXPECT_EQ((*lines)[0].hierarchy, 12u);
  EXPECT_THAT((*lines)[0].controllers, ElementsAre("cpu", "cpuacct"));
  EXPECT_EQ((*lines)[0].path, "/system.slice/a.service");
  EXPECT_EQ((*lines)[1].path, "/x:y");
  EXPECT_EQ((*lines)[2].hierarchy, 0u);
  EXPECT_TRUE((*lines)[2].controllers.empty());
  EXPECT_EQ((*lines)[2].path, "/user.slice");
  EXPECT_FALSE(parse_process_cgroups("cpu:/a\n"));
}

// ---- Discovery on temporary trees ----

void write_hybrid_host(const fs::path& root) {
  make_tree(root, {{"proc/self/mountinfo", kHybridMountinfo},
                   {"proc/cgroups", kHybridProcCgroups},
                   {"proc/self/cgroup", kHybridSelfCgroup},
                   {"sys/fs/cgroup/cpu/cgroup.procs", "1\n"},
                   {"sys/fs/cgroup/cpuacct/cgroup.procs", "1\n"},
                   {"sys/fs/cgroup/cpuset/cgroup.procs", "1\n"},
                   {"sys/fs/cgroup/memory/cgroup.procs", "1\n"},
                   {"sys/fs/cgroup/systemd/cgroup.procs", "1\n"},
                   {"sys/fs/cgroup/unified/cgroup.procs", "1\n"},
                   {"sys/fs/cgroup/unified/cgroup.controllers", "hugetlb\n"}});
}

TEST(Discover, HybridLayout) {
  TempDir tmp;
  write_hybrid_host(tmp.path());
  const SysRoots roots = SysRoots::under(tmp.path());
  auto layout = discover(roots);
  ASSERT_TRUE(layout) << layout.error().message();
  EXPECT_EQ(layout->mode, CgroupMode::hybrid);
  ASSERT_EQ(layout->hierarchies.size(), 6u);

  const CgroupHierarchy* cpu = layout->v1_with("cpu");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->id, 1u);
  EXPECT_EQ(cpu->mount, roots.cgroup / "cpu");
  EXPECT_EQ(cpu->name(), "cpu");
  ASSERT_NE(layout->v1_with("cpuset"), nullptr);
  EXPECT_EQ(layout->v1_with("cpuset")->id, 3u);
  ASSERT_NE(layout->v1_with("name=systemd"), nullptr);
  EXPECT_EQ(layout->v1_with("name=systemd")->id, 9u);
  EXPECT_EQ(layout->by_id(4)->name(), "memory");

  const CgroupHierarchy* unified = layout->unified();
  ASSERT_NE(unified, nullptr);
  EXPECT_EQ(unified->id, 0u);
  EXPECT_EQ(unified->mount, roots.cgroup / "unified");
  EXPECT_THAT(unified->controllers, ElementsAre("hugetlb"));
  EXPECT_FALSE(unified->has("cpu"));
  EXPECT_EQ(layout->hierarchies.back().name(), "unified");
}

TEST(Discover, PureV2Layout) {
  TempDir tmp;
  make_tree(tmp.path(), {{"proc/self/mountinfo", kV2Mountinfo},
                         {"proc/cgroups", kV2ProcCgroups},
                         {"sys/fs/cgroup/cgroup.procs", "1\n"},
                         {"sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n"}});
  const SysRoots roots = SysRoots::under(tmp.path());
  auto layout = discover(roots);
  ASSERT_TRUE(layout) << layout.error().message();
  EXPECT_EQ(layout->mode, CgroupMode::v2);
  ASSERT_EQ(layout->hierarchies.size(), 1u);
  const CgroupHierarchy& h = layout->hierarchies[0];
  EXPECT_TRUE(h.unified);
  EXPECT_EQ(h.mount, roots.cgroup);
  EXPECT_THAT(h.controllers, ElementsAre("cpuset", "cpu", "io", "memory", "pids"));
  EXPECT_EQ(layout->v1_with("cpu"), nullptr);
}

TEST(Discover, CoMountedCpuCpuacct) {
  TempDir tmp;
  make_tree(tmp.path(), {{"proc/self/mountinfo", kCoMountedMountinfo},
                         {"proc/cgroups", kCoMountedProcCgroups},
                         {"proc/self/cgroup", "5:cpuset:/\n2:cpu,cpuacct:/\n1:name=systemd:/\n"},
                         {"sys/fs/cgroup/cpu,cpuacct/cgroup.procs", "1\n"},
                         {"sys/fs/cgroup/cpuset/cgroup.procs", "1\n"},
                         {"sys/fs/cgroup/systemd/cgroup.procs", "1\n"}});
  const SysRoots roots = SysRoots::under(tmp.path());
  fs::create_directory_symlink("cpu,cpuacct", roots.cgroup / "cpu");
  fs::create_directory_symlink("cpu,cpuacct", roots.cgroup / "cpuacct");
  auto layout = discover(roots);
  ASSERT_TRUE(layout) << layout.error().message();
  EXPECT_EQ(layout->mode, CgroupMode::v1);
  ASSERT_EQ(layout->hierarchies.size(), 3u);
  const CgroupHierarchy* cpu = layout->v1_with("cpu");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu, layout->v1_with("cpuacct"));
  EXPECT_EQ(cpu->id, 2u);
  EXPECT_EQ(cpu->name(), "cpu,cpuacct");
  EXPECT_EQ(cpu->mount, roots.cgroup / "cpu,cpuacct");
  EXPECT_EQ(layout->v1_with("name=systemd")->id, 1u);
  EXPECT_EQ(layout->unified(), nullptr);
  auto cgroups = enumerate_cgroups(*cpu);
  ASSERT_TRUE(cgroups) << cgroups.error().message();
  ASSERT_EQ(cgroups->size(), 1u);
  EXPECT_EQ((*cgroups)[0].id.hierarchy, 2u);
}

TEST(Discover, IgnoresMountsOutsideTheCgroupRootAndSecondMounts) {
  TempDir tmp;
  make_tree(tmp.path(), {{"proc/self/mountinfo",
                          std::string(kHybridMountinfo) +
                              "60 22 0:29 / /run/elsewhere rw - cgroup cgroup rw,cpu\n"
                              "61 31 0:29 /sub /sys/fs/cgroup/cpu-again rw - cgroup cgroup rw,cpu\n"},
                         {"proc/cgroups", kHybridProcCgroups},
                         {"proc/self/cgroup", kHybridSelfCgroup},
                         {"sys/fs/cgroup/unified/cgroup.controllers", ""}});
  auto layout = discover(SysRoots::under(tmp.path()));
  ASSERT_TRUE(layout) << layout.error().message();
  ASSERT_EQ(layout->hierarchies.size(), 6u);
  EXPECT_EQ(layout->v1_with("cpu")->mount.filename(), "cpu");
  EXPECT_EQ(layout->v1_with("cpu")->mount_root, "/");
}

// keel in a container, laid out as the DaemonSet (--root /host, the host's /sys/fs/cgroup bound at
// /host/sys/fs/cgroup, the host's cgroup namespace): its mountinfo has docker's own cgroup mounts at
// /sys/fs/cgroup, each rooted at the container's cgroup, and the host's at the root keel was given. The
// host's are the hierarchies; taking the root of docker's mount for the host's directory made keel's
// own cgroup "/" and every other process's path "outside the mounted subtree" (seen on the v1 host).
TEST(Discover, UnderARootTheMountsThereAreTheHostsNotTheContainersOwn) {
  TempDir tmp;
  const SysRoots roots = SysRoots::under(tmp.path());
  const std::string at = roots.cgroup.string();
  const std::string own = "/docker/0123abcd";
  make_tree(tmp.path(),
            {{"proc/self/mountinfo",
              "81 80 0:45 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755\n"
              "82 81 0:29 " +
                  own +
                  " /sys/fs/cgroup/cpu ro - cgroup cgroup rw,cpu\n"
                  "83 81 0:30 " +
                  own +
                  " /sys/fs/cgroup/cpuacct ro - cgroup cgroup rw,cpuacct\n"
                  "84 81 0:31 " +
                  own +
                  " /sys/fs/cgroup/cpuset ro - cgroup cgroup rw,cpuset\n"
                  "94 93 0:28 / " +
                  at +
                  " rw - tmpfs tmpfs rw,mode=755\n"
                  "95 94 0:29 / " +
                  at +
                  "/cpu rw - cgroup cgroup rw,cpu\n"
                  "96 94 0:30 / " +
                  at +
                  "/cpuacct rw - cgroup cgroup rw,cpuacct\n"
                  "97 94 0:31 / " +
                  at + "/cpuset rw - cgroup cgroup rw,cpuset\n"},
             {"proc/cgroups", kHybridProcCgroups},
             {"proc/self/cgroup", "3:cpuset:" + own + "\n2:cpuacct:" + own + "\n1:cpu:" + own + "\n"},
             {"proc/77/cgroup", "1:cpu:/system.slice/redis.service\n"}});
  auto layout = discover(roots);
  ASSERT_TRUE(layout) << layout.error().message();
  ASSERT_EQ(layout->hierarchies.size(), 3u);
  const CgroupHierarchy* cpu = layout->v1_with("cpu");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->mount, roots.cgroup / "cpu");
  EXPECT_EQ(cpu->mount_root, "/");
  EXPECT_EQ(process_cgroup_path(roots, 77, *cpu).value_or("?"), "/system.slice/redis.service");
}

// keel in a pod with a cgroup namespace of its own (cgroup v2's default on Kubernetes), the host's
// cgroup tree bound at /host/sys/fs/cgroup: the kernel shows that mount's root and every process's
// cgroup relative to the pod's cgroup ("/../../.."). The namespace's root is the cgroup three levels
// down whose cgroup.procs lists keel's pid (not a sibling's, nor one at another depth), and the kernel's
// paths read back as the host's.
TEST(Cgroupns, APodsNamespaceRootIsFoundByKeelsPidAndItsPathsReadAsTheHosts) {
  TempDir tmp;
  SysRoots roots = SysRoots::under(tmp.path());
  const std::string at = roots.cgroup.string();
  const std::string me = std::to_string(::getpid());
  const std::string pod = "kubepods.slice/kubepods-pod1.slice/cri-containerd-c1.scope";
  make_tree(
      tmp.path(),
      {{"proc/self/mountinfo",
        "90 80 0:40 / /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n"  // the pod's own: its root
        "95 80 0:40 /../../.. " +
            at + " rw - cgroup2 cgroup2 rw\n"},
       {"proc/cgroups", "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t0\t9\t1\n"},
       {"proc/self/cgroup", "0::/\n"},
       {"proc/" + me + "/cgroup", "0::/\n"},
       {"proc/1/cgroup", "0::/../../../init.scope\n"},
       {"proc/77/cgroup", "0::/../../../system.slice/redis.service\n"},
       {"proc/78/cgroup", "0::/sidecar\n"},
       {"proc/79/cgroup", "0::/../../../..\n"},
       {"sys/fs/cgroup/cgroup.controllers", "cpuset cpu\n"},
       {"sys/fs/cgroup/cgroup.procs", "1\n"},
       {"sys/fs/cgroup/init.scope/cgroup.procs", "1\n"},
       {"sys/fs/cgroup/system.slice/redis.service/cgroup.procs", "77\n"},
       // A sibling pod at the same depth and a cgroup at another depth list the same pid: in a
       // temporary tree anything can, on a host only keel's own cgroup does.
       {"sys/fs/cgroup/kubepods.slice/kubepods-pod2.slice/cri-containerd-c2.scope/cgroup.procs", "12\n"},
       {"sys/fs/cgroup/kubepods.slice/kubepods-pod1.slice/cgroup.procs", me + "\n"},
       {"sys/fs/cgroup/" + pod + "/cgroup.procs", "5\n" + me + "\n"},
       {"sys/fs/cgroup/" + pod + "/sidecar/cgroup.procs", "78\n"}});
  // Before: the kernel's paths taken as they are name the wrong cgroups.
  auto before = discover(roots);
  ASSERT_TRUE(before) << before.error().message();
  EXPECT_EQ(before->unified()->mount_root, "/../../..");
  auto ns = with_cgroupns(roots);
  ASSERT_TRUE(ns) << ns.error().message();
  ASSERT_EQ(ns->cgroupns_roots.size(), 1u);
  EXPECT_EQ(ns->cgroupns_roots[0].first, 0u);
  EXPECT_EQ(ns->cgroupns_roots[0].second, "/" + pod);
  auto layout = discover(*ns);
  ASSERT_TRUE(layout) << layout.error().message();
  const CgroupHierarchy* unified = layout->unified();
  ASSERT_NE(unified, nullptr);
  EXPECT_EQ(unified->mount, roots.cgroup);
  EXPECT_EQ(unified->mount_root, "/");
  EXPECT_EQ(process_cgroup_path(*ns, ::getpid(), *unified).value_or("?"), "/" + pod);  // itself
  EXPECT_EQ(process_cgroup_path(*ns, 1, *unified).value_or("?"), "/init.scope");
  EXPECT_EQ(process_cgroup_path(*ns, 77, *unified).value_or("?"), "/system.slice/redis.service");
  EXPECT_EQ(process_cgroup_path(*ns, 78, *unified).value_or("?"), "/" + pod + "/sidecar");
  auto above = process_cgroup_path(*ns, 79, *unified);
  ASSERT_FALSE(above);
  EXPECT_THAT(above.error().message(), HasSubstr("above its hierarchy's root"));
  EXPECT_EQ(host_cgroup_path(*ns, 0, "/../.."), "/kubepods.slice");
  EXPECT_EQ(host_cgroup_path(*ns, 1, "/../.."), "/../..");  // no namespace root known for hierarchy 1
  // Keel's process gone from every cgroup at that depth: the root is not known, and that is said.
  make_tree(tmp.path(), {{"sys/fs/cgroup/" + pod + "/cgroup.procs", "5\n"}});
  auto lost = with_cgroupns(roots);
  ASSERT_FALSE(lost);
  EXPECT_THAT(lost.error().message(), HasSubstr("3 levels below the root of hierarchy unified"));
  // In the host's namespace the mount shows "/": nothing to find, nothing read differently.
  make_tree(tmp.path(), {{"proc/self/mountinfo", "95 80 0:40 / " + at + " rw - cgroup2 cgroup2 rw\n"}});
  auto host = with_cgroupns(roots);
  ASSERT_TRUE(host) << host.error().message();
  EXPECT_TRUE(host->cgroupns_roots.empty());
}

TEST(Discover, ErrorsNameTheFile) {
  TempDir tmp;
  auto missing = discover(SysRoots::under(tmp.path()));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().err, ENOENT);
  EXPECT_THAT(missing.error().message(), HasSubstr("proc/self/mountinfo"));

  make_tree(tmp.path(), {{"proc/self/mountinfo", "1 0 0:1 / / rw - ext4 /dev/vda rw\n"},
                         {"proc/cgroups", kHybridProcCgroups}});
  auto none = discover(SysRoots::under(tmp.path()));
  ASSERT_FALSE(none);
  EXPECT_THAT(none.error().message(), HasSubstr("no cgroup hierarchy is mounted"));

  // A cgroup2 root always has cgroup.controllers; without it the tree is not a cgroup2 mount.
  make_tree(tmp.path(), {{"proc/self/mountinfo", kV2Mountinfo}, {"proc/cgroups", kV2ProcCgroups}});
  auto no_controllers = discover(SysRoots::under(tmp.path()));
  ASSERT_FALSE(no_controllers);
  EXPECT_THAT(no_controllers.error().message(), HasSubstr("cgroup.controllers"));
}

// ---- Enumeration ----

uint64_t inode_of(const fs::path& p) {
  struct stat st;
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return st.st_ino;
}

CgroupHierarchy tree_hierarchy(const fs::path& mount) {
  CgroupHierarchy h;
  h.id = 7;
  h.controllers = {"cpu"};
  h.mount = mount;
  return h;
}

std::vector<std::string> paths_of(const std::vector<Cgroup>& cgroups) {
  std::vector<std::string> out;
  for (const Cgroup& c : cgroups) out.push_back(c.path);
  return out;
}

TEST(Enumerate, PathsProcsAndIdsEqualStatInodes) {
  TempDir tmp;
  const fs::path cpu = tmp.path() / "cpu";
  make_tree(cpu, {{"cgroup.procs", "1\n2\n"},
                  {"cpu.shares", "1024\n"},
                  {"system.slice/cgroup.procs", "3\n"},
                  {"system.slice/redis.service/cgroup.procs", ""},
                  {"b/cgroup.procs", "4\n5"}});  // no trailing newline
  fs::create_directory_symlink("system.slice", cpu / "link");
  auto cgroups = enumerate_cgroups(tree_hierarchy(cpu));
  ASSERT_TRUE(cgroups) << cgroups.error().message();
  EXPECT_THAT(paths_of(*cgroups), ElementsAre("/", "/b", "/system.slice", "/system.slice/redis.service"));
  const std::vector<unsigned> procs = {2, 2, 1, 0};
  const std::vector<fs::path> dirs = {cpu, cpu / "b", cpu / "system.slice",
                                      cpu / "system.slice/redis.service"};
  for (size_t i = 0; i < cgroups->size(); ++i) {
    EXPECT_EQ((*cgroups)[i].nr_procs, procs[i]) << (*cgroups)[i].path;
    EXPECT_EQ((*cgroups)[i].id, (CgroupId{7, inode_of(dirs[i])})) << (*cgroups)[i].path;
  }
  EXPECT_EQ((CgroupId{7, 42}).str(), "7:42");
}

TEST(Enumerate, RemovedCgroupDisappearsWithoutError) {
  TempDir tmp;
  const fs::path cpu = tmp.path() / "cpu";
  make_tree(
      cpu,
      {{"cgroup.procs", "1\n"}, {"a/cgroup.procs", ""}, {"a/b/cgroup.procs", "9\n"}, {"c/cgroup.procs", ""}});
  const CgroupHierarchy h = tree_hierarchy(cpu);
  std::vector<Cgroup> cgroups;
  ASSERT_TRUE(enumerate_cgroups(h, cgroups));
  EXPECT_THAT(paths_of(cgroups), ElementsAre("/", "/a", "/a/b", "/c"));

  fs::remove_all(cpu / "a/b");
  auto again = enumerate_cgroups(h, cgroups);  // reuses the vector's elements
  ASSERT_TRUE(again) << again.error().message();
  EXPECT_THAT(paths_of(cgroups), ElementsAre("/", "/a", "/c"));

  // A directory whose cgroup.procs is gone is a cgroup being removed: skipped with its subtree.
  fs::remove(cpu / "c/cgroup.procs");
  ASSERT_TRUE(enumerate_cgroups(h, cgroups));
  EXPECT_THAT(paths_of(cgroups), ElementsAre("/", "/a"));
}

// A tenant that can make cgroups can make them 1100 levels deep (the old walk recursed with 8 KiB of
// buffers per level and crashed) and with paths far past PATH_MAX: the walk goes down by one name at
// a time without recursion, keeps kMaxCgroupDepth levels and leaves the rest out, saying so.
TEST(EnumerateTempTree, A1100LevelTreeIsCutAtTheDepthBoundWithoutCrashing) {
  TempDir tmp;
  const fs::path cpu = tmp.path() / "cpu";
  make_tree(cpu, {{"cgroup.procs", "1\n"}, {"b/cgroup.procs", ""}});
  ASSERT_TRUE(testing::make_deep_chain(cpu, 1100, "a", "cgroup.procs"));
  CgroupSkips skipped;
  auto cgroups = enumerate_cgroups(tree_hierarchy(cpu), &skipped);
  ASSERT_TRUE(cgroups) << cgroups.error().message();
  ASSERT_EQ(cgroups->size(), 2 + kMaxCgroupDepth);  // the root, /b and /a down to level 64
  std::string deepest;
  for (size_t i = 0; i < kMaxCgroupDepth; ++i) deepest += "/a";
  EXPECT_EQ(cgroups->back().path, "/b");
  EXPECT_EQ((*cgroups)[cgroups->size() - 2].path, deepest);
  EXPECT_EQ(skipped.count[CgroupSkips::too_deep], 1u);
  EXPECT_EQ(skipped.count[CgroupSkips::too_long] + skipped.count[CgroupSkips::too_many], 0u);
  EXPECT_EQ(skipped.message(),
            "cgroups left out, each with what is below it: 1 more than 64 levels deep (the first: "
            "/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a.../a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a)");
}

TEST(EnumerateTempTree, PathsPastPathMaxAreLeftOutAtTheLengthBound) {
  TempDir tmp;
  const fs::path cpu = tmp.path() / "cpu";
  make_tree(cpu, {{"cgroup.procs", ""}});
  const std::string name(100, 'n');  // 1100 of them: 111100 bytes of path
  ASSERT_TRUE(testing::make_deep_chain(cpu, 1100, name, "cgroup.procs"));
  CgroupSkips skipped;
  auto cgroups = enumerate_cgroups(tree_hierarchy(cpu), &skipped);
  ASSERT_TRUE(cgroups) << cgroups.error().message();
  const size_t levels = kMaxCgroupPath / (name.size() + 1);  // 30 fit in 3072 bytes
  ASSERT_EQ(cgroups->size(), 1 + levels);
  EXPECT_EQ(cgroups->back().path.size(), levels * (name.size() + 1));
  EXPECT_EQ(skipped.count[CgroupSkips::too_long], 1u);
  EXPECT_THAT(skipped.message(), HasSubstr("1 with a path longer than 3072 bytes"));
}

// The count bound, smaller than kMaxCgroups here (65536 directories take minutes on a slow disk).
TEST(EnumerateTempTree, CgroupsPastTheCountBoundAreLeftOut) {
  TempDir tmp;
  const fs::path cpu = tmp.path() / "cpu";
  make_tree(cpu, {{"cgroup.procs", ""}, {"a/cgroup.procs", ""}});
  // The root, /a with 100 children, and /a/0 with one more: 100 cgroups are kept.
  for (size_t i = 0; i < 100; ++i) make_tree(cpu / "a", {{std::to_string(i) + "/cgroup.procs", ""}});
  make_tree(cpu / "a/0", {{"x/cgroup.procs", ""}});
  CgroupSkips skipped;
  auto cgroups = enumerate_cgroups(tree_hierarchy(cpu), &skipped, /*max_cgroups=*/100);
  ASSERT_TRUE(cgroups) << cgroups.error().message();
  EXPECT_EQ(cgroups->size(), 100u);
  EXPECT_EQ(skipped.count[CgroupSkips::too_many], 3u);
  EXPECT_THAT(skipped.message(), HasSubstr("3 past the first 100 cgroups"));
}

TEST(EnumerateTempTree, SkippedNamesAreEscapedAndShortened) {
  CgroupSkips s;
  s.add(CgroupSkips::too_long, "/evil\n\x1b[2J" + std::string(100, 'x') + "/end");
  s.add(CgroupSkips::too_deep, "/other");
  EXPECT_EQ(s.message(),
            "cgroups left out, each with what is below it: 1 more than 64 levels deep, 1 with a path longer "
            "than 3072 bytes (the first: /evil\\x0a\\x1b[2J" +
                std::string(30, 'x') + "..." + std::string(36, 'x') + "/end)");
  EXPECT_FALSE(beyond_walk_bounds("/a/b"));
  EXPECT_EQ(beyond_walk_bounds(std::string(kMaxCgroupPath + 1, '/')), CgroupSkips::too_long);
}

// The same on a real hierarchy (root only): 1100 levels under the cpu controller (v1), or in the
// unified hierarchy below a delegated scope of the test's own (v2 under systemd).
TEST(EnumeratePriv, ARealTreeOf1100LevelsIsCutAtTheDepthBound) {
  KEEL_REQUIRE_ROOT();
  std::string why;
  if (!testing::host_layout(&why)) GTEST_SKIP() << "skipped: " << why;
  testing::DelegatedTree tree("keel-test-deep-" + std::to_string(::getpid()));
  ASSERT_EQ(tree.error(), "");
  auto layout = discover(SysRoots::host());
  ASSERT_TRUE(layout) << layout.error().message();
  const CgroupHierarchy* cpu = tree.v2() ? layout->unified() : layout->v1_with("cpu");
  ASSERT_NE(cpu, nullptr);
  const std::string top = tree.path() + "/deep";
  ASSERT_TRUE(testing::make_deep_chain(tree.dir("cpu"), 1, "deep"));
  struct Cleanup {
    fs::path dir;
    ~Cleanup() { EXPECT_TRUE(testing::remove_deep(dir)) << dir; }
  } cleanup{tree.dir("cpu") / "deep"};
  ASSERT_TRUE(testing::make_deep_chain(tree.dir("cpu") / "deep", 1099, "a"));
  CgroupSkips skipped;
  auto cgroups = enumerate_cgroups(*cpu, &skipped);
  ASSERT_TRUE(cgroups) << cgroups.error().message();
  size_t mine = 0;
  for (const Cgroup& c : *cgroups) mine += c.path.starts_with(top) ? 1 : 0;
  // Levels from the root: the tree's own (1 on v1, /system.slice/X.scope/tree on v2), then deep, a, ...
  const auto above = static_cast<size_t>(std::count(tree.path().begin(), tree.path().end(), '/'));
  EXPECT_EQ(mine, kMaxCgroupDepth - above);
  EXPECT_GE(skipped.count[CgroupSkips::too_deep], 1u);
  // The example is shortened in its middle: its start and its end.
  EXPECT_THAT(skipped.message(), HasSubstr("more than 64 levels deep (the first: " + top.substr(0, 24)));
  EXPECT_THAT(skipped.message(), HasSubstr("/a/a/a)"));
}

TEST(Enumerate, MissingRootIsAnError) {
  TempDir tmp;
  auto r = enumerate_cgroups(tree_hierarchy(tmp.path() / "nope"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().err, ENOENT);
  EXPECT_THAT(r.error().message(), HasSubstr("nope"));
}

// ---- A process's cgroup ----

TEST(ProcessCgroupPath, PicksTheHierarchysLine) {
  TempDir tmp;
  make_tree(tmp.path(),
            {{"proc/123/cgroup", "3:cpuset:/pinned\n1:cpu:/system.slice/redis.service\n0::/init.scope\n"}});
  const SysRoots roots = SysRoots::under(tmp.path());
  CgroupHierarchy cpu = tree_hierarchy(roots.cgroup / "cpu");
  cpu.id = 1;
  auto path = process_cgroup_path(roots, 123, cpu);
  ASSERT_TRUE(path) << path.error().message();
  EXPECT_EQ(*path, "/system.slice/redis.service");

  CgroupHierarchy unified;
  unified.unified = true;
  EXPECT_EQ(process_cgroup_path(roots, 123, unified).value_or("?"), "/init.scope");

  cpu.mount_root = "/system.slice";  // only that subtree is mounted
  EXPECT_EQ(process_cgroup_path(roots, 123, cpu).value_or("?"), "/redis.service");

  auto gone = process_cgroup_path(roots, 456, cpu);
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().err, ENOENT);
}

// Issue 38: the kernel writes a cgroup's name as it is. A name ending in a space was trimmed, so
// "/be/crit " resolved to "/be/crit" (another cgroup); a name with a newline adds a line that claims
// another cgroup for the process (a tenant's process "in the root", for keel to move). The first is
// the cgroup it is; the second is refused.
TEST(ProcessCgroupPath, ATenantsCgroupNameCannotPassForAnotherCgroup) {
  TempDir tmp;
  make_tree(tmp.path(), {{"proc/7/cgroup", "3:cpuset:/be/crit \n1:cpu:/be/crit \n0::/be/crit \n"},
                         {"proc/8/cgroup", "3:cpuset:/be/x\n1:cpu:/\n1:cpu:/be/x\n0::/be/x\n"},
                         {"proc/9/cgroup", "3:cpuset:/be/x\n1:cpu:/be/x\n0::/be/x\n0::/\n"}});
  const SysRoots roots = SysRoots::under(tmp.path());
  CgroupHierarchy cpu = tree_hierarchy(roots.cgroup / "cpu");
  cpu.id = 1;
  CgroupHierarchy unified;
  unified.unified = true;
  EXPECT_EQ(process_cgroup_path(roots, 7, cpu).value_or("?"), "/be/crit ");
  EXPECT_EQ(process_cgroup_path(roots, 7, unified).value_or("?"), "/be/crit ");
  auto forged = process_cgroup_path(roots, 8, cpu);
  ASSERT_FALSE(forged) << *forged;
  EXPECT_THAT(forged.error().message(), HasSubstr("more than one line for hierarchy"));
  EXPECT_FALSE(process_cgroup_path(roots, 9, unified));
  EXPECT_EQ(process_cgroup_path(roots, 9, cpu).value_or("?"), "/be/x") << "its own line, the only one";
}

}  // namespace
}  // namespace keel
