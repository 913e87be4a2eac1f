#include "bpf/libbpf_log.h"

#include <bpf/libbpf.h>

#include <cstdarg>
#include <cstdio>
#include <mutex>

namespace keel::bpf {

namespace {

// libbpf prints through one global callback; keep its recent lines so a failed load can say why,
// instead of spraying warnings on stderr while probing.
std::mutex g_log_mu;
std::string g_log;

int libbpf_log(enum libbpf_print_level level, const char* fmt, va_list args) {
  if (level == LIBBPF_DEBUG) return 0;
  char buf[1024];
  int n = std::vsnprintf(buf, sizeof buf, fmt, args);
  std::lock_guard lock(g_log_mu);
  g_log += buf;
  if (g_log.size() > 4096) g_log.erase(0, g_log.size() - 4096);
  return n;
}

}  // namespace

void install_log() {
  static std::once_flag once;
  std::call_once(once, [] { libbpf_set_print(libbpf_log); });
  std::lock_guard lock(g_log_mu);
  g_log.clear();
}

std::string last_log_line() {
  std::lock_guard lock(g_log_mu);
  std::string s = g_log;
  while (!s.empty() && s.back() == '\n') s.pop_back();
  auto nl = s.rfind('\n');
  return nl == std::string::npos ? s : s.substr(nl + 1);
}

}  // namespace keel::bpf
