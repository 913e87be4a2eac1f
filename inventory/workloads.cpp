#include "inventory/workloads.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <map>
#include <optional>
#include <system_error>
#include <utility>

#include "host/cgroup_files.h"
#include "host/fd.h"
#include "host/fileio.h"
#include "host/json.h"
#include "host/proc_stat.h"

namespace keel {

// ---- Hierarchy choice ----

namespace {

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::string mounted_list(const CgroupLayout& layout) {
  std::string out;
  for (const CgroupHierarchy& h : layout.hierarchies) {
    out += out.empty() ? "" : " ";
    out += h.unified ? "unified[" + join(h.controllers, ",") + "]" : h.name();
  }
  return "mounted: " + (out.empty() ? std::string("none") : out);
}

Result<CgroupHierarchy> v1_or_fail(const CgroupLayout& layout, const char* controller) {
  if (const CgroupHierarchy* h = layout.v1_with(controller)) return *h;
  std::string hint;
  if (const CgroupHierarchy* u = layout.unified(); u && u->has(controller))
    hint = "; the unified hierarchy has it: use hierarchy = \"unified\" or \"auto\"";
  return fail(std::string("hierarchy = \"") + controller + "\", but no cgroup v1 hierarchy has the " +
              controller + " controller (" + mounted_list(layout) + ")" + hint);
}

}  // namespace

Result<CgroupHierarchy> choose_hierarchy(const CgroupLayout& layout, config::Hierarchy choice) {
  const CgroupHierarchy* unified = layout.unified();
  switch (choice) {
    case config::Hierarchy::unified:
      if (unified) return *unified;
      return fail("hierarchy = \"unified\", but no cgroup2 hierarchy is mounted (" + mounted_list(layout) +
                  ")");
    case config::Hierarchy::cpu:
      return v1_or_fail(layout, "cpu");
    case config::Hierarchy::cpuset:
      return v1_or_fail(layout, "cpuset");
    case config::Hierarchy::automatic:
      break;
  }
  if (unified && unified->has("cpu")) return *unified;
  if (const CgroupHierarchy* h = layout.v1_with("cpu")) return *h;
  if (const CgroupHierarchy* h = layout.v1_with("cpuset")) return *h;
  return fail("no cgroup hierarchy has the cpu or cpuset controller (" + mounted_list(layout) + ")");
}

// ---- Glob ----

namespace {

// Length of the bracket expression at the start of p (p[0] == '['), 0 when it is not closed.
size_t class_length(std::string_view p) {
  size_t i = 1;
  if (i < p.size() && (p[i] == '!' || p[i] == '^')) ++i;
  if (i < p.size() && p[i] == ']') ++i;  // a leading ']' is a member
  while (i < p.size() && p[i] != ']') ++i;
  return i < p.size() ? i + 1 : 0;
}

// `members` is the expression between the brackets.
bool class_matches(std::string_view members, char c) {
  bool negate = !members.empty() && (members[0] == '!' || members[0] == '^');
  if (negate) members.remove_prefix(1);
  bool hit = false;
  for (size_t i = 0; i < members.size(); ++i) {
    if (i + 2 < members.size() && members[i + 1] == '-') {
      hit = hit || (members[i] <= c && c <= members[i + 2]);
      i += 2;
    } else {
      hit = hit || members[i] == c;
    }
  }
  return hit != negate;
}

// Backtracking over `*` and `**` alone is exponential in the number of stars ("/**a**a**a**b" on a
// long path), and this runs for every cgroup on every tick, so each (pattern position, path position)
// is decided once and remembered, in constant work: a star either ends here or takes one more
// character and is decided again one position on (a loop over the positions it could end at instead
// made "*a*a...*b" cubic: a 4 KiB pattern and path took minutes). At most |pattern| x |path| states,
// and a recursion depth of at most |pattern| + |path|.
// Whether a path position starts a level follows from the position itself: the start of the path, or
// just after a '/'.
class Glob {
 public:
  // Without a star nothing is tried twice, so the common literal patterns skip the table.
  Glob(std::string_view p, std::string_view s)
      : p_(p),
        s_(s),
        memo_(p.find('*') == std::string_view::npos ? 0 : (p.size() + 1) * (s.size() + 1), kUnknown) {}

