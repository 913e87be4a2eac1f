// Notifier against a real AF_UNIX datagram socket, as systemd's manager listens on one (path and
// abstract namespace): what keel sends arrives byte for byte; the watchdog interval is half of
// $WATCHDOG_USEC and only for the pid $WATCHDOG_PID names; bad variables are errors; without
// $NOTIFY_SOCKET nothing is sent.
#include "loop/notify.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "host/fd.h"
#include "tests/support/tmp_tree.h"

namespace keel::loop {
namespace {

// A listening datagram socket at `name` (a path, or "@x" abstract).
Fd listen_at(const std::string& name) {
  Fd s(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, name.data(), name.size());
  if (name[0] == '@') a.sun_path[0] = '\0';
  EXPECT_EQ(::bind(s.get(), reinterpret_cast<sockaddr*>(&a),
                   static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size())),
            0)
      << std::strerror(errno);
  timeval tv{2, 0};
  ::setsockopt(s.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return s;
}

std::string receive(const Fd& s) {
  char buf[512];
  ssize_t n = ::recv(s.get(), buf, sizeof buf, 0);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

TEST(Notifier, SendsEachStateToThePathSocketAndTakesTheVariables) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "notify").string();
  Fd listener = listen_at(path);
  ::setenv("NOTIFY_SOCKET", path.c_str(), 1);
  ::setenv("WATCHDOG_USEC", "3000000", 1);
  ::setenv("WATCHDOG_PID", std::to_string(::getpid()).c_str(), 1);
  auto n = Notifier::from_environment();
  ASSERT_TRUE(n) << n.error().message();
  EXPECT_TRUE(n->enabled());
  ASSERT_TRUE(n->watchdog_every());
  EXPECT_EQ(n->watchdog_every()->count(), 1500000);
  EXPECT_EQ(std::getenv("NOTIFY_SOCKET"), nullptr) << "unset: a child must not notify for keel";
  EXPECT_EQ(std::getenv("WATCHDOG_USEC"), nullptr);
  ASSERT_TRUE(n->send("READY=1\nSTATUS=observing 3 workloads"));
  EXPECT_EQ(receive(listener), "READY=1\nSTATUS=observing 3 workloads");
  ASSERT_TRUE(n->send("WATCHDOG=1"));
  EXPECT_EQ(receive(listener), "WATCHDOG=1");
  // The manager went away: the error names the socket and the kernel's reason.
  listener.reset();
  std::filesystem::remove(path);
  auto gone = n->send("STOPPING=1");
  ASSERT_FALSE(gone);
  EXPECT_NE(gone.error().message().find(path), std::string::npos) << gone.error().message();
  EXPECT_NE(gone.error().message().find("STOPPING=1"), std::string::npos) << gone.error().message();
}

TEST(Notifier, ReachesAnAbstractSocketAndIgnoresAnotherProcesssWatchdog) {
  const std::string name = "@keel-notify-test-" + std::to_string(::getpid());
  Fd listener = listen_at(name);
  ::setenv("NOTIFY_SOCKET", name.c_str(), 1);
  ::setenv("WATCHDOG_USEC", "1000000", 1);
  ::setenv("WATCHDOG_PID", "1", 1);  // the watchdog is for pid 1, not keel
  auto n = Notifier::from_environment();
  ASSERT_TRUE(n) << n.error().message();
  EXPECT_FALSE(n->watchdog_every());
  ASSERT_TRUE(n->send("STOPPING=1"));
  EXPECT_EQ(receive(listener), "STOPPING=1");
}

TEST(Notifier, RejectsMalformedVariablesAndDoesNothingOutsideSystemd) {
  for (const char* bad : {"relative/path", "@", ""}) {
    ::setenv("NOTIFY_SOCKET", bad, 1);
    auto n = Notifier::from_environment();
    EXPECT_FALSE(n) << "'" << bad << "'";
  }
  for (const char* bad : {"12x", "-5", "0", "99999999999999999999"}) {
    ::setenv("WATCHDOG_USEC", bad, 1);
    auto n = Notifier::from_environment();
    ASSERT_FALSE(n) << "'" << bad << "'";
    EXPECT_NE(n.error().message().find("WATCHDOG_USEC"), std::string::npos);
  }
  ::unsetenv("NOTIFY_SOCKET");
  ::unsetenv("WATCHDOG_USEC");
  ::unsetenv("WATCHDOG_PID");
  auto n = Notifier::from_environment();
  ASSERT_TRUE(n);
  EXPECT_FALSE(n->enabled());
  EXPECT_FALSE(n->watchdog_every());
  EXPECT_TRUE(n->send("READY=1")) << "not under systemd: nothing to do, no error";
}

}  // namespace
}  // namespace keel::loop
