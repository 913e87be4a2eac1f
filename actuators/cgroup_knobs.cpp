#include "actuators/cgroup_knobs.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

#include "host/fileio.h"

namespace keel::act {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kSharesMin = 2, kSharesMax = 262144;     // kernel MIN_SHARES, MAX_SHARES
constexpr uint64_t kWeightMin = 1, kWeightMax = 10000;      // cgroup v2 CGROUP_WEIGHT_MIN/MAX
constexpr int64_t kPeriodMin = 1000, kPeriodMax = 1000000;  // us: min/max_cfs_quota_period
constexpr int64_t kQuotaMin = 1000;                         // us: min_cfs_quota_period
constexpr int64_t kQuotaMax = (int64_t{1} << 44) - 1;       // us: max_cfs_runtime (MAX_BW)

// ---- small parsers ----

std::optional<int64_t> parse_int(std::string_view s) {
  s = trim(s);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

bool same_number(std::string_view a, std::string_view b) {
  auto x = parse_int(a), y = parse_int(b);
  return x && y ? *x == *y : trim(a) == trim(b);
}

bool same_list(std::string_view a, std::string_view b) {
  auto x = CpuSet::parse_list(a), y = CpuSet::parse_list(b);
  return x && y ? *x == *y : trim(a) == trim(b);
}

// cpu.max: "max 100000" or "50000 100000"; a quota of -1 is no limit (as v1's cfs_quota_us).
struct Bandwidth {
  int64_t quota = -1;
  int64_t period = 100000;
  bool limited() const { return quota >= 0; }
  bool operator==(const Bandwidth&) const = default;
};

std::optional<Bandwidth> parse_cpu_max(std::string_view s) {
  s = trim(s);
  size_t sp = s.find(' ');
  if (sp == std::string_view::npos) return std::nullopt;
  auto period = parse_int(s.substr(sp + 1));
  if (!period) return std::nullopt;
  std::string_view q = s.substr(0, sp);
  if (q == "max") return Bandwidth{-1, *period};
  auto quota = parse_int(q);
  if (!quota || *quota < 0) return std::nullopt;
  return Bandwidth{*quota, *period};
}

bool same_cpu_max(std::string_view a, std::string_view b) {
  auto x = parse_cpu_max(a), y = parse_cpu_max(b);
  return x && y ? *x == *y : trim(a) == trim(b);
}

// ---- cgroup paths ----

// "/a/b" from "a/b", "/a//b/", "/"; no "." or "..".
Result<std::string> normalize(std::string_view cgroup) {
  std::string out;
  size_t i = 0;
  while (i <= cgroup.size()) {
    size_t j = cgroup.find('/', i);
    if (j == std::string_view::npos) j = cgroup.size();
    std::string_view part = cgroup.substr(i, j - i);
    if (part == "." || part == "..") return fail("cgroup path '" + std::string(cgroup) + "' has '.' or '..'");
    if (!part.empty()) out.append(1, '/').append(part);
    i = j + 1;
  }
  return out.empty() ? "/" : out;
}

std::string parent_of(const std::string& path) {
  size_t at = path.rfind('/');
  return at == 0 || at == std::string::npos ? "/" : path.substr(0, at);
}

size_t depth_of(const std::string& path) {
  return path == "/" ? 0 : static_cast<size_t>(std::count(path.begin(), path.end(), '/'));
}

// A cgroup whose knobs keel may write: not the root (whose CPU knobs are not writable or absent).
Result<std::string> writable_cgroup(std::string_view cgroup) {
  auto cg = normalize(cgroup);
  if (!cg) return cg;
  if (*cg == "/") return fail("the root cgroup's CPU knobs cannot be set");
  return cg;
}

Result<void> need_controller(const CgroupHierarchy& h, std::string_view controller) {
  if (h.has(controller)) return {};
  return fail("hierarchy " + h.name() + " has no " + std::string(controller) + " controller",
              h.mount.string());
}

// The current value: the file's, or in observe mode the last value this writer would have written
// (so an observed sequence sees its own earlier steps).
Result<std::string> current_value(const KnobWriter& w, const KnobPath& k) {
  if (w.mode() == Mode::observe)
    for (auto it = w.changes().rbegin(); it != w.changes().rend(); ++it)
      if (it->path == k) return it->to;
  auto s = read_file(k.abs(w.roots()));
  if (!s) return std::unexpected(s.error());
  return std::string(trim(*s));
}

// ---- cpuset files ----

// File names of a cpuset hierarchy: v2, v1, or v1 mounted with `noprefix` ("cpus" for "cpuset.cpus").
struct CpusetFiles {
  std::string cpus, mems, effective_cpus, root_cpus, root_mems;
};

CpusetFiles cpuset_files(const SysRoots& roots, const CgroupHierarchy& h) {
  if (h.unified)
    return {"cpuset.cpus", "cpuset.mems", "cpuset.cpus.effective", "cpuset.cpus.effective",
            "cpuset.mems.effective"};
  std::error_code ec;
  auto prefixed = cgroup_knob(roots, h, "/", "cpuset.cpus"), bare = cgroup_knob(roots, h, "/", "cpus");
  if (prefixed && bare && !fs::exists(prefixed->abs(roots), ec) && fs::exists(bare->abs(roots), ec))
    return {"cpus", "mems", "effective_cpus", "cpus", "mems"};
  return {"cpuset.cpus", "cpuset.mems", "cpuset.effective_cpus", "cpuset.cpus", "cpuset.mems"};
}

Result<CpuSet> read_list(const SysRoots& roots, const KnobPath& k) {
  auto s = read_file(k.abs(roots));
  if (!s) return std::unexpected(s.error());
  auto set = CpuSet::parse_list(*s);
  if (!set) return fail("not a CPU list: " + set.error().what, k.abs(roots).string());
  return set;
}

// Whether the cgroup (only it, or with `deep` also any descendant) has tasks.
bool has_tasks(const fs::path& dir, bool deep) {
  for (const char* f : {"cgroup.procs", "tasks"}) {
    auto s = read_file(dir / f);
    if (s && !trim(*s).empty()) return true;
  }
  if (!deep) return false;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec) && has_tasks(it->path(), true)) return true;
  return false;
}

