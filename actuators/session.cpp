#include "actuators/session.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace keel::act {

namespace fs = std::filesystem;

namespace {

constexpr const char* kHandoverFile = "handover";
constexpr std::string_view kHandoverMagic = "keel-handover 1";
constexpr size_t kHandoverMax = 16 << 20;

// STATE_DIR/handover: "keel-handover 1 BOOT_ID\n" then the loop's state. None when absent, a symlink,
// not a regular file of ours, too large or malformed (then the journal is restored as a crash's).
std::optional<std::pair<std::string, std::string>> read_handover(const StateDir& dir) {
  auto read = dir.read(kHandoverFile, kHandoverMax);
  if (!read || !*read) return std::nullopt;
  const std::string& text = **read;
  const size_t nl = text.find('\n');
  if (nl == std::string::npos || !text.starts_with(std::string(kHandoverMagic) + " ")) return std::nullopt;
  std::string boot = text.substr(kHandoverMagic.size() + 1, nl - kHandoverMagic.size() - 1);
  if (boot.empty()) return std::nullopt;
  return std::make_pair(std::move(boot), text.substr(nl + 1));
}

}  // namespace

Result<Session> Session::start(const SysRoots& roots, const std::filesystem::path& state_dir, Mode mode,
                               DirOps dirs) {
  // The host-wide lock first: a second keel stops here, before it reads any journal.
  Fd host_lock(::open(roots.cgroup.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!host_lock.valid() && errno != ENOENT)
    return fail_errno("cannot open the cgroup root to lock it", roots.cgroup.string());
  if (host_lock.valid() && ::flock(host_lock.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK)
      return fail(
          "another keel runs on this host (it holds the lock on " + roots.cgroup.string() +
          "): one keel per host, whatever its state directory, or they would journal each other's values");
    return fail_errno("cannot lock", roots.cgroup.string());
  }
  Session s;
  s.host_lock_ = std::move(host_lock);
  s.roots_ = roots;
  s.dirs_ = dirs;
  s.state_dir_ = state_dir;
  if (mode == Mode::observe) {
    // Observe mode writes nothing, not even its state directory (which may be missing or read-only):
    // it only refuses to run over changes another keel left, which it would neither adopt nor undo.
    auto peek = peek_journal(state_dir);
    if (!peek) return std::unexpected(peek.error());
    std::error_code ec;
    const bool handed = fs::exists(fs::symlink_status(state_dir / kHandoverFile, ec));
    if (*peek && !(*peek)->entries.empty())
      return fail("a previous keel " + std::string(handed ? "handed over " : "left ") +
                      std::to_string((*peek)->entries.size()) + " changed knobs (journal " +
                      (state_dir / "journal").string() +
                      "); observe mode neither adopts nor writes: run `keel restore` first",
                  state_dir.string());
    s.writer_ = std::make_unique<KnobWriter>(roots, mode, nullptr, dirs);
    s.finished_ = false;
    return s;
  }
  auto j = Journal::open(state_dir, read_boot_id(roots.proc));
  if (!j) return std::unexpected(j.error());
  s.journal_ = std::make_unique<Journal>(std::move(*j));
  // A handover from a keel of this boot (its knobs are still as it set them): adopted, not restored.
  auto handed = read_handover(s.journal_->dir());
  const bool handover = handed && !s.journal_->entries().empty() &&
                        handed->first == read_boot_id(roots.proc) && s.journal_->boot_id() == handed->first;
  remove_handover(s.journal_->dir());  // read once: a crash after this is a crash
  if (handover) {
    s.adopted_ = std::move(handed->second);
    s.writer_ = std::make_unique<KnobWriter>(roots, mode, s.journal_.get(), dirs);
    s.finished_ = false;
    return s;
  }
  s.recovered_entries_ = s.journal_->entries().size();
  if (s.recovered_entries_ > 0) {
    // A keel that crashed (or was killed) left these: give them back before deciding anything.
    s.recovered_ = restore(roots, *s.journal_, dirs);
    if (!s.recovered_.failed.empty())
      return fail("a previous keel's changes could not all be restored (" +
                      s.recovered_.failed.front().message() + "); they stay journaled in " +
                      s.journal_->file().string() + ": fix the cause, then `keel restore`",
                  state_dir.string());
  }
  s.writer_ = std::make_unique<KnobWriter>(roots, mode, s.journal_.get(), dirs);
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
    state_dir_ = std::move(o.state_dir_);
    adopted_ = std::move(o.adopted_);
    host_lock_ = std::move(o.host_lock_);
    finished_ = std::exchange(o.finished_, true);
  }
  return *this;
}

Session::~Session() {
  if (!finished_ && journal_) finish();
}

Result<void> Session::hand_over(std::string_view state) {
  if (!journal_ || finished_) return {};
  if (writer_->mode() == Mode::observe) return {};
  const std::string text =
      std::string(kHandoverMagic) + " " + journal_->boot_id() + "\n" + std::string(state);
  if (auto r = journal_->dir().replace(kHandoverFile, text, "the handover"); !r) return r;
  finished_ = true;  // the knobs stay: the next keel adopts them, or `keel restore` gives them back
  return {};
}

void remove_handover(const StateDir& dir) { (void)dir.remove(kHandoverFile); }

RestoreReport Session::finish() {
  finished_ = true;
  if (!journal_ || journal_->entries().empty()) return {};
  return restore(roots_, *journal_, dirs_, &writer_->written());
}

}  // namespace keel::act
