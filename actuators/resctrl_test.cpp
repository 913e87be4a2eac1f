// resctrl against temporary trees with the kernel's file formats (this machine has no resctrl):
// Intel RDT with 11 and 20 ways, CDP, Kunpeng 920 MPAM (openEuler), mba_MBps. The tree files hold
// the bare write; `settle()` then does what the kernel does with it (a write names only some lines:
// the others stay; the file prints every line, names right-aligned, values padded). One test runs
// the tasks sync against a real cgroup v1 tasks file, whose one-pid-per-write and ESRCH rules are
// resctrl's.
#include "actuators/resctrl.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "actuators/restore.h"
#include "host/fileio.h"
#include "tests/support/tmp_tree.h"

namespace keel::act {
namespace {

namespace fs = std::filesystem;
using testing::slurp;

// What the kernel holds for one group: its lines, each with values per domain.
using Values = std::vector<std::pair<unsigned, unsigned long long>>;
using KState = std::vector<std::pair<std::string, Values>>;

bool is_mask(const std::string& r) { return r == "L3" || r == "L3CODE" || r == "L3DATA"; }

// A host as resctrl shows it.
struct Host {
  std::vector<std::pair<std::string, std::string>> files;  // under the resctrl root
  KState schemata;                                         // the default group's
  KState fresh;                                            // a new group's (the kernel starts it wide)
  int data_w = 3;                                          // the column width values are padded to
  bool zero_pad = false;                                   // MPAM pads numbers with zeros, x86 with spaces
  std::string super_opts = "rw";                           // mount options (mba_MBps)
};

Values same(std::vector<unsigned> ids, unsigned long long v) {
  Values out;
  for (unsigned id : ids) out.emplace_back(id, v);
  return out;
}

// Intel RDT: one L3 domain per socket (ids 0 and 1), MB min 10 / gran 10.
Host intel(unsigned long long cbm, unsigned min_bits, int data_w) {
  char m[32];
  std::snprintf(m, sizeof m, "%llx\n", cbm);
  Host h;
  h.files = {{"info/last_cmd_status", "ok\n"},
             {"info/L3/cbm_mask", m},
             {"info/L3/min_cbm_bits", std::to_string(min_bits) + "\n"},
             {"info/L3/num_closids", "16\n"},
             {"info/L3/shareable_bits", "0\n"},
             {"info/L3/sparse_masks", "0\n"},
             {"info/MB/min_bandwidth", "10\n"},
             {"info/MB/bandwidth_gran", "10\n"},
             {"info/MB/num_closids", "8\n"},
             {"info/MB/delay_linear", "1\n"},
             {"tasks", "1\n2\n"},
             {"cpus", "3\n"},
             {"cpus_list", "0-1\n"},
             {"mode", "shareable\n"}};
  h.schemata = {{"L3", same({0, 1}, cbm)}, {"MB", same({0, 1}, 100)}};
  h.fresh = h.schemata;
  h.data_w = data_w;
  return h;
}
Host intel11(unsigned min_bits = 1) { return intel(0x7ff, min_bits, 3); }
Host intel20() { return intel(0xfffff, 1, 5); }

// Code/data prioritisation: L3CODE and L3DATA lines instead of L3 (the CLOSIDs are halved).
Host cdp() {
  Host h = intel11();
  h.files.erase(std::remove_if(h.files.begin(), h.files.end(),
                               [](const auto& f) { return f.first.starts_with("info/L3/"); }),
                h.files.end());
  for (const char* r : {"L3CODE", "L3DATA"})
    for (auto [f, v] : std::vector<std::pair<std::string, std::string>>{{"cbm_mask", "7ff\n"},
                                                                        {"min_cbm_bits", "1\n"},
                                                                        {"num_closids", "8\n"},
                                                                        {"shareable_bits", "0\n"}})
      h.files.emplace_back(std::string("info/") + r + "/" + f, v);
  h.schemata = {{"L3CODE", same({0, 1}, 0x7ff)}, {"L3DATA", same({0, 1}, 0x7ff)}, {"MB", same({0, 1}, 100)}};
  h.fresh = h.schemata;
  h.super_opts = "rw,cdp";
  return h;
}

// Kunpeng 920 (openEuler, arm64.mpam): 28 ways, L3 cache ids 1 and 3, MB domains are NUMA nodes 0
// and 1, values zero-padded to 7 columns, MB min 1 / gran 1, and the MPAM lines.
Host kunpeng(bool sparse) {
  Host h;
  h.files = {{"info/last_cmd_status", "ok\n"},
             {"info/L3/cbm_mask", "fffffff\n"},
             {"info/L3/min_cbm_bits", "1\n"},
             {"info/L3/num_closids", "32\n"},
             {"info/L3/sparse_masks", sparse ? "1\n" : "0\n"},
             {"info/MB/min_bandwidth", "1\n"},
             {"info/MB/bandwidth_gran", "1\n"},
             {"info/MB/num_closids", "32\n"},
             {"tasks", "1\n"}};
  h.schemata = {{"L3", same({1, 3}, 0xfffffff)}, {"L3PRI", same({1, 3}, 0)}, {"MB", same({0, 1}, 100)},
                {"MBMIN", same({0, 1}, 0)},      {"MBHDL", same({0, 1}, 1)}, {"MBPRI", same({0, 1}, 3)}};
  h.fresh = h.schemata;
  h.data_w = 7;
  h.zero_pad = true;
  return h;
}

std::string render(const Host& h, const KState& s) {
  size_t name_w = 0;
  for (const auto& [r, v] : s) name_w = std::max(name_w, r.size());
  std::string out;
  char buf[64];
  for (const auto& [r, vals] : s) {
    out.append(name_w - r.size(), ' ');
    out += r;
    out += ':';
    for (size_t i = 0; i < vals.size(); ++i) {
      if (is_mask(r))
        std::snprintf(buf, sizeof buf, "%u=%0*llx", vals[i].first, h.data_w, vals[i].second);
      else if (h.zero_pad)
        std::snprintf(buf, sizeof buf, "%u=%0*llu", vals[i].first, h.data_w, vals[i].second);
      else
        std::snprintf(buf, sizeof buf, "%u=%*llu", vals[i].first, h.data_w, vals[i].second);
      if (i > 0) out += ';';
      out += buf;
    }
    out += "\n";
  }
  return out;
}

// The kernel's handling of a schemata write: each named line's named domains change, nothing else.
void merge_write(KState& s, const std::string& text) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string r = line.substr(0, colon);
    r.erase(0, r.find_first_not_of(' '));
    auto it = std::find_if(s.begin(), s.end(), [&](const auto& l) { return l.first == r; });
    ASSERT_NE(it, s.end()) << "the kernel refuses unknown line " << r;
    std::istringstream doms(line.substr(colon + 1));
    for (std::string d; std::getline(doms, d, ';');) {
      unsigned id = static_cast<unsigned>(std::stoul(d.substr(0, d.find('='))));
      unsigned long long v = std::stoull(d.substr(d.find('=') + 1), nullptr, is_mask(r) ? 16 : 10);
      auto dom =
          std::find_if(it->second.begin(), it->second.end(), [&](const auto& x) { return x.first == id; });
      ASSERT_NE(dom, it->second.end()) << "unknown domain " << id;
      dom->second = v;
    }
  }
}

