// The platforms' names, read from temporary trees laid out as containerd, CRI-O, podman, docker and
// libvirt lay out their state (none of them runs here but docker: tests/docker_priv_test.cpp).
#include "inventory/platforms.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "inventory/workloads.h"
#include "tests/support/tmp_tree.h"

namespace keel {
namespace {

namespace fs = std::filesystem;
using ::keel::testing::make_tree;
using ::keel::testing::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kPodUid = "3f6a1b2c-4d5e-4f60-8a7b-9c0d1e2f3a4b";
const std::string kPodUid_ = "3f6a1b2c_4d5e_4f60_8a7b_9c0d1e2f3a4b";
const std::string kPod2Uid = "a1b2c3d4-e5f6-4789-9abc-def012345678";
const std::string kPod2Uid_ = "a1b2c3d4_e5f6_4789_9abc_def012345678";
const std::string kSandbox = std::string(64, 'a');
const std::string kRedis = std::string(63, 'b') + "1";
const std::string kSidecar = std::string(63, 'b') + "2";
const std::string kCrioSandbox = std::string(64, 'c');
const std::string kCrioDb = std::string(63, 'd') + "1";
const std::string kPodman = std::string(64, 'e');
const std::string kDocker = std::string(64, 'f');

// containerd's OCI bundle (config.json), as its CRI plugin writes it, trimmed to what matters plus some
// of the rest so the parser meets the real shape.
std::string containerd_bundle(const std::string& id, const std::string& type, const std::string& container,
                              const std::string& ns, const std::string& pod, const std::string& uid,
                              bool uid_annotation = true) {
  std::string cgroups = "kubepods-burstable-pod" + kPodUid_ + ".slice:cri-containerd:" + id;
  std::string a = R"("io.kubernetes.cri.container-type":")" + type + R"(","io.kubernetes.cri.sandbox-id":")" +
                  kSandbox + R"(","io.kubernetes.cri.sandbox-name":")" + pod +
                  R"(","io.kubernetes.cri.sandbox-namespace":")" + ns + R"(")";
  if (uid_annotation) a += R"(,"io.kubernetes.cri.sandbox-uid":")" + uid + R"(")";
  if (!container.empty())
    a += R"(,"io.kubernetes.cri.container-name":")" + container +
         R"(","io.kubernetes.cri.image-name":"docker.io/library/redis:7.2")";
  else
    a +=
        R"(,"io.kubernetes.cri.sandbox-log-directory":"/var/log/pods/x","io.kubernetes.cri.sandbox-cpu-period":"100000")";
  return R"({"ociVersion":"1.1.0","process":{"user":{"uid":0,"gid":0},"args":["/pause"],"env":["PATH=/usr/bin"],"cwd":"/"},)"
         R"("root":{"path":"rootfs"},"hostname":"x","mounts":[{"destination":"/proc","type":"proc","source":"proc"}],)"
         R"("annotations":{)" +
         a + R"(},"linux":{"resources":{"cpu":{"shares":102,"period":100000}},"cgroupsPath":")" + cgroups +
         R"(","namespaces":[{"type":"pid"},{"type":"ipc"}]}})";
}

// CRI-O's config.json in the container's userdata, with CRI-O's annotation keys.
std::string crio_bundle(const std::string& type, const std::string& container, const std::string& ns,
                        const std::string& pod, const std::string& uid) {
  return R"({"ociVersion":"1.0.2-dev","process":{"args":["postgres"]},"root":{"path":"/var/lib/containers/storage/overlay/x/merged"},)"
         R"("annotations":{"io.container.manager":"cri-o","io.kubernetes.container.name":")" +
         container + R"(","io.kubernetes.cri-o.ContainerType":")" + type +
         R"(","io.kubernetes.cri-o.SandboxID":")" + kCrioSandbox + R"(","io.kubernetes.pod.name":")" + pod +
         R"(","io.kubernetes.pod.namespace":")" + ns + R"(","io.kubernetes.pod.uid":")" + uid +
         R"("},"linux":{"cgroupsPath":"kubepods-pod)" + kPod2Uid_ + ".slice:crio:" + kCrioDb + R"("}})";
}

