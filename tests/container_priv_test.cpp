// keel inside a real container, laid out the way deploy/kubernetes/daemonset.yaml lays it out: a docker
// daemon of its own (Debian's docker.io: no iptables, no bridge, data and exec roots in a temporary
// directory), an image made with `docker import` from the Debian package's files and the libraries the
// binary links (no registry is reachable here) with the Dockerfile's ENTRYPOINT and CMD, the host's
// PID and network namespaces and a cgroup namespace of its own (what containerd and CRI-O give every
// container on cgroup v2; Kubernetes has no field for the host's), the host's /sys and /proc trees
// under /host (the kernel trees keel
// writes read-write), the ConfigMap's config at /etc/keel, a read-only root file system, and the
// DaemonSet's arguments (`keel run --root /host ...`, observe mode). keel must see a workload that
// runs on the host, outside any container (its run-queue waits counted under its name), find its own
// container's cgroup through its namespace and leave it out of every rule, serve /readyz, /healthz and its
// own process metrics, write no knob, and stop cleanly on `docker stop`. Root only; skipped without dockerd.
//
// Capabilities: docker 20.10 knows neither CAP_BPF nor CAP_PERFMON by name, so the container gets
// CAP_SYS_ADMIN (their superset, what kernels before 5.8 need) instead of the DaemonSet's BPF and
// PERFMON; RunPriv.UnderTheUnitsCapabilities... runs keel with exactly BPF and PERFMON.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "tests/support/docker.h"
#include "tests/support/http.h"
#include "tests/support/scene.h"
#include "tests/support/tmp_tree.h"

namespace keel {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::run_command;
using testing::slurp;

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// The value of a counter or gauge sample `series` (name and labels as exported) in a scrape, or -1.
double sample(const std::string& scrape, const std::string& series) {
  size_t at = scrape.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(scrape.substr(at + series.size() + 2));
}

class ContainerPriv : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = testing::Dockerd::unavailable(); !why.empty()) GTEST_SKIP() << "skipped: " << why;
    if (run_command("dpkg-query -W -f='${Status}' keel").second.find("installed") != std::string::npos)
      GTEST_SKIP() << "skipped: a keel package is installed; cpack here would not be compared with it";
  }

  void TearDown() override {
    if (!container_.empty()) run_command(docker_ + "rm -f " + container_);
    if (!unit_.empty()) testing::systemd::stop(unit_);
    if (workload_ > 0) {
      ::kill(-workload_, SIGKILL);  // perf and the worker it forks
      ::waitpid(workload_, nullptr, 0);
    }
    // The worker perf forked is not our child: its cgroup can be removed once it has left it.
    for (const auto& c : cgroups_) {
      for (int i = 0; i < 100 && fs::exists(c / "cgroup.procs") && !trim(slurp(c / "cgroup.procs")).empty();
           ++i)
        std::this_thread::sleep_for(50ms);
      std::error_code ec;
      fs::remove(c, ec);
      if (ec) ADD_FAILURE() << "cannot remove " << c << ": " << ec.message();
    }
    dockerd_.stop();
  }

  void start_dockerd() {
    const std::string why = dockerd_.start();
    ASSERT_TRUE(why.empty()) << why;
    docker_ = dockerd_.client();
  }

  // The image: the package's files, the libraries ldd lists for its binary, the Dockerfile's command.
  void import_image() {
    auto [crc, cout] = run_command("cd " + testing::binary_dir().string() + " && cpack -G DEB -B " +
                                   (dir_.path() / "deb").string());
    ASSERT_EQ(crc, 0) << cout;
    fs::path deb;
    for (const auto& e : fs::directory_iterator(dir_.path() / "deb"))
      if (e.path().extension() == ".deb") deb = e.path();
    ASSERT_FALSE(deb.empty()) << cout;
    const fs::path rootfs = dir_.path() / "rootfs";
    auto [xrc, xout] = run_command("dpkg-deb -x " + deb.string() + " " + rootfs.string());
    ASSERT_EQ(xrc, 0) << xout;
    // The libraries (copied to where ldd finds them; the binary itself is copied over itself).
    const std::string copied = testing::copy_with_libraries({rootfs / "usr/sbin/keel"}, rootfs);
    ASSERT_TRUE(copied.empty()) << copied;
    for (const char* d : {"host", "var/lib/keel", "tmp"}) fs::create_directories(rootfs / d);
    const std::string dockerfile = slurp(testing::source_dir() / "deploy/docker/Dockerfile");
    auto line_of = [&](const std::string& key) {
      size_t at = dockerfile.find("\n" + key + " ");
      return at == std::string::npos ? std::string()
                                     : dockerfile.substr(at + 1, dockerfile.find('\n', at + 1) - at - 1);
    };
    const std::string entrypoint = line_of("ENTRYPOINT"), cmd = line_of("CMD");
    ASSERT_FALSE(entrypoint.empty());
    ASSERT_FALSE(cmd.empty());
    const std::string imported = dockerd_.import(rootfs, "keel:container-test", {entrypoint, cmd});
    ASSERT_TRUE(imported.empty()) << imported;
  }

  // A host workload outside any container: a pipe ping-pong (it waits for a CPU at every wakeup) in
  // system.slice, where the default config's "system" rule finds it: on v1 a directory NAME.scope of the
  // cpu and cpuacct hierarchies, on v2 a service NAME.service that systemd starts (CPUWeight set, so
  // system.slice's children get the cpu controller). Its cgroup path; the file of its CPU weight.
  std::string start_host_workload(const std::string& name) {
    const std::string perf = "perf bench sched pipe -l 2000000000";
    if (v2_) {
      unit_ = name + ".service";
      const std::string why =
          testing::systemd::start_service(unit_, "system.slice", perf, {"CPUWeight t 100"});
      if (!why.empty()) ADD_FAILURE() << why;
      weight_file_ = fs::path("/sys/fs/cgroup/system.slice") / unit_ / "cpu.weight";
      return "/system.slice/" + unit_;
    }
    const std::string leaf = name + ".scope";
    for (const char* h : {"cpu", "cpuacct"}) {
      fs::path slice = fs::path("/sys/fs/cgroup") / h / "system.slice";
      if (!fs::exists(slice)) {
        fs::create_directory(slice);
        cgroups_.insert(cgroups_.begin(), slice);  // removed last
      }
      fs::create_directory(slice / leaf);
      cgroups_.insert(cgroups_.begin(), slice / leaf);
    }
    workload_ = ::fork();
    if (workload_ == 0) {
      ::setpgid(0, 0);
      for (const char* h : {"cpu", "cpuacct"})
        std::ofstream(fs::path("/sys/fs/cgroup") / h / "system.slice" / leaf / "cgroup.procs")
            << ::getpid() << "\n";
      std::freopen("/dev/null", "w", stdout);
      std::freopen("/dev/null", "w", stderr);
      ::execlp("perf", "perf", "bench", "sched", "pipe", "-l", "2000000000", nullptr);
      ::_exit(127);
    }
    weight_file_ = fs::path("/sys/fs/cgroup/cpu/system.slice") / leaf / "cpu.shares";
    return "/system.slice/" + leaf;
  }

  const bool v2_ = testing::host_layout() == testing::Layout::v2;
  std::string unit_;      // v2: the host workload's service
  fs::path weight_file_;  // the host workload's cpu.shares (v1) or cpu.weight (v2)
  testing::TempDir dir_;
  testing::Dockerd dockerd_{dir_.path()};
  std::string docker_;
  pid_t workload_ = -1;
  std::string container_;
  std::vector<fs::path> cgroups_;
};

