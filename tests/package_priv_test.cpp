// The Debian package end to end on this machine: cpack builds it from this build; its control data
// depends on shared libraries only (no build or test tool) and marks /etc/keel/keel.toml a conffile;
// dpkg installs it; the installed keel answers --version with this build's revision, checks the shipped
// config, and its unit verifies against the installed man page; a reinstall keeps an operator's edit
// of the conffile; a purge leaves nothing behind. Root only (it changes the dpkg database, and puts
// it back; a /var/lib/keel or /etc/keel already here is moved aside and back); skipped when a keel
// package is installed already.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "host/fileio.h"
#include "tests/support/http.h"
#include "tests/support/scene.h"
#include "tests/support/tmp_tree.h"

namespace keel {
namespace {

namespace fs = std::filesystem;
const char* const kKeelLog = "/run/keeltest-keel.log";
using testing::run_command;
using testing::slurp;

class PackagePriv : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "skipped: installs a package (root only)";
    if (run_command("dpkg-query -W -f='${Status}' keel").second.find("installed") != std::string::npos)
      GTEST_SKIP() << "skipped: a keel package is installed on this machine; not replacing it";
    // A keel run from the source tree may have left its state or a config: moved aside, put back after.
    for (const char* d : {"/var/lib/keel", "/etc/keel"})
      if (fs::exists(d)) {
        fs::path aside = std::string(d) + ".package-test-" + std::to_string(::getpid());
        fs::rename(d, aside);
        aside_.emplace_back(d, aside);
      }
  }
  void TearDown() override {
    if (installed_) run_command("dpkg --purge keel");
    for (const auto& [d, aside] : aside_) {
      fs::remove_all(d);
      fs::rename(aside, d);
    }
  }
  // On cgroup v2 under systemd, keel.service as the package installs it (its hardening, its capability
  // set, its notify protocol) with the shipped config plus one critical rule, in enforce mode.
  void exercise_the_unit();
  bool installed_ = false;
  std::vector<std::pair<fs::path, fs::path>> aside_;
  const fs::path slurp_path_ = "/etc/keel/keel.toml";
};

// Every knob keel may change (and what systemd enables for children) of every cgroup in the tree, as
// the kernel prints it now; keel.service's own cgroup is left out (it is keel's, and comes and goes).
std::map<std::string, std::string> host_knobs() {
  std::map<std::string, std::string> m;
  const fs::path root = "/sys/fs/cgroup";
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (ec) break;
    if (!it->is_directory(ec)) continue;
    if (it->path().filename() == "keel.service") {
      it.disable_recursion_pending();
      continue;
    }
    for (const char* f : {"cpu.idle", "cpu.weight", "cpuset.cpus", "cgroup.subtree_control"}) {
      const fs::path file = it->path() / f;
      if (fs::exists(file, ec)) m[file.lexically_relative(root).string()] = std::string(trim(slurp(file)));
    }
  }
  return m;
}