class ResctrlTree : public ::testing::Test {
 protected:
  void build(Host h) {
    host_ = std::move(h);
    roots_ = SysRoots::under(t_.path());
    rc_ = roots_.resctrl;
    testing::make_tree(rc_, host_.files);
    testing::make_tree(rc_, {{"schemata", render(host_, host_.schemata)}});
    testing::make_tree(
        t_.path(),
        {{"proc/sys/kernel/random/boot_id", "11111111-2222\n"},
         {"proc/self/mountinfo", "22 1 0:21 / /proc rw - proc proc rw\n40 25 0:36 / " + rc_.string() +
                                     " rw,relatime shared:10 - resctrl resctrl " + host_.super_opts + "\n"}});
    kernel_ = {{"", host_.schemata}};
  }
  // A resctrl mkdir: the kernel populates the group; rmdir takes it away.
  DirOps dirs() {
    return DirOps{[this](const fs::path& p) {
                    if (::mkdir(p.c_str(), 0755) != 0) return -1;
                    testing::make_tree(p, {{"schemata", render(host_, host_.fresh)},
                                           {"tasks", ""},
                                           {"cpus", "0\n"},
                                           {"cpus_list", "\n"},
                                           {"mode", "shareable\n"}});
                    kernel_[p.filename().string()] = host_.fresh;
                    return 0;
                  },
                  [this](const fs::path& p) {
                    std::error_code ec;
                    if (!fs::is_directory(p, ec)) return errno = ENOENT, -1;
                    fs::remove_all(p, ec);
                    kernel_.erase(p.filename().string());
                    return ec ? -1 : 0;
                  }};
  }
  // After keel wrote: each schemata file prints what the kernel now holds.
  void settle() {
    for (auto it = kernel_.begin(); it != kernel_.end();) {
      fs::path f = rc_ / it->first / "schemata";
      if (!fs::exists(f)) {
        it = kernel_.erase(it);
        continue;
      }
      std::string now = slurp(f);
      if (now != render(host_, it->second)) {
        merge_write(it->second, now);
        testing::make_tree(f.parent_path(), {{"schemata", render(host_, it->second)}});
      }
      ++it;
    }
  }
  std::string schemata(const std::string& group = "") { return slurp(rc_ / group / "schemata"); }
  std::map<std::string, std::string> snapshot() { return testing::tree_files(t_.path(), "state"); }
  Journal journal() {
    auto j = Journal::open(t_.path() / "state", read_boot_id(roots_.proc));
    EXPECT_TRUE(j) << j.error().message();
    return std::move(*j);
  }
  Resctrl open(KnobWriter& w, unsigned default_min = 0) {
    auto r = Resctrl::open(w, default_min);
    if (!r) ADD_FAILURE() << r.error().message();
    if (!r || !r->has_value()) throw std::runtime_error("resctrl not opened");
    return std::move(**r);
  }
  ResctrlApplied apply(Resctrl& rc, const ResctrlGroupSpec& spec) {
    auto r = rc.apply(spec);
    if (!r) ADD_FAILURE() << r.error().message();
    settle();
    return r.value_or(ResctrlApplied{});
  }
  // The path and value of each change, "path <- value".
  static std::vector<std::string> log(const std::vector<Change>& cs) {
    std::vector<std::string> out;
    for (const auto& c : cs) out.push_back(c.path.rel.string() + " <- " + c.to);
    return out;
  }

  testing::TempDir t_;
  SysRoots roots_;
  fs::path rc_;
  Host host_;
  std::map<std::string, KState> kernel_;
};

using Lines = std::vector<std::string>;

// ---- pure helpers -------------------------------------------------------------------------------

TEST(ResctrlSchemata, ParsesPaddedAndZeroPaddedKernelOutputNumerically) {
  // x86 with 20 ways pads values to 5 columns (masks with zeros, MB with spaces).
  auto intel = parse_schemata("    L3:0=0000f;1=fffff\n    MB:0=   40;1=  100\n");
  ASSERT_TRUE(intel) << intel.error().message();
  ASSERT_EQ(intel->size(), 2u);
  EXPECT_EQ((*intel)[0].resource, "L3");
  EXPECT_EQ(schemata_value("L3", (*intel)[0].domains[0].second).value(), 0xfu);
  EXPECT_EQ(schemata_value("MB", (*intel)[1].domains[0].second).value(), 40u);
  // Kunpeng: cache ids 1 and 3, MB zero-padded decimal (0000050 is fifty, not octal or hex).
  auto kp =
      parse_schemata("   L3:1=fffffff;3=00000ff\n   MB:0=0000050;1=0000100\nMBHDL:0=0000001;1=0000001\n");
  ASSERT_TRUE(kp);
  EXPECT_EQ((*kp)[0].domains[1].first, 3u);
  EXPECT_EQ(schemata_value("L3", (*kp)[0].domains[1].second).value(), 0xffu);
  EXPECT_EQ(schemata_value("MB", (*kp)[1].domains[0].second).value(), 50u);
  EXPECT_EQ(schemata_value("MBHDL", (*kp)[2].domains[0].second).value(), 1u);
  EXPECT_EQ(schemata_value("L3CODE", "7f0").value(), 0x7f0u);
  EXPECT_EQ(schemata_value("L3PRI", "10").value(), 10u);  // a priority is decimal, not a mask
  // Garbage is an error naming what is wrong.
  EXPECT_FALSE(parse_schemata("L3 0=7ff\n"));
  EXPECT_FALSE(parse_schemata("L3:x=7ff\n"));
  EXPECT_FALSE(schemata_value("MB", "5O"));
  EXPECT_FALSE(schemata_value("L3", ""));
}

