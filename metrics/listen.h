// Inside the metrics module: where a listen address ("host:port", ":port", "[v6]:port") binds, for the
// metrics endpoint (civetweb) and the health listener alike.
#pragma once

#include <sys/socket.h>

#include <string>

#include "host/error.h"

namespace keel::metrics {

struct Resolved {
  sockaddr_storage sa{};
  socklen_t len = 0;
  std::string numeric;  // "127.0.0.1:9477", "[::1]:9477"
};

// `address` resolved (a name to its IPv4 address unless `ipv6`), or why it cannot be bound: a taken port,
// an address no interface has, a port below 1024 without privileges, IPv6 where `ipv6` is false.
Result<Resolved> resolve_listen(const std::string& address, bool ipv6);

}  // namespace keel::metrics