// Reads the cpuset of `cg`; in observe mode a cgroup not made yet reads as a new, empty one.
Result<std::optional<CpusetState>> read_cpuset(const KnobWriter& w, const CgroupHierarchy& h,
                                               const CpusetFiles& f, const std::string& cg, bool deep) {
  auto dir = cgroup_knob(w.roots(), h, cg, "");
  if (!dir) return std::unexpected(dir.error());
  fs::path abs = dir->abs(w.roots());
  std::error_code ec;
  if (!fs::is_directory(abs, ec)) {
    if (w.mode() == Mode::observe) return std::optional<CpusetState>(CpusetState{});
    return fail("no such cgroup", abs.string(), ENOENT);
  }
  bool root = cg == "/";
  CpusetState s;
  auto cpus = read_list(w.roots(), {Root::cgroup, dir->rel / (root ? f.root_cpus : f.cpus)});
  auto mems = read_list(w.roots(), {Root::cgroup, dir->rel / (root ? f.root_mems : f.mems)});
  if (!cpus) return std::unexpected(cpus.error());
  if (!mems) return std::unexpected(mems.error());
  s.cpus = *cpus;
  s.mems = *mems;
  s.populated = has_tasks(abs, deep);
  return std::optional<CpusetState>(s);
}

std::string list_value(const CpuSet& s) { return s.empty() ? "\n" : s.to_list(); }  // kernfs ignores 0 bytes

// ---- v1 bandwidth ----