TEST(ResctrlSchemata, CacheMasksAreCheckedAgainstInfo) {
  ResctrlInfo i;
  i.l3 = true;
  i.cbm_mask = 0x7ff;
  i.l3_ways = 11;
  i.min_cbm_bits = 2;
  EXPECT_TRUE(validate_cbm(i, 0x3));
  EXPECT_TRUE(validate_cbm(i, 0x7f0));
  EXPECT_EQ(validate_cbm(i, 0xf7).error().what, "mask f7 is not contiguous (sparse_masks is 0)");
  EXPECT_EQ(validate_cbm(i, 0x800).error().what, "mask 800 has ways outside cbm_mask 7ff");
  EXPECT_EQ(validate_cbm(i, 0x10).error().what, "mask 10 has fewer than min_cbm_bits 2 ways");
  EXPECT_FALSE(validate_cbm(i, 0));
  i.sparse_masks = true;  // MPAM may allow any set of ways
  EXPECT_TRUE(validate_cbm(i, 0x505));
}

TEST(ResctrlSchemata, MbPercentRoundsToMinPlusStepsLikeTheKernel) {
  ResctrlInfo intel;
  intel.mb = true;
  intel.min_bandwidth = 10;
  intel.bandwidth_gran = 10;
  EXPECT_EQ(round_mb(intel, 1).value(), 10u);  // clamped to min_bandwidth
  EXPECT_EQ(round_mb(intel, 10).value(), 10u);
  EXPECT_EQ(round_mb(intel, 11).value(), 20u);  // rounded up, as the kernel does
  EXPECT_EQ(round_mb(intel, 35).value(), 40u);
  EXPECT_EQ(round_mb(intel, 100).value(), 100u);
  EXPECT_FALSE(round_mb(intel, 0));
  EXPECT_FALSE(round_mb(intel, 101));
  ResctrlInfo kp;
  kp.mb = true;
  kp.min_bandwidth = 1;
  kp.bandwidth_gran = 1;
  EXPECT_EQ(round_mb(kp, 1).value(), 1u);
  EXPECT_EQ(round_mb(kp, 37).value(), 37u);
  ResctrlInfo odd;  // min 5, steps of 10: 5, 15, 25, ...
  odd.min_bandwidth = 5;
  odd.bandwidth_gran = 10;
  EXPECT_EQ(round_mb(odd, 6).value(), 15u);
  EXPECT_EQ(round_mb(odd, 99).value(), 100u);
}

TEST(ResctrlSchemata, LinesAsWrittenParseBackToTheSameNumbers) {
  EXPECT_EQ(format_schemata_line("L3", {{0, 0x7f0}, {1, 0xf}}), "L3:0=7f0;1=f");
  EXPECT_EQ(format_schemata_line("MB", {{1, 50}, {3, 100}}), "MB:1=50;3=100");
  EXPECT_EQ(format_schemata_line("L3PRI", {{0, 10}}), "L3PRI:0=10");  // a priority is decimal
  auto back = parse_schemata(format_schemata_line("L3CODE", {{0, 0xfffffff}, {2, 0x3}}) + "\n");
  ASSERT_TRUE(back && back->size() == 1u);
  EXPECT_EQ((*back)[0].domains[1].first, 2u);
  EXPECT_EQ(schemata_value("L3CODE", (*back)[0].domains[0].second).value(), 0xfffffffu);
}

// ---- Intel RDT -------------------------------------------------------------------------------------

TEST_F(ResctrlTree, NotMountedIsNoResctrlAndNoError) {
  roots_ = SysRoots::under(t_.path());
  KnobWriter w(roots_, Mode::observe, nullptr);
  auto r = Resctrl::open(w);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_FALSE(r->has_value());
}

TEST_F(ResctrlTree, IntelElevenWaysSharedGroupTakesTheTopWaysAndARoundedMbOnEveryDomain) {
  build(intel11());
  auto before_default = schemata();
  Journal j = journal();
  KnobWriter w(roots_, Mode::enforce, &j, dirs());
  Resctrl rc = open(w);
  EXPECT_EQ(rc.info().l3_ways, 11u);
  auto a = apply(rc, {.name = "keel-web", .l3_ways = 4, .mb_percent = 35});
  EXPECT_TRUE(a.created);
  EXPECT_TRUE(a.changed);
  EXPECT_EQ(log(w.take_changes()),
            (Lines{"keel-web <- (mkdir)", "keel-web/schemata <- L3:0=780;1=780\nMB:0=40;1=40"}));
  EXPECT_EQ(schemata("keel-web"), "L3:0=780;1=780\nMB:0= 40;1= 40\n");
  EXPECT_EQ(schemata(), before_default);  // sharing takes nothing from the default group
  // The journal: the group (so restore removes it) before its schemata.
  ASSERT_EQ(j.entries().size(), 2u);
  EXPECT_EQ(j.entries()[0].kind, EntryKind::created_dir);
  // Values in place (read back padded) are no write.
  auto again = apply(rc, {.name = "keel-web", .l3_ways = 4, .mb_percent = 35});
  EXPECT_FALSE(again.created);
  EXPECT_FALSE(again.changed);
  EXPECT_TRUE(w.take_changes().empty());
}

