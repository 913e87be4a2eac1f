#include "bpf/sched_sensor.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/perf_event.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <utility>

#include "bpf/features.h"
#include "bpf/libbpf_log.h"
#include "sched.skel.h"

namespace keel::bpf {

namespace {

static_assert(sizeof(keel_cg_key) == 16);
static_assert(KEEL_HIST_BUCKETS <= KEEL_HIST_SLOTS);

int v1_controller_of(const CgroupHierarchy& h) {
  if (h.unified) return KEEL_V1_NONE;
  if (h.has("cpu")) return KEEL_V1_CPU;
  if (h.has("cpuset")) return KEEL_V1_CPUSET;
  if (h.has("cpuacct")) return KEEL_V1_CPUACCT;
  return -1;
}

constexpr SkeletonOps<keel_sched> kSched{keel_sched__open_opts, keel_sched__load, keel_sched__attach,
                                         keel_sched__destroy};

Result<Skeleton<keel_sched>> load(const SchedConfig& cfg, AttachKind kind) {
  auto opened = Skeleton<keel_sched>::open(kSched, "sched");
  if (!opened) return std::unexpected(opened.error());
  keel_sched* skel = opened->get();
  int ctl = v1_controller_of(cfg.hierarchy);
  skel->rodata->hierarchy_id = cfg.hierarchy.id;
  skel->rodata->v1_controller = ctl;
  for (size_t c = 0; c < std::min<size_t>(cfg.llc_of_cpu.size(), KEEL_MAX_CPUS); ++c)
    skel->rodata->llc_of_cpu[c] = cfg.llc_of_cpu[c];
  for (size_t c = 0; c < std::min<size_t>(cfg.node_of_cpu.size(), KEEL_MAX_CPUS); ++c)
    skel->rodata->node_of_cpu[c] = cfg.node_of_cpu[c];
  bpf_map__set_max_entries(skel->maps.cg_stats, cfg.max_cgroups);
  // raw_tp programs have no task storage to cache a slot in: their hot maps stay at one entry, unused.
  const uint32_t hot = kind == AttachKind::tp_btf ? std::max(1u, cfg.hot_slots) : 1;
  bpf_map__set_max_entries(skel->maps.cg_hot, hot);
  bpf_map__set_max_entries(skel->maps.cg_hot_of, hot);
  bool btf = kind == AttachKind::tp_btf;
  for (bpf_program* p : {skel->progs.keel_wakeup_btf, skel->progs.keel_wakeup_new_btf,
                         skel->progs.keel_switch_btf, skel->progs.keel_migrate_btf})
    bpf_program__set_autoload(p, btf);
  for (bpf_program* p : {skel->progs.keel_wakeup_raw, skel->progs.keel_wakeup_new_raw,
                         skel->progs.keel_switch_raw, skel->progs.keel_migrate_raw})
    bpf_program__set_autoload(p, !btf);
  skel->rodata->n_counters = static_cast<uint32_t>(cfg.counters.size());
  bpf_map__set_max_entries(
      skel->maps.counter_events,
      static_cast<uint32_t>(std::max(1, libbpf_num_possible_cpus()) * KEEL_MAX_COUNTERS));
  bpf_map__set_autocreate(skel->maps.task_stamps, btf);
  bpf_map__set_autocreate(skel->maps.pid_stamps, !btf);
  if (auto r = opened->load_and_attach(std::string("the ") + to_string(kind) + " sched programs"); !r)
    return std::unexpected(r.error());
  // What user space reads must be what the object was compiled with.
  for (auto r : {check_map_sizes(skel->maps.cg_stats, sizeof(keel_cg_key), sizeof(keel_cg_stats)),
                 check_map_sizes(skel->maps.cg_hot, sizeof(uint32_t), sizeof(keel_cg_hot)),
                 check_map_sizes(skel->maps.cg_hot_of, sizeof(keel_cg_key), sizeof(uint32_t)),
                 check_map_sizes(skel->maps.errors, sizeof(uint32_t), sizeof(uint64_t)),
                 check_map_sizes(skel->maps.slo_watch, sizeof(keel_cg_key), sizeof(keel_slo_watch)),
                 check_map_sizes(skel->maps.counter_events, sizeof(uint32_t), sizeof(uint32_t))})
    if (!r) return std::unexpected(r.error());
  return opened;
}

uint64_t sum_percpu(bpf_map* map, uint32_t slot) {
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) return 0;
  std::vector<uint64_t> v(static_cast<size_t>(ncpu));
  if (bpf_map__lookup_elem(map, &slot, sizeof slot, v.data(), v.size() * sizeof(uint64_t), 0) != 0) return 0;
  uint64_t s = 0;
  for (auto x : v) s += x;
  return s;
}

}  // namespace

