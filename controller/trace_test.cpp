#include "controller/trace.h"

#include <gmock/gmock.h>
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
  a.host_daemon = true;
  WorkloadSignals b;
  b.instance = "redis";
  b.workload = "redis";
  b.critical = true;
  b.mpki = 3.25;
  b.cache_misses_per_s = 1e6;
  b.lull_s = 0.3;
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
  EXPECT_TRUE(x.host_daemon);
  EXPECT_FALSE(back->workloads[1].host_daemon);
  EXPECT_FALSE(x.mpki);  // unavailable stays unavailable, not 0
  EXPECT_TRUE(back->workloads[1].critical);
  EXPECT_EQ(back->workloads[1].mpki, 3.25);
  EXPECT_FALSE(back->workloads[1].cpu_usage);
  EXPECT_EQ(back->workloads[1].lull_s, 0.3);  // the demand watch's lull, which a short tick decides by
  EXPECT_EQ(x.lull_s, 0.0);
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

// A trace is anyone's file: every number is range-checked before it is converted or decided from
// (tick 1e300 cast to an integer is undefined and printed as tick 0; a negative period, latency or
// rate, CPU usage beyond every CPU and shares beyond the kernel's were all taken), a field that is
// there but wrong is never taken as absent, and an instance listed twice in one tick is refused.
TEST(Trace, NumbersOutOfRangeAndRepeatedInstancesAreErrorsNamingTheField) {
  auto line = [](const std::string& top, const std::string& fields, const std::string& more = {}) {
    return "{" + top +
           ",\"workloads\":[{\"instance\":\"redis\",\"workload\":\"redis\",\"critical\":true,"
           "\"rq_waits\":100,\"rq_p50_us\":10,\"rq_p99_us\":500,\"cpus\":\"0-1\"" +
           fields + "}" + more + "]}";
  };
  const std::string ok_top = "\"tick\":5,\"period_s\":1";
  ASSERT_TRUE(parse_json_line(line(ok_top, "")));
  struct Case {
    std::string text, message;
  };
  const std::string who = "trace line: workload \"redis\": ";
  for (const Case& c : std::vector<Case>{
           {line("\"tick\":1e300,\"period_s\":1", ""),
            "trace line: tick: 1e+300 is not a whole number from 0 to 18446744073709551615"},
           {line("\"tick\":-1,\"period_s\":1", ""), "trace line: tick: -1 is not a whole number"},
           {line("\"tick\":1.5,\"period_s\":1", ""), "trace line: tick: 1.5 is not a whole number"},
           {line("\"tick\":18446744073709551616,\"period_s\":1", ""),
            "trace line: tick: 1.8446744073709552e+19"},
           {line("\"tick\":5,\"period_s\":-1", ""),
            "trace line: period_s: -1 is not a number from 0.01 to 3600"},
           {line("\"tick\":5,\"period_s\":0", ""),
            "trace line: period_s: 0 is not a number from 0.01 to 3600"},
           {line("\"tick\":5,\"period_s\":1e300", ""), "trace line: period_s: 1e+300 is not"},
           {line("\"tick\":5,\"period_s\":\"1\"", ""), "trace line: period_s: \"1\" is not"},
           {line(ok_top, ",\"rq_waits\":1e300"), who + "rq_waits: 1e+300 is not a whole number"},
           {line(ok_top, ",\"rq_waits\":-3"), who + "rq_waits: -3 is not a whole number"},
           {line(ok_top, ",\"rq_p99_us\":-500"), who + "rq_p99_us: -500 is not a number from 0 up"},
           {line(ok_top, ",\"rq_p99_us\":1e400"),
            "trace line: [json.exception.out_of_range.406] number overflow parsing '1e400'"},
           {line(ok_top, ",\"rq_p50_us\":\"x\""), who + "rq_p50_us: \"x\" is not a number from 0 up"},
           {line(ok_top, ",\"cpu_usage\":1e308"), who + "cpu_usage: 1e+308 is not a number from 0 to 8192"},
           {line(ok_top, ",\"mpki\":-3"), who + "mpki: -3 is not a number from 0 up"},
           {line(ok_top, ",\"migrations_per_s\":-1e308"), who + "migrations_per_s: -1e+308 is not"},
           {line(ok_top, ",\"throttled_per_s\":true"), who + "throttled_per_s: true is not"},
           {line(ok_top, ",\"shares\":1e19"), who + "shares: 1e+19 is not a whole number from 2 to 262144"},
           {line(ok_top, ",\"shares\":0"), who + "shares: 0 is not a whole number from 2 to 262144"},
           {line(ok_top, ",\"cpus\":\"0-4000000000\""), who + "bad cpus \"0-4000000000\": CPU number"},
           {line(ok_top, "",
                 ",{\"instance\":\"redis\",\"workload\":\"redis\",\"critical\":true,\"rq_waits\":1,"
                 "\"rq_p50_us\":1,\"rq_p99_us\":1,\"cpus\":\"0\"}"),
            who + "listed twice in one tick"}}) {
    auto r = parse_json_line(c.text);
    ASSERT_FALSE(r) << c.text;
    EXPECT_THAT(r.error().message(), ::testing::StartsWith(c.message)) << c.text;
  }
  // Null is absent where a field may be unavailable; whole floats are whole numbers.
  auto r = parse_json_line(line("\"tick\":5.0,\"period_s\":0.5", ",\"mpki\":null,\"shares\":2048.0"));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->tick, 5u);
  EXPECT_FALSE(r->workloads[0].mpki);
  EXPECT_EQ(r->workloads[0].shares, 2048u);
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