TEST_F(ResctrlTree, IntelExclusiveWaysLeaveTheDefaultGroupFirstAndNeverOverlap) {
  build(intel11(2));
  Journal j = journal();
  KnobWriter w(roots_, Mode::enforce, &j, dirs());
  Resctrl rc = open(w);
  apply(rc, {.name = "keel-db", .l3_ways = 3, .exclusive = true});
  EXPECT_EQ(log(w.take_changes()),
            (Lines{"keel-db <- (mkdir)", "schemata <- L3:0=7f8;1=7f8", "keel-db/schemata <- L3:0=7;1=7"}));
  EXPECT_EQ(schemata(), "L3:0=7f8;1=7f8\nMB:0=100;1=100\n");
  // The default group's original is journaled whole, ready to be written back.
  ASSERT_EQ(j.entries().size(), 3u);
  EXPECT_EQ(j.entries()[1].original, render(host_, host_.schemata));

  apply(rc, {.name = "keel-web", .l3_ways = 2});                       // shares the default group's top ways
  apply(rc, {.name = "keel-batch", .l3_ways = 2, .exclusive = true});  // stacks above keel-db
  w.take_changes();
  EXPECT_EQ(schemata("keel-db"), "L3:0=007;1=007\nMB:0=100;1=100\n");
  EXPECT_EQ(schemata("keel-batch"), "L3:0=018;1=018\nMB:0=100;1=100\n");
  EXPECT_EQ(schemata(), "L3:0=7e0;1=7e0\nMB:0=100;1=100\n");
  EXPECT_EQ(schemata("keel-web"), "L3:0=600;1=600\nMB:0=100;1=100\n");

  // keel-db grows: keel-batch moves up out of its way before keel-db takes the freed ways, and the
  // default group shrinks before keel-batch moves into its ways.
  apply(rc, {.name = "keel-db", .l3_ways = 5, .exclusive = true});
  EXPECT_EQ(log(w.take_changes()), (Lines{"schemata <- L3:0=780;1=780", "keel-batch/schemata <- L3:0=60;1=60",
                                          "keel-db/schemata <- L3:0=1f;1=1f"}));
  EXPECT_EQ(schemata("keel-web"), "L3:0=600;1=600\nMB:0=100;1=100\n");  // still inside the default's ways
}

TEST_F(ResctrlTree, IntelTwentyWaysReleaseRepacksTheExclusiveWaysAndGivesThemBack) {
  build(intel20());
  auto before = snapshot();
  Journal j = journal();
  KnobWriter w(roots_, Mode::enforce, &j, dirs());
  Resctrl rc = open(w);
  apply(rc, {.name = "keel-a", .l3_ways = 4, .exclusive = true});
  apply(rc, {.name = "keel-b", .l3_ways = 6, .exclusive = true});
  EXPECT_EQ(schemata(), "L3:0=ffc00;1=ffc00\nMB:0=  100;1=  100\n");
  EXPECT_EQ(schemata("keel-b"), "L3:0=003f0;1=003f0\nMB:0=  100;1=  100\n");
  w.take_changes();

  auto gone = rc.release("keel-a");
  ASSERT_TRUE(gone) << gone.error().message();
  EXPECT_TRUE(*gone);
  settle();
  // keel-b gives up the ways the default group gets back before the default group grows.
  EXPECT_EQ(log(w.take_changes()), (Lines{"keel-a <- (rmdir)", "keel-b/schemata <- L3:0=3f;1=3f",
                                          "schemata <- L3:0=fffc0;1=fffc0"}));
  ASSERT_TRUE(rc.release("keel-b"));
  settle();
  EXPECT_EQ(snapshot(), before);  // every way back, the file as the kernel first printed it
  auto twice = rc.release("keel-b");
  ASSERT_TRUE(twice);
  EXPECT_FALSE(*twice);
}

TEST_F(ResctrlTree, RequestsTheHardwareCannotSatisfyAreErrorsThatWriteNothing) {
  build(intel11(2));
  Journal j = journal();
  KnobWriter w(roots_, Mode::enforce, &j, dirs());
  Resctrl rc = open(w);
  apply(rc, {.name = "keel-db", .l3_ways = 6, .exclusive = true});
  w.take_changes();
  auto before = snapshot();
  size_t journaled = j.entries().size();
  auto refused = [&](const ResctrlGroupSpec& s) {
    auto r = rc.apply(s);
    if (r) return std::string("(applied)");
    return r.error().message();
  };
  EXPECT_EQ(refused({.name = "keel-x", .l3_ways = 12}),
            "resctrl group 'keel-x': l3_ways 12 is outside [2, 11] (min_cbm_bits, ways in cbm_mask 7ff)");
  EXPECT_EQ(refused({.name = "keel-x", .l3_ways = 1}),
            "resctrl group 'keel-x': l3_ways 1 is outside [2, 11] (min_cbm_bits, ways in cbm_mask 7ff)");
  // 5 ways are left, the default group keeps 2: 3 can be taken.
  EXPECT_EQ(
      refused({.name = "keel-x", .l3_ways = 4, .exclusive = true}),
      "resctrl group 'keel-x' wants 4 exclusive ways of L3 domain 0 but only 3 can be taken: the default "
      "group keeps at least 2 of its 11 (mask 7ff), the rest is already exclusive");
  EXPECT_EQ(refused({.name = "keel-x", .l3_ways = 6}),
            "resctrl group 'keel-x' wants 6 ways of L3 domain 0 but only 5 are not exclusive (mask 7c0)");
  // keel-db growing would take the default group below its minimum.
  EXPECT_NE(refused({.name = "keel-db", .l3_ways = 10, .exclusive = true}).find("only 9 can be taken"),
            std::string::npos);
  EXPECT_NE(refused({.name = "keel-x", .mb_percent = 0}).find("MB percent 0 is outside [1, 100]"),
            std::string::npos);
  EXPECT_NE(refused({.name = "keel-x", .mb_percent = 101}).find("outside [1, 100]"), std::string::npos);
  EXPECT_NE(refused({.name = "keel-x", .mb_mbps = 500}).find("needs resctrl mounted with -o mba_MBps"),
            std::string::npos);
  EXPECT_NE(refused({.name = "keel-x", .exclusive = true}).find("exclusive needs l3_ways"),
            std::string::npos);
  EXPECT_NE(refused({.name = "info", .mb_percent = 50}).find("not a usable group directory name"),
            std::string::npos);
  EXPECT_NE(refused({.name = "a/b", .mb_percent = 50}).find("not a usable group directory name"),
            std::string::npos);
  EXPECT_NE(refused({.name = "keel-x", .mb_pri = 8}).find("mb_pri is 0-7"), std::string::npos);
  EXPECT_EQ(snapshot(), before);
  EXPECT_TRUE(w.take_changes().empty());
  EXPECT_EQ(j.entries().size(), journaled);
  // The refused keel-db growth left its old size in force: a later apply still fits around it.
  apply(rc, {.name = "keel-x", .l3_ways = 3, .exclusive = true});
  EXPECT_EQ(schemata("keel-x"), "L3:0=1c0;1=1c0\nMB:0=100;1=100\n");
}