double RqHistogram::bucket_lower_us(unsigned i) {
  if (i < KEEL_HIST_SUB) return i;
  unsigned p = KEEL_HIST_SUB_BITS + (i - KEEL_HIST_SUB) / KEEL_HIST_SUB;
  unsigned sub = (i - KEEL_HIST_SUB) % KEEL_HIST_SUB;
  return std::ldexp(1.0, static_cast<int>(p)) +
         sub * std::ldexp(1.0, static_cast<int>(p - KEEL_HIST_SUB_BITS));
}

double RqHistogram::bucket_upper_us(unsigned i) {
  if (i + 1 >= KEEL_HIST_BUCKETS) return std::ldexp(1.0, KEEL_HIST_MAX_POW);
  return bucket_lower_us(i + 1);
}

unsigned RqHistogram::bucket_of_us(double us) {
  if (us < KEEL_HIST_SUB) return us < 0 ? 0 : static_cast<unsigned>(us);
  auto v = static_cast<uint64_t>(us);
  unsigned p = 63 - static_cast<unsigned>(__builtin_clzll(v));
  if (p >= KEEL_HIST_MAX_POW) return KEEL_HIST_BUCKETS - 1;
  unsigned sub = static_cast<unsigned>(v >> (p - KEEL_HIST_SUB_BITS)) & (KEEL_HIST_SUB - 1);
  return KEEL_HIST_SUB + (p - KEEL_HIST_SUB_BITS) * KEEL_HIST_SUB + sub;
}

double RqHistogram::quantile_us(double q) const {
  uint64_t total = 0;
  for (auto b : buckets) total += b;
  if (total == 0) return 0;
  double target = std::clamp(q, 0.0, 1.0) * static_cast<double>(total);
  double cum = 0;
  for (unsigned i = 0; i < KEEL_HIST_BUCKETS; ++i) {
    if (buckets[i] == 0) continue;
    double next = cum + static_cast<double>(buckets[i]);
    if (next >= target) {
      double frac = (target - cum) / static_cast<double>(buckets[i]);
      return bucket_lower_us(i) + frac * (bucket_upper_us(i) - bucket_lower_us(i));
    }
    cum = next;
  }
  return bucket_upper_us(KEEL_HIST_BUCKETS - 1);
}

RqHistogram& RqHistogram::operator+=(const RqHistogram& o) {
  for (size_t i = 0; i < buckets.size(); ++i)
    buckets[i] = static_cast<uint32_t>(std::min<uint64_t>(uint64_t{buckets[i]} + o.buckets[i], UINT32_MAX));
  count += o.count;
  sum_ns += o.sum_ns;
  return *this;
}

