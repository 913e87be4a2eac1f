// systemd's service notification protocol (sd_notify(3)), without libsystemd: one datagram per state
// change ("READY=1", "STOPPING=1", "WATCHDOG=1", "STATUS=...") to the socket named by $NOTIFY_SOCKET
// (a path, or "@name" in the abstract namespace). Outside a Type=notify unit the variable is unset and
// every call does nothing. The watchdog interval comes from $WATCHDOG_USEC (for this process only when
// $WATCHDOG_PID names it); keel pings at half of it.
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

#include "host/error.h"
#include "host/fd.h"

namespace keel::loop {

class Notifier {
 public:
  // Reads (and unsets, so no child inherits them) $NOTIFY_SOCKET, $WATCHDOG_USEC, $WATCHDOG_PID.
  // A malformed variable is an error; an unset one means "not under systemd".
  static Result<Notifier> from_environment();
  bool enabled() const { return sock_.valid(); }
  // One message ("READY=1\nSTATUS=..."); an error names the socket and the kernel's reason.
  Result<void> send(std::string_view message) const;
  // How often to send WATCHDOG=1: half of $WATCHDOG_USEC; none without a watchdog.
  std::optional<std::chrono::microseconds> watchdog_every() const { return watchdog_; }

 private:
  Fd sock_;
  std::string path_;  // as given ("@..." for the abstract namespace)
  std::optional<std::chrono::microseconds> watchdog_;
};

}  // namespace keel::loop
