#include "actuators/unmanaged.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>

#include "host/fileio.h"
#include "host/proc_stat.h"

namespace keel::act {

namespace fs = std::filesystem;

namespace {

constexpr unsigned kPfKthread = 0x00200000;  // include/linux/sched.h PF_KTHREAD

// Subdirectory names of `dir` (cgroups), at most `limit` + 1 so callers can tell "too many".
std::vector<std::string> subdirs(const fs::path& dir, size_t limit) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_type != DT_DIR && e->d_type != DT_UNKNOWN) continue;
    std::string_view n = e->d_name;
    if (n == "." || n == "..") continue;
    if (e->d_type == DT_UNKNOWN) {
      std::error_code ec;
      if (!fs::is_directory(dir / n, ec)) continue;
    }
    out.emplace_back(n);
    if (out.size() > limit) break;
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

bool within(const std::string& path, const std::string& top) {
  return path == top ||
         (path.size() > top.size() && path.compare(0, top.size(), top) == 0 && path[top.size()] == '/');
}

// "/" + name joined under `parent` ("/" or "/a").
std::string join(const std::string& parent, const std::string& name) {
  return parent == "/" ? "/" + name : parent + "/" + name;
}

struct ProcInfo {
  std::string comm;
  bool kernel = false;
  CpuSet cpus;
};

// From <proc>/PID/stat (flags: field 9, after the comm in parentheses, which may hold anything) and
// <proc>/PID/status (Cpus_allowed_list). Nothing when the process is gone.
std::optional<ProcInfo> proc_info(const fs::path& proc, pid_t pid) {
  const fs::path dir = proc / std::to_string(pid);
  auto stat = read_file(dir / "stat");
  if (!stat) return std::nullopt;
  auto fields = parse_proc_stat(*stat);
  if (!fields) return std::nullopt;
  ProcInfo p;
  p.comm = printable(fields->comm, 64);
  p.kernel = (fields->number(9).value_or(0) & kPfKthread) != 0;
  if (auto status = read_file(dir / "status")) {
    const std::string key = "Cpus_allowed_list:";
    if (size_t at = status->find(key); at != std::string::npos) {
      size_t end = status->find('\n', at);
      std::string_view v = std::string_view(*status).substr(at + key.size(), end - at - key.size());
      if (auto set = CpuSet::parse_list(trim(v))) p.cpus = *set;
    }
  }
  return p;
}

}  // namespace

std::string printable(std::string_view s, size_t max) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (s.size() > max) out += "...";
  return out;
}

