#include "controller/controller.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "host/cpu_planner.h"

namespace keel::ctl {

namespace {

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

std::string show(const std::optional<uint64_t>& v) { return v ? std::to_string(*v) : ""; }
std::string show(const std::optional<unsigned>& v) { return v ? std::to_string(*v) : ""; }
std::string show(const std::optional<CpuSet>& v) { return v ? v->to_list() : ""; }

// Walks the desired state alongside a snapshot: both in name order (keel's snapshots are), so one
// cursor does without lookups; an instance out of order (as a test may make) costs a lookup.
class DesiredCursor {
 public:
  explicit DesiredCursor(std::map<std::string, KnobState>& m) : m_(m), cur_(m.begin()) {}
  // The desired state of `inst`, or null.
  const KnobState* seek(const std::string& inst) {
    if (prev_ != nullptr && !(*prev_ < inst)) cur_ = m_.lower_bound(inst);
    prev_ = &inst;
    while (cur_ != m_.end() && cur_->first < inst) ++cur_;
    return cur_ != m_.end() && cur_->first == inst ? &cur_->second : nullptr;
  }
  // Replaces the state of the instance last sought (an empty one removes its entry).
  void set(const std::string& inst, KnobState k) {
    const bool listed = cur_ != m_.end() && cur_->first == inst;
    if (k == KnobState{}) {
      if (listed) cur_ = m_.erase(cur_);
    } else if (listed) {
      cur_->second = std::move(k);
    } else {
      cur_ = m_.emplace_hint(cur_, inst, std::move(k));
    }
  }

