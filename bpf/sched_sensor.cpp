#include "bpf/sched_sensor.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <set>

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

Result<keel_sched*> load(const SchedConfig& cfg, AttachKind kind) {
  install_log();
  keel_sched* skel = keel_sched__open();
  if (skel == nullptr) return fail("cannot open the sched BPF object", "", errno);
  int ctl = v1_controller_of(cfg.hierarchy);
  skel->rodata->hierarchy_id = cfg.hierarchy.id;
  skel->rodata->v1_controller = ctl;
  for (size_t c = 0; c < std::min<size_t>(cfg.llc_of_cpu.size(), KEEL_MAX_CPUS); ++c)
    skel->rodata->llc_of_cpu[c] = cfg.llc_of_cpu[c];
  for (size_t c = 0; c < std::min<size_t>(cfg.node_of_cpu.size(), KEEL_MAX_CPUS); ++c)
    skel->rodata->node_of_cpu[c] = cfg.node_of_cpu[c];
  bpf_map__set_max_entries(skel->maps.cg_stats, cfg.max_cgroups);
  bool btf = kind == AttachKind::tp_btf;
  for (bpf_program* p : {skel->progs.keel_wakeup_btf, skel->progs.keel_wakeup_new_btf,
                         skel->progs.keel_switch_btf, skel->progs.keel_migrate_btf})
    bpf_program__set_autoload(p, btf);
  for (bpf_program* p : {skel->progs.keel_wakeup_raw, skel->progs.keel_wakeup_new_raw,
                         skel->progs.keel_switch_raw, skel->progs.keel_migrate_raw})
    bpf_program__set_autoload(p, !btf);
  skel->rodata->counters_enabled = cfg.counter.has_value();
  bpf_map__set_max_entries(skel->maps.counter_events, static_cast<uint32_t>(std::max(1, libbpf_num_possible_cpus())));
  bpf_map__set_autocreate(skel->maps.task_stamps, btf);
  bpf_map__set_autocreate(skel->maps.pid_stamps, !btf);
  int err = keel_sched__load(skel);
  if (err == 0) err = keel_sched__attach(skel);
  if (err != 0) {
    std::string why = last_log_line();
    keel_sched__destroy(skel);
    return fail(std::string("cannot load/attach the ") + to_string(kind) + " sched programs" +
                    (why.empty() ? "" : " (" + why + ")"),
                "", -err);
  }
  return skel;
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
  return std::ldexp(1.0, static_cast<int>(p)) + sub * std::ldexp(1.0, static_cast<int>(p - KEEL_HIST_SUB_BITS));
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
  for (size_t i = 0; i < buckets.size(); ++i) buckets[i] += o.buckets[i];
  count += o.count;
  sum_ns += o.sum_ns;
  return *this;
}

namespace {

// One counting perf event per possible CPU (all tasks on it), stored in the program's array.
Result<std::vector<int>> open_counters(keel_sched* skel, const SchedConfig::Counter& c) {
  std::vector<int> fds;
  int ncpu = libbpf_num_possible_cpus();
  int map_fd = bpf_map__fd(skel->maps.counter_events);
  for (int cpu = 0; cpu < ncpu; ++cpu) {
    perf_event_attr attr{};
    attr.size = sizeof attr;
    attr.type = c.type;
    attr.config = c.config;
    long fd = ::syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) {
      if (errno == ENODEV || errno == ENOENT) continue;  // a possible CPU that is not online
      int e = errno;
      for (int f : fds) ::close(f);
      return fail("perf_event_open(type " + std::to_string(c.type) + ", config " + std::to_string(c.config) +
                      ") on CPU " + std::to_string(cpu), "", e);
    }
    fds.push_back(static_cast<int>(fd));
    uint32_t key = static_cast<uint32_t>(cpu);
    int v = static_cast<int>(fd);
    if (bpf_map_update_elem(map_fd, &key, &v, BPF_ANY) != 0) {
      int e = errno;
      for (int f : fds) ::close(f);
      return fail("cannot store the perf event of CPU " + std::to_string(cpu), "", e);
    }
  }
  return fds;
}

}  // namespace

void SchedSensor::close_fds() {
  for (int f : counter_fds_) ::close(f);
  counter_fds_.clear();
  if (stats_fd_ >= 0) ::close(stats_fd_);
  stats_fd_ = -1;
}

Result<SchedSensor> SchedSensor::open(const SchedConfig& cfg) {
  auto sensor = open_programs(cfg);
  if (!sensor || !cfg.counter) return sensor;
  auto fds = open_counters(sensor->skel_, *cfg.counter);
  if (!fds) return std::unexpected(fds.error());
  sensor->counter_fds_ = std::move(*fds);
  return sensor;
}

