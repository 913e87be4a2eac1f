#include "actuators/writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "host/fileio.h"

namespace keel::act {

namespace fs = std::filesystem;

DirOps DirOps::real() {
  return DirOps{[](const fs::path& p) { return ::mkdir(p.c_str(), 0755); },
                [](const fs::path& p) { return ::rmdir(p.c_str()); }, &keel::set_unit_property};
}

std::string resctrl_status(const SysRoots& roots) {
  auto s = read_file(roots.resctrl / "info/last_cmd_status");
  if (!s) return {};
  std::string t(trim(*s));
  return t == "ok" ? std::string() : t;
}

const std::string* KnobWriter::observed(const KnobPath& k) const {
  auto it = observed_.find(k);
  return it == observed_.end() ? nullptr : &it->second;
}

std::string& KnobWriter::observe_current(const KnobPath& k, std::string& current) {
  if (const std::string* o = observed(k)) current = *o;
  return current;
}

KnobWriter::KnobWriter(const SysRoots& roots, Mode mode, Journal* journal, DirOps dirs)
    : roots_(roots), mode_(mode), journal_(journal), dirs_(std::move(dirs)) {}

std::vector<Change> KnobWriter::take_changes() {
  dropped_changes_ = 0;
  return std::exchange(changes_, {});
}

void KnobWriter::note(Change c) {
  // A caller that never takes them (a tool, a test, a loop that failed to) must not grow the writer
  // without bound: the oldest half goes, counted.
  if (changes_.size() >= kMaxPendingChanges) {
    changes_.erase(changes_.begin(), changes_.begin() + kMaxPendingChanges / 2);
    dropped_changes_ += kMaxPendingChanges / 2;
  }
  changes_.push_back(std::move(c));
}

namespace {
// The inode of the directory a knob is in; nullopt when it is gone (any other failure: 0, unknown).
std::optional<uint64_t> dir_inode_of(const fs::path& knob) {
  struct stat st;
  if (::stat(knob.parent_path().c_str(), &st) != 0)
    return errno == ENOENT ? std::nullopt : std::optional<uint64_t>(0);
  return static_cast<uint64_t>(st.st_ino);
}
}  // namespace

Result<size_t> KnobWriter::prune_gone() {
  auto gone = [&](const KnobPath& k, uint64_t inode) {
    if (k.root != Root::cgroup) return false;
    auto now = dir_inode_of(k.abs(roots_));
    return !now || (inode != 0 && *now != 0 && *now != inode);
  };
  size_t n = 0;
  n += std::erase_if(wrote_, [&](const auto& w) { return gone(w.first.first, w.first.second); });
  n += std::erase_if(observed_, [&](const auto& o) { return gone(o.first, 0); });
  // A lockout long over is as good as none (its strikes only lengthen a lockout of a knob that keeps
  // drifting: after an hour it starts over).
  n += std::erase_if(lockouts_, [&](const auto& l) {
    return tick_ >= l.second.until + kDriftLockoutMaxTicks || gone(l.first, 0);
  });
  if (journal_ != nullptr && mode_ == Mode::enforce) {
    // A unit whose cgroup went (stopped, or a transient unit gone) gets its property back now: systemd
    // keeps a service's runtime properties while it is stopped. Kept journaled where systemd refused.
    std::set<KnobPath> back;
    for (const JournalEntry& e : journal_->entries()) {
      if (e.kind != EntryKind::unit_property || !gone(e.path, 0)) continue;
      const std::string unit = e.path.rel.parent_path().filename().string();
      auto p = parse_unit_property(e.path.rel.filename().string());
      auto r = p && dirs_.unit_property ? dirs_.unit_property(roots_, unit, *p, e.original)
                                        : Result<void>(fail("no systemd to ask"));
      if (r || r.error().err == ENOENT) back.insert(e.path);
    }
    auto j = journal_->forget_where([&](const JournalEntry& e) {
      return e.kind == EntryKind::file ? gone(e.path, e.dir_inode) : back.contains(e.path);
    });
    if (!j) return std::unexpected(j.error());
    n += *j;
  }
  return n;
}

// What goes to the kernel: an empty value as a lone newline (a 0-byte write is ignored), and a resctrl
// value newline-terminated (schemata refuses input without it).
std::string kernel_bytes(const KnobPath& k, std::string_view value) {
  std::string v(value);
  if (v.empty() || (k.root == Root::resctrl && v.back() != '\n')) v += '\n';
  return v;
}

Result<void> KnobWriter::raw_write(const KnobPath& k, std::string_view text, bool append) {
  fs::path p = k.abs(roots_);
  const std::string bytes = kernel_bytes(k, text);
  const std::string_view value = bytes;
  int fd = ::open(p.c_str(), O_WRONLY | O_CLOEXEC | (append ? O_APPEND : O_TRUNC));
  ssize_t n = -1;
  int e = errno;
  if (fd >= 0) {
    n = ::write(fd, value.data(), value.size());
    e = errno;
    ::close(fd);
  }
  if (n == static_cast<ssize_t>(value.size())) return {};
  if (n >= 0) e = EIO;  // a short write of a kernel file
  std::string what = (fd < 0 ? "cannot open to write '" : "write '") + std::string(trim(value)) +
                     (fd < 0 ? "'" : "' refused");
  if (k.root == Root::resctrl)
    if (std::string why = resctrl_status(roots_); !why.empty()) what += " (last_cmd_status: " + why + ")";
  return fail(what, p.string(), e);
}

Result<bool> KnobWriter::set(const KnobPath& k, std::string_view value, ValueKind kind) {
  fs::path p = k.abs(roots_);
  std::string current;
  auto cur = read_file(p);
  if (cur) {
    current = std::string(trim(*cur));
  } else if (mode_ == Mode::enforce || cur.error().err != ENOENT) {
    return std::unexpected(cur.error());  // observe: a file in a group not yet made reads as ""
  }
  std::string want(trim(value));
  if (mode_ == Mode::observe) observe_current(k, current);
  if (k.root == Root::cgroup) {
    auto may = may_write(k, CgroupId{}, kind, current);
    if (!may) return std::unexpected(may.error());
    if (!*may) return false;
  }
  if (same_value(kind, current, want)) return false;
  if (mode_ == Mode::observe) {
    note({k, current, want, false});
    observed_[k] = want;
    return true;
  }
  JournalEntry original{EntryKind::file, k, current, kind, 0};
  if (auto r = write_journaled(k, value, original); !r) return std::unexpected(r.error());
  return true;
}

Result<bool> KnobWriter::set(const CgroupDir& dir, CgroupFile f, std::string_view value) {
  if (dir.name(f).empty())
    return fail("this cgroup version has no such knob", dir.file_path(f).string(), ENOENT);
  auto k = cgroup_knob(roots_, dir.hierarchy(), dir.path(), dir.name(f));
  if (!k) return std::unexpected(k.error());
  const ValueKind kind = cgroup_file_kind(f);
  std::string current;
  auto cur = dir.read(f);
  if (cur) {
    current = std::string(trim(*cur));
  } else if (mode_ == Mode::enforce || cur.error().err != ENOENT) {
    return std::unexpected(cur.error());
  }
  std::string want(trim(value));
  if (mode_ == Mode::observe) observe_current(*k, current);
  auto may = may_write(*k, dir.id(), kind, current, dir.path(), f);
  if (!may) return std::unexpected(may.error());
  if (!*may) return false;
  if (same_value(kind, current, want)) return false;
  if (mode_ == Mode::observe) {
    note({*k, current, want, false});
    observed_[*k] = want;
    return true;
  }
  if (journal_ == nullptr)
    return fail("no journal: refusing to change a knob it could not restore", k->abs(roots_).string());
  if (auto r = journal_first(JournalEntry{EntryKind::file, *k, current, kind, dir.id().inode}); !r)
    return std::unexpected(r.error());
  if (auto r = journal_->note_write(*k, dir.id().inode, want); !r) return std::unexpected(r.error());
  if (auto r = dir.write(f, kernel_bytes(*k, value)); !r) {
    (void)journal_->note_write(*k, dir.id().inode, current);  // still what it was
    return std::unexpected(r.error());
  }
  note({*k, current, want, true});
  wrote_[{*k, dir.id().inode}] = want;
  return true;
}

bool KnobWriter::locked_out(const KnobPath& k) const {
  auto l = lockouts_.find(k);
  return l != lockouts_.end() && tick_ < l->second.until;
}

Result<bool> KnobWriter::may_write(const KnobPath& k, CgroupId cgroup, ValueKind kind,
                                   const std::string& current, std::string_view cgroup_path,
                                   std::optional<CgroupFile> file) {
  if (mode_ != Mode::enforce) return true;
  if (locked_out(k)) return false;
  auto w = wrote_.find({k, cgroup.inode});
  if (w == wrote_.end() || same_value(kind, current, w->second)) return true;
  if (owner_wrote_back(k, cgroup, cgroup_path, kind, current, w->second)) return true;  // written again now
  // Someone else wrote it since keel did: keel gives the knob up (the journal's original with it).
  drifts_.push_back({k, cgroup, file, w->second, current});
  wrote_.erase(w);
  Lockout& l = lockouts_[k];
  l.strikes = std::min(l.strikes + 1, 16u);
  l.until = tick_ + std::min(kDriftLockoutMaxTicks, kDriftLockoutTicks << (l.strikes - 1));
  if (journal_ != nullptr)
    if (auto r = journal_->forget(k, cgroup.inode); !r) return std::unexpected(r.error());
  return false;
}

bool KnobWriter::owner_wrote_back(const KnobPath& k, CgroupId cgroup, std::string_view cgroup_path,
                                  ValueKind kind, const std::string& current, const std::string& wrote) {
  if (!owner_reapplies_ || journal_ == nullptr || k.root != Root::cgroup) return false;
  const JournalEntry* e = journal_->find(k, cgroup.inode);
  if (e == nullptr || e->kind != EntryKind::file || !same_value(kind, current, e->original)) return false;
  if (cgroup_path.empty() || !owner_reapplies_(cgroup_path)) return false;
  Reapplies& r = reapplies_[k];
  if (r.count == 0 || tick_ >= r.since + kReapplyWindowTicks) r = {tick_, 0};
  if (++r.count > kReapplyMax) return false;
  reapplied_.push_back({k, wrote, current});
  return true;
}

std::optional<std::string> KnobWriter::original(const CgroupDir& dir, CgroupFile f) const {
  if (journal_ == nullptr || dir.name(f).empty()) return std::nullopt;
  auto k = cgroup_knob(roots_, dir.hierarchy(), dir.path(), dir.name(f));
  if (!k) return std::nullopt;
  const JournalEntry* e = journal_->find(*k, dir.id().inode);
  if (e == nullptr || e->kind != EntryKind::file) return std::nullopt;
  return e->original;
}

Result<void> KnobWriter::journal_first(const JournalEntry& original) {
  if (journal_->has(original.path, original.dir_inode)) return {};
  return journal_->record(original);  // durable before the first write
}

Result<void> KnobWriter::write_journaled(const KnobPath& k, std::string_view value,
                                         const JournalEntry& original) {
  if (mode_ == Mode::observe) {
    note({k, original.original, std::string(trim(value)), false});
    observed_[k] = std::string(trim(value));
    return {};
  }
  if (journal_ == nullptr)
    return fail("no journal: refusing to change a knob it could not restore", k.abs(roots_).string());
  if (auto r = journal_first(original); !r) return r;
  if (k.root == Root::cgroup)  // the knobs whose values are compared (drift; restore after a crash)
    if (auto r = journal_->note_write(k, original.dir_inode, trim(value)); !r) return r;
  if (auto r = raw_write(k, value, false); !r) return r;
  note({k, original.original, std::string(trim(value)), true});
  if (k.root == Root::cgroup) wrote_[{k, original.dir_inode}] = std::string(trim(value));
  return {};
}

Result<void> KnobWriter::journal(const CgroupDir& dir, CgroupFile f) {
  if (mode_ == Mode::observe) return {};
  if (journal_ == nullptr) return fail("no journal", dir.file_path(f).string());
  auto k = cgroup_knob(roots_, dir.hierarchy(), dir.path(), dir.name(f));
  if (!k) return std::unexpected(k.error());
  // The kernel changes it now, as a side effect: that is not another manager's drift, and restore
  // gives the original back whatever it finds.
  wrote_.erase({*k, dir.id().inode});
  if (journal_->has(*k, dir.id().inode)) return journal_->forget_written(*k, dir.id().inode);
  auto cur = dir.read(f);
  if (!cur) return std::unexpected(cur.error());
  return journal_->record(
      JournalEntry{EntryKind::file, *k, std::string(trim(*cur)), cgroup_file_kind(f), dir.id().inode});
}

Result<bool> KnobWriter::append(const KnobPath& k, std::string_view value) {
  if (mode_ == Mode::observe) {
    note({k, "", std::string(trim(value)), false});
    return true;
  }
  auto r = raw_write(k, value, true);
  if (!r) {
    if (r.error().err == ESRCH) return false;  // the task exited meanwhile
    return std::unexpected(r.error());
  }
  note({k, "", std::string(trim(value)), true});
  return true;
}

Result<bool> KnobWriter::make_dir(const KnobPath& k) {
  fs::path p = k.abs(roots_);
  std::error_code ec;
  if (fs::is_directory(p, ec)) return false;
  if (mode_ == Mode::observe) {
    note({k, "", "(mkdir)", false});
    return true;
  }
  if (journal_ == nullptr) return fail("no journal: refusing to create what it could not remove", p.string());
  if (auto r = journal_->record(JournalEntry{EntryKind::created_dir, k, "", ValueKind::text, 0}); !r)
    return std::unexpected(r.error());
  if (dirs_.make(p) != 0) {
    int e = errno;
    // Not created: the entry would make restore remove a directory keel does not own.
    (void)journal_->forget_where(
        [&](const JournalEntry& x) { return x.path == k && x.kind == EntryKind::created_dir; });
    std::string what = "mkdir refused";
    if (k.root == Root::resctrl && e == ENOSPC) what += " (no free CLOSID: every resctrl group id is in use)";
    return fail(what, p.string(), e);
  }
  note({k, "", "(mkdir)", true});
  return true;
}

Result<bool> KnobWriter::remove_dir(const KnobPath& k) {
  fs::path p = k.abs(roots_);
  std::error_code ec;
  if (!fs::is_directory(p, ec)) return false;
  const JournalEntry* entry = journal_ != nullptr ? journal_->find(k) : nullptr;
  const bool ours = entry != nullptr && entry->kind == EntryKind::created_dir;
  if (mode_ == Mode::observe) {
    note({k, "(dir)", "(rmdir)", false});
    return true;
  }
  if (!ours) return fail("not removed: keel did not create it", p.string());
  if (dirs_.remove(p) != 0) {
    int e = errno;
    if (e == ENOENT) return false;
    return fail("rmdir refused", p.string(), e);
  }
  // The directory and the knobs inside it are gone: nothing of them is left to restore.
  auto r = journal_->forget_where([&](const JournalEntry& x) {
    auto rel = x.path.rel.lexically_relative(k.rel);
    return x.path.root == k.root && !rel.empty() && *rel.begin() != "..";
  });
  if (!r) return std::unexpected(r.error());
  note({k, "(dir)", "(rmdir)", true});
  return true;
}

Result<std::function<Result<void>()>> KnobWriter::prepare_unit_property(const CgroupDir& unit_dir,
                                                                        UnitProperty p,
                                                                        std::string_view value) {
  const std::string& path = unit_dir.path();
  std::string unit = path.substr(path.rfind('/') + 1);
  if (!valid_unit_name(unit)) return fail("not a systemd unit's cgroup: " + unit_dir.path());
  auto k = cgroup_knob(roots_, unit_dir.hierarchy(), unit_dir.path(), to_string(p));
  if (!k) return std::unexpected(k.error());
  if (mode_ == Mode::observe) return std::function<Result<void>()>();
  if (!dirs_.unit_property) return fail("no systemd to ask for " + unit + " " + std::string(to_string(p)));
  if (auto r = journal_first(JournalEntry{EntryKind::unit_property, *k, "", ValueKind::text, 0}); !r)
    return std::unexpected(r.error());
  return std::function<Result<void>()>([ask = dirs_.unit_property, roots = roots_, unit = std::move(unit), p,
                                        v = std::string(value)] { return ask(roots, unit, p, v); });
}

Result<bool> KnobWriter::set_unit_property(const CgroupDir& unit_dir, UnitProperty p,
                                           std::string_view value) {
  auto ask = prepare_unit_property(unit_dir, p, value);
  if (!ask) return std::unexpected(ask.error());
  if (*ask)
    if (auto r = (*ask)(); !r) return std::unexpected(r.error());
  return true;
}

}  // namespace keel::act
