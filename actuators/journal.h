// The journal: the original value of every knob keel changed, durable before the first write, so
// `keel restore` can give the host back after an exit or a crash. One journal per state directory
// (state_dir.h: keel's alone), held under an exclusive flock. It is a log: a header, then one
// checksummed record per line, appended and fdatasynced (a new knob costs one append, not a rewrite);
// rewritten whole (temp file, fsync, rename) only when its dead records outgrow the live ones.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "actuators/knob.h"
#include "actuators/state_dir.h"
#include "host/error.h"
#include "host/knob_values.h"

namespace keel::act {

enum class EntryKind {
  file,           // restore: write `original` back
  created_dir,    // keel created it (a resctrl group, keel's root-tasks cgroup): restore removes it
  sched_feature,  // `original` is FEATURE or NO_FEATURE, written to the features file
  // A systemd unit's runtime property keel asked systemd for (host/systemd.h: so that systemd enables a
  // controller for the unit): the path is the unit's cgroup and the property's name ("system.slice/
  // x.service/CPUWeight"), `original` the value it had ("": not set); restore asks systemd for that.
  unit_property,
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

// Whether `e` is a knob keel itself writes: under its root, the file of one of keel's mechanisms (a
// cgroup file of the table, a resctrl group's schemata, an IRQ's affinity, a queue's RPS/XPS mask, the
// sched features file), with that file's value kind, a path of plain components (any cgroup name but
// "." and ".."), bounded. The journal records and loads nothing else, so a planted or corrupted line
// can never make restore write anywhere else.
Result<void> check_entry(const JournalEntry& e);

// The values keel wrote to a journaled knob: the last, and the one before (a write recorded but then
// refused or cut short by a crash leaves the knob at the one before).
struct KeelWrote {
  std::string last;
  std::optional<std::string> before;
};

class Journal {
 public:
  // Opens STATE_DIR/journal (creating the directory, 0700), holding STATE_DIR/lock exclusively; fails
  // with a clear error when another keel holds it, when the directory is not keel's alone, or when the
  // journal is not one this keel trusts (checksums, format, a knob it never writes). `boot_id` (this
  // boot's) stamps new journals.
  static Result<Journal> open(const std::filesystem::path& state_dir, std::string boot_id);
  Journal(Journal&& o) noexcept = default;
  Journal& operator=(Journal&& o) noexcept = default;
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;
  ~Journal() = default;

  const std::vector<JournalEntry>& entries() const { return entries_; }  // oldest first
  const std::string& boot_id() const { return boot_id_; }                // of the boot that wrote them
  // The entry of `k` (of the cgroup with that directory inode; 0 matches any), or null.
  const JournalEntry* find(const KnobPath& k, uint64_t dir_inode = 0) const;
  bool has(const KnobPath& k, uint64_t dir_inode = 0) const { return find(k, dir_inode) != nullptr; }
  // Adds an entry and makes it durable before returning; an entry already there is kept (the first
  // original wins), unless it is of another cgroup that had the same name: then the new one replaces it.
  Result<void> record(JournalEntry e);
  // Drops the entry of `k` (of the cgroup with that directory inode, 0: any), durably: a knob keel gave
  // up. Nothing to do when it is not journaled.
  Result<void> forget(const KnobPath& k, uint64_t dir_inode = 0);
  // Drops every entry `which` selects in one durable append; how many.
  Result<size_t> forget_where(const std::function<bool(const JournalEntry&)>& which);
  // Records, before keel writes `value` to the journaled knob `k`, that it does: appended, not synced
  // (a knob's value does not outlive a reboot, and another boot's journal is not applied; what a killed
  // keel appended stays in the page cache). Nothing for a knob not journaled. Restore gives back only a
  // knob still at its original or at one of these values: another manager's value since stays.
  Result<void> note_write(const KnobPath& k, uint64_t dir_inode, std::string_view value);
  const KeelWrote* wrote(const KnobPath& k) const;
  // The kernel changes `k` as a side effect of another write (an idle group's weight): keel's values
  // no longer say what is there, so restore gives the original back whatever it finds.
  Result<void> forget_written(const KnobPath& k, uint64_t dir_inode);
  // Damaged records a load skipped (line and why): the CRC-valid ones around them were kept.
  const std::vector<std::string>& salvaged() const { return salvaged_; }
  // Replaces the entries (after a restore: the ones that could not be restored), durably.
  Result<void> replace(std::vector<JournalEntry> entries);
  const std::filesystem::path& file() const { return file_; }
  const StateDir& dir() const { return *dir_; }
  // Records in the file (live and dead), for tests and the compaction rule.
  size_t records() const { return records_; }

