// keel's questions to systemd: what it may ask (checked before the bus is touched), and on a host whose
// init is systemd with cgroup v2 (the guest of scripts/vm-test.sh) what systemd does when asked: the
// cpu and cpuset controllers come for a unit that had neither, without a CPU list written, and go again
// when the properties are set back to not set.
#include "host/systemd.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <future>
#include <thread>
#include <vector>

#include "host/fileio.h"
#include "tests/support/scene.h"
#include "tests/support/tmp_tree.h"

namespace keel {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

TEST(Systemd, UnitNamesArePlainNamesWithAUnitSuffix) {
  for (const char* ok : {"crit.service", "docker-0123abcd.scope", "machine-qemu\\x2d1\\x2dvm.scope",
                         "kubepods-besteffort-pod1_2.slice", "getty@tty1.service", "a:b.service"})
    EXPECT_TRUE(valid_unit_name(ok)) << ok;
  for (const char* bad : {"", ".service", "crit", "crit.mount", "a b.service", "a/b.service", "../x.service",
                          "x.service\n", "kubepods"})
    EXPECT_FALSE(valid_unit_name(bad)) << bad;
  EXPECT_FALSE(valid_unit_name(std::string(300, 'a') + ".service"));
  for (UnitProperty p : {UnitProperty::cpu_weight, UnitProperty::startup_allowed_cpus})
    EXPECT_EQ(parse_unit_property(to_string(p)), p);
  EXPECT_FALSE(parse_unit_property("ExecStart"));
  EXPECT_EQ(controller_of(UnitProperty::cpu_weight), "cpu");
  EXPECT_EQ(controller_of(UnitProperty::startup_allowed_cpus), "cpuset");
}

// A bad unit or value is refused before anything is sent: the error is the value's, not the bus's
// (the socket here does not exist, so reaching for it would fail otherwise).
TEST(Systemd, ABadUnitOrValueIsRefusedBeforeSystemdIsAsked) {
  testing::TempDir t;
  SysRoots roots = SysRoots::under(t.path());
  auto weight = set_unit_property(roots, "a.service", UnitProperty::cpu_weight, "0");
  ASSERT_FALSE(weight);
  EXPECT_NE(weight.error().message().find("a number from 1 to 10000"), std::string::npos)
      << weight.error().message();
  auto cpus = set_unit_property(roots, "a.service", UnitProperty::startup_allowed_cpus, "0-x");
  ASSERT_FALSE(cpus);
  EXPECT_EQ(cpus.error().message().find("connect"), std::string::npos) << cpus.error().message();
  auto unit = set_unit_property(roots, "../a.service", UnitProperty::cpu_weight, "100");
  ASSERT_FALSE(unit);
  EXPECT_NE(unit.error().message().find("not a unit name"), std::string::npos) << unit.error().message();
  // A good question with nobody to answer it names the socket.
  auto none = set_unit_property(roots, "a.service", UnitProperty::cpu_weight, "100");
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message().find(roots.systemd_bus.string()), std::string::npos)
      << none.error().message();
  EXPECT_FALSE(systemd_version(roots));
}

// A peer on systemd's socket that takes the connection and never answers (a manager stuck in a
// reload, a wedged socket) costs a question at most keel's deadline of 5 s over connecting,
// authenticating and the call, not sd-bus's own 90 s wait for authentication; the questions after it
// within 30 s fail at once without connecting (a tick that asks for many units pays one deadline).
TEST(Systemd, APeerThatNeverAnswersCostsOneDeadlineAndTheNextQuestionsNone) {
  testing::TempDir t;
  SysRoots roots = SysRoots::under(t.path());
  fs::create_directories(roots.systemd_bus.parent_path());
  const int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(roots.systemd_bus.string().size(), sizeof(addr.sun_path));
  std::strcpy(addr.sun_path, roots.systemd_bus.c_str());
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << std::strerror(errno);
  ASSERT_EQ(::listen(listener, 8), 0);
  std::atomic<int> accepted{0};
  std::atomic<bool> done{false};
  std::vector<int> held;
  std::thread peer([&] {
    while (!done) {
      pollfd p{listener, POLLIN, 0};
      if (::poll(&p, 1, 50) == 1) {
        int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) {
          held.push_back(fd);  // taken, read from never
          ++accepted;
        }
      }
    }
  });
  auto ask = [&] {
    auto f = std::async(std::launch::async, [&] {
      return set_unit_property(roots, "a.service", UnitProperty::cpu_weight, "100");
    });
    // A hang guard, not a timing test: without the deadline this waits sd-bus's 90 s.
    EXPECT_EQ(f.wait_for(60s), std::future_status::ready) << "no answer from set_unit_property";
    return f.get();
  };
  auto first = ask();
  ASSERT_FALSE(first);
  EXPECT_NE(first.error().message().find("did not complete the connection (authentication) within 5 s"),
            std::string::npos)
      << first.error().message();
  auto second = ask();
  ASSERT_FALSE(second);
  EXPECT_NE(second.error().message().find("within 5 s; not asked again for 30 s"), std::string::npos)
      << second.error().message();
  EXPECT_EQ(accepted.load(), 1);  // not even connected
  auto version = std::async(std::launch::async, [&] { return systemd_version(roots); });
  ASSERT_EQ(version.wait_for(60s), std::future_status::ready);
  EXPECT_FALSE(version.get());
  done = true;
  peer.join();
  for (int fd : held) ::close(fd);
  ::close(listener);
}