TEST_F(ResctrlTree, CdpWritesCodeAndDataLinesNeverL3) {
  build(cdp());
  Journal j = journal();
  KnobWriter w(roots_, Mode::enforce, &j, dirs());
  Resctrl rc = open(w);
  EXPECT_TRUE(rc.info().cdp);
  apply(rc, {.name = "keel-db", .l3_ways = 2, .exclusive = true, .mb_percent = 50});
  EXPECT_EQ(log(w.take_changes()),
            (Lines{"keel-db <- (mkdir)", "schemata <- L3CODE:0=7fc;1=7fc\nL3DATA:0=7fc;1=7fc",
                   "keel-db/schemata <- L3CODE:0=3;1=3\nL3DATA:0=3;1=3\nMB:0=50;1=50"}));
  EXPECT_EQ(schemata(), "L3CODE:0=7fc;1=7fc\nL3DATA:0=7fc;1=7fc\n    MB:0=100;1=100\n");
  EXPECT_EQ(schemata("keel-db"), "L3CODE:0=003;1=003\nL3DATA:0=003;1=003\n    MB:0= 50;1= 50\n");
}

TEST_F(ResctrlTree, MpamExtrasAreSkippedWhereTheSchemataHasNoSuchLine) {
  build(intel11());
  Journal j = journal();
  KnobWriter w(roots_, Mode::enforce, &j, dirs());
  Resctrl rc = open(w);
  auto a =
      apply(rc, {.name = "keel-web", .mb_percent = 50, .mb_min = 20, .mb_hdl = 1, .mb_pri = 5, .l3_pri = 2});
  EXPECT_EQ(a.unsupported, (Lines{"MBMIN", "MBHDL", "MBPRI", "L3PRI"}));
  EXPECT_EQ(log(w.take_changes()), (Lines{"keel-web <- (mkdir)", "keel-web/schemata <- MB:0=50;1=50"}));
}

TEST_F(ResctrlTree, MbaMbpsTakesMibPerSecondAndRefusesPercent) {
  Host h = intel11();
  h.super_opts = "rw,mba_MBps";
  h.schemata[1].second = same({0, 1}, 4294967295ULL);  // the kernel's "no limit" under mba_MBps
  h.fresh = h.schemata;
  build(h);
  Journal j = journal();
  KnobWriter w(roots_, Mode::enforce, &j, dirs());
  Resctrl rc = open(w);
  EXPECT_TRUE(rc.info().mba_mbps);
  auto bad = rc.apply({.name = "keel-web", .mb_percent = 50});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("mounted with mba_MBps"), std::string::npos);
  apply(rc, {.name = "keel-web", .mb_mbps = 2048});
  EXPECT_EQ(schemata("keel-web"), "L3:0=7ff;1=7ff\nMB:0=2048;1=2048\n");
}

// ---- Kunpeng 920 MPAM ------------------------------------------------------------------------------

TEST_F(ResctrlTree, KunpengNonContiguousIdsZeroPaddedValuesAndMpamLines) {
  build(kunpeng(false));
  Journal j = journal();
  KnobWriter w(roots_, Mode::enforce, &j, dirs());
  Resctrl rc = open(w);
  EXPECT_EQ(rc.info().l3_ways, 28u);
  ResctrlGroupSpec redis{.name = "keel-redis",
                         .l3_ways = 4,
                         .exclusive = true,
                         .mb_percent = 50,
                         .mb_min = 20,
                         .mb_hdl = 1,
                         .mb_pri = 5,
                         .l3_pri = 2};
  auto a = apply(rc, redis);
  EXPECT_TRUE(a.unsupported.empty());
  // MBHDL already reads 1: no write for it.
  EXPECT_EQ(
      log(w.take_changes()),
      (Lines{
          "keel-redis <- (mkdir)", "schemata <- L3:1=ffffff0;3=ffffff0",
          "keel-redis/schemata <- L3:1=f;3=f\nMB:0=50;1=50\nMBMIN:0=20;1=20\nMBPRI:0=5;1=5\nL3PRI:1=2;3=2"}));
  EXPECT_EQ(schemata("keel-redis"),
            "   L3:1=000000f;3=000000f\nL3PRI:1=0000002;3=0000002\n   MB:0=0000050;1=0000050\n"
            "MBMIN:0=0000020;1=0000020\nMBHDL:0=0000001;1=0000001\nMBPRI:0=0000005;1=0000005\n");
  // Read back zero-padded, compared as numbers: no write.
  EXPECT_FALSE(apply(rc, redis).changed);
  // MPAM reads MB back through a hardware fraction: one off is in place, more is not.
  kernel_["keel-redis"][2].second = same({0, 1}, 49);
  testing::make_tree(rc_ / "keel-redis", {{"schemata", render(host_, kernel_["keel-redis"])}});
  EXPECT_FALSE(apply(rc, redis).changed);
  kernel_["keel-redis"][2].second = same({0, 1}, 47);
  testing::make_tree(rc_ / "keel-redis", {{"schemata", render(host_, kernel_["keel-redis"])}});
  w.take_changes();
  EXPECT_TRUE(apply(rc, redis).changed);
  EXPECT_EQ(log(w.take_changes()), (Lines{"keel-redis/schemata <- MB:0=50;1=50"}));
}