struct Step {
  const char* file;
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
  const char *kQuota = "cpu.cfs_quota_us", *kPeriod = "cpu.cfs_period_us";
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

// ---- knob paths ----

Result<KnobPath> cgroup_knob(const SysRoots& roots, const CgroupHierarchy& h, std::string_view cgroup,
                             std::string_view file) {
  auto cg = normalize(cgroup);
  if (!cg) return std::unexpected(cg.error());
  fs::path mount = h.mount.lexically_relative(roots.cgroup);
  if (mount.empty() || (mount.begin() != mount.end() && *mount.begin() == ".."))
    return fail("hierarchy " + h.name() + " is not mounted under " + roots.cgroup.string(), h.mount.string());
  if (file.find('/') != std::string_view::npos) return fail("not a file name: '" + std::string(file) + "'");
  fs::path rel = (mount / cg->substr(1) / file).lexically_normal();
  if (rel == ".") rel.clear();
  if (!rel.empty() && !rel.has_filename()) rel = rel.parent_path();  // "cpuset/a/" -> "cpuset/a"
  return KnobPath{Root::cgroup, rel};
}

// ---- cpusets ----

Result<std::vector<CpusetWrite>> order_cpuset_writes(const std::map<std::string, CpusetState>& current,
                                                     const std::vector<CpusetTarget>& targets, bool v1) {
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

  // The final state, parents before children (a v1 cpuset without mems takes its parent's).
  std::map<std::string, CpusetState> fin = current;
  for (const auto& [path, t] : ts) {
    CpusetState& s = fin[path];
    s.cpus = t->cpus;
    if (t->mems)
      s.mems = *t->mems;
    else if (v1 && s.mems.empty())
      s.mems = fin[parent_of(path)].mems;
  }
  for (const auto& [path, t] : ts) {
    const CpusetState& s = fin.at(path);
    if (s.populated && s.cpus.empty())
      return fail("cannot take every CPU from " + path + ": it (or a cgroup below it) has tasks");
    if (v1 && s.populated && s.mems.empty())
      return fail("cannot leave " + path + " without memory nodes: it (or a cgroup below it) has tasks");
    if (!v1) continue;
    const CpusetState& up = fin.at(parent_of(path));
    if (!s.cpus.subset_of(up.cpus) || !s.mems.subset_of(up.mems))
      return fail("cpuset " + path + " (cpus " + s.cpus.to_list() + ", mems " + s.mems.to_list() +
                  ") would not fit in its parent's (cpus " + up.cpus.to_list() + ", mems " +
                  up.mems.to_list() + ")");
    for (const auto& [child, cs] : fin)
      if (child != path && parent_of(child) == path &&
          (!cs.cpus.subset_of(s.cpus) || !cs.mems.subset_of(s.mems)))
        return fail("cpuset " + child + " (cpus " + cs.cpus.to_list() + ", mems " + cs.mems.to_list() +
                    ") would not fit in its parent " + path + "'s (cpus " + s.cpus.to_list() + ", mems " +
                    s.mems.to_list() + ")");
  }

  std::vector<CpusetWrite> out;
  if (!v1) {  // v2 takes any order: one write per change
    for (const auto& [path, t] : ts) {
      const CpusetState &from = current.at(path), &to = fin.at(path);
      if (to.cpus != from.cpus) out.push_back({path, false, to.cpus});
      if (to.mems != from.mems) out.push_back({path, true, to.mems});
    }
    return out;
  }
  // Grow, parents first, to old | new; then shrink, children first, to new.
  for (const auto& [path, t] : ts) {
    const CpusetState &from = current.at(path), &to = fin.at(path);
    if (CpuSet u = from.cpus | to.cpus; u != from.cpus) out.push_back({path, false, u});
    if (CpuSet u = from.mems | to.mems; u != from.mems) out.push_back({path, true, u});
  }
  for (auto it = ts.rbegin(); it != ts.rend(); ++it) {
    const CpusetState &from = current.at(it->path), &to = fin.at(it->path);
    if (to.cpus != (from.cpus | to.cpus)) out.push_back({it->path, false, to.cpus});
    if (to.mems != (from.mems | to.mems)) out.push_back({it->path, true, to.mems});
  }
  return out;
}

Result<std::vector<CpusetGranted>> apply_cpusets(KnobWriter& w, const CgroupHierarchy& h,
                                                 const std::vector<CpusetTarget>& targets,
                                                 const std::optional<CpuSet>& host_cpus) {
  if (auto r = need_controller(h, "cpuset"); !r) return std::unexpected(r.error());
  const SysRoots& roots = w.roots();
  const CpusetFiles f = cpuset_files(roots, h);

  // 1. Every target against the host's CPUs and nodes, before reading or writing anything else.
  auto root = cgroup_knob(roots, h, "/", "");
  if (!root) return std::unexpected(root.error());
  CpuSet host;
  if (host_cpus) {
    host = *host_cpus;
  } else {
    auto c = read_list(roots, {Root::cgroup, root->rel / f.root_cpus});
    if (!c) return std::unexpected(c.error());
    host = *c;
  }
  auto host_mems = read_list(roots, {Root::cgroup, root->rel / f.root_mems});
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
    norm.push_back({*cg, t.cpus, t.mems});
  }