 private:
  std::map<std::string, KnobState>& m_;
  std::map<std::string, KnobState>::iterator cur_;
  const std::string* prev_ = nullptr;
};

}  // namespace

const char* to_string(Knob k) {
  switch (k) {
    case Knob::shares:
      return "shares";
    case Knob::cpus:
      return "cpus";
    case Knob::l3_ways:
      return "l3_ways";
    case Knob::mba_percent:
      return "mba_percent";
    case Knob::steal:
      return "steal";
    case Knob::preempt_class:
      return "class";
  }
  return "?";
}

const char* to_string(Action::Kind k) {
  switch (k) {
    case Action::Kind::act:
      return "act";
    case Action::Kind::give_back:
      return "give-back";
    case Action::Kind::revert:
      return "revert";
  }
  return "?";
}

namespace {

// The spec a workload the config does not know (a trace recorded with another config) is decided by.
config::WorkloadSpec fallback(bool critical, const CpuSet& online) {
  config::Config c;
  c.workloads.emplace_back();
  c.workloads.back().klass = critical ? config::WorkloadClass::critical : config::WorkloadClass::best_effort;
  return config::compile(c, online).workloads.front();
}

}  // namespace

Controller::Controller(config::Spec spec, Topology topo, Policy policy)
    : spec_(std::move(spec)),
      topo_(std::move(topo)),
      policy_(policy),
      fallback_critical_(fallback(true, topo_.online())),
      fallback_best_effort_(fallback(false, topo_.online())) {
  for (const auto& w : spec_.workloads) by_name_.emplace(w.name, &w);
  period_s_ = std::chrono::duration<double>(spec_.period).count();
  const auto period = std::max<int64_t>(1, spec_.period.count());
  starvation_ticks_ = static_cast<unsigned>(
      std::max<int64_t>(1, (spec_.actuators.starvation_limit.count() + period - 1) / period));
}

void Controller::index(const Snapshot& s) {
  cur_ = &s;
  at_.clear();
  at_.reserve(s.workloads.size());
  specs_.resize(s.workloads.size());
  for (size_t i = 0; i < s.workloads.size(); ++i) {
    const WorkloadSignals& w = s.workloads[i];
    at_.emplace(w.instance, i);
    auto it = by_name_.find(w.workload);
    specs_[i] = it != by_name_.end() ? it->second : w.critical ? &fallback_critical_ : &fallback_best_effort_;
  }
}

const config::WorkloadSpec& Controller::spec_of(const WorkloadSignals& w) const {
  return *specs_[static_cast<size_t>(&w - cur_->workloads.data())];
}

// Smooths each instance's p99 and counts consecutive good and bad ticks.
void Controller::smooth(const Snapshot& s, Plan& plan) {
  // Snapshots come in name order, and plan.workloads holds only instances of this one (step() erased
  // the others): a cursor walks it alongside, a lookup only for an instance out of order.
  auto at = plan.workloads.begin();
  for (const auto& w : s.workloads) {
    InstanceState& st = states_[w.instance];
    if (!st.shares_found) st.shares_found = w.shares;
    const double a = policy_.ewma_alpha;
    const double waits_per_s = static_cast<double>(w.rq_waits) / std::max(1e-3, s.period_s);
    st.rate = st.rate == 0 ? waits_per_s : a * waits_per_s + (1 - a) * st.rate;
    if (w.cpu_usage) st.cpu = st.cpu == 0 ? *w.cpu_usage : a * *w.cpu_usage + (1 - a) * st.cpu;
    // The peak while it holds steps, from ticks at least half a period long (an early tick's few
    // milliseconds can look several times busier than the load is).
    if (!st.steps.empty() && s.period_s >= 0.5 * period_s_) {
      st.peak_rate = std::max(st.peak_rate, st.rate);
      st.peak_cpu = std::max(st.peak_cpu, st.cpu);
    }
    const bool measured = w.rq_waits >= std::max(1u, policy_.min_waits);
    if (measured) {
      st.p99_us = st.seen ? a * w.rq_p99_us + (1 - a) * st.p99_us : w.rq_p99_us;
      st.migrations_per_s =
          st.seen ? a * w.migrations_per_s + (1 - a) * st.migrations_per_s : w.migrations_per_s;
      if (w.mpki) st.mpki = st.seen && st.mpki ? a * *w.mpki + (1 - a) * *st.mpki : *w.mpki;
      st.seen = true;
    } else if (st.seen) {
      st.p99_us *= 1 - a;  // (almost) no waits this tick: no latency to speak of
      st.migrations_per_s = a * w.migrations_per_s + (1 - a) * st.migrations_per_s;
    }
    WorkloadView v;
    v.p99_us = st.p99_us;
    v.rung = static_cast<unsigned>(st.steps.size());
    const config::WorkloadSpec& sp = spec_of(w);
    if (w.critical && sp.slo_p99_us) {
      const double target = *sp.slo_p99_us;
      v.slack = st.seen ? (target - st.p99_us) / target : 1.0;
      st.binding = st.seen ? "rq p99 " + fmt("%.0f", st.p99_us) + " us vs SLO " + fmt("%.0f", target) + " us"
                           : "rq p99 not measured since the last change (too few waits) vs SLO " +
                                 fmt("%.0f", target) + " us";
      // Declared secondary targets bind when their slack is smaller.
      auto consider = [&](double value, double limit, const std::string& what, const char* unit) {
        double sl = (limit - value) / limit;
        if (st.seen && sl < v.slack) {
          v.slack = sl;
          st.binding = what + " " + fmt("%.1f", value) + unit + " vs SLO " + fmt("%.1f", limit) + unit;
        }
      };
      if (sp.slo_migrations_per_s)
        consider(st.migrations_per_s, *sp.slo_migrations_per_s, "migrations", "/s");
      if (sp.slo_mpki && st.mpki) consider(*st.mpki, *sp.slo_mpki, "MPKI", "");
      // A wait still open (a thread runnable and not run, seen between ticks) counts while it lasts:
      // no switch-in has ended it, so no histogram holds it yet.
      if (const double open_us = w.starved_s * 1e6; open_us > 0 && (target - open_us) / target < v.slack) {
        v.slack = (target - open_us) / target;
        st.binding = "a thread runnable and not run for " + fmt("%.0f", open_us) + " us vs SLO " +
                     fmt("%.0f", target) + " us";
      }
      st.bad = v.slack < policy_.act_below ? st.bad + 1 : 0;
      // Slack only counts where it was measured: a tick with too few waits is a reason to wait, not
      // evidence that the protection can go (the victim's falling demand is, see step()).
      if (measured) st.good = v.slack > policy_.give_back_above ? st.good + 1 : 0;
      v.violated = st.bad >= policy_.violate_ticks ||
                   (v.slack < policy_.severe_below && w.rq_waits >= 5 * std::max(1u, policy_.min_waits));
    }
    if (at == plan.workloads.end() || at->first != w.instance)
      at = plan.workloads.try_emplace(at, w.instance);
    (at++)->second = v;
  }
}

// Who takes what the victim needs: other instances running on its CPUs, by what they take there
// (their load spread evenly over their CPUs): CPU time, plus the run-queue pressure they add (how many
// of their tasks wait for a CPU on average: each one is another entity ahead of the victim), weighted
// up by cache misses where counted.
std::vector<Interference> Controller::rank(const Snapshot& s, const WorkloadSignals& victim) const {
  std::vector<Interference> out;
  for (const auto& w : s.workloads) {
    if (w.instance == victim.instance || w.critical) continue;
    CpuSet overlap = w.cpus & victim.cpus;
    if (overlap.empty() || w.cpus.empty() || !w.cpu_usage) continue;
    double score = (*w.cpu_usage + w.rq_wait_s_per_s) * overlap.count() / w.cpus.count();
    if (w.mpki) score *= 1.0 + *w.mpki / 10.0;
    if (score > 0.01) out.push_back({victim.instance, w.instance, score});
  }
  std::sort(out.begin(), out.end(), [](const Interference& a, const Interference& b) {
    return a.score != b.score ? a.score > b.score : a.antagonist < b.antagonist;
  });
  return out;
}

// The cores rung: whole cores for `victim` from its pool (sized by its CPU use the first time, one more
// after), best-effort work off them, never below a best-effort instance's minimum; none with a note.
std::optional<Controller::Step> Controller::cores_step(const Snapshot& s, const WorkloadSignals& victim,
                                                       std::vector<std::string>& notes) const {
  const config::WorkloadSpec& vs = spec_of(victim);
  auto current = [&](const std::string& inst) {
    auto it = plan_.desired.find(inst);
    return it == plan_.desired.end() ? KnobState{} : it->second;
  };
  auto signals = [&](const std::string& inst) -> const WorkloadSignals* {
    auto it = at_.find(inst);
    return it == at_.end() ? nullptr : &s.workloads[it->second];
  };
  const CpuSet host = topo_.online();
  CpuSet other_critical;
  for (const auto& [inst, k] : plan_.desired)
    if (inst != victim.instance && k.cpus) {
      const WorkloadSignals* w = signals(inst);
      if (w && w->critical) other_critical |= *k.cpus;
    }
  KnobState vk = current(victim.instance);
  unsigned have = vk.cpus ? vk.cpus->count() : 0;
  unsigned want = have == 0
                      ? std::max(1u, static_cast<unsigned>(std::ceil(victim.cpu_usage.value_or(0.5) * 1.25)))
                      : have + 1;  // already dedicated and still violated: one more
  const unsigned lo = vs.cpus_min, hi = vs.cpus_max;
  // Best-effort keeps its minimum: the victim can take at most what that leaves.
  unsigned be_min = config::kDefaults.best_effort_cpus_min;
  for (const auto& w : s.workloads)
    if (!w.critical) be_min = std::max(be_min, spec_of(w).cpus_min);
  const unsigned reserved = (spec_.reserved & host).count();
  unsigned room = host.count() > reserved + other_critical.count() + be_min
                      ? host.count() - reserved - other_critical.count() - be_min
                      : 0;
  want = std::min({std::max(want, lo), hi, room});
  if (want > have && want >= lo) {
    CpuRequest req;
    req.cpus = want;
    req.max_cpus = hi;
    req.numa = vs.numa_single ? NumaPolicy::single : NumaPolicy::any;
    req.critical = true;
    if (vs.has_pool) req.pool = vs.pool;
    req.reserved = spec_.reserved;
    req.other_critical = other_critical;
    if (vk.cpus) req.current = *vk.cpus;
    auto placed = plan_cpus(topo_, req);
    if (placed) {
      Step step;
      step.rung = Rung::cpus;
      step.before[victim.instance] = vk;
      vk.cpus = placed->cpus;
      step.after[victim.instance] = vk;
      // Best-effort work must keep its minimum on what is left (it is moved there every tick).
      CpuSet taken = placed->cpus | placed->held_idle | other_critical;
      bool ok = true;
      for (const auto& w : s.workloads) {
        if (w.critical) continue;
        const config::WorkloadSpec& bs = spec_of(w);
        const unsigned left = (bs.pool - taken - spec_.reserved).count();
        if (left < bs.cpus_min) {
          ok = false;
          notes.push_back("best-effort " + w.instance + " would keep " + std::to_string(left) +
                          " CPUs, below its minimum " + std::to_string(bs.cpus_min));
          break;
        }
      }
      if (ok) return step;
    } else {
      notes.push_back("no placement: " + placed.error().message());
    }
  } else {
    notes.push_back(have ? "dedicated CPUs at their bound (" + std::to_string(have) + ")"
                         : "no room for dedicated CPUs");
  }
  return std::nullopt;
}

// One victim's climb this tick: what the rungs ask of the plan and its state, and the notes that say
// why a rung has no room.
struct Controller::Ladder {
  const Controller& c;
  const Snapshot& s;
  const WorkloadSignals& victim;
  InstanceState& st;
  const std::vector<Interference>& antagonists;
  bool jump;
  const config::WorkloadSpec& vs;
  std::vector<std::string> notes;