namespace {

// One counting perf event per (possible CPU, counter), all tasks on that CPU, in the program's
// array at cpu * KEEL_MAX_COUNTERS + counter.
Result<std::vector<Fd>> open_counters(keel_sched* skel, const std::vector<PerfCounter>& counters) {
  std::vector<Fd> fds;
  auto give_up = [](Error e) { return std::unexpected(std::move(e)); };
  int ncpu = libbpf_num_possible_cpus();
  int map_fd = bpf_map__fd(skel->maps.counter_events);
  for (int cpu = 0; cpu < ncpu; ++cpu) {
    for (size_t k = 0; k < counters.size(); ++k) {
      const PerfCounter& c = counters[k];
      perf_event_attr attr{};
      attr.size = sizeof attr;
      attr.type = c.type;
      attr.config = c.config;
      long fd = ::syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
      if (fd < 0) {
        int e = errno;
        if ((e == ENODEV || e == ENOENT) && k == 0) break;  // a possible CPU that is not online
        return give_up(Error{e, "",
                             std::string("perf_event_open(") + c.name + ", type " + std::to_string(c.type) +
                                 ", config " + std::to_string(c.config) + ") on CPU " + std::to_string(cpu)});
      }
      fds.emplace_back(static_cast<int>(fd));
      uint32_t key = static_cast<uint32_t>(cpu * KEEL_MAX_COUNTERS) + static_cast<uint32_t>(k);
      int v = static_cast<int>(fd);
      if (int rc = bpf_map_update_elem(map_fd, &key, &v, BPF_ANY); rc != 0)
        return give_up(
            Error{-rc, "",
                  "cannot store the perf event " + std::string(c.name) + " of CPU " + std::to_string(cpu)});
    }
  }
  return fds;
}

}  // namespace

std::vector<PerfCounter> hardware_counters() {
  return {{PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES, "cache-misses"},
          {PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_REFERENCES, "cache-references"},
          {PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS, "instructions"},
          {PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, "cycles"}};
}

struct SchedSensor::Ring {
  ring_buffer* rb = nullptr;
  std::vector<SloEvent> got;
  Ring() = default;
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;
  ~Ring() {
    if (rb != nullptr) ring_buffer__free(rb);
  }
  static int on_event(void* ctx, void* data, size_t size) {
    if (size < sizeof(keel_slo_event)) return 0;
    keel_slo_event e;
    std::memcpy(&e, data, sizeof e);
    auto* r = static_cast<Ring*>(ctx);
    if (r->got.size() < 1024)
      r->got.push_back({{e.key.hierarchy, e.key.cgroup_id}, e.at_ns, e.wait_ns, e.over});
    return 0;
  }
};

Result<SchedSensor> SchedSensor::open(const SchedConfig& cfg) {
  if (cfg.counters.size() > KEEL_MAX_COUNTERS)
    return fail("at most " + std::to_string(KEEL_MAX_COUNTERS) + " perf counters per switch, " +
                std::to_string(cfg.counters.size()) + " asked");
  auto sensor = open_programs(cfg);
  if (!sensor) return sensor;
  if (!cfg.counters.empty()) {
    auto fds = open_counters(sensor->skel_.get(), cfg.counters);
    if (!fds) return std::unexpected(fds.error());
    sensor->counter_fds_ = std::move(*fds);
  }
  if (cfg.stats == BpfStats::always) sensor->update_stats();
  auto ring = std::make_shared<Ring>();
  ring->rb =
      ring_buffer__new(bpf_map__fd(sensor->skel_->maps.slo_events), &Ring::on_event, ring.get(), nullptr);
  if (ring->rb == nullptr) return fail("cannot open the SLO events' ring buffer", "", errno);
  sensor->ring_ = std::move(ring);
  return sensor;
}

Result<void> SchedSensor::watch(const std::vector<SloWatch>& w) {
  std::vector<SloWatch> want(w.begin(),
                             w.begin() + static_cast<long>(std::min<size_t>(w.size(), KEEL_SLO_WATCH_MAX)));
  if (want == watched_) return {};
  const int fd = bpf_map__fd(skel_->maps.slo_watch);
  auto key_of = [](const CgroupId& id) {
    keel_cg_key k{};
    k.hierarchy = id.hierarchy;
    k.cgroup_id = id.inode;
    return k;
  };
  for (const auto& old : watched_)
    if (std::none_of(want.begin(), want.end(), [&](const SloWatch& x) { return x.id == old.id; })) {
      keel_cg_key k = key_of(old.id);
      (void)bpf_map_delete_elem(fd, &k);
    }
  for (const auto& x : want) {
    if (std::find(watched_.begin(), watched_.end(), x) != watched_.end()) continue;  // as it is
    keel_cg_key k = key_of(x.id);
    keel_slo_watch v{};
    v.slo_ns = x.slo_ns;
    v.window_ns = x.window_ns;
    v.threshold = x.threshold;
    v.long_us = x.long_us;
    if (bpf_map_update_elem(fd, &k, &v, BPF_ANY) != 0)
      return fail("cannot watch the SLO of cgroup " + std::to_string(x.id.inode), "", errno);
  }
  watched_ = std::move(want);
  skel_->bss->slo_watching = watched_.empty() ? 0 : 1;
  return {};
}

