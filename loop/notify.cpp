#include "loop/notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace keel::loop {

namespace {

// $NAME, then unset.
std::optional<std::string> take_env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  std::string s = v;
  ::unsetenv(name);
  return s;
}

std::optional<unsigned long long> whole(const std::string& s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  unsigned long long v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  return v;
}

}  // namespace

Result<Notifier> Notifier::from_environment() {
  Notifier n;
  auto socket_path = take_env("NOTIFY_SOCKET");
  auto usec = take_env("WATCHDOG_USEC");
  auto pid = take_env("WATCHDOG_PID");
  if (usec) {
    auto v = whole(*usec);
    if (!v || *v == 0) return fail("WATCHDOG_USEC is not a positive whole number: '" + *usec + "'");
    bool ours = true;
    if (pid) {
      auto p = whole(*pid);
      if (!p) return fail("WATCHDOG_PID is not a pid: '" + *pid + "'");
      ours = *p == static_cast<unsigned long long>(::getpid());
    }
    if (ours) n.watchdog_ = std::chrono::microseconds(static_cast<long long>(*v / 2));
  }
  if (!socket_path) return n;
  const std::string& p = *socket_path;
  sockaddr_un addr{};
  if (p.size() < 2 || p.size() >= sizeof addr.sun_path || (p[0] != '/' && p[0] != '@'))
    return fail("NOTIFY_SOCKET is not an absolute path or an @abstract name: '" + p + "'");
  n.sock_.reset(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!n.sock_.valid()) return fail("cannot create the notification socket", p, errno);
  n.path_ = p;
  return n;
}

Result<void> Notifier::send(std::string_view message) const {
  if (!sock_.valid()) return {};
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path_.data(), path_.size());
  if (path_[0] == '@') addr.sun_path[0] = '\0';
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path_.size());
  if (::sendto(sock_.get(), message.data(), message.size(), MSG_NOSIGNAL, reinterpret_cast<sockaddr*>(&addr),
               len) < 0)
    return fail("cannot notify systemd (" + std::string(message.substr(0, message.find('\n'))) + ")", path_,
                errno);
  return {};
}

}  // namespace keel::loop
