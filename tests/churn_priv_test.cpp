// Churn (issue 15): while `keel run` enforces for a critical workload beside best-effort noise, 1,000
// cgroups are made and removed around it, each with a task that runs, half of them matched workloads
// (best-effort instances of their own, which keel puts in the preemption class: their weights and
// cpu.idle journaled) and half not. keel must keep running, and leave nothing of them behind: no held
// directory (fds back to where they were), no BPF map entry, no journal entry. Real cgroups (v1 cpu,
// cpuacct, cpuset; or v2 under systemd), real BPF, the real binary; root. RSS and tick time over a long churn
// are measured by bench/soak.sh, not asserted here.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "actuators/journal.h"
#include "host/cgroup.h"
#include "host/fileio.h"
#include "tests/support/http.h"
#include "tests/support/scene.h"
#include "tests/support/timing.h"
#include "tests/support/tmp_tree.h"

namespace keel {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::slurp;

// What each open descriptor of `p` names (a socket, a map, a cgroup directory), sorted.
std::vector<std::string> fd_targets(pid_t p) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::directory_iterator("/proc/" + std::to_string(p) + "/fd", ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code rec;
    auto target = fs::read_symlink(it->path(), rec);
    out.push_back(rec ? "?" : target.string());
  }
  std::sort(out.begin(), out.end());
  return out;
}
size_t fds_of(pid_t p) { return fd_targets(p).size(); }

// Those in `now` and not in `then` (multisets), one per line.
std::string added(const std::vector<std::string>& then, const std::vector<std::string>& now) {
  std::vector<std::string> diff;
  std::set_difference(now.begin(), now.end(), then.begin(), then.end(), std::back_inserter(diff));
  std::string out;
  for (const auto& d : diff) out += "  " + d + "\n";
  return out;
}

// The value of an unlabelled (or first) sample of `metric` in a scrape, -1 when absent.
double metric(const std::string& text, const std::string& name) {
  for (size_t at = text.find("\n" + name); at != std::string::npos; at = text.find("\n" + name, at + 1)) {
    size_t sp = text.find(' ', at + 1 + name.size());
    char next = text[at + 1 + name.size()];
    if (sp == std::string::npos || (next != ' ' && next != '{')) continue;
    return std::stod(text.substr(sp + 1));
  }
  return -1;
}

// The cgroup ids keyed in keel's per-cgroup BPF map (cg_stats, as bpftool dumps it with its BTF), or
// nullopt with bpftool's output when it cannot be read.
std::optional<std::vector<uint64_t>> map_cgroup_ids(std::string* why) {
  auto [rc, out] = testing::run_command("bpftool -j map dump name cg_stats");
  if (rc != 0) {
    *why = out;
    return std::nullopt;
  }
  std::vector<uint64_t> ids;
  const std::string key = "\"cgroup_id\":";
  for (size_t at = out.find(key); at != std::string::npos; at = out.find(key, at + 1))
    ids.push_back(std::stoull(out.substr(at + key.size())));
  return ids;
}

