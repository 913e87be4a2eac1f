// Real BPF on the real kernel (privileged): the probe program loads, attaches and counts.
#include "bpf/features.h"

#include <gtest/gtest.h>
#include <time.h>

#include <filesystem>
#include <thread>

#include "tests/support/tmp_tree.h"

namespace keel::bpf {
namespace {

// Each nanosleep blocks the thread, so the CPU switches away from it and back at least once.
void sleep_many(int n) {
  for (int i = 0; i < n; ++i) {
    timespec ts{0, 100'000};
    ::nanosleep(&ts, nullptr);
  }
}

TEST(BpfFeatures, ProbeFindsAWorkingAttachMode) {
  KEEL_REQUIRE_ROOT();
  auto f = probe_features(SysRoots::host());
  // tp_btf needs kernel BTF; without it only raw_tp can work.
  if (!f.btf) {
    EXPECT_FALSE(f.tp_btf);
  }
  EXPECT_TRUE(f.tp_btf || f.raw_tp) << f.tp_btf_error << " / " << f.raw_tp_error;
  if (!f.tp_btf) {
    EXPECT_FALSE(f.tp_btf_error.empty());
  }
  EXPECT_TRUE(f.sw_events) << f.sw_events_error;
}

TEST(BpfFeatures, BtfIsLookedUpUnderSysRoots) {
  testing::TempDir t;
  testing::make_tree(t.path(), {{"sys/kernel/btf/", ""}});
  EXPECT_FALSE(probe_features(SysRoots::under(t.path())).btf);
  testing::make_tree(t.path(), {{"sys/kernel/btf/vmlinux", "\x9f\xeb"}});
  EXPECT_TRUE(probe_features(SysRoots::under(t.path())).btf);
}

TEST(BpfFeatures, PmuProbeAgreesWithPerf) {
  // An independent tool on the same machine: perf says whether a hardware counter exists.
  auto [rc, out] = testing::run_command("perf stat -x, -e cache-misses -- true");
  if (rc == 127 || out.find("not found") != std::string::npos)
    GTEST_SKIP() << "perf (linux-perf) not installed: " << out;
  auto f = probe_features(SysRoots::host());
  bool perf_counts = out.find("<not supported>") == std::string::npos &&
                     out.find("cache-misses") != std::string::npos && rc == 0;
  EXPECT_EQ(f.hw_pmu, perf_counts) << "perf said: " << out << "\nkeel: " << f.hw_pmu_error;
  if (!f.hw_pmu) {
    EXPECT_FALSE(f.hw_pmu_error.empty());
  }
}

TEST(BpfFeatures, SwitchCounterCountsContextSwitches) {
  KEEL_REQUIRE_ROOT();
  auto counter = SwitchCounter::open();
  ASSERT_TRUE(counter) << counter.error().message();
  auto f = probe_features(SysRoots::host());
  EXPECT_EQ(counter->kind(), f.tp_btf ? AttachKind::tp_btf : AttachKind::raw_tp);
  auto before = counter->switches();
  ASSERT_TRUE(before) << before.error().message();
  std::thread t(sleep_many, 300);
  t.join();
  auto after = counter->switches();
  ASSERT_TRUE(after);
  EXPECT_GE(*after - *before, 300u);
}

TEST(BpfFeatures, ForcedRawTracepointFallbackCounts) {
  KEEL_REQUIRE_ROOT();
  auto counter = SwitchCounter::open(AttachChoice::raw_tp);
  ASSERT_TRUE(counter) << counter.error().message();
  EXPECT_EQ(counter->kind(), AttachKind::raw_tp);
  auto before = counter->switches();
  sleep_many(200);
  auto after = counter->switches();
  ASSERT_TRUE(before && after);
  EXPECT_GE(*after - *before, 200u);
}

TEST(BpfFeatures, DetachesOnDestruction) {
  KEEL_REQUIRE_ROOT();
  uint64_t frozen = 0;
  {
    auto counter = SwitchCounter::open();
    ASSERT_TRUE(counter);
    auto moved = std::move(*counter);  // ownership moves; only one destroy
    sleep_many(10);
    frozen = moved.switches().value_or(0);
    EXPECT_GT(frozen, 0u);
  }
  // No program of ours may stay loaded: bpftool lists none named keel_probe_* once the kernel
  // has finished freeing them (release is deferred past an RCU grace period, so poll briefly).
  std::string out;
  for (int i = 0; i < 50; ++i) {
    auto [rc, o] = testing::run_command("bpftool prog show");
    ASSERT_EQ(rc, 0) << o;
    out = o;
    if (out.find("keel_probe_") == std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(out.find("keel_probe_"), std::string::npos) << out;
}

}  // namespace
}  // namespace keel::bpf
