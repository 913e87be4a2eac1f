// A test helper for reads that must not block on a FIFO.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <future>

#include "host/fd.h"

namespace keel::testing {

// Runs `read`; if it is still blocked (on the FIFO at `fifo`) after 10 s, fails and lets it go by
// opening the FIFO's other end, so a regression fails instead of hanging the suite.
template <class F>
auto without_hanging_on(const std::filesystem::path& fifo, F read) {
  auto done = std::async(std::launch::async, read);
  if (done.wait_for(std::chrono::seconds(10)) == std::future_status::timeout) {
    ADD_FAILURE() << "blocked on the FIFO " << fifo;
    Fd w(::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
  }
  return done.get();
}

}  // namespace keel::testing
