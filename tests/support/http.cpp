#include "tests/support/http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace keel::testing {

HttpReply http_get(uint16_t port, const std::string& target, const std::string& host, int timeout_s) {
  HttpReply r;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return r;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  // What is left of the timeout, for the next connect, write or read (at least 1 us: 0 is "no limit").
  auto limit = [&](int option) {
    auto left =
        std::chrono::duration_cast<std::chrono::microseconds>(deadline - std::chrono::steady_clock::now());
    const long us = std::max<long>(1, left.count());
    timeval tv{us / 1000000, us % 1000000};
    ::setsockopt(fd, SOL_SOCKET, option, &tv, sizeof tv);
  };
  limit(SO_SNDTIMEO);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, host.c_str(), &a.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return r;
  }
  std::string req = "GET " + target + " HTTP/1.0\r\nHost: " + host + "\r\nConnection: close\r\n\r\n";
  if (::write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    ::close(fd);
    return r;
  }
  std::string all;
  char buf[8192];
  for (ssize_t n = 1; n > 0;) {
    limit(SO_RCVTIMEO);
    n = ::read(fd, buf, sizeof buf);
    if (n > 0) all.append(buf, static_cast<size_t>(n));
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) all.clear();  // timed out: no reply
  }
  ::close(fd);
  // "HTTP/1.x 200 OK\r\n...headers...\r\n\r\nbody"
  if (all.size() < 12 || all.compare(0, 5, "HTTP/") != 0) return r;
  r.status = std::atoi(all.c_str() + all.find(' ') + 1);
  auto end = all.find("\r\n\r\n");
  r.body = end == std::string::npos ? "" : all.substr(end + 4);
  return r;
}

std::string url_encode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char b[4];
      std::snprintf(b, sizeof b, "%%%02X", c);
      out += b;
    }
  }
  return out;
}

int listen_on_loopback(uint16_t* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 1) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return fd;
}

uint16_t free_port() {
  uint16_t port = 0;
  int fd = listen_on_loopback(&port);
  if (fd >= 0) ::close(fd);
  return port;
}

}  // namespace keel::testing
