// A docker daemon of a test's own (Debian's docker.io): no iptables, no bridge, its data and exec roots
// and its socket in a temporary directory, the cgroupfs driver on cgroup v1 and systemd's on cgroup v2
// under systemd (as every systemd host runs it). Stopping it removes what it
// leaves on the host: the cgroups it made (a /docker that was not there before) and its mounts under the
// directory. Images come from `docker import` of a directory (no registry is reachable).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

namespace keel::testing {

class Dockerd {
 public:
  static constexpr const char* kDockerd = "/usr/sbin/dockerd";
  static constexpr const char* kDocker = "/usr/bin/docker";  // docker.io's client, the daemon's version
  // Why docker cannot run here ("" when it can): not root, no docker.io.
  static std::string unavailable();
  // Whether containers get systemd's cgroup driver here (the host is cgroup v2 under systemd).
  static bool systemd_driver();
  // The cgroup path of container `id` (full id) from the hierarchy root: "/docker/ID" (cgroupfs driver)
  // or "/system.slice/docker-ID.scope" (systemd's).
  static std::string container_cgroup(const std::string& id);

  explicit Dockerd(std::filesystem::path dir) : dir_(std::move(dir)) {}
  Dockerd(const Dockerd&) = delete;
  Dockerd& operator=(const Dockerd&) = delete;
  ~Dockerd() { stop(); }

  // Starts dockerd and waits until it answers; "" or why it did not (with its log).
  std::string start();
  void stop();
  // "DOCKER_HOST=unix://SOCK /usr/bin/docker ": prefix of a docker command line.
  const std::string& client() const { return client_; }
  std::filesystem::path data_root() const { return dir_ / "data"; }
  // `docker import` of `rootfs` as `tag` (with docker's --change lines); "" or the error.
  std::string import(const std::filesystem::path& rootfs, const std::string& tag,
                     const std::vector<std::string>& changes = {});

 private:
  std::filesystem::path dir_;
  std::string client_;
  pid_t pid_ = -1;
  std::vector<std::filesystem::path> had_docker_cgroups_;
};

// Copies each binary (absolute paths; one already inside `rootfs` stays) and the libraries ldd lists for
// it into `rootfs`, at the same paths.
// "" or the error.
std::string copy_with_libraries(const std::vector<std::filesystem::path>& binaries,
                                const std::filesystem::path& rootfs);

}  // namespace keel::testing