  bool match(size_t pi, size_t si) {
    ++steps_;
    if (memo_.empty()) return decide(pi, si);
    signed char& m = memo_[pi * (s_.size() + 1) + si];
    if (m == kUnknown) m = decide(pi, si) ? 1 : 0;
    return m == 1;
  }
  size_t steps() const { return steps_; }

 private:
  static constexpr signed char kUnknown = -1;

  bool level_start(size_t si) const { return si == 0 || s_[si - 1] == '/'; }

  bool decide(size_t pi, size_t si) {
    std::string_view p = p_.substr(pi);
    if (p.empty()) return si == s_.size();
    const bool more = si < s_.size();
    if (p.starts_with("**")) {
      const size_t rest = pi + 2;
      if (rest == p_.size()) return more;  // a trailing ** needs at least one more level
      if (level_start(si) && p_[rest] == '/' && match(rest + 1, si)) return true;  // zero levels
      // The ** ends here, or takes this character (a '/' too) and goes on.
      return match(rest, si) || (more && match(pi, si + 1));
    }
    // A single '*' ends here, or takes this character if it is not the level's end.
    if (p[0] == '*') return match(pi + 1, si) || (more && s_[si] != '/' && match(pi, si + 1));
    size_t consumed = 1;
    bool ok = false;
    char c = more ? s_[si] : '\0';
    if (p[0] == '?') {
      ok = more && c != '/';
    } else if (size_t n = p[0] == '[' ? class_length(p) : 0; n > 0) {
      ok = more && c != '/' && class_matches(p.substr(1, n - 2), c);
      consumed = n;
    } else {
      if (p[0] == '\\' && p.size() > 1) ++consumed;  // the quoted character is the literal
      ok = more && c == p[consumed - 1];
    }
    return ok && match(pi + consumed, si + 1);
  }