int SchedSensor::events_fd() const { return ring_ ? ring_buffer__epoll_fd(ring_->rb) : -1; }

std::vector<SloEvent> SchedSensor::take_events() {
  if (!ring_) return {};
  (void)ring_buffer__consume(ring_->rb);
  std::vector<SloEvent> out;
  out.swap(ring_->got);
  return out;
}

// Called at open and after every read: closes a finished window (its cost becomes cost()) and
// decides whether stats stay on for the next interval.
void SchedSensor::update_stats() {
  auto now = std::chrono::steady_clock::now();
  if (stats_fd_.valid()) {
    uint64_t run_ns = 0, runs = 0;
    for (const auto& p : prog_stats()) {
      run_ns += p.run_time_ns;
      runs += p.run_count;
    }
    double secs = std::chrono::duration<double>(now - win_start_).count();
    if (runs > win_runs_ && secs > 0)
      cost_ = BpfCost{static_cast<double>(run_ns - win_run_ns_) / static_cast<double>(runs - win_runs_),
                      static_cast<double>(runs - win_runs_) / secs};
    if (stats_ == BpfStats::sampled) {
      stats_fd_.reset();
    }
  } else if (stats_ == BpfStats::always ||
             (stats_ == BpfStats::sampled && reads_ % stats_every_ == 1 % stats_every_)) {
    // Sampled: the second interval (the first is often a partial one) and every `stats_every` after.
    stats_fd_.reset(bpf_enable_stats(BPF_STATS_RUN_TIME));  // -1 (no stats) on kernels without it
  }
  if (stats_fd_.valid()) {
    win_run_ns_ = win_runs_ = 0;
    for (const auto& p : prog_stats()) {
      win_run_ns_ += p.run_time_ns;
      win_runs_ += p.run_count;
    }
    win_start_ = std::chrono::steady_clock::now();
  }
}

Result<SchedSensor> SchedSensor::open_programs(const SchedConfig& cfg) {
  if (v1_controller_of(cfg.hierarchy) < 0)
    return fail("hierarchy " + cfg.hierarchy.name() + " has none of cpu, cpuset, cpuacct: cannot key by it");
  if (cfg.attach != AttachChoice::raw_tp) {
    auto s = load(cfg, AttachKind::tp_btf);
    if (s) return SchedSensor(std::move(*s), AttachKind::tp_btf, cfg);
    if (cfg.attach == AttachChoice::tp_btf) return std::unexpected(s.error());
  }
  auto r = load(cfg, AttachKind::raw_tp);
  if (!r) return std::unexpected(r.error());
  return SchedSensor(std::move(*r), AttachKind::raw_tp, cfg);
}

std::vector<ProgStats> SchedSensor::prog_stats() const {
  std::vector<ProgStats> out;
  bpf_program* prog;
  bpf_object__for_each_program(prog, skel_->obj) {
    int fd = bpf_program__fd(prog);
    if (fd < 0) continue;  // not loaded (the other attach variant)
    bpf_prog_info info{};
    uint32_t len = sizeof info;
    ProgStats ps;
    ps.name = bpf_program__name(prog);
    if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0) {
      ps.run_time_ns = info.run_time_ns;
      ps.run_count = info.run_cnt;
    }
    out.push_back(ps);
  }
  return out;
}