  // 2. The state of every target (v1: also its parent and children); then the writes, checked as a whole.
  std::map<std::string, CpusetState> state;
  auto load = [&](const std::string& cg, bool deep) -> Result<void> {
    if (state.contains(cg) && !deep) return {};
    auto s = read_cpuset(w, h, f, cg, deep);
    if (!s) return std::unexpected(s.error());
    state[cg] = **s;
    return {};
  };
  for (const auto& t : norm) {
    bool empties = t.cpus.empty() || (t.mems && t.mems->empty());
    if (auto r = load(t.cgroup, empties); !r) return std::unexpected(r.error());
    if (h.unified) continue;  // v2 has no nesting rules (and a child may not have the controller)
    if (auto r = load(parent_of(t.cgroup), false); !r) return std::unexpected(r.error());
    auto dir = cgroup_knob(roots, h, t.cgroup, "");
    if (!dir) return std::unexpected(dir.error());
    std::error_code ec;
    for (fs::directory_iterator it(dir->abs(roots), ec), end; !ec && it != end; it.increment(ec)) {
      if (!it->is_directory(ec)) continue;
      if (auto r = load(t.cgroup + "/" + it->path().filename().string(), false); !r)
        return std::unexpected(r.error());
    }
  }
  auto writes = order_cpuset_writes(state, norm, !h.unified);
  if (!writes) return std::unexpected(writes.error());

  // 3. The writes, then what the kernel granted.
  std::map<std::string, bool> changed;
  for (const auto& wr : *writes) {
    auto k = cgroup_knob(roots, h, wr.cgroup, wr.mems ? f.mems : f.cpus);
    if (!k) return std::unexpected(k.error());
    auto r = w.set(*k, list_value(wr.value), same_list);
    if (!r) return std::unexpected(r.error());
    changed[wr.cgroup] = changed[wr.cgroup] || *r;
  }
  std::vector<CpusetGranted> out;
  for (const auto& t : norm) {
    CpusetGranted g{t.cgroup, changed[t.cgroup], t.cpus};
    if (w.mode() == Mode::enforce) {
      auto k = cgroup_knob(roots, h, t.cgroup, f.effective_cpus);
      if (auto eff = read_list(roots, *k))
        g.effective = *eff;
      else if (eff.error().err != ENOENT)
        return std::unexpected(eff.error());
    }
    out.push_back(std::move(g));
  }
  return out;
}

// ---- weight ----

uint64_t shares_to_weight(uint64_t shares, WeightMapping m) {
  shares = std::clamp(shares, kSharesMin, kSharesMax);
  if (m == WeightMapping::systemd) return std::clamp(shares * 100 / 1024, kWeightMin, kWeightMax);
  if (shares == kSharesMin) return kWeightMin;
  if (shares == kSharesMax) return kWeightMax;
  // A quadratic in log2(shares) through (1, 0), (10, 2), (18, 4), as log10 of the weight.
  double l = std::log2(static_cast<double>(shares));
  double exponent = (l * l + 125 * l) / 612.0 - 7.0 / 34.0;
  return std::clamp(static_cast<uint64_t>(std::ceil(std::pow(10.0, exponent))), kWeightMin, kWeightMax);
}

Result<bool> set_cpu_weight(KnobWriter& w, const CgroupHierarchy& h, const std::string& cgroup,
                            uint64_t shares, WeightMapping m) {
  auto cg = writable_cgroup(cgroup);
  if (!cg) return std::unexpected(cg.error());
  if (auto r = need_controller(h, "cpu"); !r) return std::unexpected(r.error());
  if (shares < kSharesMin || shares > kSharesMax)
    return fail("cpu shares " + std::to_string(shares) + " for " + *cg + " outside [2, 262144]");
  uint64_t value = h.unified ? shares_to_weight(shares, m) : shares;
  auto k = cgroup_knob(w.roots(), h, *cg, h.unified ? "cpu.weight" : "cpu.shares");
  auto idle_k = cgroup_knob(w.roots(), h, *cg, "cpu.idle");
  if (!k || !idle_k) return std::unexpected(!k ? k.error() : idle_k.error());
  if (auto idle = current_value(w, *idle_k); idle && parse_int(*idle) == 1) {
    auto cur = current_value(w, *k);
    if (!cur) return std::unexpected(cur.error());
    if (same_number(*cur, std::to_string(value))) return false;
    return fail(
        "cgroup " + *cg + " is idle (cpu.idle=1) and the kernel refuses a weight: set cpu.idle=0 first",
        idle_k->abs(w.roots()).string(), EINVAL);
  }
  return w.set(*k, std::to_string(value), same_number);
}

// ---- quota ----