  bool locked(Rung r) const {
    if (jump && r == Rung::weight) return true;  // the class stays: it suffices as often as cores
    auto it = st.locked_until.find(r);
    return it != st.locked_until.end() && s.tick < it->second;
  }
  KnobState current(const std::string& inst) const {
    auto it = c.plan_.desired.find(inst);
    return it == c.plan_.desired.end() ? KnobState{} : it->second;
  }
  uint64_t shares_now(const std::string& inst) const {
    auto k = current(inst);
    if (k.shares) return *k.shares;
    auto it = c.states_.find(inst);
    return it != c.states_.end() && it->second.shares_found ? *it->second.shares_found : kSharesDefault;
  }
  const WorkloadSignals* signals(const std::string& inst) const {
    auto it = c.at_.find(inst);
    return it == c.at_.end() ? nullptr : &s.workloads[it->second];
  }
  // Every antagonist in the preemption class already (their weights are the kernel's).
  bool classed() const {
    return !antagonists.empty() &&
           std::all_of(antagonists.begin(), antagonists.end(),
                       [&](const Interference& a) { return current(a.antagonist).preempt; });
  }

  // 0. Reactive preemption class: the antagonists yield their CPUs to the victim at once.
  std::optional<Step> preempt_class() {
    if (c.spec_.actuators.preempt_class != config::PreemptMode::reactive || locked(Rung::preempt_class))
      return std::nullopt;
    Step step;
    step.rung = Rung::preempt_class;
    for (const auto& a : antagonists) {
      KnobState k = current(a.antagonist);
      const WorkloadSignals* aw = signals(a.antagonist);
      if (k.preempt || (aw != nullptr && aw->host_daemon)) continue;  // never demotes the host's own
      step.before[a.antagonist] = k;
      k.preempt = true;
      step.after[a.antagonist] = k;
    }
    if (!step.after.empty()) return step;
    notes.push_back("antagonists in the preemption class");
    return std::nullopt;
  }

  // 1. Weight: the victim's up (x2, to its bounds), the antagonists' down (/2, to theirs). `fallback`:
  // a weight step kept for when whole cores cannot be had (unmanaged work is what delays it).
  std::optional<Step> weight(std::optional<Step>& fallback) {
    if (!c.spec_.actuators.cpu_weight || locked(Rung::weight)) return std::nullopt;
    Step step;
    step.rung = Rung::weight;
    const uint64_t max = vs.shares_max, vmin = vs.shares_min;
    uint64_t now = shares_now(victim.instance);
    if (now < max) {
      KnobState k = current(victim.instance);
      step.before[victim.instance] = k;
      k.shares = std::clamp<uint64_t>(std::max<uint64_t>(now * 2, now + 1), vmin, max);
      step.after[victim.instance] = k;
    }
    size_t lowered = 0;
    for (const auto& a : antagonists) {
      const WorkloadSignals* aw = signals(a.antagonist);
      const config::WorkloadSpec& as = aw ? c.spec_of(*aw) : c.fallback_best_effort_;
      const uint64_t min = as.shares_min, amax = as.shares_max;
      uint64_t an = shares_now(a.antagonist);
      KnobState k = current(a.antagonist);
      if (an <= min || k.preempt || (aw != nullptr && aw->host_daemon))
        continue;  // the kernel fixes a weight in the class (and refuses one)
      step.before[a.antagonist] = k;
      k.shares = std::clamp<uint64_t>(an / 2, min, std::max(min, amax));
      step.after[a.antagonist] = k;
      ++lowered;
    }
    // No best-effort antagonist left to lower (they yield already, in the class): what still delays the
    // victim is work keel does not manage, which its own weight does not reach (they meet higher up). With
    // unmanaged work kept off critical cores, whole cores are the rung that suffices.
    const bool unmanaged = c.spec_.actuators.isolate_unmanaged && c.spec_.actuators.cpuset && lowered == 0;
    // The victim's weight alone against antagonists in the class gains nothing worth a step (measured:
    // bench/README.md, "weights on top of the class"): the class is what orders them.
    const bool useless = classed() && lowered == 0 && !unmanaged;
    // On CPUs of its own with no best-effort work there, its weight has nothing to order either.
    const bool alone = antagonists.empty() && current(victim.instance).cpus.has_value();
    if (alone) {
      notes.push_back("no best-effort work on its own CPUs: a weight has nothing there to order");
    } else if (useless) {
      notes.push_back("the antagonists are in the preemption class: its own weight beyond it gains nothing");
    } else {
      if (!step.after.empty() && !unmanaged) return step;
      if (!step.after.empty()) fallback = std::move(step);  // if whole cores cannot be had
      notes.push_back(
          unmanaged ? "the antagonists yield already (the class): unmanaged work is kept off whole cores"
                    : "weights at their bounds");
    }
    return std::nullopt;
  }

  // 2. Whole cores for the victim from its pool, best-effort work off them. Worth their cost only while
  // the victim keeps a good part of a CPU busy: with every antagonist in the class, what still delays a
  // light one is wake-up latency, and a core of its own would sit idle most of the time.
  // Its demand is what it used plus what it waited to use; a victim four times over its SLO or more is
  // starved, and what it got says little of what it needs.
  std::optional<Step> cores() {
    if (!c.spec_.actuators.cpuset || locked(Rung::cpus)) return std::nullopt;
    const bool starved = vs.slo_p99_us && st.p99_us >= (1.0 - c.policy_.jump_below) * *vs.slo_p99_us;
    const bool light = classed() && !starved && st.cpu + victim.rq_wait_s_per_s < c.policy_.pin_min_cpus;
    if (!light) return c.cores_step(s, victim, notes);
    notes.push_back("its demand (" + fmt("%.2f", st.cpu) + " CPUs busy) is below " +
                    fmt("%.2f", c.policy_.pin_min_cpus) +
                    " with the antagonists in the class: no whole cores");
    return std::nullopt;
  }

  // 3. More L3 ways to the victim (its bounds), when resctrl is enabled.
  std::optional<Step> l3_ways() {
    if (!c.spec_.actuators.resctrl || !vs.l3_ways || locked(Rung::l3_ways)) return std::nullopt;
    KnobState k = current(victim.instance);
    unsigned now = k.l3_ways.value_or(vs.l3_ways->min - 1);
    if (now >= vs.l3_ways->max) {
      notes.push_back("L3 ways at their bound");
      return std::nullopt;
    }
    Step step;
    step.rung = Rung::l3_ways;
    step.before[victim.instance] = k;
    k.l3_ways = std::max(now + 1, vs.l3_ways->min);
    step.after[victim.instance] = k;
    return step;
  }

  // 4. Antagonists' memory bandwidth down (10 points a step, to their bounds).
  std::optional<Step> mba() {
    if (!c.spec_.actuators.resctrl || locked(Rung::mba)) return std::nullopt;
    Step step;
    step.rung = Rung::mba;
    for (const auto& a : antagonists) {
      const WorkloadSignals* aw = signals(a.antagonist);
      if (!aw || !c.spec_of(*aw).mba_percent) continue;
      KnobState k = current(a.antagonist);
      unsigned now = k.mba_percent.value_or(100);
      const unsigned min = c.spec_of(*aw).mba_percent->min, max = c.spec_of(*aw).mba_percent->max;
      if (now <= min) continue;
      step.before[a.antagonist] = k;
      k.mba_percent = std::clamp(now >= 10 ? now - 10 : 0u, min, std::max(min, max));
      step.after[a.antagonist] = k;
    }
    if (!step.after.empty()) return step;
    return std::nullopt;
  }