// Every entry of the per-cgroup map, `chunk` at a time with the batch lookup (Linux 5.6; a few calls
// for the whole map); key by key where the kernel has none.
void SchedSensor::for_each_entry(int fd,
                                 const std::function<void(const keel_cg_key&, const keel_cg_stats&)>& f) {
  constexpr uint32_t kChunk = 64;
  if (batch_) {
    batch_keys_.resize(kChunk);
    batch_vals_.resize(kChunk);
    uint32_t cursor = 0;
    bool first = true;
    for (;;) {
      uint32_t n = static_cast<uint32_t>(batch_keys_.size());
      uint32_t next = 0;
      int r = bpf_map_lookup_batch(fd, first ? nullptr : &cursor, &next, batch_keys_.data(),
                                   batch_vals_.data(), &n, nullptr);
      const int err = r == 0 ? 0 : errno;
      if (r != 0 && err == ENOSPC && n == 0 && batch_keys_.size() < 4096) {
        // A hash bucket holds more entries than fit: again with room for it.
        batch_keys_.resize(batch_keys_.size() * 2);
        batch_vals_.resize(batch_vals_.size() * 2);
        continue;
      }
      if (r != 0 && err != ENOENT && first && n == 0) {
        batch_ = false;  // EINVAL or ENOTSUPP: no batch operations on this kernel
        break;
      }
      for (uint32_t i = 0; i < n; ++i) f(batch_keys_[i], batch_vals_[i]);
      if (r != 0) return;  // ENOENT: the whole map was read
      cursor = next;
      first = false;
    }
    if (batch_) return;
  }
  keel_cg_key key{}, next{};
  keel_cg_stats val{};
  const keel_cg_key* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    key = next;
    prev = &key;
    if (bpf_map_lookup_elem(fd, &key, &val) == 0) f(key, val);  // else deleted meanwhile
  }
}

namespace {

// Whether `val` counts less than `was` anywhere: its entry was dropped and made again since (a delta
// against the old values would wrap around).
template <class Last>
bool counts_less(const keel_cg_stats& val, const Last& was) {
  if (val.rq_sum_ns < was.sum_ns || val.migrations < was.migrations || val.cross_llc < was.cross_llc ||
      val.cross_numa < was.cross_numa)
    return true;
  for (const auto& [i, v] : was.buckets)
    if (val.rq_hist[i] < v) return true;
  for (size_t k = 0; k < KEEL_MAX_COUNTERS; ++k)
    if (val.counters[k] < was.counters[k]) return true;
  return false;
}

}  // namespace

bool SchedSensor::give_hot(const CgroupId& id, Last& l) {
  if (hot_free_.empty() || l.hot >= 0) return false;
  const uint32_t slot = hot_free_.back();
  keel_cg_hot h{};
  h.key = keel_cg_key{id.hierarchy, 0, id.inode};
  // Keyed before it is published: a program that finds the slot finds it this cgroup's, counting from 0.
  if (bpf_map_update_elem(bpf_map__fd(skel_->maps.cg_hot), &slot, &h, BPF_ANY) != 0) return false;
  if (bpf_map_update_elem(bpf_map__fd(skel_->maps.cg_hot_of), &h.key, &slot, BPF_ANY) != 0) {
    const keel_cg_hot zero{};
    (void)bpf_map_update_elem(bpf_map__fd(skel_->maps.cg_hot), &slot, &zero, BPF_ANY);
    return false;
  }
  hot_free_.pop_back();
  l.hot = static_cast<int32_t>(slot);
  return true;
}

void SchedSensor::release_hot(const CgroupId& id, Last& l) {
  if (l.hot < 0) return;
  const auto slot = static_cast<uint32_t>(l.hot);
  const keel_cg_key key{id.hierarchy, 0, id.inode};
  (void)bpf_map_delete_elem(bpf_map__fd(skel_->maps.cg_hot_of), &key);
  // Unkeyed: a task that cached the slot sees it is not its cgroup's any more.
  const keel_cg_hot zero{};
  (void)bpf_map_update_elem(bpf_map__fd(skel_->maps.cg_hot), &slot, &zero, BPF_ANY);
  hot_free_.push_back(slot);
  l.hot = -1;
}

