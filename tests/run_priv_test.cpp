// keel run end to end on the real host (root, 2 CPUs): a critical periodic waker that measures its own
// wake-up latency, best-effort stress-ng CPU hogs, and the real keel binary with real BPF sensors. On
// cgroup v1 (cpu + cpuacct + cpuset) the test's cgroups are directories; on cgroup v2 under systemd (the
// guest of scripts/vm-test.sh) the waker runs in a service and the noise in scopes with Delegate=yes, in
// a slice of the test's own (tests/support/scene.h), and keel senses and writes the unified hierarchy.
// Enforce: keel detects the interference, gives the waker CPUs of its own, the waker's measured latency falls
// under the SLO, best-effort work gets its CPUs back once the critical load stops, and every knob is back
// after keel exits. Observe: the same detection, logged as "would", and no knob file changes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "host/cgroup.h"
#include "host/fd.h"
#include "host/fileio.h"
#include "tests/support/dashboards.h"
#include "tests/support/docker.h"
#include "tests/support/http.h"
#include "tests/support/scene.h"
#include "tests/support/timing.h"
#include "tests/support/tmp_tree.h"

namespace keel {
namespace {

namespace fs = std::filesystem;
using testing::run_command;
using namespace std::chrono_literals;
using testing::slurp;

constexpr double kSloUs = 300;
constexpr const char* kLeaves[] = {"/crit", "/be1", "/be2", "/be3"};

using testing::now_ns;

// What the waker shares with the test: each wake-up's lateness and when it happened.
struct WakeLog {
  std::atomic<uint32_t> idle{0};  // 1: the critical load stops (it sleeps 200 ms, does no work)
  std::atomic<uint64_t> n{0};
  static constexpr size_t kCap = 1 << 20;
  uint64_t at_ns[kCap];
  uint32_t late_ns[kCap];
};

// The kernel's own account of a task's run-queue wait (/proc/PID/schedstat, CONFIG_SCHED_INFO, in
// testing::TaskCounts): independent of keel's BPF, and blind to what no cgroup knob controls (a late
// timer, a halted vCPU the hypervisor wakes late).
using testing::task_counts;
using testing::TaskCounts;
// The mean run-queue wait (us) per time on a CPU between two readings.
double mean_wait_us(const TaskCounts& a, const TaskCounts& b) { return b.since(a).mean_wait_us(); }

// The waker's p99 lateness (us) over wake-ups in [from, to).
double p99_between(const WakeLog& log, uint64_t from, uint64_t to, size_t* count = nullptr) {
  std::vector<uint32_t> v;
  uint64_t n = std::min<uint64_t>(log.n.load(), WakeLog::kCap);
  for (uint64_t i = 0; i < n; ++i)
    if (log.at_ns[i] >= from && log.at_ns[i] < to) v.push_back(log.late_ns[i]);
  if (count) *count = v.size();
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(static_cast<double>(v.size()) * 0.99))] / 1e3;
}

