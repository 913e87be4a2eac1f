#include "actuators/journal.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "host/cgroup_files.h"
#include "host/fileio.h"

namespace keel::act {

namespace {
constexpr const char* kJournalFile = "journal";
}  // namespace

bool journal_exists(const std::filesystem::path& state_dir) {
  std::error_code ec;
  return std::filesystem::exists(state_dir / kJournalFile, ec);
}

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kMagic = "keel-journal ";
constexpr int kFormat = 2;

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
  }
  return "?";
}

bool parse_kind(std::string_view s, EntryKind& k) {
  for (EntryKind e : {EntryKind::file, EntryKind::created_dir, EntryKind::sched_feature})
    if (s == kind_name(e)) {
      k = e;
      return true;
    }
  return false;
}

// Percent-encoding of everything outside [A-Za-z0-9._/,:=;+-], so values and paths never contain
// the separators (space, newline).
std::string encode(std::string_view s) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 std::string_view("._/,:=;+-").find(static_cast<char>(c)) != std::string_view::npos;
    if (plain) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

bool decode(std::string_view s, std::string& out) {
  out.clear();
  auto val = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return false;  // "%" needs two hex digits
    int hi = val(s[i + 1]), lo = val(s[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return true;
}

Result<void> fsync_path(const fs::path& p, int flags) {
  int fd = ::open(p.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return fail_errno("open for fsync", p.string());
  int rc = ::fsync(fd);
  int e = errno;
  ::close(fd);
  if (rc != 0) return fail("fsync", p.string(), e);
  return {};
}

}  // namespace

std::string format_journal(const std::string& boot_id, const std::vector<JournalEntry>& entries) {
  std::string out(kMagic);
  out += std::to_string(kFormat) + " boot_id=" + encode(boot_id) + "\n";
  for (const auto& e : entries)
    out += std::string(kind_name(e.kind)) + " " + to_string(e.path.root) + " " +
           encode(e.path.rel.relative_path().string()) + " " + to_string(e.value) + " " +
           std::to_string(e.dir_inode) + " " + encode(e.original) + "\n";
  return out;
}

Result<std::pair<std::string, std::vector<JournalEntry>>> parse_journal(std::string_view text) {
  std::istringstream in{std::string(text)};
  std::string line;
  if (!std::getline(in, line) || !line.starts_with(kMagic))
    return fail("not a keel journal (first line is not \"" + std::string(kMagic) + "N ...\")");
  int format = std::atoi(line.c_str() + kMagic.size());
  if (format < 1 || format > kFormat)
    return fail("journal format " + std::to_string(format) + " is not one this keel reads (1.." +
                std::to_string(kFormat) + "): written by a newer keel?");
  std::string boot;
  if (auto at = line.find(" boot_id="); at != std::string::npos && !decode(line.substr(at + 9), boot))
    return fail("journal header: bad boot_id encoding");
  std::vector<JournalEntry> entries;
  int n = 1;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    std::istringstream f(line);
    std::string kind, root, rel, value_kind, inode, value;
    f >> kind >> root >> rel;
    if (format >= 2) f >> value_kind >> inode;
    if (!std::getline(f, value) || value.empty() || value[0] != ' ') value = " ";
    JournalEntry e;
    std::string rel_dec, val_dec;
    bool ok = parse_kind(kind, e.kind) && parse_root(root, e.path.root) && !rel.empty() &&
              decode(rel, rel_dec) && decode(value.substr(1), val_dec);
    if (ok && format >= 2) {
      auto vk = parse_value_kind(value_kind);
      auto ino = parse_integer(inode);
      ok = vk && ino && *ino >= 0;
      if (ok) e.value = *vk, e.dir_inode = static_cast<uint64_t>(*ino);
    }
    if (!ok) return fail("journal line " + std::to_string(n) + " is malformed: " + line);
    e.path.rel = fs::path(rel_dec).relative_path();
    if (e.path.rel.empty() || rel_dec.find("..") != std::string::npos)
      return fail("journal line " + std::to_string(n) + ": path must stay under its root: " + rel_dec);
    e.original = std::move(val_dec);
    if (format < 2) e.value = legacy_value_kind(e);
    entries.push_back(std::move(e));
  }
  return std::pair{std::move(boot), std::move(entries)};
}

std::string read_boot_id(const fs::path& proc_root) {
  auto v = read_line(proc_root / "sys/kernel/random/boot_id");
  return v ? std::string(trim(*v)) : std::string();
}

Result<Journal> Journal::open(const fs::path& state_dir, std::string boot_id) {
  std::error_code ec;
  fs::create_directories(state_dir, ec);
  if (ec) return fail("cannot create the state directory", state_dir.string(), ec.value());
  Journal j;
  j.dir_ = state_dir;
  j.file_ = state_dir / kJournalFile;
  fs::path lock = state_dir / "lock";
  j.lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (j.lock_fd_ < 0) return fail_errno("cannot open the state lock", lock.string());
  if (::flock(j.lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    std::string holder = read_file(lock).value_or("");
    return fail(e == EWOULDBLOCK
                    ? "another keel holds this state directory" +
                          (trim(holder).empty() ? std::string() : " (pid " + std::string(trim(holder)) + ")")
                    : "cannot lock the state directory",
                lock.string(), e == EWOULDBLOCK ? 0 : e);
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(j.lock_fd_, 0) == 0 && ::pwrite(j.lock_fd_, pid.data(), pid.size(), 0) < 0) {
    // The pid is only a hint for the error above.
  }
  if (fs::exists(j.file_)) {
    auto text = read_file(j.file_);
    if (!text) return std::unexpected(text.error());
    auto parsed = parse_journal(*text);
    if (!parsed) return fail(parsed.error().what, j.file_.string());
    j.boot_id_ = parsed->first;
    j.entries_ = std::move(parsed->second);
  } else {
    j.boot_id_ = boot_id;
  }
  j.current_boot_ = std::move(boot_id);
  return j;
}

Journal::Journal(Journal&& o) noexcept { *this = std::move(o); }

Journal& Journal::operator=(Journal&& o) noexcept {
  if (this != &o) {
    if (lock_fd_ >= 0) ::close(lock_fd_);
    dir_ = std::move(o.dir_);
    file_ = std::move(o.file_);
    boot_id_ = std::move(o.boot_id_);
    current_boot_ = std::move(o.current_boot_);
    entries_ = std::move(o.entries_);
    lock_fd_ = std::exchange(o.lock_fd_, -1);
  }
  return *this;
}

Journal::~Journal() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

bool Journal::has(const KnobPath& k, uint64_t dir_inode) const {
  for (const auto& e : entries_)
    if (e.path == k) return e.dir_inode == 0 || dir_inode == 0 || e.dir_inode == dir_inode;
  return false;
}

Result<void> Journal::record(JournalEntry e) {
  if (has(e.path, e.dir_inode)) return {};
  if (entries_.empty()) boot_id_ = current_boot_;  // after a restore (maybe of another boot's journal)
  auto old = entries_;
  // An entry of the cgroup that had this name before: that cgroup is gone, its knob with it.
  std::erase_if(entries_, [&](const JournalEntry& x) { return x.path == e.path; });
  entries_.push_back(std::move(e));
  if (auto r = save(); !r) {
    entries_ = std::move(old);
    return r;
  }
  return {};
}

Result<void> Journal::forget(const KnobPath& k, uint64_t dir_inode) {
  std::vector<JournalEntry> kept;
  for (const auto& e : entries_)
    if (!(e.path == k && (dir_inode == 0 || e.dir_inode == 0 || e.dir_inode == dir_inode))) kept.push_back(e);
  if (kept.size() == entries_.size()) return {};
  return replace(std::move(kept));
}

Result<void> Journal::replace(std::vector<JournalEntry> entries) {
  auto old = std::exchange(entries_, std::move(entries));
  if (entries_.empty()) boot_id_ = current_boot_;
  if (auto r = save(); !r) {
    entries_ = std::move(old);
    return r;
  }
  return {};
}

Result<void> Journal::save() {
  if (entries_.empty()) {
    std::error_code ec;
    fs::remove(file_, ec);
    if (ec) return fail("cannot remove the journal", file_.string(), ec.value());
    return fsync_path(dir_, O_RDONLY | O_DIRECTORY);
  }
  return write_durably(file_, format_journal(boot_id_, entries_), "the journal");
}

Result<void> write_durably(const fs::path& file, std::string_view text, const std::string& what) {
  fs::path tmp = file;
  tmp += ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return fail_errno("cannot write " + what, tmp.string());
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      return fail("cannot write " + what, tmp.string(), e);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    int e = errno;
    ::close(fd);
    return fail("cannot fsync " + what, tmp.string(), e);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), file.c_str()) != 0)
    return fail_errno("cannot rename " + what + " into place", file.string());
  return fsync_path(file.parent_path(), O_RDONLY | O_DIRECTORY);
}

}  // namespace keel::act