namespace {

// What `val` (an entry's counts, cumulative) adds to `was` (the counts at the previous read).
CgroupSched delta_of(const CgroupId& id, const keel_cg_stats& val, const auto& was) {
  CgroupSched d;
  d.id = id;
  std::array<uint64_t, KEEL_HIST_BUCKETS> waits;
  std::copy_n(std::begin(val.rq_hist), KEEL_HIST_BUCKETS, waits.begin());
  for (const auto& [i, v] : was.buckets) waits[i] -= v;
  for (unsigned i = 0; i < KEEL_HIST_BUCKETS; ++i) {
    d.rq.buckets[i] = static_cast<uint32_t>(std::min<uint64_t>(waits[i], UINT32_MAX));
    d.rq.count += waits[i];
  }
  d.rq.sum_ns = val.rq_sum_ns - was.sum_ns;
  d.migrations = val.migrations - was.migrations;
  d.cross_llc = val.cross_llc - was.cross_llc;
  d.cross_numa = val.cross_numa - was.cross_numa;
  for (size_t k = 0; k < KEEL_MAX_COUNTERS; ++k) d.counters[k] = val.counters[k] - was.counters[k];
  return d;
}

// `val` as the counts the next read is measured from.
void remember(const keel_cg_stats& val, auto& was) {
  was.buckets.clear();
  for (unsigned i = 0; i < KEEL_HIST_BUCKETS; ++i)
    if (val.rq_hist[i] != 0) was.buckets.emplace_back(static_cast<uint16_t>(i), val.rq_hist[i]);
  was.sum_ns = val.rq_sum_ns;
  was.migrations = val.migrations;
  was.cross_llc = val.cross_llc;
  was.cross_numa = val.cross_numa;
  std::copy_n(std::begin(val.counters), KEEL_MAX_COUNTERS, was.counters.begin());
  was.idle_reads = 0;
}

}  // namespace

Result<SchedDelta> SchedSensor::read() {
  SchedDelta out;
  out.cgroups.reserve(last_out_);
  int fd = bpf_map__fd(skel_->maps.cg_stats);
  const int hot_fd = bpf_map__fd(skel_->maps.cg_hot);
  std::vector<keel_cg_key> idle;  // entries to drop: nothing for kIdleReads reads
  keel_cg_stats combined;         // an entry's counts plus its hot slot's
  keel_cg_hot hot;
  for_each_entry(fd, [&](const keel_cg_key& key, const keel_cg_stats& entry) {
    const CgroupId id{key.hierarchy, key.cgroup_id};
    // A new one: all zeros, so the delta is everything counted so far.
    auto [at, fresh] = last_.try_emplace(id);
    Last& was = at->second;
    // A cgroup with a hot slot: its waits are counted there, the rest in its entry.
    const keel_cg_stats* counts = &entry;
    if (was.hot >= 0) {
      const auto slot = static_cast<uint32_t>(was.hot);
      if (bpf_map_lookup_elem(hot_fd, &slot, &hot) == 0 && hot.key.cgroup_id == key.cgroup_id) {
        combined = entry;
        for (size_t i = 0; i < KEEL_HIST_SLOTS; ++i) combined.rq_hist[i] += hot.rq_hist[i];
        combined.rq_sum_ns += hot.rq_sum_ns;
        counts = &combined;
      }
    }
    const keel_cg_stats& val = *counts;
    if (!fresh && counts_less(val, was)) {
      const int32_t slot = was.hot;  // counted afresh; its slot stays
      was = Last{};
      was.hot = slot;
    }
    was.fresh = fresh;
    CgroupSched d = delta_of(id, val, was);
    bool counted = std::any_of(d.counters.begin(), d.counters.end(), [](uint64_t c) { return c != 0; });
    if (d.rq.count != 0 || d.migrations != 0 || counted) {
      remember(val, was);
      out.cgroups.push_back(std::move(d));
    } else if (++was.idle_reads >= kIdleReads && !critical_.contains(id)) {
      idle.push_back(key);
    }
  });
  drop_idle(idle);
  hand_out_hot(out);
  last_out_ = out.cgroups.size() + 16;
  uint64_t full = sum_percpu(skel_->maps.errors, KEEL_ERR_CG_MAP_FULL);
  uint64_t stamp = sum_percpu(skel_->maps.errors, KEEL_ERR_STAMP_FULL);
  out.map_full = full - last_map_full_;
  out.stamp_full = stamp - last_stamp_full_;
  last_map_full_ = full;
  last_stamp_full_ = stamp;
  out.evicted = std::exchange(evicted_, Evictions{});
  ++reads_;
  if (stats_ != BpfStats::off) update_stats();
  return out;
}

