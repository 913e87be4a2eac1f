#include "actuators/cgroup_knobs.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <set>

#include "host/cgroup.h"
#include "host/fileio.h"

namespace keel::act {

namespace fs = std::filesystem;

namespace {

// ---- cgroup paths ----

std::string parent_of(const std::string& path) {
  size_t at = path.rfind('/');
  return at == 0 || at == std::string::npos ? "/" : path.substr(0, at);
}

size_t depth_of(const std::string& path) {
  return path == "/" ? 0 : static_cast<size_t>(std::count(path.begin(), path.end(), '/'));
}

// A cgroup whose knobs keel may write: not the root (whose CPU knobs are not writable or absent).
Result<std::string> writable_cgroup(std::string_view cgroup) {
  auto cg = normalize_cgroup(cgroup);
  if (!cg) return cg;
  if (*cg == "/") return fail("the root cgroup's CPU knobs cannot be set");
  return cg;
}

Result<void> need_controller(const CgroupHierarchy& h, std::string_view controller) {
  if (h.has(controller)) return {};
  return fail("hierarchy " + h.name() + " has no " + std::string(controller) + " controller",
              h.mount.string());
}

// A cgroup the knobs of one call are read and written through: held open (given, or opened here by
// its path), or in observe mode a cgroup not made yet, known by its path only.
struct Cg {
  const CgroupHierarchy* h = nullptr;
  std::string path;
  std::optional<CgroupDir> owned;
  const CgroupDir* held = nullptr;

  const CgroupDir* dir() const { return held != nullptr ? held : owned ? &*owned : nullptr; }