// A host running all of them: containerd (pod default/redis-0: a sandbox, containers redis and
// sidecar), CRI-O (pod db/pg-0: a sandbox and container postgres), podman (container web), docker
// (container cache) and libvirt (domains db1 with id 3, and web-vm-with-a-long-name with id 12).
SysRoots platform_host(const TempDir& tmp) {
  const std::string ctrd = "run/containerd/io.containerd.runtime.v2.task/k8s.io/";
  const std::string crio = "run/containers/storage/overlay-containers/";
  make_tree(
      tmp.path(),
      {{ctrd + kSandbox + "/config.json",
        containerd_bundle(kSandbox, "sandbox", "", "default", "redis-0", kPodUid)},
       {ctrd + kRedis + "/config.json",
        containerd_bundle(kRedis, "container", "redis", "default", "redis-0", kPodUid)},
       // An older containerd without the uid annotation: the uid comes from the cgroups path.
       {ctrd + kSidecar + "/config.json",
        containerd_bundle(kSidecar, "container", "sidecar", "default", "redis-0", kPodUid, false)},
       {ctrd + kSidecar + "/rootfs/.keep", ""},
       {crio + kCrioSandbox + "/userdata/config.json", crio_bundle("sandbox", "POD", "db", "pg-0", kPod2Uid)},
       {crio + kCrioDb + "/userdata/config.json",
        crio_bundle("container", "postgres", "db", "pg-0", kPod2Uid)},
       {"var/lib/containers/storage/overlay-containers/containers.json",
        R"([{"id":")" + kPodman +
            R"(","names":["web"],"image":"0123","layer":"4567","metadata":"{\"image-name\":\"docker.io/library/nginx:latest\",\"name\":\"web\"}","created":"2026-01-01T00:00:00Z","flags":{"MountLabel":""}}])"},
       {"var/lib/docker/containers/" + kDocker + "/config.v2.json",
        R"({"State":{"Running":true},"ID":")" + kDocker + R"(","Config":{"Labels":{}},"Name":"/cache"})"},
       {"run/libvirt/qemu/db1.xml",
        "<!--\nWARNING: THIS IS AN AUTO-GENERATED FILE. CHANGES TO IT ARE LIKELY TO BE\nOVERWRITTEN AND "
        "LOST.\n-->\n"
        "<domstatus state='running' reason='booted' pid='4242'>\n  <taint flag='high-privileges'/>\n"
        "  <monitor path='/var/lib/libvirt/qemu/domain-3-db1/monitor.sock' type='unix'/>\n"
        "  <vcpus>\n    <vcpu id='0' pid='4250'/>\n  </vcpus>\n"
        "  <domain type='kvm' id='3'>\n    <name>db1</name>\n    "
        "<uuid>0c6e8a1e-0b9e-4e2a-9c41-7d1f2b3a4c5d</uuid>\n"
        "    <vcpu placement='static'>4</vcpu>\n  </domain>\n</domstatus>\n"},
       {"run/libvirt/qemu/web-vm-with-a-long-name.xml",
        "<domstatus state='running' pid='5151'>\n  <domain type=\"kvm\" id=\"12\">\n"
        "    <name>web-vm-with-a-long-name</name>\n  </domain>\n</domstatus>\n"},
       {"run/libvirt/qemu/db1.pid", "4242"}});
  return SysRoots::under(tmp.path());
}

const std::string kRedisPod =
    "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + kPodUid_ + ".slice";
const std::string kPgPod = "/kubepods.slice/kubepods-pod" + kPod2Uid_ + ".slice";
const std::string kVm = "/machine.slice/machine-qemu\\x2d3\\x2ddb1.scope";
const std::string kLongVm = "/machine.slice/machine-qemu\\x2d12\\x2dweb\\x2dvm\\x2dwith\\x2da.scope";