// On the v2 guest: a service in a slice of its own, made without any CPU property, has neither the cpu
// nor the cpuset controller (systemd enables for a slice's children only what one of them asks for).
// CPUWeight=100 makes systemd enable cpu and write the default weight; StartupAllowedCPUs=<every CPU>
// makes it enable cpuset while the unit's cpuset.cpus stays not set (the startup value applies only
// while the manager starts up). Both set back to not set, systemd drops the controllers again: the
// slice's subtree_control is as it was.
TEST(SystemdPriv, CpuAndCpusetComeForAUnitAndGoAgainThroughItsProperties) {
  std::string why;
  auto layout = testing::host_layout(&why);
  if (::geteuid() != 0 || !layout || *layout != testing::Layout::v2)
    GTEST_SKIP() << "skipped: needs root on cgroup v2 under systemd (the v2 guest: scripts/vm-test.sh)"
                 << (why.empty() ? "" : ": " + why);
  const SysRoots roots = SysRoots::host();
  auto version = systemd_version(roots);
  ASSERT_TRUE(version) << version.error().message();
  std::printf("systemd %s\n", version->c_str());
  const std::string slice = "keeltest_sd" + std::to_string(::getpid()) + ".slice";
  const std::string unit = "keeltest_sd" + std::to_string(::getpid()) + "-a.service";
  ASSERT_EQ(testing::systemd::start_service(unit, slice, "/bin/sleep infinity"), "");
  struct Stop {
    std::string unit, slice;
    ~Stop() {
      testing::systemd::stop(unit);
      testing::systemd::stop(slice);
    }
  } stop{unit, slice};
  const fs::path dir = roots.cgroup / slice / unit;
  const fs::path control = roots.cgroup / slice / "cgroup.subtree_control";
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  const std::string before(trim(testing::slurp(control)));
  if (fs::exists(dir / "cpu.weight") || fs::exists(dir / "cpuset.cpus"))
    GTEST_SKIP() << "skipped: systemd enabled cpu or cpuset for this slice already (" << before << ")";
  auto wait_for = [](const std::function<bool()>& f) {
    for (int i = 0; i < 500 && !f(); ++i) std::this_thread::sleep_for(10ms);
    return f();
  };

  ASSERT_TRUE(set_unit_property(roots, unit, UnitProperty::cpu_weight, "100"));
  ASSERT_TRUE(wait_for([&] { return fs::exists(dir / "cpu.weight"); })) << testing::slurp(control);
  EXPECT_EQ(std::string(trim(testing::slurp(dir / "cpu.weight"))), "100");
  EXPECT_EQ(testing::systemd::property(unit, "CPUWeight"), "100");
  auto all = read_file(roots.cgroup / "cpuset.cpus.effective");
  ASSERT_TRUE(all);
  ASSERT_TRUE(set_unit_property(roots, unit, UnitProperty::startup_allowed_cpus, trim(*all)));
  ASSERT_TRUE(wait_for([&] { return fs::exists(dir / "cpuset.cpus"); })) << testing::slurp(control);
  EXPECT_EQ(std::string(trim(testing::slurp(dir / "cpuset.cpus"))), "") << "a CPU list was written";
  EXPECT_EQ(std::string(trim(testing::slurp(dir / "cpuset.cpus.effective"))), std::string(trim(*all)));

  ASSERT_TRUE(set_unit_property(roots, unit, UnitProperty::cpu_weight, ""));
  ASSERT_TRUE(set_unit_property(roots, unit, UnitProperty::startup_allowed_cpus, ""));
  EXPECT_EQ(testing::systemd::property(unit, "CPUWeight"), "[not set]");
  EXPECT_TRUE(wait_for([&] { return std::string(trim(testing::slurp(control))) == before; }))
      << "subtree_control " << testing::slurp(control) << " was " << before;
  EXPECT_FALSE(fs::exists(dir / "cpu.weight"));

  // A unit systemd does not know.
  auto none = set_unit_property(roots, "keeltest-none" + std::to_string(::getpid()) + ".service",
                                UnitProperty::cpu_weight, "");
  ASSERT_FALSE(none);
  std::printf("a unit systemd does not know: %s\n", none.error().message().c_str());
}

}  // namespace
}  // namespace keel
