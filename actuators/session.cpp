#include "actuators/session.h"

namespace keel::act {

Result<Session> Session::start(const SysRoots& roots, const std::filesystem::path& state_dir, Mode mode,
                               DirOps dirs) {
  auto j = Journal::open(state_dir, read_boot_id(roots.proc));
  if (!j) return std::unexpected(j.error());
  Session s;
  s.roots_ = roots;
  s.dirs_ = dirs;
  s.journal_ = std::make_unique<Journal>(std::move(*j));
  s.recovered_entries_ = s.journal_->entries().size();
  if (s.recovered_entries_ > 0 && mode == Mode::observe)
    // Observe mode never writes, not even to undo another keel's changes.
    return fail("a previous keel left " + std::to_string(s.recovered_entries_) + " changed knobs (journal " +
                    s.journal_->file().string() + "); observe mode does not write: run `keel restore` first",
                state_dir.string());
  if (s.recovered_entries_ > 0) {
    // A keel that crashed (or was killed) left these: give them back before deciding anything.
    s.recovered_ = restore(roots, *s.journal_, dirs);
    if (!s.recovered_.failed.empty())
      return fail("a previous keel's changes could not all be restored (" +
                      s.recovered_.failed.front().message() + "); they stay journaled in " +
                      s.journal_->file().string() + ": fix the cause, then `keel restore`",
                  state_dir.string());
  }
  s.writer_ =
      std::make_unique<KnobWriter>(roots, mode, mode == Mode::enforce ? s.journal_.get() : nullptr, dirs);
  s.finished_ = false;
  return s;
}

Session::Session(Session&& o) noexcept { *this = std::move(o); }

Session& Session::operator=(Session&& o) noexcept {
  if (this != &o) {
    if (!finished_ && journal_) finish();
    roots_ = std::move(o.roots_);
    dirs_ = std::move(o.dirs_);
    journal_ = std::move(o.journal_);
    writer_ = std::move(o.writer_);
    recovered_ = std::move(o.recovered_);
    recovered_entries_ = o.recovered_entries_;
    finished_ = std::exchange(o.finished_, true);
  }
  return *this;
}

Session::~Session() {
  if (!finished_ && journal_) finish();
}

RestoreReport Session::finish() {
  finished_ = true;
  if (!journal_ || journal_->entries().empty()) return {};
  return restore(roots_, *journal_, dirs_);
}

}  // namespace keel::act
