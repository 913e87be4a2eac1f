#include "inventory/workloads.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <map>
#include <optional>
#include <system_error>
#include <utility>

#include "host/cgroup_files.h"
#include "host/fd.h"
#include "host/fileio.h"
#include "host/json.h"

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
// is decided once and remembered: at most |pattern| x |path| states of O(|path|) work each.
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
    if (memo_.empty()) return decide(pi, si);
    signed char& m = memo_[pi * (s_.size() + 1) + si];
    if (m == kUnknown) m = decide(pi, si) ? 1 : 0;
    return m == 1;
  }

 private:
  static constexpr signed char kUnknown = -1;

  bool level_start(size_t si) const { return si == 0 || s_[si - 1] == '/'; }

  bool decide(size_t pi, size_t si) {
    std::string_view p = p_.substr(pi);
    if (p.empty()) return si == s_.size();
    if (p.starts_with("**")) return globstar(pi + 2, si);
    if (p[0] == '*') return star(pi + 1, si);
    size_t consumed = 1;
    bool ok = false;
    bool more = si < s_.size();
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

  // `rest` (at pi) is what follows "**".
  bool globstar(size_t pi, size_t si) {
    if (pi == p_.size()) return si < s_.size();  // a trailing ** needs at least one more level
    if (level_start(si) && p_[pi] == '/' && match(pi + 1, si)) return true;  // zero levels
    for (size_t i = si; i <= s_.size(); ++i)
      if (match(pi, i)) return true;
    return false;
  }

  // `rest` (at pi) is what follows a single '*': it stays within the level.
  bool star(size_t pi, size_t si) {
    for (size_t i = si;; ++i) {
      if (match(pi, i)) return true;
      if (i == s_.size() || s_[i] == '/') return false;
    }
  }

  std::string_view p_, s_;
  std::vector<signed char> memo_;
};

}  // namespace

bool glob_match(std::string_view pattern, std::string_view path) { return Glob(pattern, path).match(0, 0); }

// ---- Path shapes of containers and pods ----

