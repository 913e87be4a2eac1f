// keel with capabilities dropped (root; skips without root or setpriv). Two halves:
// - the privilege table (host/caps.h) against the kernel: each check done in a child holding exactly
//   a given set of capabilities (and uid 0 or 65534), and what the kernel allowed compared with what
//   the table says of the same set;
// - the real binary under setpriv, as deploy/systemd/keel.service's CapabilityBoundingSet= runs it and
//   with each of its capabilities dropped in turn: `keel probe --json` names what is missing for what,
//   `keel run --once` (observe, a minimal config, no metrics endpoint, a state directory of its own)
//   senses and turns off what it lacks the privilege for with a line naming it, or stops with an error
//   naming the capability where it cannot sense.
#include <bpf/bpf.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bpf/features.h"
#include "host/caps.h"
#include "host/cgroup.h"
#include "host/fileio.h"
#include "tests/support/scene.h"
#include "tests/support/tmp_tree.h"

namespace keel {
namespace {

namespace fs = std::filesystem;
using testing::run_command;
using testing::slurp;
using Json = nlohmann::json;

constexpr uid_t kNobody = 65534;

uint64_t mask_of(const std::vector<Cap>& caps) {
  uint64_t m = 0;
  for (Cap c : caps) m |= uint64_t{1} << static_cast<unsigned>(c);
  return m;
}

std::string names(const std::vector<Cap>& caps) {
  std::string s;
  for (Cap c : caps) s += (s.empty() ? "" : " ") + std::string(cap_name(c));
  return s.empty() ? "none" : s;
}

// setpriv's --bounding-set= for exactly `caps` ("-all,+bpf,+perfmon").
std::string bounding(const std::vector<Cap>& caps) {
  std::string s = "-all";
  for (Cap c : caps) {
    std::string n(cap_name(c).substr(4));
    for (auto& ch : n) ch = static_cast<char>(std::tolower(ch));
    s += ",+" + n;
  }
  return s;
}

// The unit's CapabilityBoundingSet=, as keel runs under systemd.
std::vector<Cap> unit_caps() {
  const std::string unit = slurp(testing::source_dir() / "deploy/systemd/keel.service");
  std::istringstream words(testing::between(unit, "\nCapabilityBoundingSet=", "\n"));
  std::vector<Cap> out;
  for (std::string w; words >> w;)
    for (Cap c : table_caps())
      if (cap_name(c) == w) out.push_back(c);
  return out;
}

// What the table says of a process with uid `uid` and exactly `caps`, on this kernel.
Privileges privileges_of(uid_t uid, const std::vector<Cap>& caps) {
  Privileges p = current_privileges(SysRoots::host());
  p.uid0 = uid == 0;
  p.euid = uid;
  p.effective = mask_of(caps);
  return p;
}

// Runs `op` in a child with uid `uid` and exactly `caps` (effective and permitted): 0 when the kernel
// allowed it, else its errno (a failure to set the child up is 250+).
int as(uid_t uid, const std::vector<Cap>& caps, const std::function<int()>& op) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (uid != 0) {
      // Keep the permitted set across the change of uid; the effective one is raised again below.
      if (::prctl(PR_SET_KEEPCAPS, 1) != 0 || ::setgroups(0, nullptr) != 0 ||
          ::setresgid(uid, uid, uid) != 0 || ::setresuid(uid, uid, uid) != 0)
        ::_exit(250);
    }
    __user_cap_header_struct head{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
    const uint64_t m = mask_of(caps);
    data[0].effective = data[0].permitted = static_cast<uint32_t>(m);
    data[1].effective = data[1].permitted = static_cast<uint32_t>(m >> 32);
    if (::syscall(SYS_capset, &head, data) != 0) ::_exit(251);
    ::_exit(op());
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 255;
}

// Writes `value` to `file`: 0 or errno.
int write_to(const fs::path& file, const std::string& value) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  const ssize_t n = ::write(fd, value.data(), value.size());
  const int e = n < 0 ? errno : 0;
  ::close(fd);
  return e;
}

class CapsPriv : public ::testing::Test {
 protected:
  void SetUp() override {
    KEEL_REQUIRE_ROOT();
    if (std::system("command -v setpriv >/dev/null") != 0) GTEST_SKIP() << "skipped: no setpriv (util-linux)";
    unit_ = unit_caps();
    ASSERT_FALSE(unit_.empty()) << "no CapabilityBoundingSet= in deploy/systemd/keel.service";
    const auto now = current_privileges(SysRoots::host());
    for (Cap c : table_caps())
      if (now.knows(c) && !now.has(c))
        GTEST_SKIP() << "skipped: this test process lacks " << cap_name(c) << " (it drops from a full set)";
  }

