#include "host/fileio.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <future>

#include "host/fd.h"
#include "tests/support/no_hang.h"
#include "tests/support/tmp_tree.h"

namespace keel {
namespace {

using testing::without_hanging_on;

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

// Every reader refuses what is not a regular file without waiting on it: a FIFO's open would block
// until a writer came. Kernel pseudo-files are regular files of size 0 and read whole.
TEST(FileIo, AFifoIsRefusedNotWaitedOn) {
  testing::TempDir t;
  const auto fifo = t.path() / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto a = without_hanging_on(fifo, [&] { return read_file(fifo); });
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().message(), fifo.string() + ": not a regular file");
  auto b = without_hanging_on(fifo, [&] { return read_int(fifo); });
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().message(), fifo.string() + ": not a regular file");
  auto c = without_hanging_on(fifo, [&] { return read_file_nofollow(fifo, 100); });
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().message(), fifo.string() + ": not a regular file");
  auto d = read_file(t.path());
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().message(), t.path().string() + ": not a regular file");
  auto proc = read_file("/proc/self/status");  // size 0 in stat, read whole
  ASSERT_TRUE(proc) << proc.error().message();
  EXPECT_NE(proc->find("Cpus_allowed_list:"), std::string::npos);
}

TEST(FileIo, ReadsAreBounded) {
  testing::TempDir t;
  testing::make_tree(t.path(), {{"big", std::string(5000, 'x')}});
  EXPECT_EQ(read_file(t.path() / "big", 5000).value().size(), 5000u);
  auto r = read_file(t.path() / "big", 4999);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(),
            (t.path() / "big").string() + ": 5000 bytes, more than the 4999 such a file holds");
  // A single-value file is at most kMaxLineFileBytes.
  testing::make_tree(t.path(), {{"line", std::string(kMaxLineFileBytes + 1, '1')}});
  EXPECT_FALSE(read_line(t.path() / "line"));
  EXPECT_FALSE(read_int(t.path() / "line"));
  // A kernel file says size 0: the bound holds while reading (/proc/self/mountinfo is never empty).
  auto m = read_file("/proc/self/mountinfo", 10);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().message(), "/proc/self/mountinfo: grew past 10 bytes");
}

// read_file follows a link (a Kubernetes ConfigMap's config file is one); read_file_nofollow, for
// files under a directory a user names, does not.
TEST(FileIo, NofollowRefusesALink) {
  testing::TempDir t;
  testing::make_tree(t.path(), {{"real", "7ff\n"}});
  std::filesystem::create_symlink(t.path() / "real", t.path() / "link");
  EXPECT_EQ(read_file(t.path() / "link").value(), "7ff\n");
  EXPECT_EQ(read_file_nofollow(t.path() / "real", 100).value(), "7ff\n");
  auto r = read_file_nofollow(t.path() / "link", 100);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(),
            (t.path() / "link").string() + ": a symbolic link (it must be the file itself)");
  EXPECT_FALSE(read_line_nofollow(t.path() / "link"));
}

// The journal's and the D-Bus address's encoding: bytes outside the plain set as %xx, every byte back.
TEST(FileIo, PercentEncodingRoundTripsEveryByte) {
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  const std::string enc = percent_encode(all, "._/-");
  for (char c : enc)
    EXPECT_TRUE((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                std::string_view("._/-%").find(c) != std::string_view::npos)
        << static_cast<int>(c);
  EXPECT_EQ(percent_encode("/run/a b.sock", "_/.-"), "/run/a%20b.sock");
  EXPECT_EQ(percent_encode("x=1,y", "=,"), "x=1,y");
  EXPECT_EQ(percent_encode(std::string_view("a\0b", 3), std::string_view("\0", 1)), "a%00b");
  std::string back;
  ASSERT_TRUE(percent_decode(enc, back));
  EXPECT_EQ(back, all);
  EXPECT_TRUE(percent_decode("%2F%2f", back));
  EXPECT_EQ(back, "//");
  for (const char* bad : {"%", "%4", "a%g0", "%%41"}) EXPECT_FALSE(percent_decode(bad, back)) << bad;
}

}  // namespace
}  // namespace keel
