#include "actuators/journal.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>

#include "host/cgroup_files.h"
#include "host/fileio.h"
#include "host/systemd.h"

namespace keel::act {

namespace fs = std::filesystem;

namespace {

constexpr const char* kJournalFile = "journal";
constexpr const char* kLockFile = "lock";
constexpr std::string_view kMagic = "keel-journal";
constexpr int kFormat = 4;
constexpr size_t kMaxJournalBytes = size_t{256} << 20;  // ~2M entries: far past any host's knobs
constexpr size_t kMaxPath = 4096;                       // PATH_MAX
constexpr size_t kMaxValue = size_t{64} << 10;          // a schemata of hundreds of domains fits
// A rewrite drops dead records once they outnumber the live ones and this floor: a rewrite (O(live))
// comes after at least that many appends, so a change costs O(1) amortised, and the file holds at most
// about twice its live records.
constexpr size_t kDeadFloor = 64;

// Format 1 journals carry no value kind: a cgroup knob's comes from the table, an IRQ's or network
// queue's or resctrl group's from its file's name (what the actuators wrote there).
ValueKind legacy_value_kind(const JournalEntry& e) {
  if (e.kind == EntryKind::sched_feature) return ValueKind::sched_feature;
  const std::string name = e.path.rel.filename().string();
  if (e.path.root == Root::cgroup) {
    auto f = cgroup_file_named(name);
    return f ? cgroup_file_kind(*f) : ValueKind::text;
  }
  if (name.ends_with("_list")) return ValueKind::cpu_list;  // smp_affinity_list, resctrl cpus_list
  if (name == "rps_cpus" || name == "xps_cpus" || name == "smp_affinity" || name == "cpus")
    return ValueKind::cpu_mask;
  return ValueKind::text;
}

const char* kind_name(EntryKind k) {
  switch (k) {
    case EntryKind::file:
      return "file";
    case EntryKind::created_dir:
      return "created_dir";
    case EntryKind::sched_feature:
      return "sched_feature";
    case EntryKind::unit_property:
      return "unit_property";
  }
  return "?";
}

bool parse_kind(std::string_view s, EntryKind& k) {
  for (EntryKind e :
       {EntryKind::file, EntryKind::created_dir, EntryKind::sched_feature, EntryKind::unit_property})
    if (s == kind_name(e)) {
      k = e;
      return true;
    }
  return false;
}

// Percent-encoding of everything outside [A-Za-z0-9._/,:=;+-], so values and paths never contain
// the separators (space, newline).
std::string encode(std::string_view s) { return percent_encode(s, "._/,:=;+-"); }
bool decode(std::string_view s, std::string& out) { return percent_decode(s, out); }

std::optional<uint64_t> parse_u64(std::string_view s) {
  uint64_t v = 0;
  if (s.empty() || s.size() > 20) return std::nullopt;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string hex8(uint32_t v) {
  char b[9];
  std::snprintf(b, sizeof b, "%08x", v);
  return b;
}

std::vector<std::string_view> fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i <= line.size()) {
    size_t j = line.find(' ', i);
    if (j == std::string_view::npos) j = line.size();
    out.push_back(line.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

// `body CRC`: the body when the checksum is its CRC-32C.
std::optional<std::string_view> checked(std::string_view line) {
  size_t sp = line.rfind(' ');
  if (sp == std::string_view::npos || line.size() - sp - 1 != 8) return std::nullopt;
  std::string_view body = line.substr(0, sp), sum = line.substr(sp + 1);
  if (!std::all_of(sum.begin(), sum.end(),
                   [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }))
    return std::nullopt;
  if (hex8(crc32c(body)) != sum) return std::nullopt;
  return body;
}

std::string with_crc(std::string body) {
  const std::string sum = hex8(crc32c(body));
  body += ' ';
  body += sum;
  body += '\n';
  return body;
}

// A journal entry's problem, with its path.
std::unexpected<Error> bad_entry(const JournalEntry& e, const std::string& why) {
  return fail(why + ": " + e.path.str());
}

Result<void> entry_kind_is(const JournalEntry& e, ValueKind k) {
  return e.value == k ? Result<void>() : bad_entry(e, "not the value kind of this knob");
}

// A cgroup entry (its path's parts): the group keel creates, a systemd unit's property keel asks for,
// or a cgroup file keel writes, with that file's value kind.
Result<void> check_cgroup_entry(const JournalEntry& e, const std::vector<std::string>& parts) {
  const std::string& name = parts.back();
  const size_t n = parts.size();
  if (e.kind == EntryKind::created_dir) {
    if (name != kRootTasksGroup.substr(1)) return bad_entry(e, "not a cgroup keel creates");
    return {};
  }
  if (e.kind == EntryKind::unit_property) {
    // Only what keel asks systemd for, of a cgroup named as systemd names its units, and a value
    // such a property takes (a weight, a CPU list, or "" for not set).
    const bool value_ok = e.original.size() <= 4096 &&
                          std::all_of(e.original.begin(), e.original.end(),
                                      [](char c) { return (c >= '0' && c <= '9') || c == ',' || c == '-'; });
    if (n < 2 || !parse_unit_property(name) || !valid_unit_name(parts[n - 2]) || !value_ok)
      return bad_entry(e, "not a systemd unit's property keel sets");
    return entry_kind_is(e, ValueKind::text);
  }
  if (e.kind != EntryKind::file) return bad_entry(e, "not a cgroup knob");
  auto f = cgroup_file_named(name);
  static constexpr CgroupFile kWritten[] = {
      CgroupFile::weight,    CgroupFile::idle,       CgroupFile::cpu_max,
      CgroupFile::cfs_quota, CgroupFile::cfs_period, CgroupFile::cpus,
      CgroupFile::mems,      CgroupFile::qos_level,  CgroupFile::bvt_warp};
  if (!f || std::find(std::begin(kWritten), std::end(kWritten), *f) == std::end(kWritten))
    return bad_entry(e, "not a cgroup file keel writes");
  return entry_kind_is(e, cgroup_file_kind(*f));
}

}  // namespace

Result<void> check_entry(const JournalEntry& e) {
  const fs::path& rel = e.path.rel;
  const std::string s = rel.native();
  auto bad = [&](const std::string& why) { return bad_entry(e, why); };
  if (s.empty() || s.size() > kMaxPath || rel.is_absolute() || s.find('\0') != std::string::npos)
    return bad("not a path under its root");
  std::vector<std::string> parts;
  for (size_t i = 0; i <= s.size();) {
    size_t j = s.find('/', i);
    if (j == std::string::npos) j = s.size();
    std::string part = s.substr(i, j - i);
    if (part.empty() || part == "." || part == "..")
      return bad("path must stay under its root (plain names only)");
    parts.push_back(std::move(part));
    i = j + 1;
  }
  if (e.original.size() > kMaxValue) return bad("a value of " + std::to_string(e.original.size()) + " bytes");
  const std::string& name = parts.back();
  const size_t n = parts.size();
  auto kind_is = [&](ValueKind k) { return entry_kind_is(e, k); };
  switch (e.path.root) {
    case Root::cgroup:
      return check_cgroup_entry(e, parts);
    case Root::resctrl: {
      const bool keel_group = n >= 1 && parts[0].starts_with("keel-");
      if (e.kind == EntryKind::created_dir) {
        if (n != 1 || !keel_group) return bad("not a resctrl group keel creates (keel-*)");
        return {};
      }
      if (e.kind != EntryKind::file || name != "schemata" || !(n == 1 || (n == 2 && keel_group)))
        return bad("not a resctrl schemata keel writes (the default group's or a keel-* group's)");
      return kind_is(ValueKind::text);
    }
    case Root::proc:
      if (e.kind != EntryKind::file || n != 3 || parts[0] != "irq" || !all_digits(parts[1], 10))
        return bad("not an IRQ's affinity");
      if (name == "smp_affinity_list") return kind_is(ValueKind::cpu_list);
      if (name == "smp_affinity") return kind_is(ValueKind::cpu_mask);
      return bad("not an IRQ's affinity");
    case Root::sys: {
      const bool queue = n == 6 && parts[0] == "class" && parts[1] == "net" && parts[3] == "queues" &&
                         ((parts[4].starts_with("rx-") && name == "rps_cpus") ||
                          (parts[4].starts_with("tx-") && name == "xps_cpus")) &&
                         all_digits(std::string_view(parts[4]).substr(3), 10);
      if (e.kind != EntryKind::file || !queue) return bad("not a network queue's RPS/XPS mask");
      return kind_is(ValueKind::cpu_mask);
    }
    case Root::debugfs: {
      const bool features = s == "sched/features" || s == "sched_features";
      const bool token = !e.original.empty() && e.original.size() <= 64 &&
                         std::all_of(e.original.begin(), e.original.end(), [](char c) {
                           return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
                         });
      if (e.kind != EntryKind::sched_feature || !features || !token) return bad("not a sched feature");
      return kind_is(ValueKind::sched_feature);
    }
  }
  return bad("unknown root");
}

bool journal_exists(const std::filesystem::path& state_dir) {
  std::error_code ec;
  return std::filesystem::exists(std::filesystem::symlink_status(state_dir / kJournalFile, ec));
}

std::string journal_record(const JournalEntry& e, bool add) {
  std::string body;
  if (add)
    body = std::string("+ ") + kind_name(e.kind) + " " + to_string(e.path.root) + " " +
           encode(e.path.rel.relative_path().string()) + " " + to_string(e.value) + " " +
           std::to_string(e.dir_inode) + " =" + encode(e.original);
  else
    body = std::string("- ") + to_string(e.path.root) + " " + encode(e.path.rel.relative_path().string()) +
           " " + std::to_string(e.dir_inode);
  return with_crc(std::move(body));
}

std::string wrote_record(const JournalEntry& e, std::optional<std::string_view> value) {
  return with_crc(std::string("w ") + to_string(e.path.root) + " " +
                  encode(e.path.rel.relative_path().string()) + " " + std::to_string(e.dir_inode) +
                  (value ? " =" + encode(*value) : std::string(" ?")));
}

std::string format_journal(const std::string& boot_id, const std::vector<JournalEntry>& entries,
                           const std::map<KnobPath, KeelWrote>& wrote) {
  std::string out =
      with_crc(std::string(kMagic) + " " + std::to_string(kFormat) + " boot=" + encode(boot_id));
  for (const auto& e : entries) {
    out += journal_record(e, true);
    if (auto w = wrote.find(e.path); w != wrote.end()) {
      if (w->second.before) out += wrote_record(e, *w->second.before);
      out += wrote_record(e, w->second.last);
    }
  }
  return out;
}

namespace {

// Replays records into `entries` the way the Journal made them: an add of a path already there is
// kept out (the first original wins) unless it is of another cgroup directory; a drop removes it.
struct Replay {
  std::vector<JournalEntry> entries;
  std::map<KnobPath, size_t> at;
  std::map<KnobPath, KeelWrote> wrote;
  size_t dead = 0;
  void add(JournalEntry e) {
    auto it = at.find(e.path);
    if (it != at.end()) {
      JournalEntry& old = entries[it->second];
      if (old.dir_inode == 0 || e.dir_inode == 0 || old.dir_inode == e.dir_inode) return;
      drop(e.path, old.dir_inode);
    }
    at[e.path] = entries.size();
    entries.push_back(std::move(e));
  }
  void write(const KnobPath& k, uint64_t inode, std::string value) {
    auto it = at.find(k);
    if (it == at.end() ||
        (inode != 0 && entries[it->second].dir_inode != 0 && entries[it->second].dir_inode != inode))
      return;  // of an entry dropped since, or of another cgroup of that name
    auto [w, fresh] = wrote.try_emplace(k);
    w->second.before = fresh ? std::nullopt : std::optional<std::string>(std::move(w->second.last));
    w->second.last = std::move(value);
  }
  void drop(const KnobPath& k, uint64_t inode) {
    auto it = at.find(k);
    if (it == at.end()) return;
    JournalEntry& old = entries[it->second];
    if (inode != 0 && old.dir_inode != 0 && old.dir_inode != inode) return;
    old.path.rel.clear();  // a hole, squeezed out at the end
    at.erase(it);
    wrote.erase(k);
    ++dead;
  }
  std::vector<JournalEntry> take() {
    if (dead > 0) std::erase_if(entries, [](const JournalEntry& e) { return e.path.rel.empty(); });
    return std::move(entries);
  }
};

Result<ParsedJournal> parse_v3(std::string_view text, std::string_view header, size_t start) {
  ParsedJournal out;
  auto h = fields(header);
  out.format = h.size() > 1 && h[1] == "4" ? 4 : 3;
  if (h.size() != 3 || h[0] != kMagic || (h[1] != "3" && h[1] != "4") || !h[2].starts_with("boot=") ||
      !decode(h[2].substr(5), out.boot_id))
    return fail("journal header is malformed");
  if (out.boot_id.empty())
    return fail("journal header has no boot id: whether its values still apply after a reboot is unknown");
  Replay r;
  size_t pos = start;
  out.good = start;
  size_t line_no = 1;
  std::optional<std::pair<size_t, std::string>> damaged;  // first bad record: line, why
  while (pos < text.size()) {
    ++line_no;
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) {  // cut short: a crash mid-append
      if (!damaged) damaged = {line_no, "cut short"};
      break;
    }
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    auto body = checked(line);
    if (!body) {
      if (!damaged) damaged = {line_no, "checksum mismatch"};
      continue;
    }
    if (damaged) {  // good records after it: salvaged, the damaged one skipped and named
      out.salvaged.push_back("line " + std::to_string(damaged->first) + ": " + damaged->second);
      damaged.reset();
    }
    auto f = fields(*body);
    JournalEntry e;
    std::string rel;
    auto where = [&](const std::string& why) {
      return fail("journal line " + std::to_string(line_no) + ": " + why + ": " + std::string(line));
    };
    if (f[0] == "+" && f.size() == 7) {
      auto vk = parse_value_kind(f[4]);
      auto ino = parse_u64(f[5]);
      if (!parse_kind(f[1], e.kind) || !parse_root(f[2], e.path.root) || !decode(f[3], rel) || !vk || !ino ||
          !f[6].starts_with("=") || !decode(f[6].substr(1), e.original))
        return where("malformed record");
      e.path.rel = rel;
      e.value = *vk;
      e.dir_inode = *ino;
      if (auto ok = check_entry(e); !ok) return where(ok.error().what);
      r.add(std::move(e));
    } else if (f[0] == "w" && f.size() == 5 && out.format >= 4) {
      auto ino = parse_u64(f[3]);
      std::string value;
      const bool unknown = f[4] == "?";
      if (!parse_root(f[1], e.path.root) || !decode(f[2], rel) || !ino || rel.empty() ||
          (!unknown &&
           (!f[4].starts_with("=") || !decode(f[4].substr(1), value) || value.size() > kMaxValue)))
        return where("malformed record");
      e.path.rel = rel;
      if (unknown)
        r.wrote.erase(e.path);
      else
        r.write(e.path, *ino, std::move(value));
    } else if (f[0] == "-" && f.size() == 4) {
      auto ino = parse_u64(f[3]);
      if (!parse_root(f[1], e.path.root) || !decode(f[2], rel) || !ino || rel.empty())
        return where("malformed record");
      e.path.rel = rel;
      r.drop(e.path, *ino);
    } else {
      return where("malformed record");
    }
    ++out.records;
    out.good = pos;
  }
  if (!damaged) out.good = text.size();
  out.wrote = std::move(r.wrote);
  out.entries = r.take();
  return out;
}

// Formats 1 and 2: "keel-journal N boot_id=ID", then "KIND ROOT PATH [VALUEKIND INODE] VALUE" per line.
Result<ParsedJournal> parse_v1(std::string_view text, std::string_view header, int format) {
  ParsedJournal out;
  out.format = format;
  auto h = fields(header);
  if (h.size() != 3 || !h[2].starts_with("boot_id=") || !decode(h[2].substr(8), out.boot_id))
    return fail("journal header is malformed");
  if (out.boot_id.empty())
    return fail("journal header has no boot id: whether its values still apply after a reboot is unknown");
  if (!text.ends_with('\n')) return fail("journal is cut short (its last line has no end)");
  Replay r;
  size_t pos = header.size() + 1;
  size_t line_no = 1;
  while (pos < text.size()) {
    ++line_no;
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.empty()) continue;
    auto f = fields(line);
    JournalEntry e;
    std::string rel;
    const size_t want = format >= 2 ? 6 : 4;
    bool ok = f.size() == want && parse_kind(f[0], e.kind) && parse_root(f[1], e.path.root) &&
              decode(f[2], rel) && decode(f.back(), e.original);
    if (ok && format >= 2) {
      auto vk = parse_value_kind(f[3]);
      auto ino = parse_u64(f[4]);
      ok = vk && ino;
      if (ok) e.value = *vk, e.dir_inode = *ino;
    }
    if (!ok) return fail("journal line " + std::to_string(line_no) + " is malformed: " + std::string(line));
    e.path.rel = rel;
    if (format < 2) e.value = legacy_value_kind(e);
    if (auto c = check_entry(e); !c)
      return fail("journal line " + std::to_string(line_no) + ": " + c.error().what);
    r.add(std::move(e));
    ++out.records;
  }
  out.good = text.size();
  out.entries = r.take();
  return out;
}

}  // namespace

Result<ParsedJournal> parse_journal(std::string_view text) {
  const size_t nl = text.find('\n');
  if (nl == std::string_view::npos) return fail("not a keel journal (no header line)");
  std::string_view header = text.substr(0, nl);
  auto h = fields(header);
  if (h.size() < 2 || h[0] != kMagic)
    return fail("not a keel journal (first line is not \"" + std::string(kMagic) + " N ...\")");
  int format = 0;
  auto [p, ec] = std::from_chars(h[1].data(), h[1].data() + h[1].size(), format);
  if (ec != std::errc() || p != h[1].data() + h[1].size() || h[1].size() > 3)
    return fail("not a keel journal (format \"" + std::string(h[1]) + "\" is not a number)");
  if (format < 1 || format > kFormat)
    return fail("journal format " + std::to_string(format) + " is not one this keel reads (1.." +
                std::to_string(kFormat) + "): written by a newer keel?");
  if (format < 3) return parse_v1(text, header, format);
  auto body = checked(header);
  if (!body) return fail("journal header: checksum mismatch");
  return parse_v3(text, *body, nl + 1);
}

Result<std::optional<ParsedJournal>> peek_journal(const fs::path& state_dir) {
  auto dir = StateDir::open(state_dir, /*create=*/false);
  if (!dir) return std::unexpected(dir.error());
  if (!*dir) return std::optional<ParsedJournal>();
  auto text = (*dir)->read(kJournalFile, kMaxJournalBytes);
  if (!text) return std::unexpected(text.error());
  if (!*text) return std::optional<ParsedJournal>();
  auto parsed = parse_journal(**text);
  if (!parsed) return fail(parsed.error().what, (state_dir / kJournalFile).string());
  return std::optional<ParsedJournal>(std::move(*parsed));
}

std::string read_boot_id(const fs::path& proc_root) {
  auto v = read_line(proc_root / "sys/kernel/random/boot_id");
  return v ? std::string(trim(*v)) : std::string();
}

Result<Journal> Journal::open(const fs::path& state_dir, std::string boot_id) {
  auto dir = StateDir::open(state_dir, /*create=*/true);
  if (!dir) return std::unexpected(dir.error());
  Journal j;
  j.dir_ = std::move(**dir);
  j.file_ = state_dir / kJournalFile;
  auto lock = j.dir_->open_file(kLockFile, O_RDWR | O_CREAT, 0600);
  if (!lock)
    return fail("cannot open the state lock: " + lock.error().what, lock.error().path, lock.error().err);
  j.lock_fd_ = std::move(*lock);
  if (::flock(j.lock_fd_.get(), LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    std::string holder(4096, '\0');
    ssize_t n = ::pread(j.lock_fd_.get(), holder.data(), holder.size(), 0);
    holder.resize(n > 0 ? static_cast<size_t>(n) : 0);
    auto pid = parse_integer(holder);
    return fail(e == EWOULDBLOCK ? "another keel holds this state directory" +
                                       (pid ? " (pid " + std::to_string(*pid) + ")" : std::string())
                                 : "cannot lock the state directory",
                j.dir_->file(kLockFile), e == EWOULDBLOCK ? 0 : e);
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(j.lock_fd_.get(), 0) == 0 && ::pwrite(j.lock_fd_.get(), pid.data(), pid.size(), 0) < 0) {
    // The pid is only a hint for the error above.
  }
  auto text = j.dir_->read(kJournalFile, kMaxJournalBytes);
  if (!text) return std::unexpected(text.error());
  if (*text) {
    auto parsed = parse_journal(**text);
    if (!parsed) return fail(parsed.error().what, j.file_.string());
    j.boot_id_ = std::move(parsed->boot_id);
    j.entries_ = std::move(parsed->entries);
    j.wrote_ = std::move(parsed->wrote);
    j.salvaged_ = std::move(parsed->salvaged);
    j.records_ = parsed->records;
    j.size_ = parsed->good;
    // An older format, a torn tail to drop or damaged records skipped: the next change rewrites the
    // file whole first.
    j.must_rewrite_ = parsed->format != kFormat || parsed->good != (*text)->size() || !j.salvaged_.empty();
    auto fd = j.dir_->open_file(kJournalFile, O_WRONLY | O_APPEND);
    if (!fd) return std::unexpected(fd.error());
    j.fd_ = std::move(*fd);
  } else {
    j.boot_id_ = boot_id;
  }
  j.current_boot_ = std::move(boot_id);
  j.reindex();
  return j;
}

void Journal::reindex() {
  index_.clear();
  for (size_t i = 0; i < entries_.size(); ++i) index_[entries_[i].path] = i;
}

const JournalEntry* Journal::find(const KnobPath& k, uint64_t dir_inode) const {
  auto it = index_.find(k);
  if (it == index_.end()) return nullptr;
  const JournalEntry& e = entries_[it->second];
  return e.dir_inode == 0 || dir_inode == 0 || e.dir_inode == dir_inode ? &e : nullptr;
}

Result<void> Journal::record(JournalEntry e) {
  if (e.kind == EntryKind::sched_feature) e.value = ValueKind::sched_feature;  // the only kind it has
  if (e.kind == EntryKind::created_dir || e.kind == EntryKind::unit_property) e.value = ValueKind::text;
  if (auto ok = check_entry(e); !ok)
    return fail("refusing to journal (and so to change) " + ok.error().what, file_.string());
  auto it = index_.find(e.path);
  std::optional<JournalEntry> gone;  // of the cgroup that had this name before: that cgroup is gone
  if (it != index_.end()) {
    const JournalEntry& old = entries_[it->second];
    if (old.dir_inode == 0 || e.dir_inode == 0 || old.dir_inode == e.dir_inode) return {};
    gone = old;
  }
  const std::string old_boot = boot_id_;
  const bool old_must = must_rewrite_;
  if (entries_.empty() && boot_id_ != current_boot_) {
    // After a restore (maybe of another boot's journal), or a file of dropped records only: its header
    // names the old boot, so the new entry goes into a file rewritten under this one.
    boot_id_ = current_boot_;
    must_rewrite_ = true;
  }
  if (boot_id_.empty())
    return fail(
        "cannot journal: this boot's id is unknown (/proc/sys/kernel/random/boot_id), so a restore could "
        "not tell this boot's values from another's",
        file_.string());
  std::string lines = (gone ? journal_record(*gone, false) : std::string()) + journal_record(e, true);
  std::optional<KeelWrote> gone_wrote;
  if (auto w = wrote_.find(e.path); w != wrote_.end()) {
    gone_wrote = std::move(w->second);
    wrote_.erase(w);
  }
  if (gone) {
    entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(it->second));
    entries_.push_back(e);
    reindex();
  } else {
    index_[e.path] = entries_.size();
    entries_.push_back(e);
  }
  if (auto r = persist(lines, gone ? 2 : 1); !r) {
    if (gone) {
      entries_.pop_back();
      entries_.push_back(*gone);  // its place in the order matters only to created dirs, never replaced
      reindex();
    } else {
      entries_.pop_back();
      index_.erase(e.path);
    }
    boot_id_ = old_boot;
    must_rewrite_ = must_rewrite_ || old_must;
    if (gone_wrote) wrote_[e.path] = std::move(*gone_wrote);
    return r;
  }
  return {};
}

Result<void> Journal::forget_written(const KnobPath& k, uint64_t dir_inode) {
  const JournalEntry* e = find(k, dir_inode);
  auto w = wrote_.find(k);
  if (e == nullptr || w == wrote_.end()) return {};
  KeelWrote old = std::move(w->second);
  wrote_.erase(w);
  auto r = persist(wrote_record(*e, std::nullopt), 1, /*sync=*/false);
  if (!r && must_rewrite_) r = rewrite();
  if (!r) wrote_[k] = std::move(old);
  return r;
}

const KeelWrote* Journal::wrote(const KnobPath& k) const {
  auto w = wrote_.find(k);
  return w == wrote_.end() ? nullptr : &w->second;
}

size_t Journal::live_records() const {
  size_t n = entries_.size();
  for (const auto& [k, w] : wrote_) n += w.before ? 2 : 1;
  return n;
}

Result<void> Journal::note_write(const KnobPath& k, uint64_t dir_inode, std::string_view value) {
  const JournalEntry* e = find(k, dir_inode);
  if (e == nullptr || e->kind != EntryKind::file) return {};
  if (value.size() > kMaxValue) return fail("a value of " + std::to_string(value.size()) + " bytes", k.str());
  auto [w, fresh] = wrote_.try_emplace(k);
  if (!fresh && w->second.last == value) return {};
  const KeelWrote old = w->second;
  w->second.before = fresh ? std::nullopt : std::optional<std::string>(old.last);
  w->second.last = std::string(value);
  auto r = persist(wrote_record(*e, value), 1, /*sync=*/false);
  if (!r && must_rewrite_) r = rewrite();  // an append that failed: the file whole, once
  if (!r) {
    if (fresh)
      wrote_.erase(k);
    else
      wrote_[k] = old;
    return r;
  }
  return {};
}

Result<void> Journal::forget(const KnobPath& k, uint64_t dir_inode) {
  const JournalEntry* e = find(k, dir_inode);
  if (e == nullptr) return {};
  const JournalEntry* target = e;
  auto r = forget_where([&](const JournalEntry& x) { return &x == target; });
  if (!r) return std::unexpected(r.error());
  return {};
}

Result<size_t> Journal::forget_where(const std::function<bool(const JournalEntry&)>& which) {
  std::string lines;
  std::vector<JournalEntry> kept;
  size_t n = 0;
  for (const auto& e : entries_) {
    if (which(e)) {
      lines += journal_record(e, false);
      ++n;
    } else {
      kept.push_back(e);
    }
  }
  if (n == 0) return size_t{0};
  auto old = std::exchange(entries_, std::move(kept));
  auto old_wrote = wrote_;
  reindex();
  std::erase_if(wrote_, [&](const auto& w) { return !index_.contains(w.first); });
  if (auto r = persist(lines, n); !r) {
    entries_ = std::move(old);
    wrote_ = std::move(old_wrote);
    reindex();
    return std::unexpected(r.error());
  }
  return n;
}

Result<void> Journal::replace(std::vector<JournalEntry> entries) {
  for (const auto& e : entries)
    if (auto ok = check_entry(e); !ok) return fail("refusing to journal " + ok.error().what, file_.string());
  auto old = std::exchange(entries_, std::move(entries));
  auto old_wrote = wrote_;
  const std::string old_boot = boot_id_;
  if (entries_.empty()) boot_id_ = current_boot_;
  reindex();
  std::erase_if(wrote_, [&](const auto& w) { return !index_.contains(w.first); });
  must_rewrite_ = true;
  if (auto r = rewrite(); !r) {
    entries_ = std::move(old);
    wrote_ = std::move(old_wrote);
    boot_id_ = old_boot;
    reindex();
    return r;
  }
  return {};
}

Result<void> Journal::persist(const std::string& lines, size_t n, bool sync) {
  const size_t live = live_records();
  const size_t dead = records_ + n > live ? records_ + n - live : 0;
  if (must_rewrite_ || !fd_.valid() || entries_.empty() || dead > std::max(entries_.size(), kDeadFloor))
    return rewrite();
  size_t done = 0;
  int err = 0;
  while (done < lines.size()) {
    ssize_t w = ::write(fd_.get(), lines.data() + done, lines.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      err = errno;
      break;
    }
    done += static_cast<size_t>(w);
  }
  if (err == 0 && sync && ::fdatasync(fd_.get()) != 0) err = errno;
  if (err != 0) {
    // Cut back to the last good record (a reader drops a torn tail anyway); after a failed fdatasync
    // the page cache may no longer be what is on disk, so the next change rewrites the file whole.
    if (::ftruncate(fd_.get(), static_cast<off_t>(size_)) != 0 || err == EIO) must_rewrite_ = true;
    return fail("cannot append to the journal (nothing was changed)", file_.string(), err);
  }
  size_ += lines.size();
  records_ += n;
  return {};
}

Result<void> Journal::rewrite() {
  if (entries_.empty()) {
    fd_.reset();
    if (auto r = dir_->remove(kJournalFile); !r) {
      must_rewrite_ = true;
      return r;
    }
  } else {
    const std::string text = format_journal(boot_id_, entries_, wrote_);
    if (auto r = dir_->replace(kJournalFile, text, "the journal"); !r) {
      must_rewrite_ = true;
      return r;
    }
    auto fd = dir_->open_file(kJournalFile, O_WRONLY | O_APPEND);
    if (!fd) {
      must_rewrite_ = true;
      return std::unexpected(fd.error());
    }
    fd_ = std::move(*fd);
    size_ = text.size();
  }
  records_ = live_records();
  if (entries_.empty()) size_ = 0;
  must_rewrite_ = false;
  return {};
}

}  // namespace keel::act
