#include "tests/support/docker.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <thread>

#include "tests/support/scene.h"
#include "tests/support/tmp_tree.h"

namespace keel::testing {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string Dockerd::unavailable() {
  if (::geteuid() != 0) return "runs a docker daemon and host cgroups (root only)";
  if (!fs::exists(kDockerd) || !fs::exists(kDocker))
    return std::string("no ") + kDockerd + " / " + kDocker + " (Debian's docker.io)";
  return {};
}

bool Dockerd::systemd_driver() { return host_layout() == Layout::v2; }

std::string Dockerd::container_cgroup(const std::string& id) {
  return systemd_driver() ? "/system.slice/docker-" + id + ".scope" : "/docker/" + id;
}

std::string Dockerd::start() {
  for (const auto& h : fs::directory_iterator("/sys/fs/cgroup"))
    if (fs::exists(h.path() / "docker")) had_docker_cgroups_.push_back(h.path() / "docker");
  const fs::path sock = dir_ / "docker.sock", log = dir_ / "dockerd.log";
  client_ = "DOCKER_HOST=unix://" + sock.string() + " " + kDocker + " ";
  pid_ = ::fork();
  if (pid_ == 0) {
    const std::string data = data_root().string(), exec = (dir_ / "exec").string(),
                      host = "unix://" + sock.string(), pid = (dir_ / "dockerd.pid").string();
    std::freopen(log.c_str(), "w", stdout);
    std::freopen(log.c_str(), "a", stderr);
    // Its own (empty) config file, and the cgroup driver of the host's kind: systemd's where systemd
    // manages cgroup v2 (containers become docker-ID.scope units), cgroupfs on v1.
    const std::string config = (dir_ / "daemon.json").string();
    std::FILE* f = std::fopen(config.c_str(), "w");
    if (f != nullptr) {
      std::fputs("{}\n", f);
      std::fclose(f);
    }
    const char* driver = systemd_driver() ? "native.cgroupdriver=systemd" : "native.cgroupdriver=cgroupfs";
    ::execl(kDockerd, kDockerd, "--config-file", config.c_str(), "--exec-opt", driver, "--iptables=false",
            "--ip-masq=false", "--bridge=none", "--data-root", data.c_str(), "--exec-root", exec.c_str(),
            "-H", host.c_str(), "--pidfile", pid.c_str(), nullptr);
    ::_exit(127);
  }
  for (int i = 0; i < 300; ++i) {
    if (run_command(client_ + "info --format '{{.ServerVersion}}'").first == 0) return {};
    if (::waitpid(pid_, nullptr, WNOHANG) != 0) {
      pid_ = -1;
      return "dockerd exited:\n" + slurp(log);
    }
    std::this_thread::sleep_for(100ms);
  }
  return "dockerd did not answer in 30 s:\n" + slurp(log);
}

void Dockerd::stop() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 200 && ::waitpid(pid_, nullptr, WNOHANG) == 0; ++i)
      std::this_thread::sleep_for(100ms);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  } else if (client_.empty()) {
    return;  // never started
  }
  // What dockerd leaves: its cgroups (when it made them) and its mounts under the temporary roots.
  for (const auto& h : fs::directory_iterator("/sys/fs/cgroup")) {
    fs::path d = h.path() / "docker";
    if (!fs::exists(d) ||
        std::find(had_docker_cgroups_.begin(), had_docker_cgroups_.end(), d) != had_docker_cgroups_.end())
      continue;
    std::vector<fs::path> below;
    for (const auto& e : fs::recursive_directory_iterator(d))
      if (e.is_directory()) below.push_back(e.path());
    std::sort(below.rbegin(), below.rend());
    std::error_code ec;
    for (const auto& b : below) fs::remove(b, ec);
    fs::remove(d, ec);
  }
  std::istringstream mounts(slurp("/proc/mounts"));
  std::vector<std::string> ours;
  for (std::string line; std::getline(mounts, line);) {
    std::istringstream f(line);
    std::string dev, at;
    f >> dev >> at;
    if (at.rfind(dir_.string(), 0) == 0) ours.push_back(at);
  }
  std::sort(ours.rbegin(), ours.rend());
  for (const auto& m : ours) run_command("umount -l " + m);
  client_.clear();
}

std::string Dockerd::import(const fs::path& rootfs, const std::string& tag,
                            const std::vector<std::string>& changes) {
  std::string cmd = "tar -C " + rootfs.string() + " -c . | " + client_ + "import";
  for (const auto& c : changes) cmd += " --change '" + c + "'";
  auto [rc, out] = run_command(cmd + " - " + tag);
  return rc == 0 ? std::string() : out;
}

std::string copy_with_libraries(const std::vector<fs::path>& binaries, const fs::path& rootfs) {
  for (const fs::path& bin : binaries) {
    auto [rc, libs] = run_command("ldd " + bin.string());
    if (rc != 0 && libs.find("not a dynamic executable") == std::string::npos) return libs;
    std::vector<fs::path> files;
    if (bin.string().rfind(rootfs.string() + "/", 0) != 0) files.push_back(bin);  // not in it already
    std::istringstream in(libs);
    for (std::string line; std::getline(in, line);) {
      size_t slash = line.find('/');
      if (slash != std::string::npos) files.push_back(line.substr(slash, line.find(' ', slash) - slash));
    }
    for (const fs::path& f : files) {
      std::error_code ec;
      fs::create_directories(rootfs / f.relative_path().parent_path(), ec);
      fs::copy_file(fs::canonical(f, ec), rootfs / f.relative_path(), fs::copy_options::overwrite_existing,
                    ec);
      if (ec) return f.string() + ": " + ec.message();
    }
  }
  return {};
}

}  // namespace keel::testing
