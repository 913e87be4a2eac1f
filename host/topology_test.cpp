#include "host/topology.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "host/fileio.h"
#include "tests/support/tmp_tree.h"

namespace keel {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

CpuSet cpus(std::string_view list) { return CpuSet::parse_list(list).value(); }

Topology shape(std::string_view spec) {
  auto t = Topology::synthetic(spec);
  EXPECT_TRUE(t.has_value()) << spec << ": " << (t ? "" : t.error().message());
  return t.value();
}

size_t occurrences(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1)) ++n;
  return n;
}

// Every core's PUs share one L3 domain, NUMA node and package, and each PU points back at its core.
void expect_consistent(const Topology& t) {
  for (const Pu& p : t.pus()) {
    const Core& c = t.cores()[p.core];
    EXPECT_TRUE(c.cpus.contains(p.os));
    EXPECT_EQ(c.l3, p.l3);
    EXPECT_EQ(c.numa, p.numa);
    EXPECT_EQ(c.package, p.package);
    EXPECT_TRUE(t.numa_nodes()[p.numa].cpus.contains(p.os));
    EXPECT_TRUE(t.l3_domains()[p.l3].cpus.contains(p.os));
    EXPECT_TRUE(t.packages()[p.package].cpus.contains(p.os));
  }
}

TEST(TopologySynthetic, KunpengLikeHostHas256PusIn4NumaNodes) {
  Topology t = shape("pack:2 numa:2 l3:1 core:32 pu:2");
  EXPECT_EQ(t.pus().size(), 256u);
  EXPECT_EQ(t.cores().size(), 128u);
  EXPECT_EQ(t.numa_nodes().size(), 4u);
  EXPECT_EQ(t.l3_domains().size(), 4u);
  EXPECT_EQ(t.packages().size(), 2u);
  EXPECT_EQ(t.smt_width(), 2u);
  EXPECT_EQ(t.online(), CpuSet::range(0, 255));
  for (unsigned n = 0; n < 4; ++n) {
    EXPECT_EQ(t.numa_nodes()[n].cpus, CpuSet::range(64 * n, 64 * n + 63)) << "node " << n;
    EXPECT_EQ(t.numa_nodes()[n].cores.size(), 32u);
    // One L3 per NUMA node (CPU die), as on Kunpeng 920.
    EXPECT_EQ(t.l3_domains()[n].cpus, t.numa_nodes()[n].cpus);
  }
  EXPECT_EQ(t.packages()[1].cpus, CpuSet::range(128, 255));
  EXPECT_EQ(t.siblings(0), cpus("0-1"));
  EXPECT_EQ(t.siblings(255), cpus("254-255"));
  EXPECT_EQ(t.find_pu(130)->numa, 2u);
  EXPECT_EQ(t.find_pu(130)->package, 1u);
  EXPECT_EQ(t.l3_domains()[0].size_bytes, 16u << 20);
  EXPECT_GT(t.numa_nodes()[0].memory_bytes, 0u);
  expect_consistent(t);
}

TEST(TopologySynthetic, X86StyleNumberingPutsSiblingsHalfTheHostApart) {
  Topology t = shape("pack:2 numa:2 l3:1 core:32 pu:2(indexes=2*128:1*2)");
  EXPECT_EQ(t.siblings(0), cpus("0,128"));
  EXPECT_EQ(t.siblings(161), cpus("33,161"));
  EXPECT_EQ(t.numa_nodes()[1].cpus, cpus("32-63,160-191"));
  expect_consistent(t);
}

TEST(TopologySynthetic, SeedsVmWith32Vcpus) {
  Topology t = shape("pack:1 numa:1 l3:1 core:16 pu:2");
  EXPECT_EQ(t.pus().size(), 32u);
  EXPECT_EQ(t.cores().size(), 16u);
  EXPECT_EQ(t.numa_nodes().size(), 1u);
  EXPECT_EQ(t.siblings(2), cpus("2-3"));
  expect_consistent(t);
}

