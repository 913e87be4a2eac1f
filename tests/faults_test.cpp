// Faults under keel's feet, each against the real thing where this machine has it: a full file system
// under the journal (a small tmpfs), EIO on a journal write (the state directory on a FUSE file system,
// tests/support/faultfs.py, whose write fails: this machine has no device-mapper or fault injection to
// make a disk fail), a cgroup write the kernel refuses in the middle of a plan (a weight written to a
// group another manager made idle: EINVAL), a read-only state directory (a tmpfs remounted read-only),
// and `keel restore` SIGKILLed half way. In every case
// nothing is lost: the error names the path and the reason, the host is never left with a change that
// is not journaled, and a later `keel restore` finishes the job. The privileged cases skip with the
// reason when not root.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "actuators/cgroup_knobs.h"
#include "actuators/journal.h"
#include "actuators/session.h"
#include "actuators/writer.h"
#include "host/cgroup.h"
#include "host/fileio.h"
#include "tests/support/scene.h"
#include "tests/support/tmp_tree.h"

namespace keel {
namespace {

namespace fs = std::filesystem;
using act::EntryKind;
using act::Journal;
using act::JournalEntry;
using act::KnobPath;
using act::KnobWriter;
using act::Root;
using testing::run_command;
using testing::slurp;

std::string restore_cmd(const fs::path& state, const std::string& root = "") {
  return testing::keel_binary().string() + " restore --state " + state.string() +
         (root.empty() ? "" : " --root " + root) + " 2>&1";
}

// A tmpfs of its own (`size`), mounted at `dir` with mode 0700; unmounted when it goes.
class Tmpfs {
 public:
  Tmpfs(const fs::path& dir, const std::string& size) : dir_(dir) {
    fs::create_directories(dir);
    const std::string opts = "size=" + size + ",mode=0700";
    ok_ = ::mount("tmpfs", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, opts.c_str()) == 0;
    if (!ok_) why_ = std::string("mount tmpfs: ") + std::strerror(errno);
  }
  ~Tmpfs() {
    if (ok_) (void)::umount2(dir_.c_str(), MNT_DETACH);
  }
  bool ok() const { return ok_; }
  const std::string& why() const { return why_; }
  bool remount_read_only() {
    return ::mount(nullptr, dir_.c_str(), nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) ==
           0;
  }

