// Sensing without root: a fake sensor (scripted per-cgroup counts) over temporary trees with the
// kernel's file layout. The instances and their signals per tick; CPU usage from cgroupfs deltas,
// throttling only where a quota is set; a cgroup made again under its name is fresh and starts from
// its own counters. And the two bugs that came from knowing cgroup files in several places: a v1
// cpuset hierarchy mounted with `noprefix` (sensing read every workload as spanning all CPUs and the
// reconciler failed every cpuset write), and runc's weight mapping on v2 (the weight keel wrote read
// back through systemd's inverse).
#include "loop/sensing.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>

#include "actuators/journal.h"
#include "actuators/writer.h"
#include "config/config.h"
#include "host/fileio.h"
#include "loop/loop.h"
#include "loop/reconciler.h"
#include "loop/telemetry.h"
#include "tests/support/timing.h"
#include "tests/support/tmp_tree.h"

namespace keel::loop {
namespace {

namespace fs = std::filesystem;
using ::keel::testing::make_tree;
using ::keel::testing::slurp;
using ::keel::testing::TempDir;

CpuSet L(const char* s) { return *CpuSet::parse_list(s); }

// Scripted counts: each read() returns the next delta (then empty ones).
class FakeSensor final : public Sensor {
 public:
  std::deque<bpf::SchedDelta> deltas;
  std::function<bpf::Worth(CgroupId)> worth;  // what the latest tend() was told
  std::vector<CgroupId> critical;
  size_t tends = 0;
  std::vector<CgroupId> known;            // what it holds counts of, for tend
  std::vector<bpf::SloEvent> events;      // SLO crossings, for take_events
  std::optional<bpf::SchedDelta> steady;  // read() once `deltas` ran out (else empty ones)
  int efd = -1;                           // an eventfd: each write to it is a crossing of `crossing`
  CgroupId crossing;
  // The clock sensing reads (now() once set; the real one until then): tests of what sensing does over
  // time move it on by hand, so they do not depend on how long this machine takes to sleep.
  std::optional<std::chrono::steady_clock::time_point> clock;
  void advance(std::chrono::milliseconds d) { clock = clock.value_or(std::chrono::steady_clock::now()) + d; }
  std::chrono::steady_clock::time_point now() const override {
    return clock.value_or(std::chrono::steady_clock::now());
  }
  uint64_t now_ns() const {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(now().time_since_epoch()).count());
  }