TEST_F(ContainerPriv, KeelInAContainerLaidOutAsTheDaemonSetSeesTheHostsWorkloadsAndServesMetrics) {
  if (run_command("command -v perf").first != 0)
    GTEST_SKIP() << "skipped: no perf (linux-perf) for the workload";
  ASSERT_NO_FATAL_FAILURE(start_dockerd());
  ASSERT_NO_FATAL_FAILURE(import_image());
  const std::string path = start_host_workload("keel-ctest-" + std::to_string(::getpid()));
  ASSERT_FALSE(::testing::Test::HasFailure());
  const std::string name = path.substr(path.rfind('/') + 1);
  const std::string weight_before = slurp(weight_file_);
  ASSERT_FALSE(weight_before.empty()) << weight_file_;

  // The ConfigMap's config, as the DaemonSet mounts it.
  const std::string cm = slurp(testing::source_dir() / "deploy/kubernetes/configmap.yaml");
  std::istringstream lines(cm.substr(cm.find("  keel.toml: |")));
  std::string l, toml;
  std::getline(lines, l);
  while (std::getline(lines, l)) toml += (l.size() >= 4 ? l.substr(4) : "") + "\n";
  fs::create_directories(dir_.path() / "config");
  std::ofstream(dir_.path() / "config/keel.toml") << toml;
  fs::create_directories(dir_.path() / "state");

  // The DaemonSet's arguments, with the node's address as loopback on a free port.
  const std::string ds = slurp(testing::source_dir() / "deploy/kubernetes/daemonset.yaml");
  std::istringstream in(ds.substr(ds.find("          args:\n") + 16));
  std::string args;
  for (std::string a; std::getline(in, a) && a.rfind("            - ", 0) == 0;)
    args += " '" + a.substr(14) + "'";
  const uint16_t port = testing::free_port();
  const std::string node_addr = "$(NODE_IP):9477";
  ASSERT_NE(args.find(node_addr), std::string::npos) << args;
  args.replace(args.find(node_addr), node_addr.size(), "127.0.0.1:" + std::to_string(port));
  // The CMD's arguments are the DaemonSet's, but for the listen address.
  ASSERT_EQ(args.substr(0, args.find(" '--metrics-listen'")),
            " 'run' '--root' '/host' '--config' '/etc/keel/keel.toml' '--state' '/var/lib/keel/state'");

  // The DaemonSet's mountPropagation (HostToContainer, docker's rslave) needs shared host mounts, as
  // systemd makes them; this machine's are private, so the test binds without propagation.
  std::string mounts =
      " -v /sys:/host/sys:ro -v /sys/fs/cgroup:/host/sys/fs/cgroup"
      " -v /sys/kernel/debug:/host/sys/kernel/debug -v /sys/kernel/btf:/host/sys/kernel/btf:ro"
      " -v /proc:/host/proc:ro -v " +
      (dir_.path() / "config").string() + ":/etc/keel:ro -v " + (dir_.path() / "state").string() +
      ":/var/lib/keel";
  if (fs::is_directory("/sys/fs/resctrl")) mounts += " -v /sys/fs/resctrl:/host/sys/fs/resctrl";
  container_ = "keel-ctest-" + std::to_string(::getpid());
  auto [rrc, rout] = run_command(docker_ + "run -d --name " + container_ +
                                 " --pid host --network host --cgroupns private --read-only --user 0:0"
                                 " --cap-drop ALL --cap-add SYS_ADMIN --security-opt seccomp=unconfined"
                                 " --security-opt no-new-privileges" +
                                 mounts + " keel:container-test" + args);
  ASSERT_EQ(rrc, 0) << rout;
  const std::string id = trim(rout);
  auto logs = [&] { return run_command(docker_ + "logs " + container_).second; };

  // Ready, then the host's workload counted under its name, and keel's own container not at all.
  bool ready = false;
  for (int i = 0; i < 300 && !ready; ++i) {
    ready = testing::http_get(port, "/readyz").status == 200;
    if (!ready) std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(ready) << logs();
  const std::string host_series =
      "keel_runqueue_latency_seconds_count{class=\"best_effort\",workload=\"system/" + name + "\"}";
  // Its own container: docker's cgroupfs driver puts it in /docker/ID (the "docker" rule's shape), the
  // systemd driver (v2) in /system.slice/docker-ID.scope (the "system" rule's).
  const std::string own = v2_ ? "system/docker-" + id + ".scope" : "docker/" + id;
  const std::string own_series =
      "keel_runqueue_latency_seconds_count{class=\"best_effort\",workload=\"" + own + "\"}";
  std::string scrape;
  double host_waits = -1;
  for (int i = 0; i < 100 && host_waits <= 0; ++i) {
    std::this_thread::sleep_for(200ms);
    scrape = testing::http_get(port, "/metrics").body;
    host_waits = sample(scrape, host_series);
  }
  EXPECT_GT(host_waits, 100) << host_series << "\n" << logs() << scrape;
  // keel is no rule's workload: its own cgroup, which the catch-all rule would take, is left out. In
  // its own cgroup namespace it finds that cgroup (the kernel shows it as "/") by its pid.
  EXPECT_LT(sample(scrape, own_series), 0) << own_series << "\n" << logs() << scrape;
  const std::string own_path = v2_ ? "/system.slice/docker-" + id + ".scope" : "/docker/" + id;
  EXPECT_NE(logs().find("inventory: keel's own cgroup " + own_path + " is no rule's"), std::string::npos)
      << logs();
  EXPECT_NE(logs().find("run: keel runs in a cgroup namespace of its own, rooted at"), std::string::npos)
      << logs();
  EXPECT_EQ(sample(scrape, "keel_sensor_available{sensor=\"runqueue\"}"), 1) << scrape;
  EXPECT_GT(sample(scrape, "process_resident_memory_bytes"), 1e6) << scrape;
  EXPECT_EQ(testing::http_get(port, "/healthz").status, 200);
  const std::string log = logs();
  EXPECT_NE(log.find("run: observe"), std::string::npos) << log;
  EXPECT_EQ(log.find("error:"), std::string::npos) << log;
  // Observe mode: the host's cgroup is as it was.
  EXPECT_EQ(slurp(weight_file_), weight_before) << weight_file_;

  // docker stop: SIGTERM, keel ends by itself with 0.
  auto [src, sout] = run_command(docker_ + "stop -t 30 " + container_);
  EXPECT_EQ(src, 0) << sout;
  EXPECT_EQ(trim(run_command(docker_ + "inspect -f '{{.State.ExitCode}}' " + container_).second), "0")
      << logs();
}

}  // namespace
}  // namespace keel
