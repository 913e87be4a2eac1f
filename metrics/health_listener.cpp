// The health listener: /healthz and /readyz on an address of their own, served by one thread over
// non-blocking sockets, so that clients of the metrics endpoint (anyone on the node, with the DaemonSet's
// hostNetwork) cannot starve the liveness probe and get keel restarted (issue 38: 300 silent
// connections to the metrics port held /healthz for 27-32 s).
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <thread>

#include "metrics/listen.h"
#include "metrics/metrics.h"

namespace keel::metrics {

namespace {

using Clock = std::chrono::steady_clock;

struct Client {
  int fd = -1;
  Clock::time_point deadline;
  std::string request;
};

std::string response(const Health* h, std::string_view request) {
  auto answer = [](int status, const std::string& body) {
    const char* reason = status == 200   ? "OK"
                         : status == 404 ? "Not Found"
                         : status == 405 ? "Method Not Allowed"
                         : status == 400 ? "Bad Request"
                                         : "Service Unavailable";
    return "HTTP/1.1 " + std::to_string(status) + " " + reason +
           "\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n" + body;
  };
  const std::string_view line = request.substr(0, request.find_first_of("\r\n"));
  const size_t sp1 = line.find(' '), sp2 = line.find(' ', sp1 == std::string_view::npos ? 0 : sp1 + 1);
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos) return answer(400, "bad request\n");
  const std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  target = target.substr(0, target.find('?'));
  if (method != "GET" && method != "HEAD") return answer(405, "GET /healthz or /readyz\n");
  const bool live = target == "/healthz", ready = target == "/readyz";
  if (!live && !ready) return answer(404, "this listener serves /healthz and /readyz only\n");
  if (h == nullptr) return answer(503, "starting\n");
  const Health::Answer a = live ? h->healthz() : h->readyz();
  return answer(a.status, a.body + "\n");
}

}  // namespace

struct HealthListener::State {
  std::string address;
  int listen_fd = -1, wake_fd = -1;
  std::atomic<const Health*> health{nullptr};
  std::thread thread;

  void run() {
    std::deque<Client> clients;  // oldest first
    std::vector<pollfd> fds;
    auto close_client = [&](size_t i) {
      ::close(clients[i].fd);
      clients.erase(clients.begin() + static_cast<std::ptrdiff_t>(i));
    };
    for (;;) {
      const auto now = Clock::now();
      int timeout_ms = 1000;
      for (const Client& c : clients)
        timeout_ms = std::min<int>(
            timeout_ms,
            static_cast<int>(std::max<int64_t>(
                0, std::chrono::duration_cast<std::chrono::milliseconds>(c.deadline - now).count() + 1)));
      fds.assign({{wake_fd, POLLIN, 0}, {listen_fd, POLLIN, 0}});
      for (const Client& c : clients) fds.push_back({c.fd, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) return;
      if (fds[0].revents != 0) return;  // stopping
      // Requests first (of the clients polled), then the ones past their deadline, then new ones.
      for (size_t i = clients.size(); i-- > 0;) {
        if (fds[i + 2].revents == 0) continue;
        Client& c = clients[i];
        char buf[kMaxHealthRequest];
        const ssize_t n = ::recv(c.fd, buf, kMaxHealthRequest - c.request.size(), MSG_DONTWAIT);
        if (n <= 0) {
          if (n == 0 || (errno != EAGAIN && errno != EINTR)) close_client(i);
          continue;
        }
        c.request.append(buf, static_cast<size_t>(n));
        const bool whole =
            c.request.find("\r\n\r\n") != std::string::npos || c.request.find("\n\n") != std::string::npos;
        if (!whole && c.request.size() < kMaxHealthRequest) continue;
        const std::string out = response(health.load(), c.request);
        (void)::send(c.fd, out.data(), out.size(), MSG_DONTWAIT | MSG_NOSIGNAL);  // small: one write
        close_client(i);
      }
      const auto after = Clock::now();
      for (size_t i = clients.size(); i-- > 0;)
        if (clients[i].deadline <= after) close_client(i);
      for (;;) {
        const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        if (clients.size() >= kMaxHealthClients) close_client(0);  // the oldest makes room
        clients.push_back({fd, Clock::now() + kHealthRequestTimeout, {}});
      }
    }
  }
};

Result<std::unique_ptr<HealthListener>> HealthListener::listen(const std::string& address) {
  auto where = resolve_listen(address, /*ipv6=*/true);
  if (!where) return std::unexpected(where.error());
  auto st = std::make_unique<State>();
  st->address = where->numeric;
  st->listen_fd = ::socket(where->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (st->listen_fd < 0) return fail("cannot listen on " + where->numeric, "", errno);
  int one = 1;
  ::setsockopt(st->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(st->listen_fd, reinterpret_cast<const sockaddr*>(&where->sa), where->len) != 0 ||
      ::listen(st->listen_fd, 128) != 0) {
    const int err = errno;
    ::close(st->listen_fd);
    return fail("cannot listen on " + where->numeric + ": " + std::strerror(err));
  }
  st->wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (st->wake_fd < 0) {
    const int err = errno;
    ::close(st->listen_fd);
    return fail("cannot make the health listener's wake-up: " + std::string(std::strerror(err)));
  }
  State* s = st.get();
  st->thread = std::thread([s] { s->run(); });
  return std::unique_ptr<HealthListener>(new HealthListener(std::move(st)));
}

HealthListener::HealthListener(std::unique_ptr<State> s) : s_(std::move(s)) {}

HealthListener::~HealthListener() {
  if (!s_) return;
  const uint64_t one = 1;
  (void)!::write(s_->wake_fd, &one, sizeof one);
  if (s_->thread.joinable()) s_->thread.join();
  ::close(s_->wake_fd);
  ::close(s_->listen_fd);
}

void HealthListener::serve(const Health* health) { s_->health.store(health); }

std::string HealthListener::address() const { return s_->address; }

}  // namespace keel::metrics
