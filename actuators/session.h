// What `keel run` holds while it acts: the state directory's journal (exclusively), a writer in the
// configured mode, and the promise to give everything back. Starting a session first restores a
// journal a crashed keel left behind; finish() (or the destructor) restores what this one changed.
// Or a session hands over (daemon.rollback = "not_on_exit"): its knobs stay as set, the journal stays,
// and STATE_DIR/handover records the loop's state (opaque text here); the next session of the same
// boot adopts them (nothing restored; adopted() returns that text) and carries the journal on.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "actuators/journal.h"
#include "actuators/restore.h"
#include "actuators/writer.h"
#include "host/fd.h"

namespace keel::act {

class Session {
 public:
  // Observe mode never journals or writes, not even its state directory (it may be missing or
  // read-only); it refuses to start over a journal another keel left. One keel per host, whatever its state
  // directory: the session also holds an exclusive flock on the host's cgroup mount root (roots.cgroup), the
  // one directory every keel of the host sees (a container's with the host's tree mounted too); two keels
  // with different state directories would journal each other's values.
  static Result<Session> start(const SysRoots& roots, const std::filesystem::path& state_dir, Mode mode,
                               DirOps dirs = DirOps::real());
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  ~Session();

  KnobWriter& writer() { return *writer_; }
  // What start() found and restored from a previous run that did not finish (empty when clean).
  const RestoreReport& recovered() const { return recovered_; }
  size_t recovered_entries() const { return recovered_entries_; }
  // Restores every knob this session changed; the session stays usable (a later change journals again).
  RestoreReport finish();
  // Leaves every knob as it is and the journal in place, writes `state` to STATE_DIR/handover (durably)
  // for the next session; this one restores nothing after. Observe mode: nothing to hand over.
  Result<void> hand_over(std::string_view state);
  // The state a handed-over session left, when start() adopted its journal instead of restoring it.
  const std::optional<std::string>& adopted() const { return adopted_; }

 private:
  Session() = default;
  SysRoots roots_;
  DirOps dirs_;
  std::unique_ptr<Journal> journal_;
  std::unique_ptr<KnobWriter> writer_;
  RestoreReport recovered_;
  size_t recovered_entries_ = 0;
  std::filesystem::path state_dir_;
  std::optional<std::string> adopted_;
  Fd host_lock_;
  bool finished_ = true;
};

// Removes STATE_DIR/handover (keel restore, before giving the journal's knobs back: nothing to adopt).
void remove_handover(const StateDir& dir);

}  // namespace keel::act
