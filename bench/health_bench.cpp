// How long a liveness probe waits for /healthz while clients hold silent connections open: on the
// metrics endpoint (civetweb's 32 workers, which the probe shared before issue 38) and on the health
// listener (daemon.health_listen), in the same run, for 0, 50 and 300 silent clients on each.
//   build/bench/keel_health_bench
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "metrics/metrics.h"
#include "tests/support/http.h"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

int silent_client(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Seconds until GET /healthz on `port` answered (the probe's own give-up: 60 s), and its status.
std::pair<double, int> probe(uint16_t port) {
  const auto t0 = Clock::now();
  auto r = keel::testing::http_get(port, "/healthz", "127.0.0.1", 60);
  return {std::chrono::duration<double>(Clock::now() - t0).count(), r.status};
}

}  // namespace

int main() {
  keel::metrics::Setup setup;
  setup.mode = "observe";
  setup.version = "bench";
  keel::metrics::Metrics m(setup);
  keel::metrics::Health h(1s);
  std::printf("%-8s %-34s %12s %7s %14s\n", "silent", "where /healthz is asked", "answer ms", "status",
              "vs no clients");
  double base[2] = {0, 0};
  for (int silent : {0, 50, 300}) {
    const uint16_t mport = keel::testing::free_port();
    auto e = keel::metrics::Endpoint::listen("127.0.0.1:" + std::to_string(mport));
    const uint16_t hport = keel::testing::free_port();
    auto l = keel::metrics::HealthListener::listen("127.0.0.1:" + std::to_string(hport));
    if (!e || !l) {
      std::fprintf(stderr, "cannot listen\n");
      return 1;
    }
    (*e)->serve(m, &h);
    (*l)->serve(&h);
    const uint16_t ports[2] = {mport, hport};
    const char* names[2] = {"metrics endpoint (before)", "health listener (after)"};
    for (int which = 0; which < 2; ++which) {
      std::vector<int> fds;
      for (int i = 0; i < silent; ++i) fds.push_back(silent_client(ports[which]));
      h.ticked(true, keel::metrics::Health::Clock::now() + 60s);  // healthy through the wait
      auto [s, status] = probe(ports[which]);
      if (silent == 0) base[which] = s;
      std::printf("%-8d %-34s %12.2f %7d %13.0fx\n", silent, names[which], s * 1e3, status,
                  base[which] > 0 ? s / base[which] : 1.0);
      for (int fd : fds)
        if (fd >= 0) ::close(fd);
    }
  }
  return 0;
}
