// What one keel tick costs as the host's cgroups grow: N cgroups, each holding one task, a tenth of
// them waking every 10 ms (the rest asleep), all matched by a config in observe mode with a 1 s
// period (each cgroup its own best-effort instance, one critical with an SLO it meets, so the tick is
// sensing and deciding, not logging actions). For every N and every keel binary
// given, keel runs against the same cgroups; the table has its mean tick (keel_tick_duration_seconds),
// the CPU it used per tick and per second (utime + stime over the window), and its resident memory,
// with ratios against the first binary (the baseline) measured in the same run. Needs root.
//
//   build/bench/keel_tick_bench [--n 10,100,1000,10000] [--seconds 15] [--wake-every 10]
//                               [--keel NAME=PATH ...] [--logs DIR]
//
// --wake-every K: one task in K wakes (default 10, 0 none): with none, the tick's wall time is its
// own, not stretched by the wakers it shares 2 CPUs with.
//
// Without --keel it measures build/cli/keel. Everything it creates (cgroups in every v1 hierarchy
// keel reads, or the unified one; the tasks; a state directory) goes when it ends, also on Ctrl-C.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "host/cgroup.h"
#include "host/fileio.h"
#include "host/sys_roots.h"
#include "tests/support/http.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

// One cgroup's task in this many wakes every 10 ms (--wake-every; 0: none wakes).
size_t g_wake_every = 10;

struct Binary {
  std::string name;
  std::string path;
};

struct Sample {
  double ticks = 0, tick_sum = 0, tick_count = 0;
  double cpu_s = 0;
};

struct Result {
  size_t n = 0;
  std::string binary;
  double tick_ms = 0;  // mean keel_tick_duration_seconds over the window
  double cpu_ms_per_tick = 0;
  double cpu_share = 0;  // of one core
  double rss_mib = 0, hwm_mib = 0;
  double ticks = 0;
  bool ok = false;
  std::string why;
};

