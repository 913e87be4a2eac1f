// keel's log lines: the syslog priority prefix only when stderr is the journal stream systemd named
// ($JOURNAL_STREAM = stderr's device:inode), the level word on other streams for warnings and errors,
// one line per event however long, and lines below the level dropped.
#include "host/log.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "tests/support/tmp_tree.h"

namespace keel::logging {
namespace {

TEST(Log, LinesCarryTheirLevelAndAreNeverCut) {
  EXPECT_EQ(format(Level::notice, "tick 3 enforce act crit cpus", true),
            "<5>keel: tick 3 enforce act crit cpus\n");
  EXPECT_EQ(format(Level::error, "run: cannot open", true), "<3>keel: run: cannot open\n");
  EXPECT_EQ(format(Level::warning, "reserved CPUs outside", false), "keel: warning: reserved CPUs outside\n");
  EXPECT_EQ(format(Level::warning, "warning: said once", false), "keel: warning: said once\n");
  EXPECT_EQ(format(Level::info, "status", false), "keel: status\n");
  EXPECT_EQ(format(Level::info, "a\nb", false), "keel: a b\n") << "one event, one line";
  // Issue 38: only the newline was escaped, so a tenant's cgroup named with ESC sequences or a carriage
  // return rewrote what an operator's terminal showed of keel's log.
  EXPECT_EQ(format(Level::info, "cgroup /be/\x1b[2J\x1b]0;owned\x07x\rtick 9 ok\t\x7f", false),
            "keel: cgroup /be/\\x1b[2J\\x1b]0;owned\\x07x\\x0dtick 9 ok\\x09\\x7f\n");
  EXPECT_EQ(format(Level::info, "caf\xc3\xa9", false), "keel: caf\xc3\xa9\n") << "UTF-8 stays as it is";
  const std::string name(5000, 'x');
  EXPECT_EQ(format(Level::info, name, false).size(), name.size() + 7);
  EXPECT_EQ(parse_level("warning"), Level::warning);
  EXPECT_EQ(parse_level("debug"), Level::debug);
  EXPECT_FALSE(parse_level("verbose"));
  EXPECT_FALSE(parse_level(""));
}

// Issue 38: a write the kernel refused every tick was logged every tick (a tenant's cgroup can make one
// fail on purpose and flood the journal). Said once, then after 2, 4, 8, ... ticks with a count; said
// at once again when it comes back after stopping.
TEST(Log, ALineThatComesBackEveryTickIsSaidLessAndLessOften) {
  Repeats r;
  const std::string e = "cpuset /be left as it is: Device or resource busy";
  std::vector<uint64_t> said;
  std::vector<std::string> texts;
  for (uint64_t tick = 1; tick <= 40; ++tick)
    for (const auto& l : r.filter(tick, {e, e, "weight of /x: Permission denied"}))
      if (l.starts_with("cpuset")) said.push_back(tick), texts.push_back(l);
  EXPECT_EQ(said, (std::vector<uint64_t>{1, 3, 7, 15, 31})) << "not twice in one tick either";
  EXPECT_EQ(texts[0], e);
  EXPECT_EQ(texts[1], e + " (2 times in the last 2 ticks)");
  EXPECT_EQ(texts[4], e + " (16 times in the last 16 ticks)");
  EXPECT_TRUE(r.filter(41, {}).empty());
  EXPECT_EQ(r.filter(42, {e}), std::vector<std::string>{e}) << "gone a tick, then back: said at once";
}

// What reaches fd 2 with `journal_stream` set as systemd would (or not), at level `min`.
std::string written(bool as_journal, Level min) {
  testing::TempDir dir;
  const std::string file = (dir.path() / "stderr").string();
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  int saved = ::dup(2);
  ::dup2(fd, 2);
  struct stat st {};
  ::fstat(2, &st);
  const std::string stream =
      std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino + (as_journal ? 0 : 1));
  ::setenv("JOURNAL_STREAM", stream.c_str(), 1);
  setup(min);
  line(Level::debug, "a debug line");
  line(Level::info, "an info line");
  line(Level::warning, "a warning");
  ::dup2(saved, 2);
  ::close(saved);
  ::close(fd);
  ::unsetenv("JOURNAL_STREAM");
  setup(Level::info);
  return testing::slurp(file);
}

TEST(Log, ThePriorityPrefixIsForTheJournalStreamOnlyAndTheLevelFilters) {
  EXPECT_EQ(written(true, Level::info), "<6>keel: an info line\n<4>keel: a warning\n");
  EXPECT_EQ(written(false, Level::info), "keel: an info line\nkeel: warning: a warning\n")
      << "another stream (a redirect under the unit) gets no prefix";
  EXPECT_EQ(written(false, Level::warning), "keel: warning: a warning\n");
  EXPECT_EQ(written(true, Level::debug),
            "<7>keel: a debug line\n<6>keel: an info line\n<4>keel: a warning\n");
}

}  // namespace
}  // namespace keel::logging