 private:
  Journal() = default;
  // Appends `lines` (`n` records), or rewrites the file whole from entries_ (already the new state)
  // when it must be: none yet, an old format or a torn tail to drop, too many dead records, a failed
  // write before. On failure the file is as it was before the call (or marked for a rewrite).
  Result<void> persist(const std::string& lines, size_t n, bool sync = true);
  size_t live_records() const;
  Result<void> rewrite();
  void reindex();
  std::optional<StateDir> dir_;
  std::filesystem::path file_;
  Fd lock_fd_, fd_;           // fd_: the journal, open for appends (none while the file does not exist)
  std::string boot_id_;       // the boot the entries were written in
  std::string current_boot_;  // this boot: an empty journal's next entries belong to it
  std::vector<JournalEntry> entries_;
  std::map<KnobPath, size_t> index_;     // path -> position in entries_
  std::map<KnobPath, KeelWrote> wrote_;  // of entries only
  std::vector<std::string> salvaged_;
  size_t records_ = 0;  // records in the file
  size_t size_ = 0;     // bytes of the file known good
  bool must_rewrite_ = false;
};

// Whether STATE_DIR holds a journal file (entries or not), without opening or locking it.
bool journal_exists(const std::filesystem::path& state_dir);

// This boot's id (/proc/sys/kernel/random/boot_id under roots.proc); empty when unreadable.
std::string read_boot_id(const std::filesystem::path& proc_root);

// The text form (exposed for tests and the fuzz harness). Format 4: a header line "keel-journal 4
// boot=ID CRC", then records "+ KIND ROOT PATH VALUEKIND INODE =VALUE CRC" (an entry), "- ROOT PATH
// INODE CRC" (an entry dropped) and "w ROOT PATH INODE =VALUE CRC" (keel writes VALUE to the entry's
// knob; "w ROOT PATH INODE ?": no longer known), each with the CRC-32C of the line before it, paths and
// values percent-encoded. A record cut
// short at the end (a crash mid-append: never acknowledged, so never acted on) is dropped; a damaged
// record before good ones is skipped and named in `salvaged` (the good ones are kept). Format 3 (no
// "w" records) and formats 1 and 2 (one line per entry, rewritten whole) are still read.
std::string format_journal(const std::string& boot_id, const std::vector<JournalEntry>& entries,
                           const std::map<KnobPath, KeelWrote>& wrote = {});
struct ParsedJournal {
  std::string boot_id;
  std::vector<JournalEntry> entries;
  std::map<KnobPath, KeelWrote> wrote;  // of the entries
  std::vector<std::string> salvaged;    // damaged records skipped: "line N: why"
  int format = 0;
  size_t records = 0;  // records read (live and dead)
  size_t good = 0;     // bytes up to the last whole record (a torn tail after it is dropped)
};
Result<ParsedJournal> parse_journal(std::string_view text);
// The journal in STATE_DIR as it is, read only (no lock, nothing created: observe mode, which needs no
// writable state directory); nullopt when there is no directory or no journal.
Result<std::optional<ParsedJournal>> peek_journal(const std::filesystem::path& state_dir);
// One record of format 4 (for appends; `add` false: the entry dropped).
std::string journal_record(const JournalEntry& e, bool add);
// The record saying keel writes `value` to `e`'s knob (none: its value is no longer known).
std::string wrote_record(const JournalEntry& e, std::optional<std::string_view> value);

}  // namespace keel::act
