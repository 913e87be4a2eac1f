#include "loop/sensing.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <map>
#include <unordered_map>

#include "bpf/skeleton.h"
#include "host/cgroup_stats.h"
#include "host/fileio.h"
#include "host/proc_stat.h"

namespace keel::loop {

namespace {

// What sensing keeps of one cgroup between ticks.
struct NodeState {
  CgroupId id{};                                   // whose state this is (a slot is reused by a later cgroup)
  std::optional<uint64_t> usage_ns, nr_throttled;  // the cumulative counters at the last read
  // Facts read every few ticks, and right after keel changed them.
  CpuSet cpus;                     // where it may run: its cpuset's effective CPUs
  std::optional<uint64_t> shares;  // its weight, as cpu.shares
  std::optional<bool> in_class;    // in the preemption class (cpu.idle, or a vendor kernel's file)
  bool limited = false;            // it has a CFS quota (only then can it be throttled)
  bool facts = false, dirty = false;
  uint64_t facts_tick = 0;
  bool busy = true;         // its CPU usage grew at the last read
  uint64_t usage_tick = 0;  // when it was read
};

void add(SensedCounts::Counts& to, const bpf::CgroupSched& c) {
  to.rq += c.rq;
  to.migrations += c.migrations;
  to.cross_llc += c.cross_llc;
  to.cross_numa += c.cross_numa;
  for (size_t k = 0; k < to.counters.size(); ++k) to.counters[k] += c.counters[k];
}

// The threads of a watched instance the demand watch reads for a starved victim, at most.
constexpr size_t kMaxWatchedThreads = 256;

// A thread's state and CPU time (/proc/TID/stat's state after the command's last ')', schedstat's first
// field); none when it is gone.
struct ThreadRead {
  bool runnable = false;  // R: running or waiting for a CPU
  uint64_t exec_ns = 0;
};
std::optional<ThreadRead> read_thread(const SysRoots& roots, int tid) {
  const std::filesystem::path dir = roots.proc / std::to_string(tid);
  auto stat = read_file(dir / "stat", 4096);
  auto sched = read_file(dir / "schedstat", 256);
  if (!stat || !sched) return std::nullopt;
  auto fields = parse_proc_stat(*stat);
  auto state = fields ? fields->field(3) : std::nullopt;
  if (!state) return std::nullopt;
  ThreadRead t;
  t.runnable = *state == "R";
  const std::string_view s = trim(*sched);
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), t.exec_ns);
  if (ec != std::errc()) return std::nullopt;
  return t;
}

bool did_something(const bpf::CgroupSched& c) {
  return c.rq.count > 0 || c.migrations > 0 ||
         std::any_of(c.counters.begin(), c.counters.end(), [](uint64_t v) { return v != 0; });
}

}  // namespace

struct Sensing::State {
  config::Spec spec;
  SysRoots roots;
  Topology topo;
  std::optional<inv::Inventory> inventory;
  std::unique_ptr<Sensor> sensor;
  std::vector<NodeState> nodes;  // by inv::Node::slot

  NodeState& state_of(const inv::Node& n) {
    if (nodes.size() <= n.slot) nodes.resize(std::max<size_t>(inventory->slots(), n.slot + 1));
    NodeState& ns = nodes[n.slot];
    if (ns.id != n.dir.id()) {  // the slot's earlier cgroup is gone
      ns = NodeState{};
      ns.id = n.dir.id();
    }
    return ns;
  }
  std::chrono::steady_clock::time_point last;
  SensedCounts counts;
  std::vector<bpf::SloWatch> watch;
  std::vector<CgroupId> critical;  // the critical instances' cgroups with tasks, for the sensor
  // The demand watch's state of each watched instance: CPU time at its last read, and since when
  // (from the read before the first quiet interval) it has stayed under its bound.
  struct Lull {
    uint64_t usage_ns = 0;
    std::chrono::steady_clock::time_point at;
    std::optional<std::chrono::steady_clock::time_point> since;
    bool said = false;           // this lull woke keel already
    std::optional<double> cpus;  // over the latest read
    bool rose = false;           // at cpu_above or over at the latest read (said once per rise)
  };
  std::unordered_map<std::string, Lull> lulls;
  // A watched instance's threads as the watch last read them, while it is in a lull: whether each was
  // runnable, its CPU time, and since when it has been runnable without running.
  struct Seen {
    ThreadRead at;
    std::chrono::steady_clock::time_point seen_at;
    std::optional<std::chrono::steady_clock::time_point> waiting_since;
  };
  std::unordered_map<std::string, std::unordered_map<int, Seen>> threads;
  // The longest a watched instance's thread has been runnable without running, as the watch saw it since
  // the last sample (the sample carries it, then it starts again).
  std::unordered_map<std::string, double> starved_s;
  // When, if at all, one of `ins`'s threads has been runnable without running since the previous read:
  // the earliest such wait's start (at most kMaxWatchedThreads threads read).
  std::optional<std::chrono::steady_clock::time_point> starved(const inv::Instance& ins,
                                                               std::chrono::steady_clock::time_point now);
  std::vector<InstanceRecord> records;  // the latest sample's, by the Snapshot's index
  // The latest SLO crossing the watch reported of each cgroup: a crossing ends a lull (a victim starved
  // of CPU also keeps little busy, but it still waits over its SLO).
  std::map<CgroupId, std::chrono::steady_clock::time_point> crossed;

