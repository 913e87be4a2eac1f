// keel_pieces: what each piece of a sched_switch program costs on this machine (bpf/pieces.bpf.c).
// Each round attaches every piece in turn, alone, on tp_btf/sched_switch and times it over one
// `perf bench sched pipe` pinned to CPU 0 with BPF run-time stats on (ns per run: the program's own
// time, the stats' two clock reads included, so every figure holds `empty`). Rounds interleave the
// pieces so the VM's drift hits all alike; medians; each piece also as its median above `empty`.
// Then how stale the run queue's clock is at switch-in. Needs root. Usage: keel_pieces [ROUNDS] [LOOPS]
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "bpf/skeleton.h"
#include "host/fd.h"
#include "pieces.skel.h"

namespace {

constexpr keel::bpf::SkeletonOps<keel_pieces> kPieces{keel_pieces__open_opts, keel_pieces__load,
                                                      keel_pieces__attach, keel_pieces__destroy};

struct Runs {
  unsigned long long ns = 0, count = 0;
};

Runs runs_of(bpf_program* p) {
  bpf_prog_info info{};
  uint32_t len = sizeof info;
  if (bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &len) != 0) return {};
  return {info.run_time_ns, info.run_cnt};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

struct Staleness {
  long long min;
  unsigned long long n, over_200ns, over_1us, over_5us;
};

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
  const long loops = argc > 2 ? std::atol(argv[2]) : 100000;
  if (::geteuid() != 0) {
    std::fprintf(stderr, "keel_pieces: needs root (loads BPF)\n");
    return 1;
  }
  auto skel = keel::bpf::Skeleton<keel_pieces>::open(kPieces, "pieces");
  if (!skel) {
    std::fprintf(stderr, "keel_pieces: %s\n", skel.error().message().c_str());
    return 1;
  }
  if (keel_pieces__load(skel->get()) != 0) {
    std::fprintf(stderr, "keel_pieces: cannot load: %s\n", keel::bpf::last_log_line().c_str());
    return 1;
  }
  keel::Fd stats(bpf_enable_stats(BPF_STATS_RUN_TIME));
  if (!stats.valid()) {
    std::fprintf(stderr, "keel_pieces: cannot turn BPF run-time stats on\n");
    return 1;
  }
  const std::string bench =
      "taskset -c 0 perf bench sched pipe -l " + std::to_string(loops) + " >/dev/null 2>&1";
  std::vector<bpf_program*> progs;
  bpf_program* p;
  bpf_object__for_each_program(p, (*skel)->obj) progs.push_back(p);
  std::map<std::string, std::vector<double>> ns;
  std::vector<double> stale_pct[3];  // per round: % of switch-ins behind by > 200 ns, 1 us, 5 us
  unsigned long long stale_n = 0;
  for (int r = 0; r < rounds; ++r) {
    for (bpf_program* prog : progs) {
      bpf_link* link = bpf_program__attach(prog);
      if (link == nullptr) {
        std::fprintf(stderr, "keel_pieces: cannot attach %s\n", bpf_program__name(prog));
        return 1;
      }
      const bool stale = std::string(bpf_program__name(prog)) == "piece_stale";
      const uint32_t zero = 0;
      Staleness fresh{};
      if (stale)  // its least offset is this round's: the two clocks drift apart over minutes
        (void)bpf_map__update_elem((*skel)->maps.stale_stats, &zero, sizeof zero, &fresh, sizeof fresh, 0);
      Runs a = runs_of(prog);
      if (std::system(bench.c_str()) != 0) {
        std::fprintf(stderr, "keel_pieces: `%s` failed\n", bench.c_str());
        return 1;
      }
      Runs b = runs_of(prog);
      bpf_link__destroy(link);
      Staleness st{};
      if (stale &&
          bpf_map__lookup_elem((*skel)->maps.stale_stats, &zero, sizeof zero, &st, sizeof st, 0) == 0 &&
          st.n > 0) {
        auto pct = [&](unsigned long long k) {
          return 100.0 * static_cast<double>(k) / static_cast<double>(st.n);
        };
        stale_pct[0].push_back(pct(st.over_200ns));
        stale_pct[1].push_back(pct(st.over_1us));
        stale_pct[2].push_back(pct(st.over_5us));
        stale_n += st.n;
      }
      if (b.count > a.count)
        ns[bpf_program__name(prog)].push_back(static_cast<double>(b.ns - a.ns) /
                                              static_cast<double>(b.count - a.count));
    }
  }
  const double empty = median(ns["piece_empty"]);
  std::printf("| piece | ns per run (median of %d) | above empty |\n|---|---|---|\n", rounds);
  for (bpf_program* prog : progs) {
    const std::string name = bpf_program__name(prog);
    const double m = median(ns[name]);
    std::printf("| %s | %.0f | %+.0f |\n", name.substr(6).c_str(), m, m - empty);
  }
  if (stale_n > 0)
    std::printf(
        "\nrun queue clock at switch-in, behind the real one by more than its least in the round (median "
        "of rounds): 200 ns %.1f%%, 1 us %.1f%%, 5 us %.1f%% (%llu switches)\n",
        median(stale_pct[0]), median(stale_pct[1]), median(stale_pct[2]), stale_n);
  return 0;
}