class RunPriv : public ::testing::Test {
 protected:
  void SetUp() override {
    KEEL_REQUIRE_ROOT();
    if (sysconf(_SC_NPROCESSORS_ONLN) != 2)
      GTEST_SKIP() << "skipped: the scenario is written for a 2-CPU host";
    if (!fs::exists("/usr/bin/stress-ng")) GTEST_SKIP() << "skipped: stress-ng is not installed";
    std::string why;
    if (!testing::host_layout(&why)) GTEST_SKIP() << "skipped: " << why;
    name_ = "keel-run-test-" + std::to_string(getpid());
    // On v2 the critical workload is a service and the noise three scopes with Delegate=yes (what
    // container runtimes make).
    scene_ =
        std::make_unique<testing::Scene>(name_, std::vector<testing::Scene::Leaf>{{"crit", true, false, {}},
                                                                                  {"be1", false, true, {}},
                                                                                  {"be2", false, true, {}},
                                                                                  {"be3", false, true, {}}});
    ASSERT_EQ(scene_->error(), "");
    std::printf("layout: %s, critical %s, noise %s\n", testing::to_string(scene_->layout()),
                scene_->path("crit").c_str(), scene_->glob("be").c_str());
    std::fflush(stdout);  // before any fork: a child must not print it again
    log_ = static_cast<WakeLog*>(
        mmap(nullptr, sizeof(WakeLog), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(log_, MAP_FAILED);
    new (log_) WakeLog();
  }

  void TearDown() override {
    while (!keels_.empty()) stop_keel(keels_.back());  // a test that failed early: keel gives its knobs back
    for (pid_t p : pids_) {
      ::kill(-p, SIGKILL);
      ::kill(p, SIGKILL);
      ::waitpid(p, nullptr, 0);
    }
    scene_.reset();  // the test's processes killed, its cgroups or units removed
    for (const fs::path& d : extra_dirs_) ::rmdir(d.c_str());  // children first, as added
    for (const std::string& u : extra_units_) testing::systemd::stop(u);
    // A test that failed before keel gave its root-tasks group back: its processes go home first.
    if (const fs::path g = cpuset_root_ / "keel-root-tasks"; !cpuset_root_.empty() && fs::exists(g)) {
      for (int pass = 0; pass < 8 && !trim(slurp(g / "cgroup.procs")).empty(); ++pass) {
        std::string procs = slurp(g / "cgroup.procs");
        for (size_t k = 0, e; k < procs.size(); k = e + 1) {
          e = procs.find('\n', k);
          if (e == std::string::npos) e = procs.size();
          if (e > k) (void)write_file(cpuset_root_ / "cgroup.procs", procs.substr(k, e - k));
        }
      }
      ::rmdir(g.c_str());
    }
    if (log_ && log_ != MAP_FAILED) munmap(log_, sizeof(WakeLog));
  }

  // A child in the scene's leaf `sub` ("crit", "be1"): its own process group, then `body`.
  pid_t child(const char* sub, const std::function<void()>& body) { return keep(scene_->spawn(sub, body)); }
  // The same in the cgroup at `path` from the hierarchy root (a container's).
  pid_t child_at(const std::string& path, const std::function<void()>& body) {
    return keep(scene_->spawn_at(path, body));
  }
  pid_t keep(pid_t p) {
    EXPECT_GT(p, 0) << scene_->error();
    return p;
  }
  // How the noise instances' names start in keel's log: "noise/" and the leaves' last path component
  // ("be1" on v1, "keel_run_test_N-be1.scope" on v2).
  std::string noise() const {
    const std::string g = scene_->glob("be");
    const size_t from = g.rfind('/') + 1;
    return "noise/" + g.substr(from, g.find('*') - from);
  }
  // A leaf's file, trimmed ("cpu.idle", "cpuset.cpus"); "" names the scene's parent.
  std::string leaf_file(const std::string& leaf, const char* file, const char* controller = "cpu") const {
    return std::string(trim(slurp(scene_->dir(leaf, controller) / file)));
  }

  // The critical workload: every 1 ms (timer slack 1 ns) it wakes, records how late it is, and works
  // 300 us; with `idle` set it only sleeps.
  pid_t start_waker(const std::string& at = "") {
    WakeLog* log = log_;
    return child_at(at.empty() ? scene_->path("crit") : at, [log] {
      ::prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
      for (;;) {
        if (log->idle.load()) {  // stopped: a few wake-ups a second, too few to judge a p99 on
          timespec ts{0, 200'000'000};
          nanosleep(&ts, nullptr);
          continue;
        }
        uint64_t t0 = now_ns();
        timespec ts{0, 1'000'000};
        nanosleep(&ts, nullptr);
        uint64_t t1 = now_ns();
        uint64_t i = log->n.load(std::memory_order_relaxed);
        if (i < WakeLog::kCap) {
          log->at_ns[i] = t1;
          log->late_ns[i] = static_cast<uint32_t>(std::min<uint64_t>(t1 - t0 - 1'000'000, UINT32_MAX));
        }
        log->n.store(i + 1, std::memory_order_release);
        while (now_ns() - t1 < 300'000) {
        }
      }
    });
  }

  // Best-effort noise: three containers' worth of stress-ng, two CPU hogs in each cgroup (one cgroup of
  // hogs is no match for a critical cgroup's equal weight; several tenants are).
  void start_noise(const std::vector<std::string>& at = {}) {
    std::vector<std::string> cgroups = at;
    if (cgroups.empty())
      for (const char* be : {"be1", "be2", "be3"}) cgroups.push_back(scene_->path(be));
    for (const std::string& be : cgroups)
      child_at(be, [] {
        int null = ::open("/dev/null", O_WRONLY);
        ::dup2(null, 1);
        ::execl("/usr/bin/stress-ng", "stress-ng", "--cpu", "2", "--quiet", static_cast<char*>(nullptr));
        _exit(127);
      });
  }

  fs::path write_config(const fs::path& dir, const std::string& mode, const std::string& actuators,
                        double slo_us = kSloUs, const std::string& period = "500ms") {
    fs::path f = dir / "keel.toml";
    std::ofstream out(f);
    metrics_port_ = testing::free_port();
    out << "[daemon]\nmode = \"" << mode << "\"\nperiod = \"" << period << "\"\nstate_dir = \""
        << (dir / "state").string() << "\"\nhierarchy = \"" << scene_->hierarchy()
        << "\"\nmetrics_listen = \"127.0.0.1:" << metrics_port_ << "\"\n\n"
        << actuators << "\n"
        << "[[workload]]\nname = \"crit\"\nmatch = { cgroup = \"" << scene_->path("crit")
        << "\" }\nclass = \"critical\"\n"
        << "slo = { runqueue_p99 = \"" << slo_us << "us\" }\n\n"
        << "[[workload]]\nname = \"noise\"\nmatch = { cgroup = \"" << scene_->glob("be")
        << "\", each = true }\nclass = \"best-effort\"\n";
    return f;
  }

  // The real keel binary, its log (stderr and stdout) in `log`.
  // `prefix` runs it (setpriv ...); `env` adds variables (NOTIFY_SOCKET=...).
  pid_t start_keel(const std::vector<std::string>& args, const fs::path& log,
                   const std::vector<std::string>& prefix = {}, const std::vector<std::string>& env = {}) {
    pid_t p = fork();
    if (p == 0) {
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
      std::vector<std::string> all = prefix;
      all.push_back(testing::keel_binary().string());
      all.insert(all.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (auto& a : all) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execvp(argv[0], argv.data());
      _exit(127);
    }
    keels_.push_back(p);
    return p;
  }

  int stop_keel(pid_t p) {
    std::erase(keels_, p);
    ::kill(p, SIGTERM);
    int st = 0;
    for (int i = 0; i < 500 && ::waitpid(p, &st, WNOHANG) == 0; ++i) std::this_thread::sleep_for(20ms);
    if (::waitpid(p, &st, WNOHANG) == 0 && !WIFEXITED(st)) {
      ::kill(p, SIGKILL);
      ::waitpid(p, &st, 0);
      return -1;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }

  // Each tick's own run-queue p99 of crit (us) from keel's --verbose status lines, in tick order.
  static std::vector<double> tick_p99s(const std::string& text) {
    std::vector<double> v;
    const std::string mark = "enforce status crit p99 ";
    for (size_t at = text.find(mark); at != std::string::npos; at = text.find(mark, at + 1)) {
      size_t t = text.find("(tick ", at);
      if (t != std::string::npos) v.push_back(std::stod(text.substr(t + 6)));
    }
    return v;
  }

  // Polls `cond` every 100 ms for up to `limit`; true when it held.
  static bool wait_for(const std::function<bool()>& cond, std::chrono::milliseconds limit) {
    auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      if (cond()) return true;
      std::this_thread::sleep_for(100ms);
    }
    return cond();
  }

  // Every knob keel may move in the test's cgroups, as the kernel prints it now.
  std::map<std::string, std::string> knobs() { return scene_->knobs(); }

  std::unique_ptr<testing::Scene> scene_;
  uint16_t metrics_port_ = 0;             // keel's metrics endpoint in the latest write_config()
  fs::path cpuset_root_;                  // where a test made keel isolate root's processes (keel-root-tasks)
  std::vector<pid_t> keels_;              // started by start_keel: stopped in TearDown when a test ends early
  std::vector<fs::path> extra_dirs_;      // cgroups a test made beside name_: removed in TearDown, in order
  std::vector<std::string> extra_units_;  // units a test made beside the scene's (v2)
  std::string name_;
  std::vector<pid_t> pids_;
  WakeLog* log_ = nullptr;
};

TEST_F(RunPriv, EnforceGivesTheWakerItsOwnCpuAndEverythingBackAfterwards) {
  testing::TempDir dir;
  // Weights and the class off: the ladder starts at dedicated CPUs, so the give-back of CPUs is what
  // the test sees (the class has its own test below).
  fs::path cfg =
      write_config(dir.path(), "enforce", "[actuators]\ncpu_weight = false\npreempt_class = \"off\"\n");
  const auto before = knobs();
  const pid_t waker = start_waker();
  // The waker's own wait before any noise: what this machine gives it anyway (a neighbour outside the
  // scene on its CPU, a hypervisor), which no knob of keel's takes away. The bounds below are on the
  // wait the noise adds to it.
  std::this_thread::sleep_for(500ms);
  const TaskCounts a0 = task_counts(waker);
  std::this_thread::sleep_for(1500ms);
  const double wait_alone = mean_wait_us(a0, task_counts(waker));
  std::printf("waker alone: mean run-queue wait %.1f us\n", wait_alone);
  start_noise();
  // The uncontrolled baseline: the kernel's count of the waker's run-queue wait must show the noise, or
  // the test proves nothing.
  // A mean over every time on a CPU (most short waits); 100 us is many times this waker's wait alone.
  // Under an emulator (the v2 guest under TCG) waits are the emulator's: printed, not judged, and the
  // waker wakes less often (454 times in 2 s there), so fewer wake-ups make the sample. The baseline is
  // a fact of the machine, not of keel (which is not running yet): a window in which the noise did not
  // reach the waker (34 us once in a CI run, where 100-300 us is usual) is measured again, up to three.
  const bool timing = !testing::emulated_cpus();
  std::this_thread::sleep_for(1s);
  TaskCounts s0, s1;
  double wait_before = 0, p99_before = 0;
  size_t n_before = 0;
  uint64_t t_keel = 0;
  for (int window = 1; window <= 3; ++window) {
    s0 = task_counts(waker);
    const double steal0 = testing::steal_ns();
    std::this_thread::sleep_for(2s);
    s1 = task_counts(waker);
    const double steal1 = testing::steal_ns();
    t_keel = now_ns();
    p99_before = p99_between(*log_, t_keel - 2'000'000'000ull, t_keel, &n_before);
    wait_before = mean_wait_us(s0, s1);
    std::printf("waker with noise, no keel (window %d): mean run-queue wait %.0f us over %" PRIu64
                " times on a CPU; lateness p99 %.0f us over %zu wake-ups (steal %.0f ms)\n",
                window, wait_before, s1.slices - s0.slices, p99_before, n_before, (steal1 - steal0) / 1e6);
    if (!timing || wait_before - wait_alone > 100.0) break;
  }
  ASSERT_GT(n_before, timing ? 500u : 200u);
  if (timing) {
    ASSERT_GT(wait_before - wait_alone, 100.0) << "the noise did not delay the waker: nothing to control";
  }

  fs::path log = dir.path() / "keel.log";
  pid_t keel = start_keel({"run", "--config", cfg.string(), "--verbose"}, log);
  // keel dedicates a CPU to the waker and moves the noise off it.
  auto cpus = [&](const char* leaf) { return scene_->cpus(leaf); };
  bool split = wait_for(
      [&] {
        std::string c = cpus("crit"), other = c == "0" ? "1" : "0";
        return (c == "0" || c == "1") && cpus("be1") == other && cpus("be2") == other && cpus("be3") == other;
      },
      20s);
  uint64_t t_split = now_ns();
  ASSERT_TRUE(split) << slurp(log);
  std::printf("keel split the CPUs %.1f s after it started\n", static_cast<double>(t_split - t_keel) / 1e9);
  // The waker's run-queue wait settles within a few seconds.
  std::this_thread::sleep_for(1s);
  const TaskCounts s2 = task_counts(waker);
  const double steal2 = testing::steal_ns();
  std::this_thread::sleep_for(2s);
  const TaskCounts s3 = task_counts(waker);
  const double steal3 = testing::steal_ns();
  size_t n_after = 0;
  double p99_after = p99_between(*log_, now_ns() - 2'000'000'000ull, now_ns(), &n_after);
  const double wait_after = mean_wait_us(s2, s3);
  std::printf("waker with noise, keel enforcing: mean run-queue wait %.0f us over %" PRIu64
              " times on a CPU; lateness p99 %.0f us over %zu wake-ups (steal %.0f ms)\n",
              wait_after, s3.slices - s2.slices, p99_after, n_after, (steal3 - steal2) / 1e6);
  // Under the emulator the waker wakes about 250 times a second (the same bound as before keel).
  EXPECT_GT(s3.slices - s2.slices, timing ? 500u : 200u);
  // The kernel's own count: the noise no longer queues ahead of the waker; what it added is cut to under
  // a quarter. (The scene must be all there is: work outside it, such as a light neighbour in the root
  // cgroup, is not keel's to move under this config, which leaves isolate_root_tasks off, and once the
  // noise is off the waker's CPU the neighbour goes there: 194 us after against 615 before, and tick
  // p99s of 3-5 ms, with `stress-ng --cpu 1 --cpu-load 30` beside the suite.)
  if (timing) {
    EXPECT_LT(wait_after - wait_alone, (wait_before - wait_alone) / 4) << slurp(log);
  }
  // The SLO is on run-queue wait, which keel measures (checked against runqlat in the sensor tests).
  // The waker's lateness is printed, not asserted: it also counts timer and hypervisor delays no cgroup
  // knob controls. Alone on its CPU the waker leaves it idle 70% of the time, and a halted vCPU that
  // the host wakes late made it 6 ms in one CI run (keel's per-tick p99 was 30 us then).
  std::string text = slurp(log);
  // Each tick's own run-queue p99 after the split (the first status line is the violation itself):
  // their median is under the SLO (one tick may catch a stray spike of this VM).
  std::vector<double> tick_p99 = tick_p99s(text);
  ASSERT_GE(tick_p99.size(), 4u) << text;
  std::vector<double> after(tick_p99.begin() + 1, tick_p99.end());
  std::sort(after.begin(), after.end());
  if (timing) {
    EXPECT_LT(after[after.size() / 2], kSloUs) << text;
  }
  EXPECT_NE(text.find("enforce act crit cpus (as found) -> "), std::string::npos) << text;
  EXPECT_NE(text.find("interference crit antagonist " + noise()), std::string::npos) << text;

  // The critical load stops: best-effort work gets every CPU back.
  log_->idle.store(1);
  bool back =
      wait_for([&] { return cpus("be1") == "0-1" && cpus("be2") == "0-1" && cpus("be3") == "0-1"; }, 30s);
  EXPECT_TRUE(back) << slurp(log);
  // keel logs a tick's decisions after its writes: the cpus can be back a moment before the line is.
  EXPECT_TRUE(wait_for([&] { return slurp(log).find("give-back") != std::string::npos; }, 5s)) << slurp(log);

  EXPECT_EQ(stop_keel(keel), 0) << slurp(log);
  EXPECT_EQ(knobs(), before) << slurp(log);
  text = slurp(log);
  EXPECT_NE(text.find("run: stopped"), std::string::npos) << text;
}

// daemon.rollback = "not_on_exit": the first keel isolates the waker and stops, handing over (every knob
// left as it set them, the journal and a handover in the state directory); a second keel adopts them:
// for its first seconds every knob stays as it was (no give-back, no protection dropped and climbed back
// to), and when the critical load stops it gives them back as its own. It hands over again on stop;
// `keel restore` then puts back whatever is left (knob files compared before, during and after).
TEST_F(RunPriv, NotOnExitHandsOverAndTheNextKeelKeepsProtectionUntilRestore) {
  testing::TempDir dir;
  fs::path cfg =
      write_config(dir.path(), "enforce",
                   "rollback = \"not_on_exit\"\n[actuators]\ncpu_weight = false\npreempt_class = \"off\"\n");
  const auto before = knobs();
  start_waker();
  start_noise();
  auto cpus = [&](const char* leaf) { return scene_->cpus(leaf); };
  auto split = [&] {
    std::string c = cpus("crit"), other = c == "0" ? "1" : "0";
    return (c == "0" || c == "1") && cpus("be1") == other && cpus("be2") == other && cpus("be3") == other;
  };
  fs::path log1 = dir.path() / "keel1.log";
  pid_t first = start_keel({"run", "--config", cfg.string(), "--verbose"}, log1);
  ASSERT_TRUE(wait_for(split, 20s)) << slurp(log1);
  // Stopped while the split stands: under emulated CPUs it may not help the waker, and keel reverts a
  // step that did not help after three ticks (1.5 s here), which would leave nothing to hand over.
  const auto during = knobs();
  ASSERT_NE(during, before) << "the split was seen, yet every knob is as found\n" << slurp(log1);
  EXPECT_EQ(stop_keel(first), 0) << slurp(log1);
  EXPECT_NE(slurp(log1).find("handed over (daemon.rollback = \"not_on_exit\")"), std::string::npos)
      << slurp(log1);
  EXPECT_EQ(knobs(), during) << "a handover leaves every knob as set";
  EXPECT_TRUE(fs::exists(dir.path() / "state/handover"));
  EXPECT_TRUE(fs::exists(dir.path() / "state/journal"));

  fs::path log2 = dir.path() / "keel2.log";
  pid_t second = start_keel({"run", "--config", cfg.string(), "--verbose"}, log2);
  ASSERT_TRUE(wait_for(
      [&] { return slurp(log2).find("adopted what a previous keel handed over") != std::string::npos; }, 10s))
      << slurp(log2);
  size_t changed = 0;
  for (int i = 0; i < 30; ++i) {  // 3 s, six of its ticks
    changed += knobs() != during;
    std::this_thread::sleep_for(100ms);
  }
  std::string text = slurp(log2);
  EXPECT_EQ(changed, 0u) << text;
  EXPECT_NE(text.find("tick 4 "), std::string::npos) << text;
  EXPECT_EQ(text.find("give-back"), std::string::npos) << text;
  EXPECT_EQ(text.find("restored what a previous keel"), std::string::npos) << text;
  // And they are its own now: when the critical load stops, it gives them back as if it had set them
  // (a keel that only left them alone would keep the noise off the waker's CPU for good).
  log_->idle.store(1);
  EXPECT_TRUE(
      wait_for([&] { return cpus("crit") == "0-1" && cpus("be1") == "0-1" && cpus("be2") == "0-1"; }, 30s))
      << slurp(log2);
  // keel logs a tick's decisions after its writes: the cpus can be back a moment before the line is
  // (with a light neighbour on the other CPU, the check came between the two).
  EXPECT_TRUE(wait_for([&] { return slurp(log2).find("give-back crit") != std::string::npos; }, 5s))
      << slurp(log2);
  const auto given_back = knobs();

  EXPECT_EQ(stop_keel(second), 0) << slurp(log2);
  EXPECT_EQ(knobs(), given_back);
  auto [rc, out] =
      run_command(testing::keel_binary().string() + " restore --state " + (dir.path() / "state").string());
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(knobs(), before) << out;
  EXPECT_FALSE(fs::exists(dir.path() / "state/handover")) << "nothing left to adopt";
}

// SIGHUP reloads the config: one without the best-effort workload gives the noise's knobs back at once
// and keeps the waker's CPU as set (no give-back, no step from scratch); a bad one is refused with its
// position and changes nothing, though it names the noise again; stopping gives the rest back.
// The reload is sent the moment the split is seen: a reload makes the waker's step one keel keeps, while
// before it keel judges it, and under emulated CPUs (the v2 guest) pinning may not help the waker and
// keel reverts the step three ticks after it took it (at least half a second here: early ticks that
// change nothing give way to the periodic one).
TEST_F(RunPriv, SighupReloadsTheConfigKeepingWhatStaysManaged) {
  testing::TempDir dir;
  fs::path cfg =
      write_config(dir.path(), "enforce", "[actuators]\ncpu_weight = false\npreempt_class = \"off\"\n");
  const auto before = knobs();
  start_waker();
  start_noise();
  auto cpus = [&](const char* leaf) { return scene_->cpus(leaf); };
  const std::string good = slurp(cfg);
  const size_t noise_at = good.find("[[workload]]\nname = \"noise\"");
  ASSERT_NE(noise_at, std::string::npos) << good;
  fs::path log = dir.path() / "keel.log";
  pid_t keel = start_keel({"run", "--config", cfg.string(), "--verbose"}, log);
  std::string crit_cpus;
  ASSERT_TRUE(wait_for(
      [&] {
        std::string c = cpus("crit"), other = c == "0" ? "1" : "0";
        crit_cpus = c;
        return (c == "0" || c == "1") && cpus("be1") == other && cpus("be2") == other && cpus("be3") == other;
      },
      20s))
      << slurp(log);

  { std::ofstream(cfg, std::ios::trunc) << good.substr(0, noise_at); }
  ::kill(keel, SIGHUP);
  ASSERT_TRUE(
      wait_for([&] { return slurp(log).find("reload: the new config is in use") != std::string::npos; }, 5s))
      << slurp(log);
  std::string text = slurp(log);
  const std::string reloaded = text.substr(0, text.find("reload: the new config is in use"));
  ASSERT_EQ(reloaded.find("revert crit"), std::string::npos)
      << "keel judged the waker's step before the reload reached it: the test cannot tell\n"
      << text;
  EXPECT_TRUE(
      wait_for([&] { return cpus("be1") == "0-1" && cpus("be2") == "0-1" && cpus("be3") == "0-1"; }, 5s))
      << slurp(log);
  EXPECT_EQ(cpus("crit"), crit_cpus) << slurp(log);
  text = slurp(log);
  EXPECT_EQ(text.find("give-back crit"), std::string::npos) << text;
  EXPECT_EQ(text.find("run: stopped"), std::string::npos) << "SIGHUP does not stop keel\n" << text;

  // The noise's workload again, and a workload that is not valid: nothing of it is used.
  const auto during = knobs();
  { std::ofstream(cfg, std::ios::trunc) << good << "\n[[workload]]\nname = 7\n"; }
  ::kill(keel, SIGHUP);
  ASSERT_TRUE(wait_for([&] { return slurp(log).find("the running config stays") != std::string::npos; }, 5s))
      << slurp(log);
  text = slurp(log);
  EXPECT_NE(text.find(cfg.string() + ":"), std::string::npos) << "file:line:col\n" << text;
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(knobs(), during) << slurp(log);

  EXPECT_EQ(stop_keel(keel), 0) << slurp(log);
  EXPECT_EQ(knobs(), before) << slurp(log);
}

// The CPUs a process may run on (Cpus_allowed_list in /proc/PID/status).
std::string allowed_cpus(pid_t pid) {
  std::string text = slurp("/proc/" + std::to_string(pid) + "/status");
  size_t at = text.find("Cpus_allowed_list:");
  if (at == std::string::npos) return "";
  size_t e = text.find('\n', at);
  return std::string(trim(std::string_view(text).substr(at + 18, e - at - 18)));
}

// The preemption class alone (cpusets and weights off): keel puts the three noisy cgroups in cpu.idle
// from its first tick, the run-queue wait keel measures for the waker drops under its SLO although the noise
// keeps every CPU busy, the noise still gets the CPU time the waker leaves, and every knob (cpu.idle,
// and the weight the kernel changed meanwhile) is as found after keel stops.
TEST_F(RunPriv, TheClassTakesTheNoiseOutOfTheWakersRunQueueWaitAndGoesAwayWithKeel) {
  if (!fs::exists(scene_->dir("crit") / "cpu.idle"))
    GTEST_SKIP() << "skipped: this kernel has no cpu.idle (5.15+)";
  testing::TempDir dir;
  fs::path cfg = write_config(dir.path(), "enforce", "[actuators]\ncpuset = false\ncpu_weight = false\n");
  const auto before = knobs();
  const pid_t waker = start_waker();
  std::this_thread::sleep_for(500ms);
  const TaskCounts a0 = task_counts(waker);
  std::this_thread::sleep_for(2s);
  const TaskCounts a1 = task_counts(waker);
  size_t n_alone = 0;
  double p99_alone = p99_between(*log_, now_ns() - 2'000'000'000ull, now_ns(), &n_alone);
  start_noise();
  std::this_thread::sleep_for(500ms);
  const TaskCounts n0 = task_counts(waker);
  std::this_thread::sleep_for(2s);
  const TaskCounts n1 = task_counts(waker);
  size_t n_noise = 0;
  double p99_noise = p99_between(*log_, now_ns() - 2'000'000'000ull, now_ns(), &n_noise);
  const double wait_alone = mean_wait_us(a0, a1), wait_noise = mean_wait_us(n0, n1);
  std::printf(
      "waker alone: p99 %.0f us (%zu wake-ups), mean run-queue wait %.1f us; with noise, no keel: "
      "%.0f us (%zu), %.1f us\n",
      p99_alone, n_alone, wait_alone, p99_noise, n_noise, wait_noise);
  const bool timing = !testing::emulated_cpus();  // the v2 guest under TCG: waits printed, not judged
  if (timing) {
    ASSERT_GT(p99_noise, 1000.0) << "the noise did not delay the waker: nothing to show";
  }

  fs::path log = dir.path() / "keel.log";
  pid_t keel = start_keel({"run", "--config", cfg.string(), "--verbose"}, log);
  auto idle = [&](const char* leaf) { return leaf_file(leaf, "cpu.idle"); };
  ASSERT_TRUE(wait_for([&] { return idle("be1") == "1" && idle("be2") == "1" && idle("be3") == "1"; }, 10s))
      << slurp(log);
  EXPECT_EQ(idle("crit"), "0");
  EXPECT_EQ(leaf_file("", "cpu.idle"), "0") << "never the parent";
  std::this_thread::sleep_for(500ms);
  auto usage = [&](const char* leaf) { return scene_->usage_ns(leaf); };
  auto all_usage = [&] { return scene_->host_usage_ns(); };
  // One 3 s window with the noise in the class. `ticks` are keel's per-tick run-queue p99s logged
  // within it; `others` the CPUs used outside the test's cgroups (keel included) and `steal_s` the
  // CPU-seconds the hypervisor took: neither is something the class can order.
  struct Window {
    double p99 = 0, wait = 0, be_cpus = 0, crit_cpus = 0, others = 0, tick_median = 0;
    size_t n = 0;
    double steal_s = 0;
  };
  auto measure = [&] {
    Window w;
    const size_t log_from = slurp(log).size();
    const uint64_t from = now_ns(), all0 = all_usage();
    const double steal0 = testing::steal_ns();
    const uint64_t be0 = usage("be1") + usage("be2") + usage("be3"), own0 = be0 + usage("crit");
    const TaskCounts c0 = task_counts(waker);
    std::this_thread::sleep_for(3s);
    const TaskCounts c1 = task_counts(waker);
    const uint64_t be1 = usage("be1") + usage("be2") + usage("be3"), own1 = be1 + usage("crit");
    const uint64_t to = now_ns(), all1 = all_usage();
    const double steal1 = testing::steal_ns();
    w.p99 = p99_between(*log_, from, to, &w.n);
    const auto span = static_cast<double>(to - from);
    w.be_cpus = static_cast<double>(be1 - be0) / span;
    w.crit_cpus = static_cast<double>((own1 - be1) - (own0 - be0)) / span;
    w.others = (static_cast<double>(all1 - all0) - static_cast<double>(own1 - own0)) / span;
    w.steal_s = (steal1 - steal0) / 1e9;
    w.wait = mean_wait_us(c0, c1);
    std::vector<double> ticks = tick_p99s(slurp(log).substr(log_from));
    std::sort(ticks.begin(), ticks.end());
    w.tick_median = ticks.empty() ? 1e9 : ticks[ticks.size() / 2];
    std::printf(
        "with noise in the class: p99 %.0f us (%zu wake-ups), mean run-queue wait %.1f us, keel's median "
        "tick p99 %.0f us over %zu ticks; the noise kept %.2f CPUs, others used %.2f, steal %.3f s\n",
        w.p99, w.n, w.wait, w.tick_median, ticks.size(), w.be_cpus, w.others, w.steal_s);
    return w;
  };
#if defined(__SANITIZE_ADDRESS__)
  // Under AddressSanitizer keel's own ticks (root cgroup, not in the class) run several times longer
  // and delay the waker themselves (a median of 728 us seen in CI): only the reduction is asserted.
  const bool sanitized = true;
#else
  const bool sanitized = false;
#endif
  // With the noise in the class the waker waits within a small factor of its wait alone (a few us: a
  // switch) and keel's ticks are under the SLO. Work outside the test's cgroups is not in the class and
  // competes with the waker as an equal: once in CI something took half a CPU for a whole window (the
  // noise kept 1.20 CPUs, the waker's wait was 63 us). And right after another test's keel and noise
  // this 6.18 kernel at times lets about one wake-up in fifty wait a whole jiffy behind the classed
  // noise for several seconds (CI: the tick p99s 3.9 ms for ticks 2-9, then 60 us, keel having written
  // nothing after tick 1; the same cgroups without the test before it stayed under 100 us for minutes).
  // So up to five windows are measured and the first quiet one is judged; each is printed.
  // The mean-wait bound: a few switches over the wait alone. 20 us was too tight for this VM: a CI run
  // measured 28 us (against 419 us with the noise uncontrolled, and a tick median of 66 us) in an
  // otherwise quiet window, where the waker at times waited a whole jiffy behind the noise.
  const double wait_bound = std::max(4 * wait_alone, wait_alone + 40.0);
  auto quiet = [&](const Window& w) { return w.n > 1500u && w.tick_median < kSloUs && w.wait < wait_bound; };
  Window w = measure();
  for (int again = 0; again < 4 && timing && !sanitized && !quiet(w); ++again) w = measure();
  // Work-conserving: the noise keeps what the waker (0.3 CPUs), other work and the hypervisor leave.
  const double left =
      static_cast<double>(std::thread::hardware_concurrency()) - w.crit_cpus - w.others - w.steal_s / 3.0;
  EXPECT_GT(w.be_cpus, 0.3) << "the noise must not starve";
  if (timing) {
    // The kernel's own count: a fraction of its wait beside the noise uncontrolled, in any case.
    EXPECT_LT(w.wait, wait_noise / 4);
    EXPECT_GT(w.n, 1500u);
    EXPECT_GT(w.be_cpus, 0.8 * left) << "left by the waker and others: " << left << " CPUs";
  }
  std::string text = slurp(log);
  // The run-queue wait keel measures per tick (the waker's own lateness above also counts timer and
  // hypervisor delays, several ms on this VM even alone, that no cgroup knob controls): tick 1 is
  // the noise uncontrolled; after it, with the noise in the class, the median tick is a small fraction
  // of it and under the SLO.
  std::vector<double> tick_p99 = tick_p99s(text);
  ASSERT_GE(tick_p99.size(), 4u) << text;
  std::printf("keel's run-queue p99: tick 1 (uncontrolled) %.0f us\n", tick_p99[0]);
  if (!timing) {
    std::printf("emulated CPUs: the waits are the emulator's, the class is checked by what keel wrote\n");
  } else if (sanitized) {
    EXPECT_GT(tick_p99[0], kSloUs) << text;
    EXPECT_LT(w.tick_median, tick_p99[0] / 4) << text;
    std::printf("AddressSanitizer build: the SLO check is left to the release build\n");
  } else {
    EXPECT_GT(tick_p99[0], kSloUs) << text;
    EXPECT_LT(w.tick_median, tick_p99[0] / 4) << text;
    EXPECT_LT(w.wait, wait_bound) << "alone " << wait_alone << " us";
    EXPECT_LT(w.tick_median, kSloUs) << text;
    EXPECT_LT(w.tick_median, tick_p99[0] / 10) << text;
    EXPECT_LT(w.p99, p99_noise) << text;
  }
  EXPECT_NE(text.find("preemption class from its first tick"), std::string::npos) << text;
  EXPECT_EQ(text.find("error:"), std::string::npos) << text;

  EXPECT_EQ(stop_keel(keel), 0) << slurp(log);
  EXPECT_EQ(knobs(), before) << slurp(log);
}

// keel as deploy/systemd/keel.service runs it: uid 0 with only the unit's CapabilityBoundingSet (through
// setpriv, as systemd would set it) and a notify socket with a watchdog (a datagram socket this test
// listens on, as systemd's manager does). keel attaches its sensors, says READY=1, pings WATCHDOG=1 at
// half the interval between ticks, writes cpu.idle (enforce, the class only), answers /healthz and
// /readyz with 200, says STOPPING=1 on SIGTERM and gives every knob back.
TEST_F(RunPriv, UnderTheUnitsCapabilitiesKeelNotifiesSensesWritesAndGivesBack) {
  if (!fs::exists(scene_->dir("crit") / "cpu.idle"))
    GTEST_SKIP() << "skipped: this kernel has no cpu.idle (5.15+)";
  if (std::system("command -v setpriv >/dev/null") != 0) GTEST_SKIP() << "skipped: no setpriv (util-linux)";
  const std::string unit = slurp(testing::source_dir() / "deploy/systemd/keel.service");
  const std::string bounding = testing::between(unit, "\nCapabilityBoundingSet=", "\n");
  ASSERT_FALSE(bounding.empty()) << unit;
  std::string caps = "-all";
  uint64_t mask = 0;
  std::istringstream words(bounding);
  for (std::string w; words >> w;) {
    std::string name = w.substr(4);  // CAP_BPF -> bpf
    for (auto& c : name) c = static_cast<char>(std::tolower(c));
    caps += ",+" + name;
    if (w == "CAP_BPF") mask |= 1ull << 39;
    if (w == "CAP_PERFMON") mask |= 1ull << 38;
  }
  testing::TempDir dir;
  const std::string sock_path = (dir.path() / "notify").string();
  Fd sock(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock_path.c_str());
  ASSERT_EQ(::bind(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  // Each message with the time the kernel queued it on the socket (SO_TIMESTAMPNS), so the gaps between
  // keel's pings are keel's, not how late this test got to read them.
  std::vector<std::pair<double, std::string>> got;  // seconds since start, message
  const int on = 1;
  ASSERT_EQ(::setsockopt(sock.get(), SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on), 0);
  auto realtime_s = [] {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
  };
  const double t0 = realtime_s();
  auto receive_for = [&](std::chrono::milliseconds d) {
    const auto end = std::chrono::steady_clock::now() + d;
    while (std::chrono::steady_clock::now() < end) {
      timeval tv{0, 50'000};
      ::setsockopt(sock.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      char buf[256];
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(timespec))];
      iovec iov{buf, sizeof buf};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      ssize_t n = ::recvmsg(sock.get(), &msg, 0);
      if (n <= 0) continue;
      double at = realtime_s();
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
          timespec ts;
          std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
          at = static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
        }
      got.emplace_back(at - t0, std::string(buf, static_cast<size_t>(n)));
    }
  };
  auto count = [&](const std::string& what) {
    return std::count_if(got.begin(), got.end(), [&](const auto& g) { return g.second.starts_with(what); });
  };
  fs::path cfg =
      write_config(dir.path(), "enforce", "[actuators]\ncpuset = false\ncpu_weight = false\n", kSloUs, "1s");
  const auto before = knobs();
  const testing::WakeFloor floor = testing::wake_floor(0, 1000us, 500ms);
  start_waker();
  start_noise();
  fs::path log = dir.path() / "keel.log";
  pid_t keel = start_keel({"run", "--config", cfg.string()}, log, {"setpriv", "--bounding-set=" + caps},
                          {"NOTIFY_SOCKET=" + sock_path, "WATCHDOG_USEC=400000"});
  auto idle = [&](const char* leaf) { return leaf_file(leaf, "cpu.idle"); };
  for (int i = 0; i < 100 && count("READY=1") == 0; ++i) receive_for(100ms);
  ASSERT_EQ(count("READY=1"), 1) << slurp(log);
  const std::string status = slurp("/proc/" + std::to_string(keel) + "/status");
  const size_t at = status.find("CapBnd:\t");
  ASSERT_NE(at, std::string::npos);
  EXPECT_EQ(std::stoull(status.substr(at + 8, 16), nullptr, 16), mask) << "keel ran with the unit's set";
  EXPECT_TRUE(wait_for([&] { return idle("be1") == "1" && idle("be2") == "1" && idle("be3") == "1"; }, 5s))
      << slurp(log);
  receive_for(100ms);  // those sent while this test waited, unread
  const size_t window_from = got.size();
  const double window_t0 = realtime_s() - t0;
  receive_for(2000ms);
  // The watchdog's contract: a ping within every WATCHDOG_USEC (0.4 s), between the 1 s ticks too (keel
  // pings at half of it), and not one per wake-up of its loop: the gaps between pings in the window.
  std::vector<double> pinged{window_t0};
  for (size_t i = window_from; i < got.size(); ++i)
    if (got[i].second.starts_with("WATCHDOG=1")) pinged.push_back(got[i].first);
  pinged.push_back(realtime_s() - t0);
  double longest = 0, shortest = 1e9;
  for (size_t i = 1; i < pinged.size(); ++i) {
    longest = std::max(longest, pinged[i] - pinged[i - 1]);
    if (i > 1 && i + 1 < pinged.size()) shortest = std::min(shortest, pinged[i] - pinged[i - 1]);
  }
  const size_t pings = pinged.size() - 2;
  // A ping due while a tick runs goes out when the tick ends: late by at most the longest tick so far,
  // as keel's own histogram bounds it (the upper edge of the first bucket that holds every tick).
  const std::string scraped = testing::http_get(metrics_port_, "/metrics").body;
  const double ticks = std::stod(testing::between(scraped, "\nkeel_tick_duration_seconds_count ", "\n"));
  double longest_tick = 1e9;
  const std::string bucket = "\nkeel_tick_duration_seconds_bucket{le=\"";
  for (size_t b = scraped.find(bucket); b != std::string::npos; b = scraped.find(bucket, b + 1)) {
    const std::string le = testing::between(scraped.substr(b), "le=\"", "\"");
    const double n = std::stod(testing::between(scraped.substr(b), "} ", "\n"));
    if (n >= ticks && le != "+Inf") longest_tick = std::min(longest_tick, std::stod(le));
  }
  std::printf(
      "%s; %zu watchdog pings in %.2f s, gaps %.3f-%.3f s (every 0.2 s expected; ticks up to %.3f s)\n",
      caps.c_str(), pings, pinged.back() - pinged.front(), shortest, longest, longest_tick);
  EXPECT_GE(pings, 2u) << "half of WATCHDOG_USEC=400000 between 1 s ticks";
  // And a timer's wake-up a little late, as this machine wakes a sleeper (measured before keel started).
  EXPECT_LT(longest, 0.2 + longest_tick + 0.005 + 2 * floor.p99_us / 1e6)
      << "a ping missed, beyond a tick's delay (" << floor.str() << ")";
  EXPECT_GT(shortest, 0.18) << "pings more often than half of WATCHDOG_USEC";
  // Its health endpoints, as a Kubernetes probe or a load balancer asks them.
  auto live = testing::http_get(metrics_port_, "/healthz");
  EXPECT_EQ(live.status, 200) << live.body;
  EXPECT_NE(live.body.find("ok: last tick"), std::string::npos) << live.body;
  auto ready = testing::http_get(metrics_port_, "/readyz");
  EXPECT_EQ(ready.status, 200) << ready.body;
  std::string text = slurp(log);
  EXPECT_NE(text.find("sensors tp_btf"), std::string::npos) << text;
  EXPECT_EQ(text.find("error"), std::string::npos) << text;
  EXPECT_EQ(stop_keel(keel), 0) << slurp(log);
  receive_for(200ms);
  EXPECT_EQ(count("STOPPING=1"), 1) << slurp(log);
  EXPECT_EQ(knobs(), before) << slurp(log);
}

// daemon.early_ticks: with a 4 s period, noise that starts after keel's first tick makes the waker's
// run-queue waits cross its SLO; the BPF watch wakes keel, which ticks at once (tick 2 comes early,
// long before the period's end) and acts in it or in the next early tick (the class off, so the
// ladder's first step shows). Acting in tick 2 itself needs that tick's p99 to be severe (smoothed
// slack below -1: a tick p99 over ~1.2 ms after a good tick 1); the crossing that wakes keel is 5 waits
// over the SLO, and when those are short of that (a tick p99 of 541 and 845 us, 2 runs in 19), the
// violation is the second bad tick: tick 3, woken early by the next crossing. The scenario needs a good
// tick 1 (the SLO met before the noise): under emulated CPUs (the v2 guest under TCG) the waker alone
// waits 0.5-0.7 ms at p99, so there the SLO is 1.5 ms, which the noise still crosses many times over.
// When the waker's load then stops, the demand watch wakes an early tick that gives its protection back.
TEST_F(RunPriv, InterferenceMidPeriodWakesKeelForAnEarlyTick) {
  testing::TempDir dir;
  const double slo_us = testing::emulated_cpus() ? 1500 : kSloUs;
  fs::path cfg = write_config(dir.path(), "enforce", "[actuators]\npreempt_class = \"off\"\n", slo_us, "4s");
  start_waker();
  fs::path log = dir.path() / "keel.log";
  pid_t keel = start_keel({"run", "--config", cfg.string(), "--verbose"}, log);
  ASSERT_TRUE(wait_for([&] { return slurp(log).find("tick 1 ") != std::string::npos; }, 10s)) << slurp(log);
  ASSERT_TRUE(wait_for([&] { return slurp(log).find("tick 1 enforce status") != std::string::npos; }, 5s));
  {
    const std::string t1 = slurp(log);
    const size_t at = t1.find("tick 1 enforce status");
    const std::string line = t1.substr(at, t1.find('\n', at) - at);
    ASSERT_EQ(line.find("VIOLATED"), std::string::npos)
        << "the SLO (" << slo_us << " us) is not met before the noise starts: " << line;
  }
  std::this_thread::sleep_for(300ms);
  const auto noise_at = std::chrono::steady_clock::now();
  start_noise();
  // Tick 2, whenever it comes: it must be an early one, woken by the crossing (the periodic tick 2 is due
  // 4 s after tick 1; a machine that takes longer than that to see the noise fails here).
  ASSERT_TRUE(wait_for([&] { return slurp(log).find("tick 2 ") != std::string::npos; }, 10s)) << slurp(log);
  const double after_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - noise_at).count();
  std::string text = slurp(log);
  ASSERT_NE(text.find("tick 2 early: crit waited"), std::string::npos) << "tick 2 was not an early one\n"
                                                                       << text;
  std::printf("early tick %.2f s after the noise started (period 4 s)\n", after_s);
  // Under emulation (the v2 guest under TCG) the crossing takes longer to come: printed, not judged.
  if (!testing::emulated_cpus()) {
    EXPECT_LT(after_s, 3.0) << "the periodic tick 2 is due 4 s after tick 1";
  }
  ASSERT_TRUE(wait_for([&] { return slurp(log).find("tick 2 early: done") != std::string::npos; }, 10s));
  text = slurp(log);
  const size_t done = text.find("tick 2 early: done");
  std::printf("%s\n", text.substr(done, text.find('\n', done) - done).c_str());
  // keel acts (the ladder's first step for crit) in an early tick, and every tick before it was an early
  // one too: the crossings woke keel each time, no periodic tick came in between. Which early tick
  // depends on how bad the waits were: a severe tick 2 acts at once (smoothed slack below -1: a tick p99
  // over ~1.2 ms after a good tick 1); otherwise the second bad tick does, tick 3 (2 runs in 19 here),
  // or tick 4 where tick 2's window still held waits from before the noise (the v2 guest, whose
  // crossing came 2.5 s after the noise).
  const std::string act = "enforce act crit ";
  const bool acted = wait_for([&] { return slurp(log).find(act) != std::string::npos; }, 10s);
  const double acted_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - noise_at).count();
  text = slurp(log);
  ASSERT_TRUE(acted) << "keel never acted for crit\n" << text;
  const size_t act_at = text.find(act), tick_at = text.rfind("tick ", act_at);
  const int acted_tick = std::stoi(text.substr(tick_at + 5));
  std::printf("acted in tick %d, %.2f s after the noise started\n", acted_tick, acted_s);
  EXPECT_GE(acted_tick, 2);
  // Early ticks whose windows (a tenth of a second after a crossing) measured the SLO met change
  // nothing; after two in a row the loop waits for the periodic tick by design (loop.cpp), and that
  // tick may be the one that acts. Under emulation the short windows do measure it met at times (tick
  // 3 at 1163 us and tick 4 at 581 us against 1500 us, 1 run in the guest); the act then comes in the
  // periodic tick after the loop said so, and every tick before it was early.
  const bool waited_for_periodic =
      acted_tick >= 4 && text.find("tick " + std::to_string(acted_tick - 1) +
                                   " early: 2 early ticks in a row for SLO crossings "
                                   "changed nothing") != std::string::npos;
  for (int k = 2; k <= acted_tick - (waited_for_periodic ? 1 : 0); ++k)
    EXPECT_NE(text.find("tick " + std::to_string(k) + " early: crit waited"), std::string::npos)
        << "tick " << k << " (of those up to the act) was not an early one\n"
        << text;
  if (!testing::emulated_cpus()) {
    EXPECT_LT(acted_s, 3.0) << "the periodic tick 2 is due 4 s after tick 1";
  }
  // The waker's load stops: its demand watch (its CPU use read between ticks) sees the lull and wakes
  // an early tick, which gives back what it holds; a periodic tick could not (the lull would be a
  // fraction of its 4 s).
  // Under emulated CPUs (the v2 guest under TCG) the weight step may not help and be reverted before
  // the load stops: then keel holds nothing to give back, which is said and not judged.
  {
    const std::string held = slurp(log);
    auto count = [&](const std::string& what) {
      size_t n = 0;
      for (size_t at = held.find(what); at != std::string::npos; at = held.find(what, at + 1)) ++n;
      return n;
    };
    if (count("enforce act crit ") <= count("enforce revert crit ") + count("enforce give-back crit ")) {
      std::printf(
          "keel held nothing for crit when its load stopped (its steps were reverted): the demand "
          "watch's give-back is not checked\n");
      EXPECT_EQ(stop_keel(keel), 0) << slurp(log);
      return;
    }
  }
  log_->idle.store(1);
  const auto idle_at = std::chrono::steady_clock::now();
  const size_t from = slurp(log).size();  // what keel logs after the load stopped
  const std::string lull_mark = " early: crit kept under ";
  const bool lulled = wait_for(
      [&] {
        text = slurp(log);
        return text.find(lull_mark, from) != std::string::npos &&
               text.find("give-back crit", from) != std::string::npos;
      },
      10s);
  ASSERT_TRUE(lulled) << text;
  const size_t mark = text.find(lull_mark, from);
  const size_t lull_at = text.rfind("tick ", mark);
  const std::string lull_tick = text.substr(lull_at, mark - lull_at);  // "tick N"
  std::printf("%s, %.2f s after the load stopped\n", lull_tick.c_str(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - idle_at).count());
  EXPECT_NE(text.find(lull_tick + " enforce give-back crit", from), std::string::npos)
      << "the give-back is not the demand watch's early tick's (" << lull_tick << ")\n"
      << text;
  EXPECT_EQ(stop_keel(keel), 0) << slurp(log);
}

// Issue 38, point 9: a victim kept runnable and off its CPU switches its own protection off. Once keel
// gives the waker a CPU of its own, an RT hog (SCHED_FIFO, pinned there; RT throttling leaves the
// other tasks of that CPU 5% of each second) keeps the waker runnable and mostly waiting: few wake-ups,
// little CPU, and its long waits still open, so no crossing. keel took that for its demand falling and
// gave everything back. Now the demand watch sees the waker runnable and not run: no give-back while the
// hog runs. (Without it, here: three give-backs in the hog's 6 s, each by a lull the watch saw between
// the waker's 50 ms windows of CPU.)
TEST_F(RunPriv, AWakerStarvedByAnRtHogKeepsItsProtection) {
  if (std::string(trim(slurp("/proc/sys/kernel/sched_rt_runtime_us"))) == "-1")
    GTEST_SKIP() << "skipped: RT throttling is off here (sched_rt_runtime_us -1): an RT hog would take its "
                    "CPU whole";
  testing::TempDir dir;
  fs::path cfg =
      write_config(dir.path(), "enforce", "[actuators]\ncpu_weight = false\npreempt_class = \"off\"\n");
  start_waker();
  start_noise();
  fs::path log = dir.path() / "keel.log";
  pid_t keel = start_keel({"run", "--config", cfg.string(), "--verbose"}, log);
  std::string cpu;
  ASSERT_TRUE(wait_for(
      [&] {
        cpu = scene_->cpus("crit");
        return cpu == "0" || cpu == "1";
      },
      20s))
      << slurp(log);
  std::this_thread::sleep_for(2s);  // protected, and watched for its demand falling
  const size_t from = slurp(log).size();
  const pid_t hog = fork();
  if (hog == 0) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(std::stoi(cpu), &one);
    sched_param p{};
    p.sched_priority = 1;
    if (::sched_setaffinity(0, sizeof one, &one) != 0 || ::sched_setscheduler(0, SCHED_FIFO, &p) != 0)
      _exit(3);
    for (;;) {
    }
  }
  ASSERT_GT(hog, 0);
  pids_.push_back(hog);
  std::this_thread::sleep_for(6s);
  int status = 0;
  EXPECT_EQ(::waitpid(hog, &status, WNOHANG), 0) << "the hog could not become SCHED_FIFO (exit 3)";
  ::kill(hog, SIGKILL);
  ::waitpid(hog, nullptr, 0);
  pids_.erase(std::find(pids_.begin(), pids_.end(), hog));
  const std::string text = slurp(log).substr(from);
  EXPECT_EQ(text.find("give-back crit"), std::string::npos) << "given back while the hog starved it\n"
                                                            << text;
  EXPECT_EQ(scene_->cpus("crit"), cpu) << "its CPU is still its own\n" << text;
  EXPECT_EQ(stop_keel(keel), 0) << slurp(log);
}

// actuators.isolate_unmanaged and isolate_root_tasks on the real kernel: while keel gives the waker a
// CPU of its own, a hog in a top-level cgroup no workload declares (and that cgroup's child) is kept off
// that CPU, a hog in the root cgroup is moved into keel's group, which holds only the other CPU, and
// kernel threads stay in the root (the log says so); when the critical load stops everything is given
// back, keel's group is removed, and after keel stops every cpuset and membership is as found. On v1 the
// unmanaged cgroups are directories at the cpuset root; on v2 a slice of the test's own with a scope in
// it (beside system.slice, user.slice and init.scope, which are unmanaged too), and the root hog is
// put in the root cgroup by hand (systemd leaves nothing there but kernel threads).
TEST_F(RunPriv, UnmanagedWorkIsKeptOffTheCriticalCpuAndGivenBack) {
  const bool v2 = scene_->v2();
  const std::string own = testing::cgroup_of(getpid(), "cpuset");
  if (!v2 && own != "/") GTEST_SKIP() << "skipped: the test does not run in the root cpuset cgroup";
  testing::TempDir dir;
  fs::path cfg = write_config(dir.path(), "enforce",
                              "[actuators]\ncpu_weight = false\npreempt_class = \"off\"\n"
                              "isolate_unmanaged = true\nisolate_root_tasks = true\n");
  cpuset_root_ = scene_->root("cpuset");
  auto hog = [&] {
    pid_t p = fork();
    if (p == 0) {
      ::setpgid(0, 0);
      for (;;) {
      }
    }
    pids_.push_back(p);
    return p;
  };
  const pid_t unmanaged_hog = hog(), root_hog = hog();
  fs::path top, job;
  if (!v2) {
    top = cpuset_root_ / ("keel-unmanaged-test-" + std::to_string(getpid()));
    job = top / "job";
    const std::string mems(trim(slurp(cpuset_root_ / "cpuset.mems")));
    for (const fs::path& p : {top, job}) {
      ASSERT_TRUE(fs::create_directory(p)) << p;
      ASSERT_TRUE(write_file(p / "cpuset.mems", mems));
      ASSERT_TRUE(write_file(p / "cpuset.cpus", "0-1"));
    }
    extra_dirs_ = {job, top};
    ASSERT_TRUE(write_file(job / "cgroup.procs", std::to_string(unmanaged_hog)));
  } else {
    const std::string slice = "keel_unmanaged_test_" + std::to_string(getpid());
    const std::string unit = slice + "-job.scope";
    extra_units_ = {unit, slice + ".slice"};
    ASSERT_EQ(testing::systemd::start_scope(unit, slice + ".slice", {unmanaged_hog}, {"AllowedCPUs ay 1 3"}),
              "");
    top = cpuset_root_ / (slice + ".slice");
    job = top / unit;
    ASSERT_TRUE(write_file(cpuset_root_ / "cgroup.procs", std::to_string(root_hog)));
  }
  const std::string init_cgroup = testing::cgroup_of(1, "cpuset");
  const auto before = knobs();
  start_waker();
  start_noise();
  fs::path log = dir.path() / "keel.log";
  pid_t keel = start_keel({"run", "--config", cfg.string(), "--verbose"}, log);
  // What a cgroup may use: on v2 what it set may be empty (its parent's), so the effective CPUs.
  auto cpus = [&](const fs::path& cg) {
    return std::string(trim(slurp(cg / (v2 ? "cpuset.cpus.effective" : "cpuset.cpus"))));
  };
  const fs::path group = cpuset_root_ / "keel-root-tasks";
  std::string off;
  bool isolated = wait_for(
      [&] {
        std::string c = scene_->cpus("crit");
        off = c == "0" ? "1" : "0";
        return (c == "0" || c == "1") && cpus(top) == off && cpus(job) == off &&
               testing::cgroup_of(root_hog, "cpuset") == "/keel-root-tasks" && fs::exists(group) &&
               cpus(group) == off;
      },
      // keel starts beside 8 busy loops on 2 CPUs: an ASan build in CI once had not printed its first
      // line (sensors attached) after 20 s.
      60s);
  ASSERT_TRUE(isolated) << slurp(log);
  // The kernel moved them: they may run only on the other CPU now.
  EXPECT_EQ(allowed_cpus(unmanaged_hog), off);
  EXPECT_EQ(allowed_cpus(root_hog), off);
  EXPECT_EQ(testing::cgroup_of(unmanaged_hog, "cpuset"), "/" + job.lexically_relative(cpuset_root_).string());
  EXPECT_EQ(testing::cgroup_of(2, "cpuset"), "/") << "kthreadd is the kernel's";
  EXPECT_EQ(testing::cgroup_of(1, "cpuset"), init_cgroup) << "keel does not move init";
  // Said once the tick's writes are logged.
  EXPECT_TRUE(wait_for(
      [&] { return slurp(log).find("not isolated: kernel threads in the root cgroup") != std::string::npos; },
      5s))
      << slurp(log);

  // The critical load stops: the unmanaged cgroups get every CPU back and the root's processes return.
  log_->idle.store(1);
  bool back = wait_for(
      [&] {
        return cpus(top) == "0-1" && cpus(job) == "0-1" && testing::cgroup_of(root_hog, "cpuset") == "/" &&
               !fs::exists(group);
      },
      30s);
  EXPECT_TRUE(back) << slurp(log);
  EXPECT_EQ(allowed_cpus(root_hog), "0-1");
  EXPECT_EQ(stop_keel(keel), 0) << slurp(log);
  EXPECT_EQ(knobs(), before) << slurp(log);
  EXPECT_EQ(cpus(top), "0-1");
  EXPECT_EQ(cpus(job), "0-1");
  EXPECT_EQ(testing::cgroup_of(getpid(), "cpuset"), own);
}

// A keel killed while it keeps unmanaged work off the critical CPU: `keel restore` moves the root's
// processes back out of keel's group, removes the group and gives the unmanaged cgroup its CPUs.
TEST_F(RunPriv, RestoreAfterAKilledKeelBringsTheRootProcessesBackAndRemovesKeelsGroup) {
  const bool v2 = scene_->v2();
  const std::string own = testing::cgroup_of(getpid(), "cpuset");
  if (!v2 && own != "/") GTEST_SKIP() << "skipped: the test does not run in the root cpuset cgroup";
  testing::TempDir dir;
  fs::path cfg = write_config(dir.path(), "enforce",
                              "[actuators]\ncpu_weight = false\npreempt_class = \"off\"\n"
                              "isolate_unmanaged = true\nisolate_root_tasks = true\n");
  cpuset_root_ = scene_->root("cpuset");
  pid_t sleeper = fork();
  if (sleeper == 0) {
    ::setpgid(0, 0);
    for (;;) ::pause();
  }
  pids_.push_back(sleeper);
  fs::path top;
  if (!v2) {
    top = cpuset_root_ / ("keel-unmanaged-test-" + std::to_string(getpid()));
    ASSERT_TRUE(fs::create_directory(top));
    extra_dirs_ = {top};
    ASSERT_TRUE(write_file(top / "cpuset.mems", std::string(trim(slurp(cpuset_root_ / "cpuset.mems")))));
    ASSERT_TRUE(write_file(top / "cpuset.cpus", "0-1"));
  } else {
    // A unit of its own, holding a parked child, is the unmanaged cgroup; the sleeper goes to the root.
    const std::string unit = "keel_unmanaged_test_" + std::to_string(getpid()) + ".scope";
    pid_t parked = fork();
    if (parked == 0) {
      ::setpgid(0, 0);
      for (;;) ::pause();
    }
    pids_.push_back(parked);
    extra_units_ = {unit};
    ASSERT_EQ(testing::systemd::start_scope(unit, "", {parked}, {"AllowedCPUs ay 1 3"}), "");
    top = cpuset_root_ / testing::cgroup_of(parked, "cpuset").substr(1);
    ASSERT_TRUE(write_file(cpuset_root_ / "cgroup.procs", std::to_string(sleeper)));
  }
  auto cpus = [&](const fs::path& cg) {
    return std::string(trim(slurp(cg / (v2 ? "cpuset.cpus.effective" : "cpuset.cpus"))));
  };
  start_waker();
  start_noise();
  fs::path log = dir.path() / "keel.log";
  pid_t keel = start_keel({"run", "--config", cfg.string()}, log);
  const fs::path group = cpuset_root_ / "keel-root-tasks";
  ASSERT_TRUE(wait_for(
      [&] { return testing::cgroup_of(sleeper, "cpuset") == "/keel-root-tasks" && cpus(top).size() == 1; },
      20s))
      << slurp(log);
  ::kill(keel, SIGKILL);
  ::waitpid(keel, nullptr, 0);
  std::erase(keels_, keel);
  ASSERT_TRUE(fs::exists(group));
  const std::string journal = slurp(dir.path() / "state/journal");
  EXPECT_NE(journal.find("keel-root-tasks"), std::string::npos) << journal;

  fs::path log2 = dir.path() / "restore.log";
  pid_t restore = start_keel({"restore", "--config", cfg.string()}, log2);
  int st = 0;
  ::waitpid(restore, &st, 0);
  std::erase(keels_, restore);
  EXPECT_EQ(WEXITSTATUS(st), 0) << slurp(log2);
  EXPECT_FALSE(fs::exists(group)) << slurp(log2);
  EXPECT_EQ(testing::cgroup_of(sleeper, "cpuset"), "/");
  EXPECT_EQ(testing::cgroup_of(getpid(), "cpuset"), own);
  EXPECT_EQ(cpus(top), "0-1");
}

TEST_F(RunPriv, ObserveNamesTheAntagonistSaysWouldAndChangesNothing) {
  testing::TempDir dir;
  fs::path cfg = write_config(dir.path(), "enforce", "");  // --observe wins over the file's mode
  const auto before = knobs();
  start_waker();
  start_noise();
  fs::path log = dir.path() / "keel.log";
  pid_t keel = start_keel({"run", "--config", cfg.string(), "--observe"}, log);
  bool said = wait_for(
      [&] {
        std::string t = slurp(log);
        return t.find("observe would act crit") != std::string::npos &&
               t.find("interference crit antagonist " + noise()) != std::string::npos;
      },
      30s);
  EXPECT_TRUE(said) << slurp(log);
  // The metrics endpoint says the same: the pair (published on the ticks crit is violated: not the
  // one right after a step, whose judgement starts afresh), and the actions counted as observe mode's.
  auto scrape = testing::http_get(metrics_port_, "/metrics");
  wait_for(
      [&] {
        scrape = testing::http_get(metrics_port_, "/metrics");
        return scrape.body.find("keel_interference_detected{antagonist=\"" + noise()) != std::string::npos;
      },
      10s);
  EXPECT_EQ(scrape.status, 200);
  EXPECT_NE(scrape.body.find("keel_interference_detected{antagonist=\"" + noise()), std::string::npos)
      << scrape.body;
  double would = 0;
  for (size_t at = scrape.body.find("\nkeel_actions_total{"); at != std::string::npos;
       at = scrape.body.find("\nkeel_actions_total{", at + 1)) {
    size_t eol = scrape.body.find('\n', at + 1);
    std::string line = scrape.body.substr(at + 1, eol - at - 1);
    EXPECT_NE(line.find("mode=\"observe\""), std::string::npos) << line;
    would += std::stod(line.substr(line.rfind(' ') + 1));
  }
  EXPECT_GE(would, 1) << scrape.body;
  // What it would have written is logged as such, and nothing was.
  const std::string knob_prefix =
      "observe would write cgroup:" + scene_->dir("", "cpu").lexically_relative("/sys/fs/cgroup").string();
  EXPECT_NE(slurp(log).find(knob_prefix), std::string::npos) << knob_prefix << "\n" << slurp(log);
  EXPECT_EQ(knobs(), before);
  EXPECT_EQ(stop_keel(keel), 0) << slurp(log);
  EXPECT_EQ(knobs(), before);
  // keel plan: one window, the violation and what keel would do about it, nothing written. Up to five
  // windows until one sees the violation: under TCG the waker's p99 wavers around the SLO, and one
  // 1.5 s window in CI saw 279 us (SLO met; the run above had seen it violated).
  int rc = 0;
  std::string plan;
  for (int attempt = 0; attempt < 5 && (attempt == 0 || plan.find("SLO violated") == std::string::npos);
       ++attempt) {
    std::tie(rc, plan) =
        testing::run_command(testing::keel_binary().string() + " plan --window 1.5 --config " + cfg.string());
    std::printf("%s", plan.c_str());
    ASSERT_EQ(rc, 0) << plan;
  }
  EXPECT_NE(plan.find("SLO violated"), std::string::npos) << plan;
  // What it would do about it: a step for crit, or the noise into the preemption class. (With the noise
  // in the class, whole cores are not worth their cost for a victim that keeps little busy: under TCG
  // the waker used 0.14 CPUs, and plan then proposes the class alone.)
  bool proposes = plan.find("observe would act crit") != std::string::npos;
  for (size_t at = plan.find("observe would act " + noise()); !proposes && at != std::string::npos;
       at = plan.find("observe would act " + noise(), at + 1))
    proposes = plan.substr(at, plan.find('\n', at) - at).find(" class (as found) -> on") != std::string::npos;
  EXPECT_TRUE(proposes) << plan;
  EXPECT_NE(plan.find("interference crit antagonist " + noise()), std::string::npos) << plan;
  EXPECT_EQ(knobs(), before);
  std::string text = slurp(log);
  EXPECT_EQ(text.find(" wrote "), std::string::npos) << text;
  // Observe journals nothing: no journal, or one without entries (its header line only).
  fs::path journal = dir.path() / "state/journal";
  if (fs::exists(journal)) {
    std::string j = slurp(journal);
    EXPECT_LE(std::count(j.begin(), j.end(), '\n'), 1) << j;
  }
}

// keel in observe mode on the waker and its noise, a real Prometheus (the Debian package's binary) on
// loopback scraping it every second and loading keel's alert rules. Then every PromQL expression of
// the dashboards must parse and return data, and every alert rule must evaluate: a renamed metric or
// label, or a broken panel query, fails here. Alerts: interference is pending with its antagonist
// in the labels; keel-down and stalled are not.
TEST_F(RunPriv, PrometheusScrapesObserveModeAndEveryDashboardAndRuleQueryReturnsData) {
  const fs::path prometheus = "/usr/bin/prometheus";
  ASSERT_TRUE(fs::exists(prometheus)) << "Prometheus is not installed: run scripts/deps.sh";
  testing::TempDir dir;
  fs::path cfg = write_config(dir.path(), "observe", "");
  start_waker();
  start_noise();
  fs::path log = dir.path() / "keel.log";
  pid_t keel = start_keel({"run", "--config", cfg.string()}, log);

  const uint16_t api = testing::free_port();
  const fs::path rules = testing::source_dir() / "dashboards/rules/keel-alerts.yml";
  {
    std::ofstream out(dir.path() / "prometheus.yml");
    out << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        << "rule_files:\n  - " << rules.string() << "\n"
        << "scrape_configs:\n  - job_name: keel\n    static_configs:\n      - targets: ['127.0.0.1:"
        << metrics_port_ << "']\n";
  }
  fs::path plog = dir.path() / "prometheus.log";
  pid_t prom = fork();
  if (prom == 0) {
    int fd = ::open(plog.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::string conf = "--config.file=" + (dir.path() / "prometheus.yml").string();
    std::string data = "--storage.tsdb.path=" + (dir.path() / "data").string();
    std::string web = "--web.listen-address=127.0.0.1:" + std::to_string(api);
    ::execl(prometheus.c_str(), "prometheus", conf.c_str(), data.c_str(), web.c_str(), "--log.level=warn",
            static_cast<char*>(nullptr));
    _exit(127);
  }
  pids_.push_back(prom);

  // One instant query: {status, result array}.
  auto query = [&](const std::string& q) -> std::pair<std::string, nlohmann::json> {
    auto r = testing::http_get(api, "/api/v1/query?query=" + testing::url_encode(q));
    if (r.status == 0) return {"no reply", {}};
    try {
      auto j = nlohmann::json::parse(r.body);
      if (j.value("status", "") != "success") return {j.value("error", r.body), {}};
      return {"success", j["data"]["result"]};
    } catch (const std::exception& e) {
      return {std::string("not JSON: ") + e.what() + ": " + r.body.substr(0, 200), {}};
    }
  };
  // Data: at least one series whose value is a number (NaN, e.g. a quantile of no waits, is no data).
  auto numbers = [](const nlohmann::json& result) {
    if (!result.is_array()) return false;
    for (const auto& r : result)
      if (r.contains("value") && r["value"][1] != "NaN") return true;
    return false;
  };
  auto has_data = [&](const std::string& q) {
    auto [status, result] = query(q);
    return status == "success" && numbers(result);
  };
  // A few scrapes of a keel that has seen the interference (observe mode names it).
  bool ready = wait_for(
      [&] {
        return has_data("count_over_time(up{job=\"keel\"}[1m]) >= 8") &&
               has_data("keel_interference_detected == 1") && has_data("keel_bpf_cost_seconds_per_event > 0");
      },
      60s);
  ASSERT_TRUE(ready) << "Prometheus did not scrape keel with interference in 60 s\nkeel:\n"
                     << slurp(log) << "\nprometheus:\n"
                     << slurp(plog);

  // What this host lacks (a PMU, resctrl, steal_task) leaves the metrics that need it without series:
  // a query on them may be empty here, never broken.
  const bool pmu = has_data("keel_sensor_available{sensor=\"hardware_counters\"} == 1");
  const bool resctrl = has_data("keel_mechanism_enabled{mechanism=\"resctrl\"} == 1");
  const bool steal = has_data("keel_mechanism_enabled{mechanism=\"steal_task\"} == 1");
  auto lacks = [&](const std::string& expr) -> std::string {
    for (const auto& sel : testing::scan_promql(expr).selectors) {
      if (!pmu && (sel.metric == "keel_cache_misses_total" || sel.metric == "keel_instructions_total"))
        return "no PMU";
      for (const auto& m : sel.matchers)
        if (m.label == "knob" && (m.value == "l3_ways" || m.value == "mba_percent") && !resctrl)
          return "no resctrl";
        else if (m.label == "knob" && m.value == "steal_task" && !steal)
          return "no steal_task";
    }
    return "";
  };
  // Each selector of `expr`, alone, has had series in the last minute: a misspelt metric, label or label
  // value has none. (Within the minute, not now: keel publishes the interference pair only on the ticks
  // the victim is violated, and under TCG crit's p99 wavers around its SLO.)
  auto selectors_have_data = [&](const std::string& where, const std::string& expr) {
    for (const auto& sel : testing::scan_promql(expr).selectors) {
      if (sel.metric.empty()) continue;
      std::string q = sel.metric + "{";
      for (const auto& m : sel.matchers) q += m.label + m.op + "\"" + m.value + "\",";
      q += "}";
      if (!lacks(q).empty()) continue;
      EXPECT_TRUE(has_data("last_over_time(" + q + "[1m])"))
          << where << ": " << q << " selects no series in the last minute (in " << expr << ")";
    }
  };
  auto queries = testing::dashboard_queries(testing::source_dir() / "dashboards");
  ASSERT_GE(queries.size(), 20u);
  size_t with_data = 0, lacking = 0, filtered = 0;
  for (const auto& q : queries) {
    std::string expr = testing::expand_grafana_variables(q.expr, "15s");
    std::string where = q.file + " / " + q.where;
    auto [status, result] = query(expr);
    ASSERT_EQ(status, "success") << where << ": " << expr;
    if (numbers(result)) {
      ++with_data;
      continue;
    }
    if (std::string why = lacks(expr); !why.empty()) {
      std::printf("  empty (%s): %s\n", why.c_str(), where.c_str());
      ++lacking;
      continue;
    }
    // Annotations mark events (an action in the last interval): empty while none happens, so their
    // selectors are checked instead. Panels and variables must show data.
    if (q.kind == testing::DashboardQuery::Kind::annotation) {
      selectors_have_data(where, expr);
      ++filtered;
      continue;
    }
    // A panel's series are this tick's (the slack of a tick with too few waits, this tick's top
    // antagonists): one scrape may lack them on a slow host, so a panel gets a few more scrapes.
    if (wait_for(
            [&] {
              auto [s, r] = query(expr);
              return s == "success" && numbers(r);
            },
            20s)) {
      ++with_data;
      continue;
    }
    ADD_FAILURE() << where << " returns no data in 20 s: " << expr;
  }
  std::printf(
      "dashboards: %zu expressions returned data, %zu annotations had no event now (their selectors have "
      "series), %zu empty for what this host lacks\n",
      with_data, filtered, lacking);

  // The alert rules as Prometheus loaded them: every one evaluates without error, and the metrics
  // each selects exist (an alert that is not firing returns nothing, so its metrics are asked for).
  auto r = testing::http_get(api, "/api/v1/rules");
  ASSERT_EQ(r.status, 200) << r.body;
  auto rules_json = nlohmann::json::parse(r.body)["data"]["groups"];
  ASSERT_FALSE(rules_json.empty()) << "no rule group loaded from " << rules << "\n" << slurp(plog);
  size_t n_rules = 0;
  for (const auto& g : rules_json)
    for (const auto& rule : g["rules"]) {
      ++n_rules;
      std::string name = rule.value("name", "");
      std::string expr = rule.value("query", "");
      EXPECT_EQ(rule.value("health", ""), "ok")
          << name << ": " << rule.value("lastError", "") << " in " << expr;
      EXPECT_EQ(query(expr).first, "success") << name << ": " << expr;
      selectors_have_data(name, expr);
    }
  EXPECT_GE(n_rules, 8u);

  // Interference is pending (its `for` has not passed) with the victim and antagonist as labels; the
  // alerts about keel itself are quiet. Polled: the antagonist keel names moves between the three noise
  // cgroups from tick to tick, and each move restarts that series' pending state, so one read may
  // fall between two (seen in CI: only KeelSloViolated pending).
  nlohmann::json alerts;
  bool interference = false;
  for (int i = 0; i < 40 && !interference; ++i) {
    if (i > 0) std::this_thread::sleep_for(500ms);
    alerts = nlohmann::json::parse(testing::http_get(api, "/api/v1/alerts").body)["data"]["alerts"];
    for (const auto& a : alerts) {
      std::string name = a["labels"].value("alertname", "");
      if (name == "KeelInterferenceDetected" && a["labels"].value("workload", "") == "crit" &&
          a["labels"].value("antagonist", "").rfind(noise(), 0) == 0)
        interference = true;
      for (const char* quiet :
           {"KeelDown", "KeelNotScraped", "KeelStalled", "KeelSensingFailing", "KeelActionsFailing"})
        EXPECT_NE(name, quiet) << a.dump();
    }
  }
  EXPECT_TRUE(interference) << alerts.dump(1);

  EXPECT_EQ(stop_keel(keel), 0) << slurp(log);
  ::kill(prom, SIGTERM);
  ::waitpid(prom, nullptr, 0);
  pids_.erase(std::find(pids_.begin(), pids_.end(), prom));
}

// A keel killed with SIGKILL while it holds changed knobs: the next keel run restores them before it
// senses anything, and its own exit leaves everything as it was before the first one started.
TEST_F(RunPriv, TheNextRunRestoresWhatAKilledKeelLeftChanged) {
  testing::TempDir dir;
  // An SLO no real wake-up meets, so keel acts at once (weights first).
  fs::path cfg = write_config(dir.path(), "enforce", "", 1);
  const auto before = knobs();
  start_waker();
  start_noise();
  fs::path log = dir.path() / "keel.log";
  pid_t keel = start_keel({"run", "--config", cfg.string()}, log);
  bool wrote = wait_for([&] { return slurp(log).find(" wrote cgroup:") != std::string::npos; }, 20s);
  ASSERT_TRUE(wrote) << slurp(log);
  ::kill(keel, SIGKILL);
  ::waitpid(keel, nullptr, 0);
  ASSERT_NE(knobs(), before) << "the killed keel changed nothing: the test would prove nothing";
  const char* weight_file = testing::host_layout() == testing::Layout::v2 ? "cpu.weight" : "cpu.shares";
  EXPECT_NE(slurp(dir.path() / "state/journal").find(weight_file), std::string::npos);

  fs::path log2 = dir.path() / "keel2.log";
  pid_t again = start_keel({"run", "--config", cfg.string(), "--observe", "--once"}, log2);
  // An observe run must not undo what it did not do: it refuses, pointing to keel restore.
  int st = 0;
  ::waitpid(again, &st, 0);
  EXPECT_EQ(WEXITSTATUS(st), 1) << slurp(log2);
  EXPECT_NE(slurp(log2).find("keel restore"), std::string::npos) << slurp(log2);
  EXPECT_NE(knobs(), before);

  // An enforce run that cannot serve its metrics (the port is taken) does not start, but it still
  // gives back what the killed keel left changed.
  uint16_t port = 0;
  int held = testing::listen_on_loopback(&port);
  ASSERT_GE(held, 0);
  fs::path log3 = dir.path() / "keel3.log";
  pid_t blocked = start_keel(
      {"run", "--config", cfg.string(), "--once", "--metrics-listen", "127.0.0.1:" + std::to_string(port)},
      log3);
  ::waitpid(blocked, &st, 0);
  ::close(held);
  std::string text = slurp(log3);
  EXPECT_EQ(WEXITSTATUS(st), 1) << text;
  EXPECT_NE(text.find("Address already in use"), std::string::npos) << text;
  EXPECT_NE(text.find("restored what a previous keel left changed"), std::string::npos) << text;
  EXPECT_EQ(knobs(), before) << text;

  // The next run finds nothing left to restore and leaves everything as it was.
  fs::path log4 = dir.path() / "keel4.log";
  pid_t enforce = start_keel({"run", "--config", cfg.string(), "--once"}, log4);
  ::waitpid(enforce, &st, 0);
  EXPECT_EQ(WEXITSTATUS(st), 0) << slurp(log4);
  text = slurp(log4);
  EXPECT_EQ(text.find("restored what a previous keel left changed"), std::string::npos) << text;
  EXPECT_EQ(knobs(), before) << text;
}

// Real docker containers (a docker daemon of the test's own, cgroupfs driver on v1) named by their docker
// names in the config: `keel workloads` shows each container's name, `keel run` in enforce mode gives
// the critical container (the waker runs in its cgroups) a CPU of its own away from the noise
// containers, a `docker update --cpuset-cpus` behind keel's back is seen as drift (logged, not written
// back), and on stop the noise containers' CPUs go back while the one docker set stays as docker set it.
TEST_F(RunPriv, DockerContainersByNameAreProtectedAndADockerUpdateIsDriftNotAWriteWar) {
  if (std::string why = testing::Dockerd::unavailable(); !why.empty()) GTEST_SKIP() << "skipped: " << why;
  testing::TempDir dir;
  testing::Dockerd dockerd(dir.path() / "docker");
  fs::create_directories(dir.path() / "docker");
  const std::string started = dockerd.start();
  ASSERT_TRUE(started.empty()) << started;
  const std::string docker = dockerd.client();
  const fs::path rootfs = dir.path() / "rootfs";
  ASSERT_EQ(testing::copy_with_libraries({"/bin/sleep"}, rootfs), "");
  ASSERT_EQ(dockerd.import(rootfs, "keel-ctest-sleep"), "");
  const std::string tag = std::to_string(::getpid());
  const std::string crit = "keel-ctest-crit-" + tag;
  std::vector<std::string> names = {crit};
  for (int i = 1; i <= 3; ++i) names.push_back("keel-ctest-noise" + std::to_string(i) + "-" + tag);
  std::map<std::string, std::string> id;
  for (const auto& n : names) {
    auto [rc, out] =
        run_command(docker + "run -d --name " + n + " --network none keel-ctest-sleep /bin/sleep infinity");
    ASSERT_EQ(rc, 0) << out;
    id[n] = std::string(trim(out));
    ASSERT_TRUE(fs::exists(scene_->root("cpuset") / testing::Dockerd::container_cgroup(id[n]).substr(1)))
        << testing::Dockerd::container_cgroup(id[n]);
  }
  // Our processes leave the containers' cgroups before docker removes them (declared after dockerd:
  // runs first).
  auto leave_containers = [this](int* p) {
    scene_->kill_started();
    std::this_thread::sleep_for(200ms);
    delete p;
  };
  std::unique_ptr<int, decltype(leave_containers)> leave(new int(0), leave_containers);
  auto cgroup = [&](const std::string& n) { return testing::Dockerd::container_cgroup(id[n]); };
  const std::string cpus_path = (scene_->root("cpuset") / cgroup(crit).substr(1) / "cpuset.cpus").string();
  // What a container may use (on v2 docker sets no cpuset.cpus of its own: the parent's, effective).
  auto cpus = [&](const std::string& n) {
    const fs::path d = scene_->root("cpuset") / cgroup(n).substr(1);
    std::string c(trim(slurp(d / "cpuset.cpus")));
    return c.empty() ? std::string(trim(slurp(d / "cpuset.cpus.effective"))) : c;
  };
  std::map<std::string, std::string> before;
  for (const auto& n : names) before[n] = cpus(n);

  fs::path cfg = dir.path() / "keel.toml";
  metrics_port_ = testing::free_port();
  std::ofstream(cfg) << "[daemon]\nmode = \"enforce\"\nperiod = \"500ms\"\nstate_dir = \""
                     << (dir.path() / "state").string() << "\"\nhierarchy = \"" << scene_->hierarchy()
                     << "\"\nmetrics_listen = \"127.0.0.1:" << metrics_port_ << "\"\n\n"
                     << "[host]\ndocker_root = \"" << dockerd.data_root().string() << "\"\n\n"
                     << "[actuators]\ncpu_weight = false\npreempt_class = \"off\"\n\n"
                     << "[[workload]]\nname = \"crit\"\nmatch = { docker = \"" << crit
                     << "\" }\nclass = \"critical\"\n"
                     << "slo = { runqueue_p99 = \"" << kSloUs << "us\" }\n\n"
                     << "[[workload]]\nname = \"noise\"\nmatch = { cgroup = \""
                     << (testing::Dockerd::systemd_driver() ? "/system.slice/docker-*.scope" : "/docker/*")
                     << "\", each = true }\n"
                     << "class = \"best-effort\"\n";
  auto [wrc, listing] = run_command(testing::keel_binary().string() + " workloads --config " + cfg.string());
  ASSERT_EQ(wrc, 0) << listing;
  const size_t row = listing.find(cgroup(crit));
  ASSERT_NE(row, std::string::npos) << listing;
  const std::string line = listing.substr(row, listing.find('\n', row) - row);
  EXPECT_NE(line.find(" crit "), std::string::npos) << line;
  EXPECT_NE(line.find(" docker " + crit + " "), std::string::npos) << line;
  EXPECT_NE(listing.find("docker " + names[1]), std::string::npos) << listing;

  start_waker(cgroup(crit));
  std::this_thread::sleep_for(500ms);
  start_noise({cgroup(names[1]), cgroup(names[2]), cgroup(names[3])});
  std::this_thread::sleep_for(1s);
  fs::path log = dir.path() / "keel.log";
  pid_t keel = start_keel({"run", "--config", cfg.string(), "--verbose"}, log);
  bool split = wait_for(
      [&] {
        std::string c = cpus(crit), other = c == "0" ? "1" : "0";
        return (c == "0" || c == "1") && cpus(names[1]) == other && cpus(names[2]) == other &&
               cpus(names[3]) == other;
      },
      20s);
  ASSERT_TRUE(split) << slurp(log);
  const std::string kept = cpus(crit);
  std::printf("keel gave container %s CPU %s\n", crit.c_str(), kept.c_str());

  // Behind keel's back: docker gives the container both CPUs again.
  auto [urc, uout] = run_command(docker + "update --cpuset-cpus 0-1 " + crit);
  ASSERT_EQ(urc, 0) << uout;
  const std::string drift = "drift " + cpus_path + ": keel wrote " + kept + ", now 0-1";
  EXPECT_TRUE(wait_for([&] { return slurp(log).find(drift) != std::string::npos; }, 15s)) << drift << "\n"
                                                                                          << slurp(log);
  // No write-war: for the next seconds the container keeps what docker set.
  for (int i = 0; i < 30; ++i) {
    EXPECT_EQ(cpus(crit), "0-1") << slurp(log);
    std::this_thread::sleep_for(100ms);
  }
  auto scrape = testing::http_get(metrics_port_, "/metrics").body;
  EXPECT_NE(scrape.find("\nkeel_drift_total 1\n"), std::string::npos) << scrape;

  EXPECT_EQ(stop_keel(keel), 0) << slurp(log);
  for (const auto& n : names) EXPECT_EQ(cpus(n), n == crit ? "0-1" : before[n]) << n << "\n" << slurp(log);
  EXPECT_EQ(slurp(log).find("error:"), std::string::npos) << slurp(log);
  for (const auto& n : names) run_command(docker + "rm -f " + n);
}

// The default config's "system" catch-all (every cgroup with tasks in system.slice, best-effort) beside
// a critical workload: the class goes on the best-effort noise, never on a system service (a daemon of
// the test's own there, and on the guest every real one: journald, logind, dbus) nor on keel. On v2
// under systemd, `systemctl daemon-reload` realises every unit's cgroup again (cpu.idle 0, each unit's
// CPUWeight): keel finds the noise back at what it found and puts it in the class again within a tick
// or two, with no drift and no lockout. On v1 (no systemd here) the daemon is a directory named as
// systemd names services.
TEST_F(RunPriv, TheSystemCatchAllNeverClassesTheHostsDaemonsAndADaemonReloadIsUndoneAtOnce) {
  if (!fs::exists(scene_->dir("crit") / "cpu.idle"))
    GTEST_SKIP() << "skipped: this kernel has no cpu.idle (5.15+)";
  const std::string unit = name_ + "-daemon.service";
  fs::path daemon;
  pid_t sleeper = fork();
  if (sleeper == 0) {
    ::setpgid(0, 0);
    for (;;) ::pause();
  }
  pids_.push_back(sleeper);
  if (!scene_->v2()) {
    const fs::path slice = scene_->root("cpu") / "system.slice";
    daemon = slice / unit;
    const bool made_slice = fs::create_directory(slice);
    ASSERT_TRUE(fs::create_directory(daemon)) << daemon;
    extra_dirs_ = {daemon};
    if (made_slice) extra_dirs_.push_back(slice);
    ASSERT_TRUE(write_file(daemon / "cgroup.procs", std::to_string(sleeper)));
  } else {
    extra_units_ = {unit};
    ASSERT_EQ(
        testing::systemd::start_service(unit, "system.slice", "/bin/sleep infinity", {"CPUWeight t 100"}),
        "");
    daemon = scene_->root("cpu") / "system.slice" / unit;
    ASSERT_TRUE(wait_for([&] { return fs::exists(daemon / "cpu.idle"); }, 5s)) << daemon;
  }
  testing::TempDir dir;
  fs::path cfg = write_config(dir.path(), "enforce", "[actuators]\ncpuset = false\ncpu_weight = false\n");
  {
    std::ofstream out(cfg, std::ios::app);
    out << "\n[[workload]]\nname = \"system\"\nmatch = { cgroup = \"/system.slice/**\", has_tasks = true, "
           "each = true }\nclass = \"best-effort\"\n";
  }
  // The host's own services as they are now (on the guest: journald and the others systemd runs).
  std::map<fs::path, std::string> services;
  for (const auto& e : fs::directory_iterator(scene_->root("cpu") / "system.slice"))
    if (e.path().extension() == ".service" && fs::exists(e.path() / "cpu.idle"))
      services[e.path()] = std::string(trim(slurp(e.path() / "cpu.idle")));
  ASSERT_TRUE(services.contains(daemon));
  start_noise();
  fs::path log = dir.path() / "keel.log";
  start_keel({"run", "--config", cfg.string(), "--verbose"}, log);
  auto idle = [&](const char* leaf) { return leaf_file(leaf, "cpu.idle"); };
  auto noise_classed = [&] { return idle("be1") == "1" && idle("be2") == "1" && idle("be3") == "1"; };
  ASSERT_TRUE(wait_for(noise_classed, 15s)) << slurp(log);
  std::this_thread::sleep_for(1s);  // two more ticks
  // keel does not even plan it: no decision names a system service.
  EXPECT_EQ(slurp(log).find(" act system/"), std::string::npos) << slurp(log);
  for (const auto& [path, was] : services)
    EXPECT_EQ(std::string(trim(slurp(path / "cpu.idle"))), was) << path << " was classed:\n" << slurp(log);
  // Measured all the same: its own series on the endpoint.
  const std::string scrape = testing::http_get(metrics_port_, "/metrics").body;
  EXPECT_NE(scrape.find("workload=\"system/" + unit + "\""), std::string::npos) << "the daemon is measured";
  if (scene_->v2()) {
    ASSERT_EQ(run_command("systemctl daemon-reload").first, 0);
    const auto reloaded = std::chrono::steady_clock::now();
    // systemd wrote the units' own values back; keel reads them in its next tick.
    ASSERT_TRUE(wait_for([&] { return slurp(log).find("systemd realised") != std::string::npos; }, 5s))
        << "systemd realised nothing keel holds:\n"
        << slurp(log);
    ASSERT_TRUE(wait_for(noise_classed, 3s)) << slurp(log);
    std::printf("after daemon-reload the noise was in the class again within %lld ms\n",
                static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                           std::chrono::steady_clock::now() - reloaded)
                                           .count()));
    EXPECT_EQ(slurp(log).find(" drift "), std::string::npos) << slurp(log);
  } else {
    std::printf("no systemd on this host: the daemon-reload half runs on the v2 guest\n");
  }
}

}  // namespace
}  // namespace keel