  Result<bpf::SchedDelta> read() override {
    if (deltas.empty()) return steady.value_or(bpf::SchedDelta{});
    bpf::SchedDelta d = std::move(deltas.front());
    deltas.pop_front();
    for (const auto& c : d.cgroups) known.push_back(c.id);
    return d;
  }
  void tend(const std::function<bpf::Worth(CgroupId)>& w, const std::vector<CgroupId>& c) override {
    std::erase_if(known, [&](const CgroupId& id) { return w(id) == bpf::Worth::gone; });
    worth = w;
    critical = c;
    ++tends;
  }
  size_t entries() const override { return known.size(); }
  size_t capacity() const override { return 4096; }
  std::vector<bpf::ProgStats> prog_stats() const override { return {}; }
  std::optional<bpf::BpfCost> cost() const override { return std::nullopt; }
  bpf::AttachKind attach() const override { return bpf::AttachKind::tp_btf; }
  int events_fd() const override { return efd; }
  std::vector<bpf::SloEvent> take_events() override {
    uint64_t n = 0;
    if (efd >= 0 && ::read(efd, &n, sizeof n) == sizeof n && n > 0)
      events.push_back({crossing, now_ns(), 300'000, 5});
    return std::exchange(events, {});
  }
  bool pmu() const override { return false; }
  std::string counters_note() const override { return "n/a (fake)"; }
};

// `waits` run-queue waits of 10 us each, charged to `id`.
bpf::CgroupSched waited(CgroupId id, uint64_t waits) {
  bpf::CgroupSched c;
  c.id = id;
  c.rq.buckets[bpf::RqHistogram::bucket_of_us(10)] = static_cast<uint32_t>(waits);
  c.rq.count = waits;
  c.rq.sum_ns = waits * 10'000;
  return c;
}

CgroupId id_of(const fs::path& dir, uint32_t hierarchy) {
  struct stat st {};
  ::stat(dir.c_str(), &st);
  return CgroupId{hierarchy, static_cast<uint64_t>(st.st_ino)};
}

config::Spec spec_of(const std::string& toml) {
  auto cfg = config::load_string(toml, "test.toml", {});
  EXPECT_TRUE(cfg) << (cfg ? "" : cfg.error().front().str());
  return config::compile(*cfg, CpuSet::range(0, 3));
}

// This machine's layout (cpu 1, cpuacct 2 and cpuset 3 mounted apart), the cpuset one with noprefix
// as older distributions mount it.
constexpr const char* kV1Mountinfo =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
    "34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,noprefix,cpuset\n";

SysRoots v1_noprefix_host(const TempDir& tmp) {
  make_tree(tmp.path(), {{"proc/self/mountinfo", kV1Mountinfo},
                         {"proc/cgroups",
                          "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpuset\t3\t1\t1\ncpu\t1\t3\t1\n"
                          "cpuacct\t2\t1\t1\n"},
                         {"proc/sys/kernel/random/boot_id", "b\n"},
                         {"sys/fs/cgroup/cpu/cgroup.procs", "1\n"},
                         {"sys/fs/cgroup/cpu/cpu.shares", "1024\n"},
                         {"sys/fs/cgroup/cpuacct/cgroup.procs", "1\n"},
                         {"sys/fs/cgroup/cpuset/cgroup.procs", "1\n"},
                         {"sys/fs/cgroup/cpuset/tasks", "1\n"},
                         {"sys/fs/cgroup/cpuset/cpus", "0-3\n"},
                         {"sys/fs/cgroup/cpuset/mems", "0\n"},
                         {"sys/fs/cgroup/cpuset/effective_cpus", "0-3\n"}});
  for (const std::string cg : {"svc", "svc/crit", "svc/batch"}) {
    const bool leaf = cg != "svc";
    const std::string procs = cg == "svc/crit" ? "100\n" : cg == "svc/batch" ? "200\n" : "";
    make_tree(tmp.path(),
              {{"sys/fs/cgroup/cpu/" + cg + "/cgroup.procs", procs},
               {"sys/fs/cgroup/cpu/" + cg + "/tasks", procs},
               {"sys/fs/cgroup/cpu/" + cg + "/cpu.shares", "1024\n"},
               {"sys/fs/cgroup/cpu/" + cg + "/cpu.cfs_quota_us", "-1\n"},
               {"sys/fs/cgroup/cpu/" + cg + "/cpu.stat", "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n"},
               {"sys/fs/cgroup/cpuacct/" + cg + "/cpuacct.usage", "0\n"},
               {"sys/fs/cgroup/cpuset/" + cg + "/cgroup.procs", procs},
               {"sys/fs/cgroup/cpuset/" + cg + "/tasks", procs},
               {"sys/fs/cgroup/cpuset/" + cg + "/cpus", leaf ? "2-3\n" : "0-3\n"},
               {"sys/fs/cgroup/cpuset/" + cg + "/mems", "0\n"},
               {"sys/fs/cgroup/cpuset/" + cg + "/effective_cpus", leaf ? "2-3\n" : "0-3\n"}});
  }
  return SysRoots::under(tmp.path());
}

constexpr const char* kCritAndBatch = R"(
[daemon]
hierarchy = "cpu"
[[workload]]
name = "crit"
match = { cgroup = "/svc/crit" }
class = "critical"
slo = { runqueue_p99 = "200us" }
[[workload]]
name = "batch"
match = { cgroup = "/svc/batch" }
)";

Topology four_cpus() { return *Topology::synthetic("pack:1 numa:1 l3:1 core:4 pu:1"); }

struct Opened {
  Sensing sensing;
  FakeSensor* fake;
};

Opened open(const SysRoots& roots, const config::Spec& spec, bool inotify = true) {
  auto fake = std::make_unique<FakeSensor>();
  FakeSensor* f = fake.get();
  auto s = Sensing::open(spec, roots, four_cpus(), std::move(fake),
                         {.refresh_ticks = 8, .idle_ticks = 8, .resync_ticks = 64, .inotify = inotify});
  EXPECT_TRUE(s) << s.error().message();
  return {std::move(*s), f};
}

const ctl::WorkloadSignals& signals(const ctl::Snapshot& s, const std::string& instance) {
  for (const auto& w : s.workloads)
    if (w.instance == instance) return w;
  static ctl::WorkloadSignals none;
  ADD_FAILURE() << "no instance " << instance;
  return none;
}

TEST(SensingFakeSensor, InstancesCountsAndCpuUsagePerTick) {
  TempDir tmp;
  const SysRoots roots = v1_noprefix_host(tmp);
  const config::Spec spec = spec_of(kCritAndBatch);
  auto [sensing, fake] = open(roots, spec);
  const CgroupId crit = id_of(tmp.path() / "sys/fs/cgroup/cpu/svc/crit", 1);
  const CgroupId root = id_of(tmp.path() / "sys/fs/cgroup/cpu", 1);
  fake->deltas.push_back({{waited(crit, 40), waited(root, 7)}, 3, 1, {}});
  make_tree(tmp.path(), {{"sys/fs/cgroup/cpuacct/svc/crit/cpuacct.usage", "250000000\n"}});  // 0.25 CPU-s
  auto snap = sensing.sample(1);
  ASSERT_TRUE(snap) << snap.error().message();
  ASSERT_EQ(snap->workloads.size(), 2u);
  EXPECT_EQ(snap->workloads[0].instance, "batch");  // in name order
  const auto& c = signals(*snap, "crit");
  EXPECT_TRUE(c.critical);
  EXPECT_EQ(c.cgroups, std::vector<std::string>{"/svc/crit"});
  EXPECT_EQ(c.rq_waits, 40u);
  EXPECT_NEAR(c.rq_p99_us, 10.5, 1.0);
  ASSERT_TRUE(c.cpu_usage);
  EXPECT_GT(*c.cpu_usage, 0.0);
  EXPECT_NEAR(*c.cpu_usage * snap->period_s, 0.25, 1e-9);
  ASSERT_TRUE(c.throttled_per_s);  // no quota: not throttled, which is 0, not unknown
  EXPECT_EQ(*c.throttled_per_s, 0.0);
  EXPECT_EQ(c.shares, 1024u);
  EXPECT_FALSE(c.fresh);  // first seen by the baseline sample at open
  const SensedCounts& k = sensing.counts();
  ASSERT_TRUE(k.instances.contains("crit"));
  EXPECT_FALSE(k.instances.contains("batch"));  // did nothing
  EXPECT_EQ(k.other.rq.count, 7u);              // the root: no workload's
  EXPECT_EQ(k.map_full, 3u);
  EXPECT_EQ(k.stamp_full, 1u);
  auto next = sensing.sample(2);
  ASSERT_TRUE(next);
  EXPECT_EQ(*signals(*next, "crit").cpu_usage, 0.0);  // nothing since
}

// The demand watch between ticks: a lull (CPU use under the bound) is reported once it has lasted, once
// per lull; the next sample carries how long it has lasted and the latest read; CPU use over the bound
// ends it, and an instance no longer watched is forgotten (watched again, it starts from a new
// baseline). A rise to cpu_above is reported once per rise.
TEST(SensingFakeSensor, TheDemandWatchReportsALullOnceAndTheSampleCarriesIt) {
  TempDir tmp;
  const SysRoots roots = v1_noprefix_host(tmp);
  auto [sensing, fake] = open(roots, spec_of(kCritAndBatch));
  fake->advance(std::chrono::milliseconds(0));  // the clock moves by hand from here
  auto pass = [&](std::chrono::milliseconds d) { fake->advance(d); };
  const std::vector<ctl::DemandWatch> watch{{"crit", 0.5}};
  const std::chrono::milliseconds lull{200};
  auto usage = [&](const char* ns) {
    make_tree(tmp.path(), {{"sys/fs/cgroup/cpuacct/svc/crit/cpuacct.usage", std::string(ns) + "\n"}});
  };
  auto names = [](const std::vector<Sensing::DemandWake>& w) {
    std::vector<std::string> out;
    for (const auto& x : w) out.push_back(x.instance + (x.rose ? " rose" : " lull"));
    return out;
  };
  EXPECT_TRUE(sensing.watch_demand(watch, lull).empty());  // the baseline
  usage("10000000000");                                    // 10 CPU-s at once: busy
  pass(std::chrono::milliseconds(20));
  EXPECT_TRUE(sensing.watch_demand(watch, lull).empty());
  pass(std::chrono::milliseconds(20));
  EXPECT_TRUE(sensing.watch_demand(watch, lull).empty()) << "quiet for 20 ms of the 200";
  pass(lull);
  EXPECT_EQ(names(sensing.watch_demand(watch, lull)), std::vector<std::string>{"crit lull"});
  pass(std::chrono::milliseconds(1));
  EXPECT_TRUE(sensing.watch_demand(watch, lull).empty()) << "once per lull";
  auto snap = sensing.sample(1);
  ASSERT_TRUE(snap);
  EXPECT_GE(signals(*snap, "crit").lull_s, 0.2);
  ASSERT_TRUE(signals(*snap, "crit").watch_cpu);
  EXPECT_EQ(*signals(*snap, "crit").watch_cpu, 0.0);
  EXPECT_EQ(signals(*snap, "batch").lull_s, 0.0);  // not watched
  EXPECT_FALSE(signals(*snap, "batch").watch_cpu);
  usage("20000000000");
  pass(std::chrono::milliseconds(5));
  EXPECT_TRUE(sensing.watch_demand(watch, lull).empty());
  snap = sensing.sample(2);
  ASSERT_TRUE(snap);
  EXPECT_EQ(signals(*snap, "crit").lull_s, 0.0) << "busy again";
  EXPECT_GT(*signals(*snap, "crit").watch_cpu, 0.5);
  // Quiet again, then no longer watched: forgotten, and watched anew it starts from a baseline.
  pass(lull + std::chrono::milliseconds(20));
  EXPECT_EQ(names(sensing.watch_demand(watch, lull)), std::vector<std::string>{"crit lull"});
  EXPECT_TRUE(sensing.watch_demand({}, lull).empty());
  snap = sensing.sample(3);
  ASSERT_TRUE(snap);
  EXPECT_EQ(signals(*snap, "crit").lull_s, 0.0);
  EXPECT_FALSE(signals(*snap, "crit").watch_cpu);
  pass(lull + std::chrono::milliseconds(20));
  EXPECT_TRUE(sensing.watch_demand(watch, lull).empty()) << "a new baseline, not the old lull";
  // Parked, it is watched for a rise: reported once while it stays up, again after it fell.
  const std::vector<ctl::DemandWatch> parked{{"crit", 0, 0.5}};
  EXPECT_TRUE(sensing.watch_demand(parked, lull).empty());
  usage("30000000000");
  pass(std::chrono::milliseconds(5));
  EXPECT_EQ(names(sensing.watch_demand(parked, lull)), std::vector<std::string>{"crit rose"});
  usage("40000000000");
  pass(std::chrono::milliseconds(5));
  EXPECT_TRUE(sensing.watch_demand(parked, lull).empty()) << "once per rise";
  pass(std::chrono::milliseconds(5));
  EXPECT_TRUE(sensing.watch_demand(parked, lull).empty()) << "fell: nothing to say";
  usage("50000000000");
  pass(std::chrono::milliseconds(5));
  EXPECT_EQ(names(sensing.watch_demand(parked, lull)), std::vector<std::string>{"crit rose"});
}

// A victim starved of CPU keeps little busy too, but it still waits over its SLO: an SLO crossing of
// one of its cgroups within a lull starts the lull again, so the watch reports it only 200 ms after the
// crossing, and the sample's lull is counted from there.
TEST(SensingFakeSensor, AnSloCrossingWithinALullStartsItAgain) {
  TempDir tmp;
  const SysRoots roots = v1_noprefix_host(tmp);
  auto [sensing, fake] = open(roots, spec_of(kCritAndBatch));
  fake->advance(std::chrono::milliseconds(0));  // the clock moves by hand from here
  auto pass = [&](std::chrono::milliseconds d) { fake->advance(d); };
  const CgroupId crit = id_of(tmp.path() / "sys/fs/cgroup/cpu/svc/crit", 1);
  const std::vector<ctl::DemandWatch> watch{{"crit", 0.5}};
  const std::chrono::milliseconds lull{200};
  make_tree(tmp.path(), {{"sys/fs/cgroup/cpuacct/svc/crit/cpuacct.usage", "10000000000\n"}});
  EXPECT_TRUE(sensing.watch_demand(watch, lull).empty());  // the baseline
  pass(std::chrono::milliseconds(20));
  EXPECT_TRUE(sensing.watch_demand(watch, lull).empty());  // quiet from here
  pass(std::chrono::milliseconds(120));
  const auto crossed = fake->now();
  fake->events.push_back({crit, fake->now_ns(), 3000000, 5});
  const CgroupId batch = id_of(tmp.path() / "sys/fs/cgroup/cpu/svc/batch", 1);
  fake->events.push_back({batch, fake->now_ns(), 3000000, 5});  // another cgroup's: no matter
  EXPECT_EQ(sensing.take_events().size(), 2u);
  pass(std::chrono::milliseconds(120));  // 260 ms quiet, 120 since the crossing
  EXPECT_TRUE(sensing.watch_demand(watch, lull).empty()) << "the crossing started the lull again";
  auto snap = sensing.sample(1);
  ASSERT_TRUE(snap);
  EXPECT_LT(signals(*snap, "crit").lull_s, 0.2);
  pass(std::chrono::milliseconds(100));
  ASSERT_EQ(sensing.watch_demand(watch, lull).size(), 1u) << "200 ms on from the crossing";
  snap = sensing.sample(2);
  ASSERT_TRUE(snap);
  const double since = std::chrono::duration<double>(fake->now() - crossed).count();
  EXPECT_GE(signals(*snap, "crit").lull_s, 0.2);
  EXPECT_LE(signals(*snap, "crit").lull_s, since);
}

// Issue 38: a victim kept runnable and off the CPU shows no crossing (its wait has not ended) and
// little CPU use, so the watch saw a lull and keel gave everything back. Its thread runnable (R) at two
// reads with the same CPU time is a wait still open: the lull starts again at each such read and the
// sample carries the longest one. Once the thread sleeps (S), the lull runs its 200 ms and is reported.
TEST(SensingFakeSensor, AThreadRunnableAndNotRunIsAStarvedVictimNotALull) {
  TempDir tmp;
  const SysRoots roots = v1_noprefix_host(tmp);
  auto [sensing, fake] = open(roots, spec_of(kCritAndBatch));
  fake->advance(std::chrono::milliseconds(0));
  auto pass = [&](std::chrono::milliseconds d) { fake->advance(d); };
  auto thread = [&](char state, uint64_t exec_ns) {
    make_tree(tmp.path(), {{"proc/100/stat", "100 (redis-server) " + std::string(1, state) + " 1 100 100 0"},
                           {"proc/100/schedstat", std::to_string(exec_ns) + " 900000000 12\n"}});
  };
  const std::vector<ctl::DemandWatch> watch{{"crit", 0.5}};
  const std::chrono::milliseconds lull{200};
  make_tree(tmp.path(), {{"sys/fs/cgroup/cpuacct/svc/crit/cpuacct.usage", "10000000000\n"}});
  thread('R', 5000000);
  EXPECT_TRUE(sensing.watch_demand(watch, lull).empty());  // the baseline
  for (int read = 0; read < 10; ++read) {                  // 500 ms runnable, never run: no lull
    pass(std::chrono::milliseconds(50));
    EXPECT_TRUE(sensing.watch_demand(watch, lull).empty()) << "read " << read;
  }
  auto snap = sensing.sample(1);
  ASSERT_TRUE(snap);
  EXPECT_NEAR(signals(*snap, "crit").starved_s, 0.45, 0.06) << "from the first read that found it waiting";
  EXPECT_LT(signals(*snap, "crit").lull_s, 0.2);
  EXPECT_EQ(signals(*snap, "batch").starved_s, 0.0);
  // It ran a little (its CPU time moved): that wait ended; running or waiting anew, no lull either.
  thread('R', 6000000);
  pass(std::chrono::milliseconds(50));
  EXPECT_TRUE(sensing.watch_demand(watch, lull).empty());
  // Asleep: a lull, reported once 200 ms have passed since the last read that found a wait open.
  thread('S', 6000000);
  for (int read = 0; read < 2; ++read) {
    pass(std::chrono::milliseconds(50));
    EXPECT_TRUE(sensing.watch_demand(watch, lull).empty()) << "read " << read;
  }
  pass(std::chrono::milliseconds(50));
  EXPECT_EQ(sensing.watch_demand(watch, lull).size(), 1u);
  snap = sensing.sample(2);
  ASSERT_TRUE(snap);
  EXPECT_EQ(signals(*snap, "crit").starved_s, 0.0) << "none since the last sample";
  EXPECT_GE(signals(*snap, "crit").lull_s, 0.2);
}

// Every tick the sensor learns which cgroups' map entries matter: the critical instance's cgroup with
// tasks is kept (its entry made when missing), a best-effort one goes before it, one no workload
// covers before that, a gone one first; what the sensor evicted reaches the tick's counts.
TEST(SensingFakeSensor, TheSensorIsToldWhatEachCgroupsEntryIsWorth) {
  TempDir tmp;
  const SysRoots roots = v1_noprefix_host(tmp);
  const config::Spec spec = spec_of(kCritAndBatch);
  auto [sensing, fake] = open(roots, spec);
  const CgroupId crit = id_of(tmp.path() / "sys/fs/cgroup/cpu/svc/crit", 1);
  const CgroupId batch = id_of(tmp.path() / "sys/fs/cgroup/cpu/svc/batch", 1);
  const CgroupId svc = id_of(tmp.path() / "sys/fs/cgroup/cpu/svc", 1);
  bpf::SchedDelta d;
  d.evicted.gone = 2;
  d.evicted.best_effort = 1;
  fake->deltas.push_back(d);
  const size_t before = fake->tends;
  ASSERT_TRUE(sensing.sample(1));
  EXPECT_EQ(fake->tends, before + 1);
  EXPECT_EQ(fake->critical, std::vector<CgroupId>{crit});
  ASSERT_TRUE(fake->worth);
  EXPECT_EQ(fake->worth(batch), bpf::Worth::best_effort);
  EXPECT_EQ(fake->worth(svc), bpf::Worth::unmatched);
  EXPECT_EQ(fake->worth(CgroupId{1, 999999999}), bpf::Worth::gone);
  EXPECT_EQ(sensing.counts().evicted.gone, 2u);
  EXPECT_EQ(sensing.counts().evicted.best_effort, 1u);
  EXPECT_EQ(sensing.counts().evicted.total(), 3u);
}

// Bug (1) of the issue: on a v1 cpuset hierarchy mounted with noprefix, sensing read
// cpuset.effective_cpus (there is none) and saw every workload on all CPUs, and the reconciler read
// cpuset.cpus and failed every cpuset write.
TEST(SensingFakeSensor, V1NoprefixCpusetThroughSensingAndTheReconciler) {
  TempDir tmp;
  const SysRoots roots = v1_noprefix_host(tmp);
  const config::Spec spec = spec_of(kCritAndBatch);
  auto [sensing, fake] = open(roots, spec);
  ASSERT_TRUE(sensing.inventory().cpuset_hierarchy());
  EXPECT_TRUE(sensing.inventory().cpuset_hierarchy()->noprefix);
  auto snap = sensing.sample(1);
  ASSERT_TRUE(snap);
  EXPECT_EQ(signals(*snap, "crit").cpus, L("2-3"));  // its cpuset's, not the host's 0-3

  auto j = act::Journal::open(tmp.path() / "state", "b");
  ASSERT_TRUE(j);
  act::KnobWriter w(roots, act::Mode::enforce, &*j);
  Reconciler r(spec, four_cpus(), w);
  ctl::Plan plan;
  plan.desired["crit"] = {std::nullopt, L("3"), std::nullopt, std::nullopt};
  plan.desired["batch"] = {std::nullopt, L("2"), std::nullopt, std::nullopt};
  auto done = r.apply(plan, sensing.inventory());
  EXPECT_TRUE(done.errors.empty()) << done.errors.front();
  EXPECT_EQ(slurp(tmp.path() / "sys/fs/cgroup/cpuset/svc/crit/cpus"), "3");
  EXPECT_EQ(slurp(tmp.path() / "sys/fs/cgroup/cpuset/svc/batch/cpus"), "2");
  ASSERT_EQ(j->entries().size(), 2u);
  for (const auto& e : j->entries()) {
    EXPECT_TRUE(e.path.str() == "cgroup:cpuset/svc/batch/cpus" ||
                e.path.str() == "cgroup:cpuset/svc/crit/cpus")
        << e.path.str();
    EXPECT_EQ(e.value, ValueKind::cpuset_list);
    EXPECT_EQ(e.original, "2-3");
  }
  // What keel wrote is what sensing reads next (the kernel's effective CPUs follow cpus).
  make_tree(tmp.path(), {{"sys/fs/cgroup/cpuset/svc/crit/effective_cpus", "3\n"}});
  sensing.touched(done.touched);
  auto after = sensing.sample(2);
  ASSERT_TRUE(after);
  EXPECT_EQ(signals(*after, "crit").cpus, L("3"));
  // Given back: the values found.
  auto back = r.apply(ctl::Plan{}, sensing.inventory());
  EXPECT_TRUE(back.errors.empty()) << back.errors.front();
  EXPECT_EQ(slurp(tmp.path() / "sys/fs/cgroup/cpuset/svc/crit/cpus"), "2-3");
}

// Bug (2): with weight_mapping = "runc" on v2, keel wrote shares 8192 as weight 532 and sensing read
// it back through systemd's inverse as 5447, which keel_knob_value{knob="shares"} then reported.
TEST(SensingFakeSensor, RuncWeightMappingRoundTripsOverAV2Tree) {
  TempDir tmp;
  std::vector<std::pair<std::string, std::string>> files = {
      {"proc/self/mountinfo", "41 23 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"},
      {"proc/cgroups", "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t0\t3\t1\n"},
      {"proc/sys/kernel/random/boot_id", "b\n"},
      {"sys/fs/cgroup/cgroup.controllers", "cpuset cpu\n"},
      {"sys/fs/cgroup/cgroup.procs", "1\n"},
      {"sys/fs/cgroup/cpuset.cpus.effective", "0-3\n"},
      {"sys/fs/cgroup/cpuset.mems.effective", "0\n"}};
  for (const char* cg : {"svc", "svc/crit", "svc/batch"}) {
    auto f = testing::cgroup_v2_files(std::string("sys/fs/cgroup/") + cg,
                                      std::string(cg) == "svc" ? "" : "7\n", "", "0-3", "0");
    files.insert(files.end(), f.begin(), f.end());
    files.push_back({std::string("sys/fs/cgroup/") + cg + "/cpu.stat", "usage_usec 0\nnr_throttled 0\n"});
  }
  make_tree(tmp.path(), files);
  const SysRoots roots = SysRoots::under(tmp.path());
  const config::Spec spec =
      spec_of(std::string(kCritAndBatch).substr(std::string_view(kCritAndBatch).find("[[")) +
              "[actuators]\nweight_mapping = \"runc\"\n");
  ASSERT_EQ(spec.actuators.weight_mapping, WeightMapping::runc);
  auto [sensing, fake] = open(roots, spec);
  auto snap = sensing.sample(1);
  ASSERT_TRUE(snap);
  EXPECT_EQ(signals(*snap, "crit").shares, 1024u);  // weight 100

  auto j = act::Journal::open(tmp.path() / "state", "b");
  ASSERT_TRUE(j);
  act::KnobWriter w(roots, act::Mode::enforce, &*j);
  Reconciler r(spec, four_cpus(), w);
  ctl::Plan plan;
  plan.desired["crit"] = {8192, std::nullopt, std::nullopt, std::nullopt};
  auto done = r.apply(plan, sensing.inventory());
  EXPECT_TRUE(done.errors.empty()) << done.errors.front();
  EXPECT_EQ(slurp(tmp.path() / "sys/fs/cgroup/svc/crit/cpu.weight"), "532");  // runc's weight for 8192
  sensing.touched(done.touched);
  auto after = sensing.sample(2);
  ASSERT_TRUE(after);
  EXPECT_EQ(signals(*after, "crit").shares, 8192u);  // not 5447
  // And that is the knob value the metrics report.
  auto report = tick_report(spec, *after, sensor_view(sensing), plan, done, {false, 0.001, 0, std::nullopt});
  for (const auto& wr : report.workloads) {
    if (wr.workload != "crit") continue;
    EXPECT_EQ(wr.knobs.at("shares"), 8192.0);
  }
}

// A cgroup made again under its name is a new cgroup: its instance is fresh and its CPU usage counts
// from its own counter (the old one's value is no baseline), and the sensor forgets the old one.
TEST(SensingFakeSensor, ACgroupMadeAgainIsFreshAndCountsFromItsOwnCounters) {
  TempDir tmp;
  const SysRoots roots = v1_noprefix_host(tmp);
  const config::Spec spec = spec_of(kCritAndBatch);
  auto [sensing, fake] = open(roots, spec);
  const CgroupId old_id = id_of(tmp.path() / "sys/fs/cgroup/cpu/svc/crit", 1);
  make_tree(tmp.path(), {{"sys/fs/cgroup/cpuacct/svc/crit/cpuacct.usage", "900000000\n"}});
  fake->deltas.push_back({{waited(old_id, 5)}, 0, 0, {}});
  ASSERT_TRUE(sensing.sample(1));
  // crit's container restarted: every hierarchy's cgroup made again, the new counter starts low.
  for (const char* h : {"cpu", "cpuacct", "cpuset"}) {
    fs::path dir = tmp.path() / "sys/fs/cgroup" / h / "svc/crit";
    fs::rename(dir, dir.parent_path() / "crit.old");
  }
  make_tree(tmp.path(), {{"sys/fs/cgroup/cpu/svc/crit/cgroup.procs", "300\n"},
                         {"sys/fs/cgroup/cpu/svc/crit/cpu.shares", "2048\n"},
                         {"sys/fs/cgroup/cpu/svc/crit/cpu.cfs_quota_us", "-1\n"},
                         {"sys/fs/cgroup/cpuacct/svc/crit/cpuacct.usage", "100000000\n"},
                         {"sys/fs/cgroup/cpuset/svc/crit/effective_cpus", "1\n"}});
  for (const char* h : {"cpu", "cpuacct", "cpuset"})
    fs::remove_all(tmp.path() / "sys/fs/cgroup" / h / "svc/crit.old");
  auto snap = sensing.sample(2);
  ASSERT_TRUE(snap);
  const auto& c = signals(*snap, "crit");
  EXPECT_TRUE(c.fresh);
  EXPECT_FALSE(c.cpu_usage);   // its first read: no delta yet (not 0.1 - 0.9 s, nor 0.1 s)
  EXPECT_EQ(c.shares, 2048u);  // read afresh
  EXPECT_EQ(c.cpus, L("1"));
  ASSERT_TRUE(fake->worth);
  EXPECT_EQ(fake->worth(old_id), bpf::Worth::gone);  // the old cgroup's counts are dropped
  make_tree(tmp.path(), {{"sys/fs/cgroup/cpuacct/svc/crit/cpuacct.usage", "150000000\n"}});
  auto third = sensing.sample(3);
  ASSERT_TRUE(third);
  ASSERT_TRUE(signals(*third, "crit").cpu_usage);
  EXPECT_NEAR(*signals(*third, "crit").cpu_usage * third->period_s, 0.05, 1e-9);
}

// Throttling is read where a quota is set; a quota set since is seen within the refresh ticks.
TEST(SensingFakeSensor, ThrottlingWhereAQuotaIsSet) {
  TempDir tmp;
  const SysRoots roots = v1_noprefix_host(tmp);
  const config::Spec spec = spec_of(kCritAndBatch);
  auto [sensing, fake] = open(roots, spec);
  make_tree(tmp.path(),
            {{"sys/fs/cgroup/cpu/svc/batch/cpu.cfs_quota_us", "50000\n"},
             {"sys/fs/cgroup/cpu/svc/batch/cpu.stat", "nr_periods 10\nnr_throttled 4\nthrottled_time 9\n"}});
  double seen = 0;
  for (uint64_t t = 1; t <= 12 && seen == 0; ++t) {
    // It runs (its usage grows) and hits its quota three times a tick.
    make_tree(tmp.path(),
              {{"sys/fs/cgroup/cpu/svc/batch/cpu.stat",
                "nr_periods 10\nnr_throttled " + std::to_string(4 + 3 * t) + "\nthrottled_time 9\n"},
               {"sys/fs/cgroup/cpuacct/svc/batch/cpuacct.usage", std::to_string(1000000 * t) + "\n"}});
    auto snap = sensing.sample(t);
    ASSERT_TRUE(snap);
    if (auto th = signals(*snap, "batch").throttled_per_s) seen = *th * snap->period_s;
  }
  // 3 periods a tick, once the quota was seen (a rate over the measured period, times that period)
  EXPECT_NEAR(seen, 3.0, 1e-9);
}

}  // namespace
}  // namespace keel::loop