  std::optional<uint64_t> usage_ns(const inv::Node& n) const;

  void read_facts(const inv::Node& n, NodeState& ns);
  void read_counters(const inv::Node& n, NodeState& ns, bool ran, double& usage_s, bool& usage,
                     double& throttled, bool& throttle);
  // The pieces of sample().
  using Ran = std::unordered_map<CgroupId, const bpf::CgroupSched*, inv::IdHash>;
  void tend_sensor();
  void count(const bpf::SchedDelta& delta);
  void signals_of(const InstanceRecord& r, ctl::WorkloadSignals& w, const Ran& ran, double secs);
};

Sensing::Sensing(std::unique_ptr<State> s) : s_(std::move(s)) {}
Sensing::Sensing(Sensing&&) noexcept = default;
Sensing& Sensing::operator=(Sensing&&) noexcept = default;
Sensing::~Sensing() = default;

const SensedCounts& Sensing::counts() const { return s_->counts; }
const std::vector<InstanceRecord>& Sensing::records() const { return s_->records; }
inv::Inventory& Sensing::inventory() { return *s_->inventory; }
const inv::Inventory& Sensing::inventory() const { return *s_->inventory; }
const Sensor& Sensing::sensor() const { return *s_->sensor; }
const config::Spec& Sensing::spec() const { return s_->spec; }

Result<Sensing> Sensing::open(config::Spec spec, const SysRoots& roots, const Topology& topo,
                              std::unique_ptr<Sensor> sensor, inv::Inventory::Options options) {
  auto st = std::make_unique<State>();
  st->spec = std::move(spec);
  st->roots = roots;
  st->topo = topo;
  auto inv = inv::Inventory::open(st->spec, roots, options);  // refers to st->spec: stays put on the heap
  if (!inv) return std::unexpected(inv.error());
  st->inventory.emplace(std::move(*inv));
  st->sensor = std::move(sensor);
  st->last = st->sensor->now();
  Sensing s(std::move(st));
  if (auto r = s.sample(0); !r) return std::unexpected(r.error());  // cgroupfs counters start now
  return s;
}

Result<Sensing> Sensing::open(config::Spec spec, const SysRoots& roots, const Topology& topo,
                              bpf::BpfStats stats) {
  auto layout = discover(roots);
  if (!layout) return std::unexpected(layout.error());
  auto h = choose_hierarchy(*layout, spec.hierarchy);
  if (!h) return std::unexpected(h.error());
  // Under --root the kernel's BTF is the host's copy there (the programs are typed against it).
  std::error_code ec;
  const auto btf = roots.sys / "kernel/btf/vmlinux";
  bpf::set_kernel_btf(!std::filesystem::equivalent(roots.sys, SysRoots::host().sys, ec) &&
                              std::filesystem::exists(btf, ec)
                          ? btf.string()
                          : "");
  // The sensor raises the open-files limit first: its perf events and the inventory's directories need it.
  auto sensor = open_bpf_sensor(*h, topo, stats);
  if (!sensor) return std::unexpected(sensor.error());
  return open(std::move(spec), roots, topo, std::move(*sensor));
}

int Sensing::events_fd() const { return s_->spec.early_ticks ? s_->sensor->events_fd() : -1; }

std::vector<bpf::SloEvent> Sensing::take_events() {
  auto events = s_->sensor->take_events();
  for (const bpf::SloEvent& e : events) {
    const std::chrono::steady_clock::time_point at{std::chrono::nanoseconds(e.at_ns)};
    auto [it, fresh] = s_->crossed.try_emplace(e.id, at);
    if (!fresh) it->second = std::max(it->second, at);
  }
  return events;
}