TEST(TopologySynthetic, DualSocketHyperThreadedXeon) {
  Topology t = shape("pack:2 numa:1 l3:1 core:8 pu:2");
  EXPECT_EQ(t.pus().size(), 32u);
  EXPECT_EQ(t.cores().size(), 16u);
  EXPECT_EQ(t.numa_nodes().size(), 2u);
  EXPECT_EQ(t.l3_domains().size(), 2u);
  EXPECT_EQ(t.packages().size(), 2u);
  EXPECT_EQ(t.numa_nodes()[1].cpus, cpus("16-31"));

  // The numbering of seed 003's `virsh capabilities`: socket 0 = 0-7,16-23, siblings (0,16).
  Topology seed = shape("pack:2 numa:1 l3:1 core:8 pu:2(indexes=2*8:16*2:1*2)");
  EXPECT_EQ(seed.packages()[0].cpus, cpus("0-7,16-23"));
  EXPECT_EQ(seed.siblings(0), cpus("0,16"));
  EXPECT_EQ(seed.siblings(31), cpus("15,31"));
  expect_consistent(seed);
}

TEST(TopologySynthetic, ThisMachinesShape) {
  Topology t = shape("pack:1 numa:1 l3:1 core:2 pu:1");
  EXPECT_EQ(t.pus().size(), 2u);
  EXPECT_EQ(t.cores().size(), 2u);
  EXPECT_EQ(t.smt_width(), 1u);
  EXPECT_EQ(t.siblings(1), cpus("1"));
}

TEST(TopologySynthetic, BadSpecsNameTheSpecAndTheProblem) {
  struct Case {
    const char* spec;
    const char* problem;
  };
  for (const Case& c : {Case{"bogus:3 pu:2", "unknown level type 'bogus'"},
                        Case{"pack:2 core:0 pu:1", "'core:0' asks for 0 objects"},
                        Case{"pack:x pu:1", "'pack:x' does not give a number of objects"},
                        Case{"pack:2 core:2", "the last level must be pu, not 'core'"},
                        Case{"pack:2 pu:2(indexes=0,1", "unbalanced parentheses"},
                        Case{"pack:2(colour=red) pu:2", "hwloc rejected it"},
                        Case{"[numa] pu:6 4", "'4' has no type"}, Case{"2 2 pu:2", "'2' has no type"}}) {
    auto t = Topology::synthetic(c.spec);
    ASSERT_FALSE(t.has_value()) << c.spec;
    EXPECT_THAT(t.error().message(), HasSubstr(std::string("\"") + c.spec + "\"")) << c.spec;
    EXPECT_THAT(t.error().message(), HasSubstr(c.problem)) << c.spec;
  }
  // hwloc counts each level with strtoul and refuses more than UINT_MAX; keel used std::stoul on the
  // count to explain that and threw out_of_range.
  for (const char* spec : {"pack:99999999999999999999999 pu:1", "pack:4294967296 pu:1", "pu:0x1ffffffff"}) {
    auto t = Topology::synthetic(spec);
    ASSERT_FALSE(t.has_value()) << spec;
    EXPECT_THAT(t.error().message(), HasSubstr(std::string("bad synthetic topology \"") + spec + "\""))
        << spec;
    EXPECT_THAT(t.error().message(), HasSubstr("count too large")) << spec;
  }
  auto empty = Topology::synthetic("  ");
  ASSERT_FALSE(empty.has_value());
  EXPECT_THAT(empty.error().message(), HasSubstr("empty synthetic topology"));
}