// The done-when of cgroup v2 under systemd: a critical container-like scope (Delegate=yes, as docker's
// systemd driver, containerd, CRI-O and machined make them) is matched by its rule and protected: the
// best-effort scopes beside it go into the idle class, which their slice (machine.slice) could not give
// them until keel asked systemd for the cpu controller (a unit property, never a subtree_control write);
// no system service, init.scope or keel itself gets the class; `systemctl daemon-reload` (systemd writes
// every unit's own cpu.idle back) is undone within two ticks; `systemctl stop keel` leaves every knob of
// every cgroup as it was before keel started enforcing, systemd's controllers included.
void PackagePriv::exercise_the_unit() {
  auto wait_for = [](const std::function<bool()>& f, std::chrono::seconds limit) {
    for (auto end = std::chrono::steady_clock::now() + limit; !f() && std::chrono::steady_clock::now() < end;)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return f();
  };
  auto active = [] { return testing::systemd::property("keel.service", "ActiveState") == "active"; };
  ASSERT_TRUE(wait_for(active, std::chrono::seconds(60)))
      << run_command("journalctl -u keel --no-pager").second;
  const std::string tag = std::to_string(::getpid());
  const std::string crit = "keeltest-crit-" + tag + ".scope";
  const std::vector<std::string> noise = {"machine-keeltest-be1-" + tag + ".scope",
                                          "machine-keeltest-be2-" + tag + ".scope"};
  std::vector<std::unique_ptr<testing::Parked>> parked;
  struct Units {
    std::vector<std::string> names;
    ~Units() {
      for (const auto& u : names) testing::systemd::stop(u);
    }
  } units;
  parked.push_back(std::make_unique<testing::Parked>());
  units.names.push_back(crit);
  ASSERT_EQ(testing::systemd::start_scope(crit, "system.slice", {parked.back()->pid}, {"Delegate b true"}),
            "");
  for (const auto& n : noise) {
    parked.push_back(std::make_unique<testing::Parked>());
    units.names.push_back(n);
    ASSERT_EQ(testing::systemd::start_scope(n, "machine.slice", {parked.back()->pid}),
              "");  // no CPU property
  }
  auto idle = [](const std::string& cgroup) {
    return std::string(trim(slurp(fs::path("/sys/fs/cgroup") / cgroup / "cpu.idle")));
  };
  const std::string be1 = "machine.slice/" + noise[0], be2 = "machine.slice/" + noise[1];
  const auto before = host_knobs();
  std::printf("machine.slice enables for its children: %s\n",
              std::string(trim(slurp("/sys/fs/cgroup/machine.slice/cgroup.subtree_control"))).c_str());

  // The shipped config, enforcing, with one critical rule before its catch-alls.
  std::string cfg = slurp(testing::source_dir() / "config/keel.toml");
  cfg.replace(cfg.find("mode = \"observe\""), 16, "mode = \"enforce\"");
  cfg.insert(cfg.find("\n[[workload]]") + 1,
             "[[workload]]\nname = \"crit\"\nmatch = { cgroup = \"/system.slice/" + crit +
                 "\" }\nclass = \"critical\"\nslo = { runqueue_p99 = \"5ms\" }\n\n");
  std::ofstream(slurp_path_) << cfg;
  // Every tick in the log (a runtime drop-in; gone with the test).
  const fs::path dropin = "/run/systemd/system/keel.service.d/keeltest-verbose.conf";
  fs::create_directories(dropin.parent_path());
  std::ofstream(dropin) << "[Service]\nExecStart=\nExecStart=/usr/sbin/keel run --config /etc/keel/keel.toml "
                           "--state /var/lib/keel --verbose\nStandardError=append:"
                        << kKeelLog << "\n";
  struct Dropin {
    fs::path path;
    ~Dropin() {
      fs::remove(path);
      run_command("systemctl daemon-reload");
      fs::remove(kKeelLog);
    }
  } gone_after{dropin};
  ASSERT_EQ(run_command("systemctl daemon-reload").first, 0);
  auto [crc, cout] = run_command("/usr/sbin/keel check-config /etc/keel/keel.toml");
  ASSERT_EQ(crc, 0) << cout << cfg;
  ASSERT_EQ(run_command("systemctl restart keel").first, 0)
      << run_command("journalctl -u keel --no-pager").second;
  // keel's stderr goes to a file while the drop-in stands: journald takes a stream's lines when it gets
  // to them (seconds late on a busy emulated guest), so a tick logged before the reload could read as
  // one after it; keel's own writes to a file are in order with the test's reads.
  auto log = [] { return slurp(kKeelLog); };
  auto classed = [&] { return idle(be1) == "1" && idle(be2) == "1"; };
  ASSERT_TRUE(wait_for(classed, std::chrono::seconds(60))) << log();
  EXPECT_EQ(testing::systemd::property(noise[0], "CPUWeight"), "100") << "keel asked systemd for it";
  EXPECT_NE(log().find("keel asked systemd to enable it (" + noise[0] + " CPUWeight=100"), std::string::npos)
      << log();
  // Nobody else in the class: every system service, init.scope and keel itself as before.
  for (const auto& [file, was] : before) {
    if (file.ends_with("/cpu.idle") && file.find("keeltest") == std::string::npos) {
      EXPECT_EQ(std::string(trim(slurp(fs::path("/sys/fs/cgroup") / file))), was) << file << "\n" << log();
    }
  }
  EXPECT_EQ(idle("system.slice/keel.service"), "0");
  // Its sandbox leaves /proc/irq writable (ProtectKernelTunables= makes it read-only, and in systemd 252
  // ReadWritePaths= does not open it again: the unit lists ReadOnlyPaths= instead), and keel probe says
  // which it is.
  const std::string pid = testing::systemd::property("keel.service", "MainPID");
  auto [irc, iout] =
      run_command("nsenter -m -t " + pid + " sh -c 'test -w /proc/irq/default_smp_affinity' 2>&1");
  EXPECT_EQ(irc, 0) << "/proc/irq is read-only under keel.service: " << iout;
  auto probe = [](const std::string& props) {
    return run_command("systemd-run --quiet --wait --pipe " + props + " /usr/sbin/keel probe 2>&1").second;
  };
  EXPECT_NE(probe("-p ProtectKernelTunables=yes").find("/proc/irq is read-only here"), std::string::npos)
      << probe("-p ProtectKernelTunables=yes");
  EXPECT_EQ(probe("-p ProtectSystem=strict -p ReadOnlyPaths=/proc/sys -p ReadWritePaths=-/proc/irq")
                .find("read-only"),
            std::string::npos);
  EXPECT_EQ(idle("system.slice/" + crit), "0");

  // systemd realises every unit again; keel puts the noise back within two ticks. keel logs every tick
  // (--verbose, from a runtime drop-in). A daemon-reload takes seconds on an emulated guest and keel
  // ticks meanwhile, so the count starts where the test first sees systemd's value (0) in the noise's
  // cpu.idle: the first tick logged after that may have read before it, the next one saw it for sure.
  // (A watcher that misses the window saw keel quicker than itself.)
  const size_t before_reload = log().size();
  std::atomic<bool> reloading = true;
  std::atomic<size_t> seen_at = std::string::npos;
  std::thread watcher([&] {
    while (reloading || seen_at == std::string::npos) {
      std::error_code ec;
      const size_t logged = fs::file_size(kKeelLog, ec);  // before the read: keel's answer comes after
      if (idle(be1) == "0" || idle(be2) == "0") {
        seen_at = logged;
        return;
      }
      if (!reloading) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  const int reload_rc = run_command("systemctl daemon-reload").first;
  const auto reloaded = std::chrono::steady_clock::now();
  const bool back = wait_for(classed, std::chrono::seconds(30));
  reloading = false;
  watcher.join();
  ASSERT_EQ(reload_rc, 0);
  ASSERT_TRUE(back) << log();
  const auto took = std::chrono::steady_clock::now() - reloaded;
  ASSERT_TRUE(wait_for([&] { return log().find("systemd realised", before_reload) != std::string::npos; },
                       std::chrono::seconds(10)))
      << log();
  const std::string since = log().substr(before_reload);
  auto tick_at = [&](size_t at) {  // the tick of the first line that starts at or after `at`
    if (at > 0 && since[at - 1] != '\n') at = since.find('\n', at) + 1;
    return std::stol(since.substr(since.find("keel: tick ", at) + 11));
  };
  const size_t realised_at = since.find("systemd realised");
  const long realised =
      tick_at(since.rfind('\n', realised_at) == std::string::npos ? 0 : since.rfind('\n', realised_at) + 1);
  const long first = seen_at == std::string::npos ? realised : tick_at(seen_at - before_reload);
  std::printf(
      "after daemon-reload the noise was back in the class in tick %ld; systemd's value was %s %ld "
      "(back %lld ms after daemon-reload returned)\n",
      realised,
      seen_at == std::string::npos ? "never seen by the test (keel was quicker), tick" : "first seen in tick",
      first, static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
  EXPECT_LE(realised - first, 1) << since;
  EXPECT_EQ(log().find(" drift "), std::string::npos) << log();

  // Stopped: every value as before keel enforced, systemd's own included.
  ASSERT_EQ(run_command("systemctl stop keel").first, 0);
  EXPECT_EQ(testing::systemd::property(noise[0], "CPUWeight"), "[not set]");
  // (systemd drops a controller no unit asks for any more when it next realises the slice: waited for)
  auto differences = [&] {
    std::string d;
    const auto after = host_knobs();
    for (const auto& [file, was] : before)
      if (auto a = after.find(file); a != after.end() && a->second != was)
        d += file + ": " + was + " -> " + a->second + "\n";
    for (const auto& [file, now] : after)
      if (!before.contains(file)) d += file + ": (none) -> " + now + "\n";
    return d;
  };
  wait_for([&] { return differences().empty(); }, std::chrono::seconds(10));
  EXPECT_EQ(differences(), "") << log();
}

TEST_F(PackagePriv, BuildsInstallsRunsKeepsTheConffileAndPurgesCleanly) {
  testing::TempDir dir;
  auto [crc, cout] =
      run_command("cd " + testing::binary_dir().string() + " && cpack -G DEB -B " + dir.path().string());
  ASSERT_EQ(crc, 0) << cout;
  fs::path deb;
  for (const auto& e : fs::directory_iterator(dir.path()))
    if (e.path().extension() == ".deb") deb = e.path();
  ASSERT_FALSE(deb.empty()) << cout;

  // Control data: runtime libraries only, the conffile, the files where the system expects them.
  auto [irc, info] = run_command("dpkg-deb -f " + deb.string() + " Depends");
  ASSERT_EQ(irc, 0) << info;
  for (const char* lib : {"libbpf1", "libhwloc15", "libprometheus-cpp-core1.0", "libcivetweb1",
                          "libtomlplusplus3", "libsystemd0"})
    EXPECT_NE(info.find(lib), std::string::npos) << lib << " in " << info;
  for (const char* tool : {"stress-ng", "redis", "prometheus (", "googletest", "libgtest", "clang", "cmake"})
    EXPECT_EQ(info.find(tool), std::string::npos) << tool << " in " << info;
  auto [frc, conffiles] = run_command("dpkg-deb -I " + deb.string() + " conffiles");
  EXPECT_EQ(conffiles, "/etc/keel/keel.toml\n");
  auto [lrc, listing] = run_command("dpkg-deb -c " + deb.string());
  for (const char* f : {"./usr/sbin/keel", "./etc/keel/keel.toml", "./lib/systemd/system/keel.service",
                        "./usr/share/man/man8/keel.8.gz", "./usr/share/bash-completion/completions/keel",
                        "./usr/share/keel/dashboards/keel-controller.json",
                        "./usr/share/keel/rules/keel-alerts.yml", "./usr/share/doc/keel/config.md"})
    EXPECT_NE(listing.find(std::string(f) + "\n"), std::string::npos) << f << "\n" << listing;

  auto [drc, dout] = run_command("DEBIAN_FRONTEND=noninteractive dpkg -i " + deb.string());
  ASSERT_EQ(drc, 0) << dout;
  installed_ = true;
  auto [vrc, version] = run_command("/usr/sbin/keel --version");
  auto [brc, built] = run_command(testing::keel_binary().string() + " --version");
  EXPECT_EQ(vrc, 0);
  EXPECT_EQ(version, built) << "the installed keel is this build";
  auto [krc, kout] = run_command("/usr/sbin/keel check-config /etc/keel/keel.toml");
  EXPECT_EQ(krc, 0) << kout;
  EXPECT_EQ(slurp("/etc/keel/keel.toml"), slurp(testing::source_dir() / "config/keel.toml"));
  if (run_command("command -v systemd-analyze").first == 0) {
    auto [src, sout] = run_command("systemd-analyze verify /lib/systemd/system/keel.service");
    EXPECT_EQ(src, 0) << sout;
    EXPECT_EQ(sout, "") << sout;
  }
  auto [mrc, man] = run_command("MANWIDTH=120 man 8 keel | col -b");
  EXPECT_NE(man.find("keel check-config FILE"), std::string::npos) << man;
  if (testing::host_layout() == testing::Layout::v2) {
    exercise_the_unit();
    std::ofstream(slurp_path_) << slurp(testing::source_dir() / "config/keel.toml");  // the shipped one again
  } else {
    std::printf("no systemd as init here: keel.service under systemd runs on the v2 guest\n");
  }

  // The operator edits the config; a reinstall (an upgrade) keeps the edit.
  { std::ofstream("/etc/keel/keel.toml", std::ios::app) << "# edited by the operator\n"; }
  auto [r2, o2] = run_command("DEBIAN_FRONTEND=noninteractive dpkg -i --force-confold " + deb.string());
  ASSERT_EQ(r2, 0) << o2;
  EXPECT_NE(slurp("/etc/keel/keel.toml").find("# edited by the operator"), std::string::npos);

  auto [prc, pout] = run_command("dpkg --purge keel");
  ASSERT_EQ(prc, 0) << pout;
  installed_ = false;
  for (const char* f :
       {"/usr/sbin/keel", "/etc/keel", "/lib/systemd/system/keel.service", "/usr/share/keel",
        "/usr/share/man/man8/keel.8.gz", "/usr/share/bash-completion/completions/keel", "/var/lib/keel",
        "/etc/systemd/system/keel.service", "/etc/systemd/system/multi-user.target.wants/keel.service"})
    EXPECT_FALSE(fs::exists(fs::symlink_status(f))) << f << " left after the purge";
}

}  // namespace
}  // namespace keel
