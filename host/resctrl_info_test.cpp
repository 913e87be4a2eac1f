// resctrl info/ against temporary trees with the kernel's exact file formats (no resctrl here).
#include "host/resctrl_info.h"

#include <fcntl.h>
#include <gmock/gmock.h>
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

TEST(ResctrlInfoTempTree, IntelRdtElevenWays) {
  testing::TempDir t;
  testing::make_tree(t.path(), {{"info/L3/cbm_mask", "7ff\n"},
                                {"info/L3/min_cbm_bits", "1\n"},
                                {"info/L3/num_closids", "16\n"},
                                {"info/L3/shareable_bits", "600\n"},
                                {"info/L3/sparse_masks", "0\n"},
                                {"info/MB/min_bandwidth", "10\n"},
                                {"info/MB/bandwidth_gran", "10\n"},
                                {"schemata", "L3:0=7ff\nMB:0=100\n"}});
  auto r = read_resctrl_info(t.path());
  ASSERT_TRUE(r) << r.error().message();
  ASSERT_TRUE(r->has_value());
  const auto& i = **r;
  EXPECT_TRUE(i.l3);
  EXPECT_FALSE(i.cdp);
  EXPECT_EQ(i.l3_ways, 11u);
  EXPECT_EQ(i.cbm_mask, 0x7ffu);
  EXPECT_EQ(i.shareable_bits, 0x600u);
  EXPECT_EQ(i.num_closids, 16u);
  EXPECT_FALSE(i.sparse_masks);
  EXPECT_TRUE(i.mb);
  EXPECT_EQ(i.min_bandwidth, 10u);
  EXPECT_EQ(i.bandwidth_gran, 10u);
}

TEST(ResctrlInfoTempTree, KunpengMpamTwentyEightWaysWithCdpLayout) {
  testing::TempDir t;
  testing::make_tree(t.path(), {{"info/L3CODE/cbm_mask", "fffffff\n"},
                                {"info/L3CODE/min_cbm_bits", "1\n"},
                                {"info/L3CODE/num_closids", "32\n"},
                                {"info/L3DATA/cbm_mask", "fffffff\n"},
                                {"info/L3DATA/min_cbm_bits", "1\n"},
                                {"info/L3DATA/num_closids", "32\n"},
                                {"info/MB/min_bandwidth", "1\n"},
                                {"info/MB/bandwidth_gran", "1\n"}});
  auto r = read_resctrl_info(t.path());
  ASSERT_TRUE(r && r->has_value());
  EXPECT_TRUE((*r)->cdp);
  EXPECT_EQ((*r)->l3_ways, 28u);
  EXPECT_EQ((*r)->min_bandwidth, 1u);
}

TEST(ResctrlInfoTempTree, ClosidsAreTheSmallestOverL3AndMbAndMbaMbpsComesFromMountinfo) {
  testing::TempDir t;
  auto root = t.path() / "sys/fs/resctrl";
  testing::make_tree(root, {{"info/L3/cbm_mask", "7ff\n"},
                            {"info/L3/min_cbm_bits", "1\n"},
                            {"info/L3/num_closids", "16\n"},
                            {"info/MB/min_bandwidth", "10\n"},
                            {"info/MB/bandwidth_gran", "10\n"},
                            {"info/MB/num_closids", "8\n"}});
  std::string mountinfo = "22 1 0:21 / /proc rw - proc proc rw\n40 25 0:36 / " + root.string() +
                          " rw,relatime shared:10 - resctrl resctrl rw,mba_MBps\n";
  testing::make_tree(t.path(), {{"mountinfo", mountinfo}});
  auto r = read_resctrl_info(root, t.path() / "mountinfo");
  ASSERT_TRUE(r && r->has_value()) << (r ? "" : r.error().message());
  EXPECT_EQ((*r)->num_closids, 8u);  // MB has fewer: groups need one in each
  EXPECT_TRUE((*r)->mba_mbps);
  // Without mountinfo (or with it unreadable) the options are taken as none.
  auto plain = read_resctrl_info(root);
  ASSERT_TRUE(plain && plain->has_value());
  EXPECT_FALSE((*plain)->mba_mbps);
  EXPECT_FALSE((*read_resctrl_info(root, t.path() / "missing"))->mba_mbps);
}

TEST(ResctrlInfoMountinfo, OptionsOfTheResctrlMountAtThatPathOnly) {
  std::string mi =
      "40 25 0:36 / /sys/fs/resctrl rw,relatime shared:10 - resctrl resctrl rw,cdp\n"
      "41 25 0:37 / /mnt/other rw - resctrl resctrl rw,mba_MBps\n"
      "42 25 0:38 / /srv/with\\040space rw master:1 - resctrl resctrl rw,mba_MBps\n"
      "43 25 0:39 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mba_MBps\n";
  EXPECT_TRUE(resctrl_mount_has_option(mi, "/sys/fs/resctrl", "cdp"));
  EXPECT_TRUE(resctrl_mount_has_option(mi, "/sys/fs/resctrl/", "cdp"));
  EXPECT_FALSE(resctrl_mount_has_option(mi, "/sys/fs/resctrl", "mba_MBps"));  // another mount's option
  EXPECT_FALSE(resctrl_mount_has_option(mi, "/sys/fs/resctrl", "cd"));        // whole options only
  EXPECT_TRUE(resctrl_mount_has_option(mi, "/srv/with space", "mba_MBps"));   // \040 unescaped
  EXPECT_FALSE(resctrl_mount_has_option(mi, "/sys/fs/cgroup", "mba_MBps"));   // not resctrl
  // A later mount over the same path hides the earlier one.
  EXPECT_FALSE(resctrl_mount_has_option(mi + "50 25 0:40 / /sys/fs/resctrl rw - resctrl resctrl rw\n",
                                        "/sys/fs/resctrl", "cdp"));
  EXPECT_FALSE(resctrl_mount_has_option("garbage\n\n1 2\n", "/sys/fs/resctrl", "cdp"));
}

