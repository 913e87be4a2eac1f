#include "actuators/session.h"

#include <gtest/gtest.h>

#include "host/fileio.h"
#include "tests/support/tmp_tree.h"

namespace keel::act {
namespace {

namespace fs = std::filesystem;
using testing::slurp;

class SessionTree : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::make_tree(t_.path(), {{"proc/sys/kernel/random/boot_id", "b-1\n"},
                                   {"sys/fs/cgroup/cpu/be/cpu.shares", "1024\n"},
                                   {"sys/fs/cgroup/cpu/redis/cpu.shares", "1024\n"}});
    roots_ = SysRoots::under(t_.path());
  }
  std::string shares(const char* cg) {
    return std::string(trim(slurp(t_.path() / "sys/fs/cgroup/cpu" / cg / "cpu.shares")));
  }
  testing::TempDir t_;
  SysRoots roots_;
};

TEST_F(SessionTree, EndingASessionGivesEverythingBack) {
  {
    auto s = Session::start(roots_, t_.path() / "state", Mode::enforce);
    ASSERT_TRUE(s) << s.error().message();
    EXPECT_EQ(s->recovered_entries(), 0u);
    ASSERT_TRUE(s->writer().set({Root::cgroup, "cpu/be/cpu.shares"}, "2", ValueKind::weight));
    ASSERT_TRUE(s->writer().set({Root::cgroup, "cpu/redis/cpu.shares"}, "8192", ValueKind::weight));
    EXPECT_EQ(shares("be"), "2");
  }  // keel run's normal exit
  EXPECT_EQ(shares("be"), "1024");
  EXPECT_EQ(shares("redis"), "1024");
  EXPECT_FALSE(fs::exists(t_.path() / "state/journal"));
}

TEST_F(SessionTree, StartingAfterACrashRestoresTheLeftoverJournalFirst) {
  {
    // What a killed keel leaves: a journal and changed knobs, nobody holding the lock.
    auto j = Journal::open(t_.path() / "state", "b-1");
    ASSERT_TRUE(j);
    KnobWriter w(roots_, Mode::enforce, &*j);
    ASSERT_TRUE(w.set({Root::cgroup, "cpu/be/cpu.shares"}, "2", ValueKind::weight));
  }
  ASSERT_EQ(shares("be"), "2");
  auto observe = Session::start(roots_, t_.path() / "state", Mode::observe);  // never writes, so refuses
  ASSERT_FALSE(observe);
  EXPECT_NE(observe.error().message().find("run `keel restore` first"), std::string::npos)
      << observe.error().message();
  EXPECT_EQ(shares("be"), "2");
  auto s = Session::start(roots_, t_.path() / "state", Mode::enforce);
  ASSERT_TRUE(s) << s.error().message();
  EXPECT_EQ(s->recovered_entries(), 1u);
  EXPECT_EQ(s->recovered().restored, 1u);
  EXPECT_EQ(shares("be"), "1024");  // before this session decided anything
}