  fs::path abs() const { return path == "/" ? h->mount : h->mount / path.substr(1); }
  std::string_view name(CgroupFile f) const { return cgroup_file_name(f, *h); }
};

Result<Cg> open_cg(const KnobWriter& w, const CgroupHierarchy& h, const std::string& path,
                   const CgroupDir* held = nullptr) {
  Cg cg;
  cg.h = &h;
  cg.path = path;
  if (held != nullptr) {
    cg.held = held;
    return cg;
  }
  auto d = CgroupDir::open(h, path);
  if (d) {
    cg.owned.emplace(std::move(*d));
  } else if (w.mode() == Mode::enforce || d.error().err != ENOENT) {
    return fail("no such cgroup", cg.abs().string(), d.error().err);
  }
  return cg;
}

Result<KnobPath> knob_of(const KnobWriter& w, const Cg& cg, CgroupFile f) {
  return cgroup_knob(w.roots(), *cg.h, cg.path, cg.name(f));
}

// The current value: the file's, or in observe mode the last value this writer would have written
// (so an observed sequence sees its own earlier steps).
Result<std::string> current_value(const KnobWriter& w, const Cg& cg, CgroupFile f) {
  if (w.mode() == Mode::observe) {
    auto k = knob_of(w, cg, f);
    if (!k) return std::unexpected(k.error());
    if (const std::string* o = w.observed(*k)) return *o;
  }
  if (cg.dir() == nullptr) return fail("no such cgroup", cg.abs().string(), ENOENT);
  auto s = cg.dir()->read(f);
  if (!s) return std::unexpected(s.error());
  return std::string(trim(*s));
}

// Writes `value` to `f` of `cg` through the writer: through the held directory, or (observe mode, a
// cgroup not made yet) by its path.
Result<bool> set(KnobWriter& w, const Cg& cg, CgroupFile f, std::string_view value) {
  if (cg.dir() != nullptr) return w.set(*cg.dir(), f, value);
  auto k = knob_of(w, cg, f);
  if (!k) return std::unexpected(k.error());
  return w.set(*k, value, cgroup_file_kind(f));
}

// ---- cpusets ----

Result<CpuSet> read_list(const Cg& cg, CgroupFile f) {
  auto s = cg.dir()->read(f);
  if (!s) return std::unexpected(s.error());
  auto set = CpuSet::parse_list(*s);
  if (!set) return fail("not a CPU list: " + set.error().what, cg.dir()->file_path(f).string());
  return set;
}

// Whether the cgroup at `dir` (only it, or with `deep` also any descendant) has tasks. The subtree is
// a tenant's to make: walked without recursion within the walk's bounds (host/cgroup.h), and one
// beyond them counts as holding tasks (its cpuset is then never emptied).
bool has_tasks(const CgroupHierarchy& h, const fs::path& dir, bool deep) {
  std::vector<std::pair<fs::path, size_t>> todo{{dir, 0}};
  size_t seen = 0;
  while (!todo.empty()) {
    auto [d, depth] = std::move(todo.back());
    todo.pop_back();
    for (CgroupFile f : {CgroupFile::procs, CgroupFile::threads}) {
      auto s = read_file(d / cgroup_file_name(f, h));
      if (s && !trim(*s).empty()) return true;
    }
    if (!deep) return false;
    std::error_code ec;
    for (fs::directory_iterator it(d, ec), end; !ec && it != end; it.increment(ec)) {
      if (!it->is_directory(ec)) continue;
      if (depth + 1 > kMaxCgroupDepth || ++seen > kMaxCgroups || it->path().native().size() >= PATH_MAX)
        return true;
      todo.emplace_back(it->path(), depth + 1);
    }
  }
  return false;
}

// Reads the cpuset of `cg`; in observe mode a cgroup not made yet reads as a new, empty one. The v2
// root has no cpuset.cpus of its own: its effective sets are the host's.
Result<CpusetState> read_cpuset(const Cg& cg, bool deep) {
  if (cg.dir() == nullptr) return CpusetState{};
  bool v2_root = cg.path == "/" && cg.h->unified;
  CpusetState s;
  auto cpus = read_list(cg, v2_root ? CgroupFile::effective_cpus : CgroupFile::cpus);
  auto mems = read_list(cg, v2_root ? CgroupFile::effective_mems : CgroupFile::mems);
  if (!cpus) return std::unexpected(cpus.error());
  if (!mems) return std::unexpected(mems.error());
  s.cpus = *cpus;
  s.mems = *mems;
  s.populated = has_tasks(*cg.h, cg.abs(), deep);
  return s;
}

std::string list_value(const CpuSet& s) { return s.empty() ? "\n" : s.to_list(); }  // kernfs ignores 0 bytes

// ---- v1 bandwidth ----

// cpu.max: "max 100000" or "50000 100000"; a quota of -1 is no limit (as v1's cfs_quota_us).
struct Bandwidth {
  int64_t quota = -1;
  int64_t period = 100000;
  bool limited() const { return quota >= 0; }
  bool operator==(const Bandwidth&) const = default;
};

struct Step {
  CgroupFile file;
  int64_t value;
};

// a/b <= c/d, exact: quotas are below 2^44 and periods below 2^20.
bool ratio_le(int64_t a, int64_t b, int64_t c, int64_t d) {
  return static_cast<uint64_t>(a) * static_cast<uint64_t>(d) <=
         static_cast<uint64_t>(c) * static_cast<uint64_t>(b);
}

// v1 checks each write against the other file's current value, and (legacy hierarchy) refuses a
// child whose quota/period exceeds its parent's. Old and new ratios both fit parent and children, so
// any ratio between them does: pick the order whose intermediate ratio lies between, else lift the
// limit for the switch (no limit is always accepted).
std::vector<Step> v1_bandwidth_steps(const Bandwidth& from, const Bandwidth& to) {
  constexpr CgroupFile kQuota = CgroupFile::cfs_quota, kPeriod = CgroupFile::cfs_period;
  if (from == to) return {};
  if (from.period == to.period) return {{kQuota, to.quota}};
  if (from.quota == to.quota) return {{kPeriod, to.period}};
  if (!from.limited()) return {{kPeriod, to.period}, {kQuota, to.quota}};
  if (!to.limited()) return {{kQuota, -1}, {kPeriod, to.period}};
  int64_t qo = from.quota, po = from.period, qn = to.quota, pn = to.period;
  bool old_low = ratio_le(qo, po, qn, pn);
  auto between = [&](int64_t q, int64_t p) {
    return old_low ? ratio_le(qo, po, q, p) && ratio_le(q, p, qn, pn)
                   : ratio_le(qn, pn, q, p) && ratio_le(q, p, qo, po);
  };
  if (between(qo, pn)) return {{kPeriod, pn}, {kQuota, qn}};
  if (between(qn, po)) return {{kQuota, qn}, {kPeriod, pn}};
  return {{kQuota, -1}, {kPeriod, pn}, {kQuota, qn}};
}

}  // namespace

// ---- cpusets ----

Result<CpusetOrder> order_cpuset_writes(const std::map<std::string, CpusetState>& current,
                                        const std::vector<CpusetTarget>& targets, bool v1,
                                        const std::map<std::string, CpusetState>& before_keel) {
  struct T {
    std::string path;
    const CpusetTarget* t;
  };
  std::vector<T> ts;
  std::set<std::string> seen;
  for (const auto& t : targets) {
    auto p = writable_cgroup(t.cgroup);
    if (!p) return std::unexpected(p.error());
    if (!seen.insert(*p).second) return fail("cgroup " + *p + " is targeted twice");
    if (!current.contains(*p)) return fail("no cpuset state read for " + *p);
    if (v1 && !current.contains(parent_of(*p))) return fail("no cpuset state read for the parent of " + *p);
    ts.push_back({*p, &t});
  }
  std::ranges::stable_sort(ts, [](const T& a, const T& b) {
    return depth_of(a.path) != depth_of(b.path) ? depth_of(a.path) < depth_of(b.path) : a.path < b.path;
  });

  CpusetOrder out;
  std::map<std::string, CpusetState> fin;
  // The final state with the targets not refused; a target that breaks the rules is refused and the
  // rest computed again without it (its children may then be refused in turn).
  for (;;) {
    fin = current;
    for (const auto& [path, t] : ts) {
      if (out.refused.contains(path)) continue;
      CpusetState& s = fin[path];
      s.cpus = t->cpus;
      if (t->mems)
        s.mems = *t->mems;
      else if (v1 && s.mems.empty())
        s.mems = fin[parent_of(path)].mems;
    }
    if (v1) {
      // Every other cgroup read (the targets' descendants) kept inside its parent's final set: its own
      // (or what it had before keel narrowed it) within the parent's, or the parent's whole set where
      // none of its own is left. A map in path order lists a parent before its descendants.
      for (auto& [path, s] : fin) {
        if (path == "/" || (seen.contains(path) && !out.refused.contains(path))) continue;
        auto up = fin.find(parent_of(path));
        if (up == fin.end()) continue;
        auto keep_inside = [](const CpuSet& own, const CpuSet& parent) {
          CpuSet in = own & parent;
          return in.empty() && !own.empty() ? parent : in;
        };
        // A refused target is kept as it is, within its parent.
        auto b = seen.contains(path) ? before_keel.end() : before_keel.find(path);
        const bool had = b != before_keel.end();
        s.cpus = keep_inside(had && !b->second.cpus.empty() ? b->second.cpus : s.cpus, up->second.cpus);
        s.mems = keep_inside(had && !b->second.mems.empty() ? b->second.mems : s.mems, up->second.mems);
      }
    }
    size_t refused = out.refused.size();
    for (const auto& [path, t] : ts) {
      if (out.refused.contains(path)) continue;
      const CpusetState& s = fin.at(path);
      std::string why;
      if (s.populated && s.cpus.empty())
        why = "cannot take every CPU from " + path + ": it (or a cgroup below it) has tasks";
      else if (v1 && s.populated && s.mems.empty())
        why = "cannot leave " + path + " without memory nodes: it (or a cgroup below it) has tasks";
      else if (v1) {
        const CpusetState& up = fin.at(parent_of(path));
        if (!s.cpus.subset_of(up.cpus) || !s.mems.subset_of(up.mems))
          why = "cpuset " + path + " (cpus " + s.cpus.to_list() + ", mems " + s.mems.to_list() +
                ") would not fit in its parent's (cpus " + up.cpus.to_list() + ", mems " + up.mems.to_list() +
                ")";
      }
      if (!why.empty()) out.refused.emplace(path, why);
    }
    if (out.refused.size() == refused) break;
  }

  std::vector<T> live;  // the targets not refused and (v1) the cgroups narrowed or widened back for them
  for (const auto& x : ts)
    if (!out.refused.contains(x.path)) live.push_back(x);
  if (v1)
    for (const auto& [path, s] : fin)
      if (path != "/" && (!seen.contains(path) || out.refused.contains(path)) &&
          (s.cpus != current.at(path).cpus || s.mems != current.at(path).mems)) {
        out.fitted.push_back(path);
        live.push_back({path, nullptr});
      }
  std::ranges::stable_sort(live, [](const T& a, const T& b) {
    return depth_of(a.path) != depth_of(b.path) ? depth_of(a.path) < depth_of(b.path) : a.path < b.path;
  });
  std::vector<CpusetWrite>& writes = out.writes;
  if (!v1) {
    // v2 gives a child what it asks for within its parent's (a set beyond it is no error), but kernels
    // before 6.1 refuse to narrow a parent below a child's own set (EBUSY on 5.15). So as on v1: sets
    // that widen go parents first, sets that narrow children first, and a set changed both ways widens
    // to the union first. Not set ("", the parent's) is the widest: unsetting widens, setting narrows.
    auto grow = [&](const std::string& path, bool mems, const CpuSet& from, const CpuSet& to) {
      if (to.empty() && !from.empty()) writes.push_back({path, mems, to});
      if (!to.empty() && !from.empty() && (from | to) != from) writes.push_back({path, mems, from | to});
    };
    auto shrink = [&](const std::string& path, bool mems, const CpuSet& from, const CpuSet& to) {
      if (!to.empty() && (from.empty() || to != (from | to))) writes.push_back({path, mems, to});
    };
    for (const auto& [path, t] : live) {
      grow(path, false, current.at(path).cpus, fin.at(path).cpus);
      grow(path, true, current.at(path).mems, fin.at(path).mems);
    }
    std::vector<T> deepest_first = live;  // siblings stay in path order
    std::ranges::stable_sort(deepest_first,
                             [](const T& a, const T& b) { return depth_of(a.path) > depth_of(b.path); });
    for (const auto& [path, t] : deepest_first) {
      shrink(path, false, current.at(path).cpus, fin.at(path).cpus);
      shrink(path, true, current.at(path).mems, fin.at(path).mems);
    }
    return out;
  }
  // Grow, parents first, to old | new; then shrink, children first, to new.
  for (const auto& [path, t] : live) {
    const CpusetState &from = current.at(path), &to = fin.at(path);
    if (CpuSet u = from.cpus | to.cpus; u != from.cpus) writes.push_back({path, false, u});
    if (CpuSet u = from.mems | to.mems; u != from.mems) writes.push_back({path, true, u});
  }
  for (auto it = live.rbegin(); it != live.rend(); ++it) {
    const CpusetState &from = current.at(it->path), &to = fin.at(it->path);
    if (to.cpus != (from.cpus | to.cpus)) writes.push_back({it->path, false, to.cpus});
    if (to.mems != (from.mems | to.mems)) writes.push_back({it->path, true, to.mems});
  }
  return out;
}

namespace {

// 1. Every target against the host's CPUs and nodes, before reading or writing anything else: each
// with its cgroup's path checked.
Result<std::vector<CpusetTarget>> checked_targets(KnobWriter& w, const CgroupHierarchy& h,
                                                  const std::vector<CpusetTarget>& targets,
                                                  const std::optional<CpuSet>& host_cpus) {
  auto root = open_cg(w, h, "/");
  if (!root) return std::unexpected(root.error());
  if (root->dir() == nullptr) return fail("no such cgroup", root->abs().string(), ENOENT);
  bool v2 = h.unified;
  CpuSet host;
  if (host_cpus) {
    host = *host_cpus;
  } else {
    auto c = read_list(*root, v2 ? CgroupFile::effective_cpus : CgroupFile::cpus);
    if (!c) return std::unexpected(c.error());
    host = *c;
  }
  auto host_mems = read_list(*root, v2 ? CgroupFile::effective_mems : CgroupFile::mems);
  if (!host_mems) return std::unexpected(host_mems.error());
  std::vector<CpusetTarget> norm;
  for (const auto& t : targets) {
    auto cg = writable_cgroup(t.cgroup);
    if (!cg) return std::unexpected(cg.error());
    if (!t.cpus.subset_of(host))
      return fail("cpuset " + *cg + ": CPUs " + (t.cpus - host).to_list() + " are not on this host (" +
                  host.to_list() + ")");
    if (t.mems && !t.mems->subset_of(*host_mems))
      return fail("cpuset " + *cg + ": memory nodes " + (*t.mems - *host_mems).to_list() +
                  " are not on this host (" + host_mems->to_list() + ")");
    norm.push_back({*cg, t.cpus, t.mems, t.dir});
  }
  return norm;
}

// A held target whose cgroup was removed since the caller saw it (the failure is its removal) is left
// out (churn, not an error), and so is a child that went while its parent was listed; the rest is
// applied.
bool went(const CpusetTarget& t, const Error& failure) { return t.dir != nullptr && t.dir->removed(failure); }
bool vanished(const Error& e) { return e.err == ENOENT || e.err == ENODEV; }

// 2. The state of every target (v1: also its parent and children), the cgroups opened for it, and
// the targets gone meanwhile.
struct CpusetsRead {
  std::map<std::string, Cg> cgs;
  std::map<std::string, CpusetState> state;
  std::set<std::string> gone;
  size_t descendants = 0;  // read below the targets
  std::map<std::string, CpusetState> before_keel;
};

Result<void> read_cpusets(KnobWriter& w, const CgroupHierarchy& h, const std::vector<CpusetTarget>& norm,
                          CpusetsRead& r) {
  auto load = [&](const std::string& path, bool deep, const CgroupDir* held) -> Result<void> {
    if (r.state.contains(path) && !deep) return {};
    if (!r.cgs.contains(path)) {
      auto cg = open_cg(w, h, path, held);
      if (!cg) return std::unexpected(cg.error());
      r.cgs.emplace(path, std::move(*cg));
    }
    auto s = read_cpuset(r.cgs.at(path), deep);
    if (!s) return std::unexpected(s.error());
    r.state[path] = *s;
    return {};
  };
  for (const auto& t : norm) {
    bool empties = t.cpus.empty() || (t.mems && t.mems->empty());
    if (auto l = load(t.cgroup, empties, t.dir); !l) {
      if (!went(t, l.error())) return std::unexpected(l.error());
      r.gone.insert(t.cgroup);
      continue;
    }
    if (h.unified) continue;  // v2 has no nesting rules (and a child may not have the controller)
    if (auto l = load(parent_of(t.cgroup), false, nullptr); !l) {
      if (!went(t, l.error())) return std::unexpected(l.error());
      r.gone.insert(t.cgroup);
      continue;
    }
    // Its descendants, a tenant's to make: without recursion, within the walk's bounds and at most
    // kMaxCpusetDescendants in all (one past them that does not fit makes the kernel refuse this target).
    std::vector<std::pair<std::string, size_t>> todo{{t.cgroup, 0}};
    while (!todo.empty() && r.descendants < kMaxCpusetDescendants) {
      auto [at, depth] = std::move(todo.back());
      todo.pop_back();
      std::error_code ec;
      for (fs::directory_iterator it(r.cgs.at(at).abs(), ec), end; !ec && it != end; it.increment(ec)) {
        if (!it->is_directory(ec)) continue;
        const std::string child = at + "/" + it->path().filename().string();
        if (depth + 1 > kMaxCgroupDepth || child.size() >= kMaxCgroupPath) continue;
        if (++r.descendants > kMaxCpusetDescendants) break;
        if (r.state.contains(child)) continue;  // a target (or read for one): loaded with its own rules
        if (auto l = load(child, false, nullptr); !l) {
          if (l.error().err == ENODEV || (vanished(l.error()) && !fs::exists(it->path(), ec))) continue;
          return std::unexpected(l.error());
        }
        const Cg& cg = r.cgs.at(child);
        if (cg.dir() != nullptr) {  // narrowed by keel before: what it had then
          auto before = [&](CgroupFile f) {
            auto o = w.original(*cg.dir(), f);
            auto set = o ? CpuSet::parse_list(*o) : Result<CpuSet>(CpuSet());
            return set ? *set : CpuSet();
          };
          CpusetState b{before(CgroupFile::cpus), before(CgroupFile::mems), false};
          if (!b.cpus.empty() || !b.mems.empty()) r.before_keel.emplace(child, b);
        }
        todo.emplace_back(child, depth + 1);
      }
    }
  }
  return {};
}

// 3. The writes, then what the kernel granted each target. A write the kernel refuses is the failure of
// the target it is for (a descendant's: of the nearest target above it), and the rest go on: the
// kernel keeps every step inside v1's rules.
Result<std::vector<CpusetGranted>> write_cpusets(KnobWriter& w, const std::vector<CpusetTarget>& norm,
                                                 const std::vector<CpusetTarget>& live, CpusetOrder& order,
                                                 CpusetsRead& r) {
  std::map<std::string, bool> changed;
  auto target_of = [&](std::string path) {
    for (;;) {
      if (std::ranges::any_of(live, [&](const CpusetTarget& l) { return l.cgroup == path; }) || path == "/")
        return path;
      path = parent_of(path);
    }
  };
  for (const auto& wr : order.writes) {
    if (r.gone.contains(wr.cgroup)) continue;
    auto done =
        set(w, r.cgs.at(wr.cgroup), wr.mems ? CgroupFile::mems : CgroupFile::cpus, list_value(wr.value));
    if (!done) {
      auto t = std::find_if(live.begin(), live.end(),
                            [&](const CpusetTarget& l) { return l.cgroup == wr.cgroup; });
      if (t != live.end() && vanished(done.error()) && went(*t, done.error())) {
        r.gone.insert(wr.cgroup);  // removed between the read and the write
        continue;
      }
      if (t == live.end() && vanished(done.error())) continue;  // a descendant removed meanwhile
      if (w.mode() != Mode::enforce) return std::unexpected(done.error());
      order.refused.try_emplace(target_of(wr.cgroup), done.error().message());
      continue;
    }
    changed[wr.cgroup] = changed[wr.cgroup] || *done;
  }
  std::vector<CpusetGranted> out;
  for (const auto& t : norm) {
    if (r.gone.contains(t.cgroup)) {
      out.push_back({t.cgroup, false, {}, true, {}});
      continue;
    }
    CpusetGranted g{t.cgroup, changed[t.cgroup], t.cpus, false, {}};
    if (auto why = order.refused.find(t.cgroup); why != order.refused.end()) g.refused = why->second;
    const Cg& cg = r.cgs.at(t.cgroup);
    if (w.mode() == Mode::enforce && cg.dir() != nullptr) {
      if (auto eff = read_list(cg, CgroupFile::effective_cpus))
        g.effective = *eff;
      else if (went(t, eff.error()))
        g.gone = true;
      else if (eff.error().err != ENOENT)
        return std::unexpected(eff.error());
    }
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace

Result<std::vector<CpusetGranted>> apply_cpusets(KnobWriter& w, const CgroupHierarchy& h,
                                                 const std::vector<CpusetTarget>& targets,
                                                 const std::optional<CpuSet>& host_cpus) {
  if (auto r = need_controller(h, "cpuset"); !r) return std::unexpected(r.error());
  auto norm = checked_targets(w, h, targets, host_cpus);
  if (!norm) return std::unexpected(norm.error());
  CpusetsRead read;
  if (auto r = read_cpusets(w, h, *norm, read); !r) return std::unexpected(r.error());
  std::vector<CpusetTarget> live;
  for (const auto& t : *norm)
    if (!read.gone.contains(t.cgroup)) live.push_back(t);
  auto order = order_cpuset_writes(read.state, live, !h.unified, read.before_keel);
  if (!order) return std::unexpected(order.error());
  return write_cpusets(w, *norm, live, *order, read);
}

// ---- weight ----

namespace {

Result<bool> set_weight(KnobWriter& w, const Cg& cg, uint64_t shares, WeightMapping m) {
  const CgroupHierarchy& h = *cg.h;
  if (auto r = need_controller(h, "cpu"); !r) return std::unexpected(r.error());
  if (shares < kSharesMin || shares > kSharesMax)
    return fail("cpu shares " + std::to_string(shares) + " for " + cg.path + " outside [" +
                std::to_string(kSharesMin) + ", " + std::to_string(kSharesMax) + "]");
  uint64_t value = h.unified ? shares_to_weight(shares, m) : shares;
  if (auto idle = current_value(w, cg, CgroupFile::idle); idle && parse_integer(*idle) == 1) {
    auto cur = current_value(w, cg, CgroupFile::weight);
    if (!cur) return std::unexpected(cur.error());
    if (same_value(ValueKind::weight, *cur, std::to_string(value))) return false;
    // Named as the write it stands for (the file and the value), with the reason the kernel would give.
    return fail("'" + std::to_string(value) + "' not written: cgroup " + cg.path +
                    " is idle (cpu.idle=1) and the kernel refuses a weight: set cpu.idle=0 first",
                (cg.abs() / cg.name(CgroupFile::weight)).string(), EINVAL);
  }
  return set(w, cg, CgroupFile::weight, std::to_string(value));
}

}  // namespace

Result<bool> set_cpu_weight(KnobWriter& w, const CgroupHierarchy& h, const std::string& cgroup,
                            uint64_t shares, WeightMapping m) {
  auto path = writable_cgroup(cgroup);
  if (!path) return std::unexpected(path.error());
  auto cg = open_cg(w, h, *path);
  if (!cg) return std::unexpected(cg.error());
  return set_weight(w, *cg, shares, m);
}

Result<bool> set_cpu_weight(KnobWriter& w, const CgroupDir& dir, uint64_t shares, WeightMapping m) {
  auto path = writable_cgroup(dir.path());
  if (!path) return std::unexpected(path.error());
  auto cg = open_cg(w, dir.hierarchy(), *path, &dir);
  if (!cg) return std::unexpected(cg.error());
  return set_weight(w, *cg, shares, m);
}

// ---- quota ----

Result<bool> set_cpu_quota(KnobWriter& w, const CgroupHierarchy& h, const std::string& cgroup,
                           std::optional<std::chrono::microseconds> quota, std::chrono::microseconds period) {
  auto path = writable_cgroup(cgroup);
  if (!path) return std::unexpected(path.error());
  if (auto r = need_controller(h, "cpu"); !r) return std::unexpected(r.error());
  Bandwidth want{quota ? quota->count() : -1, period.count()};
  if (want.period < kCfsPeriodMinUs || want.period > kCfsPeriodMaxUs)
    return fail("cpu period " + std::to_string(want.period) + " us for " + *path + " outside [" +
                std::to_string(kCfsPeriodMinUs) + ", " + std::to_string(kCfsPeriodMaxUs) + "]");
  if (quota && (want.quota < kCfsQuotaMinUs || want.quota > kCfsQuotaMaxUs))
    return fail("cpu quota " + std::to_string(quota->count()) + " us for " + *path + " outside [" +
                std::to_string(kCfsQuotaMinUs) + ", " + std::to_string(kCfsQuotaMaxUs) + "]");
  auto opened = open_cg(w, h, *path);
  if (!opened) return std::unexpected(opened.error());
  const Cg& cg = *opened;
  if (cg.dir() != nullptr && want.limited())
    if (auto burst = cg.dir()->read(CgroupFile::burst))
      if (auto b = parse_integer(*burst); b && *b > want.quota)
        return fail("cpu quota " + std::to_string(want.quota) + " us for " + *path + " is below its burst (" +
                    std::to_string(*b) + " us), which the kernel refuses");

  if (h.unified)
    return set(w, cg, CgroupFile::cpu_max,
               (want.limited() ? std::to_string(want.quota) : "max") + " " + std::to_string(want.period));
  Bandwidth from;  // observe mode, a cgroup not made yet: a new one's (no limit per 100 ms)
  auto q = cg.dir() ? cg.dir()->read(CgroupFile::cfs_quota) : fail("not made yet", cg.abs().string(), ENOENT);
  auto p =
      cg.dir() ? cg.dir()->read(CgroupFile::cfs_period) : fail("not made yet", cg.abs().string(), ENOENT);
  if (!q || !p) {
    Error e = !q ? q.error() : p.error();
    if (w.mode() == Mode::enforce || e.err != ENOENT) return std::unexpected(e);
  } else {
    auto qv = parse_integer(*q), pv = parse_integer(*p);
    if (!qv || !pv)
      return fail(
          "unreadable CPU bandwidth '" + std::string(trim(*q)) + "' / '" + std::string(trim(*p)) + "'",
          cg.abs().string());
    from = {*qv < 0 ? -1 : *qv, *pv};
  }
  bool changed = false;
  Bandwidth now = from;
  auto write = [&](const Step& s) {
    auto r = set(w, cg, s.file, std::to_string(s.value));
    if (r) (s.file == CgroupFile::cfs_quota ? now.quota : now.period) = s.value;
    return r;
  };
  for (const Step& s : v1_bandwidth_steps(from, want)) {
    auto r = write(s);
    if (!r) {
      // Refused midway (e.g. the parent's limit): go back to where it was, so a lifted limit (-1) is
      // never left behind.
      for (const Step& back : v1_bandwidth_steps(now, from)) (void)write(back);
      return std::unexpected(r.error());
    }
    changed = changed || *r;
  }
  return changed;
}

// ---- idle ----

namespace {

// cpu.idle of `cg`. The kernel sets an idle group's weight to its minimum and back to the default
// when it leaves: the weight is journaled now (in both directions) so restore (cpu.idle first, then
// weights) gives the old one back and never journals the kernel's side effect as an original; on
// leaving, `weight_before` (when given) is written back.
Result<bool> set_idle(KnobWriter& w, const Cg& cg, bool idle, const std::string* weight_before) {
  auto cur = current_value(w, cg, CgroupFile::idle);
  if (!cur && cg.dir() == nullptr) cur = "0";  // observe mode, a cgroup not made yet
  if (!cur) {
    if (cur.error().err == ENOENT && !idle) return false;  // no cpu.idle (kernel < 5.15): never idle
    if (cur.error().err == ENOENT)
      return fail("this kernel has no cpu.idle", (cg.abs() / cg.name(CgroupFile::idle)).string(), ENOENT);
    return std::unexpected(cur.error());
  }
  if (parse_integer(*cur) == (idle ? 1 : 0)) return false;
  if (w.mode() == Mode::enforce && cg.dir()->read(CgroupFile::weight))
    if (auto r = w.journal(*cg.dir(), CgroupFile::weight); !r) return std::unexpected(r.error());
  auto r = set(w, cg, CgroupFile::idle, idle ? "1" : "0");
  if (!r || !*r || idle || weight_before == nullptr || w.mode() != Mode::enforce) return r;
  if (auto back = set(w, cg, CgroupFile::weight, *weight_before); !back) return std::unexpected(back.error());
  return true;
}

}  // namespace

Result<bool> set_cpu_idle(KnobWriter& w, const CgroupHierarchy& h, const std::string& cgroup, bool idle) {
  auto path = writable_cgroup(cgroup);
  if (!path) return std::unexpected(path.error());
  if (auto r = need_controller(h, "cpu"); !r) return std::unexpected(r.error());
  auto opened = open_cg(w, h, *path);
  if (!opened) return std::unexpected(opened.error());
  return set_idle(w, *opened, idle, nullptr);
}

// ---- the preemption class ----

PreemptClass preempt_class_of(const CgroupDir& dir) {
  if (dir.read(CgroupFile::idle)) return PreemptClass::cpu_idle;
  if (dir.read(CgroupFile::qos_level)) return PreemptClass::qos_level;
  if (dir.read(CgroupFile::bvt_warp)) return PreemptClass::bvt_warp;
  return PreemptClass::min_weight;
}

Result<bool> set_preempt_class(KnobWriter& w, const CgroupDir& dir, PreemptClass how, bool on,
                               const std::string* weight_before) {
  auto path = writable_cgroup(dir.path());
  if (!path) return std::unexpected(path.error());
  auto opened = open_cg(w, dir.hierarchy(), *path, &dir);
  if (!opened) return std::unexpected(opened.error());
  const Cg& cg = *opened;
  switch (how) {
    case PreemptClass::min_weight:
      return fail("the minimum weight is written as a weight, not as a class", dir.path());
    case PreemptClass::qos_level:
      return set(w, cg, CgroupFile::qos_level, on ? "-1" : "0");
    case PreemptClass::bvt_warp:
      return set(w, cg, CgroupFile::bvt_warp, on ? "-1" : "0");
    case PreemptClass::cpu_idle:
      break;
  }
  return set_idle(w, cg, on, weight_before);
}

}  // namespace keel::act