TEST_F(ResctrlTree, KunpengSparseMasksDecideWhetherAHoledDefaultMaskCanBeCarved) {
  for (bool sparse : {false, true}) {
    SCOPED_TRACE(sparse ? "sparse_masks 1" : "sparse_masks 0");
    Host h = kunpeng(sparse);
    h.schemata[0].second = same({1, 3}, 0xff0fff0);  // another tool left the default group with a hole
    build(h);
    KnobWriter w(roots_, Mode::observe, nullptr, dirs());
    Resctrl rc = open(w);
    auto r = rc.apply({.name = "keel-redis", .l3_ways = 4, .exclusive = true});
    if (sparse) {
      ASSERT_TRUE(r) << r.error().message();
      EXPECT_EQ(log(w.changes())[1], "schemata <- L3:1=ff0ff00;3=ff0ff00");
      EXPECT_EQ(log(w.changes())[2], "keel-redis/schemata <- L3:1=f0;3=f0");
    } else {
      ASSERT_FALSE(r);
      EXPECT_EQ(r.error().message(),
                "the default group's L3 domain 1: mask ff0ff00 is not contiguous (sparse_masks is 0)");
      EXPECT_TRUE(w.changes().empty());
    }
  }
}

// ---- tasks ------------------------------------------------------------------------------------------

TEST_F(ResctrlTree, TasksFollowTheGivenListOneTidPerWrite) {
  build(intel11());
  Journal j = journal();
  KnobWriter w(roots_, Mode::enforce, &j, dirs());
  Resctrl rc = open(w);
  apply(rc, {.name = "keel-web", .mb_percent = 50});
  w.take_changes();
  auto s = rc.sync_tasks("keel-web", {102, 101, 102});
  ASSERT_TRUE(s) << s.error().message();
  EXPECT_EQ(s->added, (std::vector<int>{101, 102}));
  EXPECT_EQ(slurp(rc_ / "keel-web/tasks"), "101\n102\n");  // two writes to a file opened O_APPEND
  EXPECT_EQ(w.take_changes().size(), 2u);
  // Someone else put 103 in; 101 left the workload; 104 joined.
  testing::make_tree(rc_, {{"keel-web/tasks", "101\n102\n103\n"}});
  s = rc.sync_tasks("keel-web", {102, 104});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->already, (std::vector<int>{102}));
  EXPECT_EQ(s->added, (std::vector<int>{104}));
  EXPECT_EQ(s->removed, (std::vector<int>{101, 103}));
  EXPECT_TRUE(s->exited.empty());
  EXPECT_EQ(slurp(rc_ / "tasks"), "1\n2\n101\n103\n");  // back to the default group
  EXPECT_EQ(j.entries().size(), 2u);                    // membership is not journaled: the group is
  // Not a thread id: nothing written (0 would mean "the writer itself" to the kernel).
  auto before = snapshot();
  EXPECT_FALSE(rc.sync_tasks("keel-web", {105, 0}));
  EXPECT_EQ(snapshot(), before);
  // A group that does not exist is an error in enforce mode.
  EXPECT_FALSE(rc.sync_tasks("keel-none", {105}));
}

// The kernel side of ESRCH, with a real tasks file: cgroup v1's takes one pid per write and refuses
// an exited one with ESRCH, exactly as resctrl's does. The test mounts a v1 hierarchy of its own with
// no controller (name=...), which the kernel gives on v1 and v2 hosts alike, and removes it after.
TEST(ResctrlTasksOnCgroupV1, AnExitedTaskIsCountedNotAnErrorAndLiveOnesMove) {
  KEEL_REQUIRE_ROOT();
  testing::TempDir mnt;
  const std::string hierarchy = "keel_resctrl_test_" + std::to_string(::getpid());
  if (::mount("cgroup", mnt.path().c_str(), "cgroup", 0, ("none,name=" + hierarchy).c_str()) != 0)
    GTEST_SKIP() << "skipped: this kernel mounts no named cgroup v1 hierarchy: " << std::strerror(errno);
  fs::path root = mnt.path() / "keel-resctrl-test";
  struct Cleanup {
    fs::path mnt, root;
    pid_t child = -1;
    ~Cleanup() {
      if (child > 0) {
        ::kill(child, SIGKILL);
        ::waitpid(child, nullptr, 0);
      }
      // The child's tasks back in the mount's root before the cgroups go; then the hierarchy with them.
      ::rmdir((root / "g").c_str());
      ::rmdir(root.c_str());
      ::umount2(mnt.c_str(), 0);
    }
  } cleanup{mnt.path(), root};
  ASSERT_EQ(::mkdir(root.c_str(), 0755), 0) << std::strerror(errno);
  ASSERT_EQ(::mkdir((root / "g").c_str(), 0755), 0) << std::strerror(errno);
  pid_t live = ::fork();
  if (live == 0) {
    for (;;) ::pause();
  }
  ASSERT_GT(live, 0);
  cleanup.child = live;
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  ASSERT_EQ(::waitpid(dead, nullptr, 0), dead);  // reaped: the pid names no task now

  SysRoots roots;
  roots.resctrl = root;  // the test cgroup stands in for the resctrl root, "g" for a group
  KnobWriter w(roots, Mode::enforce, nullptr);
  auto s = sync_group_tasks(w, "g", {live, dead});
  ASSERT_TRUE(s) << s.error().message();
  EXPECT_EQ(s->added, (std::vector<int>{live}));
  EXPECT_EQ(s->exited, (std::vector<int>{dead}));
  EXPECT_EQ(std::string(trim(slurp(root / "g/tasks"))), std::to_string(live));
  s = sync_group_tasks(w, "g", {});
  ASSERT_TRUE(s) << s.error().message();
  EXPECT_EQ(s->removed, (std::vector<int>{live}));
  EXPECT_EQ(std::string(trim(slurp(root / "tasks"))), std::to_string(live));
  EXPECT_EQ(std::string(trim(slurp(root / "g/tasks"))), "");
}

