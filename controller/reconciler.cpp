#include "controller/reconciler.h"

#include <algorithm>

#include "actuators/cgroup_knobs.h"
#include "actuators/irq.h"
#include "actuators/sched_features.h"
#include "controller/sensing.h"
#include "host/fileio.h"

namespace keel::ctl {

namespace {

const WorkloadSignals* find(const Snapshot& s, const std::string& inst) {
  for (const auto& w : s.workloads)
    if (w.instance == inst) return &w;
  return nullptr;
}

// "batch/job-1" -> "keel-batch-job-1": a resctrl group name (one directory level).
std::string group_name(const std::string& inst) {
  std::string g = "keel-" + inst;
  std::replace(g.begin(), g.end(), '/', '-');
  return g;
}

}  // namespace

Reconciler::Reconciler(config::Config cfg, CgroupLayout layout, CgroupHierarchy defining, Topology topo,
                       act::KnobWriter& w)
    : cfg_(std::move(cfg)),
      layout_(std::move(layout)),
      defining_(std::move(defining)),
      topo_(std::move(topo)),
      w_(&w) {}

void Reconciler::note(Reconciled& out, const std::string& n) {
  if (std::find(said_.begin(), said_.end(), n) != said_.end()) return;
  said_.push_back(n);
  out.notes.push_back(n);
}

Reconciled Reconciler::apply(const Plan& plan, const Snapshot& snap) {
  Reconciled out;
  if (cfg_.actuators.cpuset) cpus(plan, snap, out);
  if (cfg_.actuators.cpu_weight) weights(plan, snap, out);
  if (cfg_.actuators.resctrl) resctrl(plan, snap, out);
  if (cfg_.actuators.steal_task) steal(plan, out);
  if (cfg_.actuators.irq_affinity) irqs(plan, snap, out);
  out.changes = w_->take_changes();
  return out;
}

// Every managed cgroup's cpuset in one ordered set of writes: the plan's CPUs, or as found for a
// cgroup keel changed before and the plan no longer sets.
void Reconciler::cpus(const Plan& plan, const Snapshot& snap, Reconciled& out) {
  const CgroupHierarchy* cs = defining_.unified ? &defining_ : layout_.v1_with("cpuset");
  if (cs == nullptr || !cs->has("cpuset")) {
    bool wanted = std::any_of(plan.desired.begin(), plan.desired.end(),
                              [](const auto& d) { return d.second.cpus.has_value(); });
    if (wanted) note(out, "no cpuset controller on " + defining_.name() + ": CPU placement is not applied");
    return;
  }
  std::vector<act::CpusetTarget> targets;
  std::vector<std::string> given_back;
  std::map<std::string, bool> seen;
  for (const auto& w : snap.workloads) {
    auto d = plan.desired.find(w.instance);
    std::optional<CpuSet> want = d != plan.desired.end() ? d->second.cpus : std::nullopt;
    for (const auto& path : w.cgroups) {
      auto cg = cpuset_cgroup(w_->roots(), layout_, defining_, path);
      if (!cg) {
        if (want)
          note(out,
               "no cpuset cgroup of its own for " + w.instance + " (" + path + "): its CPUs are not changed");
        continue;
      }
      if (seen[*cg]) continue;  // two workload cgroups in one cpuset cgroup: the first one's wish
      seen[*cg] = true;
      if (want) {
        if (!found_cpus_.contains(*cg)) {
          auto cur = read_file(cs->mount / cg->substr(1) / "cpuset.cpus");
          if (!cur) {
            out.errors.push_back("cpus of " + w.instance + ": " + cur.error().message());
            continue;
          }
          found_cpus_[*cg] = std::string(trim(*cur));
        }
        targets.push_back({*cg, *want, std::nullopt});
      } else if (auto f = found_cpus_.find(*cg); f != found_cpus_.end()) {
        auto set = CpuSet::parse_list(f->second);
        if (set && !set->empty()) {
          targets.push_back({*cg, *set, std::nullopt});
          given_back.push_back(*cg);
        } else {
          found_cpus_.erase(f);  // found empty: left to `keel restore` (it had no tasks then)
        }
      }
    }
  }
  // Cgroups keel changed whose instance is gone: their cpusets go back too (if the cgroup is still there).
  for (const auto& [cg, value] : found_cpus_) {
    if (seen.contains(cg)) continue;
    std::error_code ec;
    if (!std::filesystem::is_directory(cs->mount / cg.substr(1), ec)) {
      given_back.push_back(cg);
      continue;
    }
    auto set = CpuSet::parse_list(value);
    if (set && !set->empty()) {
      targets.push_back({cg, *set, std::nullopt});
      given_back.push_back(cg);
    }
  }
  if (targets.empty()) {
    for (const auto& g : given_back) found_cpus_.erase(g);
    return;
  }
  auto r = act::apply_cpusets(*w_, *cs, targets, topo_.online());
  if (!r) {
    out.errors.push_back("cpusets: " + r.error().message());
    return;
  }
  for (const auto& g : given_back) found_cpus_.erase(g);
}

void Reconciler::weights(const Plan& plan, const Snapshot& snap, Reconciled& out) {
  const CgroupHierarchy* cpu = defining_.unified ? &defining_ : layout_.v1_with("cpu");
  if (cpu == nullptr || !cpu->has("cpu")) {
    bool wanted = std::any_of(plan.desired.begin(), plan.desired.end(),
                              [](const auto& d) { return d.second.shares.has_value(); });
    if (wanted) note(out, "no cpu controller on " + defining_.name() + ": CPU weights are not applied");
    return;
  }
  const char* file = cpu->unified ? "cpu.weight" : "cpu.shares";
  const auto mapping = cfg_.actuators.weight_mapping;
  std::map<std::string, bool> seen;
  for (const auto& w : snap.workloads) {
    auto d = plan.desired.find(w.instance);
    // Plain values: g++ 12 sees a maybe-uninitialized optional here (a false positive at -O2).
    const bool want = d != plan.desired.end() && d->second.shares.has_value();
    const uint64_t shares = want ? *d->second.shares : 0;
    for (const auto& path : w.cgroups) {
      seen[path] = true;
      if (path == "/") continue;
      if (want) {
        if (!found_weight_.contains(path)) {
          auto cur = read_file(cpu->mount / path.substr(1) / file);
          if (!cur) {
            note(out, "no " + std::string(file) + " for " + w.instance + " (" + path +
                          "): its weight is not changed");
            continue;
          }
          found_weight_[path] = std::string(trim(*cur));
        }
        if (auto r = act::set_cpu_weight(*w_, *cpu, path, shares, mapping); !r)
          out.errors.push_back("weight of " + w.instance + ": " + r.error().message());
      } else if (auto f = found_weight_.find(path); f != found_weight_.end()) {
        auto k = act::cgroup_knob(w_->roots(), *cpu, path, file);
        auto r = k ? w_->set(*k, f->second) : Result<bool>(std::unexpected(k.error()));
        if (!r)
          out.errors.push_back("weight of " + w.instance + " back to " + f->second + ": " +
                               r.error().message());
        else
          found_weight_.erase(f);
      }
    }
  }
  for (auto it = found_weight_.begin(); it != found_weight_.end();) {
    if (seen.contains(it->first)) {
      ++it;
      continue;
    }
    // Its instance is gone: put the weight back if the cgroup is still there.
    if (auto k = act::cgroup_knob(w_->roots(), *cpu, it->first, file);
        k && std::filesystem::exists(k->abs(w_->roots())))
      if (auto r = w_->set(*k, it->second); !r)
        out.errors.push_back("weight of " + it->first + ": " + r.error().message());
    it = found_weight_.erase(it);
  }
}

void Reconciler::resctrl(const Plan& plan, const Snapshot& snap, Reconciled& out) {
  if (!resctrl_opened_) {
    resctrl_opened_ = true;
    auto r = act::Resctrl::open(*w_);
    if (!r)
      out.errors.push_back("resctrl: " + r.error().message());
    else if (!*r)
      note(out, "resctrl is not mounted: L3 ways and memory bandwidth are not applied");
    else
      resctrl_.emplace(std::move(**r));
  }
  if (!resctrl_) return;
  for (const auto& w : snap.workloads) {
    auto d = plan.desired.find(w.instance);
    if (d == plan.desired.end() || (!d->second.l3_ways && !d->second.mba_percent)) continue;
    act::ResctrlGroupSpec spec;
    spec.name = group_name(w.instance);
    spec.l3_ways = d->second.l3_ways;
    if (d->second.mba_percent) {
      if (resctrl_->info().mba_mbps)
        note(out, "resctrl is mounted with mba_MBps: MBA percentages are not applied");
      else
        spec.mb_percent = d->second.mba_percent;
    }
    auto applied = resctrl_->apply(spec);
    if (!applied) {
      out.errors.push_back("resctrl group " + spec.name + ": " + applied.error().message());
      continue;
    }
    groups_[w.instance] = spec.name;
    std::vector<int> tids;
    for (const auto& path : w.cgroups) {
      auto text =
          read_file(defining_.mount / path.substr(1) / (defining_.unified ? "cgroup.threads" : "tasks"));
      if (!text) continue;
      for (size_t i = 0; i < text->size();) {
        size_t e = text->find('\n', i);
        if (e == std::string::npos) e = text->size();
        if (e > i) tids.push_back(std::atoi(text->substr(i, e - i).c_str()));
        i = e + 1;
      }
    }
    if (auto s = resctrl_->sync_tasks(spec.name, tids); !s)
      out.errors.push_back("resctrl group " + spec.name + " tasks: " + s.error().message());
  }
  // Groups no longer wanted (given back, or their instance gone): removed, their tasks and ways go back.
  for (auto it = groups_.begin(); it != groups_.end();) {
    auto d = plan.desired.find(it->first);
    bool wanted =
        d != plan.desired.end() && (d->second.l3_ways || d->second.mba_percent) && find(snap, it->first);
    if (wanted) {
      ++it;
      continue;
    }
    if (auto r = resctrl_->release(it->second); !r) {
      out.errors.push_back("resctrl group " + it->second + ": " + r.error().message());
      ++it;
    } else {
      it = groups_.erase(it);
    }
  }
}

void Reconciler::steal(const Plan& plan, Reconciled& out) {
  if (plan.steal == steal_) return;
  if (!steal_probed_) {
    steal_probed_ = true;
    auto p = act::probe_sched_feature(w_->roots(), act::kSteal);
    steal_found_on_ = p && p->state == act::FeatureState::on;
  }
  // Already on when keel came: keel neither turns it off nor needs to turn it on.
  if (steal_found_on_) {
    steal_ = plan.steal;
    return;
  }
  auto r = act::set_sched_feature(*w_, act::kSteal, plan.steal);
  if (!r) {
    out.errors.push_back("steal_task: " + r.error().message());
    return;
  }
  if (*r == act::FeatureChange::unsupported)
    note(out, "steal_task is not supported by this kernel: not applied");
  steal_ = plan.steal;
}

// The IRQs named by actuators.irq_names stay off the CPUs critical instances hold (as the seeds bind
// NIC queues by hand): each IRQ's affinity as found minus those CPUs (or every other CPU when that
// leaves none), and as found again when no critical instance holds CPUs.
void Reconciler::irqs(const Plan& plan, const Snapshot& snap, Reconciled& out) {
  CpuSet critical;
  for (const auto& w : snap.workloads)
    if (auto d = plan.desired.find(w.instance); w.critical && d != plan.desired.end() && d->second.cpus)
      critical |= *d->second.cpus;
  auto knob = [](unsigned irq) {
    return act::KnobPath{act::Root::proc,
                         std::filesystem::path("irq") / std::to_string(irq) / "smp_affinity_list"};
  };
  if (critical.empty()) {
    for (auto it = found_irqs_.begin(); it != found_irqs_.end();) {
      auto r = w_->set(knob(it->first), it->second);
      if (!r && r.error().err != ENOENT) {
        out.errors.push_back("IRQ " + std::to_string(it->first) + " back to " + it->second + ": " +
                             r.error().message());
        ++it;
      } else {
        it = found_irqs_.erase(it);
      }
    }
    return;
  }
  auto table = act::read_interrupts(w_->roots());
  if (!table) {
    note(out, "IRQ affinity is not applied: " + table.error().message());
    return;
  }
  auto ids = act::match_irqs(*table, cfg_.actuators.irq_names);
  if (ids.empty()) {
    note(out, "no IRQ in /proc/interrupts matches actuators.irq_names: nothing to keep off critical CPUs");
    return;
  }
  const CpuSet host = topo_.online();
  for (unsigned irq : ids) {
    if (!found_irqs_.contains(irq)) {
      auto cur = read_file(knob(irq).abs(w_->roots()));
      if (!cur) continue;  // gone since /proc/interrupts was read
      found_irqs_[irq] = std::string(trim(*cur));
    }
    auto found = CpuSet::parse_list(found_irqs_[irq]);
    CpuSet want = (found ? *found & host : host) - critical;
    if (want.empty()) want = host - critical;
    if (want.empty()) {
      note(out, "IRQ " + std::to_string(irq) + " stays where it is: critical instances hold every CPU");
      continue;
    }
    auto r = act::move_irqs_onto(*w_, {irq}, want, host);
    if (!r)
      out.errors.push_back("IRQ " + std::to_string(irq) + ": " + r.error().message());
    else if (!r->warning.empty())
      note(out, r->warning);
  }
}

}  // namespace keel::ctl
