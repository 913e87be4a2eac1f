// keel_pingpong: two processes pass one byte back and forth over two pipes, each pinned to its own CPU
// (the same CPU for both is perf bench sched pipe pinned). Every round trip is two wakeups and two
// switches on each side. Prints "<round trips per second> ops/sec". Usage: keel_pingpong LOOPS CPU_A CPU_B
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace {

bool pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return ::sched_setaffinity(0, sizeof set, &set) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: keel_pingpong LOOPS CPU_A CPU_B\n");
    return 2;
  }
  const long loops = std::atol(argv[1]);
  const int a = std::atoi(argv[2]), b = std::atoi(argv[3]);
  int there[2], back[2];
  if (::pipe(there) != 0 || ::pipe(back) != 0) return 1;
  pid_t child = ::fork();
  if (child < 0) return 1;
  char c = 0;
  if (child == 0) {
    if (!pin(b)) _exit(1);
    for (long i = 0; i < loops; ++i)
      if (::read(there[0], &c, 1) != 1 || ::write(back[1], &c, 1) != 1) _exit(1);
    _exit(0);
  }
  if (!pin(a)) {
    std::perror("sched_setaffinity");
    return 1;
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < loops; ++i)
    if (::write(there[1], &c, 1) != 1 || ::read(back[0], &c, 1) != 1) return 1;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int st = 0;
  ::waitpid(child, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) return 1;
  std::printf("%.0f ops/sec\n", static_cast<double>(loops) / s);
  return 0;
}
