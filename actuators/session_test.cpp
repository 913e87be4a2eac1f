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
  std::string shares(const char* cg) { return std::string(trim(slurp(t_.path() / "sys/fs/cgroup/cpu" / cg / "cpu.shares"))); }
  testing::TempDir t_;
  SysRoots roots_;
};

TEST_F(SessionTree, EndingASessionGivesEverythingBack) {
  {
    auto s = Session::start(roots_, t_.path() / "state", Mode::enforce);
    ASSERT_TRUE(s) << s.error().message();
    EXPECT_EQ(s->recovered_entries(), 0u);
    ASSERT_TRUE(s->writer().set({Root::cgroup, "cpu/be/cpu.shares"}, "2"));
    ASSERT_TRUE(s->writer().set({Root::cgroup, "cpu/redis/cpu.shares"}, "8192"));
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
    ASSERT_TRUE(w.set({Root::cgroup, "cpu/be/cpu.shares"}, "2"));
  }
  ASSERT_EQ(shares("be"), "2");
  auto s = Session::start(roots_, t_.path() / "state", Mode::observe);
  ASSERT_TRUE(s) << s.error().message();
  EXPECT_EQ(s->recovered_entries(), 1u);
  EXPECT_EQ(s->recovered().restored, 1u);
  EXPECT_EQ(shares("be"), "1024");  // before this session decided anything
}

TEST_F(SessionTree, ObserveSessionsNeverJournalNorWrite) {
  auto s = Session::start(roots_, t_.path() / "state", Mode::observe);
  ASSERT_TRUE(s);
  auto changed = s->writer().set({Root::cgroup, "cpu/be/cpu.shares"}, "2");
  ASSERT_TRUE(changed);
  EXPECT_TRUE(*changed);  // would change
  EXPECT_EQ(shares("be"), "1024");
  EXPECT_FALSE(fs::exists(t_.path() / "state/journal"));
  auto second = Session::start(roots_, t_.path() / "state", Mode::observe);
  EXPECT_FALSE(second);  // one keel per state directory, in any mode
}

}  // namespace
}  // namespace keel::act