// ---- CLOSIDs, refusals ------------------------------------------------------------------------------

TEST_F(ResctrlTree, RunningOutOfClosidsIsAClearErrorAndCreatesNothing) {
  Host h = intel11();
  for (auto& [f, v] : h.files)
    if (f == "info/L3/num_closids") v = "4\n";
  build(h);
  for (const char* g : {"other1", "other2", "keel-old"})
    testing::make_tree(rc_ / g, {{"schemata", render(host_, host_.fresh)}, {"tasks", ""}});
  auto before = snapshot();
  Journal j = journal();
  KnobWriter w(roots_, Mode::enforce, &j, dirs());
  Resctrl rc = open(w);
  auto r = rc.apply({.name = "keel-new", .mb_percent = 50});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(),
            rc_.string() +
                ": no free CLOSID for resctrl group 'keel-new': all 4 are in use (the default "
                "group and keel-old, other1, other2)");
  EXPECT_EQ(snapshot(), before);
  EXPECT_FALSE(fs::exists(rc_ / "keel-new"));
  EXPECT_TRUE(j.entries().empty());
  // An existing group needs no new CLOSID.
  EXPECT_TRUE(rc.apply({.name = "keel-old", .mb_percent = 50}));
}

TEST_F(ResctrlTree, MkdirsEnospcIsReportedAsNoFreeClosid) {
  build(intel11());
  Journal j = journal();
  KnobWriter w(
      roots_, Mode::enforce, &j,
      DirOps{[](const fs::path&) { return errno = ENOSPC, -1; }, [](const fs::path&) { return -1; }});
  Resctrl rc = open(w);
  auto r = rc.apply({.name = "keel-new", .mb_percent = 50});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("no free CLOSID"), std::string::npos) << r.error().message();
  EXPECT_TRUE(j.entries().empty());
}

TEST_F(ResctrlTree, ARefusedSchemataWriteCarriesLastCmdStatus) {
  build(intel11());
  testing::make_tree(rc_, {{"info/last_cmd_status", "Unknown or unsupported resource name 'L3'\n"}});
  // The kernel's refusal, simulated: the default group's schemata is a sealed memfd (reads work,
  // writes fail).
  int fd = ::memfd_create("schemata", MFD_ALLOW_SEALING | MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::string text = render(host_, host_.schemata);
  ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ASSERT_EQ(::fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW), 0);
  fs::remove(rc_ / "schemata");
  fs::create_symlink("/proc/self/fd/" + std::to_string(fd), rc_ / "schemata");
  Journal j = journal();
  KnobWriter w(roots_, Mode::enforce, &j, dirs());
  Resctrl rc = open(w);
  auto r = rc.apply({.name = "keel-db", .l3_ways = 2, .exclusive = true});
  ::close(fd);
  ASSERT_FALSE(r);
  std::string m = r.error().message();
  EXPECT_NE(m.find((rc_ / "schemata").string()), std::string::npos) << m;
  EXPECT_NE(m.find("'L3:0=7fc;1=7fc'"), std::string::npos) << m;
  EXPECT_NE(m.find("last_cmd_status: Unknown or unsupported resource name 'L3'"), std::string::npos) << m;
  // Nothing reached the group: the default group is written first.
  EXPECT_EQ(slurp(rc_ / "keel-db/schemata"), render(host_, host_.fresh));
}

