#include "controller/sensing.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "controller/controller.h"
#include "host/cgroup_stats.h"
#include "host/fileio.h"

namespace keel::ctl {

namespace fs = std::filesystem;

struct Sensing::State {
  config::Config cfg;
  SysRoots roots;
  CgroupLayout layout;
  CgroupHierarchy hierarchy;
  Topology topo;
  std::optional<bpf::SchedSensor> sensor;
  bool pmu = false;
  std::string counters_note;
  std::vector<Cgroup> cgroups;
  std::vector<WorkloadMatch> matches;
  struct Prev {
    std::optional<uint64_t> usage_ns, nr_throttled;
  };
  std::map<std::string, Prev> prev;  // by cgroup path
  std::chrono::steady_clock::time_point last;
  SensedCounts counts;
};

Sensing::Sensing(std::unique_ptr<State> s) : s_(std::move(s)) {}
Sensing::Sensing(Sensing&&) noexcept = default;
Sensing& Sensing::operator=(Sensing&&) noexcept = default;
Sensing::~Sensing() = default;

const CgroupLayout& Sensing::layout() const { return s_->layout; }
const CgroupHierarchy& Sensing::hierarchy() const { return s_->hierarchy; }
const std::vector<WorkloadMatch>& Sensing::matches() const { return s_->matches; }
std::optional<bpf::BpfCost> Sensing::cost() const { return s_->sensor->cost(); }
const SensedCounts& Sensing::counts() const { return s_->counts; }
std::vector<bpf::ProgStats> Sensing::prog_stats() const { return s_->sensor->prog_stats(); }
bool Sensing::pmu() const { return s_->pmu; }
std::string Sensing::counters_note() const { return s_->counters_note; }
bpf::AttachKind Sensing::attach() const { return s_->sensor->kind(); }

uint64_t weight_to_shares(uint64_t weight) { return std::max<uint64_t>(2, weight * 1024 / 100); }

Result<Sensing> Sensing::open(const config::Config& cfg, const SysRoots& roots, const Topology& topo,
                              bpf::BpfStats stats) {
  auto st = std::make_unique<State>();
  st->cfg = cfg;
  st->roots = roots;
  st->topo = topo;
  auto layout = discover(roots);
  if (!layout) return std::unexpected(layout.error());
  st->layout = *layout;
  auto h = choose_hierarchy(st->layout, cfg.daemon.hierarchy);
  if (!h) return std::unexpected(h.error());
  st->hierarchy = *h;

  auto opened = bpf::open_host_sensor(st->hierarchy, topo, stats);
  if (!opened)
    return fail(opened.error().message() +
                (::geteuid() != 0 ? " (keel needs root: it loads BPF programs)" : ""));
  st->pmu = opened->pmu;
  st->counters_note = opened->counters_note;
  st->sensor.emplace(std::move(opened->sensor));
  st->last = std::chrono::steady_clock::now();
  // Counters of cgroupfs start now, like the BPF deltas.
  Sensing s(std::move(st));
  if (auto r = s.sample(0); !r) return std::unexpected(r.error());
  return s;
}

std::optional<std::string> cpuset_cgroup(const SysRoots& roots, const CgroupLayout& layout,
                                         const CgroupHierarchy& defining, const std::string& path) {
  const CgroupHierarchy* cs = defining.unified ? &defining : layout.v1_with("cpuset");
  if (cs == nullptr || !cs->has("cpuset")) return std::nullopt;
  std::string rel = path == "/" ? "" : path.substr(1);
  std::string found;
  if (path != "/" && fs::is_directory(cs->mount / rel)) {
    found = path;
  } else {
    // Not laid out alike (only some hierarchies have the cgroup): the cpuset of its first task.
    auto procs = read_file(defining.mount / rel / "cgroup.procs");
    if (!procs) return std::nullopt;
    pid_t pid = static_cast<pid_t>(std::atol(procs->c_str()));
    if (pid <= 0) return std::nullopt;
    auto p = process_cgroup_path(roots, pid, *cs);
    if (!p) return std::nullopt;
    found = *p;
  }
  // The root cpuset is the host's: never a workload's to change.
  if (found.empty() || found == "/") return std::nullopt;
  return found;
}

Result<Snapshot> Sensing::sample(uint64_t tick) {
  State& st = *s_;
  auto now = std::chrono::steady_clock::now();
  double secs = std::max(1e-3, std::chrono::duration<double>(now - st.last).count());
  st.last = now;
  // The cgroups first: when that fails the BPF counts stay in the kernel for the next tick.
  if (auto r = enumerate_cgroups(st.hierarchy, st.cgroups); !r) return std::unexpected(r.error());
  auto matched = match_workloads(st.cfg.workloads, st.hierarchy, st.cgroups, st.roots);
  st.matches = std::move(matched.cgroups);
  auto delta = st.sensor->read();
  if (!delta) return std::unexpected(delta.error());
  std::vector<CgroupId> live;
  std::map<CgroupId, const WorkloadMatch*> by_id;
  for (const auto& m : st.matches) {
    live.push_back(m.id);
    by_id[m.id] = &m;
  }
  st.sensor->reclaim(live);

  struct Acc {
    WorkloadSignals sig;
    double usage_s = 0, throttled = 0;
    bool usage = false, throttle = false;
  };
  std::map<std::string, Acc> acc;  // by instance: a fixed order
  for (const auto& m : st.matches) {
    if (m.workload.empty()) continue;
    Acc& a = acc[m.instance];
    if (a.sig.instance.empty()) {
      a.sig.instance = m.instance;
      a.sig.workload = m.workload;
      auto cw = std::ranges::find(st.cfg.workloads, m.workload, &config::Workload::name);
      a.sig.critical = cw != st.cfg.workloads.end() && cw->klass == config::WorkloadClass::critical;
    }
    a.sig.cgroups.push_back(m.path);
  }
  SensedCounts counts;
  counts.map_full = delta->map_full;
  counts.stamp_full = delta->stamp_full;
  counts.map_capacity = st.sensor->capacity();
  auto add = [](SensedCounts::Counts& to, const bpf::CgroupSched& c) {
    to.rq += c.rq;
    to.migrations += c.migrations;
    to.cross_llc += c.cross_llc;
    to.cross_numa += c.cross_numa;
    for (size_t k = 0; k < to.counters.size(); ++k) to.counters[k] += c.counters[k];
  };
  for (const auto& c : delta->cgroups) {
    auto it = by_id.find(c.id);
    // Cgroups no workload matches (and ones gone since the read) count as "other".
    if (it == by_id.end() || it->second->workload.empty()) {
      add(counts.other, c);
      continue;
    }
    add(counts.instances[it->second->instance], c);
  }
  for (const auto& [inst, a] : acc) counts.instances[inst];  // every instance, active or not
  counts.map_entries = st.sensor->entries();
  st.counts = std::move(counts);
  std::map<std::string, State::Prev> prev;
  for (auto& [inst, a] : acc) {
    for (const auto& path : a.sig.cgroups) {
      CgroupCpuStats cs = read_cpu_stats(st.layout, path);
      auto old = st.prev.find(path);
      if (old != st.prev.end()) {
        if (cs.usage_ns && old->second.usage_ns && *cs.usage_ns >= *old->second.usage_ns) {
          a.usage_s += static_cast<double>(*cs.usage_ns - *old->second.usage_ns) / 1e9;
          a.usage = true;
        }
        if (cs.nr_throttled && old->second.nr_throttled && *cs.nr_throttled >= *old->second.nr_throttled) {
          a.throttled += static_cast<double>(*cs.nr_throttled - *old->second.nr_throttled);
          a.throttle = true;
        }
      }
      prev[path] = {cs.usage_ns, cs.nr_throttled};
      // Where it may run: its cpuset's effective CPUs (the host's without a cpuset controller).
      CpuSet cpus = st.topo.online();
      if (auto cg = cpuset_cgroup(st.roots, st.layout, st.hierarchy, path)) {
        const CgroupHierarchy* ch = st.hierarchy.unified ? &st.hierarchy : st.layout.v1_with("cpuset");
        const char* file = ch->unified ? "cpuset.cpus.effective" : "cpuset.effective_cpus";
        if (auto text = read_file(ch->mount / cg->substr(1) / file))
          if (auto set = CpuSet::parse_list(trim(*text)); set && !set->empty()) cpus = *set;
      }
      a.sig.cpus |= cpus;
      if (!a.sig.shares) {
        if (st.hierarchy.unified) {
          if (auto w = read_int(st.hierarchy.mount / path.substr(1) / "cpu.weight"); w && *w > 0)
            a.sig.shares = weight_to_shares(static_cast<uint64_t>(*w));
        } else if (const CgroupHierarchy* cpu = st.layout.v1_with("cpu")) {
          if (auto v = read_int(cpu->mount / path.substr(1) / "cpu.shares"); v && *v > 0)
            a.sig.shares = static_cast<uint64_t>(*v);
        }
      }
    }
  }
  st.prev = std::move(prev);

  Snapshot snap;
  snap.tick = tick;
  snap.period_s = secs;
  for (auto& [inst, a] : acc) {
    WorkloadSignals& w = a.sig;
    const SensedCounts::Counts& c = st.counts.instances.at(inst);
    w.rq_waits = c.rq.count;
    w.rq_p50_us = c.rq.quantile_us(0.5);
    w.rq_p99_us = c.rq.quantile_us(0.99);
    w.rq_wait_s_per_s = static_cast<double>(c.rq.sum_ns) / 1e9 / secs;
    w.migrations_per_s = static_cast<double>(c.migrations) / secs;
    w.cross_llc_per_s = static_cast<double>(c.cross_llc) / secs;
    w.cross_numa_per_s = static_cast<double>(c.cross_numa) / secs;
    if (st.pmu) {
      w.cache_misses_per_s = static_cast<double>(c.counters[0]) / secs;
      if (c.counters[2] > 0)
        w.mpki = static_cast<double>(c.counters[0]) * 1000.0 / static_cast<double>(c.counters[2]);
    }
    if (a.usage) w.cpu_usage = a.usage_s / secs;
    if (a.throttle) w.throttled_per_s = a.throttled / secs;
    snap.workloads.push_back(std::move(w));
  }
  return snap;
}

}  // namespace keel::ctl
