#include "bpf/features.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <vector>

#include "bpf/libbpf_log.h"
#include "bpf/probe_shared.h"
#include "bpf/skeleton.h"
#include "probe.skel.h"

namespace keel::bpf {

namespace {

constexpr SkeletonOps<keel_probe> kProbe{keel_probe__open_opts, keel_probe__load, keel_probe__attach,
                                         keel_probe__destroy};

Result<Skeleton<keel_probe>> load_attached(AttachKind kind) {
  auto skel = Skeleton<keel_probe>::open(kProbe, "probe");
  if (!skel) return std::unexpected(skel.error());
  bool btf = kind == AttachKind::tp_btf;
  bpf_program__set_autoload((*skel)->progs.keel_probe_switch_btf, btf);
  bpf_program__set_autoload((*skel)->progs.keel_probe_switch_raw, !btf);
  if (auto r = skel->load_and_attach(std::string(to_string(kind)) + " sched_switch program"); !r)
    return std::unexpected(r.error());
  if (auto r = check_map_sizes((*skel)->maps.counts, sizeof(uint32_t), sizeof(uint64_t)); !r)
    return std::unexpected(r.error());
  return skel;
}

// perf_event_open for the calling thread on any CPU: needs no privileges beyond perf_event_paranoid.
Result<void> try_perf_event(uint32_t type, uint64_t config) {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = type;
  attr.config = config;
  attr.disabled = 1;
  attr.exclude_kernel = 1;
  long fd = ::syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
  if (fd < 0)
    return fail("perf_event_open(type " + std::to_string(type) + ", config " + std::to_string(config) + ")",
                "", errno);
  ::close(static_cast<int>(fd));
  return {};
}

}  // namespace

Result<void> hw_pmu_available() { return try_perf_event(PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES); }

const char* to_string(AttachKind k) { return k == AttachKind::tp_btf ? "tp_btf" : "raw_tp"; }

KernelFeatures probe_features(const SysRoots& roots) {
  KernelFeatures f;
  std::error_code ec;
  f.btf = std::filesystem::exists(roots.sys / "kernel/btf/vmlinux", ec);
  for (AttachKind kind : {AttachKind::tp_btf, AttachKind::raw_tp}) {
    auto skel = load_attached(kind);
    bool& ok = kind == AttachKind::tp_btf ? f.tp_btf : f.raw_tp;
    std::string& why = kind == AttachKind::tp_btf ? f.tp_btf_error : f.raw_tp_error;
    ok = skel.has_value();
    if (!skel) why = skel.error().message();
  }
  if (auto r = hw_pmu_available(); r)
    f.hw_pmu = true;
  else
    f.hw_pmu_error = r.error().message();
  if (auto r = try_perf_event(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK); r)
    f.sw_events = true;
  else
    f.sw_events_error = r.error().message();
  if (int fd = bpf_enable_stats(BPF_STATS_RUN_TIME); fd >= 0) {
    f.bpf_stats = true;
    ::close(fd);  // stats stay on only while a descriptor is open
  } else {
    f.bpf_stats_error = Error{errno, "", "bpf(BPF_ENABLE_STATS)"}.message();
  }
  return f;
}

Result<SwitchCounter> SwitchCounter::open(AttachChoice choice) {
  if (choice == AttachChoice::raw_tp) {
    auto s = load_attached(AttachKind::raw_tp);
    if (!s) return std::unexpected(s.error());
    return SwitchCounter(std::move(*s), AttachKind::raw_tp);
  }
  auto s = load_attached(AttachKind::tp_btf);
  if (s) return SwitchCounter(std::move(*s), AttachKind::tp_btf);
  if (choice == AttachChoice::tp_btf) return std::unexpected(s.error());
  auto r = load_attached(AttachKind::raw_tp);  // older kernel or no BTF: the raw_tp fallback
  if (!r)
    return fail("neither tp_btf (" + s.error().message() + ") nor raw_tp (" + r.error().message() +
                ") loads");
  return SwitchCounter(std::move(*r), AttachKind::raw_tp);
}

Result<uint64_t> SwitchCounter::switches() const {
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) return fail("cannot count possible CPUs", "", -ncpu);
  std::vector<uint64_t> per_cpu(static_cast<size_t>(ncpu));
  uint32_t key = KEEL_PROBE_SWITCHES;
  if (bpf_map__lookup_elem(skel_->maps.counts, &key, sizeof key, per_cpu.data(),
                           per_cpu.size() * sizeof(uint64_t), 0) != 0)
    return fail("cannot read the probe's counts map", "", errno);
  uint64_t sum = 0;
  for (auto v : per_cpu) sum += v;
  return sum;
}

}  // namespace keel::bpf