  std::string_view p_, s_;
  std::vector<signed char> memo_;
  size_t steps_ = 0;
};

}  // namespace

bool glob_match(std::string_view pattern, std::string_view path) { return Glob(pattern, path).match(0, 0); }

size_t glob_match_steps(std::string_view pattern, std::string_view path) {
  Glob g(pattern, path);
  g.match(0, 0);
  return g.steps();
}

// ---- Matching ----

const char* to_string(Selector s) {
  switch (s) {
    case Selector::none:
      return "none";
    case Selector::cgroup:
      return "cgroup";
    case Selector::systemd_unit:
      return "systemd_unit";
    case Selector::docker:
      return "docker";
    case Selector::pod:
      return "pod";
    case Selector::podman:
      return "podman";
    case Selector::vm:
      return "vm";
    case Selector::pid_file:
      return "pid_file";
  }
  return "?";
}

namespace {

Selector primary_selector(const config::Match& m) {
  if (!m.cgroup.empty()) return Selector::cgroup;
  if (!m.systemd_unit.empty()) return Selector::systemd_unit;
  if (!m.docker.empty()) return Selector::docker;
  if (!m.pod.empty()) return Selector::pod;
  if (!m.podman.empty()) return Selector::podman;
  if (!m.vm.empty()) return Selector::vm;
  if (!m.pid_file.empty()) return Selector::pid_file;
  return Selector::none;
}

// Exact equality first: systemd escapes ('\x2d') in unit names would read as glob quoting.
bool name_matches(const std::string& pattern, std::string_view name) {
  return pattern == name || glob_match(pattern, name);
}

bool pod_by_name(const config::Match& m) { return m.pod.find('/') != std::string::npos; }

// A container id (prefix, >= 12 hex digits) as docker and podman accept one for a name.
std::string id_prefix(std::string_view wanted) {
  if (wanted.size() >= 12 && wanted.size() <= 64 &&
      std::ranges::all_of(wanted, [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }))
    return std::string(wanted);
  return {};
}

bool has(const std::vector<std::string>& v, std::string_view s) { return std::ranges::find(v, s) != v.end(); }

}  // namespace

std::vector<NamedMatch> named_matches(const std::vector<config::Workload>& workloads) {
  std::vector<NamedMatch> out;
  for (const auto& w : workloads)
    out.push_back({w.name, w.match, w.klass == config::WorkloadClass::critical});
  return out;
}

MatchRules::MatchRules(std::vector<NamedMatch> rules) {
  for (auto& r : rules) {
    Rule rule;
    rule.selector = primary_selector(r.match);
    rule.named = std::move(r);
    rules_.push_back(std::move(rule));
  }
}

// Docker or podman containers by name (or id prefix).
void MatchRules::resolve_container(Rule& r, const SysRoots& roots, Platforms::Kind kind) const {
  const bool docker = kind == Platforms::docker;
  std::string_view wanted = docker ? r.named.match.docker : r.named.match.podman;
  if (wanted.starts_with('/')) wanted.remove_prefix(1);
  r.id_prefix = id_prefix(wanted);
  const char* runtime = docker ? "docker" : "podman";
  for (const auto& [id, c] : platforms_.containers())
    if (c.runtime == runtime && c.name == wanted) r.ids.push_back(id);
  if (!r.ids.empty() || !r.id_prefix.empty()) return;
  const std::string& error = platforms_.error(kind);
  r.note = std::string(runtime) + " '" + std::string(wanted) + "': " +
           (!error.empty() ? "cannot read the containers: " + error
                           : "no container by that name in " + Platforms::where(kind, roots));
}

// Pods by NAMESPACE/NAME (and their containers by name) from containerd's and CRI-O's state.
void MatchRules::resolve_pod(Rule& r, const SysRoots& roots) const {
  const config::Match& m = r.named.match;
  const size_t slash = m.pod.find('/');
  const std::string ns = m.pod.substr(0, slash), name = m.pod.substr(slash + 1);
  for (const auto& [uid, p] : platforms_.pods())
    if (name_matches(ns, p.ns) && name_matches(name, p.name)) r.ids.push_back(uid);
  if (!m.container.empty())
    for (const auto& [id, c] : platforms_.containers())
      if (!c.name.empty() && has(r.ids, c.pod_uid) && name_matches(m.container, c.name))
        r.container_ids.push_back(id);
  const std::string& error = platforms_.error(Platforms::cri);
  const std::string why = !error.empty() ? ": cannot read the runtime's state: " + error
                                         : " in " + Platforms::where(Platforms::cri, roots);
  if (r.ids.empty())
    r.note = "pod '" + m.pod + "': no pod by that name" + why;
  else if (!m.container.empty() && r.container_ids.empty())
    r.note = "pod '" + m.pod + "' has no container '" + m.container + "'" + why;
}

void MatchRules::resolve_vm(Rule& r, const SysRoots& roots) const {
  for (const auto& [id, name] : platforms_.vms())
    if (name_matches(r.named.match.vm, name)) r.ids.push_back(id);
  if (!r.ids.empty()) return;
  const std::string& error = platforms_.error(Platforms::libvirt);
  r.note = "vm '" + r.named.match.vm + "': " +
           (!error.empty()
                ? "cannot read libvirt's state: " + error
                : "no running libvirt domain by that name in " + Platforms::where(Platforms::libvirt, roots));
}

namespace {

// A pid file is trusted only as root's (read_owned_file): its first line.
constexpr size_t kPidFileMax = 64;
Result<std::string> read_pid_file(const std::filesystem::path& file) {
  auto text = read_owned_file(file, kPidFileMax);
  if (!text) return text;
  return text->substr(0, text->find('\n'));
}

// /proc/PID/stat's starttime (field 22: clock ticks after boot).
std::optional<uint64_t> start_ticks(const SysRoots& roots, pid_t pid) {
  auto stat = read_file(roots.proc / std::to_string(pid) / "stat", 4096);
  if (!stat) return std::nullopt;
  auto fields = parse_proc_stat(*stat);
  return fields ? fields->number(22) : std::nullopt;
}

// The boot time (/proc/stat's btime, seconds since the epoch).
std::optional<int64_t> boot_time(const SysRoots& roots) {
  auto stat = read_file(roots.proc / "stat", 1 << 20);
  if (!stat) return std::nullopt;
  const size_t at = stat->starts_with("btime ") ? 0 : stat->find("\nbtime ");
  if (at == std::string::npos) return std::nullopt;
  int64_t v = 0;
  const char* b = stat->data() + at + (at == 0 ? 6 : 7);
  auto [end, ec] = std::from_chars(b, stat->data() + stat->size(), v);
  if (ec != std::errc() || end == b) return std::nullopt;
  return v;
}

}  // namespace

void MatchRules::resolve_pid_file(Rule& r, const CgroupHierarchy& hierarchy, const SysRoots& roots) const {
  const std::filesystem::path& file = r.named.match.pid_file;
  auto text = read_pid_file(file);
  if (!text) {
    r.note = "pid file " + text.error().message();
    return;
  }
  pid_t pid = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), pid);
  if (ec != std::errc() || end != text->data() + text->size() || pid <= 0) {
    r.note = "pid file " + file.string() + ": not a pid: '" + *text + "'";
    return;
  }
  // The process must be the one the file names: started no later than the file was written (btime is
  // whole seconds: 2 s of slack), and, while the file stays as it is, the very process first matched.
  // A daemon that died and left its file behind otherwise hands its "critical" to whoever gets the pid.
  const std::string named = "pid " + std::to_string(pid) + " from " + file.string();
  struct stat st {};
  const auto ticks = start_ticks(roots, pid);
  const auto btime = boot_time(roots);
  if (::lstat(file.c_str(), &st) != 0) {
    r.note = "pid file " + file.string() + ": " + std::strerror(errno);
    return;
  }
  const int64_t mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  if (!ticks || !btime) {
    r.note = named + " is not running (or its start time cannot be read)";
    return;
  }
  const int64_t hz = ::sysconf(_SC_CLK_TCK) > 0 ? ::sysconf(_SC_CLK_TCK) : 100;
  const int64_t started_ns = *btime * 1000000000 + static_cast<int64_t>(*ticks) * (1000000000 / hz);
  if (r.pinned && r.pinned->file_mtime_ns == mtime_ns && r.pinned->pid == pid &&
      r.pinned->start_ticks != *ticks) {
    r.note = named + " is another process than the one it named when keel first matched it (started " +
             std::to_string((*ticks - std::min(*ticks, r.pinned->start_ticks)) / static_cast<uint64_t>(hz)) +
             " s after it): a stale pid file, matched to nothing until it is written again";
    return;
  }
  if (started_ns > mtime_ns + 2000000000LL) {
    r.note = named + " started " + std::to_string((started_ns - mtime_ns) / 1000000000) +
             " s after the file was last written: a stale pid file (its daemon exited and the pid was "
             "reused), matched to nothing until it is written again";
    return;
  }
  r.pinned = Rule::PidIdentity{pid, *ticks, mtime_ns};
  auto path = process_cgroup_path(roots, pid, hierarchy);
  if (path && *path == "/") {
    // pid 1, a kernel thread, or anything in the root cgroup: the whole host is not a workload.
    r.note =
        "pid " + std::to_string(pid) + " from " + file.string() + " is in the root cgroup: not a workload's";
  } else if (path) {
    r.pid_cgroup = std::move(*path);
  } else if (path.error().err == ENOENT) {
    r.note = "pid " + std::to_string(pid) + " from " + file.string() + " is not running";
  } else {
    r.note = "pid " + std::to_string(pid) + " from " + file.string() + ": " + path.error().message();
  }
}

