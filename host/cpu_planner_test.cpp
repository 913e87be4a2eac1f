#include "host/cpu_planner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

namespace keel {
namespace {

using ::testing::HasSubstr;

CpuSet cpus(std::string_view list) { return CpuSet::parse_list(list).value(); }

Topology shape(std::string_view spec) {
  auto t = Topology::synthetic(spec);
  EXPECT_TRUE(t.has_value()) << spec << ": " << (t ? "" : t.error().message());
  return t.value();
}

// Kunpeng 920 7270Z-like, numbered as x86 does (siblings N apart) so that "0 and its sibling" is 0,128.
const char* const kKunpeng = "pack:2 numa:2 l3:1 core:32 pu:2(indexes=2*128:1*2)";
const char* const kSeedsVm = "pack:1 numa:1 l3:1 core:16 pu:2";
const char* const kXeon = "pack:2 numa:1 l3:1 core:8 pu:2(indexes=2*8:16*2:1*2)";  // seed 003 numbering
const char* const kThisMachine = "pack:1 numa:1 l3:1 core:2 pu:1";

CpuRequest critical(unsigned n, std::string_view reserved = "") {
  CpuRequest r;
  r.cpus = n;
  r.reserved = cpus(reserved);
  return r;
}

Placement plan_ok(const Topology& t, const CpuRequest& r) {
  auto p = plan_cpus(t, r);
  EXPECT_TRUE(p.has_value()) << (p ? "" : p.error().message());
  return p.value_or(Placement{});
}

std::string plan_error(const Topology& t, const CpuRequest& r) {
  auto p = plan_cpus(t, r);
  EXPECT_FALSE(p.has_value()) << "unexpectedly placed on " << (p ? p->cpus.to_list() : "");
  return p ? "" : p.error().message();
}

// No core is split between `a` and `b`.
void expect_no_shared_core(const Topology& t, const CpuSet& a, const CpuSet& b) {
  for (const Core& c : t.cores())
    EXPECT_FALSE(c.cpus.intersects(a) && c.cpus.intersects(b))
        << "core " << c.id << " (" << c.cpus.to_list() << ")";
}

TEST(CpuPlanner, KunpengCriticalGetsWholeCoresOfOneNodeAwayFromReserved) {
  Topology t = shape(kKunpeng);
  Placement p = plan_ok(t, critical(4, "0,128"));
  // Node 0 has the least room left (31 cores), so it is the best fit.
  EXPECT_EQ(p.cpus, cpus("1-2,129-130"));
  EXPECT_TRUE(p.held_idle.empty());
  EXPECT_EQ(p.numa_nodes, (std::vector<unsigned>{0}));
  EXPECT_EQ(p.l3_domains, (std::vector<unsigned>{0}));
  EXPECT_EQ(p.why, "4 CPUs as 2 whole cores of NUMA node 0, L3 domain 0");
}

TEST(CpuPlanner, KunpengSingleNodeErrorExplainsWhatIsFree) {
  Topology t = shape(kKunpeng);
  CpuRequest r = critical(6, "0,128");
  // Other critical workloads hold all but cores 2-3 of node 0 and everything of nodes 1-3.
  r.other_critical = cpus("1,4-127,129,132-255");
  EXPECT_EQ(
      plan_error(t, r),
      "needs 3 whole cores (6 CPUs) in one NUMA node; the most any node has free is 2 whole cores "
      "(node 0: CPUs 2-3,130-131); reserved: 0,128; held by other critical workloads: 1,4-127,129,132-255");
}

TEST(CpuPlanner, SeedsVmRedisGetsWholeCoresNginxStaysOffThem) {
  Topology t = shape(kSeedsVm);
  Placement redis = plan_ok(t, critical(8, "0-1"));
  EXPECT_EQ(redis.cpus, cpus("2-9"));
  EXPECT_EQ(redis.why, "8 CPUs as 4 whole cores of NUMA node 0, L3 domain 0");

  CpuRequest nginx = critical(6, "0-1");
  nginx.critical = false;
  nginx.other_critical = redis.cpus;
  Placement be = plan_ok(t, nginx);
  EXPECT_EQ(be.cpus.count(), 6u);
  EXPECT_FALSE(be.cpus.intersects(redis.cpus | cpus("0-1")));
  expect_no_shared_core(t, redis.cpus, be.cpus);
}

TEST(CpuPlanner, SeedsVmPoolSmallerThanRequestAfterReserved) {
  Topology t = shape(kSeedsVm);
  CpuRequest r = critical(24, "0-1");
  r.pool = cpus("0-23");
  EXPECT_EQ(plan_error(t, r),
            "needs 12 whole cores (24 CPUs) in one NUMA node; the most any node has free is 11 whole cores "
            "(node 0: CPUs 2-23); reserved: 0-1; pool: 0-23");
}

TEST(CpuPlanner, XeonRequestThatFitsOneSocket) {
  Topology t = shape(kXeon);
  Placement p = plan_ok(t, critical(8, "0,16"));
  EXPECT_EQ(p.cpus, cpus("1-4,17-20"));
  EXPECT_EQ(p.numa_nodes, (std::vector<unsigned>{0}));
}

TEST(CpuPlanner, XeonRequestSpansSocketsOnlyWithNumaAny) {
  Topology t = shape(kXeon);
  CpuRequest r = critical(20, "0,16");
  EXPECT_EQ(plan_error(t, r),
            "needs 10 whole cores (20 CPUs) in one NUMA node; the most any node has free is 8 whole cores "
            "(node 1: CPUs 8-15,24-31); reserved: 0,16");

  r.numa = NumaPolicy::any;
  Placement p = plan_ok(t, r);
  // All of the fuller socket, the rest from the emptier one, which keeps 5 whole cores free.
  EXPECT_EQ(p.cpus, cpus("1-10,17-26"));
  EXPECT_EQ(p.numa_nodes, (std::vector<unsigned>{0, 1}));
  EXPECT_EQ(p.why,
            "20 CPUs as 10 whole cores of NUMA nodes 0-1, L3 domains 0-1 "
            "(no single NUMA node has 10 whole cores free)");
}

TEST(CpuPlanner, XeonNotEnoughAnywhere) {
  Topology t = shape(kXeon);
  CpuRequest r = critical(32, "0,16");
  r.numa = NumaPolicy::any;
  EXPECT_EQ(plan_error(t, r),
            "needs 16 whole cores (32 CPUs); only 15 whole cores free in all "
            "(CPUs 1-15,17-31); reserved: 0,16");
}

TEST(CpuPlanner, ThisMachineWithCpu0ReservedHasOneCpuToGive) {
  Topology t = shape(kThisMachine);
  Placement p = plan_ok(t, critical(1, "0"));
  EXPECT_EQ(p.cpus, cpus("1"));
  EXPECT_EQ(p.why, "1 CPU as 1 whole core of NUMA node 0, L3 domain 0");
  EXPECT_EQ(plan_error(t, critical(2, "0")),
            "needs 2 whole cores (2 CPUs) in one NUMA node; the most any node has free is 1 whole core "
            "(node 0: CPUs 1); reserved: 0");
}

TEST(CpuPlanner, OddRequestOnSmt2RoundsUpToWholeCores) {
  Topology t = shape(kSeedsVm);
  Placement p = plan_ok(t, critical(3, "0-1"));
  EXPECT_EQ(p.cpus, cpus("2-5"));
  EXPECT_TRUE(p.held_idle.empty());
  EXPECT_EQ(p.why,
            "4 CPUs as 2 whole cores of NUMA node 0, L3 domain 0 (3 requested, rounded up to whole cores)");
}

TEST(CpuPlanner, MaxBelowWholeCoresHoldsTheLeftoverSiblingIdle) {
  Topology t = shape(kSeedsVm);
  CpuRequest r = critical(3, "0-1");
  r.max_cpus = 3;
  Placement p = plan_ok(t, r);
  EXPECT_EQ(p.cpus, cpus("2-4"));
  EXPECT_EQ(p.held_idle, cpus("5"));
  EXPECT_EQ(p.why,
            "3 CPUs on 2 whole cores of NUMA node 0, L3 domain 0; CPU 5 held idle so no other workload "
            "shares those cores (max 3)");

  // A best-effort workload told about the idle sibling stays off it.
  CpuRequest be = critical(26, "0-1");
  be.critical = false;
  be.other_critical = p.cpus | p.held_idle;
  Placement other = plan_ok(t, be);
  EXPECT_EQ(other.cpus, cpus("6-31"));
}

TEST(CpuPlanner, ReplanKeepsCurrentCpus) {
  Topology t = shape(kKunpeng);
  CpuRequest r = critical(4, "0,128");
  r.current = cpus("70-71,198-199");  // node 2, not the best fit
  Placement p = plan_ok(t, r);
  EXPECT_EQ(p.cpus, r.current);
  EXPECT_THAT(p.why, HasSubstr("NUMA node 2, L3 domain 2; keeps 4 of its 4 current CPUs"));

  // Growing keeps what it has and adds the lowest free cores next to it.
  r.cpus = 8;
  Placement grown = plan_ok(t, r);
  EXPECT_TRUE(r.current.subset_of(grown.cpus));
  EXPECT_EQ(grown.cpus, cpus("64-65,70-71,192-193,198-199"));
}

TEST(CpuPlanner, TwoCriticalWorkloadsNeverShareACore) {
  Topology t = shape(kXeon);
  CpuRequest a = critical(3, "0,16");
  a.max_cpus = 3;
  Placement pa = plan_ok(t, a);
  CpuRequest b = critical(5, "0,16");
  b.other_critical = pa.cpus | pa.held_idle;
  Placement pb = plan_ok(t, b);
  EXPECT_FALSE(pb.cpus.intersects(pa.cpus | pa.held_idle));
  expect_no_shared_core(t, pa.cpus | pa.held_idle, pb.cpus);
}

TEST(CpuPlanner, PoolIsRespectedAndPartialCoresInItAreUnusable) {
  Topology t = shape(kSeedsVm);
  CpuRequest r = critical(4);
  r.pool = cpus("3-9");  // core (2,3) is only half inside
  Placement p = plan_ok(t, r);
  EXPECT_EQ(p.cpus, cpus("4-7"));

  r.pool = cpus("16-31");
  EXPECT_TRUE(plan_ok(t, r).cpus.subset_of(r.pool));
}

TEST(CpuPlanner, SpansL3DomainsOfOneNodeBeforeOtherNodes) {
  Topology t = shape("pack:1 numa:1 l3:2 core:4 pu:2");  // two CCXs in one node
  Placement small = plan_ok(t, critical(4, "0-1"));
  EXPECT_EQ(small.cpus, cpus("2-5"));  // best fit: the CCX with reserved CPUs has just enough
  Placement big = plan_ok(t, critical(12, "0-1"));
  EXPECT_EQ(big.cpus, cpus("2-13"));
  EXPECT_EQ(big.l3_domains, (std::vector<unsigned>{0, 1}));
  EXPECT_EQ(big.why,
            "12 CPUs as 6 whole cores of NUMA node 0, L3 domains 0-1 "
            "(no single L3 domain of the node has 6 whole cores free)");
}

TEST(CpuPlanner, L3SharedByTwoNumaNodesStillPlacesWithinOneNode) {
  Topology t = shape("pack:1 l3:2 numa:2 core:4 pu:2");  // sub-NUMA clustering: 2 nodes per L3
  Placement p = plan_ok(t, critical(8, "0-1"));
  EXPECT_EQ(p.cpus, cpus("8-15"));
  EXPECT_EQ(p.why, "8 CPUs as 4 whole cores of NUMA node 1, L3 domain 0");
}

TEST(CpuPlanner, RejectsImpossibleRequestsWithAReason) {
  Topology t = shape(kSeedsVm);
  EXPECT_EQ(plan_error(t, critical(0)), "a request for 0 CPUs; ask for at least 1");
  EXPECT_EQ(plan_error(t, critical(33)), "requests 33 CPUs but the host has only 32 online CPUs");
  CpuRequest pooled = critical(5);
  pooled.pool = cpus("0-3");
  EXPECT_EQ(plan_error(t, pooled), "requests 5 CPUs but the pool 0-3 has only 4 online CPUs");
  CpuRequest capped = critical(4);
  capped.max_cpus = 2;
  EXPECT_EQ(plan_error(t, capped), "max_cpus 2 is below the 4 CPUs requested");
}

TEST(CpuPlanner, HandWrittenHybridTopology) {
  // A P-core with siblings (0,1), two E-cores 2 and 3, all in one L3 and node.
  Topology t =
      Topology::from_pus({{0, 0, 0, 0, 0}, {1, 0, 0, 0, 0}, {2, 1, 0, 0, 0}, {3, 2, 0, 0, 0}}).value();
  Placement p = plan_ok(t, critical(2));
  EXPECT_EQ(p.cpus, cpus("0-1"));
  EXPECT_EQ(p.why, "2 CPUs as 1 whole core of NUMA node 0, L3 domain 0");
}

// ----- property test -----

struct Usable {
  CpuSet pool;
  std::vector<unsigned> per_node;  // usable CPUs per NUMA node, computed independently of the planner
};

Usable usable_capacity(const Topology& t, const CpuRequest& r) {
  Usable u;
  u.pool = r.pool.empty() ? t.online() : r.pool & t.online();
  u.per_node.assign(t.numa_nodes().size(), 0);
  for (const Core& c : t.cores()) {
    CpuSet free = c.cpus & u.pool;
    free = free - r.reserved - r.other_critical;
    bool whole = free == c.cpus;
    if (r.critical && whole) u.per_node[c.numa] += c.cpus.count();
    if (!r.critical && !c.cpus.intersects(r.other_critical)) u.per_node[c.numa] += free.count();
  }
  return u;
}

CpuSet random_subset(const CpuSet& from, double p, std::mt19937& rng) {
  std::bernoulli_distribution pick(p);
  CpuSet out;
  for (unsigned c : from.cpus())
    if (pick(rng)) out.add(c);
  return out;
}

CpuRequest random_request(const Topology& t, std::mt19937& rng) {
  auto chance = [&](double p) { return std::bernoulli_distribution(p)(rng); };
  CpuRequest r;
  r.reserved = random_subset(t.online(), 0.08, rng);
  for (const Core& c : t.cores())
    if (chance(0.2)) r.other_critical |= c.cpus;
  r.other_critical |= random_subset(t.online(), 0.03, rng);  // also stray single PUs
  if (chance(0.5)) r.pool = random_subset(t.online(), 0.7, rng);
  if (chance(0.3)) r.current = random_subset(t.online(), 0.1, rng);
  r.critical = chance(0.7);
  r.numa = chance(0.5) ? NumaPolicy::single : NumaPolicy::any;
  r.cpus = std::uniform_int_distribution<unsigned>(1, std::max(1u, t.online().count() / 2))(rng);
  if (chance(0.3)) r.max_cpus = r.cpus + std::uniform_int_distribution<unsigned>(0, t.smt_width() - 1)(rng);
  return r;
}

void check_placement(const Topology& t, const CpuRequest& r, const Placement& p, const Usable& u) {
  CpuSet given = p.cpus | p.held_idle;
  EXPECT_FALSE(given.intersects(r.reserved)) << "reserved CPUs handed out";
  EXPECT_TRUE(given.subset_of(u.pool)) << "CPUs outside the pool";
  EXPECT_FALSE(given.intersects(r.other_critical)) << "CPUs of another critical workload";
  EXPECT_FALSE(p.cpus.intersects(p.held_idle));
  EXPECT_GE(p.cpus.count(), r.cpus);
  if (r.max_cpus != 0) {
    EXPECT_LE(p.cpus.count(), r.max_cpus);
  }
  if (!r.critical) {
    EXPECT_EQ(p.cpus.count(), r.cpus);
    EXPECT_TRUE(p.held_idle.empty());
  }
  for (const Core& c : t.cores()) {
    if (c.cpus.intersects(r.other_critical)) {
      EXPECT_FALSE(c.cpus.intersects(given)) << "core " << c.id << " split with another critical workload";
    }
    if (r.critical && c.cpus.intersects(given)) {
      EXPECT_TRUE(c.cpus.subset_of(given)) << "partial core " << c.id;
    }
  }
  CpuSet in_nodes;
  for (unsigned n : p.numa_nodes) in_nodes |= t.numa_nodes()[n].cpus;
  EXPECT_TRUE(given.subset_of(in_nodes));
  if (r.numa == NumaPolicy::single) {
    EXPECT_EQ(p.numa_nodes.size(), 1u);
  }
  EXPECT_FALSE(p.why.empty());
}

TEST(CpuPlannerProperty, RandomRequestsOnRandomShapesKeepEveryRule) {
  std::mt19937 rng(20240601);
  auto pick = [&](std::initializer_list<unsigned> from) {
    return *(from.begin() + std::uniform_int_distribution<size_t>(0, from.size() - 1)(rng));
  };
  unsigned placed = 0, refused = 0;
  for (int shape_i = 0; shape_i < 60; ++shape_i) {
    std::string spec = "pack:" + std::to_string(pick({1, 2})) + " numa:" + std::to_string(pick({1, 2})) +
                       " l3:" + std::to_string(pick({1, 2})) +
                       " core:" + std::to_string(pick({1, 2, 3, 5, 8})) +
                       " pu:" + std::to_string(pick({1, 2, 4}));
    Topology t = shape(spec);
    for (int i = 0; i < 60; ++i) {
      CpuRequest r = random_request(t, rng);
      SCOPED_TRACE(spec + " request " + std::to_string(r.cpus) + (r.critical ? " critical" : " best-effort") +
                   " reserved=" + r.reserved.to_list() + " others=" + r.other_critical.to_list() +
                   " pool=" + r.pool.to_list() + " current=" + r.current.to_list() +
                   " max=" + std::to_string(r.max_cpus));
      Usable u = usable_capacity(t, r);
      unsigned total = 0, most = 0;
      for (unsigned n : u.per_node) total += n, most = std::max(most, n);
      bool fits = r.numa == NumaPolicy::single ? most >= r.cpus : total >= r.cpus;

      auto p = plan_cpus(t, r);
      ASSERT_EQ(p.has_value(), fits) << (p ? "placed on " + p->cpus.to_list() : p.error().message());
      if (!p) {
        ++refused;
        continue;
      }
      ++placed;
      check_placement(t, r, *p, u);

      // Deterministic, and stable: re-planning with the result as current changes nothing.
      auto again = plan_cpus(t, r);
      ASSERT_TRUE(again.has_value());
      EXPECT_EQ(again->cpus.to_list(), p->cpus.to_list());
      CpuRequest replan = r;
      replan.current = p->cpus;
      auto kept = plan_cpus(t, replan);
      ASSERT_TRUE(kept.has_value());
      EXPECT_EQ(kept->cpus.to_list(), p->cpus.to_list()) << kept->why << " / was: " << p->why;
      EXPECT_EQ(kept->held_idle.to_list(), p->held_idle.to_list());
    }
  }
  // Both outcomes were exercised.
  EXPECT_GT(placed, 500u);
  EXPECT_GT(refused, 100u);
}

}  // namespace
}  // namespace keel