  // The child's result for `op` under (uid, caps) against the table's verdict for `f`: equal.
  void expect_agrees(Feature f, uid_t uid, const std::vector<Cap>& caps, const std::function<int()>& op) {
    const int got = as(uid, caps, op);
    ASSERT_LT(got, 250) << "could not set up a child with uid " << uid << " and " << names(caps);
    const Verdict v = check(f, privileges_of(uid, caps));
    EXPECT_EQ(got == 0, v.held) << privilege_row(f).label << " as uid " << uid << " with " << names(caps)
                                << ": the kernel says " << (got == 0 ? "yes" : std::strerror(got))
                                << ", the table " << (v.held ? "yes" : "no (needs " + v.needs + ")");
  }

  // keel under setpriv with exactly `caps` in its bounding set (uid 0: its permitted set is that),
  // stdout and stderr to `out`; retried while another keel (another test on this host) holds the
  // host's lock. Its exit status.
  int keel(const std::vector<Cap>& caps, const std::string& args, const fs::path& out) {
    const std::string cmd = "setpriv --bounding-set=" + bounding(caps) + " " +
                            testing::keel_binary().string() + " " + args + " >" + out.string() + " 2>&1";
    for (int i = 0;; ++i) {
      const int rc = run_command(cmd).first;
      if (i == 30 || slurp(out).find("another keel runs on this host") == std::string::npos) return rc;
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  }

  // Whether the host's keel lock (flock on the cgroup mount root) is free, waiting up to 5 minutes
  // for another test's keel to stop.
  static bool host_lock_free() {
    const int fd = ::open(SysRoots::host().cgroup.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return false;
    bool free = false;
    for (int i = 0; i < 300 && !(free = ::flock(fd, LOCK_EX | LOCK_NB) == 0); ++i)
      std::this_thread::sleep_for(std::chrono::seconds(1));
    ::close(fd);  // released: keel takes it
    return free;
  }

  Json probe(const std::vector<Cap>& caps) {
    testing::TempDir dir;
    const fs::path out = dir.path() / "probe.json";
    const std::string cmd = "setpriv --bounding-set=" + bounding(caps) + " " +
                            testing::keel_binary().string() + " probe --json >" + out.string() +
                            " 2>/dev/null";
    EXPECT_EQ(run_command(cmd).first, 0) << cmd;
    Json j = Json::parse(slurp(out), nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << slurp(out);
    return j;
  }

  // A minimal observe-mode config with its state directory under `dir`; `extra` appended.
  static fs::path config(const fs::path& dir, const std::string& extra = "") {
    const fs::path cfg = dir / "keel.toml";
    std::ofstream(cfg) << "[daemon]\nmode = \"observe\"\nperiod = \"1s\"\nstate_dir = \""
                       << (dir / "state").string() << "\"\n"
                       << extra;
    return cfg;
  }

  std::vector<Cap> unit_;
};

// ---- The table against the kernel ----

// BPF: the probe program (a tp_btf, else raw_tp sched_switch program and its map) loads and attaches
// exactly where the table says BPF sensing is held; BPF_ENABLE_STATS where it says the stats are.
TEST_F(CapsPriv, BpfLoadsAndStatsAreAllowedExactlyWhereTheTableSays) {
  const std::vector<std::vector<Cap>> sets = {{},
                                              {Cap::bpf},
                                              {Cap::perfmon},
                                              {Cap::bpf, Cap::perfmon},
                                              {Cap::sys_admin},
                                              {Cap::bpf, Cap::perfmon, Cap::sys_nice, Cap::dac_override}};
  for (const auto& caps : sets) {
    expect_agrees(Feature::bpf_sensing, 0, caps, [] {
      auto c = bpf::SwitchCounter::open();
      return c ? 0 : (c.error().err != 0 ? c.error().err : EPERM);
    });
    expect_agrees(Feature::bpf_stats, 0, caps, [] {
      const int fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
      return fd >= 0 ? 0 : errno;
    });
  }
}

// Hardware counters are opened for every task on one CPU (pid -1, cpu N): the kernel's check of that
// (perf_allow_cpu) is the same for any event type, so a software clock stands in on a host without a
// PMU.
TEST_F(CapsPriv, CpuWideCountersAreAllowedExactlyWhereTheTableSays) {
  for (const auto& caps : std::vector<std::vector<Cap>>{
           {}, {Cap::bpf}, {Cap::perfmon}, {Cap::sys_admin}, {Cap::bpf, Cap::perfmon}}) {
    expect_agrees(Feature::hw_counters, 0, caps, [] {
      perf_event_attr attr{};
      attr.size = sizeof attr;
      attr.type = PERF_TYPE_SOFTWARE;
      attr.config = PERF_COUNT_SW_CPU_CLOCK;
      attr.disabled = 1;
      const long fd = ::syscall(SYS_perf_event_open, &attr, -1, 0, -1, PERF_FLAG_FD_CLOEXEC);
      return fd >= 0 ? 0 : errno;
    });
  }
}

// cgroup files are root's: uid 0 writes them with no capability, another uid only with
// CAP_DAC_OVERRIDE. IRQ affinity the same. Each write puts back the value found (nothing changes).
TEST_F(CapsPriv, KernelFilesAreWritableExactlyWhereTheTableSays) {
  std::string why;
  if (!testing::host_layout(&why)) GTEST_SKIP() << "skipped: " << why;
  testing::DelegatedTree tree("keel-caps-" + std::to_string(::getpid()));
  ASSERT_EQ(tree.error(), "");
  ASSERT_TRUE(tree.make("w"));
  const fs::path dir = tree.dir("cpu") / "w";
  const fs::path weight = dir / (tree.v2() ? "cpu.weight" : "cpu.shares");
  const std::string shares(trim(slurp(weight)));
  fs::path irq_file;  // an IRQ whose affinity takes its own value back
  for (const auto& e : fs::directory_iterator("/proc/irq")) {
    const fs::path f = e.path() / "smp_affinity_list";
    if (fs::exists(f) && write_to(f, std::string(trim(slurp(f)))) == 0) {
      irq_file = f;
      break;
    }
  }
  const std::vector<std::vector<Cap>> sets = {{}, {Cap::bpf, Cap::perfmon}, {Cap::dac_override}};
  for (uid_t uid : {uid_t{0}, kNobody})
    for (const auto& caps : sets) {
      expect_agrees(Feature::cgroup_knobs, uid, caps, [&] { return write_to(weight, shares); });
      if (!irq_file.empty())
        expect_agrees(Feature::irq_affinity, uid, caps,
                      [&] { return write_to(irq_file, std::string(trim(slurp(irq_file)))); });
    }
  if (irq_file.empty()) std::printf("no IRQ here takes an affinity: IRQ affinity not checked\n");
  std::printf(
      "not checked here: resctrl (not mounted) and debugfs's sched features (this kernel is locked "
      "down: debugfs refuses every process); the table follows the kernel source for both\n");
  EXPECT_EQ(std::string(trim(slurp(weight))), shares);
}

// Moving a process into a cpuset (v1, or v2 with the cpuset controller): cgroup.procs takes another
// user's process from uid 0 only, and the cpuset refuses one whose permitted capabilities the mover
// lacks unless it has CAP_SYS_NICE (isolate_root_tasks moves root's processes, most of which hold every
// capability). A process holding no capability moves without it: the feature is partial. The
// processes move between two cpusets of the test's own: `home` (every CPU) and `dir` (CPU 0).
TEST_F(CapsPriv, MovingAProcessHoldingCapabilitiesIntoACpusetNeedsSysNice) {
  std::string why;
  if (!testing::host_layout(&why)) GTEST_SKIP() << "skipped: " << why;
  testing::DelegatedTree tree("keel-caps-" + std::to_string(::getpid()));
  ASSERT_EQ(tree.error(), "");
  ASSERT_TRUE(tree.make("home"));
  ASSERT_TRUE(tree.make("narrow"));
  const fs::path home = tree.dir("cpuset") / "home", dir = tree.dir("cpuset") / "narrow";
  ASSERT_TRUE(write_file(dir / "cpuset.cpus", "0"));
  // Two sleepers at home: one with every capability (as root's daemons), one with none.
  auto sleeper = [](bool caps) {
    const pid_t p = ::fork();
    if (p == 0) {
      if (!caps) {
        __user_cap_header_struct head{_LINUX_CAPABILITY_VERSION_3, 0};
        __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
        if (::syscall(SYS_capset, &head, data) != 0) ::_exit(1);
      }
      ::pause();
      ::_exit(0);
    }
    return p;
  };
  const pid_t full = sleeper(true), bare = sleeper(false);
  ASSERT_TRUE(write_file(home / "cgroup.procs", std::to_string(full)));
  ASSERT_TRUE(write_file(home / "cgroup.procs", std::to_string(bare)));
  auto move = [&](pid_t p) {
    return [&dir, p] { return write_to(dir / "cgroup.procs", std::to_string(p)); };
  };
  auto back = [&](pid_t p) { ASSERT_TRUE(write_file(home / "cgroup.procs", std::to_string(p))); };
  for (uid_t uid : {uid_t{0}, kNobody})
    for (const auto& caps :
         std::vector<std::vector<Cap>>{unit_, {Cap::sys_nice}, {Cap::bpf, Cap::perfmon, Cap::sys_nice}}) {
      expect_agrees(Feature::root_moves, uid, caps, move(full));
      back(full);
      // The partial case: what the table says keel can still do without CAP_SYS_NICE.
      const Verdict v = check(Feature::root_moves, privileges_of(uid, caps));
      EXPECT_EQ(as(uid, caps, move(bare)) == 0, v.held || v.partial)
          << "uid " << uid << " with " << names(caps);
      back(bare);
    }
  ::kill(full, SIGKILL);
  ::kill(bare, SIGKILL);
  ::waitpid(full, nullptr, 0);
  ::waitpid(bare, nullptr, 0);
}

// ---- keel probe ----

// Under the unit's set: sensing is there; BPF run-time stats are missing CAP_SYS_ADMIN and moving
// root's processes CAP_SYS_NICE (in part), each named; the files keel writes are its own.
TEST_F(CapsPriv, ProbeUnderTheUnitsSetNamesWhatItLacksForWhat) {
  Json j = probe(unit_);
  ASSERT_TRUE(j.contains("features")) << j.dump(2);
  const Json& f = j["features"];
  EXPECT_TRUE(j["tp_btf"].get<bool>() || j["raw_tp"].get<bool>()) << j.dump(2);
  EXPECT_TRUE(f["bpf_sensing"]["available"].get<bool>()) << j.dump(2);
  // At perf_event_paranoid 3 (Debian's and Ubuntu's kernels) the counters need CAP_SYS_ADMIN.
  const bool restricted = current_privileges(SysRoots::host()).perf_event_paranoid > 2;
  EXPECT_EQ(f["hw_counters"]["privilege"].get<bool>(), !restricted) << j.dump(2);
  if (restricted) {
    EXPECT_EQ(f["hw_counters"]["missing"], Json::array({"CAP_SYS_ADMIN"})) << j.dump(2);
  }
  EXPECT_FALSE(f["bpf_stats"]["available"].get<bool>());
  EXPECT_EQ(f["bpf_stats"]["needs"], "CAP_SYS_ADMIN") << j.dump(2);
  EXPECT_EQ(f["bpf_stats"]["missing"], Json::array({"CAP_SYS_ADMIN"}));
  EXPECT_EQ(f["root_moves"]["needs"], "CAP_SYS_NICE") << j.dump(2);
  EXPECT_EQ(f["root_moves"]["partial"], true);
  for (const char* k : {"cgroup_knobs", "resctrl", "steal_task", "irq_affinity"})
    EXPECT_TRUE(f[k]["privilege"].get<bool>()) << k << ": " << j.dump(2);
  const Json& caps = j["privileges"]["capabilities"];
  EXPECT_EQ(caps["CAP_BPF"], true);
  EXPECT_EQ(caps["CAP_PERFMON"], true);
  EXPECT_EQ(caps["CAP_SYS_ADMIN"], false);
  EXPECT_EQ(j["privileges"]["uid0"], true);
  // The text says the same in words.
  testing::TempDir dir;
  ASSERT_EQ(keel(unit_, "probe", dir.path() / "probe.txt"), 0);
  const std::string text = slurp(dir.path() / "probe.txt");
  EXPECT_NE(text.find("privileges          uid 0, CAP_PERFMON CAP_BPF\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  BPF run-time stats        no (needs CAP_SYS_ADMIN: "), std::string::npos) << text;
  EXPECT_NE(text.find("  moving root's processes   partial (needs CAP_SYS_NICE: "), std::string::npos)
      << text;
  EXPECT_NE(text.find("  BPF sensing               yes\n"), std::string::npos) << text;
}

// Each of the unit's capabilities dropped in turn: sensing is reported missing exactly that one
// (or CAP_SYS_ADMIN instead), and the kernel's loads fail with it; CAP_PERFMON also takes the CPU-wide
// counters (which at perf_event_paranoid 3 need CAP_SYS_ADMIN, held or not).
TEST_F(CapsPriv, ProbeNamesEachDroppedCapability) {
  const int paranoid = current_privileges(SysRoots::host()).perf_event_paranoid;
  for (Cap dropped : unit_) {
    std::vector<Cap> caps;
    for (Cap c : unit_)
      if (c != dropped) caps.push_back(c);
    Json j = probe(caps);
    ASSERT_TRUE(j.contains("features")) << j.dump(2);
    const Json& s = j["features"]["bpf_sensing"];
    EXPECT_FALSE(s["available"].get<bool>()) << j.dump(2);
    EXPECT_EQ(s["missing"], Json::array({std::string(cap_name(dropped))})) << j.dump(2);
    EXPECT_EQ(s["needs"], std::string(cap_name(dropped)) + ", or CAP_SYS_ADMIN") << j.dump(2);
    EXPECT_FALSE(j["tp_btf"].get<bool>() || j["raw_tp"].get<bool>()) << "the kernel agrees: " << j.dump(2);
    EXPECT_EQ(j["privileges"]["capabilities"][std::string(cap_name(dropped))], false);
    const Json& hw = j["features"]["hw_counters"];
    if (paranoid > 2) {  // Debian's and Ubuntu's level: CAP_SYS_ADMIN only, whatever else is held
      EXPECT_FALSE(hw["privilege"].get<bool>()) << j.dump(2);
      EXPECT_EQ(hw["missing"], Json::array({"CAP_SYS_ADMIN"})) << j.dump(2);
    } else if (dropped == Cap::perfmon && paranoid > 0) {
      EXPECT_FALSE(hw["privilege"].get<bool>()) << j.dump(2);
      EXPECT_EQ(hw["missing"], Json::array({"CAP_PERFMON"})) << j.dump(2);
    } else {
      EXPECT_TRUE(hw["privilege"].get<bool>()) << j.dump(2);
    }
  }
}

// ---- keel run ----

// The unit's set: keel senses (exit 0, its sensors named) and says what it runs without: BPF
// run-time stats (CAP_SYS_ADMIN) and, where isolate_root_tasks is on, the moves of root's processes
// that hold capabilities (CAP_SYS_NICE). No error.
TEST_F(CapsPriv, RunUnderTheUnitsSetSensesAndSaysWhatItRunsWithout) {
  if (!host_lock_free()) GTEST_SKIP() << "skipped: another keel has held this host's lock for 5 minutes";
  testing::TempDir dir;
  const fs::path cfg =
      config(dir.path(), "[actuators]\nisolate_unmanaged = true\nisolate_root_tasks = true\n");
  const fs::path log = dir.path() / "keel.log";
  const int rc =
      keel(unit_, "run --config " + cfg.string() + " --once --metrics-listen off --bpf-stats always", log);
  const std::string text = slurp(log);
  EXPECT_EQ(rc, 0) << text;
  EXPECT_NE(text.find(", sensors "), std::string::npos) << text;
  EXPECT_NE(
      text.find("keel: run: BPF run-time stats: needs CAP_SYS_ADMIN, which keel does not have: keel's own "
                "BPF cost is not measured\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("keel: run: moving root's processes: needs CAP_SYS_NICE, which keel does not have: "),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("error"), std::string::npos) << text;
  // With both added, nothing is said missing.
  const fs::path all = dir.path() / "all.log";
  std::vector<Cap> more = unit_;
  more.push_back(Cap::sys_admin);
  more.push_back(Cap::sys_nice);
  EXPECT_EQ(
      keel(more, "run --config " + cfg.string() + " --once --metrics-listen off --bpf-stats always", all), 0)
      << slurp(all);
  EXPECT_EQ(slurp(all).find("which keel does not have"), std::string::npos) << slurp(all);
}

// Without one of the unit's capabilities keel cannot sense: it stops (exit 1) with the capability
// named, before it senses anything. CAP_SYS_ADMIN alone (the way before 5.8) still senses.
TEST_F(CapsPriv, RunWithoutASensingCapabilityStopsNamingIt) {
  if (!host_lock_free()) GTEST_SKIP() << "skipped: another keel has held this host's lock for 5 minutes";
  testing::TempDir dir;
  const fs::path cfg = config(dir.path());
  for (Cap dropped : unit_) {
    std::vector<Cap> caps;
    for (Cap c : unit_)
      if (c != dropped) caps.push_back(c);
    const fs::path log = dir.path() / ("without-" + std::string(cap_name(dropped)) + ".log");
    EXPECT_EQ(keel(caps, "run --config " + cfg.string() + " --once --metrics-listen off", log), 1)
        << slurp(log);
    const std::string text = slurp(log);
    EXPECT_NE(
        text.find("keel: error: run: BPF sensing: needs " + std::string(cap_name(dropped)) +
                  ", or CAP_SYS_ADMIN, which keel does not have: keel run, keel top and keel plan cannot "
                  "sense and stop (keel has uid 0, "),
        std::string::npos)
        << text;
    EXPECT_EQ(text.find(", sensors "), std::string::npos) << text;
  }
  const fs::path admin = dir.path() / "sys_admin.log";
  EXPECT_EQ(keel({Cap::sys_admin}, "run --config " + cfg.string() + " --once --metrics-listen off", admin), 0)
      << slurp(admin);
  EXPECT_NE(slurp(admin).find(", sensors "), std::string::npos) << slurp(admin);
}

// Enforce mode writes root's cgroup files: not uid 0 and without CAP_DAC_OVERRIDE keel stops with
// that said, before it journals anything; observe mode, which writes nothing, senses as that uid.
TEST_F(CapsPriv, EnforceWithoutUidZeroStopsObserveRuns) {
  if (!host_lock_free()) GTEST_SKIP() << "skipped: another keel has held this host's lock for 5 minutes";
  testing::TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  const fs::path mine = dir.path() / "nobody";
  fs::create_directory(mine);
  ASSERT_EQ(::chown(mine.c_str(), kNobody, kNobody), 0);
  const std::string as_nobody =
      "setpriv --reuid=" + std::to_string(kNobody) + " --regid=" + std::to_string(kNobody) +
      " --clear-groups --inh-caps=-all,+bpf,+perfmon --ambient-caps=-all,+bpf,+perfmon " +
      testing::keel_binary().string();
  for (const char* mode : {"enforce", "observe"}) {
    const fs::path cfg = dir.path() / (std::string(mode) + ".toml");
    std::ofstream(cfg) << "[daemon]\nmode = \"" << mode << "\"\nperiod = \"1s\"\nstate_dir = \""
                       << (mine / "state").string() << "\"\n";
    ::chmod(cfg.c_str(), 0644);
    const fs::path log = dir.path() / (std::string(mode) + ".log");
    int rc = 0;
    for (int i = 0; i < 30; ++i) {  // another keel on this host holds the lock: wait for it
      rc = run_command(as_nobody + " run --config " + cfg.string() + " --once --metrics-listen off >" +
                       log.string() + " 2>&1")
               .first;
      if (slurp(log).find("another keel runs on this host") == std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    const std::string text = slurp(log);
    if (std::string(mode) == "enforce") {
      EXPECT_EQ(rc, 1) << text;
      EXPECT_NE(
          text.find("keel: error: run: cgroup knobs: needs uid 0, or CAP_DAC_OVERRIDE, which keel does not "
                    "have: enforce mode cannot write and stops (keel has uid 65534, CAP_PERFMON CAP_BPF)"),
          std::string::npos)
          << text;
      EXPECT_FALSE(fs::exists(mine / "state" / "journal")) << text;
    } else {
      EXPECT_EQ(rc, 0) << text;
      EXPECT_NE(text.find(", sensors "), std::string::npos) << text;
    }
  }
}

}  // namespace
}  // namespace keel
