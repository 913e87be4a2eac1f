#include "host/fileio.h"

#include <gtest/gtest.h>

#include "tests/support/tmp_tree.h"

namespace keel {
namespace {

TEST(FileIo, ReadsLinesAndIntegers) {
  testing::TempDir t;
  testing::make_tree(t.path(), {{"a", "1024\n"}, {"b", "  x y \nsecond\n"}, {"c", "12abc\n"}});
  EXPECT_EQ(read_int(t.path() / "a").value(), 1024);
  EXPECT_EQ(read_line(t.path() / "b").value(), "x y");
  auto bad = read_int(t.path() / "c");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message(), (t.path() / "c").string() + ": not an integer: '12abc'");
}

TEST(FileIo, ErrorsNamePathAndErrno) {
  testing::TempDir t;
  auto r = read_file(t.path() / "missing");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().err, ENOENT);
  EXPECT_EQ(r.error().message(),
            (t.path() / "missing").string() + ": cannot open: No such file or directory");
  // Kernel files exist already: write_file never creates one.
  auto w = write_file(t.path() / "new", "1");
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().err, ENOENT);
  EXPECT_FALSE(std::filesystem::exists(t.path() / "new"));
}

TEST(FileIo, WritesWholeValue) {
  testing::TempDir t;
  testing::make_tree(t.path(), {{"knob", "old\n"}});
  ASSERT_TRUE(write_file(t.path() / "knob", "0-3"));
  EXPECT_EQ(testing::slurp(t.path() / "knob"), "0-3");
}

}  // namespace
}  // namespace keel
