// keel_floor: the cost floor of keel's sensing (bench/overhead.sh). Attaches bpf/floor.bpf.c's empty
// programs that mirror the keel programs named on the command line (as bpftool names them while keel
// runs: keel_switch_btf -> switch_btf), holds them until SIGINT or SIGTERM, and detaches them.
// --stats: BPF run-time stats on while attached; the programs' run count is printed at exit (the
// events per benchmark operation overhead.sh divides by).
// Usage: keel_floor [--stats] PROGRAM...
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>

#include "bpf/skeleton.h"
#include "floor.skel.h"
#include "host/fd.h"

namespace {

volatile std::sig_atomic_t stop = 0;
void on_signal(int) { stop = 1; }

constexpr keel::bpf::SkeletonOps<keel_floor> kFloor{keel_floor__open_opts, keel_floor__load,
                                                    keel_floor__attach, keel_floor__destroy};

}  // namespace

int main(int argc, char** argv) {
  bool stats = false;
  std::set<std::string> wanted;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--stats")
      stats = true;
    else
      wanted.insert(a.starts_with("keel_") ? a.substr(5) : a);
  }
  if (wanted.empty()) {
    std::fprintf(stderr, "usage: keel_floor [--stats] PROGRAM... (keel's, e.g. switch_btf wakeup_btf)\n");
    return 2;
  }
  auto skel = keel::bpf::Skeleton<keel_floor>::open(kFloor, "floor");
  if (!skel) {
    std::fprintf(stderr, "keel_floor: %s\n", skel.error().message().c_str());
    return 1;
  }
  std::set<std::string> found;
  bpf_program* prog;
  bpf_object__for_each_program(prog, (*skel)->obj) {
    std::string name = bpf_program__name(prog);
    bool on = wanted.contains(name.substr(6));  // "floor_"
    bpf_program__set_autoload(prog, on);
    if (on) found.insert(name.substr(6));
  }
  for (const auto& w : wanted)
    if (!found.contains(w)) {
      std::fprintf(stderr, "keel_floor: no floor program mirrors keel_%s\n", w.c_str());
      return 2;
    }
  if (auto r = skel->load_and_attach("the floor programs"); !r) {
    std::fprintf(stderr, "keel_floor: %s\n", r.error().message().c_str());
    return 1;
  }
  keel::Fd stats_fd;
  if (stats) stats_fd.reset(bpf_enable_stats(BPF_STATS_RUN_TIME));
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::printf("attached:");
  for (const auto& w : found) std::printf(" floor_%s", w.c_str());
  std::printf("\n");
  std::fflush(stdout);
  while (!stop) ::pause();
  if (stats) {
    unsigned long long runs = 0, ns = 0;
    bpf_object__for_each_program(prog, (*skel)->obj) {
      int fd = bpf_program__fd(prog);
      if (fd < 0) continue;
      bpf_prog_info info{};
      uint32_t len = sizeof info;
      if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0) {
        runs += info.run_cnt;
        ns += info.run_time_ns;
      }
    }
    std::printf("runs %llu run_time_ns %llu\n", runs, ns);
  }
  return 0;
}
