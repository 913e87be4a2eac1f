// The one place keel writes kernel files. Every change goes: read the current value; if it already
// is what is wanted, nothing; else journal the original (durably, first change only), then write.
// In observe mode the same computation runs and nothing is written: the change log says what would
// have been. A refused write is reported with the path, the value and the kernel's reason
// (resctrl's info/last_cmd_status), and leaves the journal as it was.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actuators/journal.h"
#include "actuators/knob.h"
#include "host/cgroup_files.h"
#include "host/error.h"
#include "host/knob_values.h"
#include "host/sys_roots.h"
#include "host/systemd.h"

namespace keel::act {

// One change, made or (observe mode) only computed.
struct Change {
  KnobPath path;
  std::string from;  // trimmed current value ("" when the file did not exist yet)
  std::string to;
  bool written = false;
};

// A cgroup knob keel wrote that another manager (kubelet's CPU manager, `systemctl set-property`,
// `docker update`) changed since: keel gives it up. Its journal entry goes (the original is no longer
// what restore should write: the other manager owns the knob now), and keel does not write it for a
// lockout of kDriftLockoutTicks, doubled at each drift of the same knob (never a write-war).
struct Drift {
  KnobPath path;
  CgroupId cgroup;                 // the held cgroup it is in (none for a knob written by path)
  std::optional<CgroupFile> file;  // the cgroup file it is, for a knob of a held cgroup
  std::string wrote, now;
};
inline constexpr uint64_t kDriftLockoutTicks = 60;
inline constexpr uint64_t kDriftLockoutMaxTicks = 3600;

// A knob of a cgroup whose manager realises it again from its own stored settings (systemd, for the
// cgroups of its units: on daemon-reload, a unit's start, set-property, a sibling's change), found back
// at the value keel found there (the journal's original): not another manager taking it over, but the
// owner writing what it holds. keel writes its value again at once. More than kReapplyMax such
// re-applies of one knob in kReapplyWindowTicks is a fight after all: a drift.
struct Reapplied {
  KnobPath path;
  std::string wrote, found;  // keel's value, and the owner's it found there again
};
inline constexpr unsigned kReapplyMax = 30;
inline constexpr uint64_t kReapplyWindowTicks = 3600;

// Operations on the host beside file writes, real by default; tests over temporary trees pass ones that
// populate a new directory the way the kernel does (resctrl and cgroupfs create their files on mkdir)
// and a systemd of their own.
struct DirOps {
  std::function<int(const std::filesystem::path&)> make;    // 0 or -1 with errno
  std::function<int(const std::filesystem::path&)> remove;  // 0 or -1 with errno
  // A systemd unit's runtime property (host/systemd.h's set_unit_property); none: no systemd to ask.
  std::function<Result<void>(const SysRoots&, std::string_view unit, UnitProperty, std::string_view value)>
      unit_property = {};
  static DirOps real();
};

class KnobWriter {
 public:
  // `journal` may be null only in observe mode.
  KnobWriter(const SysRoots& roots, Mode mode, Journal* journal, DirOps dirs = DirOps::real());

  // Makes `k` read `value`, compared with what is there as `kind` (kernel files normalise: "0-3" is
  // "0,1,2,3"; a cgroup knob's is its file's in the cgroup file table, which the caller knows). Returns
  // true when it changed (observe: would change).
  Result<bool> set(const KnobPath& k, std::string_view value, ValueKind kind);
  // The same for the file `f` of the held cgroup `dir`: read, journaled (with the cgroup's inode) and
  // written through its directory, so a cgroup made again under the same name is never written for it.
  Result<bool> set(const CgroupDir& dir, CgroupFile f, std::string_view value);
  // Writes `value` to `k`, journaling `original` first unless `k` is already journaled. For knobs
  // whose restore is not "write the file's old content back" (sched features).
  Result<void> write_journaled(const KnobPath& k, std::string_view value, const JournalEntry& original);
  // Journals the current value of `f` of `dir` without writing (a knob the kernel will change as a
  // side effect of another write, e.g. an idle group's weight). Observe mode: nothing.
  Result<void> journal(const CgroupDir& dir, CgroupFile f);
  // One write of `value` (a pid to `tasks`), not journaled: membership is undone by removing the
  // group keel created. ESRCH (the task exited) is not an error: returns false.
  Result<bool> append(const KnobPath& k, std::string_view value);
  // Asks systemd to set `p` of the unit whose cgroup is `unit_dir` (its leaf is the unit's name) to
  // `value` at runtime, journaled first as not set (keel asks only for properties the unit has not
  // set: those that make systemd enable a controller it does not have). Observe mode: nothing asked,
  // true (would). An error names the unit, the property and systemd's reason; the journal keeps the
  // entry (restore asks for "not set", which is no change where nothing was set).
  Result<bool> set_unit_property(const CgroupDir& unit_dir, UnitProperty p, std::string_view value);
  // The same in two steps, for asking off the tick thread: journals it first (here, on the writer's
  // thread) and returns the question, which only talks to systemd and may be asked from another thread;
  // observe mode: nothing journaled, an empty function (would ask).
  Result<std::function<Result<void>()>> prepare_unit_property(const CgroupDir& unit_dir, UnitProperty p,
                                                              std::string_view value);
  // Creates a directory keel will own (journaled as created before mkdir). False when it existed.
  Result<bool> make_dir(const KnobPath& k);
  // Removes a directory keel created (a resctrl group given back; its tasks fall back to the
  // default group). False when it was already gone.
  Result<bool> remove_dir(const KnobPath& k);