namespace {

bool is_hex(std::string_view s) {
  return std::ranges::all_of(s, [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}
bool is_container_id(std::string_view s) { return s.size() == 64 && is_hex(s); }

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

// Pod uids compare equal whether written with dashes (cgroupfs) or underscores (systemd).
bool same_pod_uid(std::string_view a, std::string_view b) {
  auto norm = [](char c) {
    if (c == '_') return '-';
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  };
  return !a.empty() && std::ranges::equal(a, b, {}, norm, norm);
}

// The path without its last element ("/a/b" -> "/a", "/a" -> "/", "/" -> "").
std::string_view parent_path(std::string_view path) {
  if (path.size() <= 1) return {};
  size_t slash = path.rfind('/');
  return slash == 0 ? std::string_view("/") : path.substr(0, slash);
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
    case Selector::pid_file:
      return "pid_file";
  }
  return "?";
}

namespace {

// The container name in config.v2.json: the first "Name" whose value starts with '/' (volume
// mount points also have a "Name", without the slash).
std::string_view container_name(std::string_view json) {
  static constexpr std::string_view kKey = "\"Name\":";
  for (size_t at = json.find(kKey); at != std::string_view::npos; at = json.find(kKey, at + 1)) {
    std::string_view v = json.substr(at + kKey.size());
    while (!v.empty() && v[0] == ' ') v.remove_prefix(1);
    if (!v.starts_with("\"/")) continue;
    v.remove_prefix(2);
    return v.substr(0, v.find('"'));
  }
  return {};
}

Selector primary_selector(const config::Match& m) {
  if (!m.cgroup.empty()) return Selector::cgroup;
  if (!m.systemd_unit.empty()) return Selector::systemd_unit;
  if (!m.docker.empty()) return Selector::docker;
  if (!m.pod.empty()) return Selector::pod;
  if (!m.pid_file.empty()) return Selector::pid_file;
  return Selector::none;
}

// Exact equality first: systemd escapes ('\x2d') in unit names would read as glob quoting.
bool name_matches(const std::string& pattern, std::string_view name) {
  return pattern == name || glob_match(pattern, name);
}

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

// Docker's containers by id, each name re-read only when its config.v2.json changed.
void MatchRules::read_containers(const SysRoots& roots) {
  const auto dir = roots.docker_state / "containers";
  std::error_code ec;
  std::map<std::string, Container> seen;
  for (auto it = std::filesystem::directory_iterator(dir, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    std::string id = it->path().filename().string();
    if (!is_container_id(id)) continue;
    const auto file = it->path() / "config.v2.json";
    struct stat st;
    if (::stat(file.c_str(), &st) != 0) continue;  // removed meanwhile, or being created
    Container c{st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec, st.st_size, st.st_ino, {}};
    auto old = containers_.find(id);
    if (old != containers_.end() && old->second.mtime_ns == c.mtime_ns && old->second.size == c.size &&
        old->second.inode == c.inode) {
      c.name = old->second.name;
    } else {
      auto json = read_file(file);
      if (!json) continue;
      c.name = std::string(container_name(*json));
    }
    seen.emplace(std::move(id), std::move(c));
  }
  containers_ = std::move(seen);
  containers_error_ = ec ? dir.string() + ": " + ec.message() : "";
}

void MatchRules::resolve_docker(Rule& r, const SysRoots& roots) const {
  std::string_view wanted = r.named.match.docker;
  if (wanted.starts_with('/')) wanted.remove_prefix(1);
  if (wanted.size() >= 12 && wanted.size() <= 64 &&
      std::ranges::all_of(wanted, [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }))
    r.docker_prefix = wanted;
  for (const auto& [id, c] : containers_)
    if (c.name == wanted) r.docker_ids.push_back(id);
  if (!r.docker_ids.empty() || !r.docker_prefix.empty()) return;
  r.note = !containers_error_.empty()
               ? "docker '" + std::string(wanted) + "': cannot list containers: " + containers_error_
               : "docker '" + std::string(wanted) + "': no container by that name in " +
                     (roots.docker_state / "containers").string();
}

namespace {

// A pid file is trusted only as root's: a regular file owned by root, at most kPidFileMax bytes,
// opened without following a symlink and without blocking (a FIFO, a device or a link to /dev/zero is
// refused, never read). Its first line.
constexpr size_t kPidFileMax = 64;
Result<std::string> read_pid_file(const std::filesystem::path& file) {
  Fd fd(::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ELOOP) return fail(file.string() + ": a symbolic link (a pid file must be the file itself)");
    return fail_errno("cannot open", file.string());
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return fail_errno("cannot stat", file.string());
  if (!S_ISREG(st.st_mode)) return fail(file.string() + ": not a regular file");
  if (st.st_uid != 0)
    return fail(file.string() + ": owned by uid " + std::to_string(st.st_uid) + ", not root");
  if (st.st_size > static_cast<off_t>(kPidFileMax))
    return fail(file.string() + ": " + std::to_string(st.st_size) + " bytes, more than a pid file holds (" +
                std::to_string(kPidFileMax) + ")");
  char buf[kPidFileMax + 1];
  ssize_t n = ::read(fd.get(), buf, sizeof buf);
  if (n < 0) return fail_errno("cannot read", file.string());
  std::string text(buf, static_cast<size_t>(n));
  if (text.size() > kPidFileMax)
    return fail(file.string() + ": grew past " + std::to_string(kPidFileMax) + " bytes");
  return text.substr(0, text.find('\n'));
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
  bool docker = std::ranges::any_of(rules_, [](const Rule& r) { return !r.named.match.docker.empty(); });
  if (docker) read_containers(roots);  // only when a rule names a container
  for (Rule& r : rules_) {
    Rule now;
    now.named = r.named;
    now.selector = r.selector;
    if (!now.named.match.docker.empty()) resolve_docker(now, roots);
    if (!now.named.match.pid_file.empty()) resolve_pid_file(now, hierarchy, roots);
    if (now.selector == Selector::none) now.note = "no match rule";
    bool same = now.docker_ids == r.docker_ids && now.docker_prefix == r.docker_prefix &&
                now.pid_cgroup == r.pid_cgroup && r.resolved;
    now.generation = same ? r.generation : r.generation + 1;
    now.resolved = true;
    r = std::move(now);
  }
}

bool MatchRules::selects(size_t i, std::string_view path, bool delegated) const {
  const Rule& r = rules_[i];
  const config::Match& m = r.named.match;
  if (r.selector == Selector::none) return false;
  if (delegated && r.named.critical) return false;
  if (!m.cgroup.empty() && !name_matches(m.cgroup, path)) return false;
  if (!m.systemd_unit.empty() && (!systemd_unit_path(path) || !name_matches(m.systemd_unit, leaf(path))))
    return false;
  if (!m.docker.empty()) {
    std::string_view id = docker_container_id(path);
    if (id.empty()) return false;
    bool by_prefix = !r.docker_prefix.empty() && id.starts_with(r.docker_prefix);
    if (!by_prefix && std::ranges::find(r.docker_ids, id) == r.docker_ids.end()) return false;
  }
  if (!m.pod.empty() && !same_pod_uid(m.pod, kubepods_pod_uid(path))) return false;
  if (!m.pid_file.empty() && r.pid_cgroup != path) return false;
  return true;
}

std::string MatchRules::instance_name(size_t i, std::string_view path) const {
  const NamedMatch& r = rules_[i].named;
  if (r.match.by_path) return std::string(path);
  if (!r.match.each || path == "/") return r.name;
  return r.name + "/" + std::string(leaf(path));
}

WorkloadMatches match_workloads(const std::vector<config::Workload>& workloads,
                                const CgroupHierarchy& hierarchy, const std::vector<Cgroup>& cgroups,
                                const SysRoots& roots) {
  MatchRules rules(named_matches(workloads));
  rules.resolve(hierarchy, roots);
  WorkloadMatches out;
  for (size_t i = 0; i < rules.size(); ++i)
    out.workloads.push_back({rules.rule(i).name, 0, 0, rules.note(i)});
  out.cgroups.reserve(cgroups.size());
  // Delegation is inherited: a cgroup's parent comes before it in path order.
  std::map<std::string, bool, std::less<>> delegated;
  for (const Cgroup& c : cgroups) {
    bool d = false;
    if (c.path != "/") {
      auto parent = delegated.find(parent_path(c.path));
      d = parent != delegated.end() && parent->second;
      if (!d && hierarchy.mount.is_absolute()) {
        auto dir = CgroupDir::open(hierarchy, c.path);
        d = dir && dir->delegated();
      }
    }
    delegated.emplace(c.path, d);
    WorkloadMatch& row =
        out.cgroups.emplace_back(WorkloadMatch{c.path, c.id, c.nr_procs, {}, {}, Selector::none});
    for (size_t i = 0; i < rules.size(); ++i) {
      if (!rules.selects(i, c.path, d) || (rules.needs_tasks(i) && c.nr_procs == 0)) continue;
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

Result<WorkloadReport> discover_workloads(const std::vector<config::Workload>& workloads,
                                          config::Hierarchy choice, const SysRoots& roots) {
  auto layout = discover(roots);
  if (!layout) return std::unexpected(layout.error());
  auto hierarchy = choose_hierarchy(*layout, choice);
  if (!hierarchy) return std::unexpected(hierarchy.error());
  auto cgroups = enumerate_cgroups(*hierarchy);
  if (!cgroups) return std::unexpected(cgroups.error());
  WorkloadReport report{layout->mode, *hierarchy, {}};
  report.matches = match_workloads(workloads, *hierarchy, *cgroups, roots);
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

std::string count_of(unsigned long long n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

std::string format_workloads_text(const WorkloadReport& report) {
  const auto& rows = report.matches.cgroups;
  std::vector<std::string> ids;
  std::array<size_t, 4> width = {6, 2, 5, 8};  // CGROUP ID PROCS WORKLOAD
  for (const WorkloadMatch& r : rows) {
    ids.push_back(r.id.str());
    width[0] = std::max(width[0], r.path.size());
    width[1] = std::max(width[1], ids.back().size());
    width[2] = std::max(width[2], std::to_string(r.nr_procs).size());
    width[3] = std::max(width[3], r.instance.empty() ? 1 : r.instance.size());
  }
  std::string out =
      "hierarchy: " + describe(report.hierarchy) + "; cgroup mode " + to_string(report.mode) + "\n";
  auto line = [&](std::string_view a, std::string_view b, std::string_view c, std::string_view d,
                  std::string_view e) {
    append_padded(out, a, width[0] + 2);
    append_padded(out, b, width[1] + 2);
    append_padded(out, c, width[2] + 2);
    append_padded(out, d, width[3] + 2);
    out += e;
    while (out.ends_with(' ')) out.pop_back();
    out += '\n';
  };
  line("CGROUP", "ID", "PROCS", "WORKLOAD", "MATCHED BY");
  size_t matched = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const WorkloadMatch& r = rows[i];
    bool hit = !r.workload.empty();
    matched += hit ? 1 : 0;
    line(r.path, ids[i], std::to_string(r.nr_procs), hit ? r.instance : "-",
         hit ? to_string(r.selector) : "");
  }
  out += "\n" + count_of(rows.size(), "cgroup", "cgroups") + ", " + std::to_string(matched) + " matched\n";
  for (const WorkloadSummary& w : report.matches.workloads) {
    out += "workload " + w.name + ": ";
    if (w.cgroups > 0) {
      out +=
          count_of(w.cgroups, "cgroup", "cgroups") + ", " + count_of(w.procs, "process", "processes") + "\n";
    } else {
      out += "matched nothing" + (w.note.empty() ? std::string() : " (" + w.note + ")") + "\n";
    }
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
    cgroups.push_back(std::move(c));
  }
  j["cgroups"] = std::move(cgroups);
  Json workloads = Json::array();
  for (const WorkloadSummary& w : report.matches.workloads)
    workloads.push_back({{"name", w.name},
                         {"cgroups", w.cgroups},
                         {"procs", w.procs},
                         {"note", w.note.empty() ? Json(nullptr) : Json(w.note)}});
  j["workloads"] = std::move(workloads);
  return json_text(j);
}

}  // namespace keel