 private:
  fs::path dir_;
  bool ok_ = false;
  std::string why_;
};

// tests/support/faultfs.py serving `backing` at `mnt` (made if missing), unmounted when it goes. why()
// says what this machine lacks for it (skip); mounted() whether it came up.
class FaultFs {
 public:
  FaultFs(const fs::path& backing, const fs::path& mnt) : mnt_(mnt) {
    auto [rc, out] =
        run_command("/usr/bin/python3 -c 'import fusepy' 2>&1 || /usr/bin/python3 -c 'import fuse' 2>&1");
    if (rc != 0 || !fs::exists("/dev/fuse")) {
      why_ = "needs /dev/fuse and Debian's python3-fusepy (scripts/deps.sh test): " + out;
      return;
    }
    fs::create_directories(backing);
    fs::create_directories(mnt);
    const std::string script = (testing::source_dir() / "tests/support/faultfs.py").string();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::execl("/usr/bin/python3", "python3", script.c_str(), backing.c_str(), mnt.c_str(), nullptr);
      ::_exit(127);
    }
    for (int i = 0; i < 200 && !mounted(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ~FaultFs() {
    if (pid_ <= 0) return;
    (void)::umount2(mnt_.c_str(), MNT_DETACH);
    int st;
    ::waitpid(pid_, &st, 0);
  }
  const std::string& why() const { return why_; }
  bool mounted() const { return pid_ > 0 && run_command("mountpoint -q " + mnt_.string()).first == 0; }

 private:
  fs::path mnt_;
  pid_t pid_ = -1;
  std::string why_;
};

// Real cgroups, removed after: v1 cpu and cpuset directories, or (cgroup v2 under systemd) children of a
// Delegate=yes scope of the test's own (tests/support/scene.h). Weights are written in the layout's
// file (cpu.shares, default 1024; cpu.weight, default 100) and scale: weight(2048) is 2048 or 200.
class RealCgroups : public ::testing::Test {
 protected:
  void SetUp() override {
    KEEL_REQUIRE_ROOT();
    std::string why;
    if (!testing::host_layout(&why)) GTEST_SKIP() << "skipped: " << why;
    if (::sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "skipped: needs 2 CPUs";
    tree_ = std::make_unique<testing::DelegatedTree>("keel-faults-" + std::to_string(::getpid()));
    ASSERT_EQ(tree_->error(), "");
    auto layout = discover(SysRoots::host());
    ASSERT_TRUE(layout) << layout.error().message();
    cpu_h_ = tree_->v2() ? *layout->unified() : *layout->v1_with("cpu");
    name_ = tree_->path();
    for (const char* c : {"a", "b", "c"}) ASSERT_TRUE(tree_->make(c)) << c << ": " << std::strerror(errno);
  }
  void TearDown() override {
    const fs::path base = tree_ ? tree_->dir("cpu") : fs::path();
    tree_.reset();
    if (!base.empty()) {
      EXPECT_FALSE(fs::exists(base)) << "left behind: " << base;
    }
  }
  fs::path cpu(const std::string& c, const char* file) const { return tree_->dir("cpu") / c / file; }
  const char* weight_file() const { return tree_->v2() ? "cpu.weight" : "cpu.shares"; }
  // A v1 shares value in this layout's weight ("2048" -> "200" on v2), as systemd maps them.
  std::string weight(unsigned shares) const {
    return std::to_string(tree_->v2() ? shares * 100 / 1024 : shares);
  }
  KnobPath shares_knob(const std::string& c) const {
    return {Root::cgroup, cpu(c, weight_file()).lexically_relative(SysRoots::host().cgroup)};
  }
  std::string shares(const std::string& c) const { return std::string(trim(slurp(cpu(c, weight_file())))); }
  std::unique_ptr<testing::DelegatedTree> tree_;
  CgroupHierarchy cpu_h_;
  std::string name_;
  testing::TempDir t_;
};

using Faults = RealCgroups;

// ENOSPC: the journal's file system fills up. The change whose original cannot be journaled is not
// made; the error names the journal and the reason; what was journaled before stays, and `keel
// restore` (once there is room, and even before: restore only shrinks the journal) gives it back.
TEST_F(Faults, AFullJournalFileSystemRefusesTheChangeAndKeelRestoreFinishesTheJob) {
  Tmpfs fsys(t_.path() / "state", "256k");
  if (!fsys.ok()) GTEST_SKIP() << "skipped: " << fsys.why();
  {
    auto j = Journal::open(t_.path() / "state", act::read_boot_id(SysRoots::host().proc));
    ASSERT_TRUE(j) << j.error().message();
    KnobWriter w(SysRoots::host(), act::Mode::enforce, &*j);
    ASSERT_TRUE(w.set(shares_knob("a"), weight(2048), ValueKind::weight));
    // Fill the file system to the last byte, then the journal's last page with records of cgroups that
    // are not there (restore counts them gone), until an append needs a page there is no room for.
    {
      int fd = ::open((t_.path() / "state/filler").c_str(), O_WRONLY | O_CREAT, 0600);
      ASSERT_GE(fd, 0);
      const std::string block(4096, 'x');
      while (::write(fd, block.data(), block.size()) > 0) {
      }
      while (::write(fd, block.data(), 1) > 0) {
      }
      ::close(fd);
    }
    size_t pads = 0;
    for (; pads < 200; ++pads) {
      JournalEntry pad{EntryKind::file, shares_knob("pad-" + std::to_string(pads)), weight(1024),
                       ValueKind::weight, 1};
      if (!j->record(pad)) break;
    }
    ASSERT_LT(pads, 200u) << "the file system never filled";
    const size_t before = j->entries().size();
    auto r = w.set(shares_knob("b"), weight(512), ValueKind::weight);
    ASSERT_FALSE(r) << "a change whose original could not be journaled was made";
    const std::string m = r.error().message();
    EXPECT_NE(m.find((t_.path() / "state/journal").string()), std::string::npos) << m;
    EXPECT_NE(m.find("No space left on device"), std::string::npos) << m;
    EXPECT_EQ(shares("b"), weight(1024)) << "not written";
    EXPECT_EQ(shares("a"), weight(2048));
    EXPECT_EQ(j->entries().size(), before);
  }
  // The journal on disk still holds a's original and nothing torn that would be acted on.
  auto parsed = act::parse_journal(slurp(t_.path() / "state/journal"));
  ASSERT_TRUE(parsed) << parsed.error().message();
  ASSERT_GE(parsed->entries.size(), 1u);
  EXPECT_EQ(parsed->entries[0].path, shares_knob("a"));
  EXPECT_EQ(parsed->entries[0].original, weight(1024));
  auto [rc, out] = run_command(restore_cmd(t_.path() / "state"));
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(shares("a"), weight(1024)) << out;
  EXPECT_FALSE(fs::exists(t_.path() / "state/journal")) << out;
}

// EIO: a journal append fails (the state directory on faultfs, whose writes of "journal" fail). The
// change is not made, the error says so with the path and the reason; the journal is rewritten whole at
// the next change (after a failed write the page cache is unknown), which then goes through (the fault
// was on the old file's writes, the rewrite writes journal.tmp); `keel restore` gives back every change.
TEST_F(Faults, EioOnAJournalAppendRefusesTheChangeAndTheJournalRecovers) {
  const fs::path backing = t_.path() / "backing", mnt = t_.path() / "fuse";
  fs::create_directories(backing);
  fs::permissions(backing, fs::perms::owner_all);
  FaultFs fuse(backing, mnt);
  if (!fuse.why().empty()) GTEST_SKIP() << "skipped: " << fuse.why();
  ASSERT_TRUE(fuse.mounted()) << "faultfs did not mount";
  const fs::path state = mnt / "state";
  {
    auto j = Journal::open(state, act::read_boot_id(SysRoots::host().proc));
    ASSERT_TRUE(j) << j.error().message();
    KnobWriter w(SysRoots::host(), act::Mode::enforce, &*j);
    ASSERT_TRUE(w.set(shares_knob("a"), weight(2048), ValueKind::weight));
    std::ofstream(backing / ".faults") << "journal " << EIO << "\n";
    auto r = w.set(shares_knob("b"), weight(512), ValueKind::weight);
    ASSERT_FALSE(r);
    const std::string m = r.error().message();
    EXPECT_NE(m.find((state / "journal").string()), std::string::npos) << m;
    EXPECT_NE(m.find("Input/output error"), std::string::npos) << m;
    EXPECT_TRUE(fs::exists(backing / ".faults.hits")) << "the fault was not hit";
    EXPECT_EQ(shares("b"), weight(1024)) << "not journaled, so not written";
    // The next change rewrites the journal (journal.tmp, renamed over it), which goes through.
    ASSERT_TRUE(w.set(shares_knob("c"), weight(256), ValueKind::weight)) << "the journal did not recover";
    EXPECT_EQ(j->entries().size(), 2u);
    fs::remove(backing / ".faults");
  }
  auto parsed = act::parse_journal(slurp(state / "journal"));
  ASSERT_TRUE(parsed) << parsed.error().message();
  EXPECT_EQ(parsed->entries.size(), 2u);
  auto [rc, out] = run_command(restore_cmd(state));
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(shares("a"), weight(1024));
  EXPECT_EQ(shares("b"), weight(1024));
  EXPECT_EQ(shares("c"), weight(1024));
}

// A cgroup write the kernel refuses in the middle of a plan. On v1: a 50% CPU quota for three siblings,
// where another manager gave the second one a child with a larger quota meanwhile (v1 refuses a quota
// below a child's: EINVAL). On v2 (no such rule there): a weight for three siblings, where another
// manager put the second in the idle class meanwhile (v2 refuses cpu.weight while cpu.idle is 1:
// EINVAL). The error names the file, the value and the kernel's reason; the first and third are written
// and journaled; `keel restore` gives them back and leaves the other manager's value.
TEST_F(Faults, AKernelWriteRefusedInTheMiddleOfAPlanIsNamedAndRestoreFinishesTheJob) {
  const fs::path state = t_.path() / "state";
  const bool v2 = tree_->v2();
  const fs::path child = cpu("b", "").parent_path() / "bb";
  if (!v2) {
    ASSERT_TRUE(fs::create_directory(child));
  }
  struct Undo {
    fs::path child, idle;
    ~Undo() {
      if (!child.empty()) {
        (void)write_file(child / "cpu.cfs_quota_us", "-1");
        fs::remove(child);
      }
      if (!idle.empty()) (void)write_file(idle, "0");
    }
  } undo{v2 ? fs::path() : child, v2 ? cpu("b", "cpu.idle") : fs::path()};
  // Behind keel's back.
  if (v2) {
    ASSERT_TRUE(write_file(cpu("b", "cpu.idle"), "1"));
  } else {
    ASSERT_TRUE(write_file(child / "cpu.cfs_quota_us", "90000"));
  }
  const char* file = v2 ? "cpu.weight" : "cpu.cfs_quota_us";
  const std::string unset = v2 ? "100" : "-1", value = v2 ? "50" : "50000";
  auto knob = [&](const char* c) { return std::string(trim(slurp(cpu(c, file)))); };
  const std::string b_before = knob("b");
  {
    auto j = Journal::open(state, act::read_boot_id(SysRoots::host().proc));
    ASSERT_TRUE(j) << j.error().message();
    KnobWriter w(SysRoots::host(), act::Mode::enforce, &*j);
    std::vector<std::string> errors;
    for (const char* c : {"a", "b", "c"}) {
      auto r = v2 ? act::set_cpu_weight(w, cpu_h_, name_ + "/" + c, 512)
                  : act::set_cpu_quota(w, cpu_h_, name_ + "/" + c, std::chrono::microseconds(50000));
      if (!r) errors.push_back(r.error().message());
    }
    ASSERT_EQ(errors.size(), 1u);
    const std::string& m = errors[0];
    EXPECT_NE(m.find(cpu("b", file).string()), std::string::npos) << m;
    EXPECT_NE(m.find("'" + value + "'"), std::string::npos) << m;
    EXPECT_NE(m.find("Invalid argument"), std::string::npos) << m;
    EXPECT_EQ(knob("a"), value);
    EXPECT_EQ(knob("b"), b_before);
    EXPECT_EQ(knob("c"), value);
    const KnobPath a{Root::cgroup, cpu("a", file).lexically_relative(SysRoots::host().cgroup)};
    const KnobPath c{Root::cgroup, cpu("c", file).lexically_relative(SysRoots::host().cgroup)};
    EXPECT_TRUE(j->has(a));
    EXPECT_TRUE(j->has(c));
  }
  auto [rc, out] = run_command(restore_cmd(state));
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(knob("a"), unset) << out;
  EXPECT_EQ(knob("b"), b_before) << out;
  EXPECT_EQ(knob("c"), unset) << out;
  if (v2) {
    EXPECT_EQ(trim(slurp(cpu("b", "cpu.idle"))), "1") << "the other manager's value stays";
  } else {
    EXPECT_EQ(trim(slurp(child / "cpu.cfs_quota_us")), "90000") << "the other manager's value stays";
  }
}

// A read-only state directory: enforce refuses to start, naming the directory's file and the reason
// (it could not journal anything); observe runs (it writes nothing, not even its state).
TEST_F(Faults, AReadOnlyStateDirectoryStopsEnforceWithTheReasonAndObserveRuns) {
  Tmpfs fsys(t_.path() / "ro", "1m");
  if (!fsys.ok()) GTEST_SKIP() << "skipped: " << fsys.why();
  ASSERT_EQ(::mkdir((t_.path() / "ro/state").c_str(), 0700), 0);
  ASSERT_TRUE(fsys.remount_read_only());
  const fs::path state = t_.path() / "ro/state";
  auto j = Journal::open(state, "b");
  ASSERT_FALSE(j);
  EXPECT_NE(j.error().message().find((state / "lock").string()), std::string::npos) << j.error().message();
  EXPECT_NE(j.error().message().find("Read-only file system"), std::string::npos) << j.error().message();
  {
    auto s = act::Session::start(SysRoots::host(), state, act::Mode::observe);
    EXPECT_TRUE(s) << s.error().message();
  }
  auto s = act::Session::start(SysRoots::host(), state, act::Mode::enforce);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message().find("Read-only file system"), std::string::npos) << s.error().message();
  // The binary, end to end (one tick, no metrics endpoint).
  auto run = [&](const char* mode) {
    const fs::path cfg = t_.path() / (std::string(mode) + ".toml");
    std::ofstream(cfg) << "[daemon]\nmode = \"" << mode
                       << "\"\n[[workload]]\nname = \"x\"\nclass = \"best-effort\"\n"
                          "match = { cgroup = \"/keel-faults-none/**\" }\n";
    return run_command(testing::keel_binary().string() + " run --config " + cfg.string() +
                       " --once --metrics-listen off --state " + state.string() + " 2>&1");
  };
  auto [orc, oout] = run("observe");
  EXPECT_EQ(orc, 0) << oout;
  auto [erc, eout] = run("enforce");
  EXPECT_EQ(erc, 1) << eout;
  EXPECT_NE(eout.find("Read-only file system"), std::string::npos) << eout;
}

// Churn on cgroup v2 (the v2 guest's Churn test saw it): rmdir deactivates a cgroup's files before its
// directory goes, and a read in between fails with ENODEV while the path still names the same cgroup.
// A v1 cpuset tree in the kernel's file formats in a temporary directory, served by faultfs, whose
// reads of one cgroup's `cpus` fail with ENODEV (root: a FUSE mount): keel held that cgroup, so its
// target is left out as gone and the other is applied, with no error; named by a path only (not held),
// the same failure is still the caller's error, with the path and the kernel's reason.
TEST(FaultsTree, ACpusetReadFailingWithEnodevIsItsCgroupGoingNotAnError) {
  KEEL_REQUIRE_ROOT();
  testing::TempDir t;
  const fs::path backing = t.path() / "backing", mnt = t.path() / "fuse";
  testing::make_tree(backing, {{"sys/fs/cgroup/cpuset/cpus", "0-3\n"}, {"sys/fs/cgroup/cpuset/mems", "0\n"}});
  for (const char* c : {"stays", "going"})
    for (const char* f : {"cpus", "mems", "effective_cpus", "cgroup.procs", "tasks"})
      testing::make_tree(backing, {{std::string("sys/fs/cgroup/cpuset/") + c + "/" + f, "\n"}});
  FaultFs fuse(backing, mnt);
  if (!fuse.why().empty()) GTEST_SKIP() << "skipped: " << fuse.why();
  ASSERT_TRUE(fuse.mounted()) << "faultfs did not mount";
  const SysRoots roots = SysRoots::under(mnt);
  const CgroupHierarchy cpuset{3, false, {"cpuset"}, roots.cgroup / "cpuset", "/", /*noprefix=*/true};
  auto stays = CgroupDir::open(cpuset, "/stays");
  auto going = CgroupDir::open(cpuset, "/going");
  ASSERT_TRUE(stays && going);
  std::ofstream(backing / ".faults") << "read:sys/fs/cgroup/cpuset/going/cpus " << ENODEV << "\n";
  EXPECT_FALSE(going->removed()) << "its directory is still there";

  Journal j = *Journal::open(t.path() / "state", "boot");
  KnobWriter w(roots, act::Mode::enforce, &j);
  const CpuSet one = *CpuSet::parse_list("1"), two = *CpuSet::parse_list("2-3");
  auto cs = act::apply_cpusets(w, cpuset, {{"/going", one, {}, &*going}, {"/stays", two, {}, &*stays}});
  ASSERT_TRUE(cs) << cs.error().message();
  ASSERT_EQ(cs->size(), 2u);
  EXPECT_TRUE((*cs)[0].gone);
  EXPECT_FALSE((*cs)[0].changed);
  EXPECT_FALSE((*cs)[1].gone);
  EXPECT_EQ(trim(slurp(backing / "sys/fs/cgroup/cpuset/stays/cpus")), "2-3");
  EXPECT_EQ(trim(slurp(backing / "sys/fs/cgroup/cpuset/going/cpus")), "");
  EXPECT_TRUE(fs::exists(backing / ".faults.hits")) << "the fault was not hit";
  for (const auto& c : w.changes()) EXPECT_EQ(c.path.str().find("going"), std::string::npos) << c.path.str();

  auto named = act::apply_cpusets(w, cpuset, {{"/going", one, {}}});
  ASSERT_FALSE(named);
  EXPECT_NE(named.error().message().find("going/cpus"), std::string::npos) << named.error().message();
  EXPECT_NE(named.error().message().find("No such device"), std::string::npos) << named.error().message();
}

// keel restore killed (SIGKILL) half way through a large journal: the journal is still whole (restore
// replaces it only at the end), so the next `keel restore` gives back what the first did not reach.
// A temporary tree with cgroupfs's file names stands in for the kernel (no root needed), in memory
// (/dev/shm) where there is one: thousands of files on a busy disk take minutes.
TEST(FaultsTree, KeelRestoreKilledHalfWayLeavesAJournalTheNextRestoreFinishes) {
  testing::TempDir t(fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path());
  constexpr int kCgroups = 5000;
  std::vector<JournalEntry> entries;
  testing::make_tree(t.path(), {{"proc/sys/kernel/random/boot_id", "b-1\n"}});
  for (int i = 0; i < kCgroups; ++i) {
    const std::string rel = "cpu/c" + std::to_string(i) + "/cpu.shares";
    fs::create_directories(t.path() / "sys/fs/cgroup/cpu" / ("c" + std::to_string(i)));
    std::ofstream(t.path() / "sys/fs/cgroup" / rel) << "2\n";
    entries.push_back({EntryKind::file, {Root::cgroup, rel}, "1024", ValueKind::weight});
  }
  const fs::path state = t.path() / "state";
  ASSERT_EQ(::mkdir(state.c_str(), 0700), 0);
  std::ofstream(state / "journal") << act::format_journal("b-1", entries);
  auto back = [&] {
    int n = 0;
    for (int i = 0; i < kCgroups; ++i)
      n += trim(slurp(t.path() / "sys/fs/cgroup/cpu" / ("c" + std::to_string(i)) / "cpu.shares")) == "1024";
    return n;
  };
  const pid_t pid = ::fork();
  if (pid == 0) {
    const std::string bin = testing::keel_binary().string();
    ::execl(bin.c_str(), bin.c_str(), "restore", "--state", state.c_str(), "--root", t.path().c_str(),
            nullptr);
    ::_exit(127);
  }
  // Kill it once it has restored some (or, on a very fast machine, when it is about to finish).
  for (int i = 0; i < 2000; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (trim(slurp(t.path() / "sys/fs/cgroup/cpu/c0/cpu.shares")) == "1024") break;
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const int at_kill = back();
  std::printf("killed after restoring %d of %d knobs (%s)\n", at_kill, kCgroups,
              WIFSIGNALED(status) ? "killed" : "it had finished");
  if (WIFSIGNALED(status)) {
    auto left = act::parse_journal(slurp(state / "journal"));
    ASSERT_TRUE(left) << left.error().message();
    EXPECT_EQ(left->entries.size(), static_cast<size_t>(kCgroups))
        << "the journal is replaced only at the end";
  }
  auto [rc, out] = run_command(restore_cmd(state, t.path().string()));
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(back(), kCgroups) << out;
  EXPECT_FALSE(fs::exists(state / "journal"));
}

}  // namespace
}  // namespace keel
