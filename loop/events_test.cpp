// Events: a wait ends when the tick is due, or at once when a stop signal comes (and stays stopped);
// the signal arrives as an event, not through a handler, even from another process.
#include "loop/events.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace keel::loop {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

TEST(Events, WaitsUntilTheTickIsDueWithoutPolling) {
  auto e = Events::open();
  ASSERT_TRUE(e) << e.error().message();
  auto start = Clock::now();
  EXPECT_EQ(e->wait_until(start + 50ms), Events::Wake::due);
  EXPECT_GE(Clock::now() - start, 50ms);
  EXPECT_EQ(e->wait_until(start), Events::Wake::due);  // already due: at once
  EXPECT_FALSE(e->stopped());
}

TEST(Events, AStopSignalEndsTheWaitAndStaysStopped) {
  auto e = Events::open();
  ASSERT_TRUE(e);
  const pid_t self = ::getpid();
  std::thread killer([&] {
    std::this_thread::sleep_for(50ms);
    ::kill(self, SIGTERM);  // to the process, as a service manager would
  });
  auto start = Clock::now();
  EXPECT_EQ(e->wait_until(start + 10s), Events::Wake::stop);
  killer.join();
  EXPECT_LT(Clock::now() - start, 5s);
  EXPECT_TRUE(e->stopped());
  EXPECT_EQ(e->stop_signal(), SIGTERM);
  EXPECT_EQ(e->wait_until(Clock::now() + 10s), Events::Wake::stop);
}

}  // namespace
}  // namespace keel::loop