void Sensing::touched(const std::vector<CgroupId>& cgroups, const std::vector<CgroupId>& unheld) {
  for (const CgroupId& id : cgroups)
    if (const inv::Node* n = s_->inventory->find(id)) s_->state_of(*n).dirty = true;
  for (const CgroupId& id : unheld) s_->inventory->forget_held(id);
}

// The cpuset's CPUs, the weight and whether a quota is set: facts that change when someone changes
// them, read again every few ticks (staggered over the cgroups) and right after keel did.
void Sensing::State::read_facts(const inv::Node& n, NodeState& ns) {
  const inv::Inventory& inv = *inventory;
  ns.cpus = topo.online();  // without a cpuset controller: the host's
  if (auto cg = inv.cpuset_cgroup(n)) {
    const CgroupHierarchy* cs = inv.cpuset_hierarchy();
    const bool own = cs->unified == inv.defining().unified && cs->id == inv.defining().id;
    const CgroupDir* dir = own ? &n.dir : inv.root_of(*cs);
    std::string_view below = own ? std::string_view() : std::string_view(*cg).substr(1);
    if (dir != nullptr)
      if (auto text = dir->read(CgroupFile::effective_cpus, below))
        if (auto set = CpuSet::parse_list(*text); set && !set->empty()) ns.cpus = *set;
  }
  ns.shares.reset();
  if (auto p = inv.place(n, CgroupFile::weight))
    if (auto v = p->dir->read_u64(CgroupFile::weight, p->below); v && *v > 0)
      ns.shares = p->dir->hierarchy().unified ? weight_to_shares(*v, spec.actuators.weight_mapping) : *v;
  ns.in_class.reset();
  for (auto [file, in] : {std::pair{CgroupFile::idle, 1}, std::pair{CgroupFile::qos_level, -1},
                          std::pair{CgroupFile::bvt_warp, -1}})
    if (auto p = inv.place(n, file))
      if (auto text = p->dir->read(file, p->below))
        if (auto v = parse_integer(*text)) {
          ns.in_class = file == CgroupFile::idle ? *v == in : *v <= in;
          break;
        }
  ns.limited = false;
  if (auto p = inv.place(n, CgroupFile::cfs_quota)) {
    if (auto q = p->dir->read(CgroupFile::cfs_quota, p->below))
      ns.limited = parse_integer(*q).value_or(-1) >= 0;
  } else if (auto m = inv.place(n, CgroupFile::cpu_max)) {
    if (auto q = m->dir->read(CgroupFile::cpu_max, m->below)) ns.limited = !trim(*q).starts_with("max");
  }
  ns.facts = true;
  ns.dirty = false;
  ns.facts_tick = inv.tick();
}

// A cgroup's CPU time so far (v2: cpu.stat's usage_usec; v1: cpuacct.usage where the inventory places it).
std::optional<uint64_t> Sensing::State::usage_ns(const inv::Node& n) const {
  const inv::Inventory& inv = *inventory;
  if (inv.defining().unified) return read_usage_ns(n.dir);
  auto p = inv.place(n, CgroupFile::usage);
  return p ? read_usage_ns(*p->dir, p->below) : std::nullopt;
}

std::optional<std::chrono::steady_clock::time_point> Sensing::State::starved(
    const inv::Instance& ins, std::chrono::steady_clock::time_point now) {
  auto& was = threads[ins.name];
  std::unordered_map<int, Seen> next;
  std::optional<std::chrono::steady_clock::time_point> since;
  size_t read = 0;
  for (const inv::Node* n : ins.cgroups) {
    auto text = n->dir.read(CgroupFile::threads);
    if (!text) continue;
    for (size_t i = 0; i < text->size() && read < kMaxWatchedThreads;) {
      size_t e = text->find('\n', i);
      if (e == std::string::npos) e = text->size();
      int tid = 0;
      auto [end, ec] = std::from_chars(text->data() + i, text->data() + e, tid);
      i = e + 1;
      if (ec != std::errc() || tid <= 0) continue;
      ++read;
      auto t = read_thread(roots, tid);
      if (!t) continue;
      Seen s{*t, now, std::nullopt};
      if (auto p = was.find(tid);
          p != was.end() && t->runnable && p->second.at.runnable && t->exec_ns == p->second.at.exec_ns) {
        s.waiting_since = p->second.waiting_since.value_or(p->second.seen_at);
        since = since ? std::min(*since, *s.waiting_since) : *s.waiting_since;
      }
      next.emplace(tid, s);
    }
  }
  was = std::move(next);
  return since;
}

