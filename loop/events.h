// What keel waits for between ticks, in one place: the next tick's time (a timerfd), a stop signal
// (SIGINT, SIGTERM; SIGHUP too unless it means reload), taken through a signalfd, never a handler, and
// more sources (a BPF ring buffer's fd). keel blocks in epoll until one of them is ready: it never polls.
#pragma once

#include <chrono>
#include <optional>

#include "host/error.h"
#include "host/fd.h"

namespace keel::loop {

class Events {
 public:
  // Blocks the stop signals in the calling thread and ignores SIGPIPE. Call it before any other
  // thread starts (the metrics server's), so every thread inherits the mask and a stop signal only
  // ever arrives here.
  // `hup_reloads`: SIGHUP wakes with Wake::reload (keel run) instead of stopping (keel plan, top).
  static Result<Events> open(bool hup_reloads = false);

  // One more descriptor to wake for (a BPF ring buffer's epoll fd): wait_until returns `event` when
  // it is readable (and the time is not due yet). The caller drains it.
  Result<void> add(int fd);

  enum class Wake { due, stop, event, reload };
  // Sleeps until `t` (steady clock), a stop signal or an added descriptor, whichever comes first.
  // After a stop, every call returns stop at once.
  Wake wait_until(std::chrono::steady_clock::time_point t);
  bool stopped() const { return stopped_; }
  int stop_signal() const { return signal_; }  // which one, once stopped

 private:
  Events() = default;
  Fd epoll_, timer_, signals_;
  bool stopped_ = false;
  bool hup_reloads_ = false;
  int signal_ = 0;
};

}  // namespace keel::loop