  Mode mode() const { return mode_; }
  size_t journaled() const { return journal_ != nullptr ? journal_->entries().size() : 0; }
  Journal* journal() const { return journal_; }  // none in observe mode
  const SysRoots& roots() const { return roots_; }
  // The changes since the previous take_changes() (for per-tick logs); at most kMaxPendingChanges
  // (older ones are dropped, counted by dropped_changes(), when nobody takes them).
  const std::vector<Change>& changes() const { return changes_; }
  std::vector<Change> take_changes();
  size_t dropped_changes() const { return dropped_changes_; }
  static constexpr size_t kMaxPendingChanges = 4096;
  // Forgets what it holds of cgroups that are gone (their directory removed, or made again under the
  // name: another inode): the values it wrote or would have written, their lockouts, and (enforce)
  // their journal entries, whose knobs went with them. Lockouts long over go too. How many.
  Result<size_t> prune_gone();
  // Observe mode: the value this writer would have written to `k` last, if any (an observed run sees
  // its own earlier steps, as an enforcing one sees them in the files).
  const std::string* observed(const KnobPath& k) const;
  // The value journaled as the original of `f` of `dir` (this very cgroup), if any: what a keel that
  // handed over found there before it changed it.
  std::optional<std::string> original(const CgroupDir& dir, CgroupFile f) const;

  // Drift (enforce mode, cgroup knobs): a set() of a knob keel wrote finds first whether the value is
  // still the one keel wrote; if not, the knob is given up (Drift) and the set() writes nothing.
  // The current tick, which lockouts count in (the reconciler sets it each apply).
  void set_tick(uint64_t tick) { tick_ = tick; }
  std::vector<Drift> take_drifts() { return std::exchange(drifts_, {}); }
  // The value keel last wrote to each cgroup knob it still holds, by knob and its cgroup directory's
  // inode (0: written by path); restore leaves one that changed since.
  using Written = std::map<std::pair<KnobPath, uint64_t>, std::string>;
  const Written& written() const { return wrote_; }
  // Whether `k` is in a drift lockout now.
  bool locked_out(const KnobPath& k) const;
  // Which cgroups (by path from their hierarchy's root) a manager realises again from its own stored
  // settings (systemd's units, when systemd runs); none by default.
  void set_reapplied_by_owner(std::function<bool(std::string_view cgroup_path)> owner) {
    owner_reapplies_ = std::move(owner);
  }
  bool reapplied_by_owner(std::string_view cgroup_path) const {
    return owner_reapplies_ && owner_reapplies_(cgroup_path);
  }
  std::vector<Reapplied> take_reapplied() { return std::exchange(reapplied_, {}); }

 private:
  Result<void> raw_write(const KnobPath& k, std::string_view value, bool append);
  // Journals `original` unless `k` (of that cgroup) already is.
  Result<void> journal_first(const JournalEntry& original);
  SysRoots roots_;
  Mode mode_;
  Journal* journal_;
  DirOps dirs_;
  // In observe mode what is "there" is what the writer would have left: `current`, or the last value
  // it would have written to `k`.
  std::string& observe_current(const KnobPath& k, std::string& current);
  // Before a write of `k` (found at `current`): false when it must not be written now (a lockout, or a
  // drift found now).
  // `cgroup_path`: the cgroup's path from its hierarchy's root, "" for a knob written by path; `file`
  // the cgroup file `k` is, for a knob of a held cgroup.
  Result<bool> may_write(const KnobPath& k, CgroupId cgroup, ValueKind kind, const std::string& current,
                         std::string_view cgroup_path = {}, std::optional<CgroupFile> file = std::nullopt);
  void note(Change c);
  std::vector<Change> changes_;
  size_t dropped_changes_ = 0;
  std::map<KnobPath, std::string> observed_;
  Written wrote_;
  struct Lockout {
    uint64_t until = 0;
    unsigned strikes = 0;
  };
  std::map<KnobPath, Lockout> lockouts_;
  std::vector<Drift> drifts_;
  std::function<bool(std::string_view)> owner_reapplies_;
  struct Reapplies {
    uint64_t since = 0;  // the tick the window started
    unsigned count = 0;
  };
  std::map<KnobPath, Reapplies> reapplies_;
  std::vector<Reapplied> reapplied_;
  // Whether `current` (keel wrote `wrote`) is the owner realising its own value again (Reapplied).
  bool owner_wrote_back(const KnobPath& k, CgroupId cgroup, std::string_view cgroup_path, ValueKind kind,
                        const std::string& current, const std::string& wrote);
  uint64_t tick_ = 0;
};

// The bytes a write of `value` to `k` sends: an empty value as "\n" (the kernel ignores a 0-byte
// write), resctrl values newline-terminated (schemata requires it).
std::string kernel_bytes(const KnobPath& k, std::string_view value);

// The kernel's reason for the last failed resctrl write, or "" (info/last_cmd_status, "ok" = none).
std::string resctrl_status(const SysRoots& roots);

}  // namespace keel::act