std::vector<Sensing::DemandWake> Sensing::watch_demand(const std::vector<ctl::DemandWatch>& watch,
                                                       std::chrono::duration<double> lull) {
  State& st = *s_;
  const auto now = st.sensor->now();
  std::vector<DemandWake> out;
  std::unordered_map<std::string, State::Lull> next;
  for (const ctl::DemandWatch& w : watch) {
    const inv::Instance* ins = nullptr;
    for (const inv::Instance& i : st.inventory->instances())
      if (i.name == w.instance) ins = &i;
    if (ins == nullptr || ins->cgroups.empty()) continue;
    uint64_t sum = 0;
    bool read = true;
    for (const inv::Node* n : ins->cgroups) {
      auto u = st.usage_ns(*n);
      read = read && u.has_value();
      sum += u.value_or(0);
    }
    if (!read) continue;  // a cgroup gone or unreadable: not watched until the next tick sorts it out
    State::Lull l{sum, now, std::nullopt, false, std::nullopt, false};
    if (auto prev = st.lulls.find(w.instance);
        prev != st.lulls.end() && sum >= prev->second.usage_ns && now > prev->second.at) {
      const State::Lull& was = prev->second;
      l.cpus =
          static_cast<double>(sum - was.usage_ns) / 1e9 / std::chrono::duration<double>(now - was.at).count();
      if (*l.cpus < w.cpu_below) {
        l.since = was.since.value_or(was.at);
        l.said = was.said;
        // An SLO crossing within it: the lull starts again there (unsaid).
        for (const inv::Node* n : ins->cgroups)
          if (auto c = st.crossed.find(n->dir.id()); c != st.crossed.end() && c->second > *l.since)
            l.since = c->second, l.said = false;
        // A thread runnable and not run since the last read is a victim starved of CPU (behind an RT
        // task, an IRQ storm, an overloaded pool), not an idle one: its wait, still open, has crossed
        // no SLO yet. The lull starts again now, and the sample says how long it has waited.
        if (auto waiting = st.starved(*ins, now)) {
          l.since = now, l.said = false;
          double& s = st.starved_s[w.instance];
          s = std::max(s, std::chrono::duration<double>(now - *waiting).count());
        }
      } else {
        st.threads.erase(w.instance);
      }
      l.rose = *l.cpus >= w.cpu_above;
      if (l.rose && !was.rose) out.push_back({w.instance, true, *l.cpus});
    }
    if (l.since && !l.said && now - *l.since >= lull) {
      out.push_back({w.instance, false, l.cpus.value_or(0)});
      l.said = true;
    }
    next.emplace(w.instance, l);
  }
  st.lulls = std::move(next);
  std::erase_if(st.threads, [&](const auto& t) { return !st.lulls.contains(t.first); });
  // Crossings matter only within a lull: older ones than the longest go.
  std::erase_if(st.crossed, [&](const auto& c) { return now - c.second > std::chrono::seconds(10); });
  return out;
}

// CPU usage, and throttling where a quota is set (nothing else is ever throttled); on v2 one cpu.stat
// holds both. Read every tick for a cgroup whose tasks ran (the sensor saw one switched in or migrate)
// or whose usage grew at the last read; one that was idle then and ran nothing since is idle still
// (a task cannot run without being switched in, or having run at the last read), so it is read
// again only every few ticks, when it is due.
void Sensing::State::read_counters(const inv::Node& n, NodeState& ns, bool ran, double& usage_s, bool& usage,
                                   double& throttled, bool& throttle) {
  const inv::Inventory& inv = *inventory;
  if (!ran && !ns.busy && ns.usage_ns && !inv.due(ns.usage_tick, n.dir.id(), /*idle=*/true)) {
    usage = throttle = true;  // 0, known
    return;
  }
  CgroupCpuStats cs;
  if (inv.defining().unified) {
    read_throttling(n.dir, cs);  // cpu.stat: usage and throttling in one read
  } else {
    cs.usage_ns = usage_ns(n);
    if (ns.limited) {
      if (auto p = inv.place(n, CgroupFile::cpu_stat)) read_throttling(*p->dir, cs, p->below);
    } else if (inv.place(n, CgroupFile::cpu_stat)) {
      throttle = true;  // no quota: not throttled, which is 0 (its counter is read once it has one)
    }
  }
  ns.busy = true;
  if (cs.usage_ns && ns.usage_ns && *cs.usage_ns >= *ns.usage_ns) {
    usage_s += static_cast<double>(*cs.usage_ns - *ns.usage_ns) / 1e9;
    usage = true;
    ns.busy = *cs.usage_ns > *ns.usage_ns;
  }
  ns.usage_tick = inv.tick();
  if (cs.nr_throttled && ns.nr_throttled && *cs.nr_throttled >= *ns.nr_throttled) {
    throttled += static_cast<double>(*cs.nr_throttled - *ns.nr_throttled);
    throttle = true;
  }
  ns.usage_ns = cs.usage_ns;
  ns.nr_throttled = cs.nr_throttled;
}

