#include "actuators/restore.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "host/cgroup_files.h"
#include "host/cpuset.h"
#include "host/fileio.h"
#include "host/systemd.h"

namespace keel::act {

namespace fs = std::filesystem;

namespace {

bool same_value(const JournalEntry& e, std::string_view current) {
  return keel::same_value(e.kind == EntryKind::sched_feature ? ValueKind::sched_feature : e.value, current,
                          e.original);
}

// Whether the cgroup directory holding `e` is the one journaled: a cgroup removed and made again
// under the same name is another cgroup (its own found values), not this entry's.
bool same_cgroup(const SysRoots& roots, const JournalEntry& e) {
  if (e.dir_inode == 0) return true;
  struct stat st;
  if (::stat(e.path.abs(roots).parent_path().c_str(), &st) != 0) return true;  // gone: the read says so
  return static_cast<uint64_t>(st.st_ino) == e.dir_inode;
}

Result<void> write_value(const SysRoots& roots, const KnobPath& k, std::string_view text) {
  fs::path p = k.abs(roots);
  const std::string bytes = kernel_bytes(k, text);
  const std::string_view value = trim(text);
  // Kernel knob files are never links: one that is was not made by the kernel.
  int fd = ::open(p.c_str(), O_WRONLY | O_TRUNC | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return fail_errno("cannot open to restore '" + std::string(value) + "'", p.string());
  ssize_t n = ::write(fd, bytes.data(), bytes.size());
  int e = errno;
  ::close(fd);
  if (n == static_cast<ssize_t>(bytes.size())) return {};
  if (n >= 0) e = EIO;
  std::string what = "restoring '" + std::string(value) + "' refused";
  if (k.root == Root::resctrl)
    if (std::string why = resctrl_status(roots); !why.empty()) what += " (last_cmd_status: " + why + ")";
  return fail(what, p.string(), e);
}

// One write restore makes. A cpuset changed both ways (CPU 1 moved from A to B) cannot go straight
// back on v1, so it is restored in two steps: grown to (current | original) parents first, then
// shrunk to the original children first. Other knobs take one step. cpu.idle goes before weights
// (an idle group refuses a weight).
struct Step {
  const JournalEntry* e;
  std::string value;
  bool last;  // the entry's final step: its outcome is the entry's
  int rank;
  int depth;
  int sub = 0;  // order within a cgroup: v1 bandwidth lifts the quota, sets the period, then the quota
  bool unset_v2 = false;  // a v2 cpuset.cpus back to not set: every_cpu_of_hierarchy where refused
};

}  // namespace

Result<std::string> every_cpu_of_hierarchy(const fs::path& dir) {
  // The root of a v2 hierarchy is the one cgroup without its own cpuset.cpus (only .effective).
  std::error_code ec;
  fs::path at = dir;
  const auto cpus_file = cgroup_file_name(CgroupFile::cpus, /*unified=*/true);
  const auto effective = cgroup_file_name(CgroupFile::effective_cpus, /*unified=*/true);
  for (int up = 0; up < 4096 && fs::exists(at / cpus_file, ec) && at.has_relative_path(); ++up)
    at = at.parent_path();
  auto cpus = read_file(at / effective);
  if (!cpus) return std::unexpected(cpus.error());
  auto set = CpuSet::parse_list(trim(*cpus));
  if (!set || set->empty()) return fail((at / effective).string() + ": no CPUs");
  return set->to_list();
}

Result<size_t> move_procs_to_parent(const fs::path& dir) {
  const auto procs_file = cgroup_file_name(CgroupFile::procs, /*unified=*/true);  // the same on v1
  const fs::path to = dir.parent_path() / procs_file;
  size_t moved = 0;
  // Processes may fork while they are moved: read again until nothing is left (bounded).
  for (int pass = 0; pass < 8; ++pass) {
    auto procs = read_file(dir / procs_file);
    if (!procs) return std::unexpected(procs.error());
    size_t here = 0;
    Error last;
    bool failed = false;
    for (std::string_view rest = *procs; !rest.empty();) {
      size_t end = rest.find('\n');
      std::string_view pid = trim(rest.substr(0, end));
      rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
      if (pid.empty()) continue;
      ++here;
      int fd = ::open(to.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0) return fail_errno("cannot open to move pid " + std::string(pid) + " back", to.string());
      const std::string line = std::string(pid) + "\n";
      ssize_t w = ::write(fd, line.data(), line.size());
      int e = errno;
      ::close(fd);
      if (w < 0 && e != ESRCH) {
        last = Error{e, to.string(), "cannot move pid " + std::string(pid) + " back to the parent cgroup"};
        failed = true;
      } else if (w >= 0) {
        ++moved;
      }
    }
    if (failed) return std::unexpected(last);
    if (here == 0) return moved;
  }
  return moved;
}

RestoreReport restore(const SysRoots& roots, Journal& journal, const DirOps& dirs,
                      const KnobWriter::Written* wrote) {
  return restore_where(roots, journal, {}, dirs, wrote);
}

namespace {

// One restore's state: what it reports, what stays journaled, and the directories removed (or found
// gone) by root and path, whose knobs went with them.
struct Pass {
  const SysRoots& roots;
  RestoreReport& rep;
  Journal& journal;
  std::vector<JournalEntry> left;
  std::set<std::pair<Root, fs::path>> removed_dirs;