namespace keel::loop {
namespace {

// A cgroup whose tasks neither ran (the sensor saw nothing of them) nor used CPU at the last read is
// idle: its counters are read again only every few ticks, and its usage is 0 meanwhile. Once it runs
// (the sensor sees a switch-in) it is read at once; usage it had meanwhile is counted when read.
TEST(SensingFakeSensor, AnIdleCgroupIsReadEveryFewTicksAndAtOnceWhenItRuns) {
  TempDir tmp;
  const SysRoots roots = v1_noprefix_host(tmp);
  const config::Spec spec = spec_of(kCritAndBatch);
  auto [sensing, fake] = open(roots, spec);
  const fs::path usage = tmp.path() / "sys/fs/cgroup/cpuacct/svc/batch/cpuacct.usage";
  ASSERT_TRUE(sensing.sample(1));  // its usage did not grow: idle from now on
  // It ran without the sensor seeing it (a test's fake, not a kernel): not read until due.
  make_tree(tmp.path(), {{"sys/fs/cgroup/cpuacct/svc/batch/cpuacct.usage", "300000000\n"}});
  double total = 0;
  unsigned zero_ticks = 0;
  for (uint64_t t = 2; t <= 9; ++t) {
    auto snap = sensing.sample(t);
    ASSERT_TRUE(snap);
    const auto& b = signals(*snap, "batch");
    ASSERT_TRUE(b.cpu_usage);
    if (*b.cpu_usage == 0) ++zero_ticks;
    total += *b.cpu_usage * snap->period_s;
  }
  EXPECT_GE(zero_ticks, 1u);
  EXPECT_NEAR(total, 0.3, 1e-9);  // within refresh_ticks (8) it is read, and nothing is lost
  // The sensor sees it run: read that very tick.
  make_tree(tmp.path(), {{"sys/fs/cgroup/cpuacct/svc/batch/cpuacct.usage", "500000000\n"}});
  fake->deltas.push_back({{waited(id_of(tmp.path() / "sys/fs/cgroup/cpu/svc/batch", 1), 3)}, 0, 0, {}});
  auto snap = sensing.sample(10);
  ASSERT_TRUE(snap);
  EXPECT_NEAR(*signals(*snap, "batch").cpu_usage * snap->period_s, 0.2, 1e-9);
}

}  // namespace
}  // namespace keel::loop