TEST(ResctrlInfoTempTree, NotMountedIsNotAnError) {
  testing::TempDir t;
  auto r = read_resctrl_info(t.path() / "resctrl");
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->has_value());
}

TEST(ResctrlInfoTempTree, GarbageIsAnErrorWithPath) {
  testing::TempDir t;
  testing::make_tree(
      t.path(),
      {{"info/L3/cbm_mask", "xyz\n"}, {"info/L3/min_cbm_bits", "1\n"}, {"info/L3/num_closids", "16\n"}});
  auto r = read_resctrl_info(t.path());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(), (t.path() / "info/L3/cbm_mask").string() + ": not a hex mask: 'xyz'");
}

// A value the kernel cannot show is an error naming the file, never wrapped into range:
// 4294967304 is 2^32 + 8, which a cast to unsigned read as 8.
TEST(ResctrlInfoTempTree, NumbersOutOfRangeAreErrorsNamingTheFile) {
  struct Case {
    std::string file, value, message;
  };
  const std::vector<Case> cases = {
      {"info/L3/min_cbm_bits", "4294967304", "value 4294967304 is out of range (at most 64)"},
      {"info/L3/min_cbm_bits", "99999999999999999999999", "value 99999999999999999999999 is out of range"},
      {"info/L3/min_cbm_bits", "-1", "not a number: '-1'"},
      {"info/L3/num_closids", "4294967312", "value 4294967312 is out of range (at most 65536)"},
      {"info/L3/sparse_masks", "2", "value 2 is out of range (at most 1)"},
      {"info/L3/cbm_mask", "1ffffffffffffffff", "hex mask wider than 64 bits"},
      {"info/MB/min_bandwidth", "4294967306", "value 4294967306 is out of range (at most 100)"},
      {"info/MB/bandwidth_gran", "101", "value 101 is out of range (at most 100)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file + " = " + c.value);
    testing::TempDir t;
    std::vector<std::pair<std::string, std::string>> files = {
        {"info/L3/cbm_mask", "7ff\n"},     {"info/L3/min_cbm_bits", "1\n"},
        {"info/L3/num_closids", "16\n"},   {"info/L3/sparse_masks", "0\n"},
        {"info/MB/min_bandwidth", "10\n"}, {"info/MB/bandwidth_gran", "10\n"},
        {"info/MB/num_closids", "8\n"}};
    for (auto& [f, v] : files)
      if (f == c.file) v = c.value + "\n";
    testing::make_tree(t.path(), files);
    auto r = read_resctrl_info(t.path());
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().path, (t.path() / c.file).string());
    EXPECT_THAT(r.error().message(), ::testing::HasSubstr(c.message));
  }
}

// `keel check-config --resctrl DIR` reads a tree anyone may have made: a FIFO in a file's place is
// refused at once (an open without O_NONBLOCK would wait for a writer forever), and so is a link.
TEST(ResctrlInfoTempTree, FifoOrLinkInPlaceOfAFileIsRefusedWithoutBlocking) {
  for (std::string file : {"info/L3/cbm_mask", "info/L3/num_closids", "info/MB/min_bandwidth"}) {
    for (bool fifo : {true, false}) {
      SCOPED_TRACE(file + (fifo ? " as a FIFO" : " as a link"));
      testing::TempDir t;
      testing::make_tree(t.path(), {{"info/L3/cbm_mask", "7ff\n"},
                                    {"info/L3/min_cbm_bits", "1\n"},
                                    {"info/L3/num_closids", "16\n"},
                                    {"info/MB/min_bandwidth", "10\n"},
                                    {"info/MB/bandwidth_gran", "10\n"},
                                    {"elsewhere", "7ff\n"}});
      std::filesystem::remove(t.path() / file);
      if (fifo)
        ASSERT_EQ(::mkfifo((t.path() / file).c_str(), 0600), 0);
      else
        std::filesystem::create_symlink(t.path() / "elsewhere", t.path() / file);
      auto r = without_hanging_on(t.path() / file, [&] { return read_resctrl_info(t.path()); });
      ASSERT_FALSE(r);
      EXPECT_EQ(r.error().message(), (t.path() / file).string() + (fifo ? ": not a regular file"
                                                                        : ": a symbolic link (it must be "
                                                                          "the file itself)"));
    }
  }
}

}  // namespace
}  // namespace keel