TEST(PlatformTrees, ContainerdCrioPodmanDockerAndLibvirtStateNameTheirCgroups) {
  TempDir tmp;
  const SysRoots roots = platform_host(tmp);
  Platforms p;
  p.read(roots, Platforms::all);
  for (auto k : {Platforms::docker, Platforms::cri, Platforms::podman, Platforms::libvirt})
    EXPECT_EQ(p.error(k), "") << k;
  ASSERT_EQ(p.pods().size(), 2u);
  EXPECT_EQ(p.pod(kPodUid_)->name, "redis-0");
  EXPECT_EQ(p.pod(kPod2Uid)->ns, "db");
  EXPECT_EQ(p.container(kSidecar)->pod_uid, kPodUid);  // from the cgroups path
  EXPECT_EQ(p.container(kCrioDb)->runtime, "cri-o");
  EXPECT_EQ(p.container(kSandbox)->name, "");  // a sandbox is the pod, not a container of it
  EXPECT_EQ(p.name_of(kRedisPod), "pod default/redis-0");
  EXPECT_EQ(p.name_of(kRedisPod + "/cri-containerd-" + kRedis + ".scope"),
            "pod default/redis-0 container redis");
  EXPECT_EQ(p.name_of(kRedisPod + "/cri-containerd-" + kSandbox + ".scope"), "pod default/redis-0");
  EXPECT_EQ(p.name_of(kPgPod + "/crio-" + kCrioDb + ".scope"), "pod db/pg-0 container postgres");
  EXPECT_EQ(p.name_of("/machine.slice/libpod-" + kPodman + ".scope"), "podman web");
  EXPECT_EQ(p.name_of("/libpod_parent/libpod-" + kPodman), "podman web");
  EXPECT_EQ(p.name_of("/docker/" + kDocker), "docker cache");
  EXPECT_EQ(p.name_of(kVm), "vm db1");
  EXPECT_EQ(p.name_of(kVm + "/vcpu0"), "vm db1");
  EXPECT_EQ(p.name_of(kLongVm + "/libvirt/emulator"), "vm web-vm-with-a-long-name");
  EXPECT_EQ(p.name_of("/machine/qemu-3-db1.libvirt-qemu/vcpu1"), "vm db1");
  // Shapes outside the runtimes' parents name nothing.
  EXPECT_EQ(p.name_of("/user.slice/machine.slice/libpod-" + kPodman + ".scope"), "");
  EXPECT_EQ(p.name_of("/user.slice" + kVm), "");
  EXPECT_EQ(p.name_of("/machine.slice/machine-qemu\\x2d4\\x2ddb1.scope"), "");  // not db1's id
}

TEST(PlatformTrees, StateFilesAreReadAgainOnlyWhenTheyChange) {
  TempDir tmp;
  const SysRoots roots = platform_host(tmp);
  Platforms p;
  p.read(roots, Platforms::cri);
  const fs::path bundle = roots.containerd_state / "k8s.io" / kRedis / "config.json";
  // The same size and mtime: not read again (so garbage written in place with the stamp kept is not seen).
  struct stat st;
  ASSERT_EQ(::stat(bundle.c_str(), &st), 0);
  std::string same(static_cast<size_t>(st.st_size), ' ');
  make_tree(roots.containerd_state, {{"k8s.io/" + kRedis + "/config.json", same}});
  struct timespec times[2] = {st.st_atim, st.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, bundle.c_str(), times, 0), 0);
  p.read(roots, Platforms::cri);
  EXPECT_EQ(p.name_of(kRedisPod + "/cri-containerd-" + kRedis + ".scope"),
            "pod default/redis-0 container redis");
  // Changed (rewritten with other names): read again; the sandbox names the pod.
  make_tree(roots.containerd_state,
            {{"k8s.io/" + kRedis + "/config.json",
              containerd_bundle(kRedis, "container", "redis", "default", "redis-9", kPodUid)},
             {"k8s.io/" + kSandbox + "/config.json",
              containerd_bundle(kSandbox, "sandbox", "", "default", "redis-1", kPodUid)}});
  p.read(roots, Platforms::cri);
  EXPECT_EQ(p.name_of(kRedisPod + "/cri-containerd-" + kRedis + ".scope"),
            "pod default/redis-1 container redis");
  // Gone with the container.
  fs::remove_all(roots.containerd_state);
  p.read(roots, Platforms::cri);
  EXPECT_EQ(p.name_of(kRedisPod + "/cri-containerd-" + kRedis + ".scope"), "");
  EXPECT_EQ(p.error(Platforms::cri), "");
}

