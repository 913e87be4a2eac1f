// What the platforms call their cgroups, with no API server asked. Path shapes: where each runtime puts
// a container's, a pod's or a VM's cgroup, anchored to the parents it creates (never the last element
// alone: a cgroup someone else named the same way elsewhere is not the real one). Platforms: the names
// the runtimes keep in their own state (docker's config.v2.json, containerd's and CRI-O's OCI bundles
// with their Kubernetes annotations, podman's container store, libvirt's domain status files), read
// from SysRoots' state roots, each file bounded (read_owned_file) and re-read only when it changed.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "host/cpuset.h"
#include "host/sys_roots.h"

namespace keel {

// The path without its last element ("/a/b" -> "/a", "/a" -> "/", "/" -> "").
std::string_view parent_path(std::string_view path);
// The last element ("/a/b" -> "b", "/" -> "").
std::string_view path_leaf(std::string_view path);

// Container id of a docker container's cgroup: "/docker/<64 hex>" (cgroupfs driver),
// "/system.slice/docker-<64 hex>.scope" (systemd driver), or either name directly in a pod's cgroup
// (kubelet with docker); empty anywhere else.
std::string_view docker_container_id(std::string_view cgroup_path);
// Pod uid of a pod-level kubepods cgroup: "/kubepods/[burstable/|besteffort/]pod<uid>" (cgroupfs
// driver) or "/kubepods.slice/[kubepods-QOS.slice/]kubepods-[QOS-]pod<uid_>.slice" (systemd driver), as
// written in the path (dashes, or underscores); empty anywhere else.
std::string_view kubepods_pod_uid(std::string_view cgroup_path);
// Whether the path can be a systemd unit's cgroup: below the root, every element above the leaf a
// slice (a "unit" inside another unit's subtree is not one).
bool systemd_unit_path(std::string_view cgroup_path);
// Whether systemd is the host's init (/proc/1/comm): it then owns its units' cgroups and realises them
// again from the units' settings.
bool systemd_runs(const SysRoots& roots);
// Whether the path is the host's own: init.scope, or a system service (a ".service" unit whose slices
// are system.slice's: journald, logind, dbus, udev, sshd, dockerd, containerd, kubelet). Containers' and
// VMs' scopes in system.slice (docker-<id>.scope, machine-*.scope) are not, nor is a container a
// service runs below its own cgroup (a podman quadlet's libpod-payload-<id>); the service's own
// subgroups (udevd's "udev") are the daemon's.
bool host_daemon_path(std::string_view cgroup_path);
// A pod uid in one spelling (lower case, dashes), "" when it is not one.
std::string pod_uid_key(std::string_view uid);

// The cgroup at or above a path that a runtime made for a container, a pod or a VM.
struct Anchor {
  std::string_view path;  // that cgroup: the path itself or an ancestor
  std::string_view id;    // the container id, the pod uid as written, the libvirt domain id
  explicit operator bool() const { return !path.empty(); }
};
// A pod's cgroup (kubepods_pod_uid).
Anchor pod_anchor(std::string_view path);
// A container's cgroup directly in a pod's: "<64 hex>" (cgroupfs), "cri-containerd-<id>.scope",
// "crio-<id>.scope" or "crio-<id>", "docker-<id>.scope".
Anchor pod_container_anchor(std::string_view path);
// A docker container's cgroup (docker_container_id).
Anchor docker_anchor(std::string_view path);
// A podman container's: "/machine.slice/libpod-<id>.scope", in a podman pod's slice
// "/machine.slice/machine-libpod_pod_<pod id>.slice/libpod-<id>.scope", or "/libpod_parent/libpod-<id>"
// (cgroupfs manager).
Anchor podman_anchor(std::string_view path);
// A libvirt QEMU domain's: "/machine.slice/machine-qemu\x2d<id>\x2d<name>.scope" (systemd) or
// "/machine/qemu-<id>-<name>.libvirt-qemu" (libvirt's own layout); id = the domain id, unique among
// running domains (the name part is cut short by libvirt, so it is not compared).
Anchor libvirt_anchor(std::string_view path);
// The vCPU number of a VM's vCPU cgroup ("<anchor>/vcpuN", v2 "<anchor>/libvirt/vcpuN"), -1 otherwise.
int libvirt_vcpu(std::string_view path);

struct PodInfo {
  std::string ns, name;
};
struct ContainerInfo {
  std::string runtime;  // "docker", "containerd", "cri-o", "podman"
  std::string name;     // its name (in its pod under Kubernetes; empty for a pod's sandbox)
  std::string pod_uid;  // pod_uid_key of its pod; empty outside Kubernetes
};

// What kubelet's static CPU manager holds (cpu_manager_state, and reservedSystemCPUs from its
// config.yaml): CPUs it gave Guaranteed pods' containers exclusively, and the pods. keel never hands
// those CPUs or the reserved ones to a workload, and never rewrites those pods' cpusets.
struct KubeletCpus {
  CpuSet exclusive;               // every CPU in the state's entries
  CpuSet reserved;                // reservedSystemCPUs
  std::vector<std::string> pods;  // pod_uid_key of each pod with exclusive CPUs
  std::string error;              // why the state could not be read ("" when it could, or there is none)
  bool any() const { return !exclusive.empty() || !reserved.empty(); }
};
class KubeletState {
 public:
  // Reads roots.kubelet_state's cpu_manager_state and config.yaml again when they changed.
  const KubeletCpus& read(const SysRoots& roots);

 private:
  long long stamp_[2] = {-1, -1};
  KubeletCpus now_;
};

class Platforms {
 public:
  enum Kind : unsigned { docker = 1, cri = 2, podman = 4, libvirt = 8, all = 15 };
  // Reads the state of the kinds asked for (a file is re-read only when its size, mtime or inode
  // changed). A runtime whose state directory does not exist runs nothing.
  void read(const SysRoots& roots, unsigned kinds);

  const PodInfo* pod(std::string_view uid) const;  // any spelling of the uid
  const ContainerInfo* container(std::string_view id) const;
  const std::string* vm(std::string_view id) const;                     // a running domain's name by its id
  const std::map<std::string, PodInfo>& pods() const { return pods_; }  // by pod_uid_key
  const std::map<std::string, ContainerInfo>& containers() const { return containers_; }
  const std::map<std::string, std::string>& vms() const { return vms_; }
  // Why some of a kind's state could not be read ("" when all of it could).
  const std::string& error(Kind k) const;
  // Where a kind's state is read from, for messages.
  static std::string where(Kind k, const SysRoots& roots);

  // What the platform calls the cgroup at `path`, for people: "pod NS/NAME", "pod NS/NAME container C",
  // "docker NAME", "podman NAME", "vm NAME" (also for the cgroups below it); "" when none is known.
  std::string name_of(std::string_view path) const;

 private:
  struct Record {
    std::string id;
    ContainerInfo container;  // runtime empty: not a container (a VM)
    PodInfo pod;              // name empty: no pod
    std::string vm;           // a domain's name
  };
  struct File {
    long long mtime_ns = 0, size = 0;
    unsigned long long inode = 0;
    std::vector<Record> records;
  };
  void read_file(Kind k, const std::string& path, std::map<std::string, File>& now);
  std::map<std::string, File> files_[4];  // by kind's bit, by path
  std::string errors_[4];
  std::map<std::string, PodInfo> pods_;
  std::map<std::string, ContainerInfo> containers_;
  std::map<std::string, std::string> vms_;
};

}  // namespace keel