// hwloc takes minutes (or forever) to build hosts of tens of thousands of PUs, so keel counts them
// first and refuses more than it can hold in a CpuSet.
TEST(TopologySynthetic, RefusesMorePusThanKeelSupportsBeforeAskingHwloc) {
  struct Case {
    const char* spec;
    const char* pus;
  };
  for (const Case& c :
       {Case{"pu:9000", "9000"}, Case{"pack:100000 pu:100000", "10000000000"},
        Case{"pack:2 numa:2(memory=1GB) core:2049 pu:1", "8196"},
        Case{"(memory=4GB) pack:3 [numa(memory=1GB)] l3:1(size=32MB) core:1500 pu:2(indexes=0)", "9000"},
        Case{"pack:0x10 core:01000 pu:2", "16384"},  // hex and octal, as strtoul reads them
        Case{"pack:4294967295 numa:4294967295 core:4294967295 pu:4294967295", "more than 2^64"}}) {
    auto t = Topology::synthetic(c.spec);
    ASSERT_FALSE(t.has_value()) << c.spec;
    EXPECT_EQ(t.error().message(), std::string("synthetic topology \"") + c.spec + "\" has " + c.pus +
                                       " PUs; keel supports at most 8192");
  }
}

// A spec is bounded before hwloc builds it: hwloc took 14 s for 8192 cores under one package (its
// time grows with the objects under one parent), 280 s for 8192 packages, and 5.7 GB for an explicit
// index of 4294967295 (bitmaps up to it).
TEST(TopologySynthetic, RefusesWhatHwlocWouldTakeSecondsOrGigabytesToBuild) {
  const std::string huge = "pack:2 pu:2(indexes=" + std::string(70000, '0') + ")";
  auto long_spec = Topology::synthetic(huge);
  ASSERT_FALSE(long_spec);
  EXPECT_EQ(long_spec.error().message(), "synthetic topology of 70021 characters; keel reads at most 65536");
  struct Case {
    std::string spec, problem;
  };
  std::string seventeen;
  for (int i = 0; i < 16; ++i) seventeen += "group:1 ";
  seventeen += "pu:1";
  for (const Case& c :
       {Case{seventeen, "17 levels; keel reads at most 16"},
        Case{"pack:2 [numa(indexes=8192,0)] pu:2", "index 8192 in 'indexes=8192,0' is beyond"},
        Case{"core:2 pu:2(indexes=0,1,2,99999999999999999999999)", "index 99999999999999999999999 in"},
        Case{"pack:2 core:4 pu:1024", "'pu:1024' has more than 256 objects under one parent"},
        Case{"pack:1 core:8192 pu:1",
             "'core:8192' has more than 256 objects under one parent (add a level between)"},
        Case{"pack:8192 pu:1", "'pack:8192' has more than 256 objects under one parent"},
        Case{"core:2 pu:2(indexes=4294967295,1,2,3)",
             "index 4294967295 in 'indexes=4294967295,1,2,3' is beyond the largest CPU number 8191"}}) {
    auto t = Topology::synthetic(c.spec);
    ASSERT_FALSE(t.has_value()) << c.spec;
    EXPECT_THAT(t.error().message(), HasSubstr("bad synthetic topology \"" + c.spec + "\": ")) << c.spec;
    EXPECT_THAT(t.error().message(), HasSubstr(c.problem)) << c.spec;
  }
  // Within the bounds: 256 under one parent, interleaved indexes, an explicit list.
  EXPECT_EQ(shape("pack:2 core:256 pu:2").pus().size(), 1024u);
  EXPECT_EQ(shape("pack:2 numa:2 l3:1 core:32 pu:2(indexes=2*128:1*2)").pus().size(), 256u);
  EXPECT_EQ(shape("core:2 pu:2(indexes=0,8191,2,3)").pus().back().os, 8191u);
}

TEST(TopologySynthetic, CountsLevelsWithAttributesAndMemoryChildren) {
  Topology t =
      shape("(memory=8GB) pack:2 [numa(memory=1GB)] l3:1(size=32MB) core:2 pu:2(indexes=0,2,4,6,1,3,5,7)");
  EXPECT_EQ(t.pus().size(), 8u);
  EXPECT_EQ(t.numa_nodes().size(), 2u);
  EXPECT_EQ(t.siblings(0), cpus("0,2"));
  EXPECT_EQ(shape("pack:0x2 core:010 pu:2").cores().size(), 16u);
  // 8192 PUs is the most keel takes; spread over levels hwloc builds it quickly.
  EXPECT_EQ(shape("pack:32 numa:4 l3:4 core:8 pu:2").pus().size(), 8192u);
  auto t2 = Topology::synthetic("pack:2 (memory=1GB) pu:2");
  ASSERT_FALSE(t2.has_value());
  EXPECT_THAT(t2.error().message(), HasSubstr("'(memory=1GB)' is not a level"));
}