// The runtimes' state is root's: a file that is a link, too big, or someone else's is refused (said in
// the error), and the rest is still read.
TEST(PlatformTrees, AStateFileThatIsALinkTooBigOrNotRootsIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another user";
  TempDir tmp;
  const SysRoots roots = platform_host(tmp);
  const fs::path dir = roots.containerd_state / "k8s.io";
  fs::remove(dir / kRedis / "config.json");
  fs::create_symlink(dir / kSandbox / "config.json", dir / kRedis / "config.json");
  ASSERT_EQ(::chown((dir / kSidecar / "config.json").c_str(), 1234, 1234), 0);
  Platforms p;
  p.read(roots, Platforms::cri);
  EXPECT_EQ(p.container(kRedis), nullptr);
  EXPECT_EQ(p.container(kSidecar), nullptr);
  EXPECT_NE(p.container(kSandbox), nullptr);
  EXPECT_NE(p.container(kCrioDb), nullptr);
  EXPECT_THAT(p.error(Platforms::cri), ::testing::AnyOf(HasSubstr("symbolic link"), HasSubstr("not root")));
  make_tree(roots.libvirt_state, {{"huge.xml", std::string((4u << 20) + 1, ' ')}});
  p.read(roots, Platforms::libvirt);
  EXPECT_THAT(p.error(Platforms::libvirt), HasSubstr("huge.xml: 4194305 bytes, more than the 4194304"));
  EXPECT_NE(p.vm("3"), nullptr);
}

// kubelet's files in their exact formats (kubelet does not run here).
TEST(KubeletTree, TheStaticCpuManagersCpusPodsAndReservedCpusAreRead) {
  TempDir tmp;
  const SysRoots roots = SysRoots::under(tmp.path());
  KubeletState k;
  EXPECT_FALSE(k.read(roots).any());  // no kubelet
  EXPECT_EQ(k.read(roots).error, "");
  make_tree(tmp.path(),
            {{"var/lib/kubelet/cpu_manager_state",
              R"({"policyName":"static","defaultCpuSet":"0,6-7","entries":{")" + kPodUid_ +
                  R"(":{"a":"1-2","b":"3"},")" + kPod2Uid + R"(":{"c":"4-5"}},"checksum":1})"},
             {"var/lib/kubelet/config.yaml", "cpuManagerPolicy: static\nreservedSystemCPUs: 0 # system\n"}});
  const KubeletCpus& c = k.read(roots);
  EXPECT_EQ(c.exclusive.to_list(), "1-5");
  EXPECT_EQ(c.reserved.to_list(), "0");
  EXPECT_THAT(c.pods, ElementsAre(kPodUid, kPod2Uid));
  // The none policy holds no CPUs; garbage is said, not trusted.
  make_tree(tmp.path(), {{"var/lib/kubelet/cpu_manager_state",
                          R"({"policyName":"none","defaultCpuSet":"","checksum":2})"}});
  EXPECT_TRUE(k.read(roots).exclusive.empty());
  make_tree(tmp.path(), {{"var/lib/kubelet/cpu_manager_state", "{not json"}});
  EXPECT_THAT(k.read(roots).error, HasSubstr("not kubelet's CPU manager state"));
  EXPECT_TRUE(k.read(roots).exclusive.empty());
}