void MatchRules::resolve(const CgroupHierarchy& hierarchy, const SysRoots& roots) {
  unsigned kinds = 0;  // only the runtimes a rule names
  for (const Rule& r : rules_) {
    const config::Match& m = r.named.match;
    if (!m.docker.empty()) kinds |= Platforms::docker;
    if (!m.podman.empty()) kinds |= Platforms::podman;
    if (!m.vm.empty()) kinds |= Platforms::libvirt;
    if (pod_by_name(m)) kinds |= Platforms::cri;
  }
  if (kinds != 0) platforms_.read(roots, kinds);
  for (Rule& r : rules_) {
    Rule now;
    now.named = r.named;
    now.selector = r.selector;
    now.pinned = r.pinned;
    const config::Match& m = now.named.match;
    if (!m.docker.empty()) resolve_container(now, roots, Platforms::docker);
    if (!m.podman.empty()) resolve_container(now, roots, Platforms::podman);
    if (pod_by_name(m)) resolve_pod(now, roots);
    if (!m.vm.empty()) resolve_vm(now, roots);
    if (!m.pid_file.empty()) resolve_pid_file(now, hierarchy, roots);
    if (now.selector == Selector::none) now.note = "no match rule";
    bool same = now.ids == r.ids && now.container_ids == r.container_ids && now.id_prefix == r.id_prefix &&
                now.pid_cgroup == r.pid_cgroup && r.resolved;
    now.generation = same ? r.generation : r.generation + 1;
    now.resolved = true;
    r = std::move(now);
  }
}