TEST(TopologyFromPus, HandWrittenHostMatchesItsDescription) {
  // Two cores with siblings (0,2) and (1,3) sharing one L3, on one node.
  auto t = Topology::from_pus({{0, 0, 0, 0, 0}, {1, 1, 0, 0, 0}, {2, 0, 0, 0, 0}, {3, 1, 0, 0, 0}});
  ASSERT_TRUE(t.has_value()) << t.error().message();
  EXPECT_EQ(t->siblings(2), cpus("0,2"));
  EXPECT_EQ(t->numa_nodes()[0].cores, (std::vector<unsigned>{0, 1}));
  EXPECT_EQ(t->find_pu(7), nullptr);
  EXPECT_TRUE(t->siblings(7).empty());
  Topology copy = *t;  // plain value
  EXPECT_EQ(copy.pus(), t->pus());
}

TEST(TopologyFromPus, RejectsInconsistentDescriptions) {
  EXPECT_THAT(Topology::from_pus({}).error().message(), HasSubstr("at least one PU"));
  EXPECT_THAT(Topology::from_pus({{0, 0, 0, 0, 0}, {0, 1, 0, 0, 0}}).error().message(),
              HasSubstr("CPU 0 is listed twice"));
  EXPECT_THAT(Topology::from_pus({{0, 0, 0, 0, 0}, {1, 1, 0, 2, 0}, {2, 2, 0, 2, 0}}).error().message(),
              HasSubstr("no PU is in NUMA node 1"));
  EXPECT_THAT(Topology::from_pus({{0, 0, 0, 0, 4000000000u}}).error().message(),
              HasSubstr("package id 4000000000 of CPU 0 is out of range for 1 PUs"));
  EXPECT_THAT(Topology::from_pus({{0, 0, 0, 0, 0}, {1, 0, 0, 1, 0}}).error().message(),
              HasSubstr("core 0 has PUs in different NUMA nodes (CPU 0 in 0, CPU 1 in 1)"));
}

TEST(TopologyFormat, TextShowsSummaryAndTreeCompactly) {
  std::string text = format_text(shape("pack:2 numa:2 l3:1 core:32 pu:2(indexes=2*128:1*2)"));
  EXPECT_THAT(text, HasSubstr("256 PUs, 128 cores, 4 NUMA nodes, 4 L3 domains, 2 packages, SMT 2\n"));
  EXPECT_THAT(text, HasSubstr("package 1: CPUs 64-127,192-255\n"));
  EXPECT_THAT(text, HasSubstr("  NUMA node 3: CPUs 96-127,224-255"));
  EXPECT_THAT(text, HasSubstr("    L3 domain 3 (16 MiB): CPUs 96-127,224-255\n"));
  EXPECT_THAT(text, HasSubstr("      32 cores 96-127, siblings (96,224) (97,225)"));
  EXPECT_THAT(text, HasSubstr("(103,231) ... (126,254) (127,255)\n"));
  EXPECT_LT(std::count(text.begin(), text.end(), '\n'), 20);

  std::string small = format_text(shape("pack:1 numa:1 l3:1 core:2 pu:1"));
  EXPECT_THAT(small, HasSubstr("2 PUs, 2 cores, 1 NUMA node, 1 L3 domain, 1 package, SMT 1\n"));
  EXPECT_THAT(small, HasSubstr("2 cores 0-1, 1 PU each"));
  EXPECT_THAT(small, Not(HasSubstr("...")));
}