// daemon.rollback = "not_on_exit": a session that hands over leaves its knobs and journal, and the next
// session of the same boot adopts them (nothing restored, the state text back, the original still
// journaled so its own end restores it); a handover of another boot, a symlinked or a garbled one is
// ignored and the journal restored as a crash's; observe mode refuses a handover as it refuses a crash.
TEST_F(SessionTree, AHandoverIsAdoptedByTheNextSessionOfTheSameBoot) {
  {
    auto s = Session::start(roots_, t_.path() / "state", Mode::enforce);
    ASSERT_TRUE(s) << s.error().message();
    ASSERT_TRUE(s->writer().set({Root::cgroup, "cpu/be/cpu.shares"}, "2", ValueKind::weight));
    ASSERT_TRUE(s->hand_over("[{\"instance\":\"be\"}]\n"));
  }  // the stop of a keel that hands over
  EXPECT_EQ(shares("be"), "2") << "left as set";
  EXPECT_TRUE(fs::exists(t_.path() / "state/journal"));
  EXPECT_EQ(slurp(t_.path() / "state/handover"), "keel-handover 1 b-1\n[{\"instance\":\"be\"}]\n");
  auto observe = Session::start(roots_, t_.path() / "state", Mode::observe);
  ASSERT_FALSE(observe);
  EXPECT_NE(observe.error().message().find("handed over"), std::string::npos) << observe.error().message();
  // Observe consumed the handover file? No: it is read and removed only by the session that adopts.
  {
    auto s = Session::start(roots_, t_.path() / "state", Mode::enforce);
    ASSERT_TRUE(s) << s.error().message();
    ASSERT_TRUE(s->adopted());
    EXPECT_EQ(*s->adopted(), "[{\"instance\":\"be\"}]\n");
    EXPECT_EQ(s->recovered_entries(), 0u);
    EXPECT_EQ(shares("be"), "2") << "adopted, not restored";
    EXPECT_EQ(s->writer().journaled(), 1u);
    EXPECT_FALSE(fs::exists(t_.path() / "state/handover")) << "read once: a crash after it is a crash";
  }  // this one ends normally
  EXPECT_EQ(shares("be"), "1024") << "the original the first session journaled";
}

TEST_F(SessionTree, AHandoverOfAnotherBootASymlinkOrGarbageIsACrash) {
  for (const std::string handover : {"keel-handover 1 b-0\n[]\n", "keel-handover 2 b-1\n[]\n",
                                     "keel-handover 1 \n[]\n", "garbage", "symlink"}) {
    {
      auto j = Journal::open(t_.path() / "state", "b-1");
      ASSERT_TRUE(j);
      KnobWriter w(roots_, Mode::enforce, &*j);
      ASSERT_TRUE(w.set({Root::cgroup, "cpu/be/cpu.shares"}, "2", ValueKind::weight));
    }
    const fs::path file = t_.path() / "state/handover";
    if (handover == "symlink") {
      testing::make_tree(t_.path(), {{"elsewhere", "keel-handover 1 b-1\n[]\n"}});
      fs::create_symlink(t_.path() / "elsewhere", file);
    } else {
      testing::make_tree(t_.path(), {{"state/handover", handover}});
    }
    auto s = Session::start(roots_, t_.path() / "state", Mode::enforce);
    ASSERT_TRUE(s) << s.error().message();
    EXPECT_FALSE(s->adopted()) << handover;
    EXPECT_EQ(s->recovered().restored, 1u) << handover;
    EXPECT_EQ(shares("be"), "1024") << handover;
    EXPECT_FALSE(fs::exists(fs::symlink_status(file))) << handover;
  }
}

// restore_where gives back only the entries asked for; the others stay journaled (and a later
// restore gives them back).
TEST_F(SessionTree, RestoreWhereGivesBackOnlyWhatItIsAskedFor) {
  auto j = Journal::open(t_.path() / "state", "b-1");
  ASSERT_TRUE(j);
  KnobWriter w(roots_, Mode::enforce, &*j);
  ASSERT_TRUE(w.set({Root::cgroup, "cpu/be/cpu.shares"}, "2", ValueKind::weight));
  ASSERT_TRUE(w.set({Root::cgroup, "cpu/redis/cpu.shares"}, "8192", ValueKind::weight));
  auto rep = restore_where(
      roots_, *j, [](const JournalEntry& e) { return e.path.str().find("/be/") != std::string::npos; });
  EXPECT_EQ(rep.restored, 1u);
  EXPECT_EQ(shares("be"), "1024");
  EXPECT_EQ(shares("redis"), "8192");
  ASSERT_EQ(j->entries().size(), 1u);
  EXPECT_EQ(j->entries()[0].path.str(), "cgroup:cpu/redis/cpu.shares");
  const std::string durable = slurp(t_.path() / "state/journal");
  EXPECT_NE(durable.find("cpu/redis/cpu.shares"), std::string::npos) << durable;
  EXPECT_EQ(durable.find("cpu/be/cpu.shares"), std::string::npos) << durable;
  EXPECT_EQ(restore(roots_, *j).restored, 1u);
  EXPECT_EQ(shares("redis"), "1024");
}