Trust trust_of(std::optional<Trust> parent, std::string_view path, CgroupDir::Delegation own) {
  if (!parent) return Trust::host;  // the hierarchy's root
  if (*parent == Trust::user || own == CgroupDir::Delegation::user) return Trust::user;
  // A user's own manager and all below it, whoever owns the directories.
  if (path_leaf(path).starts_with("user@") && path_leaf(path).ends_with(".service")) return Trust::user;
  if (*parent != Trust::host) return Trust::inside;  // unit or inside: below a delegation
  if (own == CgroupDir::Delegation::none) return Trust::host;
  // Delegated to a manager running as root: trusted only where systemd puts units (every element
  // above a slice), since only root asks the system manager for one; anywhere else someone else set it.
  return systemd_unit_path(path) ? Trust::unit : Trust::user;
}

const char* MatchRules::refused(size_t i, Trust trust) const {
  const Rule& r = rules_[i];
  if (!r.named.critical) return nullptr;
  switch (trust) {
    case Trust::host:
    case Trust::unit:
      return nullptr;
    case Trust::inside:
      switch (r.selector) {
        case Selector::docker:
        case Selector::podman:
        case Selector::pod:
        case Selector::vm:
          return nullptr;  // the platform's own record names it, anchored above the delegation
        default:
          return "it is below a cgroup delegated to a container runtime or VM manager, where names are its "
                 "tenant's: match it by its container, pod or VM instead";
      }
    case Trust::user:
      return "it is delegated to an unprivileged user (its or an ancestor's directory is not root's, or "
             "it is below a user@.service), who names what is in it";
  }
  return nullptr;
}

// A rule that names what a runtime made (a container, a pod, a VM) takes that cgroup and every cgroup
// below it: the tasks are in the cgroups the runtime and the workload make inside (a pod's containers, a
// VM's vCPU and emulator cgroups, a container's own systemd).
bool MatchRules::selects_path(size_t i, std::string_view path) const {
  const Rule& r = rules_[i];
  const config::Match& m = r.named.match;
  if (r.selector == Selector::none) return false;
  if (!m.cgroup.empty() && !name_matches(m.cgroup, path)) return false;
  if (!m.systemd_unit.empty() && (!systemd_unit_path(path) || !name_matches(m.systemd_unit, path_leaf(path))))
    return false;
  auto known = [&](Anchor a) {
    return a && ((!r.id_prefix.empty() && a.id.starts_with(r.id_prefix)) || has(r.ids, a.id));
  };
  if (!m.docker.empty() && !known(docker_anchor(path))) return false;
  if (!m.podman.empty() && !known(podman_anchor(path))) return false;
  if (!m.vm.empty() && !known(libvirt_anchor(path))) return false;
  if (!m.pod.empty()) {
    Anchor pod = pod_anchor(path);
    const std::string uid = pod ? pod_uid_key(pod.id) : std::string();
    if (uid.empty()) return false;
    if (!pod_by_name(m)) {
      if (uid != pod_uid_key(m.pod)) return false;
    } else if (!has(r.ids, uid)) {
      return false;
    } else if (!m.container.empty()) {
      Anchor c = pod_container_anchor(path);
      if (!c || !has(r.container_ids, c.id)) return false;
    }
  }
  if (!m.pid_file.empty() && r.pid_cgroup != path) return false;
  return true;
}

bool MatchRules::names_exactly(size_t i) const {
  const config::Match& m = rules_[i].named.match;
  auto literal = [](const std::string& g) {
    return !g.empty() && g.find_first_of("*?[\\") == std::string::npos;
  };
  return literal(m.cgroup) || literal(m.systemd_unit) || !m.pid_file.empty();
}