namespace keel::loop {
namespace {

// `waits` run-queue waits of `us` each, charged to `id`.
bpf::CgroupSched waited_long(CgroupId id, uint64_t waits, double us) {
  bpf::CgroupSched c;
  c.id = id;
  c.rq.buckets[bpf::RqHistogram::bucket_of_us(us)] = static_cast<uint32_t>(waits);
  c.rq.count = waits;
  c.rq.sum_ns = static_cast<uint64_t>(static_cast<double>(waits) * us * 1000.0);
  return c;
}

// crit and batch with cpusets and weights (no class), the [daemon] table's `daemon` lines added.
config::Spec loop_spec(const std::string& daemon) {
  return spec_of("[daemon]\nhierarchy = \"cpu\"\n" + daemon +
                 std::string(kCritAndBatch).substr(std::string_view(kCritAndBatch).find("[[")) +
                 "[actuators]\ncpuset = true\ncpu_weight = true\npreempt_class = \"off\"\n");
}

// Whole ticks of keel run's loop (sense, decide, act, publish) over a fake sensor and a temporary v1
// tree with the kernel's file formats, enforcing, with a journal: while crit waits 3 ms at a time and
// keeps most of a CPU busy, the loop gives it whole cores (its cpuset and the batch's change, each
// journaled first, the metrics published every tick); once it idles, everything goes back as found.
// The loop runs on a thread of its own: it moves its thread off the CPUs crit is given.
TEST(LoopFakeSensor, WholeTicksProtectAVictimThenGiveEverythingBackWhenItIdles) {
  TempDir tmp;
  const SysRoots roots = v1_noprefix_host(tmp);
  const config::Spec spec = loop_spec("period = \"100ms\"\n");
  ASSERT_EQ(spec.period, std::chrono::milliseconds(100));
  auto [sensing, fake] = open(roots, spec);
  const CgroupId crit = id_of(tmp.path() / "sys/fs/cgroup/cpu/svc/crit", 1);
  auto j = act::Journal::open(tmp.path() / "state", "b");
  ASSERT_TRUE(j);
  act::KnobWriter writer(roots, act::Mode::enforce, &*j);
  metrics::Metrics m(metrics_setup(spec, false, false, "test"));
  const fs::path cg = tmp.path() / "sys/fs/cgroup";
  auto file = [&](const std::string& rel) { return std::string(trim(slurp(cg / rel))); };
  const std::string crit_cpus = file("cpuset/svc/crit/cpus"), batch_cpus = file("cpuset/svc/batch/cpus");
  uint64_t usage_ns = 0;
  std::vector<std::string> crit_seen, batch_seen;
  std::vector<bool> journaled;
  std::string error;
  std::thread worker([&] {
    auto events = Events::open();
    if (!events) {
      error = events.error().message();
      return;
    }
    Loop loop({.spec = spec,
               .topo = four_cpus(),
               .sensing = &sensing,
               .writer = &writer,
               .metrics = &m,
               .roots = roots});
    for (int t = 0; t < 16; ++t) {
      const bool busy = t < 8;
      if (busy) {
        usage_ns += 90'000'000;  // 0.9 CPU over the 100 ms tick
        make_tree(tmp.path(),
                  {{"sys/fs/cgroup/cpuacct/svc/crit/cpuacct.usage", std::to_string(usage_ns) + "\n"}});
        fake->deltas.push_back({{waited_long(crit, 200, 3000)}, 0, 0, {}});
      }
      if (loop.run(*events, true) != Loop::Exit::stop) error = "the loop asked for a reload";
      crit_seen.push_back(file("cpuset/svc/crit/cpus"));
      batch_seen.push_back(file("cpuset/svc/batch/cpus"));
      journaled.push_back(j->has(act::KnobPath{act::Root::cgroup, "cpuset/svc/crit/cpus"}));
    }
  });
  worker.join();
  ASSERT_TRUE(error.empty()) << error;
  // Protected while busy: crit on CPUs of its own, the batch off them.
  auto protected_at = std::find_if(crit_seen.begin(), crit_seen.begin() + 8,
                                   [&](const std::string& c) { return c != crit_cpus; });
  ASSERT_NE(protected_at, crit_seen.begin() + 8) << "crit's cpuset never changed while it was busy";
  const size_t at = static_cast<size_t>(protected_at - crit_seen.begin());
  const auto given = CpuSet::parse_list(crit_seen[at]);
  const auto rest = CpuSet::parse_list(batch_seen[at]);
  ASSERT_TRUE(given && rest) << crit_seen[at] << " / " << batch_seen[at];
  EXPECT_FALSE(given->intersects(*rest)) << crit_seen[at] << " / " << batch_seen[at];
  EXPECT_TRUE(journaled[at]) << "its original, journaled before the write";
  // Idle: everything back as found.
  EXPECT_EQ(crit_seen.back(), crit_cpus);
  EXPECT_EQ(batch_seen.back(), batch_cpus);
  // Every tick was published.
  const std::string text = m.render();
  EXPECT_NE(text.find("keel_ticks_total 16"), std::string::npos) << text.substr(0, 2000);
}

// keel run's loop with early ticks, running on its own over a 1 s period until it acts: crit's waits cross
// its SLO every 20 ms (a few waits over it: the sensor's watch) while its run-queue p99 (10 us) stays
// well within the SLO, and it keeps 0.9 CPUs busy where the batch keeps 1.8 of its 2 CPUs busy. The
// crossings wake early ticks that find nothing to do; after two of them they wake none until the next
// periodic tick, which sees a window most of a period long, so crit's demand for whole cores is seen
// and met. (When every crossing woke a tick, no window reached half a period, that demand was never
// evidence, and crit shared its CPUs with the batch all along: the multi-tenant redis benchmark's
// best-effort CPU fell to 1.34x static pinning's in such a window.)
TEST(LoopFakeSensor, CrossingsThatChangeNothingStopWakingTicksUntilThePeriodicOne) {
  TempDir tmp;
  const SysRoots roots = v1_noprefix_host(tmp);
  const config::Spec spec = loop_spec("period = \"1s\"\nearly_ticks = true\n");
  auto [sensing, fake] = open(roots, spec);
  const CgroupId crit = id_of(tmp.path() / "sys/fs/cgroup/cpu/svc/crit", 1);
  const CgroupId batch = id_of(tmp.path() / "sys/fs/cgroup/cpu/svc/batch", 1);
  fake->steady = bpf::SchedDelta{{waited(crit, 500), waited(batch, 500)}, 0, 0, {}};
  fake->efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ASSERT_GE(fake->efd, 0);
  fake->crossing = crit;
  auto j = act::Journal::open(tmp.path() / "state", "b");
  ASSERT_TRUE(j);
  act::KnobWriter writer(roots, act::Mode::enforce, &*j);
  metrics::Metrics m(metrics_setup(spec, false, false, "test"));
  const fs::path cg = tmp.path() / "sys/fs/cgroup";
  auto file = [&](const std::string& rel) { return std::string(trim(slurp(cg / rel))); };
  const std::string crit_cpus = file("cpuset/svc/crit/cpus");
  // The kernel's side: CPU time growing with the clock (written whole: a file read mid-write would be
  // a tick without usage), and a crossing every 20 ms.
  std::atomic<bool> done{false}, waiting{false};
  std::thread kernel([&] {
    const auto t0 = std::chrono::steady_clock::now();
    while (!done) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      for (auto [cgroup, cpus] : {std::pair{"crit", 0.9}, std::pair{"batch", 1.8}}) {
        const fs::path f = cg / "cpuacct/svc" / cgroup / "cpuacct.usage";
        make_tree(tmp.path(), {{"next.usage", std::to_string(static_cast<uint64_t>(s * cpus * 1e9)) + "\n"}});
        fs::rename(tmp.path() / "next.usage", f);
      }
      const uint64_t one = 1;
      (void)!::write(fake->efd, &one, sizeof one);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  std::string error;
  std::thread worker([&] {
    auto events = Events::open();
    if (!events) {
      error = events.error().message();
      waiting = true;
      return;
    }
    waiting = true;  // the stop signal is blocked in this thread now: it ends the loop, not the test
    Loop loop({.spec = spec,
               .topo = four_cpus(),
               .sensing = &sensing,
               .writer = &writer,
               .metrics = &m,
               .roots = roots});
    if (loop.run(*events, false) != Loop::Exit::stop) error = "the loop asked for a reload";
  });
  while (!waiting) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // Until the periodic tick has acted (crit's CPUs changed), however long this machine takes to get
  // there, and a little longer (two early ticks may follow it).
  const auto t0 = std::chrono::steady_clock::now();
  const bool acted = testing::eventually([&] { return file("cpuset/svc/crit/cpus") != crit_cpus; },
                                         std::chrono::seconds(30));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double ran_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (error.empty()) ::pthread_kill(worker.native_handle(), SIGTERM);
  worker.join();
  done = true;
  kernel.join();
  ::close(fake->efd);
  ASSERT_TRUE(error.empty()) << error;
  // Whole cores for its demand, from the periodic tick's window: crit's CPUs its own, the batch off them.
  const std::string now = file("cpuset/svc/crit/cpus");
  EXPECT_TRUE(acted) << "crit's demand for whole cores was never seen in 30 s";
  EXPECT_NE(now, crit_cpus) << "crit's demand for whole cores was never seen";
  const auto given = CpuSet::parse_list(now);
  const auto rest = CpuSet::parse_list(file("cpuset/svc/batch/cpus"));
  ASSERT_TRUE(given && rest);
  EXPECT_FALSE(given->intersects(*rest)) << now << " / " << rest->to_list();
  // Ticks: two early ones at the start, then for each periodic tick (one a second; the one that acts
  // comes about 1 s in) at most two early ones after it. A crossing every 20 ms and one tick per 100 ms
  // at most would have made ten a second.
  const std::string text = m.render();
  const auto at = text.find("\nkeel_ticks_total ");
  ASSERT_NE(at, std::string::npos) << text.substr(0, 2000);
  const int ticks = std::stoi(text.substr(at + 18));
  const int periodic = static_cast<int>(ran_s) + 1;
  std::printf("%d ticks in %.2f s (%d periodic)\n", ticks, ran_s, periodic);
  EXPECT_GE(ticks, 3) << "the periodic tick and the first crossings' early ones";
  EXPECT_LE(ticks, 3 * periodic) << "crossings that changed nothing kept waking ticks";
}

}  // namespace
}  // namespace keel::loop