TEST(PathShapes, RuntimeAnchorsAtOrAboveACgroup) {
  EXPECT_EQ(pod_anchor(kRedisPod + "/cri-containerd-" + kRedis + ".scope").path, kRedisPod);
  EXPECT_EQ(pod_container_anchor(kRedisPod + "/cri-containerd-" + kRedis + ".scope/sub").id, kRedis);
  EXPECT_EQ(pod_container_anchor("/kubepods/burstable/pod" + kPodUid + "/crio-" + kRedis).id, kRedis);
  EXPECT_FALSE(pod_container_anchor("/x/pod" + kPodUid + "/" + kRedis));
  EXPECT_EQ(
      podman_anchor("/machine.slice/machine-libpod_pod_0123abcd.slice/libpod-" + kPodman + ".scope/container")
          .id,
      kPodman);
  EXPECT_FALSE(podman_anchor("/system.slice/libpod-" + kPodman + ".scope"));
  EXPECT_EQ(libvirt_anchor(kVm + "/emulator").id, "3");
  EXPECT_EQ(libvirt_anchor(kVm + "/emulator").path, kVm);
  EXPECT_FALSE(libvirt_anchor("/machine.slice/machine-qemu\\x2d03\\x2ddb1.scope"));
  EXPECT_FALSE(libvirt_anchor("/machine.slice/machine-qemu\\x2dx\\x2ddb1.scope"));
  EXPECT_FALSE(libvirt_anchor("/machine.slice/machine-lxc\\x2d3\\x2ddb1.scope"));
  EXPECT_EQ(libvirt_vcpu(kVm + "/vcpu0"), 0);
  EXPECT_EQ(libvirt_vcpu(kVm + "/libvirt/vcpu11"), 11);
  EXPECT_EQ(libvirt_vcpu(kVm + "/emulator"), -1);
  EXPECT_EQ(libvirt_vcpu(kVm + "/vcpu01"), -1);
  EXPECT_EQ(libvirt_vcpu("/vcpu0"), -1);
  EXPECT_EQ(pod_uid_key(kPodUid_), kPodUid);
  EXPECT_EQ(pod_uid_key("pod" + kPodUid), "");
}

// ---- Matching by the platforms' names ----

config::Workload named(const std::string& name, config::Match m, bool critical = false) {
  config::Workload w;
  w.name = name;
  w.match = std::move(m);
  w.klass = critical ? config::WorkloadClass::critical : config::WorkloadClass::best_effort;
  return w;
}
config::Match pod(const std::string& p, const std::string& container = "") {
  config::Match m;
  m.pod = p;
  m.container = container;
  return m;
}
config::Match podman(const std::string& n) {
  config::Match m;
  m.podman = n;
  return m;
}
config::Match vm(const std::string& n) {
  config::Match m;
  m.vm = n;
  return m;
}

std::vector<Cgroup> at(const std::vector<std::string>& paths) {
  std::vector<Cgroup> out;
  unsigned long long inode = 100;
  for (const auto& p : paths) out.push_back({p, CgroupId{1, inode++}, 1});
  return out;
}
CgroupHierarchy cpu_v1() {
  CgroupHierarchy h;
  h.id = 1;
  h.controllers = {"cpu"};
  return h;
}
std::vector<std::string> owners(const WorkloadMatches& m) {
  std::vector<std::string> out;
  for (const auto& c : m.cgroups) out.push_back(c.workload.empty() ? "-" : c.instance);
  return out;
}

TEST(MatchByPlatformNames, PodsByNamespaceAndNameTheirContainersByNameOnContainerdAndCrioTrees) {
  TempDir tmp;
  const SysRoots roots = platform_host(tmp);
  const std::string redis = kRedisPod + "/cri-containerd-" + kRedis + ".scope";
  const std::string pause = kRedisPod + "/cri-containerd-" + kSandbox + ".scope";
  const std::string sidecar = kRedisPod + "/cri-containerd-" + kSidecar + ".scope";
  const std::string pg = kPgPod + "/crio-" + kCrioDb + ".scope";
  auto cgroups = at({kRedisPod, pause, redis, sidecar, kPgPod, pg});
  std::vector<config::Workload> ws = {named("cache", pod("default/redis-*", "redis"), true),
                                      named("db", pod("db/*")), named("rest", pod("*/*"))};
  WorkloadMatches m = match_workloads(ws, cpu_v1(), cgroups, roots);
  EXPECT_THAT(owners(m), ElementsAre("rest", "rest", "cache", "rest", "db", "db"));
  EXPECT_EQ(m.cgroups[2].platform, "pod default/redis-0 container redis");
  EXPECT_EQ(m.cgroups[5].platform, "pod db/pg-0 container postgres");
  // One instance per pod, or per container, named as the platform names it.
  ws[0].match.each = true;
  ws[1].match.each = true;
  m = match_workloads(ws, cpu_v1(), cgroups, roots);
  EXPECT_THAT(owners(m),
              ElementsAre("rest", "rest", "cache/default/redis-0/redis", "rest", "db/db/pg-0", "db/db/pg-0"));
  // Rescheduled: a new uid, the same name: still the critical workload's.
  const std::string moved =
      "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + kPod2Uid_ + ".slice";
  fs::remove_all(roots.crio_state);
  make_tree(roots.containerd_state,
            {{"k8s.io/" + kRedis + "/config.json",
              containerd_bundle(kRedis, "container", "redis", "default", "redis-0", kPod2Uid)}});
  ws[0].match.each = false;
  m = match_workloads(ws, cpu_v1(), at({moved, moved + "/cri-containerd-" + kRedis + ".scope"}), roots);
  EXPECT_THAT(owners(m), ElementsAre("rest", "cache"));
  // A pod that is not there says so, with where it looked.
  m = match_workloads({named("x", pod("prod/api-*"))}, cpu_v1(), cgroups, roots);
  EXPECT_THAT(m.workloads[0].note, HasSubstr("pod 'prod/api-*': no pod by that name in "));
  EXPECT_THAT(m.workloads[0].note, HasSubstr("(containerd) or "));
  m = match_workloads({named("x", pod("default/redis-0", "nginx"))}, cpu_v1(), cgroups, roots);
  EXPECT_THAT(m.workloads[0].note, HasSubstr("pod 'default/redis-0' has no container 'nginx'"));
}