Result<ctl::Snapshot> Sensing::sample(uint64_t tick) {
  ctl::Snapshot snap;
  if (auto r = sample(tick, snap); !r) return std::unexpected(r.error());
  return snap;
}

namespace {

// `w` cleared for a new tick, its strings' and vectors' storage kept (a tick's instances are mostly
// the last tick's).
void reuse(ctl::WorkloadSignals& w) {
  std::string instance = std::move(w.instance), workload = std::move(w.workload);
  std::vector<std::string> cgroups = std::move(w.cgroups);
  w = ctl::WorkloadSignals{};
  w.instance = std::move(instance);
  w.workload = std::move(workload);
  w.cgroups = std::move(cgroups);
}

}  // namespace

Result<void> Sensing::sample(uint64_t tick, ctl::Snapshot& snap) {
  State& st = *s_;
  inv::Inventory& inv = *st.inventory;
  auto now = st.sensor->now();
  // The cgroups first: when that fails the sensor's counts stay in the kernel for the next tick.
  if (auto r = inv.refresh_tree(); !r) return std::unexpected(r.error());
  auto delta = st.sensor->read();
  if (!delta) return std::unexpected(delta.error());
  double secs = std::max(1e-3, std::chrono::duration<double>(now - st.last).count());
  st.last = now;

  State::Ran ran;
  ran.reserve(delta->cgroups.size());
  for (const auto& c : delta->cgroups)
    if (did_something(c)) ran.emplace(c.id, &c);
  inv.match([&](CgroupId id) { return ran.contains(id); });
  (void)inv.take_removed();  // their state goes when their slots are taken again
  st.tend_sensor();
  st.count(*delta);
  snap.tick = tick;
  snap.period_s = secs;
  snap.workloads.resize(inv.instances().size());
  st.records.resize(inv.instances().size());
  for (size_t i = 0; i < inv.instances().size(); ++i) {
    const inv::Instance& ins = inv.instances()[i];
    auto c = st.counts.instances.find(ins.name);
    st.records[i] = {&ins, c != st.counts.instances.end() ? &c->second : nullptr, ins.spec};
    st.signals_of(st.records[i], snap.workloads[i], ran, secs);
  }
  return {};
}

// The sensor's map keeps an entry for every critical cgroup that holds tasks; when room is short it
// drops gone cgroups' entries first, then those of cgroups no workload covers, then best-effort ones.
// With early ticks it watches the critical cgroups with an SLO.
void Sensing::State::tend_sensor() {
  const inv::Inventory& inv = *inventory;
  critical.clear();
  for (const inv::Instance& ins : inv.instances())
    if (ins.spec->critical)
      for (const inv::Node* n : ins.cgroups)
        if (n->tasks != 0) critical.push_back(n->dir.id());
  sensor->tend(
      [&](CgroupId id) {
        const inv::Node* n = inv.find(id);
        if (n == nullptr) return bpf::Worth::gone;
        return n->rule < 0 ? bpf::Worth::unmatched : bpf::Worth::best_effort;
      },
      critical);
  if (!spec.early_ticks) return;
  // The critical cgroups with an SLO, watched by the sensor (it compares: unchanged is no work).
  watch.clear();
  const auto window = std::chrono::duration_cast<std::chrono::nanoseconds>(kEarlyWindow).count();
  const double long_us = std::chrono::duration<double, std::micro>(kEarlyLong).count();
  for (const inv::Instance& ins : inv.instances()) {
    if (!ins.spec->critical || !ins.spec->slo_p99_us) continue;
    const double slo_us = *ins.spec->slo_p99_us;
    for (const inv::Node* n : ins.cgroups)
      watch.push_back({n->dir.id(), static_cast<uint64_t>(slo_us * 1000.0), kEarlyOver,
                       static_cast<uint64_t>(window),
                       static_cast<uint32_t>(std::min(std::max(long_us, slo_us), 4e9))});
  }
  // A failure only costs early ticks: the periodic ones go on.
  (void)sensor->watch(watch);
}

