// A minimal HTTP/1.0 client for tests: GET from a loopback server (keel's metrics, Prometheus's API).
#pragma once

#include <cstdint>
#include <string>

namespace keel::testing {

struct HttpReply {
  int status = 0;  // 0: no connection or no reply
  std::string body;
};

// Gives up (status 0) when the whole exchange takes longer than `timeout_s`.
HttpReply http_get(uint16_t port, const std::string& target, const std::string& host = "127.0.0.1",
                   int timeout_s = 10);
std::string url_encode(const std::string& s);
// A TCP port on 127.0.0.1 free right now (bound, read, closed).
uint16_t free_port();
// A socket listening on 127.0.0.1 at a free port (the port in *port); -1 on failure. For "port taken".
int listen_on_loopback(uint16_t* port);

}  // namespace keel::testing