TEST(MatchByPlatformNames, PodmanContainersAndLibvirtDomainsWithTheirVcpuCgroups) {
  TempDir tmp;
  const SysRoots roots = platform_host(tmp);
  const std::string web = "/machine.slice/libpod-" + kPodman + ".scope";
  auto cgroups = at({"/machine.slice", kVm, kVm + "/emulator", kVm + "/vcpu0", kVm + "/vcpu1", kLongVm,
                     kLongVm + "/libvirt/vcpu0", web, "/machine.slice/machine-qemu\\x2d7\\x2ddb1.scope",
                     "/user.slice/libpod-" + kPodman + ".scope"});
  std::vector<config::Workload> ws = {named("db", vm("db1"), true), named("web", podman("web")),
                                      named("vms", vm("web-*"))};
  WorkloadMatches m = match_workloads(ws, cpu_v1(), cgroups, roots);
  EXPECT_THAT(owners(m), ElementsAre("-", "db", "db", "db", "db", "vms", "vms", "web", "-", "-"));
  EXPECT_EQ(m.cgroups[3].selector, Selector::vm);
  EXPECT_EQ(m.cgroups[7].selector, Selector::podman);
  ws[2].match.each = true;
  m = match_workloads(ws, cpu_v1(), cgroups, roots);
  EXPECT_EQ(m.cgroups[6].instance, "vms/web-vm-with-a-long-name");
  // Stopped: libvirt removes the status file; the domain's rule matches nothing and says why.
  fs::remove(roots.libvirt_state / "db1.xml");
  m = match_workloads(ws, cpu_v1(), cgroups, roots);
  EXPECT_EQ(m.cgroups[1].workload, "");
  EXPECT_THAT(m.workloads[0].note, HasSubstr("vm 'db1': no running libvirt domain by that name in "));
}

TEST(MatchByPlatformNames, KeelWorkloadsShowsThePlatformNameOfEveryCgroup) {
  TempDir tmp;
  const SysRoots roots = platform_host(tmp);
  WorkloadReport report;
  report.hierarchy = cpu_v1();
  report.matches = match_workloads({named("db", vm("db1"))}, cpu_v1(),
                                   at({kVm, kRedisPod + "/cri-containerd-" + kRedis + ".scope"}), roots);
  const std::string text = format_workloads_text(report);
  EXPECT_THAT(text, ::testing::ContainsRegex("db +vm db1 +vm\n"));
  EXPECT_THAT(text, ::testing::ContainsRegex("- +pod default/redis-0 container redis\n"));
  EXPECT_THAT(format_workloads_json(report),
              HasSubstr(R"("platform":"pod default/redis-0 container redis")"));
}

}  // namespace
}  // namespace keel