// An event between the read and the delete is lost: only for a cgroup idle for kIdleReads reads.
void SchedSensor::drop_idle(const std::vector<keel_cg_key>& idle) {
  const int fd = bpf_map__fd(skel_->maps.cg_stats);
  for (const keel_cg_key& k : idle) {
    const int r = bpf_map_delete_elem(fd, &k);
    if (r == 0) ++evicted_.idle;
    if (r == 0 || errno == ENOENT) {
      const CgroupId id{k.hierarchy, k.cgroup_id};
      release_hot(id, last_[id]);
      last_.erase(id);
    }
  }
}

// The free hot slots go to the cgroups that waited in this interval and have none: critical ones
// first, then best-effort ones, then those no workload covers (as the latest tend() saw them), each by
// the most waits. A slot starts at 0, so the next delta is as without it.
void SchedSensor::hand_out_hot(const SchedDelta& out) {
  if (hot_free_.empty()) return;
  std::vector<std::pair<uint64_t, CgroupId>> want;
  for (const CgroupSched& d : out.cgroups)
    if (d.rq.count != 0 && !is_hot(d.id))
      want.emplace_back((uint64_t{critical_.contains(d.id) ? 3u : last_[d.id].rank} << 56) |
                            std::min<uint64_t>(d.rq.count, (uint64_t{1} << 56) - 1),
                        d.id);
  std::sort(want.begin(), want.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  bool gave = false;
  for (const auto& [waits, id] : want) {
    if (hot_free_.empty()) break;
    gave |= give_hot(id, last_[id]);
  }
  // Tasks that cached "no slot" look again at their next wait.
  if (gave) __atomic_add_fetch(&skel_->bss->hot_gen, 1, __ATOMIC_RELAXED);
}

void SchedSensor::tend(const std::function<Worth(CgroupId)>& worth, const std::vector<CgroupId>& critical) {
  const int fd = bpf_map__fd(skel_->maps.cg_stats);
  critical_.clear();
  critical_.insert(critical.begin(), critical.end());
  // Drops `id`'s entry; what it had counted since the read goes with it.
  auto drop = [&](const CgroupId& id, uint64_t& reason) {
    keel_cg_key key{id.hierarchy, 0, id.inode};
    const int r = bpf_map_delete_elem(fd, &key);
    if (r == 0) ++reason;
    const bool dropped = r == 0 || errno == ENOENT;
    if (dropped)
      if (auto it = last_.find(id); it != last_.end()) release_hot(id, it->second);  // the slot goes with it
    return dropped;
  };
  struct Spare {
    Worth worth;
    unsigned idle_reads;
    CgroupId id;
  };
  std::vector<Spare> spare;  // entries that may go when room is short
  for (auto it = last_.begin(); it != last_.end();) {
    Worth w = critical_.contains(it->first) ? Worth::critical : worth(it->first);
    // A cgroup first seen at this read may be newer than sensing's view: gone only once it was seen before.
    if (w == Worth::gone && it->second.fresh) w = Worth::unmatched;
    if (w == Worth::gone && drop(it->first, evicted_.gone)) {
      it = last_.erase(it);
      continue;
    }
    if (w == Worth::unmatched || w == Worth::best_effort)
      spare.push_back({w, it->second.idle_reads, it->first});
    it->second.rank = w == Worth::critical ? 3 : w == Worth::best_effort ? 2 : 1;
    ++it;
  }
  std::vector<CgroupId> missing;
  for (const CgroupId& id : critical_)
    if (!last_.contains(id)) missing.push_back(id);
  const size_t mark = high_water();
  size_t next = 0;
  auto make_room = [&]() {
    if (next == 0)  // sorted once, when first needed: cgroups no workload covers first, then the longest idle
      std::sort(spare.begin(), spare.end(), [](const Spare& a, const Spare& b) {
        return a.worth != b.worth ? a.worth < b.worth : a.idle_reads > b.idle_reads;
      });
    for (; next < spare.size(); ++next) {
      const Spare& s = spare[next];
      if (drop(s.id, s.worth == Worth::unmatched ? evicted_.unmatched : evicted_.best_effort)) {
        last_.erase(s.id);
        ++next;
        return true;
      }
    }
    return false;
  };
  while (last_.size() + missing.size() > mark && make_room()) {
  }
  static const keel_cg_stats zero{};
  for (const CgroupId& id : missing) {
    keel_cg_key key{id.hierarchy, 0, id.inode};
    for (;;) {
      // EEXIST: an event made it since the read. Either way the next read counts it from 0.
      if (bpf_map_update_elem(fd, &key, &zero, BPF_NOEXIST) == 0 || errno == EEXIST) {
        last_.try_emplace(id);
        break;
      }
      // E2BIG: new cgroups took the room made; more is made while there is any to take.
      if (errno != E2BIG || !make_room()) break;
    }
  }
}

uint64_t raise_open_files_limit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return 0;
  if (r.rlim_cur < r.rlim_max) {
    rlimit raised{r.rlim_max, r.rlim_max};
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) r = raised;
  }
  return r.rlim_cur;
}