TEST(TopologyFormat, TextNamesTheNodesSharingAnL3) {
  std::string text = format_text(shape("pack:1 l3:2 numa:2 core:4 pu:2"));
  EXPECT_THAT(text, HasSubstr("  NUMA node 1: CPUs 8-15"));
  EXPECT_THAT(text, HasSubstr("    L3 domain 0 (16 MiB): CPUs 8-15 (shared with NUMA node 0)\n"));
}

// Without a numa level hwloc makes one node for the whole machine, so the node (and the L3 domain
// keel makes per node) spans both packages: each package shows only its own CPUs and cores.
TEST(TopologyFormat, TextSplitsANodeSpanningPackagesByPackage) {
  EXPECT_EQ(format_text(shape("pack:2 core:2 pu:2")),
            "8 PUs, 4 cores, 1 NUMA node, 1 L3 domain, 2 packages, SMT 2\n"
            "package 0: CPUs 0-3\n"
            "  NUMA node 0: CPUs 0-3 (shared with package 1), 1 GiB memory\n"
            "    L3 domain 0: CPUs 0-3 (shared with package 1)\n"
            "      2 cores 0-1, siblings (0,1) (2,3)\n"
            "package 1: CPUs 4-7\n"
            "  NUMA node 0: CPUs 4-7 (shared with package 0), 1 GiB memory\n"
            "    L3 domain 0: CPUs 4-7 (shared with package 0)\n"
            "      2 cores 2-3, siblings (4,5) (6,7)\n");
  // One package: nothing to split, nothing shared.
  EXPECT_EQ(format_text(shape("pack:1 core:2 pu:1")),
            "2 PUs, 2 cores, 1 NUMA node, 1 L3 domain, 1 package, SMT 1\n"
            "package 0: CPUs 0-1\n"
            "  NUMA node 0: CPUs 0-1, 1 GiB memory\n"
            "    L3 domain 0: CPUs 0-1\n"
            "      2 cores 0-1, 1 PU each\n");
}

TEST(TopologyFormat, JsonHasEveryPuAndTheSummary) {
  std::string json = format_json(shape("pack:2 numa:2 l3:1 core:32 pu:2"));
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.back(), '}');
  EXPECT_EQ(std::count(json.begin(), json.end(), '{'), std::count(json.begin(), json.end(), '}'));
  EXPECT_EQ(std::count(json.begin(), json.end(), '['), std::count(json.begin(), json.end(), ']'));
  EXPECT_THAT(
      json,
      HasSubstr(R"("summary":{"pus":256,"cores":128,"numa_nodes":4,"l3_domains":4,"packages":2,"smt":2})"));
  EXPECT_EQ(occurrences(json, "{\"os\":"), 256u);
  EXPECT_THAT(json, HasSubstr(R"({"os":130,"core":65,"l3":2,"numa":2,"package":1})"));
  EXPECT_THAT(json, HasSubstr(R"("size_bytes":16777216)"));
}

TEST(TopologyDetect, MatchesTheRunningHost) {
  auto t = Topology::detect(SysRoots::host());
  ASSERT_TRUE(t.has_value()) << t.error().message();
  EXPECT_EQ(t->pus().size(), static_cast<size_t>(sysconf(_SC_NPROCESSORS_ONLN)));
  auto online = read_line(SysRoots::host().sys / "devices/system/cpu/online");
  ASSERT_TRUE(online.has_value()) << online.error().message();
  EXPECT_EQ(t->online(), cpus(*online));
  EXPECT_GE(t->numa_nodes().size(), 1u);
  EXPECT_GE(t->cores().size(), 1u);
  expect_consistent(*t);
}

