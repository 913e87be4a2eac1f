// The journal: the original value of every knob keel changed, stored durably before the first write
// (temp file, fsync, rename, fsync of the directory), so `keel restore` can give the host back after
// an exit or a crash. One journal per state directory, held under an exclusive flock.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "actuators/knob.h"
#include "host/error.h"
#include "host/knob_values.h"

namespace keel::act {

enum class EntryKind {
  file,           // restore: write `original` back
  created_dir,    // keel created it (a resctrl group): restore removes it
  sched_feature,  // `original` is FEATURE or NO_FEATURE, written to the features file
};

struct JournalEntry {
  EntryKind kind = EntryKind::file;
  KnobPath path;
  std::string original;
  ValueKind value = ValueKind::text;  // how restore compares it with what is there, and orders it
  // The inode of the cgroup directory the knob is in (0: not a cgroup knob, or not known): a cgroup
  // removed and made again under the same name is another one, whose knobs are not this entry's.
  uint64_t dir_inode = 0;
};

class Journal {
 public:
  // Opens STATE_DIR/journal (creating the directory), holding STATE_DIR/lock exclusively; fails with
  // a clear error when another keel holds it. `boot_id` stamps new journals.
  static Result<Journal> open(const std::filesystem::path& state_dir, std::string boot_id);
  Journal(Journal&& o) noexcept;
  Journal& operator=(Journal&& o) noexcept;
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;
  ~Journal();

  const std::vector<JournalEntry>& entries() const { return entries_; }
  const std::string& boot_id() const { return boot_id_; }  // of the boot that wrote the entries
  // Whether `k` is journaled (for a cgroup knob, of the cgroup with that directory inode).
  bool has(const KnobPath& k, uint64_t dir_inode = 0) const;
  // Adds an entry and makes it durable before returning; an entry already there is kept (the first
  // original wins), unless it is of another cgroup that had the same name: then the new one replaces it.
  Result<void> record(JournalEntry e);
  // Drops the entry of `k` (of the cgroup with that directory inode, 0: any), durably: a knob keel gave
  // up. Nothing to do when it is not journaled.
  Result<void> forget(const KnobPath& k, uint64_t dir_inode = 0);
  // Replaces the entries (after a restore: the ones that could not be restored), durably.
  Result<void> replace(std::vector<JournalEntry> entries);
  const std::filesystem::path& file() const { return file_; }

 private:
  Journal() = default;
  Result<void> save();
  std::filesystem::path dir_, file_;
  std::string boot_id_;       // the boot the entries were written in
  std::string current_boot_;  // this boot: an empty journal's next entries belong to it
  std::vector<JournalEntry> entries_;
  int lock_fd_ = -1;
};

// Replaces `file` with `text` durably: FILE.tmp (never through a symlink) written and fsynced, renamed
// over `file`, the directory fsynced. `what` names it in errors ("the journal").
Result<void> write_durably(const std::filesystem::path& file, std::string_view text, const std::string& what);

// Whether STATE_DIR holds a journal file (entries or not), without opening or locking it.
bool journal_exists(const std::filesystem::path& state_dir);

// This boot's id (/proc/sys/kernel/random/boot_id under roots.proc); empty when unreadable.
std::string read_boot_id(const std::filesystem::path& proc_root);

// The text form (exposed for tests): a header line, then one line per entry (its kind, root, path,
// value kind and directory inode) with the value percent-encoded so multi-line values (schemata) stay
// on one line. Journals of format 1 (no value kind or inode) are still read: the kind of a cgroup knob
// comes from the cgroup file table, of another knob from its file's name.
std::string format_journal(const std::string& boot_id, const std::vector<JournalEntry>& entries);
Result<std::pair<std::string, std::vector<JournalEntry>>> parse_journal(std::string_view text);

}  // namespace keel::act