// The critical workload in a scene of its own (a directory on v1, a service on v2) and the churning
// cgroups in a subtree made by hand (on v2 a Delegate=yes scope: tests/support/scene.h): be/noise and
// be/w* best-effort instances, u/u* matched by nothing.
class Churn : public ::testing::Test {
 protected:
  void SetUp() override {
    KEEL_REQUIRE_ROOT();
    if (::sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "skipped: needs 2 CPUs";
    if (!fs::exists("/usr/bin/stress-ng")) GTEST_SKIP() << "skipped: stress-ng is not installed";
    std::string why;
    if (!testing::host_layout(&why)) GTEST_SKIP() << "skipped: " << why;
    const std::string name = "keel-churn-" + std::to_string(::getpid());
    scene_ =
        std::make_unique<testing::Scene>(name, std::vector<testing::Scene::Leaf>{{"crit", true, false, {}}});
    ASSERT_EQ(scene_->error(), "");
    tree_ = std::make_unique<testing::DelegatedTree>(name + "-tree");
    ASSERT_EQ(tree_->error(), "");
    for (const char* d : {"be", "be/noise"}) ASSERT_TRUE(make(d)) << d;
  }
  void TearDown() override {
    if (keel_ > 0) {
      ::kill(keel_, SIGKILL);
      ::waitpid(keel_, nullptr, 0);
      (void)testing::run_command(testing::keel_binary().string() + " restore --state " +
                                 (t_.path() / "state").string());
    }
    for (pid_t p : pids_) kill_wait(p);
    tree_.reset();
    scene_.reset();
  }
  static void kill_wait(pid_t p) {
    ::kill(p, SIGKILL);
    ::waitpid(p, nullptr, 0);
  }
  // A cgroup at `rel` below the tree (its cpuset given its parent's CPUs and memory nodes, which a v1
  // cpuset needs before it holds a task; keel may be narrowing the parent meanwhile: retried).
  bool make(const std::string& rel) { return tree_->make(rel); }
  void remove(const std::string& rel) { tree_->remove(rel); }
  // A child in `rel` of the tree running `body`.
  pid_t child(const std::string& rel, const std::function<void()>& body) {
    pid_t p = ::fork();
    if (p == 0) {
      if (!tree_->move(::getpid(), rel)) ::_exit(3);
      body();
      ::_exit(0);
    }
    return p;
  }
  // Runs 1 ms, sleeps 4 ms, forever: a task the sensor sees wait and run.
  static void busy_sleep() {
    for (;;) {
      auto t = std::chrono::steady_clock::now();
      while (std::chrono::steady_clock::now() - t < 1ms) {
      }
      std::this_thread::sleep_for(4ms);
    }
  }
  std::string scrape() { return testing::http_get(port_, "/metrics").body; }

  testing::TempDir t_;
  std::unique_ptr<testing::Scene> scene_;
  std::unique_ptr<testing::DelegatedTree> tree_;
  std::vector<pid_t> pids_;
  pid_t keel_ = -1;
  uint16_t port_ = 0;
};

TEST_F(Churn, AThousandCgroupsComeAndGoAndKeelKeepsNothingOfThem) {
  // The critical waker and two hogs of best-effort noise beside it.
  pids_.push_back(scene_->spawn("crit", busy_sleep));
  ASSERT_GT(pids_.back(), 0) << scene_->error();
  pids_.push_back(child("be/noise", [] {
    ::execl("/usr/bin/stress-ng", "stress-ng", "--cpu", "2", "--quiet", static_cast<char*>(nullptr));
  }));
  port_ = testing::free_port();
  const fs::path cfg = t_.path() / "keel.toml";
  std::ofstream(cfg) << "[daemon]\nmode = \"enforce\"\nperiod = \"100ms\"\nstate_dir = \""
                     << (t_.path() / "state").string() << "\"\nhierarchy = \"" << scene_->hierarchy()
                     << "\"\nmetrics_listen = \"127.0.0.1:" << port_
                     << "\"\n\n[[workload]]\nname = \"crit\"\nmatch = { cgroup = \"" << scene_->path("crit")
                     << "\" }\nclass = \"critical\"\nslo = { runqueue_p99 = \"300us\" }\n\n"
                     << "[[workload]]\nname = \"be\"\nmatch = { cgroup = \"" << tree_->path()
                     << "/be/*\", each = true }\nclass = \"best-effort\"\n";
  const fs::path log = t_.path() / "keel.log";
  keel_ = ::fork();
  if (keel_ == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    const std::string bin = testing::keel_binary().string();
    ::execl(bin.c_str(), bin.c_str(), "run", "--config", cfg.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Settled: ticking, the critical workload sensed; then the baseline of what keel holds.
  bool up = false;
  for (int i = 0; i < 300 && !up; ++i) {
    std::this_thread::sleep_for(100ms);
    up = metric(scrape(), "keel_ticks_total") >= 20;
  }
  ASSERT_TRUE(up) << slurp(log);
  // The parent of the unmatched cgroups is made before the baseline: it stays, and keel may hold it.
  ASSERT_TRUE(make("u"));
  std::this_thread::sleep_for(300ms);
  const std::vector<std::string> held_before = fd_targets(keel_);
  const size_t fds_before = held_before.size();
  const double entries_before = metric(scrape(), "keel_bpf_map_entries");
  std::printf("before: %zu fds, %.0f map entries\n", fds_before, entries_before);

  // 1,000 cgroups in 50 rounds of 20 alive at once (be/w*: a workload each; u/u*: matched by nothing),
  // each with a task that runs.
  constexpr int kRounds = 50, kPerRound = 20;
  size_t fds_peak = 0;
  double entries_peak = 0;
  std::vector<uint64_t> churned;  // their ids (inodes), as keel's map keys them
  size_t in_map_peak = 0;         // of one round's, the most in keel's map at once
  auto in_map = [&](const std::vector<uint64_t>& ids, std::string* why) -> std::optional<size_t> {
    auto keys = map_cgroup_ids(why);
    if (!keys) return std::nullopt;
    return std::count_if(keys->begin(), keys->end(),
                         [&](uint64_t k) { return std::find(ids.begin(), ids.end(), k) != ids.end(); });
  };
  for (int round = 0; round < kRounds; ++round) {
    std::vector<std::pair<std::string, pid_t>> alive;
    std::vector<uint64_t> ids;
    for (int i = 0; i < kPerRound; ++i) {
      const int n = round * kPerRound + i;
      const std::string rel = (i % 2 == 0 ? "be/w" : "u/u") + std::to_string(n);
      ASSERT_TRUE(make(rel)) << rel;
      ids.push_back(testing::inode_of(tree_->dir("cpu") / rel));
      alive.push_back({rel, child(rel, busy_sleep)});
    }
    churned.insert(churned.end(), ids.begin(), ids.end());
    // Three ticks (seen, matched, acted on), however long this machine takes for them.
    const double ticks0 = metric(scrape(), "keel_ticks_total");
    ASSERT_TRUE(testing::eventually([&] { return metric(scrape(), "keel_ticks_total") >= ticks0 + 3; }, 30s))
        << "keel stopped ticking:\n"
        << slurp(log);
    fds_peak = std::max(fds_peak, fds_of(keel_));
    entries_peak = std::max(entries_peak, metric(scrape(), "keel_bpf_map_entries"));
    if (round % 10 == 0) {
      std::string why;
      auto n = in_map(ids, &why);
      ASSERT_TRUE(n) << "bpftool: " << why;
      in_map_peak = std::max(in_map_peak, *n);
    }
    for (auto& [rel, pid] : alive) kill_wait(pid);
    for (auto& [rel, pid] : alive) remove(rel);
    ASSERT_EQ(::waitpid(keel_, nullptr, WNOHANG), 0) << "keel exited during the churn:\n" << slurp(log);
  }
  // Two pruning rounds (64 ticks each) after the last cgroup went: counted in ticks, not seconds, as
  // a slow build (ASan) ticks late.
  const double ticks_gone = metric(scrape(), "keel_ticks_total");
  for (int i = 0; i < 600 && metric(scrape(), "keel_ticks_total") < ticks_gone + 130; ++i)
    std::this_thread::sleep_for(100ms);
  ASSERT_EQ(::waitpid(keel_, nullptr, WNOHANG), 0) << "keel exited:\n" << slurp(log);
  const std::string after = scrape();
  const std::vector<std::string> held_after = fd_targets(keel_);
  const size_t fds_after = held_after.size();
  const double entries_after = metric(after, "keel_bpf_map_entries");
  std::printf(
      "during: up to %zu fds, %.0f map entries (up to %zu of one round's cgroups); after: %zu fds, %.0f "
      "map entries\n",
      fds_peak, entries_peak, in_map_peak, fds_after, entries_after);
  EXPECT_GT(fds_peak, fds_before) << "the churned cgroups were never held (the test saw nothing)";
  // No descriptor names a churned cgroup. What keel opened since the baseline for the cgroups that
  // stay (the cpusets of the workloads it escalated, a scrape's socket) is allowed, and bounded.
  const std::string opened = added(held_before, held_after);
  EXPECT_EQ(opened.find("/be/w"), std::string::npos) << "a gone cgroup is still held:\n" << opened;
  EXPECT_EQ(opened.find("/u/u"), std::string::npos) << "a gone cgroup is still held:\n" << opened;
  EXPECT_LE(fds_after, fds_before + 8) << "descriptors held since the baseline:\n" << opened;
  EXPECT_GT(entries_peak, entries_before) << "the churned cgroups were never measured";
  EXPECT_GT(in_map_peak, 0u) << "the churned cgroups were never in keel's map";
  // None of the churned cgroups' entries stays. (The total may have grown meanwhile: the host's own
  // cgroups that ran, systemd's units on the v2 guest, hold entries too.)
  std::string why;
  auto left = in_map(churned, &why);
  ASSERT_TRUE(left) << "bpftool: " << why;
  EXPECT_EQ(*left, 0u) << "BPF map entries of gone cgroups stay (" << entries_after << " entries, "
                       << entries_before << " before)";
  // The journal holds nothing of a churned cgroup (they were put in the class, so they were there).
  const std::string text = slurp(log);
  EXPECT_NE(text.find("/be/w"), std::string::npos) << "keel never acted on a churned workload:\n" << text;
  auto journal = act::parse_journal(slurp(t_.path() / "state/journal"));
  ASSERT_TRUE(journal) << journal.error().message();
  for (const auto& e : journal->entries) {
    const std::string p = e.path.rel.string();
    EXPECT_EQ(p.find("/be/w"), std::string::npos) << "journal entry of a gone cgroup: " << p;
    EXPECT_EQ(p.find("/u/u"), std::string::npos) << "journal entry of a gone cgroup: " << p;
  }
  std::printf("journal: %zu entries, %zu records\n", journal->entries.size(), journal->records);
  // No error line about the churn (a cgroup that went between read and write is not an error).
  std::string errors;
  for (size_t at = text.find("error:"); at != std::string::npos; at = text.find("error:", at + 1)) {
    size_t from = text.rfind('\n', at), to = text.find('\n', at);
    from = from == std::string::npos ? 0 : from + 1;
    errors += text.substr(from, to == std::string::npos ? std::string::npos : to - from + 1);
  }
  EXPECT_EQ(errors, "");
  // A clean stop gives everything back.
  ::kill(keel_, SIGTERM);
  int st = 0;
  ::waitpid(keel_, &st, 0);
  keel_ = -1;
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << slurp(log).substr(0, 20000);
  EXPECT_FALSE(fs::exists(t_.path() / "state/journal"));
}

}  // namespace
}  // namespace keel
