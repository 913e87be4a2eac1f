#include "loop/reconciler.h"

#include <algorithm>
#include <cerrno>
#include <set>

#include "actuators/cgroup_knobs.h"
#include "actuators/irq.h"
#include "actuators/restore.h"
#include "actuators/sched_features.h"
#include "host/cgroup_files.h"
#include "host/fileio.h"

namespace keel::loop {

namespace {

using ctl::Plan;

// A cgroup below another of the same instance (a pod's container, a VM's vCPU cgroup): its weight and
// class only rank it among its siblings, so those are set on the instance's top cgroups alone and what
// the runtime set inside is left as it is.
bool inside_own_instance(const inv::Node& n, const inv::Instance& ins) {
  return n.parent != nullptr && n.parent->rule >= 0 && n.parent->instance == ins.name;
}

// A VM's CPUs in the order its vCPUs take them with vcpu_pinning = "one_per_core": one thread of each
// core first (vCPU 0 on the first core, vCPU 1 on the next), then the second threads, and so on.
std::vector<unsigned> one_per_core(const CpuSet& cpus, const Topology& topo) {
  std::vector<std::vector<unsigned>> cores;
  CpuSet placed;
  for (unsigned c : cpus.cpus()) {
    if (placed.contains(c)) continue;
    CpuSet core = topo.siblings(c) & cpus;
    if (core.empty()) core.add(c);
    cores.push_back(core.cpus());
    placed |= core;
  }
  std::vector<unsigned> order;
  for (size_t round = 0; order.size() < cpus.count(); ++round)
    for (const auto& core : cores)
      if (round < core.size()) order.push_back(core[round]);
  return order;
}

// The cgroups of an instance, from this tick's inventory (whose instances are in name order).
const std::vector<const inv::Node*>& nodes_of(const inv::Inventory& inv, const std::string& instance) {
  static const std::vector<const inv::Node*> kNone;
  const auto& all = inv.instances();
  auto it = std::lower_bound(all.begin(), all.end(), instance,
                             [](const inv::Instance& i, const std::string& name) { return i.name < name; });
  return it != all.end() && it->name == instance ? it->cgroups : kNone;
}

// The cgroup at `path` of `h` if it still is the one with `id` (else it is gone, or another one came
// under its name: not keel's to give anything back to).
std::optional<CgroupDir> same_cgroup(const inv::Inventory& inv, const CgroupHierarchy& h,
                                     const std::string& path, CgroupId id) {
  const CgroupDir* root = inv.root_of(h);
  if (root == nullptr) return std::nullopt;
  auto d = CgroupDir::open(root->hierarchy_ptr(), path);
  if (!d || d->id() != id) return std::nullopt;
  return std::move(*d);
}

}  // namespace

Reconciler::Reconciler(config::Spec spec, Topology topo, act::KnobWriter& w)
    : spec_(std::move(spec)), topo_(std::move(topo)), w_(&w) {}

void Reconciler::note(Reconciled& out, const std::string& n) {
  if (std::find(said_.begin(), said_.end(), n) != said_.end()) return;
  // Notes name pids and cgroups that come and go: the oldest are forgotten (and may be said again).
  if (said_.size() >= 1024) said_.erase(said_.begin(), said_.begin() + 512);
  said_.push_back(n);
  out.notes.push_back(n);
}

void Reconciler::spare(Reconciled& out, const inv::Instance& ins, const inv::Node& n) {
  note(out, ins.name + " (" + act::printable(n.dir.path(), 256) +
                ") is the host's own (init.scope or a system service) and its rule takes it by a glob: keel "
                "measures it and never demotes it (a rule naming it exactly may)");
}

std::string Reconciler::missing_controller(const inv::Node& n, const CgroupHierarchy& h,
                                           std::string_view controller) {
  if (!h.unified || n.parent == nullptr) return {};
  auto available = n.dir.read(CgroupFile::controllers);
  if (!available) return {};
  const auto listed = split_blanks(trim(*available));
  if (std::ranges::find(listed, controller) != listed.end()) return {};
  const std::string parent = n.parent->dir.path(), c(controller);
  const std::string why =
      ": its parent " + parent + " does not enable the " + c + " controller for its children";
  if (!w_->reapplied_by_owner(n.dir.path()))
    return why + " (enable it there: echo +" + c + " > " +
           (h.mount / std::filesystem::path(parent).relative_path() /
            cgroup_file_name(CgroupFile::subtree_control, /*unified=*/true))
               .string() +
           ")";
  // systemd's unit: asked once per cgroup and controller (its answer said again as the note).
  const UnitProperty prop =
      controller == "cpuset" ? UnitProperty::startup_allowed_cpus : UnitProperty::cpu_weight;
  const auto key = std::make_pair(n.dir.id(), prop);
  if (auto a = asked_.find(key); a != asked_.end()) return a->second;
  std::string value = "100";  // the kernel's default weight, which the unit has once the controller is on
  if (prop == UnitProperty::startup_allowed_cpus) {
    auto all = read_file(h.mount / cgroup_file_name(CgroupFile::effective_cpus, h));
    value = all ? std::string(trim(*all)) : "";
  }
  const std::string unit(path_leaf(n.dir.path()));
  const std::string ask = std::string(to_string(prop)) + "=" + value;
  // Asked off the tick thread (a question may take its 5 s deadline): posted at one tick, its answer
  // said at a later one.
  std::optional<Result<void>> answer = questions_.take(key);
  if (!answer && questions_.pending(key))
    return why + ": keel asked systemd to enable it (" + unit + " " + ask +
           " at runtime), waiting for its answer";
  if (!answer && !value.empty()) {
    auto question = w_->prepare_unit_property(n.dir, prop, value);
    if (!question) {
      answer = std::unexpected(question.error());
    } else if (!*question) {
      answer = Result<void>{};  // observe: would ask
    } else {
      questions_.post(key, std::move(*question));
      return why + ": keel asked systemd to enable it (" + unit + " " + ask +
             " at runtime), waiting for its answer";
    }
  }
  std::string said;
  bool timed_out = false;
  if (value.empty()) {
    said = why + " (systemd owns it, and the hierarchy's CPUs are unreadable to ask it for " + ask + ")";
  } else if (!*answer) {
    timed_out = answer->error().err == ETIMEDOUT;
    said = why + " and systemd refused to enable it (" + answer->error().message() +
           "): keel does not write cgroup.subtree_control behind systemd; give the unit a property that "
           "makes systemd enable it (systemctl set-property " +
           unit + " " + ask + ")";
  } else {
    said = why +
           (w_->mode() == act::Mode::observe ? ": keel would ask systemd to enable it ("
                                             : ": keel asked systemd to enable it (") +
           unit + " " + ask +
           " at runtime, given back when keel stops; systemd, not keel, writes "
           "cgroup.subtree_control): its " +
           c + " files come with systemd's next realisation of the unit";
  }
  // A manager that did not answer in time (a reload, a wedged bus) is asked again at a later tick.
  if (timed_out) return said;
  if (asked_.size() >= 4096) asked_.clear();  // units come and go: asked again at worst
  asked_.emplace(key, said);
  return said;
}

void Reconciler::adopt_journaled(const inv::Inventory& inv, Reconciled& out) {
  // What adoption takes over: each managed cgroup's cpuset, weight and preemption class, their journal
  // originals counted as found. Everything else the journal holds (resctrl, steal_task, IRQs, unmanaged
  // cgroups, cgroups no workload covers now) goes back now; this keel's ladder sets it again if needed.
  std::set<act::KnobPath> adopted;
  auto take = [&](const CgroupDir& dir, CgroupFile f) {
    if (auto k = act::cgroup_knob(w_->roots(), dir.hierarchy(), dir.path(), dir.name(f))) adopted.insert(*k);
  };
  for (const inv::Instance& ins : inv.instances())
    for (const inv::Node* n : ins.cgroups) {
      if (const CgroupDir* dir = inv.cpuset_dir(*n))
        if (auto o = w_->original(*dir, CgroupFile::cpus)) {
          found_cpus_.try_emplace(dir->id(),
                                  Found{dir->path(), std::string(trim(*o)), std::nullopt, std::nullopt, 0});
          take(*dir, CgroupFile::cpus);
        }
      if (n->dir.path() == "/") continue;
      const CgroupDir* dir = inv.held(*n, CgroupFile::weight);
      if (dir == nullptr) continue;
      auto weight = w_->original(*dir, CgroupFile::weight);
      const act::PreemptClass how = act::preempt_class_of(*dir);
      const CgroupFile class_file = how == act::PreemptClass::cpu_idle    ? CgroupFile::idle
                                    : how == act::PreemptClass::qos_level ? CgroupFile::qos_level
                                                                          : CgroupFile::bvt_warp;
      if (how != act::PreemptClass::min_weight && w_->original(*dir, class_file)) {
        classed_.try_emplace(dir->id(),
                             Classed{dir->path(), how, weight ? std::string(trim(*weight)) : "", 0});
        take(*dir, class_file);
        if (weight) take(*dir, CgroupFile::weight);
      } else if (weight) {
        found_weight_.try_emplace(
            dir->id(), Found{dir->path(), std::string(trim(*weight)), std::nullopt, std::nullopt, 0});
        take(*dir, CgroupFile::weight);
      }
    }
  act::Journal* j = w_->journal();
  if (j == nullptr) return;
  // systemd units' properties (their controllers) stay with the knobs that need them.
  auto other = [&](const act::JournalEntry& e) {
    return e.kind != act::EntryKind::unit_property && !adopted.contains(e.path);
  };
  const size_t others = static_cast<size_t>(std::count_if(j->entries().begin(), j->entries().end(), other));
  if (others == 0) return;
  auto back = act::restore_where(w_->roots(), *j, other);
  note(out, "adopted " + std::to_string(adopted.size()) + " knobs; gave back the " + std::to_string(others) +
                " others a previous keel set (" + std::to_string(back.restored) + " restored, " +
                std::to_string(back.unchanged + back.gone) + " already back or gone)");
  for (const auto& e : back.failed)
    out.errors.push_back("giving back what a previous keel set: " + e.message());
}

Reconciled Reconciler::apply(const Plan& plan, const inv::Inventory& inv) {
  Reconciled out;
  w_->set_tick(inv.tick());
  if (adopting_) {
    adopting_ = false;
    adopt_journaled(inv, out);
  }
  // Unmanaged work first: a top-level cgroup a workload just came into grows back before the
  // workload's own cpuset is placed inside it (v1 keeps a child inside its parent).
  // A mechanism a reloaded config turned off still gives back what it holds.
  if (spec_.actuators.isolate_unmanaged) {
    unmanaged(plan, inv, out);
  } else if (!found_unmanaged_.empty() || root_group_) {
    if (const CgroupHierarchy* cs = inv.cpuset_hierarchy()) give_back_unmanaged(inv, *cs, out);
  }
  if (spec_.actuators.cpuset || !found_cpus_.empty()) cpus(plan, inv, out);
  const bool classes_on = spec_.actuators.preempt_class != config::PreemptMode::off;
  // The class before weights: leaving it first (the kernel refuses a weight in it), and a cgroup
  // entering it is one weights() then leaves alone (or gives the minimum weight, where it stands in).
  if (classes_on || !classed_.empty()) classes(plan, inv, out);
  if (spec_.actuators.cpu_weight || min_weight_classed_ > 0 || !found_weight_.empty())
    weights(plan, inv, out);
  if (spec_.actuators.resctrl || !groups_.empty()) resctrl(plan, inv, out);
  if (spec_.actuators.steal_task || steal_) steal(plan, out);  // off in the plan when the config is
  if (spec_.actuators.irq_affinity) {
    irqs(plan, out);
  } else if (!found_irqs_.empty()) {
    irqs(ctl::Plan{}, out);  // no critical CPUs: every IRQ back
  }
  // What the writer holds of cgroups that went away (the values it wrote, lockouts, and their journal
  // entries, whose knobs went with them) is dropped every 64 ticks: a host whose cgroups churn must not
  // grow keel or its journal.
  if (inv.tick() % kPruneTicks == 0)
    if (auto r = w_->prune_gone(); !r)
      out.errors.push_back("pruning what gone cgroups left: " + r.error().message());
  out.changes = w_->take_changes();
  // A knob another manager took over: what keel found there is no longer what to give back (that
  // manager's value is), so it is forgotten; the writer locks the knob out and dropped its journal entry.
  out.drifts = w_->take_drifts();
  out.reapplied = w_->take_reapplied();
  for (const act::Drift& d : out.drifts) {
    if (d.cgroup == CgroupId{}) continue;
    if (d.file == CgroupFile::cpus) found_cpus_.erase(d.cgroup);
    if (d.file == CgroupFile::weight) found_weight_.erase(d.cgroup);
  }
  return out;
}

// One apply's cpuset writes, gathered over the instances: the targets and the inventory's cgroup each
// is for (none for a vanished instance's), what the plan sets (kept once applied), what goes back as
// found, and the cgroups of vanished instances held for this apply.
struct Reconciler::CpusetBatch {
  std::vector<act::CpusetTarget> targets;
  std::vector<CgroupId> owners, given_back;
  std::vector<std::pair<CgroupId, CpuSet>> setting;
  std::map<CgroupId, bool> seen;
  std::vector<CgroupDir> reopened;
};

// Every managed cgroup's cpuset in one ordered set of writes: the plan's CPUs, or as found for a
// cgroup keel changed before and the plan no longer sets.
void Reconciler::cpus(const Plan& plan, const inv::Inventory& inv, Reconciled& out) {
  const CgroupHierarchy* cs = inv.cpuset_hierarchy();
  if (cs == nullptr) {
    bool wanted = std::any_of(plan.desired.begin(), plan.desired.end(),
                              [](const auto& d) { return d.second.cpus.has_value(); });
    if (wanted)
      note(out, "no cpuset controller on " + inv.defining().name() + ": CPU placement is not applied");
    return;
  }
  CpusetBatch b;
  b.reopened.reserve(found_cpus_.size());
  const KubeletCpus& kube = kubelet_.read(w_->roots());
  if (!kube.error.empty()) note(out, "kubelet's CPU manager state: " + kube.error);
  const CpuSet kubelets = kube.exclusive | kube.reserved;
  for (const inv::Instance& ins : inv.instances()) {
    auto d = plan.desired.find(ins.name);
    const std::optional<CpuSet> wanted = d != plan.desired.end() ? d->second.cpus : std::nullopt;
    if (!wanted && found_cpus_.empty()) continue;
    const bool pin_vcpus =
        wanted && !(*wanted - kubelets).empty() && ins.spec != nullptr && ins.spec->vcpu_one_per_core;
    const std::vector<unsigned> vcpu_order =
        pin_vcpus ? one_per_core(*wanted - kubelets, topo_) : std::vector<unsigned>();
    for (const inv::Node* n : ins.cgroups) {
      if (n->spared) {  // a host daemon: its cpuset is never narrowed (one narrowed before goes back)
        if (wanted) spare(out, ins, *n);
        continue;
      }
      std::optional<CpuSet> want = wanted;
      if (!beside_kubelet(ins, *n, kube, want, out)) continue;
      if (int vcpu = pin_vcpus ? libvirt_vcpu(n->dir.path()) : -1; vcpu >= 0) {
        want = CpuSet();  // vCPU N on the N-th CPU of that order (wrapping when there are more vCPUs)
        want->add(vcpu_order[static_cast<size_t>(vcpu) % vcpu_order.size()]);
      }
      cpuset_of(ins, *n, want, inv, *cs, b, out);
    }
  }
  // Cgroups keel changed whose instance is gone: their cpusets go back too, if they are still there.
  for (const auto& [id, f] : found_cpus_) {
    if (b.seen.contains(id)) continue;
    b.given_back.push_back(id);
    auto dir = same_cgroup(inv, *cs, f.path, id);
    auto set = CpuSet::parse_list(f.value);
    if (!dir || !set || set->empty()) continue;
    b.reopened.push_back(std::move(*dir));
    b.targets.push_back({f.path, *set, std::nullopt, &b.reopened.back()});
    b.owners.push_back(CgroupId{});
  }
  write_cpusets(inv, *cs, b, out);
}

// What `want` becomes on `n` beside kubelet's static CPU manager: false (left as it is) for a pod it
// gave CPUs of its own, else without kubelet's CPUs (false when none is left).
bool Reconciler::beside_kubelet(const inv::Instance& ins, const inv::Node& n, const KubeletCpus& kube,
                                std::optional<CpuSet>& want, Reconciled& out) {
  if (!kube.pods.empty()) {
    Anchor pod = pod_anchor(n.dir.path());
    if (pod && std::ranges::find(kube.pods, pod_uid_key(pod.id)) != kube.pods.end()) {
      if (want)
        note(out, ins.name + " (" + n.dir.path() +
                      "): kubelet's static CPU manager gave this pod CPUs of "
                      "its own; keel does not rewrite its cpuset");
      return false;
    }
  }
  const CpuSet kubelets = kube.exclusive | kube.reserved;
  if (want && kubelets.intersects(*want)) {
    const CpuSet allowed = *want - kubelets;
    note(out, "CPUs " + (*want & kubelets).to_list() + " are kubelet's (exclusive to Guaranteed pods or " +
                  "reserved): not given to " + ins.name +
                  (allowed.empty() ? ", whose cpuset stays as it is" : ", which gets " + allowed.to_list()));
    if (allowed.empty()) return false;
    want = allowed;
  }
  return true;
}

// `n`'s cpuset cgroup into the batch: `want` where the plan sets it (its value as found read first),
// as found where keel set it before and the plan no longer does.
void Reconciler::cpuset_of(const inv::Instance& ins, const inv::Node& n, const std::optional<CpuSet>& want,
                           const inv::Inventory& inv, const CgroupHierarchy& cs, CpusetBatch& b,
                           Reconciled& out) {
  const CgroupDir* dir = inv.cpuset_dir(n);
  if (dir == nullptr) {
    if (want) {
      const std::string why = missing_controller(n, inv.defining(), "cpuset");
      note(out, why.empty() ? "no cpuset cgroup of its own for " + ins.name + " (" + n.dir.path() +
                                  "): its CPUs are not changed"
                            : ins.name + " (" + n.dir.path() + ") has no cpuset" + why);
    }
    return;
  }
  const CgroupId id = dir->id();
  if (b.seen[id]) return;  // two workload cgroups in one cpuset cgroup: the first one's wish
  b.seen[id] = true;
  if (want) {
    if (!found_cpus_.contains(id)) {
      auto cur = dir->read(CgroupFile::cpus);
      if (!cur) {
        if (std::string why = missing_controller(n, cs, "cpuset"); !why.empty())
          note(out, ins.name + " (" + n.dir.path() + ") has no cpuset.cpus" + why);
        else if (!dir->removed(cur.error()))  // one removed since the inventory saw it is churn
          out.errors.push_back("cpus of " + ins.name + ": " + cur.error().message());
        out.unheld.push_back(n.dir.id());
        return;
      }
      found_cpus_[id] = {dir->path(), std::string(trim(*cur)), std::nullopt, std::nullopt, 0};
    }
    const Found& f = found_cpus_.at(id);
    // Set already; a systemd unit's is read again each tick (systemd realises it again).
    if (f.cpus == *want && !inv.due(f.set_tick, id) && !w_->reapplied_by_owner(dir->path())) return;
    b.setting.emplace_back(id, *want);
    b.targets.push_back({dir->path(), *want, std::nullopt, dir});
    b.owners.push_back(n.dir.id());
  } else if (auto f = found_cpus_.find(id); f != found_cpus_.end()) {
    auto set = CpuSet::parse_list(f->second.value);
    if (set && !set->empty()) {
      b.targets.push_back({dir->path(), *set, std::nullopt, dir});
      b.owners.push_back(n.dir.id());
    }
    b.given_back.push_back(id);  // found empty: left to `keel restore` (it had no tasks then)
  }
}

// The batch in one ordered set of writes; what it set is kept, what went back is forgotten.
void Reconciler::write_cpusets(const inv::Inventory& inv, const CgroupHierarchy& cs, CpusetBatch& b,
                               Reconciled& out) {
  std::set<CgroupId> refused;
  auto forget = [&] {
    for (const CgroupId& g : b.given_back)
      if (!refused.contains(g)) found_cpus_.erase(g);  // a refused give-back is tried again
  };
  if (b.targets.empty()) return forget();
  auto r = act::apply_cpusets(*w_, cs, b.targets, topo_.online());
  if (!r) {
    out.errors.push_back("cpusets: " + r.error().message());
    return;
  }
  for (size_t i = 0; i < r->size() && i < b.owners.size(); ++i) {
    const act::CpusetGranted& g = (*r)[i];
    if (g.changed && b.owners[i] != CgroupId{}) out.touched.push_back(b.owners[i]);
    if (g.refused.empty()) continue;
    out.errors.push_back("cpuset " + g.cgroup + " left as it is: " + g.refused);
    if (b.targets[i].dir != nullptr) refused.insert(b.targets[i].dir->id());
  }
  for (const auto& [id, set] : b.setting)
    if (auto f = found_cpus_.find(id); f != found_cpus_.end() && !refused.contains(id)) {
      f->second.cpus = set;
      f->second.set_tick = inv.tick();
    }
  forget();
}

void Reconciler::weights(const Plan& plan, const inv::Inventory& inv, Reconciled& out) {
  const CgroupHierarchy* cpu = hierarchy_for(inv.layout(), inv.defining(), CgroupFile::weight);
  if (cpu == nullptr || !cpu->has("cpu")) {
    bool wanted = std::any_of(plan.desired.begin(), plan.desired.end(),
                              [](const auto& d) { return d.second.shares.has_value(); });
    if (wanted) note(out, "no cpu controller on " + inv.defining().name() + ": CPU weights are not applied");
    return;
  }
  std::map<CgroupId, bool> seen;
  auto d = plan.desired.begin();  // instances and desired both in name order: a cursor, no lookups
  for (const inv::Instance& ins : inv.instances()) {
    while (d != plan.desired.end() && d->first < ins.name) ++d;
    const bool listed = d != plan.desired.end() && d->first == ins.name;
    // Plain values: g++ 12 sees a maybe-uninitialized optional here (a false positive at -O2).
    const bool want = listed && d->second.shares.has_value();
    const uint64_t shares = want ? *d->second.shares : 0;
    if (!want && found_weight_.empty() && min_weight_classed_ == 0) continue;
    for (const inv::Node* n : ins.cgroups) {
      if (n->dir.path() == "/" || inside_own_instance(*n, ins)) continue;
      if (n->spared) {  // a host daemon: no lower weight (one lowered before goes back)
        if (want) spare(out, ins, *n);
        continue;
      }
      const CgroupDir* dir = inv.held(*n, CgroupFile::weight);
      if (dir == nullptr) {
        if (want) note(out, no_weight(ins, *n, *cpu, cgroup_file_name(CgroupFile::weight, *cpu)));
        continue;
      }
      seen[dir->id()] = true;
      if (auto c = classed_.empty() ? classed_.end() : classed_.find(dir->id()); c != classed_.end()) {
        if (c->second.how != act::PreemptClass::min_weight) continue;  // the kernel fixes it in the class
        // No class on this kernel: the minimum weight stands for it.
        weigh(ins, *n, *dir, *cpu, true, kSharesMin, inv, out);
        continue;
      }
      weigh(ins, *n, *dir, *cpu, want, shares, inv, out);
    }
  }
  for (auto it = found_weight_.begin(); it != found_weight_.end();) {
    if (seen.contains(it->first)) {
      ++it;
      continue;
    }
    // Its instance is gone: put the weight back if the cgroup is still there (the same one).
    if (auto dir = same_cgroup(inv, *cpu, it->second.path, it->first))
      if (auto r = w_->set(*dir, CgroupFile::weight, it->second.value); !r && !dir->removed(r.error()))
        out.errors.push_back("weight of " + it->second.path + ": " + r.error().message());
    it = found_weight_.erase(it);
  }
}

std::string Reconciler::no_weight(const inv::Instance& ins, const inv::Node& n, const CgroupHierarchy& cpu,
                                  std::string_view file) {
  const std::string why = missing_controller(n, cpu, "cpu");
  return why.empty() ? "no " + std::string(file) + " for " + ins.name + " (" + n.dir.path() +
                           "): its weight is not changed"
                     : ins.name + " (" + n.dir.path() + ") has no cpu.weight" + why;
}

void Reconciler::weigh(const inv::Instance& ins, const inv::Node& n, const CgroupDir& dir,
                       const CgroupHierarchy& cpu, bool want, uint64_t shares, const inv::Inventory& inv,
                       Reconciled& out) {
  const CgroupId id = dir.id();
  if (!want) {
    auto f = found_weight_.find(id);
    if (f == found_weight_.end()) return;
    auto r = w_->set(dir, CgroupFile::weight, f->second.value);
    if (!r) {
      if (!dir.removed(r.error()))
        out.errors.push_back("weight of " + ins.name + " back to " + f->second.value + ": " +
                             r.error().message());
      return;
    }
    if (*r) out.touched.push_back(n.dir.id());
    found_weight_.erase(f);
    return;
  }
  if (!found_weight_.contains(id)) {
    auto cur = dir.read(CgroupFile::weight);
    if (!cur) {
      note(out, no_weight(ins, n, cpu, dir.name(CgroupFile::weight)));
      out.unheld.push_back(n.dir.id());
      return;
    }
    found_weight_[id] = {dir.path(), std::string(trim(*cur)), std::nullopt, std::nullopt, 0};
  }
  Found& f = found_weight_.at(id);
  // Set already; a systemd unit's is read again each tick (systemd realises it again).
  if (f.shares == shares && !inv.due(f.set_tick, id) && !w_->reapplied_by_owner(dir.path())) return;
  auto r = act::set_cpu_weight(*w_, dir, shares, spec_.actuators.weight_mapping);
  if (!r) {
    if (!dir.removed(r.error())) out.errors.push_back("weight of " + ins.name + ": " + r.error().message());
    return;
  }
  if (*r) out.touched.push_back(n.dir.id());
  f.shares = shares;
  f.set_tick = inv.tick();
}

void Reconciler::classes(const Plan& plan, const inv::Inventory& inv, Reconciled& out) {
  const CgroupHierarchy* cpu = hierarchy_for(inv.layout(), inv.defining(), CgroupFile::idle);
  if (cpu == nullptr || !cpu->has("cpu")) {
    bool wanted =
        std::any_of(plan.desired.begin(), plan.desired.end(), [](const auto& d) { return d.second.preempt; });
    if (wanted)
      note(out, "no cpu controller on " + inv.defining().name() + ": the preemption class is not applied");
    return;
  }
  const uint64_t stamp = ++class_pass_;
  auto lifted = [&](const std::string& inst) {
    return !plan.starvation_lifts.empty() &&
           std::find(plan.starvation_lifts.begin(), plan.starvation_lifts.end(), inst) !=
               plan.starvation_lifts.end();
  };
  auto d = plan.desired.begin();  // instances and desired both in name order: a cursor, no lookups
  for (const inv::Instance& ins : inv.instances()) {
    while (d != plan.desired.end() && d->first < ins.name) ++d;
    const bool want =
        d != plan.desired.end() && d->first == ins.name && d->second.preempt && !lifted(ins.name);
    if (!want && classed_.empty()) continue;
    for (const inv::Node* n : ins.cgroups) {
      // Never the root (it has no such files anyway); a cgroup inside the instance follows its parent.
      if (n->dir.path() == "/" || inside_own_instance(*n, ins)) continue;
      if (n->spared) {  // a host daemon: never in the class (one classed before leaves it)
        if (want) spare(out, ins, *n);
        continue;
      }
      const CgroupDir* dir = inv.held(*n, CgroupFile::weight);
      if (dir == nullptr) continue;
      const CgroupId id = dir->id();
      auto c = classed_.find(id);
      if (c != classed_.end()) c->second.seen = stamp;
      if (want && c != classed_.end() && c->second.how != act::PreemptClass::min_weight &&
          w_->reapplied_by_owner(dir->path())) {
        // In the class: a systemd unit's is read again each tick, and set again where systemd
        // realised the unit's own setting (the writer tells that from another manager's change).
        auto r = act::set_preempt_class(*w_, *dir, c->second.how, true);
        if (!r && !dir->removed(r.error()))
          out.errors.push_back("preemption class of " + ins.name + ": " + r.error().message());
        else if (r && *r)
          out.touched.push_back(n->dir.id());
        continue;
      }
      if (want == (c != classed_.end())) continue;  // as wanted
      if (want) {
        enter_class(ins, *n, *dir, *cpu, stamp, out);
      } else {
        if (!leave_class(*dir, c->second, out, ins.name)) continue;
        if (c->second.how == act::PreemptClass::min_weight) --min_weight_classed_;
        classed_.erase(c);
      }
    }
  }
  // Their instance is gone: out of the class if the cgroup is still there (the same one).
  for (auto it = classed_.begin(); it != classed_.end();) {
    if (it->second.seen == stamp) {
      ++it;
      continue;
    }
    if (auto dir = same_cgroup(inv, *cpu, it->second.path, it->first))
      (void)leave_class(*dir, it->second, out, it->second.path);
    if (it->second.how == act::PreemptClass::min_weight) --min_weight_classed_;
    it = classed_.erase(it);
  }
}

// Puts one cgroup in the class (or has the minimum weight stand for it: weights() writes that).
void Reconciler::enter_class(const inv::Instance& ins, const inv::Node& n, const CgroupDir& dir,
                             const CgroupHierarchy& cpu, uint64_t stamp, Reconciled& out) {
  // v2: not before the cgroup has the cpu controller (systemd is asked for it where it owns the
  // parent), or the minimum weight would stand for a class the kernel offers.
  if (std::string why = missing_controller(n, cpu, "cpu"); !why.empty()) {
    note(out, ins.name + " (" + n.dir.path() + ") has no cpu.idle" + why);
    return;
  }
  Classed cl{dir.path(), act::preempt_class_of(dir), "", stamp};
  if (cl.how == act::PreemptClass::min_weight) {
    note(out, "no cpu.idle, cpu.qos_level or cpu.bvt_warp_ns for " + ins.name + " (" + dir.path() +
                  "): the minimum weight stands for the preemption class");
    classed_.emplace(dir.id(), std::move(cl));
    ++min_weight_classed_;
    return;
  }
  if (auto weight = dir.read(CgroupFile::weight)) cl.weight_before = std::string(trim(*weight));
  auto r = act::set_preempt_class(*w_, dir, cl.how, true);
  if (!r) {
    if (!dir.removed(r.error()))
      out.errors.push_back("preemption class of " + ins.name + ": " + r.error().message());
    return;
  }
  if (*r) out.touched.push_back(n.dir.id());
  classed_.emplace(dir.id(), std::move(cl));
}

// Takes one cgroup out of the class (the minimum weight: weights() gives the weight back). False when
// the kernel refused (reported; it stays classed, tried again next tick).
bool Reconciler::leave_class(const CgroupDir& dir, const Classed& c, Reconciled& out,
                             const std::string& who) {
  if (c.how == act::PreemptClass::min_weight) return true;
  const std::string* before = c.weight_before.empty() ? nullptr : &c.weight_before;
  auto r = act::set_preempt_class(*w_, dir, c.how, false, before);
  if (!r) {
    if (dir.removed(r.error())) return true;  // gone meanwhile: nothing left to lift
    out.errors.push_back("preemption class of " + who + " lifted: " + r.error().message());
    return false;
  }
  if (*r) out.touched.push_back(dir.id());
  return true;
}

void Reconciler::resctrl(const ctl::Plan& plan, const inv::Inventory& inv, Reconciled& out) {
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
  // An instance's group while the plan gives it ways or bandwidth and it has cgroups this tick.
  auto wants = [](const ctl::KnobState& k) { return k.l3_ways || k.mba_percent; };
  for (const auto& [instance, want] : plan.desired) {
    const auto& nodes = nodes_of(inv, instance);
    if (!wants(want) || nodes.empty()) continue;
    act::ResctrlGroupSpec spec;
    spec.name = act::resctrl_group_name(instance);
    spec.l3_ways = want.l3_ways;
    if (want.mba_percent) {
      if (resctrl_->info().mba_mbps)
        note(out, "resctrl is mounted with mba_MBps: MBA percentages are not applied");
      else
        spec.mb_percent = want.mba_percent;
    }
    auto applied = resctrl_->apply(spec);
    if (!applied) {
      out.errors.push_back("resctrl group " + spec.name + ": " + applied.error().message());
      continue;
    }
    groups_[instance] = spec.name;
    std::vector<int> tids;
    for (const inv::Node* n : nodes) {
      auto text = n->dir.read(CgroupFile::threads);
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
    bool wanted = d != plan.desired.end() && wants(d->second) && !nodes_of(inv, it->first).empty();
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

void Reconciler::steal(const ctl::Plan& plan, Reconciled& out) {
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
void Reconciler::irqs(const ctl::Plan& plan, Reconciled& out) {
  const CpuSet& critical = plan.critical_cpus;
  auto knob = act::irq_affinity_knob;
  if (critical.empty()) {
    for (auto it = found_irqs_.begin(); it != found_irqs_.end();) {
      auto r = w_->set(knob(it->first), it->second, ValueKind::cpu_list);
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
  auto ids = act::match_irqs(*table, spec_.actuators.irq_names);
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

}  // namespace keel::loop

namespace keel::loop {

// How often the unmanaged cgroups are surveyed again while the critical CPUs stay the same (new
// cgroups and processes appear; each survey reads every unmanaged cgroup's cpuset).
constexpr uint64_t kUnmanagedEvery = 8;

// One unmanaged group off the CPUs critical instances hold, all its cgroups or none: one with only
// those CPUs leaves the group as found (given back, where an earlier survey had changed it).
void Reconciler::isolate(const act::UnmanagedGroup& g, const CgroupHierarchy& cs, const CpuSet& held,
                         Reconciled& out) {
  std::vector<act::CpusetTarget> want;
  std::vector<FoundUnmanaged*> found;
  std::string why;
  for (size_t i = 0; i < g.cgroups.size(); ++i) {
    const CgroupDir& dir = g.cgroups[i];
    FoundUnmanaged& f =
        found_unmanaged_
            .try_emplace(dir.id(), FoundUnmanaged{dir.path(), g.found[i], g.cpus[i], std::nullopt})
            .first->second;
    found.push_back(&f);
    const CpuSet off = f.as_found - held;
    if (off.empty() && why.empty())
      why = act::printable(dir.path(), 256) + " has only CPUs critical workloads hold (" +
            f.as_found.to_list() + ")";
    want.push_back({dir.path(), off, std::nullopt, &dir});
  }
  if (!why.empty()) {
    note(out, "not isolated: " + act::printable(g.top, 256) + ": " + why);
    std::vector<std::pair<const CgroupDir*, FoundUnmanaged*>> back;
    for (size_t i = 0; i < g.cgroups.size(); ++i) back.emplace_back(&g.cgroups[i], found[i]);
    give_back_cpusets(cs, back, out);  // each given back has its `wrote` reset
    return;
  }
  auto r = act::apply_cpusets(*w_, cs, want, topo_.online());
  if (!r) {
    out.errors.push_back("unmanaged cgroup " + act::printable(g.top, 256) + ": " + r.error().message());
    return;
  }
  for (size_t i = 0; i < found.size() && i < r->size(); ++i) {
    if ((*r)[i].refused.empty())
      found[i]->wrote = want[i].cpus;
    else
      out.errors.push_back("unmanaged cgroup " + act::printable((*r)[i].cgroup, 256) +
                           " left as it is: " + (*r)[i].refused);
  }
}

void Reconciler::unmanaged(const ctl::Plan& plan, const inv::Inventory& inv, Reconciled& out) {
  const CgroupHierarchy* cs = inv.cpuset_hierarchy();
  if (cs == nullptr) {
    note(out, "no cpuset controller: unmanaged work is not kept off critical CPUs");
    return;
  }
  const CpuSet host = topo_.online();
  CpuSet held = plan.critical_cpus & host;
  if (!held.empty() && held == host) {
    note(out, "critical instances hold every CPU: unmanaged work stays where it is");
    held = CpuSet{};
  }
  if (held.empty()) return give_back_unmanaged(inv, *cs, out);
  std::vector<std::string> managed;
  for (const inv::Instance& ins : inv.instances())
    for (const inv::Node* n : ins.cgroups)
      if (const CgroupDir* d = inv.cpuset_dir(*n)) managed.push_back(d->path());
  std::sort(managed.begin(), managed.end());
  // Surveyed again when the critical CPUs or the managed cgroups change, and every few ticks.
  if (held == unmanaged_held_ && managed == unmanaged_managed_ &&
      inv.tick() < unmanaged_tick_ + kUnmanagedEvery)
    return;
  unmanaged_held_ = held;
  unmanaged_managed_ = managed;
  unmanaged_tick_ = inv.tick();
  auto survey = act::survey_unmanaged(w_->roots(), *cs, managed, spec_.actuators.isolate_root_tasks);
  if (!survey) {
    out.errors.push_back("unmanaged cgroups: " + survey.error().message());
    return;
  }
  std::map<CgroupId, bool> seen;
  for (const act::UnmanagedGroup& g : survey->groups) {
    for (const CgroupDir& dir : g.cgroups) seen[dir.id()] = true;
    isolate(g, *cs, held, out);
  }
  // Cgroups keel changed that are no longer unmanaged (a workload came into them) or gone.
  std::vector<CgroupDir> held_dirs;
  std::vector<std::pair<const CgroupDir*, FoundUnmanaged*>> back;
  std::vector<FoundUnmanaged> leaving;
  held_dirs.reserve(found_unmanaged_.size());
  leaving.reserve(found_unmanaged_.size());
  for (auto it = found_unmanaged_.begin(); it != found_unmanaged_.end();) {
    if (seen.contains(it->first)) {
      ++it;
      continue;
    }
    if (auto dir = same_cgroup(inv, *cs, it->second.path, it->first)) {
      held_dirs.push_back(std::move(*dir));
      leaving.push_back(std::move(it->second));
      back.emplace_back(&held_dirs.back(), &leaving.back());
    }
    it = found_unmanaged_.erase(it);
  }
  give_back_cpusets(*cs, back, out);
  for (const act::NotIsolated& n : survey->not_isolated) note(out, "not isolated: " + n.what + ": " + n.why);
  if (spec_.actuators.isolate_root_tasks) root_tasks(*survey, *cs, held, out);
}

bool Reconciler::give_back_cpusets(const CgroupHierarchy& cs,
                                   const std::vector<std::pair<const CgroupDir*, FoundUnmanaged*>>& back,
                                   Reconciled& out) {
  std::vector<act::CpusetTarget> targets;
  std::vector<FoundUnmanaged*> batch;
  bool ok = true;
  for (const auto& [dir, f] : back) {
    if (!f->wrote) continue;  // keel never wrote it, or gave it back already: nothing to give back
    auto now = dir->read(CgroupFile::cpus);
    auto now_set = now ? CpuSet::parse_list(trim(*now)) : Result<CpuSet>(std::unexpected(now.error()));
    if (!now_set) continue;  // gone meanwhile
    if (*now_set != *f->wrote) {
      note(out, "unmanaged cgroup " + act::printable(dir->path(), 256) + " was changed by another writer (" +
                    now_set->to_list() + "): left as it is");
      f->wrote.reset();
      continue;
    }
    auto set = CpuSet::parse_list(f->value);
    if (set && !set->empty()) {
      targets.push_back({dir->path(), *set, std::nullopt, dir});
      batch.push_back(f);
    } else if (set && cs.unified) {  // v2, found not set: not set again (the parent's CPUs)
      auto r = w_->set(*dir, CgroupFile::cpus, "");
      if (!r && r.error().err == ENOSPC) {
        // The kernel keeps a cgroup with tasks from unsetting its cpuset.cpus again: every CPU of
        // the hierarchy gives it its parent's, as not set did.
        if (auto every = act::every_cpu_of_hierarchy(cs.mount / dir->path().substr(1))) {
          r = w_->set(*dir, CgroupFile::cpus, *every);
          if (r)
            note(out, "unmanaged cgroup " + act::printable(dir->path(), 256) + " given every CPU (" + *every +
                          "): the kernel refuses to unset the cpuset.cpus of a cgroup with tasks, and with "
                          "every CPU it has its parent's, as before");
        }
      }
      if (!r && !dir->removed(r.error())) {
        out.errors.push_back("unmanaged cgroup " + act::printable(dir->path(), 256) +
                             " given back: " + r.error().message());
        ok = false;
      } else {
        f->wrote.reset();
      }
    }
  }
  if (targets.empty()) return ok;
  auto r = act::apply_cpusets(*w_, cs, targets, topo_.online());
  if (!r) {
    out.errors.push_back("unmanaged cgroups given back: " + r.error().message());
    return false;
  }
  for (size_t i = 0; i < batch.size() && i < r->size(); ++i) {
    if ((*r)[i].refused.empty()) {
      batch[i]->wrote.reset();
      continue;
    }
    out.errors.push_back("unmanaged cgroup " + act::printable((*r)[i].cgroup, 256) +
                         " not given back: " + (*r)[i].refused);
    ok = false;
  }
  return ok;
}

void Reconciler::root_tasks(const act::UnmanagedSurvey& survey, const CgroupHierarchy& cs, const CpuSet& held,
                            Reconciled& out) {
  for (const act::RootProcess& p : survey.pinned)
    if (!(p.cpus & held).empty())
      note(out, "not isolated: pid " + std::to_string(p.pid) + " (" + p.comm + "): pinned to CPUs " +
                    p.cpus.to_list() +
                    " by its own affinity; keel leaves it (a cpuset move resets affinity before Linux 6.2)");
  auto procs =
      act::cgroup_knob(w_->roots(), cs, act::kRootTasksGroup, cgroup_file_name(CgroupFile::procs, cs));
  if (!procs) {
    out.errors.push_back("root processes: " + procs.error().message());
    return;
  }
  const act::KnobPath group{procs->root, procs->rel.parent_path()};
  if (w_->mode() == act::Mode::observe) {
    if (!survey.movable.empty())
      note(out, "would move the root cgroup's " + std::to_string(survey.movable.size()) +
                    " user-space processes into " + std::string(act::kRootTasksGroup) +
                    ", kept off critical CPUs");
    return;
  }
  if (!root_group_) {
    auto made = w_->make_dir(group);
    if (!made) {
      out.errors.push_back("root processes: " + made.error().message());
      return;
    }
    if (!*made) {
      note(out, std::string(act::kRootTasksGroup) +
                    " exists and this keel did not create it: the root cgroup's processes are not moved");
      return;
    }
    root_group_ = true;
  }
  // The group's CPUs: every one no critical instance holds (a new v1 cpuset gets the root's mems).
  const CpuSet off = topo_.online() - held;
  auto set = act::apply_cpusets(*w_, cs, {{std::string(act::kRootTasksGroup), off, std::nullopt, nullptr}},
                                topo_.online());
  if (!set || (!set->empty() && !set->front().refused.empty())) {
    out.errors.push_back("root processes: " + (set ? set->front().refused : set.error().message()));
    return;
  }
  std::map<pid_t, std::string> refused;
  for (const act::RootProcess& p : survey.movable) {
    if (auto f = refused_.find(p.pid); f != refused_.end()) {
      refused.insert(*f);  // said once; a pid the kernel refused is not tried every survey
      continue;
    }
    // Still in the root cgroup (the pid may have exited and been reused since the survey read it).
    if (auto at = process_cgroup_path(w_->roots(), p.pid, cs); !at || *at != "/") continue;
    auto r = w_->append(*procs, std::to_string(p.pid));
    if (!r) {
      refused[p.pid] = r.error().message();
      note(out, "not isolated: pid " + std::to_string(p.pid) + " (" + p.comm +
                    "): the kernel refused the move: " + r.error().message());
    }
  }
  refused_ = std::move(refused);
}

void Reconciler::give_back_unmanaged(const inv::Inventory& inv, const CgroupHierarchy& cs, Reconciled& out) {
  unmanaged_held_ = CpuSet{};
  if (!found_unmanaged_.empty()) {
    std::vector<CgroupDir> dirs;
    std::vector<std::pair<const CgroupDir*, FoundUnmanaged*>> back;
    dirs.reserve(found_unmanaged_.size());
    for (auto& [id, f] : found_unmanaged_)
      if (auto dir = same_cgroup(inv, cs, f.path, id)) {
        dirs.push_back(std::move(*dir));
        back.emplace_back(&dirs.back(), &f);
      }
    if (give_back_cpusets(cs, back, out)) found_unmanaged_.clear();  // else tried again next tick
  }
  if (!root_group_) return;
  auto procs =
      act::cgroup_knob(w_->roots(), cs, act::kRootTasksGroup, cgroup_file_name(CgroupFile::procs, cs));
  if (!procs) return;
  const act::KnobPath group{procs->root, procs->rel.parent_path()};
  if (auto moved = act::move_procs_to_parent(group.abs(w_->roots())); !moved) {
    out.errors.push_back("root processes back to the root cgroup: " + moved.error().message());
    return;
  }
  if (auto r = w_->remove_dir(group); !r) {
    out.errors.push_back("root processes: " + r.error().message());
    return;
  }
  root_group_ = false;
  refused_.clear();
}

}  // namespace keel::loop
