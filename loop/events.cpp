#include "loop/events.h"

#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cstdint>

namespace keel::loop {

Result<Events> Events::open(bool hup_reloads) {
  sigset_t stop;
  sigemptyset(&stop);
  // SIGHUP too: a terminal that closes must not end keel without giving the host back.
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop, s);
  if (::pthread_sigmask(SIG_BLOCK, &stop, nullptr) != 0)
    return fail("cannot block the stop signals", "", errno);
  ::signal(SIGPIPE, SIG_IGN);
  Events e;
  e.hup_reloads_ = hup_reloads;
  e.signals_.reset(::signalfd(-1, &stop, SFD_NONBLOCK | SFD_CLOEXEC));
  e.timer_.reset(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
  e.epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!e.signals_.valid() || !e.timer_.valid() || !e.epoll_.valid())
    return fail("cannot set up the signal, timer and epoll descriptors", "", errno);
  for (int fd : {e.signals_.get(), e.timer_.get()}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(e.epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0)
      return fail("cannot watch a descriptor", "", errno);
  }
  return e;
}

Result<void> Events::add(int fd) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0 && errno != EEXIST)  // added before: fine
    return fail("cannot watch a descriptor", "", errno);
  return {};
}

Events::Wake Events::wait_until(std::chrono::steady_clock::time_point t) {
  if (stopped_) return Wake::stop;
  // std::chrono::steady_clock is CLOCK_MONOTONIC: the timer's absolute time is its time point.
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  itimerspec when{};
  when.it_value.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
  when.it_value.tv_nsec = static_cast<long>(ns % 1'000'000'000);
  if (when.it_value.tv_sec == 0 && when.it_value.tv_nsec == 0) when.it_value.tv_nsec = 1;  // 0 disarms
  (void)::timerfd_settime(timer_.get(), TFD_TIMER_ABSTIME, &when, nullptr);
  for (;;) {
    epoll_event ev[4];
    int n = ::epoll_wait(epoll_.get(), ev, 4, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Wake::due;  // cannot wait: go on rather than spin (epoll only fails on bad fds)
    bool due = false, event = false, reload = false;
    for (int i = 0; i < n; ++i) {
      if (ev[i].data.fd == signals_.get()) {
        signalfd_siginfo si{};
        if (::read(signals_.get(), &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
          if (hup_reloads_ && si.ssi_signo == SIGHUP) {
            reload = true;
          } else {
            stopped_ = true;
            signal_ = static_cast<int>(si.ssi_signo);
          }
        }
      } else if (ev[i].data.fd != timer_.get()) {
        event = true;
      } else {
        uint64_t expirations = 0;
        if (::read(timer_.get(), &expirations, sizeof expirations) ==
            static_cast<ssize_t>(sizeof expirations))
          due = true;
      }
    }
    if (stopped_) return Wake::stop;
    if (reload) return Wake::reload;
    if (due) return Wake::due;
    if (event) return Wake::event;
  }
}

}  // namespace keel::loop
