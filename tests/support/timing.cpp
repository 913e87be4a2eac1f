#include "tests/support/timing.h"

#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <thread>
#include <vector>

#include "tests/support/tmp_tree.h"

namespace keel::testing {
namespace {

uint64_t field_of_status(const std::string& status, const std::string& name) {
  std::istringstream in(status);
  for (std::string line; std::getline(in, line);)
    if (line.starts_with(name + ":")) return std::stoull(line.substr(name.size() + 1));
  return 0;
}

// /proc/PID/stat's fields from the third on (after the command's closing parenthesis).
std::vector<std::string> stat_fields(pid_t pid) {
  const std::string s = slurp("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = s.rfind(')');
  std::vector<std::string> out;
  if (close == std::string::npos) return out;
  std::istringstream in(s.substr(close + 1));
  for (std::string f; in >> f;) out.push_back(f);
  return out;
}

// /proc/stat's columns 6-8 (irq, softirq, steal) of "cpuN" or "cpu", in jiffies.
struct StatColumns {
  uint64_t irq = 0, softirq = 0, steal = 0;
};
StatColumns stat_columns(int cpu) {
  std::istringstream in(slurp("/proc/stat"));
  const std::string want = cpu < 0 ? "cpu" : "cpu" + std::to_string(cpu);
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string name;
    uint64_t user, nice, system, idle, iowait;
    StatColumns c;
    if (f >> name >> user >> nice >> system >> idle >> iowait >> c.irq >> c.softirq >> c.steal &&
        name == want)
      return c;
  }
  return {};
}
double jiffies_ns(uint64_t j) {
  return static_cast<double>(j) * 1e9 / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double quantile(std::vector<uint32_t>& v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(static_cast<double>(v.size()) * q))] / 1e3;
}

}  // namespace

uint64_t now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(t.tv_nsec);
}

TaskCounts TaskCounts::since(const TaskCounts& e) const {
  TaskCounts d;
  d.voluntary = voluntary - e.voluntary;
  d.involuntary = involuntary - e.involuntary;
  d.minflt = minflt - e.minflt;
  d.migrations = migrations - e.migrations;
  d.run_ns = run_ns - e.run_ns;
  d.wait_ns = wait_ns - e.wait_ns;
  d.slices = slices - e.slices;
  return d;
}

double TaskCounts::mean_wait_us() const {
  return slices > 0 ? static_cast<double>(wait_ns) / 1e3 / static_cast<double>(slices) : 0;
}

TaskCounts task_counts(pid_t pid) {
  TaskCounts c;
  const std::string dir = "/proc/" + std::to_string(pid);
  const std::string status = slurp(dir + "/status");
  c.voluntary = field_of_status(status, "voluntary_ctxt_switches");
  c.involuntary = field_of_status(status, "nonvoluntary_ctxt_switches");
  const auto f = stat_fields(pid);
  if (f.size() > 7) c.minflt = std::stoull(f[7]);  // field 10 of /proc/PID/stat
  std::istringstream in(slurp(dir + "/schedstat"));
  in >> c.run_ns >> c.wait_ns >> c.slices;
  std::istringstream sched(slurp(dir + "/sched"));
  for (std::string line; std::getline(sched, line);)
    if (line.starts_with("se.nr_migrations")) c.migrations = std::stoull(line.substr(line.find(':') + 1));
  return c;
}

char task_state(pid_t pid) {
  const auto f = stat_fields(pid);
  return f.empty() || f[0].empty() ? 0 : f[0][0];
}

bool wait_state(pid_t pid, char state) {
  return eventually([&] { return task_state(pid) == state; }, std::chrono::seconds(5),
                    std::chrono::milliseconds(2));
}

double not_tasks_ns(int cpu) {
  const StatColumns c = stat_columns(cpu);
  return jiffies_ns(c.irq + c.softirq + c.steal);
}

double steal_ns(int cpu) { return jiffies_ns(stat_columns(cpu).steal); }