std::string MatchRules::instance_name(size_t i, std::string_view path, bool full) const {
  const NamedMatch& r = rules_[i].named;
  const config::Match& m = r.match;
  if (m.by_path) return std::string(path);
  if (!m.each || path == "/") return r.name;
  // One instance per container, pod or VM (not per cgroup below it), named as its platform names it.
  auto named = [&](Anchor a, const std::string* name) {
    return r.name + "/" + (name != nullptr && !name->empty() ? *name : std::string(path_leaf(a.path)));
  };
  if (!m.docker.empty() || !m.podman.empty()) {
    Anchor a = !m.docker.empty() ? docker_anchor(path) : podman_anchor(path);
    const ContainerInfo* c = platforms_.container(a.id);
    return named(a, c != nullptr ? &c->name : nullptr);
  }
  if (!m.vm.empty()) {
    Anchor a = libvirt_anchor(path);
    return named(a, platforms_.vm(a.id));
  }
  if (!m.pod.empty()) {
    Anchor a = pod_anchor(path);
    const PodInfo* p = platforms_.pod(a.id);
    std::string name = p != nullptr ? p->ns + "/" + p->name : std::string();
    if (Anchor c = pod_container_anchor(path); c && !m.container.empty()) {
      const ContainerInfo* ci = platforms_.container(c.id);
      return r.name + "/" + (p != nullptr ? name + "/" : "") +
             (ci != nullptr ? ci->name : std::string(path_leaf(c.path)));
    }
    return named(a, &name);
  }
  // `full`: the path below a cgroup glob's fixed part ("/svc/**" names /svc/a/x "a/x"), for leaves that
  // share a name (the inventory asks where two would be one instance).
  if (full && !m.cgroup.empty()) {
    std::string_view glob = m.cgroup;
    const size_t meta = glob.find_first_of("*?[{");
    std::string_view fixed = glob.substr(0, meta == std::string_view::npos ? glob.size() : meta);
    fixed = fixed.substr(0, fixed.rfind('/') == std::string_view::npos ? 0 : fixed.rfind('/'));
    if (path.starts_with(fixed) && path.size() > fixed.size() + 1 && path[fixed.size()] == '/')
      return r.name + "/" + std::string(path.substr(fixed.size() + 1));
  }
  if (full) return r.name + "/" + std::string(path.substr(1));
  return r.name + "/" + std::string(path_leaf(path));
}

bool MatchRules::named_by_leaf(size_t i) const {
  const config::Match& m = rules_[i].named.match;
  return m.each && !m.by_path && m.docker.empty() && m.podman.empty() && m.vm.empty() && m.pod.empty();
}

WorkloadMatches match_workloads(const std::vector<config::Workload>& workloads,
                                const CgroupHierarchy& hierarchy, const std::vector<Cgroup>& cgroups,
                                const SysRoots& roots) {
  MatchRules rules(named_matches(workloads));
  rules.resolve(hierarchy, roots);
  Platforms platforms;  // every platform's names, for people
  platforms.read(roots, Platforms::all);
  WorkloadMatches out;
  for (size_t i = 0; i < rules.size(); ++i)
    out.workloads.push_back({rules.rule(i).name, 0, 0, rules.note(i), {}, {}});
  out.cgroups.reserve(cgroups.size());
  // Trust is inherited: a cgroup's parent comes before it in path order.
  std::map<std::string, Trust, std::less<>> trusts;
  for (const Cgroup& c : cgroups) {
    std::optional<Trust> parent;
    if (c.path != "/") {
      auto it = trusts.find(parent_path(c.path));
      parent = it != trusts.end() ? it->second : Trust::host;
    }
    auto own = CgroupDir::Delegation::none;
    if (parent && *parent != Trust::user && hierarchy.mount.is_absolute()) {
      auto dir = CgroupDir::open(hierarchy, c.path);
      own = dir ? dir->delegation() : CgroupDir::Delegation::user;  // gone or unreadable: the least trust
    }
    const Trust trust = trust_of(parent, c.path, own);
    trusts.emplace(c.path, trust);
    WorkloadMatch& row =
        out.cgroups.emplace_back(WorkloadMatch{c.path, c.id, c.nr_procs, {}, {}, Selector::none, {}});
    row.platform = platforms.name_of(c.path);
    for (size_t i = 0; i < rules.size(); ++i) {
      if (!rules.selects_path(i, c.path) || (rules.needs_tasks(i) && c.nr_procs == 0)) continue;
      if (const char* why = rules.refused(i, trust)) {
        if (out.workloads[i].refused.empty()) out.workloads[i].refused = c.path + ": " + why;
        continue;
      }
      row.workload = rules.rule(i).name;
      row.instance = rules.instance_name(i, c.path);
      row.selector = rules.selector(i);
      out.workloads[i].cgroups++;
      out.workloads[i].procs += c.nr_procs;
      break;
    }
  }
  return out;
}