bool write_text(const fs::path& p, const std::string& v) {
  int fd = ::open(p.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::write(fd, v.data(), v.size()) == static_cast<ssize_t>(v.size());
  ::close(fd);
  return ok;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The directories the bench cgroups go in: every v1 hierarchy keel reads (cpu, cpuacct, cpuset), or
// the unified one when it has the cpu controller.
std::vector<keel::CgroupHierarchy> hierarchies() {
  auto layout = keel::discover(keel::SysRoots::host());
  if (!layout) {
    std::fprintf(stderr, "tick_bench: %s\n", layout.error().message().c_str());
    std::exit(1);
  }
  std::vector<keel::CgroupHierarchy> out;
  if (const auto* u = layout->unified(); u && u->has("cpu")) return {*u};
  for (const char* c : {"cpu", "cpuacct", "cpuset"})
    if (const auto* h = layout->v1_with(c))
      if (std::none_of(out.begin(), out.end(), [&](const auto& o) { return o.id == h->id; }))
        out.push_back(*h);
  return out;
}

// N cgroups under /keel-tick-bench-PID in each hierarchy, one task each.
class Fleet {
 public:
  Fleet(std::vector<keel::CgroupHierarchy> hs, std::string top) : hs_(std::move(hs)), top_(std::move(top)) {
    for (const auto& h : hs_) {
      fs::path dir = h.mount / top_.substr(1);
      ::mkdir(dir.c_str(), 0755);
      if (!h.unified && h.has("cpuset")) copy_cpuset(h.mount, dir);
    }
  }
  ~Fleet() {
    shrink(0);
    for (const auto& h : hs_) ::rmdir((h.mount / top_.substr(1)).c_str());
  }

  // Adds or removes cgroups (and their tasks) until there are n.
  bool resize(size_t n) {
    if (n < pids_.size()) {
      shrink(n);
      return true;
    }
    int ready[2];
    if (::pipe2(ready, O_CLOEXEC) != 0) return false;
    size_t want = n - pids_.size();
    for (size_t i = pids_.size(); i < n; ++i) {
      for (const auto& h : hs_) {
        fs::path dir = cgroup(h, i);
        ::mkdir(dir.c_str(), 0755);
        if (!h.unified && h.has("cpuset")) copy_cpuset(h.mount / top_.substr(1), dir);
      }
      pid_t pid = ::fork();
      if (pid == 0) child(i, ready[1]);
      if (pid < 0) {
        std::perror("fork");
        break;
      }
      pids_.push_back(pid);
    }
    ::close(ready[1]);
    size_t got = 0;
    char b;
    while (got < want && ::read(ready[0], &b, 1) == 1) ++got;
    ::close(ready[0]);
    return got == want;
  }

 private:
  fs::path cgroup(const keel::CgroupHierarchy& h, size_t i) const {
    return h.mount / top_.substr(1) / ("c" + std::to_string(i));
  }

  static void copy_cpuset(const fs::path& from, const fs::path& to) {
    for (const char* f : {"cpuset.cpus", "cpuset.mems"}) write_text(to / f, slurp(from / f));
  }

  [[noreturn]] void child(size_t i, int ready) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    for (const auto& h : hs_)
      if (!write_text(cgroup(h, i) / "cgroup.procs", "0")) ::_exit(1);
    (void)!::write(ready, "x", 1);
    ::close(ready);
    if (g_wake_every > 0 && i % g_wake_every == 0) {
      for (;;) ::usleep(10000);  // one in g_wake_every wakes every 10 ms
    }
    for (;;) ::pause();
  }

  void shrink(size_t n) {
    for (size_t i = n; i < pids_.size(); ++i) ::kill(pids_[i], SIGKILL);
    for (size_t i = n; i < pids_.size(); ++i) ::waitpid(pids_[i], nullptr, 0);
    for (size_t i = n; i < pids_.size(); ++i)
      for (const auto& h : hs_)
        for (int tries = 0; ::rmdir(cgroup(h, i).c_str()) != 0 && errno == EBUSY && tries < 100; ++tries)
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
    pids_.resize(std::min(n, pids_.size()));
  }

  std::vector<keel::CgroupHierarchy> hs_;
  std::string top_;
  std::vector<pid_t> pids_;
};

std::optional<double> metric(const std::string& text, const std::string& name) {
  size_t at = 0;
  while ((at = text.find(name, at)) != std::string::npos) {
    bool line_start = at == 0 || text[at - 1] == '\n';
    size_t end = at + name.size();
    if (line_start && end < text.size() && text[end] == ' ')
      return std::strtod(text.c_str() + end + 1, nullptr);
    at = end;
  }
  return std::nullopt;
}

double process_cpu_s(pid_t pid) {
  std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream in(stat.substr(close + 2));
  std::string f;
  std::vector<std::string> fields;
  while (in >> f) fields.push_back(f);
  if (fields.size() < 13) return 0;  // fields[0] is field 3 (state); utime 14, stime 15
  return (std::stod(fields[11]) + std::stod(fields[12])) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

double status_kib(pid_t pid, const char* key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.starts_with(key)) return std::strtod(line.c_str() + std::strlen(key), nullptr);
  return 0;
}

// A scrape costs keel CPU time too (rendering every series): the window's CPU is read after the first
// scrape and before the last, so it counts the ticks and not the bench's own scrapes.
std::optional<Sample> sample(uint16_t port, pid_t pid, bool cpu_first) {
  Sample s;
  if (cpu_first) s.cpu_s = process_cpu_s(pid);
  auto r = keel::testing::http_get(port, "/metrics");
  if (r.status != 200) return std::nullopt;
  auto ticks = metric(r.body, "keel_ticks_total");
  auto sum = metric(r.body, "keel_tick_duration_seconds_sum");
  auto count = metric(r.body, "keel_tick_duration_seconds_count");
  if (!ticks || !sum || !count) return std::nullopt;
  s.ticks = *ticks;
  s.tick_sum = *sum;
  s.tick_count = *count;
  if (!cpu_first) s.cpu_s = process_cpu_s(pid);
  return s;
}

std::string config(const std::string& top, uint16_t port, const fs::path& state) {
  return "[daemon]\nmode = \"observe\"\nperiod = \"1s\"\nstate_dir = \"" + state.string() +
         "\"\nmetrics_listen = \"127.0.0.1:" + std::to_string(port) +
         "\"\n\n[[workload]]\nname = \"crit\"\nmatch = { cgroup = \"" + top +
         "/c0\" }\nclass = \"critical\"\nslo = { runqueue_p99 = \"50ms\" }\n\n[[workload]]\nname = "
         "\"bench\"\n"
         "match = { cgroup = \"" +
         top + "/*\", has_tasks = true, each = true }\nclass = \"best-effort\"\n";
}

Result measure(const Binary& bin, size_t n, const std::string& top, double seconds, const fs::path& tmp) {
  Result res;
  res.n = n;
  res.binary = bin.name;
  uint16_t port = keel::testing::free_port();
  fs::path cfg = tmp / "keel.toml", log = tmp / (bin.name + "-" + std::to_string(n) + ".log");
  std::ofstream(cfg) << config(top, port, tmp / "state");
  pid_t pid = ::fork();
  if (pid == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) ::dup2(fd, 2), ::dup2(fd, 1);
    ::execl(bin.path.c_str(), bin.path.c_str(), "run", "--config", cfg.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  auto stop = [&] {
    ::kill(pid, SIGTERM);
    for (int i = 0; i < 300; ++i) {
      if (::waitpid(pid, nullptr, WNOHANG) == pid) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  };
  // Two ticks to warm up (the first sees every cgroup new), then the window.
  std::optional<Sample> a;
  auto deadline = Clock::now() + std::chrono::seconds(60);
  while (!g_stop && Clock::now() < deadline) {
    a = sample(port, pid, false);
    if (a && a->ticks >= 2) break;
    a.reset();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  if (!a) {
    stop();
    res.why = "no metrics within 60 s (see " + log.string() + ")";
    return res;
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  auto b = sample(port, pid, true);
  res.rss_mib = status_kib(pid, "VmRSS:") / 1024;
  res.hwm_mib = status_kib(pid, "VmHWM:") / 1024;
  stop();
  if (!b || b->tick_count <= a->tick_count) {
    res.why = "no tick finished in the window";
    return res;
  }
  double ticks = b->tick_count - a->tick_count;
  res.ticks = ticks;
  res.tick_ms = (b->tick_sum - a->tick_sum) / ticks * 1e3;
  res.cpu_ms_per_tick = (b->cpu_s - a->cpu_s) / ticks * 1e3;
  res.cpu_share = (b->cpu_s - a->cpu_s) / seconds;
  res.ok = true;
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> ns = {10, 100, 1000, 10000};
  double seconds = 15;
  std::vector<Binary> bins;
  std::optional<fs::path> logs;  // keep keel's logs there
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--n" && i + 1 < argc) {
      ns.clear();
      std::stringstream s(argv[++i]);
      for (std::string v; std::getline(s, v, ',');) ns.push_back(std::stoul(v));
    } else if (a == "--logs" && i + 1 < argc) {
      logs = argv[++i];
    } else if (a == "--wake-every" && i + 1 < argc) {
      g_wake_every = std::stoul(argv[++i]);
    } else if (a == "--seconds" && i + 1 < argc) {
      seconds = std::stod(argv[++i]);
    } else if (a == "--keel" && i + 1 < argc) {
      std::string v = argv[++i];
      size_t eq = v.find('=');
      bins.push_back(eq == std::string::npos ? Binary{v, v} : Binary{v.substr(0, eq), v.substr(eq + 1)});
    } else {
      std::fprintf(
          stderr, "usage: %s [--n 10,100,1000,10000] [--seconds S] [--wake-every K] [--keel NAME=PATH ...]\n",
          argv[0]);
      return 2;
    }
  }
  if (bins.empty()) bins.push_back({"keel", KEEL_BINARY_DIR "/cli/keel"});
  if (::geteuid() != 0) {
    std::fprintf(stderr, "tick_bench: needs root (keel run loads BPF; the bench makes cgroups)\n");
    return 1;
  }
  ::signal(SIGINT, on_signal);
  ::signal(SIGTERM, on_signal);
  std::sort(ns.begin(), ns.end());
  const std::string top = "/keel-tick-bench-" + std::to_string(::getpid());
  fs::path tmp = fs::temp_directory_path() / ("keel-tick-bench-" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  std::vector<Result> results;
  {
    Fleet fleet(hierarchies(), top);
    for (size_t n : ns) {
      if (g_stop) break;
      auto t0 = Clock::now();
      if (!fleet.resize(n)) {
        std::fprintf(stderr, "tick_bench: could not place %zu tasks\n", n);
        break;
      }
      std::fprintf(stderr, "tick_bench: %zu cgroups ready in %.1f s\n", n,
                   std::chrono::duration<double>(Clock::now() - t0).count());
      for (const auto& b : bins) {
        if (g_stop) break;
        results.push_back(measure(b, n, top, seconds, tmp));
        const Result& r = results.back();
        if (r.ok)
          std::fprintf(stderr, "tick_bench: %s n=%zu: %.2f ms/tick, %.2f%% of a core, RSS %.1f MiB\n",
                       b.name.c_str(), n, r.tick_ms, r.cpu_share * 100, r.rss_mib);
        else
          std::fprintf(stderr, "tick_bench: %s n=%zu: %s\n", b.name.c_str(), n, r.why.c_str());
      }
    }
  }
  std::printf(
      "\n| cgroups | keel | tick ms | us per cgroup | CPU ms per tick | CPU %% of a core | RSS MiB | peak "
      "RSS MiB | tick vs %s |\n",
      bins.front().name.c_str());
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& r : results) {
    if (!r.ok) {
      std::printf("| %zu | %s | %s | | | | | | |\n", r.n, r.binary.c_str(), r.why.c_str());
      continue;
    }
    const Result* base = nullptr;
    for (const auto& o : results)
      if (o.n == r.n && o.binary == bins.front().name && o.ok) base = &o;
    char ratio[32] = "-";
    if (base && base != &r) std::snprintf(ratio, sizeof ratio, "%.3fx", r.tick_ms / base->tick_ms);
    std::printf("| %zu | %s | %.2f | %.1f | %.2f | %.2f | %.1f | %.1f | %s |\n", r.n, r.binary.c_str(),
                r.tick_ms, r.tick_ms * 1e3 / static_cast<double>(r.n), r.cpu_ms_per_tick, r.cpu_share * 100,
                r.rss_mib, r.hwm_mib, ratio);
  }
  std::printf(
      "(%.0f s windows after 2 warm-up ticks; observe mode, 1 s period; one cgroup's task in %zu wakes "
      "every 10 ms (0: none); %u CPUs)\n",
      seconds, g_wake_every, std::thread::hardware_concurrency());
  if (logs) {
    fs::create_directories(*logs);
    for (const auto& e : fs::directory_iterator(tmp))
      if (e.path().extension() == ".log")
        fs::copy_file(e.path(), *logs / e.path().filename(), fs::copy_options::overwrite_existing);
  }
  fs::remove_all(tmp);
  return 0;
}