Result<HostSensor> open_counting(SchedConfig sc, std::string counted) {
  const uint64_t limit = raise_open_files_limit();
  if (!sc.counters.empty()) {
    // One perf event per counter and online CPU: not tried where they would leave keel short of files.
    const uint64_t cpus = static_cast<uint64_t>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
    const uint64_t need = sc.counters.size() * cpus;
    if (need + kOtherFiles > limit) {
      counted = "n/a (" + std::to_string(sc.counters.size()) + " counters x " + std::to_string(cpus) +
                " CPUs need " + std::to_string(need) + " open files besides keel's other " +
                std::to_string(kOtherFiles) + ", and the open-files limit is " + std::to_string(limit) +
                ": raise RLIMIT_NOFILE, LimitNOFILE= under systemd)";
      sc.counters.clear();
    }
  }
  auto sensor = SchedSensor::open(sc);
  if (!sensor && !sc.counters.empty()) {  // a PMU without one of the events: go on without
    counted = "n/a (" + sensor.error().message() +
              (sensor.error().err == EMFILE ? "; the open-files limit is " + std::to_string(limit) : "") +
              ")";
    sc.counters.clear();
    sensor = SchedSensor::open(sc);
  }
  if (!sensor) return std::unexpected(sensor.error());
  return HostSensor{std::move(*sensor), !sc.counters.empty(), counted};
}

Result<HostSensor> open_host_sensor(const CgroupHierarchy& hierarchy, const Topology& topo, BpfStats stats) {
  SchedConfig sc;
  sc.hierarchy = hierarchy;
  sc.stats = stats;
  for (const Pu& pu : topo.pus()) {
    if (pu.os >= sc.llc_of_cpu.size()) {
      sc.llc_of_cpu.resize(pu.os + 1);
      sc.node_of_cpu.resize(pu.os + 1);
    }
    sc.llc_of_cpu[pu.os] = static_cast<uint16_t>(pu.l3);
    sc.node_of_cpu[pu.os] = static_cast<uint16_t>(pu.numa);
  }
  auto pmu = hw_pmu_available();
  if (!pmu) return open_counting(std::move(sc), "n/a (" + pmu.error().message() + ")");
  sc.counters = hardware_counters();
  return open_counting(std::move(sc));
}

}  // namespace keel::bpf