TEST_F(ResctrlTree, ChangesWaitForAnotherToolsFlockOnTheResctrlRoot) {
  build(intel11());
  Journal j = journal();
  KnobWriter w(roots_, Mode::enforce, &j, dirs());
  Resctrl rc = open(w);
  int fd = ::open(rc_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);  // another tool mid read-modify-write
  auto before = snapshot();
  std::atomic<bool> done{false};
  std::thread t([&] {
    EXPECT_TRUE(rc.apply({.name = "keel-db", .l3_ways = 2, .exclusive = true}));
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  bool finished_early = done;
  auto during = snapshot();
  ::flock(fd, LOCK_UN);
  ::close(fd);
  t.join();
  EXPECT_FALSE(finished_early);
  EXPECT_EQ(during, before);  // not even the mkdir
  EXPECT_TRUE(done);
  EXPECT_TRUE(fs::exists(rc_ / "keel-db"));
}

// ---- observe mode and restore over every tree ---------------------------------------------------

struct Case {
  const char* name;
  Host (*host)();
  ResctrlGroupSpec spec;
  Lines writes;  // the change log observe mode must show
};

std::vector<Case> cases() {
  return {
      {"intel11",
       [] { return intel11(); },
       {.name = "keel-db", .l3_ways = 3, .exclusive = true, .mb_percent = 35},
       {"keel-db <- (mkdir)", "schemata <- L3:0=7f8;1=7f8", "keel-db/schemata <- L3:0=7;1=7\nMB:0=40;1=40",
        "keel-db/tasks <- 4242"}},
      {"intel20",
       intel20,
       {.name = "keel-db", .l3_ways = 5, .exclusive = true, .mb_percent = 100},
       {"keel-db <- (mkdir)", "schemata <- L3:0=fffe0;1=fffe0",
        "keel-db/schemata <- L3:0=1f;1=1f\nMB:0=100;1=100", "keel-db/tasks <- 4242"}},
      {"cdp",
       cdp,
       {.name = "keel-db", .l3_ways = 1, .exclusive = true},
       {"keel-db <- (mkdir)", "schemata <- L3CODE:0=7fe;1=7fe\nL3DATA:0=7fe;1=7fe",
        "keel-db/schemata <- L3CODE:0=1;1=1\nL3DATA:0=1;1=1", "keel-db/tasks <- 4242"}},
      {"kunpeng",
       [] { return kunpeng(false); },
       {.name = "keel-db", .l3_ways = 8, .exclusive = true, .mb_percent = 30, .mb_hdl = 0, .mb_pri = 7},
       {"keel-db <- (mkdir)", "schemata <- L3:1=fffff00;3=fffff00",
        "keel-db/schemata <- L3:1=ff;3=ff\nMB:0=30;1=30\nMBHDL:0=0;1=0\nMBPRI:0=7;1=7",
        "keel-db/tasks <- 4242"}},
  };
}

TEST_F(ResctrlTree, ObserveModeOverEachTreeWritesNothingAndLogsEveryWrite) {
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    build(c.host());
    auto before = snapshot();
    KnobWriter w(roots_, Mode::observe, nullptr, dirs());
    Resctrl rc = open(w);
    auto a = rc.apply(c.spec);
    ASSERT_TRUE(a) << a.error().message();
    EXPECT_TRUE(a->created);
    ASSERT_TRUE(rc.sync_tasks(c.spec.name, {4242}));
    ASSERT_TRUE(rc.apply(c.spec));  // the next tick computes the same again
    EXPECT_EQ(snapshot(), before);  // byte for byte
    EXPECT_FALSE(fs::exists(rc_ / c.spec.name));
    EXPECT_FALSE(fs::exists(t_.path() / "state"));
    auto logged = log(w.changes());
    ASSERT_GE(logged.size(), c.writes.size());
    EXPECT_EQ(Lines(logged.begin(), logged.begin() + static_cast<std::ptrdiff_t>(c.writes.size())), c.writes);
    for (const auto& ch : w.changes()) EXPECT_FALSE(ch.written) << ch.path.str();
    fs::remove_all(t_.path() / "sys");
    fs::remove_all(t_.path() / "proc");
  }
}

TEST_F(ResctrlTree, RestoreAfterApplyGivesEachTreeBackAndRemovesKeelsGroups) {
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    build(c.host());
    auto before = snapshot();
    {
      Journal j = journal();
      KnobWriter w(roots_, Mode::enforce, &j, dirs());
      Resctrl rc = open(w);
      apply(rc, c.spec);
      apply(rc, {.name = "keel-web", .l3_ways = 1});
      ASSERT_TRUE(rc.sync_tasks(c.spec.name, {4242}));
      EXPECT_NE(snapshot(), before);
      EXPECT_NE(schemata(), before.at((rc_ / "schemata").lexically_relative(t_.path()).string()));
    }
    Journal j = journal();  // as `keel restore` would
    auto rep = restore(roots_, j, dirs());
    EXPECT_TRUE(rep.failed.empty()) << rep.failed[0].message();
    EXPECT_EQ(rep.restored, 3u);  // two groups removed, the default group's schemata written back
    EXPECT_EQ(snapshot(), before);
    EXPECT_FALSE(fs::exists(rc_ / c.spec.name));
    EXPECT_FALSE(fs::exists(rc_ / "keel-web"));
    EXPECT_TRUE(j.entries().empty());
    fs::remove_all(t_.path() / "sys");
    fs::remove_all(t_.path() / "proc");
    fs::remove_all(t_.path() / "state");
  }
}

// ---------------------------------------------------------------------------------------------
// Group names

// "a/b-c" and "a-b/c" both became keel-a-b-c: two instances in one group. The mapping is one-to-one
// (checked over every instance of up to 5 bytes from the bytes that matter), each name one directory
// of at most NAME_MAX bytes, and long instances that differ get different names.
TEST(ResctrlGroupName, DistinctInstancesNeverShareAGroup) {
  EXPECT_EQ(resctrl_group_name("redis"), "keel-redis");
  EXPECT_EQ(resctrl_group_name("batch/job-1"), "keel-batch+job-1");
  EXPECT_EQ(resctrl_group_name("k8s/default/web-0"), "keel-k8s+default+web-0");
  EXPECT_NE(resctrl_group_name("a/b-c"), resctrl_group_name("a-b/c"));
  EXPECT_EQ(resctrl_group_name("a b\n%+~"), "keel-a%20b%0A%25%2B%7E");

  auto valid = [](const std::string& n) {
    return !n.empty() && n.size() <= 255 && n.starts_with("keel-") &&
           n.find_first_of(std::string("/\n\0", 3)) == std::string::npos;
  };
  const std::string alphabet("a-/+%~.\n\0\xff", 10);
  std::map<std::string, std::string> owner;  // name -> instance
  std::vector<std::string> level = {""};
  for (int len = 1; len <= 5; ++len) {
    std::vector<std::string> next;
    for (const std::string& base : level)
      for (char c : alphabet) next.push_back(base + c);
    for (const std::string& inst : next) {
      const std::string name = resctrl_group_name(inst);
      ASSERT_TRUE(valid(name)) << name;
      auto [it, added] = owner.emplace(name, inst);
      ASSERT_TRUE(added) << "'" << inst << "' and '" << it->second << "' share " << name;
    }
    level = std::move(next);
  }

  // Long ones: cut to NAME_MAX with a hash of the whole; never half an escape before the '~'.
  std::set<std::string> names, instances;
  for (std::string tail : {"", "a", "b", "/", "-", "%", "\n"}) {
    for (size_t len : {240u, 250u, 251u, 300u, 4000u}) {
      for (const std::string& fill : {std::string("x"), std::string("/"), std::string(" ")}) {
        std::string inst;
        while (inst.size() < len) inst += fill;
        inst += tail;
        const std::string name = resctrl_group_name(inst);
        ASSERT_TRUE(valid(name)) << name.size();
        if (instances.insert(inst).second) {
          EXPECT_TRUE(names.insert(name).second) << inst.size() << " " << tail;
        }
        if (const size_t tilde = name.find('~');
            tilde != std::string::npos) {  // cut: '~' is escaped otherwise
          ASSERT_EQ(tilde + 17, name.size()) << name;
          const size_t pct = name.rfind('%');
          if (pct != std::string::npos) {
            EXPECT_LE(pct + 3, tilde) << name;
          }
        }
      }
    }
  }
  // Every name is a directory the kernel (here: a temporary directory) makes.
  testing::TempDir t;
  for (const std::string& n : names) ASSERT_EQ(::mkdir((t.path() / n).c_str(), 0755), 0) << n;
}

}  // namespace
}  // namespace keel::act
