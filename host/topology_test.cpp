#include "host/topology.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>

#include "host/fileio.h"

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
                        Case{"pack:2(colour=red) pu:2", "hwloc rejected it"}}) {
    auto t = Topology::synthetic(c.spec);
    ASSERT_FALSE(t.has_value()) << c.spec;
    EXPECT_THAT(t.error().message(), HasSubstr(std::string("\"") + c.spec + "\"")) << c.spec;
    EXPECT_THAT(t.error().message(), HasSubstr(c.problem)) << c.spec;
  }
  auto empty = Topology::synthetic("  ");
  ASSERT_FALSE(empty.has_value());
  EXPECT_THAT(empty.error().message(), HasSubstr("empty synthetic topology"));
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

TEST(TopologyFormat, JsonHasEveryPuAndTheSummary) {
  std::string json = format_json(shape("pack:2 numa:2 l3:1 core:32 pu:2"));
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.back(), '}');
  EXPECT_EQ(std::count(json.begin(), json.end(), '{'), std::count(json.begin(), json.end(), '}'));
  EXPECT_EQ(std::count(json.begin(), json.end(), '['), std::count(json.begin(), json.end(), ']'));
  EXPECT_THAT(json, HasSubstr(R"("summary":{"pus":256,"cores":128,"numa_nodes":4,"l3_domains":4,"packages":2,"smt":2})"));
  EXPECT_EQ(occurrences(json, "{\"os\":"), 256u);
  EXPECT_THAT(json, HasSubstr(R"({"os":130,"core":65,"l3":2,"numa":2,"package":1})"));
  EXPECT_THAT(json, HasSubstr(R"("size_bytes":16777216)"));
}

TEST(TopologyDetect, MatchesTheRunningHost) {
  auto t = Topology::detect(SysRoots::host());
  ASSERT_TRUE(t.has_value()) << t.error().message();
  EXPECT_EQ(t->pus().size(), static_cast<size_t>(sysconf(_SC_NPROCESSORS_ONLN)));
  auto online = read_line("/sys/devices/system/cpu/online");
  ASSERT_TRUE(online.has_value()) << online.error().message();
  EXPECT_EQ(t->online(), cpus(*online));
  EXPECT_GE(t->numa_nodes().size(), 1u);
  EXPECT_GE(t->cores().size(), 1u);
  expect_consistent(*t);
}

TEST(TopologyDetect, RefusesAnotherSysRoot) {
  auto t = Topology::detect(SysRoots::under("/tmp/keel-fake-root"));
  ASSERT_FALSE(t.has_value());
  EXPECT_THAT(t.error().message(), HasSubstr("/tmp/keel-fake-root/sys"));
  EXPECT_THAT(t.error().message(), HasSubstr("synthetic"));
}

}  // namespace
}  // namespace keel