Result<bool> set_cpu_quota(KnobWriter& w, const CgroupHierarchy& h, const std::string& cgroup,
                           std::optional<std::chrono::microseconds> quota, std::chrono::microseconds period) {
  auto cg = writable_cgroup(cgroup);
  if (!cg) return std::unexpected(cg.error());
  if (auto r = need_controller(h, "cpu"); !r) return std::unexpected(r.error());
  Bandwidth want{quota ? quota->count() : -1, period.count()};
  if (want.period < kPeriodMin || want.period > kPeriodMax)
    return fail("cpu period " + std::to_string(want.period) + " us for " + *cg + " outside [1000, 1000000]");
  if (quota && (want.quota < kQuotaMin || want.quota > kQuotaMax))
    return fail("cpu quota " + std::to_string(quota->count()) + " us for " + *cg + " outside [1000, " +
                std::to_string(kQuotaMax) + "]");
  auto burst_k = cgroup_knob(w.roots(), h, *cg, h.unified ? "cpu.max.burst" : "cpu.cfs_burst_us");
  if (!burst_k) return std::unexpected(burst_k.error());
  if (auto burst = read_file(burst_k->abs(w.roots())); burst && want.limited()) {
    if (auto b = parse_int(*burst); b && *b > want.quota)
      return fail("cpu quota " + std::to_string(want.quota) + " us for " + *cg + " is below its burst (" +
                  std::to_string(*b) + " us), which the kernel refuses");
  }

  if (h.unified) {
    auto k = cgroup_knob(w.roots(), h, *cg, "cpu.max");
    if (!k) return std::unexpected(k.error());
    std::string v = (want.limited() ? std::to_string(want.quota) : "max") + " " + std::to_string(want.period);
    return w.set(*k, v, same_cpu_max);
  }
  auto qk = cgroup_knob(w.roots(), h, *cg, "cpu.cfs_quota_us");
  auto pk = cgroup_knob(w.roots(), h, *cg, "cpu.cfs_period_us");
  if (!qk || !pk) return std::unexpected(!qk ? qk.error() : pk.error());
  auto q = read_file(qk->abs(w.roots()));
  auto p = read_file(pk->abs(w.roots()));
  Bandwidth from;  // observe mode, a cgroup not made yet: a new one's (no limit per 100 ms)
  if (q && p) {
    auto qv = parse_int(*q), pv = parse_int(*p);
    if (!qv || !pv)
      return fail(
          "unreadable CPU bandwidth '" + std::string(trim(*q)) + "' / '" + std::string(trim(*p)) + "'",
          qk->abs(w.roots()).parent_path().string());
    from = {*qv < 0 ? -1 : *qv, *pv};
  } else if (Error e = !q ? q.error() : p.error(); w.mode() == Mode::enforce || e.err != ENOENT) {
    return std::unexpected(e);
  }
  bool changed = false;
  Bandwidth now = from;
  auto write = [&](const Step& s) {
    bool quota_file = std::string_view(s.file) == "cpu.cfs_quota_us";
    auto r = w.set(quota_file ? *qk : *pk, std::to_string(s.value), same_number);
    if (r) (quota_file ? now.quota : now.period) = s.value;
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

Result<bool> set_cpu_idle(KnobWriter& w, const CgroupHierarchy& h, const std::string& cgroup, bool idle) {
  auto cg = writable_cgroup(cgroup);
  if (!cg) return std::unexpected(cg.error());
  if (auto r = need_controller(h, "cpu"); !r) return std::unexpected(r.error());
  auto k = cgroup_knob(w.roots(), h, *cg, "cpu.idle");
  if (!k) return std::unexpected(k.error());
  std::error_code ec;
  bool exists = fs::is_directory(k->abs(w.roots()).parent_path(), ec);
  if (!exists && w.mode() == Mode::enforce)
    return fail("no such cgroup", k->abs(w.roots()).parent_path().string(), ENOENT);
  auto cur = current_value(w, *k);
  if (!cur && !exists) cur = "0";  // observe mode, a cgroup not made yet
  if (!cur) {
    if (cur.error().err == ENOENT && !idle) return false;  // no cpu.idle (kernel < 5.15): never idle
    if (cur.error().err == ENOENT)
      return fail("this kernel has no cpu.idle", k->abs(w.roots()).string(), ENOENT);
    return std::unexpected(cur.error());
  }
  if (parse_int(*cur) == (idle ? 1 : 0)) return false;
  if (w.mode() == Mode::enforce) {
    // The kernel sets an idle group's weight to its minimum and back to the default when it leaves:
    // journal the weight now (in both directions) so restore (cpu.idle first, then weights) gives
    // the old one back, and never journals the kernel's side effect as an original.
    auto wk = cgroup_knob(w.roots(), h, *cg, h.unified ? "cpu.weight" : "cpu.shares");
    if (!wk) return std::unexpected(wk.error());
    if (fs::exists(wk->abs(w.roots())))
      if (auto r = w.journal(*wk); !r) return std::unexpected(r.error());
  }
  return w.set(*k, idle ? "1" : "0", same_number);
}

}  // namespace keel::act
