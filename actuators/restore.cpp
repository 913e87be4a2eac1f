#include "actuators/restore.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>

#include "host/cpuset.h"
#include "host/fileio.h"

namespace keel::act {

namespace fs = std::filesystem;

namespace {

bool is_cpu_list(const KnobPath& k) {
  auto name = k.rel.filename().string();
  return name == "cpuset.cpus" || name == "cpuset.mems" || name == "cpus_list" || name == "smp_affinity_list" ||
         (k.root == Root::cgroup && (name == "cpus" || name == "mems"));  // v1 mounted with noprefix
}

bool is_hex_mask(const KnobPath& k) {
  auto name = k.rel.filename().string();
  return name == "rps_cpus" || name == "xps_cpus" || name == "smp_affinity" || (name == "cpus" && k.root == Root::resctrl);
}

// Whether a sched features file has `token` on (FOO listed, not NO_FOO).
bool feature_state(std::string_view features, std::string_view name, bool& on) {
  std::istringstream in{std::string(features)};
  for (std::string w; in >> w;) {
    if (w == name) return on = true, true;
    if (w == "NO_" + std::string(name)) return on = false, true;
  }
  return false;
}

bool same_value(const JournalEntry& e, std::string_view current) {
  std::string_view want = trim(e.original);
  current = trim(current);
  if (e.kind == EntryKind::sched_feature) {
    bool want_on = !want.starts_with("NO_");
    std::string name(want_on ? want : want.substr(3));
    bool on = false;
    return feature_state(current, name, on) && on == want_on;
  }
  if (is_cpu_list(e.path)) {
    auto a = CpuSet::parse_list(current), b = CpuSet::parse_list(want);
    if (a && b) return *a == *b;
  }
  if (is_hex_mask(e.path)) {
    auto a = CpuSet::parse_mask(current), b = CpuSet::parse_mask(want);
    if (a && b) return *a == *b;
  }
  return current == want;
}

Result<void> write_value(const SysRoots& roots, const KnobPath& k, std::string_view value) {
  fs::path p = k.abs(roots);
  int fd = ::open(p.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) return fail_errno("cannot open to restore '" + std::string(value) + "'", p.string());
  ssize_t n = ::write(fd, value.data(), value.size());
  int e = errno;
  ::close(fd);
  if (n == static_cast<ssize_t>(value.size())) return {};
  if (n >= 0) e = EIO;
  std::string what = "restoring '" + std::string(value) + "' refused";
  if (k.root == Root::resctrl)
    if (std::string why = resctrl_status(roots); !why.empty()) what += " (last_cmd_status: " + why + ")";
  return fail(what, p.string(), e);
}

// The order restore tries file knobs in: cpu.idle before weights (an idle group refuses a weight);
// cpusets growing parents first, then cpusets shrinking children first; then everything else.
struct Ordered {
  const JournalEntry* e;
  int rank;
  int depth;
};

}  // namespace

RestoreReport restore(const SysRoots& roots, Journal& journal, const DirOps& dirs) {
  RestoreReport rep;
  const auto& all = journal.entries();
  std::string boot = read_boot_id(roots.proc);
  if (!journal.boot_id().empty() && !boot.empty() && journal.boot_id() != boot) {
    rep.gone = all.size();  // written before a reboot: nothing of it is still applied
    (void)journal.replace({});
    return rep;
  }
  std::vector<JournalEntry> left;
  std::vector<fs::path> removed_dirs;

  // 1. Directories keel created (resctrl groups), newest first; their tasks fall back to the parent.
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    if (it->kind != EntryKind::created_dir) continue;
    fs::path p = it->path.abs(roots);
    std::error_code ec;
    if (!fs::exists(p, ec)) {
      ++rep.gone;
      removed_dirs.push_back(p);
    } else if (dirs.remove(p) == 0) {
      ++rep.restored;
      removed_dirs.push_back(p);
    } else {
      rep.failed.push_back(Error{errno, p.string(), "cannot remove the group keel created"});
      left.push_back(*it);
    }
  }

  // 2. Knob values, in an order the kernel accepts, retried while a pass makes progress.
  std::vector<Ordered> todo;
  for (const auto& e : all) {
    if (e.kind == EntryKind::created_dir) continue;
    fs::path p = e.path.abs(roots);
    bool inside_removed = std::any_of(removed_dirs.begin(), removed_dirs.end(), [&](const fs::path& d) {
      auto rel = p.lexically_relative(d);
      return !rel.empty() && *rel.begin() != "..";
    });
    if (inside_removed) continue;  // went with its group
    std::string name = e.path.rel.filename().string();
    int depth = static_cast<int>(std::distance(e.path.rel.begin(), e.path.rel.end()));
    int rank = 5;
    if (e.path.root == Root::resctrl) rank = 0;
    else if (name == "cpu.idle") rank = 1;
    else if (name == "cpuset.cpus" || name == "cpuset.mems") {
      auto cur = read_file(p);
      auto a = cur ? CpuSet::parse_list(*cur) : Result<CpuSet>(fail("unreadable"));
      auto b = CpuSet::parse_list(e.original);
      bool grows = a && b && a->subset_of(*b);
      rank = grows ? 2 : 3;
      if (!grows) depth = -depth;  // shrink: children (deeper) first
    }
    todo.push_back({&e, rank, depth});
  }
  std::stable_sort(todo.begin(), todo.end(),
                   [](const Ordered& a, const Ordered& b) { return a.rank != b.rank ? a.rank < b.rank : a.depth < b.depth; });

  std::vector<std::pair<const JournalEntry*, Error>> pending;
  for (const auto& o : todo) pending.push_back({o.e, Error{}});
  for (bool progress = true; progress && !pending.empty();) {
    progress = false;
    std::vector<std::pair<const JournalEntry*, Error>> next;
    for (auto& [e, last_err] : pending) {
      fs::path p = e->path.abs(roots);
      auto cur = read_file(p);
      if (!cur) {
        if (cur.error().err == ENOENT) {
          ++rep.gone;  // the cgroup (or device) is gone: nothing to give back
          progress = true;
          continue;
        }
        next.push_back({e, cur.error()});
        continue;
      }
      if (same_value(*e, *cur)) {
        ++rep.unchanged;
        progress = true;
        continue;
      }
      auto r = write_value(roots, e->path, e->original);
      if (r) {
        ++rep.restored;
        progress = true;
      } else if (r.error().err == ENOENT) {
        ++rep.gone;
        progress = true;
      } else {
        next.push_back({e, r.error()});
      }
    }
    pending = std::move(next);
  }
  for (auto& [e, err] : pending) {
    rep.failed.push_back(err);
    left.push_back(*e);
  }
  if (auto r = journal.replace(std::move(left)); !r) rep.failed.push_back(r.error());
  return rep;
}

}  // namespace keel::act
