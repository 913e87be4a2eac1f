#include "controller/trace.h"

#include <gtest/gtest.h>

#include "controller/plant.h"

namespace keel::ctl {
namespace {

config::Config two_cpu_config() {
  config::HostFacts facts;
  facts.cpus = CpuSet::range(0, 1);
  auto c = config::load_string(R"(
[daemon]
mode = "enforce"
[[workload]]
name = "svc"
match = { cgroup = "/svc" }
class = "critical"
slo = { runqueue_p99 = "500us" }
[[workload]]
name = "hog"
match = { cgroup = "/hog" }
class = "best-effort"
)",
                               "trace.toml", facts);
  EXPECT_TRUE(c.has_value());
  return *c;
}

TEST(Trace, SnapshotsRoundTripExactly) {
  Snapshot s;
  s.tick = 42;
  s.period_s = 0.25;
  WorkloadSignals a;
  a.instance = "batch/job \"1\"";
  a.workload = "batch";
  a.critical = false;
  a.cgroups = {"/batch/job-1", "/batch/job-1/sub"};
  a.rq_waits = 1234;
  a.rq_p50_us = 12.345678901234567;
  a.rq_p99_us = 1.0 / 3.0;
  a.migrations_per_s = 7.5;
  a.rq_wait_s_per_s = 2.0 / 7.0;
  a.cpu_usage = 0.1 + 0.2;  // not representable in 6 digits
  a.cpus = CpuSet::range(2, 5);
  a.shares = 512;
  WorkloadSignals b;
  b.instance = "redis";
  b.workload = "redis";
  b.critical = true;
  b.mpki = 3.25;
  b.cache_misses_per_s = 1e6;
  s.workloads = {a, b};
  std::string line = to_json_line(s);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  auto back = parse_json_line(line);
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(back->tick, 42u);
  EXPECT_EQ(back->period_s, 0.25);
  ASSERT_EQ(back->workloads.size(), 2u);
  const auto& x = back->workloads[0];
  EXPECT_EQ(x.instance, a.instance);
  EXPECT_EQ(x.cgroups, a.cgroups);
  EXPECT_EQ(x.rq_waits, a.rq_waits);
  EXPECT_EQ(x.rq_p50_us, a.rq_p50_us);  // exact, not within a tolerance
  EXPECT_EQ(x.rq_p99_us, a.rq_p99_us);
  EXPECT_EQ(x.cpu_usage, a.cpu_usage);
  EXPECT_EQ(x.rq_wait_s_per_s, a.rq_wait_s_per_s);
  EXPECT_EQ(x.cpus, a.cpus);
  EXPECT_EQ(x.shares, a.shares);
  EXPECT_FALSE(x.mpki);  // unavailable stays unavailable, not 0
  EXPECT_TRUE(back->workloads[1].critical);
  EXPECT_EQ(back->workloads[1].mpki, 3.25);
  EXPECT_FALSE(back->workloads[1].cpu_usage);
  EXPECT_EQ(to_json_line(*back), line);
}

TEST(Trace, BrokenLinesAreErrorsThatSayWhere) {
  for (const char* bad :
       {"", "{", "[]", "{\"tick\":1}", "{\"tick\":1,\"period_s\":1,\"workloads\":[{\"instance\":\"a\"}]}",
        "{\"tick\":1,\"period_s\":1,\"workloads\":[]} x",
        "{\"tick\":\"one\",\"period_s\":1,\"workloads\":[]}"}) {
    auto r = parse_json_line(bad);
    EXPECT_FALSE(r) << bad;
    if (!r) {
      EXPECT_NE(r.error().message().find("trace line"), std::string::npos) << r.error().message();
    }
  }
}

// What a live run decided, a replay of its recorded snapshots decides again, action for action, and
// two replays agree with each other.
TEST(Trace, ReplayDecidesWhatTheLiveRunDecided) {
  auto cfg = two_cpu_config();
  cfg.actuators.preempt_class = config::PreemptMode::reactive;  // a rung: acted on and given back
  auto topo = Topology::synthetic("pack:1 numa:1 l3:1 core:2 pu:1");
  ASSERT_TRUE(topo);
  PlantWorkload svc, hog;
  svc.instance = svc.workload = "svc";
  svc.critical = true;
  svc.demand = 0.5;
  hog.instance = hog.workload = "hog";
  Plant plant(CpuSet::range(0, 1), {svc, hog}, 7);
  Controller live(config::compile(cfg, topo->online()), *topo);
  std::vector<std::string> lines, decided;
  for (uint64_t t = 1; t <= 80; ++t) {
    if (t == 5) plant.set_demand("hog", 2);
    if (t == 50) plant.set_demand("hog", 0);
    Snapshot s = plant.tick();
    s.tick = t;
    lines.push_back(to_json_line(s));
    Plan p = live.step(s);
    decided.push_back(format_actions(p));
    plant.apply(p);
  }
  size_t acted = 0;
  for (const auto& d : decided) acted += d.empty() ? 0 : 1;
  EXPECT_GT(acted, 2u);  // the run really decided something (act and give back)
  for (int replay = 0; replay < 2; ++replay) {
    Controller again(config::compile(cfg, topo->online()), *topo);
    for (size_t i = 0; i < lines.size(); ++i) {
      auto s = parse_json_line(lines[i]);
      ASSERT_TRUE(s) << s.error().message();
      EXPECT_EQ(format_actions(again.step(*s)), decided[i]) << "replay " << replay << ", tick " << i + 1;
    }
  }
}

}  // namespace
}  // namespace keel::ctl