Result<SchedSensor> SchedSensor::open_programs(const SchedConfig& cfg) {
  if (v1_controller_of(cfg.hierarchy) < 0)
    return fail("hierarchy " + cfg.hierarchy.name() + " has none of cpu, cpuset, cpuacct: cannot key by it");
  if (cfg.attach != AttachChoice::raw_tp) {
    auto s = load(cfg, AttachKind::tp_btf);
    if (s) {
      SchedSensor sensor(*s, AttachKind::tp_btf, cfg.hierarchy.id);
      if (cfg.collect_stats) sensor.stats_fd_ = bpf_enable_stats(BPF_STATS_RUN_TIME);
      return sensor;
    }
    if (cfg.attach == AttachChoice::tp_btf) return std::unexpected(s.error());
  }
  auto r = load(cfg, AttachKind::raw_tp);
  if (!r) return std::unexpected(r.error());
  SchedSensor sensor(*r, AttachKind::raw_tp, cfg.hierarchy.id);
  if (cfg.collect_stats) sensor.stats_fd_ = bpf_enable_stats(BPF_STATS_RUN_TIME);
  return sensor;
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

SchedSensor::SchedSensor(SchedSensor&& o) noexcept
    : skel_(o.skel_), kind_(o.kind_), hierarchy_(o.hierarchy_), last_(std::move(o.last_)),
      last_map_full_(o.last_map_full_), last_stamp_full_(o.last_stamp_full_), stats_fd_(o.stats_fd_),
      counter_fds_(std::move(o.counter_fds_)) {
  o.skel_ = nullptr;
  o.stats_fd_ = -1;
  o.counter_fds_.clear();
}

SchedSensor& SchedSensor::operator=(SchedSensor&& o) noexcept {
  if (this != &o) {
    if (skel_ != nullptr) keel_sched__destroy(skel_);
    close_fds();
    stats_fd_ = o.stats_fd_;
    o.stats_fd_ = -1;
    counter_fds_ = std::move(o.counter_fds_);
    o.counter_fds_.clear();
    skel_ = o.skel_;
    kind_ = o.kind_;
    hierarchy_ = o.hierarchy_;
    last_ = std::move(o.last_);
    last_map_full_ = o.last_map_full_;
    last_stamp_full_ = o.last_stamp_full_;
    o.skel_ = nullptr;
  }
  return *this;
}

SchedSensor::~SchedSensor() {
  if (skel_ != nullptr) keel_sched__destroy(skel_);
  close_fds();
}

Result<SchedDelta> SchedSensor::read() {
  SchedDelta out;
  int fd = bpf_map__fd(skel_->maps.cg_stats);
  keel_cg_key key{}, next{};
  keel_cg_stats val{};
  const keel_cg_key* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    key = next;
    prev = &key;
    if (bpf_map_lookup_elem(fd, &key, &val) != 0) continue;  // deleted meanwhile
    CgroupSched now;
    now.id = CgroupId{key.hierarchy, key.cgroup_id};
    std::copy_n(std::begin(val.rq_hist), KEEL_HIST_BUCKETS, now.rq.buckets.begin());
    now.rq.count = val.rq_count;
    now.rq.sum_ns = val.rq_sum_ns;
    now.migrations = val.migrations;
    now.cross_llc = val.cross_llc;
    now.cross_numa = val.cross_numa;
    now.counter = val.counter;

    CgroupSched d = now;
    if (auto it = last_.find(now.id); it != last_.end()) {
      const CgroupSched& was = it->second;
      for (size_t i = 0; i < d.rq.buckets.size(); ++i) d.rq.buckets[i] -= was.rq.buckets[i];
      d.rq.count -= was.rq.count;
      d.rq.sum_ns -= was.rq.sum_ns;
      d.migrations -= was.migrations;
      d.cross_llc -= was.cross_llc;
      d.cross_numa -= was.cross_numa;
      d.counter -= was.counter;
      it->second = now;
    } else {
      last_.emplace(now.id, now);
    }
    if (d.rq.count != 0 || d.migrations != 0 || d.counter != 0) out.cgroups.push_back(std::move(d));
  }
  uint64_t full = sum_percpu(skel_->maps.errors, KEEL_ERR_CG_MAP_FULL);
  uint64_t stamp = sum_percpu(skel_->maps.errors, KEEL_ERR_STAMP_FULL);
  out.map_full = full - last_map_full_;
  out.stamp_full = stamp - last_stamp_full_;
  last_map_full_ = full;
  last_stamp_full_ = stamp;
  return out;
}

size_t SchedSensor::reclaim(const std::vector<CgroupId>& live) {
  std::set<CgroupId> keep(live.begin(), live.end());
  int fd = bpf_map__fd(skel_->maps.cg_stats);
  size_t n = 0;
  for (auto it = last_.begin(); it != last_.end();) {
    if (keep.contains(it->first)) {
      ++it;
      continue;
    }
    keel_cg_key key{it->first.hierarchy, 0, it->first.inode};
    if (bpf_map_delete_elem(fd, &key) == 0) ++n;
    it = last_.erase(it);
  }
  return n;
}

}  // namespace keel::bpf