  bool inside_removed(const JournalEntry& e) const {
    if (removed_dirs.empty()) return false;
    for (fs::path d = e.path.rel.parent_path(); !d.empty(); d = d.parent_path())
      if (removed_dirs.contains({e.path.root, d})) return true;
    return false;
  }
};

// Only what keel itself writes (the journal loads nothing else; checked again where it is written),
// and of that what `which` asks for: the others stay journaled.
std::vector<const JournalEntry*> select_entries(Pass& p, const std::vector<JournalEntry>& all,
                                                const std::function<bool(const JournalEntry&)>& which) {
  std::vector<const JournalEntry*> entries;
  entries.reserve(all.size());
  for (const auto& e : all) {
    if (which && !which(e)) {
      p.left.push_back(e);
    } else if (auto ok = check_entry(e); !ok) {
      p.rep.failed.push_back(Error{0, e.path.abs(p.roots).string(), "not restored: " + ok.error().what});
      p.left.push_back(e);
    } else {
      entries.push_back(&e);
    }
  }
  return entries;
}

// 1. Directories keel created, newest first: resctrl groups (their tasks fall back to the default
// group) and cgroups (their processes are moved to the parent first: a cgroup with tasks is busy).
void remove_created_dirs(Pass& p, const std::vector<const JournalEntry*>& entries, const DirOps& dirs) {
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    const JournalEntry& e = **it;
    if (e.kind != EntryKind::created_dir) continue;
    fs::path path = e.path.abs(p.roots);
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      ++p.rep.gone;
      p.removed_dirs.insert({e.path.root, e.path.rel});
    } else if (auto moved = e.path.root == Root::cgroup ? move_procs_to_parent(path) : Result<size_t>(0);
               !moved) {
      p.rep.failed.push_back(moved.error());  // a cgroup keel made for tasks: they go back first
      p.left.push_back(e);
    } else if (dirs.remove(path) == 0) {
      ++p.rep.restored;
      p.removed_dirs.insert({e.path.root, e.path.rel});
    } else {
      p.rep.failed.push_back(Error{errno, path.string(), "cannot remove the group keel created"});
      p.left.push_back(e);
    }
  }
}

// Per cgroup directory (by root and path): which of quota and period are journaled, and cpu.idle's
// original, so each entry's question is one lookup (restore is O(n log n) in the entries).
struct InDir {
  bool quota = false, period = false;
  std::optional<std::string> idle;
};
using InDirs = std::map<std::pair<Root, fs::path>, InDir>;

InDirs in_dirs(const std::vector<const JournalEntry*>& entries) {
  InDirs in_dir;
  for (const JournalEntry* e : entries) {
    if (e->kind != EntryKind::file) continue;
    InDir& d = in_dir[{e->path.root, e->path.rel.parent_path()}];
    if (e->value == ValueKind::cfs_quota) d.quota = true;
    if (e->value == ValueKind::cfs_period) d.period = true;
    if (e->value == ValueKind::idle && e->path.rel.filename() == cgroup_file_name(CgroupFile::idle, false))
      d.idle = e->original;
  }
  return in_dir;
}

// Whether a weight entry's cgroup is idle once restored: an idle group's weight is fixed by the kernel
// (it refuses writes), so once cpu.idle is back to 1 the weight is what the kernel makes it. (cpu.idle
// has one name on v1 and v2.)
bool idle_after(const fs::path& weight_file, const InDir* d) {
  if (d != nullptr && d->idle) return trim(*d->idle) == "1";
  auto idle = read_file(weight_file.parent_path() / cgroup_file_name(CgroupFile::idle, /*unified=*/false));
  return idle && trim(*idle) == "1";
}

// The steps that write `e` (now `cur`, unreadable as none) back: see Step for the order.
void push_steps(Pass& p, const JournalEntry& e, const std::optional<std::string>& cur, const InDir* d,
                std::vector<Step>& steps) {
  const fs::path path = e.path.abs(p.roots);
  const bool pair = d != nullptr && d->quota && d->period;
  int depth = static_cast<int>(std::distance(e.path.rel.begin(), e.path.rel.end()));
  if (e.path.root == Root::resctrl) {
    steps.push_back({&e, e.original, true, 0, depth});
  } else if (e.value == ValueKind::idle) {
    steps.push_back({&e, e.original, true, 1, depth});
  } else if (e.value == ValueKind::cpuset_list) {
    auto now = cur ? CpuSet::parse_list(*cur) : Result<CpuSet>(fail("unreadable"));
    auto want = CpuSet::parse_list(e.original);
    std::error_code ec;
    // v2 (a cgroup.controllers file beside it): "" is "not set", the parent's CPUs, written back as is.
    const bool unset_v2 =
        want && want->empty() &&
        fs::exists(path.parent_path() / cgroup_file_name(CgroupFile::controllers, true), ec);
    if (unset_v2) {
      steps.push_back({&e, e.original, true, 3, -depth, 0, true});
      return;
    }
    if (want && want->empty()) {
      // v1: keel gave a new cpuset its CPUs and tasks joined since: emptying it is refused by the
      // kernel (ENOSPC) and would strand them; it keeps what it has.
      auto procs = read_file(path.parent_path() / cgroup_file_name(CgroupFile::procs, /*unified=*/false));
      if (procs && !trim(*procs).empty()) {
        ++p.rep.kept;
        return;
      }
    }
    if (now && want && !now->subset_of(*want))  // shrinks (maybe also grows): grow to the union first
      steps.push_back({&e, (*now | *want).to_list(), false, 2, depth});
    steps.push_back({&e, e.original, true, 3, -depth});
  } else if (pair && e.value == ValueKind::cfs_quota) {
    steps.push_back({&e, "-1", false, 4, depth, 0});
    steps.push_back({&e, e.original, true, 4, depth, 2});
  } else if (pair && e.value == ValueKind::cfs_period) {
    steps.push_back({&e, e.original, true, 4, depth, 1});
  } else {
    steps.push_back({&e, e.original, true, 4, depth});
  }
}

// 2a. The knob values to write back, in an order the kernel accepts. v1 quota and period changed
// together go back through "no limit" (-1), in the order quota=-1, period, quota: any other order can
// be refused by a parent's or a child's limit. What is gone, unchanged or another manager's since is
// counted and left out.
std::vector<Step> value_steps(Pass& p, const std::vector<const JournalEntry*>& entries,
                              const KnobWriter::Written* wrote) {
  const InDirs in_dir = in_dirs(entries);
  std::vector<Step> steps;
  for (const JournalEntry* ep : entries) {
    const JournalEntry& e = *ep;
    if (e.kind == EntryKind::created_dir || e.kind == EntryKind::unit_property) continue;
    if (p.inside_removed(e)) continue;  // went with its group
    fs::path path = e.path.abs(p.roots);
    auto cur = read_file(path);
    if (cur && !same_cgroup(p.roots, e)) {
      ++p.rep.gone;  // its cgroup was removed; the one there now under its name is not keel's to change
      continue;
    }
    if (!cur && cur.error().err == ENOENT) {
      std::error_code ec;
      if (!fs::is_directory(KnobPath{e.path.root, {}}.abs(p.roots), ec)) {
        // Not the cgroup that is gone but the whole root (debugfs unmounted, a wrong --root): keep it.
        p.rep.failed.push_back(
            Error{ENOENT, path.string(), "its file system is not there; kept for a later restore"});
        p.left.push_back(e);
        continue;
      }
      ++p.rep.gone;  // the cgroup (or device) is gone: nothing to give back
      continue;
    }
    auto dir = in_dir.find({e.path.root, e.path.rel.parent_path()});
    const InDir* d = dir == in_dir.end() ? nullptr : &dir->second;
    if ((cur && e.value == ValueKind::weight && idle_after(path, d)) || (cur && same_value(e, *cur))) {
      ++p.rep.unchanged;
      continue;
    }
    // The values keel wrote there: this keel's last (a clean stop), the journal's last two (after a
    // crash too). At none of them (nor the original): another manager's value now, not keel's to take
    // back.
    if (cur) {
      std::vector<std::string> keels;
      if (wrote != nullptr)
        if (auto w = wrote->find({e.path, e.dir_inode}); w != wrote->end()) keels.push_back(w->second);
      if (const KeelWrote* jw = p.journal.wrote(e.path)) {
        keels.push_back(jw->last);
        if (jw->before) keels.push_back(*jw->before);
      }
      const std::string now(trim(*cur));
      if (!keels.empty() && std::none_of(keels.begin(), keels.end(), [&](const std::string& v) {
            return keel::same_value(e.value, now, v);
          })) {
        p.rep.changed_since.push_back(path.string() + ": keel wrote " + keels.front() + ", now " + now);
        continue;
      }
    }
    push_steps(p, e, cur ? std::optional<std::string>(*cur) : std::nullopt, d, steps);
  }
  std::stable_sort(steps.begin(), steps.end(), [](const Step& a, const Step& b) {
    if (a.rank != b.rank) return a.rank < b.rank;
    if (a.depth != b.depth) return a.depth < b.depth;
    return a.sub < b.sub;
  });
  return steps;
}

// 2b. The steps written in order, retried while a pass makes progress; an entry whose last step failed
// is reported with that step's error and stays journaled.
void write_steps(Pass& p, const std::vector<Step>& steps) {
  std::vector<std::pair<Step, Error>> pending;
  for (const auto& st : steps) pending.push_back({st, Error{}});
  std::set<const JournalEntry*> done;  // entries whose last step went through (or whose file went)
  for (bool progress = true; progress && !pending.empty();) {
    progress = false;
    std::vector<std::pair<Step, Error>> next;
    for (auto& [st, last_err] : pending) {
      if (done.contains(st.e)) continue;  // a late union step must not undo the restored value
      // Noted first where keel's values are known, as keel's own writes are: a restore killed after
      // this write finds it keel's (where none are known, the next restore gives back whatever it finds).
      if (p.journal.wrote(st.e->path) != nullptr)
        (void)p.journal.note_write(st.e->path, st.e->dir_inode, st.value);
      auto r = write_value(p.roots, st.e->path, st.value);
      if (!r && r.error().err == ENOSPC && st.unset_v2) {
        // The kernel keeps a populated cgroup's cpuset.cpus from being unset again: every CPU of the
        // hierarchy gives it what its parent has, which is what not set gave it.
        const fs::path path = st.e->path.abs(p.roots);
        if (auto every = every_cpu_of_hierarchy(path.parent_path())) {
          if (p.journal.wrote(st.e->path) != nullptr)
            (void)p.journal.note_write(st.e->path, st.e->dir_inode, *every);
          r = write_value(p.roots, st.e->path, *every);
          if (r) p.rep.every_cpu.push_back(path.string() + " (" + *every + ")");
        }
      }
      if (r || r.error().err == ENOENT) {
        progress = true;
        if (!st.last && r) continue;
        done.insert(st.e);
        ++(r ? p.rep.restored : p.rep.gone);
      } else {
        next.push_back({st, r.error()});
      }
    }
    pending = std::move(next);
  }
  std::set<const JournalEntry*> failed;
  for (auto& [st, err] : pending) {
    if (done.contains(st.e) || !st.last) continue;  // the last step's error is the one to report
    if (failed.insert(st.e).second) {
      p.rep.failed.push_back(err);
      p.left.push_back(*st.e);
    }
  }
}

// 3. systemd units' properties keel asked for, last (the values above are written back first): each
// back to what it was, which for "not set" may make systemd disable the controller again (its files
// go with it). A unit systemd no longer knows is gone.
void restore_unit_properties(Pass& p, const std::vector<const JournalEntry*>& entries, const DirOps& dirs) {
  for (const JournalEntry* e : entries) {
    if (e->kind != EntryKind::unit_property) continue;
    const std::string unit = e->path.rel.parent_path().filename().string();
    const auto prop = parse_unit_property(e->path.rel.filename().string());  // checked by check_entry
    auto r = !dirs.unit_property ? fail("no systemd to ask to set " + unit + " " +
                                        e->path.rel.filename().string() + " back; kept for a later restore")
                                 : dirs.unit_property(p.roots, unit, *prop, e->original);
    if (r) {
      ++p.rep.restored;
    } else if (r.error().err == ENOENT) {
      ++p.rep.gone;
    } else {
      p.rep.failed.push_back(r.error());
      p.left.push_back(*e);
    }
  }
}

}  // namespace