bool eventually(const std::function<bool()>& cond, std::chrono::milliseconds limit,
                std::chrono::milliseconds every) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(every);
  }
  return cond();
}

std::string WakeFloor::str() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "p50 %.0f us, p99 %.0f us, mean wait %.1f us over %zu wake-ups", p50_us,
                p99_us, wait_us, wakes);
  return buf;
}

WakeFloor wake_floor(int cpu, std::chrono::microseconds period, std::chrono::milliseconds span) {
  // One lateness per wake-up, in memory the child shares; a count of 0 means it did not start.
  struct Shared {
    uint64_t n;
    uint32_t late_ns[1 << 16];
  };
  auto* log = static_cast<Shared*>(
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (log == MAP_FAILED) return {};
  log->n = 0;
  const uint64_t period_ns = static_cast<uint64_t>(period.count()) * 1000;
  const uint64_t span_ns = static_cast<uint64_t>(span.count()) * 1'000'000;
  const pid_t child = fork();
  if (child == 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
    ::prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    const uint64_t end = now_ns() + span_ns;
    uint64_t n = 0;
    while (now_ns() < end && n < std::size(log->late_ns)) {
      const uint64_t t0 = now_ns();
      timespec ts{static_cast<time_t>(period_ns / 1'000'000'000),
                  static_cast<long>(period_ns % 1'000'000'000)};
      nanosleep(&ts, nullptr);
      const uint64_t late = now_ns() - t0 - period_ns;
      log->late_ns[n++] = static_cast<uint32_t>(std::min<uint64_t>(late, UINT32_MAX));
    }
    __atomic_store_n(&log->n, n, __ATOMIC_RELEASE);
    _exit(0);
  }
  WakeFloor f;
  if (child > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const TaskCounts c0 = task_counts(child);
    int st = 0;
    // The child's counts just before it exits: its schedstat goes with it.
    TaskCounts c1 = c0;
    while (::waitpid(child, &st, WNOHANG) == 0) {
      const TaskCounts now = task_counts(child);
      if (now.slices >= c1.slices) c1 = now;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::vector<uint32_t> late(log->late_ns, log->late_ns + __atomic_load_n(&log->n, __ATOMIC_ACQUIRE));
    f.wakes = late.size();
    f.p50_us = quantile(late, 0.5);
    f.p99_us = quantile(late, 0.99);
    f.wait_us = c1.since(c0).mean_wait_us();
  }
  munmap(log, sizeof(Shared));
  return f;
}

double switch_cost_ns(int cpu, int rounds) {
  int ping[2], pong[2], out[2];
  if (pipe(ping) != 0) return 0;
  if (pipe(pong) != 0 || pipe(out) != 0) return 0;
  auto pin = [cpu] {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
  };
  const pid_t echo = fork();
  if (echo == 0) {
    pin();
    char c;
    for (int i = 0; i < rounds; ++i)
      if (read(ping[0], &c, 1) != 1 || write(pong[1], &c, 1) != 1) _exit(1);
    _exit(0);
  }
  const pid_t timer = fork();
  if (timer == 0) {
    pin();
    char c = 'x';
    const uint64_t t0 = now_ns();
    for (int i = 0; i < rounds; ++i)
      if (write(ping[1], &c, 1) != 1 || read(pong[0], &c, 1) != 1) _exit(1);
    const uint64_t took = now_ns() - t0;
    (void)!write(out[1], &took, sizeof took);
    _exit(0);
  }
  for (int fd : {ping[0], ping[1], pong[0], pong[1], out[1]}) close(fd);
  uint64_t took = 0;
  const bool got = read(out[0], &took, sizeof took) == sizeof took;
  close(out[0]);
  for (pid_t p : {echo, timer})
    if (p > 0) ::waitpid(p, nullptr, 0);
  return got ? static_cast<double>(took) / (2.0 * rounds) : 0;
}

double bound_above_floor(double base_us, double floor_us, double factor) {
  return std::max(base_us, factor * floor_us);
}

}  // namespace keel::testing
