#include "host/cpuset.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

namespace keel {
namespace {

CpuSet list(std::string_view s) {
  auto r = CpuSet::parse_list(s);
  EXPECT_TRUE(r) << s << ": " << r.error().message();
  return r.value_or(CpuSet{});
}

TEST(CpuSetList, ParsesRangesSinglesAndStrides) {
  EXPECT_EQ(list("0-3,8,10-11").cpus(), (std::vector<unsigned>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(list(" 5\n").cpus(), (std::vector<unsigned>{5}));
  // The kernel's group form: in each group of 4, the first 1 (isolcpus=0-11:1/4 style).
  EXPECT_EQ(list("0-11:1/4").cpus(), (std::vector<unsigned>{0, 4, 8}));
  EXPECT_EQ(list("100-119:2/10").to_list(), "100-101,110-111");
  EXPECT_TRUE(list("").empty());
  EXPECT_TRUE(list("\n").empty());
  EXPECT_EQ(list("3,1,2").to_list(), "1-3");
  EXPECT_EQ(list("1,1,1").count(), 1u);
}

TEST(CpuSetList, RejectsGarbageWithPosition) {
  struct Case {
    const char* in;
    const char* msg;
  };
  for (auto c :
       {Case{"0-", "expected a CPU number at offset 2 in '0-'"},
        Case{"a", "expected a CPU number at offset 0 in 'a'"},
        Case{"3-1", "range 3-1 runs backwards at offset 2 in '3-1'"},
        Case{"1,", "trailing ',' at offset 1 in '1,'"}, Case{"1;2", "unexpected ';' at offset 1 in '1;2'"},
        Case{"0-8:4", "expected '/' after the used count at offset 5 in '0-8:4'"},
        Case{"0-8:1/0", "group size must be at least 1 at offset 6 in '0-8:1/0'"},
        Case{"0-8:3/2", "used count must be 1..2 at offset 4 in '0-8:3/2'"},
        Case{"99999", "CPU number 99999 is out of range (max 8191) at offset 0 in '99999'"},
        Case{"1,,2", "expected a CPU number at offset 2 in '1,,2'"}}) {
    auto r = CpuSet::parse_list(c.in);
    ASSERT_FALSE(r) << c.in;
    EXPECT_EQ(r.error().what, c.msg);
  }
}

// Lists and masks come from tenants' cgroups and the user: a huge CPU number is an error before any
// set is allocated (a list like 0-4000000000 would take half a gigabyte).
TEST(CpuSetList, HugeNumbersAreRefusedBeforeAnythingIsAllocated) {
  for (const char* in : {"0-4000000000", "0-4294967295", "4294967295", "4294967296", "0-8192",
                         "0-18446744073709551616", "0-8191:1/4294967295"}) {
    auto r = CpuSet::parse_list(in);
    ASSERT_FALSE(r) << in;
    EXPECT_THAT(r.error().what, ::testing::HasSubstr("is out of range (max 8191)")) << in;
  }
  EXPECT_EQ(CpuSet::parse_list("0-8191")->count(), 8192u);
  auto m = CpuSet::parse_mask("1" + std::string(2048, '0'));  // bit 8192
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().what, "mask has bits beyond CPU 8191");
  // range() stops at kMaxCpu instead of wrapping around UINT_MAX forever.
  EXPECT_EQ(CpuSet::range(8190, UINT32_MAX).to_list(), "8190-8191");
}

TEST(CpuSetMask, ParsesPlainAndCommaWordForms) {
  EXPECT_EQ(CpuSet::parse_mask("ff")->to_list(), "0-7");
  EXPECT_EQ(CpuSet::parse_mask("0x3")->to_list(), "0-1");
  EXPECT_EQ(CpuSet::parse_mask("00000000,00000040\n")->to_list(), "6");
  EXPECT_EQ(CpuSet::parse_mask("00000001,00000000")->to_list(), "32");
  EXPECT_EQ(CpuSet::parse_mask("1,0")->to_list(), "32");  // short words still hold 32 bits each
  EXPECT_EQ(CpuSet::parse_mask("80000000,00000000,00000001")->to_list(), "0,95");
  EXPECT_TRUE(CpuSet::parse_mask("0")->empty());
  EXPECT_TRUE(CpuSet::parse_mask("")->empty());
}

TEST(CpuSetMask, FormatsInKernelForms) {
  EXPECT_EQ(list("6").to_mask(), "00000040");
  EXPECT_EQ(list("0,33").to_mask(), "00000002,00000001");
  EXPECT_EQ(list("0,33").to_mask(false), "200000001");
  EXPECT_EQ(CpuSet{}.to_mask(), "00000000");
  EXPECT_EQ(CpuSet{}.to_mask(false), "0");
}

TEST(CpuSetMask, RejectsGarbage) {
  EXPECT_EQ(CpuSet::parse_mask("fg").error().what, "'g' is not a hex digit at offset 1 in 'fg'");
  EXPECT_EQ(CpuSet::parse_mask("1,,2").error().what, "empty word in mask at offset 1 in '1,,2'");
  EXPECT_FALSE(CpuSet::parse_mask("123456789,0"));
  EXPECT_EQ(CpuSet::parse_mask(",00000001").error().what, "empty word in mask at offset 0 in ',00000001'");
  EXPECT_EQ(CpuSet::parse_mask("0x,1").error().what, "empty word in mask at offset 2 in '0x,1'");
  EXPECT_EQ(CpuSet::parse_mask("0x").error().what, "no hex digits after '0x' at offset 2 in '0x'");
}

TEST(CpuSetOps, SetAlgebra) {
  auto a = list("0-7"), b = list("4-11");
  EXPECT_EQ((a & b).to_list(), "4-7");
  EXPECT_EQ((a | b).to_list(), "0-11");
  EXPECT_EQ((a - b).to_list(), "0-3");
  EXPECT_EQ((b - a - list("8-11")).count(), 0u);
  EXPECT_TRUE((b - a - list("8-11")).empty());
  EXPECT_TRUE(list("1-2").subset_of(a));
  EXPECT_TRUE(a.intersects(b));
  EXPECT_FALSE(list("100").intersects(a));
  EXPECT_EQ(a.first(), 0);
  EXPECT_EQ(b.last(), 11);
  EXPECT_EQ(CpuSet{}.first(), -1);
  auto c = list("64-65");
  c.remove(64);
  c.remove(65);
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(c, CpuSet{});
}

// Property: any set survives list and mask round trips in both mask forms.
TEST(CpuSetProperty, RoundTripsLosslessly) {
  std::mt19937 rng(12345);
  for (int iter = 0; iter < 2000; ++iter) {
    CpuSet s;
    unsigned max_cpu = std::uniform_int_distribution<unsigned>(1, 1024)(rng);
    unsigned n = std::uniform_int_distribution<unsigned>(0, 40)(rng);
    for (unsigned i = 0; i < n; ++i) {
      unsigned lo = std::uniform_int_distribution<unsigned>(0, max_cpu - 1)(rng);
      unsigned len = std::uniform_int_distribution<unsigned>(0, 8)(rng);
      for (unsigned c = lo; c <= std::min(lo + len, max_cpu); ++c) s.add(c);
    }
    auto from_list = CpuSet::parse_list(s.to_list());
    ASSERT_TRUE(from_list) << s.to_list();
    EXPECT_EQ(*from_list, s) << s.to_list();
    auto from_words = CpuSet::parse_mask(s.to_mask(true));
    ASSERT_TRUE(from_words) << s.to_mask(true);
    EXPECT_EQ(*from_words, s);
    auto from_plain = CpuSet::parse_mask(s.to_mask(false));
    ASSERT_TRUE(from_plain) << s.to_mask(false);
    EXPECT_EQ(*from_plain, s);
    EXPECT_EQ(from_list->count(), static_cast<unsigned>(s.cpus().size()));
  }
}

}  // namespace
}  // namespace keel