RestoreReport restore_where(const SysRoots& roots, Journal& journal,
                            const std::function<bool(const JournalEntry&)>& which, const DirOps& dirs,
                            const KnobWriter::Written* wrote) {
  RestoreReport rep;
  const auto& all = journal.entries();  // replaced only at the end
  std::string boot = read_boot_id(roots.proc);
  if (all.empty()) return rep;
  if (boot.empty()) {
    // A wrong --root (or no /proc) would make every knob look gone and the journal be thrown away.
    rep.failed.push_back(
        Error{0, (roots.proc / "sys/kernel/random/boot_id").string(),
              "cannot read this boot's id: is the root right? nothing restored, the journal is kept"});
    return rep;
  }
  if (!journal.boot_id().empty() && journal.boot_id() != boot) {
    rep.gone = all.size();  // written before a reboot: nothing of it is still applied
    (void)journal.replace({});
    return rep;
  }
  Pass p{roots, rep, journal, {}, {}};
  // Other tools that follow the kernel docs hold this lock around their resctrl changes too.
  int resctrl_lock = -1;
  if (std::any_of(all.begin(), all.end(), [](const auto& e) { return e.path.root == Root::resctrl; })) {
    resctrl_lock = ::open(roots.resctrl.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (resctrl_lock >= 0) (void)::flock(resctrl_lock, LOCK_EX);
  }
  const std::vector<const JournalEntry*> entries = select_entries(p, all, which);
  remove_created_dirs(p, entries, dirs);
  write_steps(p, value_steps(p, entries, wrote));
  restore_unit_properties(p, entries, dirs);
  if (resctrl_lock >= 0) ::close(resctrl_lock);
  if (auto r = journal.replace(std::move(p.left)); !r) rep.failed.push_back(r.error());
  return rep;
}

}  // namespace keel::act
