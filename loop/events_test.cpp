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

// An added descriptor (the BPF ring buffer's, a pipe here) ends the wait when it becomes readable,
// before the tick is due; a due tick wins over it.
TEST(Events, AnAddedDescriptorEndsTheWaitWhenReadable) {
  auto e = Events::open();
  ASSERT_TRUE(e);
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  ASSERT_TRUE(e->add(p[0]));
  std::thread writer([&] {
    std::this_thread::sleep_for(50ms);
    (void)!::write(p[1], "x", 1);
  });
  auto start = Clock::now();
  EXPECT_EQ(e->wait_until(start + 10s), Events::Wake::event);
  writer.join();
  EXPECT_LT(Clock::now() - start, 5s);
  // Still readable (not drained) and the time due: the tick comes first.
  EXPECT_EQ(e->wait_until(Clock::now()), Events::Wake::due);
  char c;
  ASSERT_EQ(::read(p[0], &c, 1), 1);
  EXPECT_EQ(e->wait_until(Clock::now() + 30ms), Events::Wake::due);
  ::close(p[0]);
  ::close(p[1]);
}

}  // namespace
}  // namespace keel::loop