namespace {

// One top-level cgroup no workload is in: its cgroups with a cpuset, depth first, parents before
// children, bounded in count and depth; `why` says why it cannot be isolated (left empty else).
UnmanagedGroup walk_group(const CgroupHierarchy& cs, const std::string& top, std::string& why) {
  UnmanagedGroup g;
  g.top = top;
  std::vector<std::pair<std::string, size_t>> todo{{top, 0}};
  while (!todo.empty() && why.empty()) {
    auto [path, depth] = todo.back();
    todo.pop_back();
    if (g.cgroups.size() >= kMaxGroupCgroups) {
      why = "more than " + std::to_string(kMaxGroupCgroups) + " cgroups below it";
      break;
    }
    auto dir = CgroupDir::open(cs, path);
    if (!dir) {
      if (dir.error().err == ENOENT) continue;  // removed meanwhile
      why = "cannot open " + printable(path, 256) + ": " + dir.error().message();
      break;
    }
    auto cpus = dir->read(CgroupFile::cpus);
    if (!cpus) {
      if (cpus.error().err == ENOENT) continue;
      why = "cannot read the cpuset of " + printable(path, 256) + ": " + cpus.error().message();
      break;
    }
    const std::string text(trim(*cpus));
    auto set = CpuSet::parse_list(text);
    if (set && set->empty() && cs.unified)  // v2: not set, the parent's CPUs apply
      if (auto eff = dir->read(CgroupFile::effective_cpus)) set = CpuSet::parse_list(trim(*eff));
    if (!set) {
      why = "cannot parse the cpuset of " + printable(path, 256);
      break;
    }
    if (set->empty()) continue;  // v1: a cpuset never configured, where no task can run
    g.cgroups.push_back(std::move(*dir));
    g.cpus.push_back(*set);
    g.found.push_back(text);
    // v2: a child's effective CPUs are always within its parent's, so the top-level cgroup is all
    // there is to write (and a tenant's child set to critical CPUs cannot keep the rest from moving).
    if (cs.unified) break;
    std::vector<std::string> kids = subdirs(cs.mount / path.substr(1), kMaxGroupCgroups);
    if (!kids.empty() && depth + 1 > kMaxDepth) {
      why = "cgroups more than " + std::to_string(kMaxDepth) + " levels deep";
      break;
    }
    // Written later by their paths: one past the walk's bound would not open (host/cgroup.h).
    for (const std::string& k : kids)
      if (join(path, k).size() > kMaxCgroupPath)
        why = "a cgroup path longer than " + std::to_string(kMaxCgroupPath) + " bytes";
    if (!why.empty()) break;
    for (auto it = kids.rbegin(); it != kids.rend(); ++it) todo.emplace_back(join(path, *it), depth + 1);
  }
  return g;
}

// The root cgroup's processes: kernel threads (said, never moved), init (never moved), and the rest by
// whether their own affinity pins them (narrower than the root's CPUs) or not.
Result<void> survey_root_tasks(const SysRoots& roots, const CgroupDir& root, UnmanagedSurvey& s) {
  auto procs = root.read(CgroupFile::procs);
  if (!procs) return std::unexpected(procs.error());
  // The root's CPUs (v2 has no cpuset.cpus at the root): a process allowed on all of them is not pinned.
  CpuSet all;
  for (CgroupFile f : {CgroupFile::effective_cpus, CgroupFile::cpus})
    if (auto v = root.read(f); v && all.empty())
      if (auto set = CpuSet::parse_list(trim(*v))) all = *set;
  size_t n = 0;
  for (std::string_view rest = *procs; !rest.empty();) {
    size_t end = rest.find('\n');
    std::string_view line = trim(rest.substr(0, end));
    rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
    pid_t pid = 0;
    if (line.empty() || std::from_chars(line.data(), line.data() + line.size(), pid).ec != std::errc{} ||
        pid <= 0)
      continue;
    if (++n > kMaxRootProcs) {
      s.not_isolated.push_back({"root processes after the first " + std::to_string(kMaxRootProcs),
                                "keel reads at most " + std::to_string(kMaxRootProcs)});
      break;
    }
    auto info = proc_info(roots.proc, pid);
    if (!info) continue;  // exited
    if (info->kernel) {
      s.kernel_threads.push_back(info->comm);
      continue;
    }
    if (pid == 1) {
      s.not_isolated.push_back({"pid 1 (" + info->comm + ")", "keel does not move the init process"});
      continue;
    }
    RootProcess p{pid, info->comm, info->cpus};
    (info->cpus.empty() || all.subset_of(info->cpus) ? s.movable : s.pinned).push_back(std::move(p));
  }
  if (!s.kernel_threads.empty())
    s.not_isolated.push_back({"kernel threads in the root cgroup",
                              "the kernel places them (per-CPU ones cannot move); keel moves user-space "
                              "processes only"});
  return {};
}

}  // namespace

Result<UnmanagedSurvey> survey_unmanaged(const SysRoots& roots, const CgroupHierarchy& cs,
                                         const std::vector<std::string>& managed, bool root_tasks) {
  UnmanagedSurvey s;
  auto root = CgroupDir::open(cs, "/");
  if (!root) return std::unexpected(root.error());
  const bool root_managed = std::find(managed.begin(), managed.end(), "/") != managed.end();
  std::vector<std::string> tops = subdirs(cs.mount, kMaxTopGroups);
  if (tops.size() > kMaxTopGroups) {
    s.not_isolated.push_back({"top-level cgroups after the first " + std::to_string(kMaxTopGroups),
                              "keel reads at most " + std::to_string(kMaxTopGroups)});
    tops.resize(kMaxTopGroups);
  }
  for (const std::string& name : tops) {
    const std::string top = "/" + name;
    if (top == kRootTasksGroup) continue;
    if (std::any_of(managed.begin(), managed.end(), [&](const std::string& m) { return within(m, top); }))
      continue;  // a workload is in it: keel places what it manages there, and leaves the rest
    std::string why;
    UnmanagedGroup g = walk_group(cs, top, why);
    if (!why.empty())
      s.not_isolated.push_back({printable(top, 256), why});
    else if (!g.cgroups.empty())
      s.groups.push_back(std::move(g));
  }
  if (!root_tasks) return s;
  if (root_managed) {
    s.not_isolated.push_back({"the root cgroup's processes", "a workload is the root cgroup"});
    return s;
  }
  if (auto r = survey_root_tasks(roots, *root, s); !r) return std::unexpected(r.error());
  return s;
}

std::string describe_groups(const UnmanagedSurvey& s) {
  std::string out;
  for (const auto& g : s.groups) {
    if (!out.empty()) out += ", ";
    out += printable(g.top, 256) + " (" + std::to_string(g.cgroups.size()) +
           (g.cgroups.size() == 1 ? " cgroup)" : " cgroups)");
  }
  return out;
}

}  // namespace keel::act