  // 5. steal_task, when the victim spans several CPUs of one LLC.
  std::optional<Step> steal() {
    if (!c.spec_.actuators.steal_task || c.steal_ || locked(Rung::steal)) return std::nullopt;
    KnobState k = current(victim.instance);
    CpuSet cpus = k.cpus ? *k.cpus : victim.cpus;
    std::map<unsigned, unsigned> per_llc;
    for (unsigned cpu : cpus.cpus())
      if (const Pu* pu = c.topo_.find_pu(cpu)) ++per_llc[pu->l3];
    bool spans = std::any_of(per_llc.begin(), per_llc.end(), [](const auto& e) { return e.second >= 2; });
    if (!spans) {
      notes.push_back("steal_task: the victim does not span 2 CPUs of one LLC");
      return std::nullopt;
    }
    Step step;
    step.rung = Rung::steal;
    step.steal_before = false;
    step.steal_after = true;
    return step;
  }
};

// The next rung with room, lowest first, as a step; none (with the reason) when nothing is left.
std::optional<Controller::Step> Controller::next_step(const Snapshot& s, const WorkloadSignals& victim,
                                                      InstanceState& st,
                                                      const std::vector<Interference>& antagonists,
                                                      std::string& why_not, bool jump) const {
  Ladder l{*this, s, victim, st, antagonists, jump, spec_of(victim), {}};
  if (auto step = l.preempt_class()) return step;
  std::optional<Step> weight_fallback;
  if (auto step = l.weight(weight_fallback)) return step;
  if (auto step = l.cores()) return step;
  if (weight_fallback) return weight_fallback;
  if (auto step = l.l3_ways()) return step;
  if (auto step = l.mba()) return step;
  if (auto step = l.steal()) return step;
  why_not = "nothing left within bounds";
  for (const auto& n : l.notes) why_not += "; " + n;
  return std::nullopt;
}

// Whether applying `to` (a step's after or before values) keeps every best-effort instance at its
// minimum CPUs once best-effort work moves off the critical instances' CPUs.
// The best-effort preemption class. `always`: a best-effort instance whose pool shares CPUs with a
// critical instance's is in it from the first tick that instance exists (it costs the best-effort
// work nothing while the critical one idles), and leaves it when no such instance is left. Pools, not
// the CPUs in use: moving work off a critical core does not flip the class. `reactive`: the ladder's
// first rung sets it (next_step). Either way, one that stays runnable and starved in the class for
// starvation_limit has it lifted for one tick (Plan::starvation_lifts), so it keeps making progress.
void Controller::preempt_classes(const Snapshot& s, Plan& plan) {
  plan.starvation_lifts.clear();
  const auto mode = spec_.actuators.preempt_class;
  if (mode == config::PreemptMode::off) return;
  std::vector<const WorkloadSignals*> critical;
  for (const auto& w : s.workloads)
    if (w.critical) critical.push_back(&w);
  // The critical instance beside each best-effort workload (by spec: pools are the workload's).
  std::unordered_map<const config::WorkloadSpec*, const WorkloadSignals*> beside;
  auto near_of = [&](const config::WorkloadSpec& bs) {
    auto [it, fresh] = beside.try_emplace(&bs, nullptr);
    if (fresh)
      for (const WorkloadSignals* c : critical)
        if (!(spec_of(*c).pool & bs.pool).empty()) {
          it->second = c;
          break;
        }
    return it->second;
  };
  DesiredCursor desired(plan_.desired);
  for (const auto& w : s.workloads) {
    const KnobState* now = desired.seek(w.instance);
    if (w.critical || w.host_daemon) continue;  // the host's own daemons are never demoted
    bool preempt = now != nullptr && now->preempt;
    if (mode == config::PreemptMode::always) {
      const WorkloadSignals* near = near_of(spec_of(w));
      if ((near != nullptr) != preempt) {
        if (near != nullptr)
          plan.actions.push_back(
              {plan.tick, w.instance, Knob::preempt_class, "", "on", Action::Kind::act,
               "best-effort beside critical " + near->instance + ": preemption class from its first tick"});
        else
          plan.actions.push_back({plan.tick, w.instance, Knob::preempt_class, "on", "",
                                  Action::Kind::give_back, "no critical instance shares its CPUs"});
        preempt = near != nullptr;
        KnobState k = now != nullptr ? *now : KnobState{};
        k.preempt = preempt;
        desired.set(w.instance, std::move(k));
      }
    }
    const bool in = preempt;
    // Starved: on average half a task or more waiting for a CPU while it gets under 5% of one.
    const bool starved = in && w.rq_wait_s_per_s >= 0.5 && w.cpu_usage.has_value() && *w.cpu_usage < 0.05;
    if (!starved) {
      if (!starved_.empty()) starved_.erase(w.instance);
    } else if (++starved_[w.instance] >= starvation_ticks_) {
      starved_.erase(w.instance);
      plan.starvation_lifts.push_back(w.instance);
      plan.actions.push_back({plan.tick, w.instance, Knob::preempt_class, "on", "", Action::Kind::give_back,
                              "starved in the class for " + std::to_string(starvation_ticks_) + " ticks (" +
                                  fmt("%.1f", w.rq_wait_s_per_s) + " tasks waiting, " +
                                  fmt("%.2f", *w.cpu_usage) + " CPUs): lifted for one tick"});
    } else if (in && !last_lifts_.empty() &&
               std::find(last_lifts_.begin(), last_lifts_.end(), w.instance) != last_lifts_.end()) {
      plan.actions.push_back({plan.tick, w.instance, Knob::preempt_class, "", "on", Action::Kind::act,
                              "back in the class after a starvation lift"});
    }
  }
  last_lifts_ = plan.starvation_lifts;
  std::erase_if(starved_, [&](const auto& e) { return !at_.contains(e.first); });
}

bool Controller::fits(const Snapshot& s, const std::map<std::string, KnobState>& to, std::string& why) const {
  CpuSet taken;
  for (const auto& w : s.workloads) {
    if (!w.critical) continue;
    auto it = to.find(w.instance);
    const KnobState* k = it != to.end()                       ? &it->second
                         : plan_.desired.contains(w.instance) ? &plan_.desired.at(w.instance)
                                                              : nullptr;
    if (k && k->cpus) taken |= *k->cpus;
  }
  if (taken.empty()) return true;
  for (const auto& w : s.workloads) {
    if (w.critical || w.host_daemon) continue;  // not moved off: their minimum is no bound
    const config::WorkloadSpec& bs = spec_of(w);
    const unsigned min = bs.cpus_min, left = (bs.pool - taken - spec_.reserved).count();
    if (left < min) {
      why = "best-effort " + w.instance + " would keep " + std::to_string(left) +
            " CPUs, below its minimum " + std::to_string(min);
      return false;
    }
  }
  return true;
}

// Whether a step would change a knob this tick's plan already changed (one step per knob per tick).
bool Controller::clashes(const Step& step, const Plan& plan, bool forward) const {
  const auto& to = forward ? step.after : step.before;
  for (const auto& a : plan.actions) {
    if (a.knob == Knob::steal && (step.steal_after || step.steal_before)) return true;
    auto it = to.find(a.instance);
    if (it == to.end()) continue;
    KnobState cur = plan_.desired.contains(a.instance) ? plan_.desired.at(a.instance) : KnobState{};
    const KnobState& k = it->second;
    if ((a.knob == Knob::shares && k.shares != cur.shares) || (a.knob == Knob::cpus && k.cpus != cur.cpus) ||
        (a.knob == Knob::preempt_class && k.preempt != cur.preempt) ||
        (a.knob == Knob::l3_ways && k.l3_ways != cur.l3_ways) ||
        (a.knob == Knob::mba_percent && k.mba_percent != cur.mba_percent))
      return true;
  }
  return false;
}

void Controller::apply(const Step& step, Plan& plan, Action::Kind kind, const std::string& reason) {
  const auto& to = kind == Action::Kind::act ? step.after : step.before;
  for (auto [inst, k] : to) {
    KnobState was = plan_.desired.contains(inst) ? plan_.desired.at(inst) : KnobState{};
    // A best-effort instance's CPUs are not stepped: they follow the critical ones every tick.
    if (auto at = at_.find(inst); at == at_.end() || !cur_->workloads[at->second].critical) k.cpus = was.cpus;
    // The class is only the class rung's: another step given back or reverted leaves it as it is now.
    if (step.rung != Rung::preempt_class) k.preempt = was.preempt;
    auto emit = [&](Knob knob, std::string a, std::string b) {
      if (a != b) plan.actions.push_back({plan.tick, inst, knob, a, b, kind, reason});
    };
    emit(Knob::shares, show(was.shares), show(k.shares));
    emit(Knob::cpus, show(was.cpus), show(k.cpus));
    emit(Knob::l3_ways, show(was.l3_ways), show(k.l3_ways));
    emit(Knob::mba_percent, show(was.mba_percent), show(k.mba_percent));
    emit(Knob::preempt_class, was.preempt ? "on" : "", k.preempt ? "on" : "");
    if (k == KnobState{})
      plan_.desired.erase(inst);
    else
      plan_.desired[inst] = k;
  }
  auto steal_to = kind == Action::Kind::act ? step.steal_after : step.steal_before;
  if (steal_to && *steal_to != steal_) {
    plan.actions.push_back(
        {plan.tick, "", Knob::steal, steal_ ? "on" : "off", *steal_to ? "on" : "off", kind, reason});
    steal_ = *steal_to;
  }
}

void Controller::adopt(std::map<std::string, KnobState> desired, bool steal) {
  adopting_ = std::move(desired);
  adopting_steal_ = steal;
}

void Controller::take_adopted(const Snapshot& s) {
  std::map<std::string, KnobState> adopted = std::move(*adopting_);
  adopting_.reset();
  const auto& a = spec_.actuators;
  for (auto& [inst, k] : adopted) {
    if (!a.cpuset) k.cpus.reset();
    if (!a.cpu_weight) k.shares.reset();
    if (!a.resctrl) k.l3_ways.reset(), k.mba_percent.reset();
    if (a.preempt_class == config::PreemptMode::off) k.preempt = false;
  }
  std::erase_if(adopted, [&](const auto& e) { return !at_.contains(e.first) || e.second == KnobState{}; });
  std::vector<std::string> owners;  // critical instances with an SLO, in name order
  for (const auto& w : s.workloads)
    if (w.critical && spec_of(w).slo_p99_us) owners.push_back(w.instance);
  std::sort(owners.begin(), owners.end());
  if (owners.empty()) return;  // nothing holds them: as found, the reconciler gives them back
  for (size_t i = 0; i < owners.size(); ++i) {
    Step step;
    auto own = adopted.find(owners[i]);
    if (own != adopted.end()) {
      step.before[own->first] = KnobState{};
      step.after[own->first] = own->second;
    }
    for (const auto& [inst, k] : adopted)
      if (i == 0 && !s.workloads[at_.at(inst)].critical) {
        step.before[inst] = KnobState{};
        step.after[inst] = k;
      }
    if (i == 0 && adopting_steal_ && a.steal_task) {  // held with the first owner's step
      step.steal_before = false;
      step.steal_after = true;
      steal_ = true;
    }
    if (step.after.empty() && !step.steal_after) continue;
    const KnobState mine = own != adopted.end() ? own->second : KnobState{};
    step.rung = mine.cpus ? Rung::cpus : mine.shares ? Rung::weight : Rung::preempt_class;
    step.tick = s.tick;
    step.verified = true;  // it held before the handover
    InstanceState& st = states_[owners[i]];
    step.be_usage = be_usage_;
    if (st.steps.empty()) st.peak_rate = st.rate, st.peak_cpu = st.cpu;
    for (const auto& [inst, k] : step.after) plan_.desired[inst] = k;
    st.steps.push_back(std::move(step));
  }
}

// Whether the victim's own demand fell since its first step: this tick's wake-ups per second and CPUs
// busy both under eased_ratio of their smoothed peak, over a tick at least half a period long (an early
// tick's few milliseconds are no evidence of a lull); or a lull of lull_s the demand watch saw between
// ticks, with no more wake-ups per second than at the peak (a victim starved of CPU still wakes).
bool Controller::demand_fell(const Snapshot& s, const WorkloadSignals& v, const InstanceState& st) const {
  // A thread runnable and kept off the CPU is starved, not idle: its few wake-ups and little CPU are
  // the interference's doing (issue 38: keel gave everything back to a victim behind an RT hog).
  if (st.peak_rate <= 0 || v.starved_s > 0) return false;
  const double rate = static_cast<double>(v.rq_waits) / std::max(1e-3, s.period_s);
  if (v.lull_s >= policy_.lull_s && st.peak_cpu > 0 && rate <= st.peak_rate) return true;
  if (s.period_s < 0.5 * period_s_) return false;
  const bool fewer = rate < policy_.eased_ratio * st.peak_rate;
  const bool idler = !v.cpu_usage || st.peak_cpu <= 0 || *v.cpu_usage < policy_.eased_ratio * st.peak_cpu;
  return fewer && idler;
}

std::vector<DemandWatch> Controller::demand_watch() const {
  std::vector<DemandWatch> out;
  for (const auto& [instance, st] : states_)
    if (!st.steps.empty() && st.peak_rate > 0 && st.peak_cpu > 0)
      out.push_back({instance, policy_.eased_ratio * st.peak_cpu});
    else if (st.steps.empty() && !st.parked.empty() && spec_.actuators.cpuset)
      out.push_back({instance, 0, policy_.demand_pin_cpus});
  std::sort(out.begin(), out.end(),
            [](const DemandWatch& a, const DemandWatch& b) { return a.instance < b.instance; });
  return out;
}

// Applies several steps in one tick as one change per knob, from its value now to its last.
void Controller::apply_merged(const std::vector<const Step*>& steps, Plan& plan, Action::Kind kind,
                              const std::string& reason) {
  Plan scratch;
  scratch.tick = plan.tick;
  for (const Step* step : steps) apply(*step, scratch, kind, reason);
  const size_t first = plan.actions.size();
  for (const Action& a : scratch.actions) {
    auto same = std::find_if(plan.actions.begin() + static_cast<std::ptrdiff_t>(first), plan.actions.end(),
                             [&](const Action& b) { return b.instance == a.instance && b.knob == a.knob; });
    if (same != plan.actions.end())
      same->to = a.to;
    else
      plan.actions.push_back(a);
  }
  plan.actions.erase(std::remove_if(plan.actions.begin() + static_cast<std::ptrdiff_t>(first),
                                    plan.actions.end(), [](const Action& a) { return a.from == a.to; }),
                     plan.actions.end());
}

// Whether the victim's own demand is high on contended CPUs (Policy::demand_pin_cpus): it keeps that
// many CPUs busy over a tick at least half a period long (any_window: any tick, for cores a violation
// takes), and it and its antagonists want more CPUs than it has.
bool Controller::wants_cores(const Snapshot& s, const WorkloadSignals& v, const InstanceState& st,
                             const std::vector<Interference>& antagonists, bool any_window) const {
  // The demand watch's read between ticks (about 100 ms) is evidence in a tick of any length.
  const bool watched = v.watch_cpu && *v.watch_cpu >= policy_.demand_pin_cpus;
  if (!spec_.actuators.cpuset || (!any_window && !watched && s.period_s < 0.5 * period_s_) || !v.cpu_usage)
    return false;
  const double cpu = std::max(*v.cpu_usage, watched ? *v.watch_cpu : 0.0);
  if (cpu < policy_.demand_pin_cpus || v.cpus.empty()) return false;
  if (auto it = st.locked_until.find(Rung::cpus); it != st.locked_until.end() && s.tick < it->second)
    return false;
  double wanted = cpu + v.rq_wait_s_per_s;
  for (const auto& a : antagonists) wanted += a.score;
  return wanted > static_cast<double>(v.cpus.count());
}

// Gives back every step the victim holds, newest first, and parks them; false (nothing changed) when
// another victim's step this tick changed one of their knobs.
bool Controller::park(const Snapshot& s, const WorkloadSignals& v, InstanceState& st, Plan& plan,
                      const std::string& numbers) {
  for (const Step& step : st.steps)
    if (clashes(step, plan, false)) return false;
  const double rate = static_cast<double>(v.rq_waits) / std::max(1e-3, s.period_s);
  const std::string why = numbers + "; its demand fell (" + fmt("%.0f", rate) + " waits/s, " +
                          fmt("%.2f", v.cpu_usage.value_or(0)) + " CPUs busy; " + fmt("%.0f", st.peak_rate) +
                          " and " + fmt("%.2f", st.peak_cpu) + " at its busiest since the first step): all " +
                          std::to_string(st.steps.size()) + " given back, parked until its next SLO crossing";
  std::vector<const Step*> newest_first;
  for (auto it = st.steps.rbegin(); it != st.steps.rend(); ++it) newest_first.push_back(&*it);
  apply_merged(newest_first, plan, Action::Kind::give_back, why);
  st.parked = std::move(st.steps);
  st.steps.clear();
  st.given_back.reset();
  st.good = st.bad = 0;
  st.seen = false;
  st.peak_rate = st.peak_cpu = 0;
  return true;
}

// Re-applies the parked steps, oldest first, in one tick; false (and the ladder from here) when they
// no longer fit, or wait a tick when another victim's step changed one of their knobs.
bool Controller::unpark(const Snapshot& s, InstanceState& st, Plan& plan, const std::string& numbers) {
  std::string unfit;
  for (const Step& step : st.parked) {
    if (clashes(step, plan, true)) return false;
    if (!fits(s, step.after, unfit)) {
      st.parked.clear();
      return false;
    }
  }
  const std::string why = numbers + "; recalling steps 1-" + std::to_string(st.parked.size()) +
                          " held in its last busy spell, at once";
  std::vector<const Step*> oldest_first;
  for (const Step& step : st.parked) oldest_first.push_back(&step);
  apply_merged(oldest_first, plan, Action::Kind::act, why);
  for (Step& step : st.parked) {
    step.tick = s.tick;
    step.verified = true;  // they worked then
    step.be_usage = be_usage_;
  }
  st.steps = std::move(st.parked);
  st.parked.clear();
  st.peak_rate = st.rate, st.peak_cpu = st.cpu;
  st.quiet_until = s.tick + policy_.cooldown_ticks;
  st.bad = st.good = 0;
  st.seen = false;
  return true;
}

const Plan& Controller::step(const Snapshot& s) {
  // The last tick's plan, reused: most instances are the same, their entries stay.
  Plan& plan = plan_;
  plan.tick = s.tick;
  plan.actions.clear();
  plan.interference.clear();
  begin(s, plan);
  // Critical instances in a fixed order (name), one step each at most per tick.
  std::vector<const WorkloadSignals*> victims;
  for (const auto& w : s.workloads)
    if (w.critical) victims.push_back(&w);
  std::sort(victims.begin(), victims.end(), [](auto* a, auto* b) { return a->instance < b->instance; });
  for (const WorkloadSignals* v : victims)
    if (spec_of(*v).slo_p99_us) decide(s, *v, plan);
  best_effort_cpus(s, plan);
  plan.steal = steal_;
  for (auto& [inst, v] : plan.workloads)
    if (auto it = states_.find(inst); it != states_.end())
      v.rung = static_cast<unsigned>(it->second.steps.size());
  return plan;
}

void Controller::begin(const Snapshot& s, Plan& plan) {
  index(s);
  std::erase_if(plan.workloads, [&](const auto& e) { return !at_.contains(e.first); });
  // Instances that are gone, or made again under their name (a new cgroup): their state and wishes go
  // (the reconciler restores what they had; a new one starts as found).
  for (auto it = states_.begin(); it != states_.end();) {
    auto at = at_.find(it->first);
    if (at == at_.end() || s.workloads[at->second].fresh) {
      plan_.desired.erase(it->first);
      it = states_.erase(it);
    } else {
      ++it;
    }
  }
  smooth(s, plan);
  // Best-effort demand: CPUs busy plus tasks queued. Not busy alone: a step that squeezes the noise
  // lowers its CPU time, which is not the noise going away.
  double be = 0;
  for (const auto& w : s.workloads)
    if (!w.critical && w.cpu_usage) be += *w.cpu_usage + w.rq_wait_s_per_s;
  be_usage_ = be_usage_ == 0 ? be : policy_.ewma_alpha * be + (1 - policy_.ewma_alpha) * be_usage_;
  if (adopting_) take_adopted(s);
  // The class first: a victim's steps this tick see it.
  preempt_classes(s, plan);
}

// One critical instance's tick: the first of these that applies decides it.
void Controller::decide(const Snapshot& s, const WorkloadSignals& v, Plan& plan) {
  InstanceState& st = states_[v.instance];
  const WorkloadView& view = plan.workloads[v.instance];
  Turn t{v, st, view, rank(s, v), "", ""};
  if (view.violated)
    for (const auto& a : t.antagonists) plan.interference.push_back(a);
  t.numbers = st.binding + " (slack " + fmt("%.2f", view.slack) + ")";
  if (!t.antagonists.empty())
    t.named = "; antagonist " + t.antagonists.front().antagonist + " (" +
              fmt("%.2f", t.antagonists.front().score) + " CPUs busy or queued on its CPUs)";
  if (revert_give_back(s, t, plan)) return;
  const bool measured = v.rq_waits >= std::max(1u, policy_.min_waits);
  // Its own demand fell (it went idle): everything it holds goes back now, parked for its next
  // busy spell. Not while a violation is measured this tick: then it still needs them; unless the
  // demand watch saw a lull with no SLO crossing in it (sensing restarts a lull at each), when what
  // this tick measured came before the lull.
  const bool lull = v.lull_s >= policy_.lull_s && v.starved_s <= 0;
  if (!st.steps.empty() && !(view.violated && measured && !lull) && demand_fell(s, v, st) &&
      park(s, v, st, plan, t.numbers))
    return;
  // Its next SLO crossing (the early tick brings it at once): the parked steps again, all in one tick.
  if (!st.parked.empty() && st.bad >= 1 && measured && unpark(s, st, plan, t.numbers)) return;
  if (s.tick < st.quiet_until) return;
  if (cores_for_demand(s, t, plan) || judge_last_step(s, t, plan)) return;
  if (view.violated)
    escalate(s, t, plan);
  else
    give_back_one(s, t, plan);
}

// A give-back that brought the violation back is undone and give-back locked out for a while.
bool Controller::revert_give_back(const Snapshot& s, Turn& t, Plan& plan) {
  InstanceState& st = t.st;
  std::string unfit;
  if (!st.given_back || !t.view.violated ||
      s.tick >
          st.given_back_tick + 2 * policy_.give_back_ticks + policy_.revert_after + policy_.violate_ticks ||
      clashes(*st.given_back, plan, true) || !fits(s, st.given_back->after, unfit))
    return false;
  size_t first = plan.actions.size();
  apply(*st.given_back, plan, Action::Kind::act, "give-back reverted: " + t.numbers);
  for (size_t i = first; i < plan.actions.size(); ++i) plan.actions[i].kind = Action::Kind::revert;
  st.steps.push_back(*st.given_back);
  st.steps.back().verified = true;
  st.given_back.reset();
  st.give_back_locked_until = s.tick + policy_.lockout_ticks;
  // The smoothed p99 lags the revert: let it settle before judging again.
  st.quiet_until = s.tick + std::max(policy_.cooldown_ticks, policy_.revert_after);
  st.bad = st.good = 0;
  st.seen = false;  // smoothing restarts: the old history is of another configuration
  return true;
}

// Its demand is high on contended CPUs: whole cores while that lasts (the parked ones if it has them).
bool Controller::cores_for_demand(const Snapshot& s, Turn& t, Plan& plan) {
  InstanceState& st = t.st;
  if (t.view.violated || !st.steps.empty() || !wants_cores(s, t.v, st, t.antagonists)) return false;
  if (!st.parked.empty() && unpark(s, st, plan, t.numbers)) return true;
  std::vector<std::string> notes;
  auto cores = cores_step(s, t.v, notes);
  if (!cores || clashes(*cores, plan, true)) return false;
  cores->tick = s.tick;
  cores->slack_before = t.view.slack;
  cores->be_usage = be_usage_;
  cores->verified = true;  // no violation to judge it by
  cores->by_demand = true;
  apply(*cores, plan, Action::Kind::act,
        t.numbers + "; its demand is high (" + fmt("%.2f", *t.v.cpu_usage) +
            " CPUs busy) where it and best-effort work want more CPUs than it has: whole cores while "
            "that lasts" +
            t.named);
  st.peak_rate = st.rate, st.peak_cpu = st.cpu;
  st.steps.push_back(*cores);
  st.parked.clear();
  st.quiet_until = s.tick + policy_.cooldown_ticks;
  st.seen = false;
  st.bad = 0;
  return true;
}

// The verdict on its newest step: one that did not raise slack within revert_after ticks is undone and
// its rung locked out; one still unjudged under a violation holds further steps (escalate only on
// evidence: the last step has to have raised slack). True when that decides the tick.
bool Controller::judge_last_step(const Snapshot& s, Turn& t, Plan& plan) {
  InstanceState& st = t.st;
  if (st.steps.empty() || st.steps.back().verified) return false;
  Step& last = st.steps.back();
  if (s.tick >= last.tick + policy_.revert_after) {
    if (t.view.slack > last.slack_before + 0.02 || !t.view.violated) {
      last.verified = true;
    } else if (!clashes(last, plan, false)) {
      Step undo = last;
      st.steps.pop_back();
      apply(undo, plan, Action::Kind::revert,
            "no improvement after " + std::to_string(policy_.revert_after) + " ticks (slack " +
                fmt("%.2f", undo.slack_before) + " -> " + fmt("%.2f", t.view.slack) + ")");
      st.locked_until[undo.rung] = s.tick + policy_.lockout_ticks;
      st.quiet_until = s.tick + policy_.cooldown_ticks;
      st.parked.clear();  // what worked last time does not now
      st.bad = st.good = 0;
      st.seen = false;  // smoothing restarts: the old history is of another configuration
      return true;
    }
  }
  if (!t.view.violated || st.steps.back().verified) return false;
  if (t.view.slack > st.steps.back().slack_before + 0.02) {
    st.steps.back().verified = true;
    return false;
  }
  return true;
}

// Violated: the next rung (or whole cores at once, many times over the SLO), else why not.
void Controller::escalate(const Snapshot& s, Turn& t, Plan& plan) {
  InstanceState& st = t.st;
  std::string why_not;
  // Many times the SLO over plenty of waits: whole cores at once where they can be had.
  const bool jump = spec_.actuators.cpuset && t.view.slack <= policy_.jump_below &&
                    t.v.rq_waits >= 5 * static_cast<uint64_t>(policy_.min_waits);
  auto next = jump ? next_step(s, t.v, st, t.antagonists, why_not, true) : std::nullopt;
  const bool jumped = next.has_value();
  if (!next) next = next_step(s, t.v, st, t.antagonists, why_not);
  // At most one step per knob per instance per tick: another victim's step this tick wins.
  if (next && clashes(*next, plan, true)) {
    next.reset();
    why_not = "waits a tick: a knob it needs was changed for another workload this tick";
  }
  if (!next) {
    plan.workloads[t.v.instance].blocked = why_not;
    return;
  }
  next->tick = s.tick;
  next->slack_before = t.view.slack;
  next->be_usage = be_usage_;
  apply(*next, plan, Action::Kind::act,
        t.numbers +
            (st.bad >= policy_.violate_ticks ? " for " + std::to_string(st.bad) + " ticks"
                                             : " (severe: over twice the SLO, at once)") +
            t.named + (jumped ? "; many times the SLO: whole cores at once" : ""));
  // Cores taken while its demand is high on contended CPUs are held for that demand, not judged by
  // the slack they bring: whole cores can raise a run-queue p99 (its own threads now queue behind
  // each other) while the end-to-end latency is static pinning's; reverting them hands the noise
  // the core back until the lockout ends.
  next->by_demand = next->rung == Rung::cpus && wants_cores(s, t.v, st, t.antagonists, true);
  next->verified = next->by_demand;
  if (st.steps.empty()) st.peak_rate = st.rate, st.peak_cpu = st.cpu;
  st.steps.push_back(*next);
  st.parked.clear();  // a new climb: what the last spell held is superseded
  st.quiet_until = s.tick + policy_.cooldown_ticks;
  st.bad = 0;  // the next step needs a violation measured after this one
  st.seen = false;
  st.given_back.reset();
}

// Slack measured good for long enough while it stays busy: give back one step, newest first, once
// the best-effort load has eased since it was taken (half the CPUs busy or queued); under the same
// load only as a probe, after probe_ticks. A wrong one is reverted (revert_give_back).
void Controller::give_back_one(const Snapshot& s, Turn& t, Plan& plan) {
  InstanceState& st = t.st;
  if (st.good < policy_.give_back_ticks || st.steps.empty() || s.tick < st.give_back_locked_until ||
      !st.steps.back().verified || clashes(st.steps.back(), plan, false))
    return;
  const Step& last = st.steps.back();
  // Cores held for its demand stay while it is high (they would be taken again next tick).
  if (last.by_demand && wants_cores(s, t.v, st, t.antagonists)) return;
  const bool noise_eased = be_usage_ < 0.5 * last.be_usage;
  if (!noise_eased && st.good < policy_.probe_ticks) return;
  std::string why = noise_eased ? "; best-effort load eased (" + fmt("%.2f", be_usage_) +
                                      " CPUs busy or queued, " + fmt("%.2f", last.be_usage) + " at the step)"
                                : "; a probe under unchanged load";
  Step back = last;
  st.steps.pop_back();
  apply(back, plan, Action::Kind::give_back,
        t.numbers + " above " + fmt("%.2f", policy_.give_back_above) + " for " + std::to_string(st.good) +
            " ticks" + why);
  st.given_back = std::make_unique<Step>(back);
  st.given_back_tick = s.tick;
  st.good = 0;
  st.seen = false;
  st.quiet_until = s.tick + policy_.cooldown_ticks;
}

// Best-effort CPUs follow the critical ones every tick: the pool minus what critical instances hold
// (new instances included); back to as found when no critical instance holds CPUs.
void Controller::best_effort_cpus(const Snapshot& s, Plan& plan) {
  CpuSet& taken = plan.critical_cpus;
  taken = CpuSet();
  for (const auto& w : s.workloads)
    if (w.critical)
      if (auto it = plan_.desired.find(w.instance); it != plan_.desired.end() && it->second.cpus)
        taken |= *it->second.cpus;
  // What each workload's instances are given: its pool minus those CPUs and the reserved ones, capped
  // at its maximum; none when that breaks its minimum (it is left where it is).
  std::map<const config::WorkloadSpec*, std::optional<CpuSet>> given;
  auto give = [&](const config::WorkloadSpec& bs) -> const std::optional<CpuSet>& {
    auto [it, fresh] = given.try_emplace(&bs);
    if (!fresh) return it->second;
    CpuSet rest = bs.pool - taken - spec_.reserved;
    if (rest.count() < bs.cpus_min) return it->second;
    CpuSet capped;
    for (unsigned c : rest.cpus())
      if (capped.count() < bs.cpus_max) capped.add(c);
    it->second = capped;
    return it->second;
  };
  DesiredCursor desired(plan_.desired);
  const std::optional<CpuSet> none;
  for (const auto& w : s.workloads) {
    const KnobState* state = desired.seek(w.instance);
    if (w.critical || w.host_daemon) continue;  // the host's own daemons keep every CPU they had
    const std::optional<CpuSet>& now = state != nullptr ? state->cpus : none;
    std::optional<CpuSet> want;
    if (!taken.empty() && spec_.actuators.cpuset) {
      want = give(spec_of(w));
      if (!want) continue;  // cannot move it off without breaking its minimum: leave it
    }
    if (want == now) continue;
    plan.actions.push_back(
        {plan.tick, w.instance, Knob::cpus, show(now), show(want),
         want ? Action::Kind::act : Action::Kind::give_back,
         want ? "best-effort off critical CPUs " + taken.to_list() : "no critical CPUs held"});
    KnobState k = state != nullptr ? *state : KnobState{};
    k.cpus = want;
    desired.set(w.instance, std::move(k));
  }
}

}  // namespace keel::ctl

