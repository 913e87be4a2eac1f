#include "tests/support/scene.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/support/tmp_tree.h"

namespace keel::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string trimmed(const std::string& s) {
  size_t b = s.find_first_not_of(" \n\t"), e = s.find_last_not_of(" \n\t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}
std::string read_trimmed(const fs::path& p) { return trimmed(slurp(p)); }
bool write(const fs::path& p, const std::string& v) {
  std::ofstream out(p);
  out << v << std::flush;
  return static_cast<bool>(out);
}
std::string all_cpus() { return "0-" + std::to_string(::sysconf(_SC_NPROCESSORS_ONLN) - 1); }
// AllowedCPUs as busctl's byte array: every online CPU.
std::string all_cpus_bytes() {
  const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  std::vector<unsigned> bytes(static_cast<size_t>((n + 7) / 8), 0);
  for (long c = 0; c < n; ++c) bytes[static_cast<size_t>(c / 8)] |= 1u << (c % 8);
  std::string out = "AllowedCPUs ay " + std::to_string(bytes.size());
  for (unsigned b : bytes) out += " " + std::to_string(b);
  return out;
}

// The mount of the v1 hierarchy with `controller` ("" when none), from /proc/self/mountinfo.
fs::path v1_mount(const std::string& controller) {
  std::istringstream in(slurp("/proc/self/mountinfo"));
  for (std::string line; std::getline(in, line);) {
    size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream rest(line.substr(dash + 3));
    std::string type, source, options;
    rest >> type >> source >> options;
    if (type != "cgroup") continue;
    std::istringstream head(line.substr(0, dash));
    std::string id, parent, dev, root, point;
    head >> id >> parent >> dev >> root >> point;
    if (root != "/") continue;
    std::istringstream opts(options);
    for (std::string o; std::getline(opts, o, ',');)
      if (o == controller) return point;
  }
  return {};
}

bool systemd_runs() { return fs::exists("/run/systemd/system") && read_trimmed("/proc/1/comm") == "systemd"; }

std::string busctl(const std::string& args) {
  auto [rc, out] = run_command(
      "busctl call org.freedesktop.systemd1 /org/freedesktop/systemd1 "
      "org.freedesktop.systemd1.Manager " +
      args);
  return rc == 0 ? "" : "busctl " + args + ": " + out;
}

// Waits until `pid` is in the cgroup of `unit` (systemd moves it when the start job runs).
std::string wait_in_unit(pid_t pid, const std::string& unit) {
  for (int i = 0; i < 300; ++i) {
    std::string cg = cgroup_of(pid);
    if (cg.size() > unit.size() && cg.ends_with("/" + unit)) return "";
    std::this_thread::sleep_for(10ms);
  }
  return "pid " + std::to_string(pid) + " did not arrive in " + unit + " (it is in " + cgroup_of(pid) + ")";
}

pid_t park() {
  pid_t p = ::fork();
  if (p == 0) {
    ::setpgid(0, 0);
    for (;;) ::pause();
  }
  return p;
}
void kill_wait(pid_t p) {
  if (p <= 0) return;
  ::kill(-p, SIGKILL);
  ::kill(p, SIGKILL);
  ::waitpid(p, nullptr, 0);
}

// Kills what is in `dir` (a cgroup: its cgroup.procs) until it is empty, then removes it.
void empty_and_remove(const fs::path& dir) {
  for (int i = 0; i < 200 && fs::exists(dir); ++i) {
    std::istringstream procs(slurp(dir / "cgroup.procs"));
    for (std::string pid; std::getline(procs, pid);)
      if (!pid.empty()) ::kill(std::stoi(pid), SIGKILL);
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return;
    std::this_thread::sleep_for(10ms);
  }
}

// Whether `n` is PREFIX<pid>SUFFIX of a process that is gone (a test killed before its destructor ran).
bool of_gone_process(const std::string& n, const std::string& prefix, const std::string& suffix) {
  if (!n.starts_with(prefix) || !n.ends_with(suffix) || n.size() <= prefix.size() + suffix.size() ||
      n.size() > prefix.size() + suffix.size() + 9)
    return false;
  const std::string pid = n.substr(prefix.size(), n.size() - prefix.size() - suffix.size());
  if (!std::all_of(pid.begin(), pid.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
  return ::kill(static_cast<pid_t>(std::stol(pid)), 0) != 0 && errno == ESRCH;
}

// v1: the NAME-PID trees of a gone process in `mount`, every cgroup in them emptied and removed,
// deepest first.
void remove_stale_trees(const fs::path& mount, const std::string& name) {
  const size_t dash = name.rfind('-');
  if (dash == std::string::npos) return;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(mount, ec)) {
    if (e.path().filename() == name || !of_gone_process(e.path().filename(), name.substr(0, dash + 1), "") ||
        !e.is_directory(ec))
      continue;
    std::vector<fs::path> dirs = {e.path()};
    for (const auto& d : fs::recursive_directory_iterator(e.path(), ec))
      if (d.is_directory(ec)) dirs.push_back(d.path());
    std::sort(dirs.begin(), dirs.end(), [](const fs::path& a, const fs::path& b) {
      return std::distance(a.begin(), a.end()) > std::distance(b.begin(), b.end());
    });
    for (const auto& d : dirs) empty_and_remove(d);
  }
}

}  // namespace

const char* to_string(Layout layout) {
  return layout == Layout::v1 ? "cgroup v1" : "cgroup v2 under systemd";
}

std::optional<Layout> host_layout(std::string* why) {
  if (!v1_mount("cpu").empty() && !v1_mount("cpuacct").empty() && !v1_mount("cpuset").empty())
    return Layout::v1;
  const std::string controllers = slurp("/sys/fs/cgroup/cgroup.controllers");
  const bool v2 =
      controllers.find("cpu ") != std::string::npos && controllers.find("cpuset") != std::string::npos;
  if (v2 && systemd_runs()) return Layout::v2;
  if (why != nullptr)
    *why = v2 ? "cgroup v2 without systemd as PID 1 (the tests make their cgroups as systemd units there)"
              : "neither the cgroup v1 cpu, cpuacct and cpuset hierarchies nor cgroup v2 with cpu and cpuset";
  return std::nullopt;
}

bool emulated_cpus() {
  const char* accel = std::getenv("KEEL_VM_ACCEL");
  return accel != nullptr && std::string(accel) == "tcg";
}

namespace systemd {

std::string start_scope(const std::string& unit, const std::string& slice, const std::vector<pid_t>& pids,
                        const std::vector<std::string>& properties) {
  std::string pid_list = "PIDs au " + std::to_string(pids.size());
  for (pid_t p : pids) pid_list += " " + std::to_string(p);
  std::vector<std::string> props = {pid_list, "CollectMode s inactive-or-failed"};
  if (!slice.empty()) props.push_back("Slice s " + slice);
  props.insert(props.end(), properties.begin(), properties.end());
  std::string args =
      "StartTransientUnit 'ssa(sv)a(sa(sv))' " + unit + " fail " + std::to_string(props.size());
  for (const auto& p : props) args += " " + p;
  args += " 0";
  if (std::string e = busctl(args); !e.empty()) return e;
  for (pid_t p : pids)
    if (std::string e = wait_in_unit(p, unit); !e.empty()) return e;
  return "";
}

std::string start_service(const std::string& unit, const std::string& slice, const std::string& command,
                          const std::vector<std::string>& properties) {
  std::string cmd = "systemd-run --quiet --collect --unit=" + unit;
  if (!slice.empty()) cmd += " --slice=" + slice;
  for (const auto& p : properties) {
    // busctl triple -> systemd-run's NAME=VALUE (the forms Scene uses).
    std::istringstream words(p);
    std::string name, sig;
    words >> name >> sig;
    std::string value;
    if (name == "AllowedCPUs") {
      value = all_cpus();
    } else {
      std::getline(words, value);
      value = trimmed(value);
      if (sig == "b") value = value == "true" ? "yes" : "no";
    }
    cmd += " -p " + name + "=" + value;
  }
  auto [rc, out] = run_command(cmd + " " + command);
  if (rc != 0) return cmd + ": " + out;
  for (int i = 0; i < 300; ++i) {
    if (property(unit, "ActiveState") == "active" && !property(unit, "ControlGroup").empty()) return "";
    std::this_thread::sleep_for(10ms);
  }
  return unit + " did not become active: " + property(unit, "ActiveState");
}

std::string attach(const std::string& unit, pid_t pid) {
  if (std::string e = busctl("AttachProcessesToUnit ssau " + unit + " '' 1 " + std::to_string(pid));
      !e.empty())
    return e;
  return wait_in_unit(pid, unit);
}

void stop(const std::string& unit) {
  (void)run_command("systemctl stop " + unit + " >/dev/null 2>&1; systemctl reset-failed " + unit +
                    " >/dev/null 2>&1");
}

std::string property(const std::string& unit, const std::string& name) {
  auto [rc, out] = run_command("systemctl show -p " + name + " --value " + unit);
  return rc == 0 ? trimmed(out) : "";
}

}  // namespace systemd

std::string cgroup_of(pid_t pid, const char* controller) {
  std::istringstream in(slurp("/proc/" + std::to_string(pid) + "/cgroup"));
  std::string unified;
  for (std::string line; std::getline(in, line);) {
    size_t c1 = line.find(':'), c2 = line.find(':', c1 + 1);
    if (c1 == std::string::npos || c2 == std::string::npos) continue;
    std::string ctl = line.substr(c1 + 1, c2 - c1 - 1), path = line.substr(c2 + 1);
    if (ctl.empty()) unified = path;
    std::istringstream names(ctl);
    for (std::string n; std::getline(names, n, ',');)
      if (n == controller) return path;
  }
  return unified;
}

Parked::Parked() : pid(park()) {}
Parked::~Parked() { kill_wait(pid); }

// ---- Scene ----

Scene::Scene(const std::string& name, const std::vector<Leaf>& leaves, bool bare) : leaves_(leaves) {
  std::string why;
  auto layout = host_layout(&why);
  if (!layout) {
    error_ = why;
    return;
  }
  layout_ = *layout;
  if (layout_ == Layout::v1) {
    name_ = name;
    cpu_ = v1_mount("cpu");
    cpuacct_ = v1_mount("cpuacct");
    cpuset_ = v1_mount("cpuset");
    for (const auto& m : {cpu_, cpuacct_, cpuset_})
      if (std::find(mounts_.begin(), mounts_.end(), m) == mounts_.end()) mounts_.push_back(m);
    const std::string mems = read_trimmed(cpuset_ / "cpuset.mems");
    for (const auto& m : mounts_) {
      std::vector<fs::path> dirs = {m / name_};
      for (const auto& l : leaves_) dirs.push_back(m / name_ / l.name);
      for (const auto& d : dirs) {
        if (::mkdir(d.c_str(), 0755) != 0) {
          error_ = "mkdir " + d.string() + ": " + std::strerror(errno);
          return;
        }
        if (m == cpuset_ && !(write(d / "cpuset.mems", mems) && write(d / "cpuset.cpus", all_cpus()))) {
          error_ = "cannot set up the cpuset " + d.string();
          return;
        }
      }
    }
    return;
  }
  name_ = name;
  std::replace(name_.begin(), name_.end(), '-', '_');
  cpu_ = cpuacct_ = cpuset_ = "/sys/fs/cgroup";
  mounts_ = {cpu_};
  for (const auto& l : leaves_) {
    std::vector<std::string> props = l.extra;
    if (l.delegate) props.push_back("Delegate b true");
    if (!bare) {
      props.push_back("CPUWeight t 100");
      props.push_back(all_cpus_bytes());
    }
    const std::string unit = leaf_unit(l);
    std::string e;
    if (l.service) {
      e = systemd::start_service(unit, name_ + ".slice", "/bin/sleep infinity", props);
    } else {
      pid_t p = park();
      parked_.push_back(p);
      e = systemd::start_scope(unit, name_ + ".slice", {p}, props);
    }
    if (!e.empty()) {
      error_ = e;
      return;
    }
  }
}

Scene::~Scene() {
  kill_started();
  if (layout_ == Layout::v1) {
    for (const auto& m : mounts_) {
      if (name_.empty()) break;
      for (const auto& l : leaves_) empty_and_remove(m / name_ / l.name);
      empty_and_remove(m / name_);
    }
  } else if (!name_.empty()) {
    for (const auto& l : leaves_) systemd::stop(leaf_unit(l));
    systemd::stop(name_ + ".slice");
  }
  for (pid_t p : parked_) kill_wait(p);
}

std::string Scene::leaf_unit(const Leaf& l) const {
  return name_ + "-" + l.name + (l.service ? ".service" : ".scope");
}

std::string Scene::unit(const std::string& leaf) const {
  if (!v2()) return "";
  for (const auto& l : leaves_)
    if (l.name == leaf) return leaf_unit(l);
  return "";
}

std::string Scene::path(const std::string& leaf) const {
  if (!v2()) return "/" + name_ + (leaf.empty() ? "" : "/" + leaf);
  return "/" + name_ + ".slice" + (leaf.empty() ? "" : "/" + unit(leaf));
}

std::string Scene::glob(const std::string& prefix, bool service) const {
  if (!v2()) return "/" + name_ + "/" + prefix + "*";
  return "/" + name_ + ".slice/" + name_ + "-" + prefix + "*" + (service ? ".service" : ".scope");
}

fs::path Scene::dir(const std::string& leaf, const char* controller) const {
  const std::string c = controller;
  const fs::path& m = c == "cpuset" ? cpuset_ : c == "cpuacct" ? cpuacct_ : cpu_;
  return m / path(leaf).substr(1);
}

fs::path Scene::root(const char* controller) const {
  const std::string c = controller;
  return c == "cpuset" ? cpuset_ : c == "cpuacct" ? cpuacct_ : cpu_;
}

uint64_t Scene::usage_ns(const std::string& leaf) const {
  if (!v2()) return std::stoull(read_trimmed(dir(leaf, "cpuacct") / "cpuacct.usage"));
  const std::string stat = slurp(dir(leaf) / "cpu.stat");
  size_t at = stat.find("usage_usec ");
  return at == std::string::npos ? 0 : std::stoull(stat.substr(at + 11)) * 1000;
}

uint64_t Scene::host_usage_ns() const {
  if (!v2()) return std::stoull(read_trimmed(cpuacct_ / "cpuacct.usage"));
  // The root cgroup has no cpu.stat on v2: /proc/stat's busy jiffies.
  std::istringstream in(slurp("/proc/stat"));
  std::string cpu;
  uint64_t v[10] = {};
  in >> cpu;
  for (auto& x : v) in >> x;
  const uint64_t busy = v[0] + v[1] + v[2] + v[5] + v[6];  // user nice system irq softirq
  return busy * (1'000'000'000ull / static_cast<uint64_t>(::sysconf(_SC_CLK_TCK)));
}

std::string Scene::cpus(const std::string& leaf) const {
  std::string c = read_trimmed(dir(leaf, "cpuset") / "cpuset.cpus");
  if (c.empty() && v2()) c = read_trimmed(dir(leaf, "cpuset") / "cpuset.cpus.effective");
  return c;
}

pid_t Scene::spawn(const std::string& leaf, const Body& body) { return spawn_at(path(leaf), body); }

pid_t Scene::spawn_at(const std::string& cgroup, const Body& body) {
  int go[2];
  if (::pipe(go) != 0) return -1;
  pid_t p = ::fork();
  if (p == 0) {
    ::setpgid(0, 0);
    ::close(go[1]);
    char c = 0;
    if (::read(go[0], &c, 1) != 1 || c != 'g') ::_exit(3);
    ::close(go[0]);
    body();
    ::_exit(0);
  }
  ::close(go[0]);
  std::string e;
  if (!v2()) {
    for (const auto& m : mounts_)
      if (!write(m / cgroup.substr(1) / "cgroup.procs", std::to_string(p))) e = "cannot join " + cgroup;
  } else {
    const std::string unit = fs::path(cgroup).filename().string();
    if (systemd::property(unit, "Delegate") == "yes")
      e = systemd::attach(unit, p);
    else if (!write(cpu_ / cgroup.substr(1) / "cgroup.procs", std::to_string(p)))
      e = "cannot join " + cgroup + ": " + std::strerror(errno);
  }
  started_.push_back(p);
  if (!e.empty()) {
    error_ = e;
    ::close(go[1]);
    kill_wait(p);
    std::erase(started_, p);
    return -1;
  }
  (void)!::write(go[1], "g", 1);
  ::close(go[1]);
  return p;
}

std::map<std::string, std::string> Scene::knobs() const {
  std::map<std::string, std::string> k;
  std::vector<std::string> names = {""};
  for (const auto& l : leaves_) names.push_back(l.name);
  const std::vector<std::string> cpu_files =
      v2() ? std::vector<std::string>{"cpu.weight", "cpu.max", "cpu.idle"}
           : std::vector<std::string>{"cpu.shares", "cpu.cfs_quota_us", "cpu.cfs_period_us", "cpu.idle"};
  for (const auto& n : names) {
    const std::string label = n.empty() ? "(parent)" : n;
    for (const char* f : {"cpuset.cpus", "cpuset.mems"}) k[label + "/" + f] = slurp(dir(n, "cpuset") / f);
    for (const auto& f : cpu_files) k[label + "/" + f] = slurp(dir(n, "cpu") / f);
  }
  return k;
}

void Scene::kill_started() {
  for (pid_t p : started_) kill_wait(p);
  started_.clear();
}

// ---- DelegatedTree ----

DelegatedTree::DelegatedTree(const std::string& name, const std::string& slice) {
  std::string why;
  auto layout = host_layout(&why);
  if (!layout) {
    error_ = why;
    return;
  }
  layout_ = *layout;
  name_ = name;
  if (layout_ == Layout::v1) {
    cpuset_ = v1_mount("cpuset");
    for (const auto& m : {v1_mount("cpu"), v1_mount("cpuacct"), cpuset_})
      if (std::find(mounts_.begin(), mounts_.end(), m) == mounts_.end()) mounts_.push_back(m);
    path_ = "/" + name_;
    for (const auto& m : mounts_) remove_stale_trees(m, name_);
    for (const auto& m : mounts_)
      if (::mkdir((m / name_).c_str(), 0755) != 0) {
        error_ = "mkdir " + (m / name_).string() + ": " + std::strerror(errno);
        return;
      }
    made_.push_back("");
    const std::string mems = read_trimmed(cpuset_ / "cpuset.mems");
    if (!write(cpuset_ / name_ / "cpuset.mems", mems) || !write(cpuset_ / name_ / "cpuset.cpus", all_cpus()))
      error_ = "cannot set up the cpuset " + (cpuset_ / name_).string();
    return;
  }
  std::replace(name_.begin(), name_.end(), '-', '_');
  unit_ = name_ + ".scope";
  // The NAME_PID.scope of a gone process: its parked process (which outlived the test) stopped with it.
  if (const size_t u = name_.rfind('_'); u != std::string::npos) {
    const std::string prefix = name_.substr(0, u + 1);
    auto [rc, units] = run_command("systemctl list-units --all --plain --no-legend '" + prefix + "*.scope'");
    std::istringstream lines(units);
    for (std::string line; rc == 0 && std::getline(lines, line);) {
      const std::string unit = line.substr(0, line.find(' '));
      if (of_gone_process(unit, prefix, ".scope")) systemd::stop(unit);
    }
  }
  cpuset_ = "/sys/fs/cgroup";
  mounts_ = {cpuset_};
  parked_ = park();
  if (std::string e = systemd::start_scope(unit_, slice, {parked_}, {"Delegate b true"}); !e.empty()) {
    error_ = e;
    return;
  }
  // The scope holds `parked` (its process: a scope ends when it is empty) and `tree`, the test's root:
  // a cgroup that hands controllers to its children holds no processes, so neither does the scope's.
  const std::string scope = cgroup_of(parked_);
  const fs::path root = cpuset_ / scope.substr(1);
  if (::mkdir((root / "parked").c_str(), 0755) != 0 || ::mkdir((root / "tree").c_str(), 0755) != 0 ||
      !write(root / "parked/cgroup.procs", std::to_string(parked_))) {
    error_ = "cannot park the scope's process in " + (root / "parked").string();
    return;
  }
  path_ = scope + "/tree";
  for (const fs::path& d : {root, root / "tree"})
    if (!write(d / "cgroup.subtree_control", "+cpu +cpuset")) {
      error_ = "cannot enable cpu and cpuset in " + d.string() + ": " + slurp(d / "cgroup.controllers");
      return;
    }
}

DelegatedTree::~DelegatedTree() {
  for (auto it = made_.rbegin(); it != made_.rend(); ++it)
    if (!it->empty()) remove(*it);
  if (layout_ == Layout::v1) {
    if (!made_.empty())
      for (const auto& m : mounts_) empty_and_remove(m / name_);
  } else if (!unit_.empty()) {
    systemd::stop(unit_);
  }
  kill_wait(parked_);
}

fs::path DelegatedTree::dir(const char* controller) const {
  if (v2()) return cpuset_ / path_.substr(1);
  const std::string c = controller;
  for (const auto& m : mounts_) {
    const std::string opts = m.filename().string();
    std::istringstream names(opts);
    for (std::string n; std::getline(names, n, ',');)
      if (n == c) return m / name_;
  }
  return v1_mount(controller) / name_;
}

bool DelegatedTree::make(const std::string& rel) {
  // v2: a cgroup below one of the test's gets the cpu and cpuset controllers from its parent (which
  // must then hold no processes); the root's were enabled when the scope was made.
  if (v2() && rel.find('/') != std::string::npos) {
    const fs::path parent = (cpuset_ / path_.substr(1) / rel).parent_path();
    if (slurp(parent / "cgroup.subtree_control").find("cpuset") == std::string::npos &&
        !write(parent / "cgroup.subtree_control", "+cpu +cpuset"))
      return false;
  }
  for (const auto& m : mounts_) {
    const fs::path d = m / path_.substr(1) / rel;
    if (::mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) return false;
    if (!v2() && m == cpuset_) {
      bool ok = false;
      for (int i = 0; i < 50 && !ok; ++i) {
        ok = write(d / "cpuset.mems", read_trimmed(d.parent_path() / "cpuset.mems")) &&
             write(d / "cpuset.cpus", read_trimmed(d.parent_path() / "cpuset.cpus"));
        if (!ok) std::this_thread::sleep_for(10ms);
      }
      if (!ok) return false;
    }
  }
  made_.push_back(rel);
  return true;
}

void DelegatedTree::remove(const std::string& rel) {
  for (const auto& m : mounts_) empty_and_remove(m / path_.substr(1) / rel);
  std::erase(made_, rel);
}

bool DelegatedTree::move(pid_t pid, const std::string& rel) {
  for (const auto& m : mounts_) {
    fs::path d = m / path_.substr(1);
    if (!rel.empty()) d /= rel;
    if (!write(d / "cgroup.procs", std::to_string(pid))) return false;
  }
  return true;
}

}  // namespace keel::testing
