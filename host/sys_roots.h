// Every kernel path keel touches is built from these roots; tests point them at temporary trees.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace keel {

struct SysRoots {
  std::filesystem::path cgroup = "/sys/fs/cgroup";
  std::filesystem::path resctrl = "/sys/fs/resctrl";
  std::filesystem::path proc = "/proc";
  std::filesystem::path sys = "/sys";
  std::filesystem::path debugfs = "/sys/kernel/debug";
  // Not kernel paths, but the state the platforms keep, read (never written) for the names they give
  // their cgroups: docker's containers, containerd's and CRI-O's OCI bundles (their Kubernetes
  // annotations), podman's container store and libvirt's running domains.
  std::filesystem::path docker_state = "/var/lib/docker";
  std::filesystem::path containerd_state = "/run/containerd/io.containerd.runtime.v2.task";
  std::filesystem::path crio_state = "/run/containers/storage/overlay-containers";
  std::filesystem::path podman_state = "/var/lib/containers/storage/overlay-containers";
  std::filesystem::path libvirt_state = "/run/libvirt/qemu";
  // kubelet's root directory: its static CPU manager's cpu_manager_state and its config.yaml.
  std::filesystem::path kubelet_state = "/var/lib/kubelet";
  // systemd's private manager socket (root only), where keel asks systemd for a unit's runtime
  // property (host/systemd.h).
  std::filesystem::path systemd_bus = "/run/systemd/private";
  // keel's own cgroup namespace when it is not the host's (a container's default on cgroup v2): per
  // hierarchy (its id, 0 the unified one), the cgroup at the namespace's root as a path from the
  // hierarchy's root. The kernel shows cgroups relative to it ("/../../init.scope") in /proc/PID/cgroup
  // and mountinfo; host/cgroup.h reads them back as the host's paths (with_cgroupns finds it). Empty:
  // the host's namespace.
  std::vector<std::pair<uint32_t, std::string>> cgroupns_roots;

  // The running host.
  static SysRoots host() { return SysRoots{}; }
  // Everything under one directory: root/sys/fs/cgroup, root/proc, ... as on the host.
  static SysRoots under(const std::filesystem::path& root) {
    SysRoots r;
    for (auto* p : {&r.cgroup, &r.resctrl, &r.proc, &r.sys, &r.debugfs, &r.docker_state, &r.containerd_state,
                    &r.crio_state, &r.podman_state, &r.libvirt_state, &r.kubelet_state, &r.systemd_bus})
      *p = root / p->relative_path();
    return r;
  }
};

}  // namespace keel