namespace keel::ctl {

namespace {

std::string_view parent_of(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == 0 || slash == std::string_view::npos ? std::string_view("/") : path.substr(0, slash);
}

bool below(std::string_view path, std::string_view ancestor) {
  if (ancestor == "/") return true;
  return path.size() > ancestor.size() && path.starts_with(ancestor) && path[ancestor.size()] == '/';
}

}  // namespace

std::vector<std::string> class_gaps(const Snapshot& s, const Plan& plan) {
  std::vector<std::string> out;
  for (const auto& b : s.workloads) {
    auto d = plan.desired.find(b.instance);
    if (b.critical || d == plan.desired.end() || !d->second.preempt) continue;
    for (const auto& c : s.workloads) {
      if (!c.critical) continue;
      for (const auto& bp : b.cgroups) {
        const std::string_view parent = parent_of(bp);
        auto apart = std::find_if(c.cgroups.begin(), c.cgroups.end(),
                                  [&](const std::string& cp) { return !below(cp, parent); });
        if (apart == c.cgroups.end()) continue;
        out.push_back("best-effort " + b.instance + " (" + bp + ") and critical " + c.instance + " (" +
                      *apart + ") do not meet as siblings: the preemption class on " + bp +
                      " orders it only under " + std::string(parent) + "; weights decide above it");
        break;
      }
    }
  }
  return out;
}

}  // namespace keel::ctl

namespace keel::ctl {

bool in_class(const Plan& p, const std::string& instance) {
  auto d = p.desired.find(instance);
  if (d == p.desired.end() || !d->second.preempt) return false;
  return std::find(p.starvation_lifts.begin(), p.starvation_lifts.end(), instance) ==
         p.starvation_lifts.end();
}

}  // namespace keel::ctl
