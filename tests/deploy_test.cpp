// The systemd unit (deploy/systemd/keel.service) as systemd reads it: `systemd-analyze verify` finds
// nothing wrong with it (its commands pointed at this build, its man page at the generated one), its
// exposure score is the one deploy/README.md records, and its capability bounding set is exactly the
// README's table's "yes" rows. No systemd runs as PID 1 here: these are systemd's own offline checks.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "tests/support/tmp_tree.h"

namespace keel {
namespace {

namespace fs = std::filesystem;
using testing::run_command;
using testing::slurp;

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

bool have_analyzer() { return run_command("command -v systemd-analyze").first == 0; }

// The unit with its paths pointed at this build, in `dir` (systemd-analyze checks the binaries exist).
fs::path unit_for_this_build(const fs::path& dir) {
  std::string unit = slurp(testing::source_dir() / "deploy/systemd/keel.service");
  unit = replace_all(unit, "/usr/sbin/keel", testing::keel_binary().string());
  unit = replace_all(unit, "/etc/keel/keel.toml", (testing::source_dir() / "config/keel.toml").string());
  fs::path f = dir / "keel.service";
  std::ofstream(f) << unit;
  fs::create_directories(dir / "man/man8");
  fs::copy_file(testing::binary_dir() / "cli/keel.8.gz", dir / "man/man8/keel.8.gz");
  return f;
}

TEST(Deploy, TheSystemdUnitVerifies) {
  if (!have_analyzer()) GTEST_SKIP() << "skipped: no systemd-analyze (package systemd, scripts/deps.sh test)";
  testing::TempDir dir;
  const fs::path unit = unit_for_this_build(dir.path());
  auto [rc, out] =
      run_command("MANPATH=" + (dir.path() / "man").string() + " systemd-analyze verify " + unit.string());
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "") << "every warning is a mistake in the unit";
  // And a broken copy is caught: the check can fail.
  std::string bad = replace_all(slurp(unit), "Type=notify", "Type=notifyy");
  std::ofstream(unit) << bad;
  auto [rc2, out2] =
      run_command("MANPATH=" + (dir.path() / "man").string() + " systemd-analyze verify " + unit.string());
  EXPECT_NE(out2.find("notifyy"), std::string::npos) << out2;
}

TEST(Deploy, TheUnitsExposureIsTheOneTheReadmeRecords) {
  if (!have_analyzer()) GTEST_SKIP() << "skipped: no systemd-analyze (package systemd, scripts/deps.sh test)";
  testing::TempDir dir;
  const fs::path unit = unit_for_this_build(dir.path());
  auto [rc, out] = run_command("systemd-analyze security --offline=true --no-pager " + unit.string());
  const std::string score = testing::between(out, "Overall exposure level for keel.service: ", " ");
  ASSERT_FALSE(score.empty()) << out;
  const std::string readme = slurp(testing::source_dir() / "deploy/README.md");
  const std::string recorded = testing::between(readme, "| keel.service | ", " |");
  ASSERT_FALSE(recorded.empty()) << readme;
  EXPECT_EQ(score, recorded) << "deploy/README.md must record the unit's exposure";
  std::printf("keel.service exposure %s (deploy/README.md: %s)\n", score.c_str(), recorded.c_str());
}

TEST(Deploy, TheUnitsCapabilitiesAreTheReadmesTable) {
  const std::string unit = slurp(testing::source_dir() / "deploy/systemd/keel.service");
  std::set<std::string> in_unit;
  std::istringstream words(testing::between(unit, "\nCapabilityBoundingSet=", "\n"));
  for (std::string w; words >> w;) in_unit.insert(w);
  ASSERT_FALSE(in_unit.empty());
  const std::string readme = slurp(testing::source_dir() / "deploy/README.md");
  std::set<std::string> yes, listed;
  std::istringstream lines(readme);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("| CAP_")) continue;  // | CAP_X | needed for | yes/no |
    std::vector<std::string> cells;
    std::istringstream row(line);
    for (std::string cell; std::getline(row, cell, '|');) {
      const size_t a = cell.find_first_not_of(' '), b = cell.find_last_not_of(' ');
      if (a != std::string::npos) cells.push_back(cell.substr(a, b - a + 1));
    }
    ASSERT_GE(cells.size(), 3u) << line;
    const std::string &cap = cells.front(), &in = cells.back();
    listed.insert(cap);
    if (in == "yes") yes.insert(cap);
    EXPECT_TRUE(in == "yes" || in == "no") << line;
  }
  EXPECT_EQ(yes, in_unit) << "deploy/README.md's capability table against CapabilityBoundingSet=";
  EXPECT_GE(listed.size(), yes.size() + 2) << "the table also says what keel does without";
}

}  // namespace
}  // namespace keel