namespace {

// cgroup v2: a workload's cgroups without the cpu or cpuset controller (their parent's subtree_control
// does not enable it), counted and the first one said with what keel does: asks systemd for the unit's
// property that enables it (a systemd unit where systemd runs), or names the parent to enable it in.
void say_missing_controllers(WorkloadReport& report, const SysRoots& roots) {
  const CgroupHierarchy& h = report.hierarchy;
  const bool systemd = systemd_runs(roots);
  std::map<std::string, std::pair<size_t, std::string>> missing;  // workload -> (count, the first's text)
  for (const WorkloadMatch& r : report.matches.cgroups) {
    if (r.workload.empty() || r.path == "/") continue;
    const std::filesystem::path dir = h.mount / std::filesystem::path(r.path).relative_path();
    auto listed = read_file(dir / cgroup_file_name(CgroupFile::controllers, /*unified=*/true));
    if (!listed) continue;
    const auto have = split_blanks(trim(*listed));
    std::vector<std::string> lacks;
    for (std::string_view c : {"cpu", "cpuset"})
      if (std::ranges::find(have, c) == have.end()) lacks.emplace_back(c);
    if (lacks.empty()) continue;
    auto& [count, first] = missing[r.workload];
    if (count++ > 0) continue;
    const std::string parent = std::filesystem::path(r.path).parent_path().string();
    first = r.path + " has no " + join(lacks, " or ") + " controller (" + parent +
            " does not enable it for its children): ";
    if (systemd && systemd_unit_path(r.path)) {
      std::vector<std::string> props;
      for (const auto& c : lacks)
        props.push_back(c == "cpu" ? "CPUWeight=100" : "StartupAllowedCPUs=<every CPU>");
      first += "keel run asks systemd for " + join(props, " and ") + " on " + std::string(path_leaf(r.path)) +
               " when it acts on it (at runtime, given back when keel stops)";
    } else {
      first += "keel needs it enabled in " + (h.mount / std::filesystem::path(parent).relative_path() /
                                              cgroup_file_name(CgroupFile::subtree_control, /*unified=*/true))
                                                 .string();
    }
  }
  for (WorkloadSummary& w : report.matches.workloads)
    if (auto m = missing.find(w.name); m != missing.end())
      w.controllers = count_of(m->second.first, "cgroup", "cgroups") + " without: " + m->second.second;
}

}  // namespace

Result<WorkloadReport> discover_workloads(const std::vector<config::Workload>& workloads,
                                          config::Hierarchy choice, const SysRoots& roots) {
  auto layout = discover(roots);
  if (!layout) return std::unexpected(layout.error());
  auto hierarchy = choose_hierarchy(*layout, choice);
  if (!hierarchy) return std::unexpected(hierarchy.error());
  CgroupSkips skipped;
  auto cgroups = enumerate_cgroups(*hierarchy, &skipped);
  if (!cgroups) return std::unexpected(cgroups.error());
  WorkloadReport report{layout->mode, *hierarchy, {}, std::move(skipped)};
  report.matches = match_workloads(workloads, *hierarchy, *cgroups, roots);
  if (hierarchy->unified) say_missing_controllers(report, roots);
  return report;
}

// ---- Printing ----

namespace {

std::string describe(const CgroupHierarchy& h) {
  if (h.unified) {
    std::string controllers = join(h.controllers, " ");
    return "unified (cgroup v2, controllers: " + (controllers.empty() ? std::string("none") : controllers) +
           ") at " + h.mount.string();
  }
  return h.name() + " (cgroup v1, hierarchy " + std::to_string(h.id) + ") at " + h.mount.string();
}

void append_padded(std::string& out, std::string_view s, size_t width) {
  out += s;
  out.append(width > s.size() ? width - s.size() : 0, ' ');
}

}  // namespace

