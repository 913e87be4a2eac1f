#include "inventory/platforms.h"

#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <charconv>
#include <system_error>

#include "host/fileio.h"
#include "host/json.h"

namespace keel {

std::string_view parent_path(std::string_view path) {
  if (path.size() <= 1) return {};
  size_t slash = path.rfind('/');
  return slash == 0 ? std::string_view("/") : path.substr(0, slash);
}

namespace {

bool is_hex(std::string_view s) {
  return std::ranges::all_of(s, [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}
bool is_container_id(std::string_view s) { return s.size() == 64 && is_hex(s); }

// Whether a cgroup name carries a container id: a run of exactly 64 hex digits ("libpod-payload-<id>",
// "docker-<id>.scope", "<id>").
bool has_container_id(std::string_view name) {
  size_t run = 0;
  for (size_t i = 0; i <= name.size(); ++i) {
    if (i < name.size() && std::isxdigit(static_cast<unsigned char>(name[i]))) {
      ++run;
      continue;
    }
    if (run == 64) return true;
    run = 0;
  }
  return false;
}

// The last `n`-th path element (0 = leaf); empty when the path is not that deep.
std::string_view element_from_end(std::string_view path, int n) {
  for (;;) {
    size_t slash = path.rfind('/');
    if (slash == std::string_view::npos) return {};
    if (n-- == 0) return path.substr(slash + 1);
    path = path.substr(0, slash);
  }
}

std::string_view leaf(std::string_view path) { return element_from_end(path, 0); }

bool strip(std::string_view& s, std::string_view prefix, std::string_view suffix = {}) {
  if (s.size() < prefix.size() + suffix.size() || !s.starts_with(prefix) || !s.ends_with(suffix))
    return false;
  s = s.substr(prefix.size(), s.size() - prefix.size() - suffix.size());
  return true;
}

}  // namespace

// A path shape is trusted only where its runtime puts it: each is anchored to the parents that runtime
// creates (from the hierarchy root), never to the last element alone, so that a cgroup someone else
// named the same way (in a subtree delegated to a user, inside a container, inside another VM) is not
// taken for the real one.
std::string_view docker_container_id(std::string_view cgroup_path) {
  const std::string_view parent = parent_path(cgroup_path);
  std::string_view name = leaf(cgroup_path);
  const bool scope = strip(name, "docker-", ".scope");
  if (!is_container_id(name)) return {};
  if (scope && parent == "/system.slice") return name;  // docker with the systemd driver
  if (!scope && parent == "/docker") return name;       // docker with the cgroupfs driver
  // A pod's container under kubelet with docker (dockershim): directly in a pod's cgroup.
  if (!kubepods_pod_uid(parent).empty()) return name;
  return {};
}

std::string_view kubepods_pod_uid(std::string_view cgroup_path) {
  const std::string_view parent = parent_path(cgroup_path);
  std::string_view name = leaf(cgroup_path);
  // systemd driver: /kubepods.slice/kubepods-pod<uid_>.slice, or in the QoS class's slice,
  // /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice.
  if (strip(name, "kubepods-", ".slice")) {
    for (std::string_view qos : {"burstable", "besteffort"})
      if (strip(name, std::string(qos) + "-"))
        return parent == "/kubepods.slice/kubepods-" + std::string(qos) + ".slice" && strip(name, "pod") &&
                       !name.empty()
                   ? name
                   : std::string_view{};
    return parent == "/kubepods.slice" && strip(name, "pod") && !name.empty() ? name : std::string_view{};
  }
  // cgroupfs driver: /kubepods/pod<uid>, /kubepods/burstable/pod<uid>, /kubepods/besteffort/pod<uid>.
  if (!strip(name, "pod") || name.empty()) return {};
  if (parent == "/kubepods" || parent == "/kubepods/burstable" || parent == "/kubepods/besteffort")
    return name;
  return {};
}

bool systemd_unit_path(std::string_view cgroup_path) {
  // systemd puts units in slices only: every element above the unit is a slice. A "unit" below another
  // unit is a cgroup inside a service's or scope's own (possibly delegated) subtree.
  std::string_view p = parent_path(cgroup_path);
  while (!p.empty() && p != "/") {
    if (!leaf(p).ends_with(".slice")) return false;
    p = parent_path(p);
  }
  return !p.empty();
}

bool systemd_runs(const SysRoots& roots) {
  auto comm = read_file(roots.proc / "1/comm");
  return comm && trim(*comm) == "systemd";
}

bool host_daemon_path(std::string_view cgroup_path) {
  std::string_view rest = cgroup_path;
  auto next = [&] {  // the next element of `rest`
    rest.remove_prefix(std::min(rest.size(), rest.find_first_not_of('/')));
    std::string_view e = rest.substr(0, rest.find('/'));
    rest.remove_prefix(e.size());
    return e;
  };
  std::string_view e = next();
  if (e == "init.scope") return true;
  if (e != "system.slice") return false;
  for (e = next(); e.ends_with(".slice"); e = next()) {
  }
  if (e.size() <= 8 || !e.ends_with(".service")) return false;
  // Below it, what the service made in its delegated subtree: its own subgroups (udevd's "udev") are
  // the daemon's, a container it runs (a podman quadlet's libpod-payload-<id>) is not.
  for (e = next(); !e.empty(); e = next())
    if (has_container_id(e)) return false;
  return true;
}

std::string_view path_leaf(std::string_view path) { return leaf(path); }

namespace {

bool is_uid_at(std::string_view s, size_t at) {
  if (s.size() < at + 36) return false;
  for (size_t i = 0; i < 36; ++i) {
    char c = s[at + i];
    bool sep = i == 8 || i == 13 || i == 18 || i == 23;
    if (sep ? (c != '-' && c != '_') : !std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// The prefixes of a path from the shallowest: "/a/b/c" gives "/a", "/a/b", "/a/b/c" (at most `depth`).
template <typename F>
Anchor first_prefix(std::string_view path, size_t depth, F&& f) {
  for (size_t at = 1, n = 0; n < depth && at <= path.size(); ++n) {
    size_t slash = path.find('/', at);
    std::string_view prefix = path.substr(0, slash == std::string_view::npos ? path.size() : slash);
    if (Anchor a = f(prefix)) return a;
    if (slash == std::string_view::npos) break;
    at = slash + 1;
  }
  return {};
}

// "crio-<id>.scope" and the other ways a CRI runtime names a container's cgroup in a pod's.
std::string_view pod_container_id(std::string_view name) {
  std::string_view s = name;
  if (is_container_id(s)) return s;
  for (std::string_view prefix : {"cri-containerd-", "crio-", "docker-"}) {
    s = name;
    if (strip(s, prefix, ".scope") && is_container_id(s)) return s;
  }
  s = name;
  if (strip(s, "crio-") && is_container_id(s)) return s;  // CRI-O with the cgroupfs manager
  return {};
}

}  // namespace

std::string pod_uid_key(std::string_view uid) {
  if (uid.size() != 36 || !is_uid_at(uid, 0)) return {};
  std::string out(uid);
  for (char& c : out) c = c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Pods are 2 or 3 levels down, their containers one more; podman's and libvirt's cgroups 2 or 3.
Anchor pod_anchor(std::string_view path) {
  return first_prefix(path, 3, [](std::string_view p) {
    std::string_view uid = kubepods_pod_uid(p);
    return uid.empty() ? Anchor{} : Anchor{p, uid};
  });
}

Anchor pod_container_anchor(std::string_view path) {
  return first_prefix(path, 4, [](std::string_view p) {
    std::string_view id = pod_container_id(leaf(p));
    return !id.empty() && !kubepods_pod_uid(parent_path(p)).empty() ? Anchor{p, id} : Anchor{};
  });
}

Anchor docker_anchor(std::string_view path) {
  return first_prefix(path, 4, [](std::string_view p) {
    std::string_view id = docker_container_id(p);
    return id.empty() ? Anchor{} : Anchor{p, id};
  });
}

Anchor podman_anchor(std::string_view path) {
  return first_prefix(path, 3, [](std::string_view p) {
    std::string_view parent = parent_path(p), name = leaf(p);
    bool in_slice = parent == "/machine.slice";
    if (std::string_view pod = leaf(parent); !in_slice && parent_path(parent) == "/machine.slice" &&
                                             strip(pod, "machine-libpod_pod_", ".slice") && is_hex(pod))
      in_slice = !pod.empty();
    if (in_slice && strip(name, "libpod-", ".scope") && is_container_id(name)) return Anchor{p, name};
    name = leaf(p);
    if (parent == "/libpod_parent" && strip(name, "libpod-") && is_container_id(name)) return Anchor{p, name};
    return Anchor{};
  });
}

Anchor libvirt_anchor(std::string_view path) {
  return first_prefix(path, 2, [](std::string_view p) {
    std::string_view parent = parent_path(p), name = leaf(p);
    // systemd escapes '-' in a unit name as \x2d: machine-qemu\x2d3\x2dvm1.scope is machine "qemu-3-vm1".
    bool ok = (parent == "/machine.slice" && strip(name, "machine-qemu\\x2d", ".scope")) ||
              (parent == "/machine" && strip(name, "qemu-", ".libvirt-qemu"));
    if (!ok) return Anchor{};
    size_t digits = 0;
    while (digits < name.size() && digits < 10 && name[digits] >= '0' && name[digits] <= '9') ++digits;
    std::string_view rest = name.substr(digits);
    if (digits == 0 || name[0] == '0' || !(rest.starts_with("\\x2d") || rest.starts_with("-")))
      return Anchor{};
    return Anchor{p, name.substr(0, digits)};
  });
}

int libvirt_vcpu(std::string_view path) {
  Anchor vm = libvirt_anchor(path);
  if (!vm) return -1;
  std::string_view below = path.substr(vm.path.size());
  if (!strip(below, "/libvirt/vcpu") && !strip(below, "/vcpu")) return -1;
  int n = -1;
  auto [end, ec] = std::from_chars(below.data(), below.data() + below.size(), n);
  return ec == std::errc() && end == below.data() + below.size() && n >= 0 &&
                 (below == "0" || below[0] != '0')
             ? n
             : -1;
}

// ---- Platforms: the runtimes' own state ----

namespace {

constexpr size_t kStateFileMax = 4u << 20;   // an OCI config.json, a docker config, a domain's status
constexpr size_t kStoreFileMax = 64u << 20;  // podman's containers.json: every container on the host
constexpr size_t kMaxEntries = 100'000;      // directory entries looked at per runtime

// A kind's slot: one bit each (never `all`).
unsigned bit_index(Platforms::Kind k) {
  return std::min(3u, static_cast<unsigned>(std::countr_zero(static_cast<unsigned>(k))));
}

std::string string_at(const Json& j, std::string_view key) {
  if (!j.is_object()) return {};
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The first pod uid in a cgroups path ("/kubepods/burstable/pod<uid>/<id>",
// "kubepods-burstable-pod<uid_>.slice:cri-containerd:<id>").
std::string uid_in(std::string_view s) {
  for (size_t at = s.find("pod"); at != std::string_view::npos; at = s.find("pod", at + 1))
    if (is_uid_at(s, at + 3)) return pod_uid_key(s.substr(at + 3, 36));
  return {};
}

// The Kubernetes names in an OCI bundle's annotations (containerd's or CRI-O's keys); `uid` from the
// annotation, else from the cgroups path.
struct OciNames {
  PodInfo pod;
  std::string uid, container;
  bool sandbox = false;
};
OciNames oci_names(const Json& spec, bool crio) {
  const Json empty = Json::object();
  auto a = spec.find("annotations");
  const Json& ann = a != spec.end() && a->is_object() ? *a : empty;
  OciNames n;
  if (crio) {
    n.pod = {string_at(ann, "io.kubernetes.pod.namespace"), string_at(ann, "io.kubernetes.pod.name")};
    n.uid = pod_uid_key(string_at(ann, "io.kubernetes.pod.uid"));
    n.container = string_at(ann, "io.kubernetes.container.name");
    n.sandbox = string_at(ann, "io.kubernetes.cri-o.ContainerType") == "sandbox";
  } else {
    n.pod = {string_at(ann, "io.kubernetes.cri.sandbox-namespace"),
             string_at(ann, "io.kubernetes.cri.sandbox-name")};
    n.uid = pod_uid_key(string_at(ann, "io.kubernetes.cri.sandbox-uid"));
    n.container = string_at(ann, "io.kubernetes.cri.container-name");
    n.sandbox = string_at(ann, "io.kubernetes.cri.container-type") == "sandbox";
  }
  if (n.uid.empty()) {
    auto linux_ = spec.find("linux");
    if (linux_ != spec.end()) n.uid = uid_in(string_at(*linux_, "cgroupsPath"));
  }
  if (n.sandbox) n.container.clear();
  return n;
}

}  // namespace

const std::string& Platforms::error(Kind k) const { return errors_[bit_index(k)]; }

std::string Platforms::where(Kind k, const SysRoots& roots) {
  switch (k) {
    case docker:
      return (roots.docker_state / "containers").string();
    case cri:
      return roots.containerd_state.string() + " (containerd) or " + roots.crio_state.string() + " (CRI-O)";
    case podman:
      return (roots.podman_state / "containers.json").string();
    case libvirt:
      return roots.libvirt_state.string();
    default:
      return {};
  }
}

// One state file: what it says, kept while its size, mtime and inode stay.
void Platforms::read_file(Kind k, const std::string& path, std::map<std::string, File>& now) {
  auto& known = files_[bit_index(k)];
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return;  // gone meanwhile, or being made
  File f{st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec, st.st_size, st.st_ino, {}};
  if (auto old = known.find(path); old != known.end() && old->second.mtime_ns == f.mtime_ns &&
                                   old->second.size == f.size && old->second.inode == f.inode) {
    now.emplace(path, std::move(old->second));
    return;
  }
  std::string& error = errors_[bit_index(k)];
  auto text = read_owned_file(path, k == podman ? kStoreFileMax : kStateFileMax);
  if (!text) {
    error = text.error().message();
    return;
  }
  const std::filesystem::path fp(path);
  if (k == libvirt) {
    // <domstatus ...><domain type='kvm' id='3'>: the running domain's id; the file is named after it.
    size_t at = text->find("<domain ");
    size_t end = at == std::string::npos ? at : text->find('>', at);
    std::string_view tag =
        end == std::string::npos ? std::string_view() : std::string_view(*text).substr(at, end - at);
    for (std::string_view key : {" id='", " id=\""}) {
      size_t i = tag.find(key);
      if (i == std::string_view::npos) continue;
      std::string_view v = tag.substr(i + key.size());
      v = v.substr(0, v.find(key.back()));
      unsigned id = 0;
      auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), id);
      if (ec == std::errc() && p == v.data() + v.size() && id > 0)
        f.records.push_back({std::to_string(id), {}, {}, fp.stem().string()});
    }
    now.emplace(path, std::move(f));
    return;
  }
  Json j = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    error = path + ": not JSON";
    return;
  }
  if (k == podman) {  // containers/storage: [{"id": ..., "names": [...]}, ...]
    if (!j.is_array()) return;
    for (const Json& c : j) {
      std::string id = string_at(c, "id");
      auto names = c.is_object() ? c.find("names") : c.end();
      if (!is_container_id(id) || !c.is_object() || names == c.end() || !names->is_array() ||
          names->empty() || !names->front().is_string())
        continue;
      f.records.push_back({id, {"podman", names->front().get<std::string>(), {}}, {}, {}});
    }
  } else if (k ==
             docker) {  // config.v2.json: "ID", "Name": "/name", Config.Labels (kubelet's, under dockershim)
    std::string id = string_at(j, "ID"), name = string_at(j, "Name");
    if (id.empty()) id = fp.parent_path().filename().string();
    if (name.starts_with('/')) name.erase(0, 1);
    Record r{id, {"docker", name, {}}, {}, {}};
    if (auto config = j.find("Config"); config != j.end() && config->is_object())
      if (auto labels = config->find("Labels"); labels != config->end() && labels->is_object()) {
        r.container.pod_uid = pod_uid_key(string_at(*labels, "io.kubernetes.pod.uid"));
        if (!r.container.pod_uid.empty()) {
          r.pod = {string_at(*labels, "io.kubernetes.pod.namespace"),
                   string_at(*labels, "io.kubernetes.pod.name")};
          r.container.name = string_at(*labels, "io.kubernetes.container.name");
        }
      }
    if (is_container_id(id)) f.records.push_back(std::move(r));
  } else {  // an OCI bundle: containerd's <ns>/<id>/config.json, CRI-O's <id>/userdata/config.json
    const bool crio = fp.parent_path().filename() == "userdata";
    std::string id = (crio ? fp.parent_path().parent_path() : fp.parent_path()).filename().string();
    OciNames n = oci_names(j, crio);
    if (is_container_id(id) && !n.uid.empty())
      f.records.push_back({id, {crio ? "cri-o" : "containerd", n.container, n.uid}, n.pod, {}});
  }
  now.emplace(path, std::move(f));
}

void Platforms::read(const SysRoots& roots, unsigned kinds) {
  auto list = [](const std::filesystem::path& dir, std::string& error, auto&& each) {
    std::error_code ec;
    size_t n = 0;
    for (auto it = std::filesystem::directory_iterator(dir, ec);
         !ec && it != std::filesystem::directory_iterator() && n < kMaxEntries; it.increment(ec), ++n)
      each(it->path());
    if (ec && ec != std::errc::no_such_file_or_directory) error = dir.string() + ": " + ec.message();
  };
  for (Kind k : {docker, cri, podman, libvirt}) {
    if ((kinds & k) == 0) continue;
    std::map<std::string, File> now;
    std::string& error = errors_[bit_index(k)];
    error.clear();
    if (k == docker) {
      list(roots.docker_state / "containers", error, [&](const std::filesystem::path& d) {
        if (is_container_id(d.filename().string())) read_file(k, d / "config.v2.json", now);
      });
    } else if (k == cri) {
      list(roots.containerd_state, error, [&](const std::filesystem::path& ns) {
        list(ns, error, [&](const std::filesystem::path& d) {
          if (is_container_id(d.filename().string())) read_file(k, d / "config.json", now);
        });
      });
      list(roots.crio_state, error, [&](const std::filesystem::path& d) {
        if (is_container_id(d.filename().string())) read_file(k, d / "userdata" / "config.json", now);
      });
    } else if (k == podman) {
      if (std::error_code ec; std::filesystem::exists(roots.podman_state / "containers.json", ec))
        read_file(k, roots.podman_state / "containers.json", now);
    } else {
      list(roots.libvirt_state, error, [&](const std::filesystem::path& f) {
        if (f.extension() == ".xml") read_file(k, f, now);
      });
    }
    files_[bit_index(k)] = std::move(now);
  }
  pods_.clear();
  containers_.clear();
  vms_.clear();
  for (const auto& files : files_)
    for (const auto& [path, f] : files)
      for (const Record& r : f.records) {
        if (!r.vm.empty()) vms_[r.id] = r.vm;
        if (!r.container.runtime.empty()) containers_[r.id] = r.container;
        // The pod's sandbox names it; a container of it, when the sandbox is not (yet) seen.
        if (!r.pod.name.empty() && !r.container.pod_uid.empty() &&
            (r.container.name.empty() || !pods_.contains(r.container.pod_uid)))
          pods_[r.container.pod_uid] = r.pod;
      }
}

const PodInfo* Platforms::pod(std::string_view uid) const {
  auto it = pods_.find(pod_uid_key(uid));
  return it == pods_.end() ? nullptr : &it->second;
}

const ContainerInfo* Platforms::container(std::string_view id) const {
  auto it = containers_.find(std::string(id));
  return it == containers_.end() ? nullptr : &it->second;
}

const std::string* Platforms::vm(std::string_view id) const {
  auto it = vms_.find(std::string(id));
  return it == vms_.end() ? nullptr : &it->second;
}

std::string Platforms::name_of(std::string_view path) const {
  if (Anchor a = pod_anchor(path)) {
    const PodInfo* p = pod(a.id);
    if (p == nullptr) return {};
    std::string out = "pod " + p->ns + "/" + p->name;
    if (Anchor c = pod_container_anchor(path))
      if (const ContainerInfo* ci = container(c.id); ci != nullptr && !ci->name.empty())
        out += " container " + ci->name;
    return out;
  }
  for (Anchor a : {docker_anchor(path), podman_anchor(path)})
    if (a)
      if (const ContainerInfo* c = container(a.id); c != nullptr && !c->name.empty())
        return c->runtime + " " + c->name;
  if (Anchor a = libvirt_anchor(path))
    if (const std::string* name = vm(a.id)) return "vm " + *name;
  return {};
}

// ---- kubelet's static CPU manager ----

namespace {

// A file's change stamp (mtime ns ^ size ^ inode), -2 when it is not there.
long long stamp_of(const std::filesystem::path& p) {
  struct stat st;
  if (::stat(p.c_str(), &st) != 0) return -2;
  return (st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec) ^
         (static_cast<long long>(st.st_size) << 1) ^ static_cast<long long>(st.st_ino << 7);
}

// `reservedSystemCPUs: "0-1"` (or unquoted) at the top level of kubelet's config.yaml.
std::string reserved_line(std::string_view yaml) {
  constexpr std::string_view kKey = "reservedSystemCPUs:";
  for (size_t at = 0; at < yaml.size();) {
    size_t end = yaml.find('\n', at);
    std::string_view line =
        yaml.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    at = end == std::string_view::npos ? yaml.size() : end + 1;
    if (!line.starts_with(kKey)) continue;
    std::string_view v = trim(line.substr(kKey.size()));
    if (size_t hash = v.find(" #"); hash != std::string_view::npos) v = trim(v.substr(0, hash));
    if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front())
      v = v.substr(1, v.size() - 2);
    return std::string(v);
  }
  return {};
}

}  // namespace

const KubeletCpus& KubeletState::read(const SysRoots& roots) {
  const std::filesystem::path state = roots.kubelet_state / "cpu_manager_state",
                              config = roots.kubelet_state / "config.yaml";
  const long long s0 = stamp_of(state), s1 = stamp_of(config);
  if (s0 == stamp_[0] && s1 == stamp_[1]) return now_;
  stamp_[0] = s0;
  stamp_[1] = s1;
  now_ = {};
  if (s0 != -2) {
    // {"policyName":"static","defaultCpuSet":"0,5-63","entries":{"<pod uid>":{"<container>":"1-4"}},
    //  "checksum":1234}
    auto text = read_owned_file(state, kStateFileMax);
    Json j = text ? Json::parse(*text, nullptr, false) : Json();
    if (!text) {
      now_.error = text.error().message();
    } else if (!j.is_object()) {
      now_.error = state.string() + ": not kubelet's CPU manager state (JSON object)";
    } else if (string_at(j, "policyName") == "static") {
      auto entries = j.find("entries");
      if (entries != j.end() && entries->is_object())
        for (const auto& [uid, containers] : entries->items()) {
          if (!containers.is_object()) continue;
          bool any = false;
          for (const auto& [name, cpus] : containers.items()) {
            auto set =
                cpus.is_string() ? CpuSet::parse_list(cpus.get<std::string>()) : Result<CpuSet>(fail("-"));
            if (!set) {
              now_.error = state.string() + ": pod " + uid + " container " + name + ": not a CPU list";
              continue;
            }
            now_.exclusive |= *set;
            any = true;
          }
          if (std::string key = pod_uid_key(uid); any && !key.empty()) now_.pods.push_back(key);
        }
    }
  }
  if (s1 != -2) {
    auto text = read_owned_file(config, kStateFileMax);
    if (!text) {
      if (now_.error.empty()) now_.error = text.error().message();
    } else if (std::string r = reserved_line(*text); !r.empty()) {
      auto set = CpuSet::parse_list(r);
      if (set)
        now_.reserved = *set;
      else if (now_.error.empty())
        now_.error = config.string() + ": reservedSystemCPUs '" + r + "' is not a CPU list";
    }
  }
  return now_;
}

}  // namespace keel