TEST_F(SessionTree, ObserveSessionsNeverJournalNorWrite) {
  auto s = Session::start(roots_, t_.path() / "state", Mode::observe);
  ASSERT_TRUE(s);
  auto changed = s->writer().set({Root::cgroup, "cpu/be/cpu.shares"}, "2", ValueKind::weight);
  ASSERT_TRUE(changed);
  EXPECT_TRUE(*changed);  // would change
  EXPECT_EQ(shares("be"), "1024");
  EXPECT_FALSE(fs::exists(t_.path() / "state/journal"));
  auto second = Session::start(roots_, t_.path() / "state", Mode::observe);
  EXPECT_FALSE(second);  // one keel per state directory, in any mode
}

// One keel per host, whatever its state directory: a second session on the same host (cgroup root)
// with a state directory of its own is refused before it reads or writes anything, in either mode;
// once the first is gone, the next starts. (Before, both ran and journaled each other's values.)
TEST_F(SessionTree, OneKeelPerHostWhateverItsStateDirectory) {
  {
    auto first = Session::start(roots_, t_.path() / "state-a", Mode::enforce);
    ASSERT_TRUE(first) << first.error().message();
    for (Mode m : {Mode::enforce, Mode::observe}) {
      auto second = Session::start(roots_, t_.path() / "state-b", m);
      ASSERT_FALSE(second);
      EXPECT_EQ(second.error().message(),
                "another keel runs on this host (it holds the lock on " + roots_.cgroup.string() +
                    "): one keel per host, whatever its state directory, or they would journal each other's "
                    "values");
    }
    EXPECT_FALSE(fs::exists(t_.path() / "state-b"));
  }
  auto next = Session::start(roots_, t_.path() / "state-b", Mode::enforce);
  EXPECT_TRUE(next) << next.error().message();
}

// A journal from before a reboot is dropped, and what this session changes afterwards is journaled
// under this boot, so it is restored.
TEST_F(SessionTree, AfterAStaleJournalTheNewSessionsChangesAreStillRestored) {
  testing::make_tree(
      t_.path(), {{"state/journal", "keel-journal 1 boot_id=old-boot\nfile cgroup cpu/be/cpu.shares 512\n"}});
  fs::permissions(t_.path() / "state", fs::perms::owner_all);
  {
    auto s = Session::start(roots_, t_.path() / "state", Mode::enforce);
    ASSERT_TRUE(s) << s.error().message();
    EXPECT_EQ(s->recovered().gone, 1u);
    EXPECT_EQ(shares("be"), "1024");  // the pre-reboot value was not applied
    ASSERT_TRUE(s->writer().set({Root::cgroup, "cpu/be/cpu.shares"}, "2", ValueKind::weight));
  }
  EXPECT_EQ(shares("be"), "1024");
}

// A wrong root must not make every knob look gone: nothing restored, the journal kept.
TEST_F(SessionTree, RestoreUnderAWrongRootKeepsTheJournal) {
  {
    auto j = Journal::open(t_.path() / "state", "b-1");
    ASSERT_TRUE(j);
    KnobWriter w(roots_, Mode::enforce, &*j);
    ASSERT_TRUE(w.set({Root::cgroup, "cpu/be/cpu.shares"}, "2", ValueKind::weight));
  }
  auto j = Journal::open(t_.path() / "state", "b-1");
  ASSERT_TRUE(j);
  auto rep = restore(SysRoots::under(t_.path() / "nowhere"), *j);
  EXPECT_FALSE(rep.failed.empty());
  EXPECT_EQ(rep.gone, 0u);
  EXPECT_EQ(j->entries().size(), 1u);
  EXPECT_TRUE(fs::exists(t_.path() / "state/journal"));
}

}  // namespace
}  // namespace keel::act