// A 4-PU host (2 cores, SMT 2, one shared 8 MiB L3, one 4 GiB node) as sysfs describes it.
std::vector<std::pair<std::string, std::string>> fake_sysfs() {
  const std::string cpu = "sys/devices/system/cpu/";
  std::vector<std::pair<std::string, std::string>> files = {
      {cpu + "online", "0-3\n"},
      {cpu + "possible", "0-3\n"},
      {cpu + "present", "0-3\n"},
      {"sys/devices/system/node/online", "0\n"},
      {"sys/devices/system/node/possible", "0\n"},
      {"sys/devices/system/node/node0/cpumap", "f\n"},
      {"sys/devices/system/node/node0/cpulist", "0-3\n"},
      {"sys/devices/system/node/node0/meminfo", "Node 0 MemTotal:       4194304 kB\n"},
      {"proc/", ""},
  };
  for (unsigned c = 0; c < 4; ++c) {
    std::string d = cpu + "cpu" + std::to_string(c) + "/";
    std::string siblings = c < 2 ? "3\n" : "c\n";
    files.insert(files.end(), {{d + "topology/physical_package_id", "0\n"},
                               {d + "topology/core_id", std::to_string(c / 2) + "\n"},
                               {d + "topology/thread_siblings", siblings},
                               {d + "topology/core_cpus", siblings},
                               {d + "topology/core_siblings", "f\n"},
                               {d + "topology/package_cpus", "f\n"},
                               {d + "cache/index3/level", "3\n"},
                               {d + "cache/index3/type", "Unified\n"},
                               {d + "cache/index3/size", "8192K\n"},
                               {d + "cache/index3/shared_cpu_map", "f\n"},
                               {d + "cache/index3/coherency_line_size", "64\n"}});
  }
  return files;
}

TEST(TopologyDetect, ReadsAnotherSysRootThroughHwloc) {
  ::keel::testing::TempDir dir;
  ::keel::testing::make_tree(dir.path(), fake_sysfs());
  ::setenv("HWLOC_COMPONENTS", "keep-me", 1);
  auto t = Topology::detect(SysRoots::under(dir.path()));
  // The environment is put back: what was set stays, what was not is gone again.
  const char* components = std::getenv("HWLOC_COMPONENTS");
  EXPECT_STREQ(components, "keep-me");
  EXPECT_EQ(std::getenv("HWLOC_FSROOT"), nullptr);
  ::unsetenv("HWLOC_COMPONENTS");
  ASSERT_TRUE(t.has_value()) << t.error().message();
  EXPECT_EQ(t->pus().size(), 4u);
  EXPECT_EQ(t->cores().size(), 2u);
  EXPECT_EQ(t->siblings(1), cpus("0-1"));
  EXPECT_EQ(t->siblings(2), cpus("2-3"));
  ASSERT_EQ(t->l3_domains().size(), 1u);
  EXPECT_EQ(t->l3_domains()[0].size_bytes, 8u << 20);
  ASSERT_EQ(t->numa_nodes().size(), 1u);
  EXPECT_EQ(t->numa_nodes()[0].memory_bytes, 4ull << 30);
  expect_consistent(*t);

  // The host is read again afterwards, not the fake tree.
  auto host = Topology::detect(SysRoots::host());
  ASSERT_TRUE(host.has_value()) << host.error().message();
  EXPECT_EQ(host->pus().size(), static_cast<size_t>(sysconf(_SC_NPROCESSORS_ONLN)));
}

TEST(TopologyDetect, RefusesRootsHwlocCannotRead) {
  auto missing = Topology::detect(SysRoots::under("/tmp/keel-fake-root"));
  ASSERT_FALSE(missing.has_value());
  EXPECT_THAT(missing.error().message(), HasSubstr("/tmp/keel-fake-root/sys"));
  EXPECT_THAT(missing.error().message(), HasSubstr("devices/system/cpu is missing"));

  ::keel::testing::TempDir dir;
  ::keel::testing::make_tree(dir.path(), fake_sysfs());
  SysRoots apart = SysRoots::under(dir.path());
  apart.proc = SysRoots::host().proc;  // hwloc would read <root>/proc, not this one
  auto t = Topology::detect(apart);
  ASSERT_FALSE(t.has_value());
  EXPECT_THAT(t.error().message(), HasSubstr("proc root (/proc) must sit next to it"));
}

}  // namespace
}  // namespace keel