// This tick's counts in place of the last tick's (the two together would be twice the memory).
void Sensing::State::count(const bpf::SchedDelta& delta) {
  counts = SensedCounts{};
  counts.map_full = delta.map_full;
  counts.stamp_full = delta.stamp_full;
  counts.evicted = delta.evicted;
  counts.map_capacity = sensor->capacity();
  counts.map_entries = sensor->entries();
  for (const auto& c : delta.cgroups) {
    const inv::Node* n = inventory->find(c.id);
    // Cgroups no workload matches (and ones gone since the read) count as "other".
    if (n == nullptr || n->rule < 0)
      add(counts.other, c);
    else
      add(counts.instances[n->instance], c);
  }
}

// One instance's signals: its cgroups' facts and counters, the sensor's counts, the demand watch's.
void Sensing::State::signals_of(const InstanceRecord& r, ctl::WorkloadSignals& w, const Ran& ran,
                                double secs) {
  const inv::Inventory& inv = *inventory;
  const inv::Instance& ins = *r.instance;
  reuse(w);
  w.instance = ins.name;
  w.workload = ins.spec->name;
  w.critical = ins.spec->critical;
  w.fresh = ins.fresh;
  w.host_daemon = !ins.cgroups.empty() && std::all_of(ins.cgroups.begin(), ins.cgroups.end(),
                                                      [](const inv::Node* n) { return n->spared; });
  w.cgroups.resize(ins.cgroups.size());
  double usage_s = 0, throttled = 0;
  bool usage = false, throttle = false;
  for (size_t j = 0; j < ins.cgroups.size(); ++j) {
    const inv::Node* n = ins.cgroups[j];
    w.cgroups[j] = n->dir.path();
    NodeState& ns = state_of(*n);
    const bool active = ran.contains(n->dir.id()) || ns.busy;
    if (!ns.facts || ns.dirty || inv.due(ns.facts_tick, n->dir.id(), !active)) read_facts(*n, ns);
    read_counters(*n, ns, ran.contains(n->dir.id()), usage_s, usage, throttled, throttle);
    w.cpus |= ns.cpus;
    if (!w.shares) w.shares = ns.shares;
    if (ns.in_class) w.in_class = w.in_class.value_or(true) && *ns.in_class;
  }
  const bool pmu = sensor->pmu();
  if (r.counts != nullptr) {
    const SensedCounts::Counts& k = *r.counts;
    w.rq_waits = k.rq.count;
    w.rq_p50_us = k.rq.quantile_us(0.5);
    w.rq_p99_us = k.rq.quantile_us(0.99);
    w.rq_wait_s_per_s = static_cast<double>(k.rq.sum_ns) / 1e9 / secs;
    w.migrations_per_s = static_cast<double>(k.migrations) / secs;
    w.cross_llc_per_s = static_cast<double>(k.cross_llc) / secs;
    w.cross_numa_per_s = static_cast<double>(k.cross_numa) / secs;
    if (pmu) {
      const uint64_t misses = bpf::count_of(k.counters, bpf::Counter::cache_misses);
      const uint64_t instructions = bpf::count_of(k.counters, bpf::Counter::instructions);
      w.cache_misses_per_s = static_cast<double>(misses) / secs;
      if (instructions > 0) w.mpki = static_cast<double>(misses) * 1000.0 / static_cast<double>(instructions);
    }
  } else if (pmu) {
    w.cache_misses_per_s = 0;
  }
  if (usage) w.cpu_usage = usage_s / secs;
  if (throttle) w.throttled_per_s = throttled / secs;
  if (auto l = lulls.find(ins.name); l != lulls.end()) {
    if (l->second.since) w.lull_s = std::chrono::duration<double>(l->second.at - *l->second.since).count();
    w.watch_cpu = l->second.cpus;
  }
  if (auto s = starved_s.find(ins.name); s != starved_s.end()) {
    w.starved_s = s->second;
    starved_s.erase(s);
  }
}

}  // namespace keel::loop