std::string format_workloads_text(const WorkloadReport& report) {
  const auto& rows = report.matches.cgroups;
  std::vector<std::string> ids;
  std::array<size_t, 5> width = {6, 2, 5, 8, 8};  // CGROUP ID PROCS WORKLOAD PLATFORM
  for (const WorkloadMatch& r : rows) {
    ids.push_back(r.id.str());
    width[0] = std::max(width[0], r.path.size());
    width[1] = std::max(width[1], ids.back().size());
    width[2] = std::max(width[2], std::to_string(r.nr_procs).size());
    width[3] = std::max(width[3], r.instance.empty() ? 1 : r.instance.size());
    width[4] = std::max(width[4], r.platform.empty() ? 1 : r.platform.size());
  }
  std::string out =
      "hierarchy: " + describe(report.hierarchy) + "; cgroup mode " + to_string(report.mode) + "\n";
  auto line = [&](std::string_view a, std::string_view b, std::string_view c, std::string_view d,
                  std::string_view p, std::string_view e) {
    append_padded(out, a, width[0] + 2);
    append_padded(out, b, width[1] + 2);
    append_padded(out, c, width[2] + 2);
    append_padded(out, d, width[3] + 2);
    append_padded(out, p, width[4] + 2);
    out += e;
    while (out.ends_with(' ')) out.pop_back();
    out += '\n';
  };
  line("CGROUP", "ID", "PROCS", "WORKLOAD", "PLATFORM", "MATCHED BY");
  size_t matched = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const WorkloadMatch& r = rows[i];
    bool hit = !r.workload.empty();
    matched += hit ? 1 : 0;
    line(r.path, ids[i], std::to_string(r.nr_procs), hit ? r.instance : "-",
         r.platform.empty() ? "-" : r.platform, hit ? to_string(r.selector) : "");
  }
  out += "\n" + count_of(rows.size(), "cgroup", "cgroups") + ", " + std::to_string(matched) + " matched\n";
  if (!report.skipped.empty()) out += "warning: " + report.skipped.message() + "\n";
  for (const WorkloadSummary& w : report.matches.workloads) {
    out += "workload " + w.name + ": ";
    if (w.cgroups > 0) {
      out +=
          count_of(w.cgroups, "cgroup", "cgroups") + ", " + count_of(w.procs, "process", "processes") + "\n";
    } else {
      out += "matched nothing" + (w.note.empty() ? std::string() : " (" + w.note + ")") + "\n";
    }
    if (!w.refused.empty()) out += "  not taken: " + w.refused + "\n";
    if (!w.controllers.empty()) out += "  controllers: " + w.controllers + "\n";
  }
  return out;
}

std::string format_workloads_json(const WorkloadReport& report) {
  const CgroupHierarchy& h = report.hierarchy;
  Json j;
  j["mode"] = to_string(report.mode);
  j["hierarchy"] = {{"name", h.name()},
                    {"id", h.id},
                    {"unified", h.unified},
                    {"mount", h.mount.string()},
                    {"controllers", h.controllers}};
  Json cgroups = Json::array();
  for (const WorkloadMatch& r : report.matches.cgroups) {
    Json c = {{"path", r.path},
              {"id", r.id.str()},
              {"hierarchy", r.id.hierarchy},
              {"inode", r.id.inode},
              {"procs", r.nr_procs}};
    c["workload"] = r.workload.empty() ? Json(nullptr) : Json(r.workload);
    c["instance"] = r.workload.empty() ? Json(nullptr) : Json(r.instance);
    c["selector"] = r.workload.empty() ? Json(nullptr) : Json(to_string(r.selector));
    c["platform"] = r.platform.empty() ? Json(nullptr) : Json(r.platform);
    cgroups.push_back(std::move(c));
  }
  j["cgroups"] = std::move(cgroups);
  Json workloads = Json::array();
  for (const WorkloadSummary& w : report.matches.workloads)
    workloads.push_back({{"name", w.name},
                         {"cgroups", w.cgroups},
                         {"procs", w.procs},
                         {"note", w.note.empty() ? Json(nullptr) : Json(w.note)},
                         {"refused", w.refused.empty() ? Json(nullptr) : Json(w.refused)},
                         {"controllers", w.controllers.empty() ? Json(nullptr) : Json(w.controllers)}});
  j["workloads"] = std::move(workloads);
  j["skipped"] = report.skipped.empty() ? Json(nullptr) : Json(report.skipped.message());
  return json_text(j);
}

}  // namespace keel
