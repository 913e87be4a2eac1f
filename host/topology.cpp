#include "host/topology.h"

#include <hwloc.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <system_error>

#include "host/fileio.h"
#include "host/json.h"

namespace keel {

// ---------------------------------------------------------------------------------------------
// Building from a list of PUs

namespace {

template <class Field>
Result<unsigned> count_dense_ids(const std::vector<Pu>& pus, Field field, const char* what) {
  unsigned n = 0;
  for (const Pu& p : pus) {
    if (field(p) >= pus.size())  // dense ids never exceed the number of PUs
      return fail(std::string(what) + " id " + std::to_string(field(p)) + " of CPU " + std::to_string(p.os) +
                  " is out of range for " + std::to_string(pus.size()) + " PUs");
    n = std::max(n, field(p) + 1);
  }
  std::vector<bool> used(n, false);
  for (const Pu& p : pus) used[field(p)] = true;
  for (unsigned i = 0; i < n; ++i)
    if (!used[i])
      return fail(std::string(what) + " ids must be 0.." + std::to_string(n - 1) +
                  " without gaps, but no PU is in " + what + " " + std::to_string(i));
  return n;
}

Result<void> check_core_consistent(const Core& core, const Pu& p) {
  auto mismatch = [&](const char* what, unsigned a, unsigned b) {
    return fail("core " + std::to_string(core.id) + " has PUs in different " + what + "s (CPU " +
                std::to_string(core.cpus.first()) + " in " + std::to_string(a) + ", CPU " +
                std::to_string(p.os) + " in " + std::to_string(b) + ")");
  };
  if (core.l3 != p.l3) return mismatch("L3 domain", core.l3, p.l3);
  if (core.numa != p.numa) return mismatch("NUMA node", core.numa, p.numa);
  if (core.package != p.package) return mismatch("package", core.package, p.package);
  return {};
}

}  // namespace

Result<Topology> Topology::from_pus(std::vector<Pu> pus) {
  if (pus.empty()) return fail("a topology needs at least one PU");
  std::sort(pus.begin(), pus.end(), [](const Pu& a, const Pu& b) { return a.os < b.os; });
  for (size_t i = 1; i < pus.size(); ++i)
    if (pus[i].os == pus[i - 1].os) return fail("CPU " + std::to_string(pus[i].os) + " is listed twice");
  for (const Pu& p : pus)
    if (p.os >= CpuSet::kMaxCpu)
      return fail("CPU " + std::to_string(p.os) + " is beyond the largest CPU number");

  auto n_cores = count_dense_ids(
      pus, [](const Pu& p) { return p.core; }, "core");
  auto n_l3 = count_dense_ids(
      pus, [](const Pu& p) { return p.l3; }, "L3 domain");
  auto n_numa = count_dense_ids(
      pus, [](const Pu& p) { return p.numa; }, "NUMA node");
  auto n_pkg = count_dense_ids(
      pus, [](const Pu& p) { return p.package; }, "package");
  for (auto* n : {&n_cores, &n_l3, &n_numa, &n_pkg})
    if (!*n) return std::unexpected(n->error());

  Topology t;
  t.cores_.resize(*n_cores);
  t.l3_.resize(*n_l3);
  t.numa_.resize(*n_numa);
  t.packages_.resize(*n_pkg);
  std::vector<bool> core_seen(*n_cores, false);
  for (const Pu& p : pus) {
    Core& c = t.cores_[p.core];
    if (!core_seen[p.core]) {
      c = Core{p.core, p.l3, p.numa, p.package, {}};
      core_seen[p.core] = true;
    } else if (auto ok = check_core_consistent(c, p); !ok) {
      return std::unexpected(ok.error());
    }
    c.cpus.add(p.os);
    t.l3_[p.l3].cpus.add(p.os);
    t.numa_[p.numa].cpus.add(p.os);
    t.packages_[p.package].cpus.add(p.os);
    t.online_.add(p.os);
  }
  for (unsigned i = 0; i < t.l3_.size(); ++i) t.l3_[i].id = i;
  for (unsigned i = 0; i < t.numa_.size(); ++i) t.numa_[i].id = t.numa_[i].os_index = i;
  for (unsigned i = 0; i < t.packages_.size(); ++i) t.packages_[i].id = i;
  for (const Core& c : t.cores_) {
    t.l3_[c.l3].cores.push_back(c.id);
    t.numa_[c.numa].cores.push_back(c.id);
    t.packages_[c.package].cores.push_back(c.id);
  }
  t.pus_ = std::move(pus);
  return t;
}

const Pu* Topology::find_pu(unsigned os) const {
  auto it = std::lower_bound(pus_.begin(), pus_.end(), os, [](const Pu& p, unsigned v) { return p.os < v; });
  return it != pus_.end() && it->os == os ? &*it : nullptr;
}

CpuSet Topology::siblings(unsigned os) const {
  const Pu* p = find_pu(os);
  return p ? cores_[p->core].cpus : CpuSet{};
}

unsigned Topology::smt_width() const {
  unsigned w = 0;
  for (const Core& c : cores_) w = std::max(w, c.cpus.count());
  return w;
}

unsigned Topology::min_smt_width() const {
  unsigned w = cores_.empty() ? 0 : cores_.front().cpus.count();
  for (const Core& c : cores_) w = std::min(w, c.cpus.count());
  return w;
}

// ---------------------------------------------------------------------------------------------
// Building from hwloc

namespace {

using HwlocHandle = std::unique_ptr<hwloc_topology, decltype(&hwloc_topology_destroy)>;

Result<HwlocHandle> new_hwloc_topology() {
  hwloc_topology_t t = nullptr;
  if (hwloc_topology_init(&t) != 0) return fail("hwloc_topology_init failed", "", errno);
  return HwlocHandle(t, &hwloc_topology_destroy);
}

// Hands out 0, 1, 2, ... to hwloc objects in the order they are first seen.
class DenseIds {
 public:
  unsigned id(hwloc_obj_t obj) {
    auto [it, added] = ids_.try_emplace(obj, static_cast<unsigned>(objs_.size()));
    if (added) objs_.push_back(obj);
    return it->second;
  }
  const std::vector<hwloc_obj_t>& objects() const { return objs_; }

 private:
  std::map<hwloc_obj_t, unsigned> ids_;
  std::vector<hwloc_obj_t> objs_;
};

// Each PU's NUMA node (by OS index): the smallest node whose cpuset holds it. CPU-less nodes (CXL,
// HBM) attach higher in hwloc's tree with wider cpusets, so the smallest one is where the CPU really
// sits. One pass over the nodes' cpusets, not one over the nodes per PU (4096 nodes took 30 s).
std::map<unsigned, hwloc_obj_t> numa_nodes_of_pus(hwloc_topology_t topo) {
  std::map<unsigned, std::pair<hwloc_obj_t, int>> best;
  for (hwloc_obj_t n = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, nullptr); n != nullptr;
       n = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, n)) {
    if (n->cpuset == nullptr) continue;
    const int w = hwloc_bitmap_weight(n->cpuset);
    for (int pu = hwloc_bitmap_first(n->cpuset); pu >= 0; pu = hwloc_bitmap_next(n->cpuset, pu)) {
      auto [it, added] = best.try_emplace(static_cast<unsigned>(pu), n, w);
      if (!added && w < it->second.second) it->second = {n, w};
    }
  }
  std::map<unsigned, hwloc_obj_t> out;
  for (const auto& [pu, b] : best) out.emplace_hint(out.end(), pu, b.first);
  return out;
}

}  // namespace

Result<Topology> Topology::from_hwloc(hwloc_topology* topo) {
  DenseIds cores, l3s, nodes, packages;
  const std::map<unsigned, hwloc_obj_t> node_of = numa_nodes_of_pus(topo);
  std::vector<Pu> pus;
  for (hwloc_obj_t pu = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PU, nullptr); pu != nullptr;
       pu = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PU, pu)) {
    hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_CORE, pu);
    hwloc_obj_t l3 = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_L3CACHE, pu);
    auto found = node_of.find(pu->os_index);
    hwloc_obj_t node = found == node_of.end() ? nullptr : found->second;
    hwloc_obj_t package = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, pu);
    Pu p;
    p.os = pu->os_index;
    p.core = cores.id(core ? core : pu);  // no core level: each PU is its own core
    p.numa = nodes.id(node);
    // No L3 reported (some VMs): one domain per NUMA node keeps the planner's locality order meaningful.
    p.l3 = l3s.id(l3 ? l3 : node);
    p.package = packages.id(package);
    pus.push_back(p);
  }
  auto t = from_pus(std::move(pus));
  if (!t) return t;
  for (unsigned i = 0; i < t->l3_.size(); ++i) {
    hwloc_obj_t obj = l3s.objects()[i];
    if (obj != nullptr && obj->type == HWLOC_OBJ_L3CACHE) t->l3_[i].size_bytes = obj->attr->cache.size;
  }
  for (unsigned i = 0; i < t->numa_.size(); ++i) {
    hwloc_obj_t obj = nodes.objects()[i];
    if (obj == nullptr) continue;
    t->numa_[i].os_index = obj->os_index;
    t->numa_[i].memory_bytes = obj->attr->numanode.local_memory;
  }
  return t;
}

namespace {

bool same_path(const std::filesystem::path& a, const std::filesystem::path& b) {
  auto normal = [](const std::filesystem::path& p) {
    std::filesystem::path n = p.lexically_normal();
    return n.has_filename() || !n.has_relative_path() ? n : n.parent_path();  // "a/b/" is "a/b"
  };
  return normal(a) == normal(b);
}

// Sets an environment variable for the life of the object, then puts back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

Result<Topology> Topology::detect(const SysRoots& roots) {
  const SysRoots host = SysRoots::host();
  bool is_host = same_path(roots.sys, host.sys);
  std::optional<ScopedEnv> fsroot, components;
  if (!is_host) {
    // Another tree laid out like the host's (a test's, or one saved by hwloc-gather-topology): hwloc's
    // Linux backend reads <root>/sys and <root>/proc when HWLOC_FSROOT=<root>, and
    // HWLOC_COMPONENTS=linux,stop keeps other backends (x86 CPUID) from mixing in the real CPU.
    // hwloc reads both variables while loading, so they are set only around the load. setenv is not
    // thread-safe, which is fine while keel runs on one thread.
    std::error_code ec;
    std::filesystem::path sys = std::filesystem::absolute(roots.sys, ec).lexically_normal();
    if (!sys.has_filename()) sys = sys.parent_path();
    std::filesystem::path root = sys.parent_path();
    if (ec || sys.filename() != host.sys.filename() ||
        !same_path(std::filesystem::absolute(roots.proc, ec), root / "proc") || ec)
      return fail(
          "hwloc reads <root>/sys and <root>/proc together, so the sys root must be named sys and the "
          "proc root (" +
              roots.proc.string() + ") must sit next to it",
          roots.sys.string());
    if (!std::filesystem::is_directory(sys / "devices/system/cpu", ec))
      return fail("no CPU topology to read (devices/system/cpu is missing)", roots.sys.string());
    fsroot.emplace("HWLOC_FSROOT", root.string());
    components.emplace("HWLOC_COMPONENTS", "linux,stop");
  }
  auto topo = new_hwloc_topology();
  if (!topo) return std::unexpected(topo.error());
  // keel places workloads on the whole host, not only inside its own cpuset.
  if (hwloc_topology_set_flags(topo->get(), HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED) != 0)
    return fail("hwloc_topology_set_flags failed", "", errno);
  if (hwloc_topology_load(topo->get()) != 0)
    return fail("hwloc could not read the host topology", is_host ? "" : roots.sys.string(), errno);
  return from_hwloc(topo->get());
}

namespace {

// hwloc explains a bad synthetic string only on stderr, so keel checks the levels itself first; this
// also bounds what hwloc is asked to build, as its time grows with the PUs times the objects under
// one parent ("pack:1 core:8192 pu:1" took 14 s, "pack:8192 pu:1" 280 s) and an explicit index
// allocates bitmaps up to it (indexes=4294967295 took 5.7 GB): at most kMaxSyntheticChars characters,
// kMaxSyntheticLevels levels, kMaxSyntheticArity objects per parent, CpuSet::kMaxCpu PUs, and indexes
// below kMaxCpu. The slowest shapes allowed (8192 PUs: "pack:32 core:256 pu:1", and 8192 packages,
// NUMA nodes and L3 domains in "group:32 pack:256 numa:1 l3:1 pu:1") take 2-3 s and 50-155 MB in
// `keel topology` here; the shipped 256-PU example 10 ms and 5 MB.
constexpr size_t kMaxSyntheticChars = 65536, kMaxSyntheticLevels = 16, kMaxSyntheticArity = 256;

// Levels are separated by spaces (as hwloc does) except inside parentheses.
std::vector<std::string> synthetic_levels(std::string_view spec, std::string& problem) {
  std::vector<std::string> levels;
  std::string cur;
  int depth = 0;
  for (char c : spec) {
    if (c == '(') ++depth;
    if (c == ')' && --depth < 0) break;
    if (depth == 0 && c == ' ') {
      if (!cur.empty()) levels.push_back(std::move(cur));
      cur.clear();
      continue;
    }
    cur += c;
  }
  if (!cur.empty()) levels.push_back(std::move(cur));
  if (depth != 0) problem = "unbalanced parentheses";
  return levels;
}

// A level's count as hwloc reads it (strtoul with base 0: "12", "0x0c", "014").
std::optional<std::string> parse_count(std::string_view text, uint64_t& count) {
  int base = 10;
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    base = 16;
    text.remove_prefix(2);
  } else if (text.size() > 1 && text[0] == '0') {
    base = 8;
    text.remove_prefix(1);
  }
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), count, base);
  if (text.empty() || ec == std::errc::invalid_argument || end != text.data() + text.size())
    return "does not give a number of objects";
  // hwloc's own limit per level is UINT_MAX.
  if (ec == std::errc::result_out_of_range || count > std::numeric_limits<unsigned>::max())
    return "count too large (at most " + std::to_string(std::numeric_limits<unsigned>::max()) + ")";
  if (count == 0) return "asks for 0 objects";
  return std::nullopt;
}

// The number of PUs `spec` describes (the product of its CPU-side level counts; memory levels in
// brackets and root attributes in leading parentheses add none), or what is wrong with it.
// nullopt in the value: more than 2^64 PUs.
Result<std::optional<uint64_t>> synthetic_pu_count(std::string_view spec) {
  std::string problem;
  auto levels = synthetic_levels(spec, problem);
  if (!problem.empty()) return fail(problem);
  if (levels.size() > kMaxSyntheticLevels)
    return fail(std::to_string(levels.size()) + " levels; keel reads at most " +
                std::to_string(kMaxSyntheticLevels));
  std::optional<uint64_t> pus = 1;
  std::string last_type, too_wide;
  bool any_level = false;
  for (size_t i = 0; i < levels.size(); ++i) {
    const std::string& level = levels[i];
    if (level.starts_with('(')) {
      if (i == 0 && spec.starts_with('(')) continue;  // attributes of the root (machine)
      return fail("'" + level + "' is not a level (attributes follow a level's count without a space)");
    }
    bool memory = level.starts_with('[');
    std::string head = level.substr(memory ? 1 : 0, level.find_first_of("()]") - (memory ? 1 : 0));
    size_t colon = head.find(':');
    std::string type = colon == std::string::npos ? (memory ? head : "") : head.substr(0, colon);
    std::string count_text = colon == std::string::npos ? (memory ? "1" : head) : head.substr(colon + 1);
    // hwloc also reads bare counts ("2 2 4"), but rejects them mixed with typed levels, and its
    // error path leaks where a memory level was built: keel takes typed levels only.
    if (type.empty()) return fail("'" + level + "' has no type: write TYPE:COUNT (pack:2, core:4, pu:2)");
    hwloc_obj_type_t parsed;
    if (hwloc_type_sscanf(type.c_str(), &parsed, nullptr, 0) != 0)
      return fail("unknown level type '" + type + "' in '" + level +
                  "' (known: pack, numa, l3, l2, core, pu, group, ...)");
    uint64_t count = 0;
    if (auto bad = parse_count(count_text, count)) return fail("'" + level + "' " + *bad);
    if (memory) continue;  // memory children hang off the level above: no more PUs
    if (count > kMaxSyntheticArity && too_wide.empty())
      too_wide = "'" + level + "' has more than " + std::to_string(kMaxSyntheticArity) +
                 " objects under one parent (add a level between)";
    any_level = true;
    last_type = type;
    uint64_t product = 0;
    if (pus && !__builtin_mul_overflow(*pus, count, &product))
      pus = product;
    else
      pus.reset();
  }
  if (!any_level) return fail("no levels of objects (the last level must be pu)");
  // Said after the PU count: a spec too large in both is too large first.
  if (pus && *pus <= CpuSet::kMaxCpu && !too_wide.empty()) return fail(too_wide);
  if (!last_type.empty()) {
    hwloc_obj_type_t parsed;
    if (hwloc_type_sscanf(last_type.c_str(), &parsed, nullptr, 0) == 0 && parsed != HWLOC_OBJ_PU)
      return fail("the last level must be pu, not '" + last_type + "'");
  }
  return pus;
}

// An explicit list of indexes ("indexes=0,64,1,65") names OS indexes hwloc allocates bitmaps up to;
// an interleaving ("indexes=2*128:1*2", "indexes=pu:core") makes a permutation, always in range.
std::optional<std::string> bad_index(std::string_view spec) {
  for (size_t at = spec.find("indexes="); at != std::string_view::npos; at = spec.find("indexes=", at)) {
    at += 8;
    const std::string_view list = spec.substr(at, spec.find_first_of(" )", at) - at);
    if (list.find_first_not_of("0123456789,") != std::string_view::npos) continue;
    for (size_t i = 0; i < list.size();) {
      const size_t end = std::min(list.find(',', i), list.size());
      const std::string_view number = list.substr(i, end - i);
      uint64_t v = 0;
      auto [p, ec] = std::from_chars(number.data(), number.data() + number.size(), v);
      if (ec == std::errc::result_out_of_range || (ec == std::errc() && v >= CpuSet::kMaxCpu))
        return "index " + std::string(number) + " in 'indexes=" + std::string(list.substr(0, 64)) +
               (list.size() > 64 ? "..." : "") + "' is beyond the largest CPU number " +
               std::to_string(CpuSet::kMaxCpu - 1);
      i = end + 1;
    }
  }
  return std::nullopt;
}

}  // namespace

Result<Topology> Topology::synthetic(std::string_view spec) {
  if (trim(spec).empty())
    return fail("empty synthetic topology; expected levels like \"pack:2 numa:2 l3:1 core:32 pu:2\"");
  if (spec.size() > kMaxSyntheticChars)
    return fail("synthetic topology of " + std::to_string(spec.size()) + " characters; keel reads at most " +
                std::to_string(kMaxSyntheticChars));
  std::string text(spec);
  auto pus = synthetic_pu_count(text);
  if (!pus) return fail("bad synthetic topology \"" + text + "\": " + pus.error().what);
  if (!*pus || **pus > CpuSet::kMaxCpu)
    return fail("synthetic topology \"" + text + "\" has " +
                (*pus ? std::to_string(**pus) : std::string("more than 2^64")) +
                " PUs; keel supports at most " + std::to_string(CpuSet::kMaxCpu));
  if (auto bad = bad_index(text)) return fail("bad synthetic topology \"" + text + "\": " + *bad);
  auto topo = new_hwloc_topology();
  if (!topo) return std::unexpected(topo.error());
  if (hwloc_topology_set_synthetic(topo->get(), text.c_str()) != 0) {
    int err = errno;
    return fail("bad synthetic topology \"" + text +
                    "\": hwloc rejected it (unknown attribute or bad attribute value?)",
                "", err);
  }
  if (hwloc_topology_load(topo->get()) != 0)
    return fail("hwloc could not build synthetic topology \"" + text + "\"", "", errno);
  return from_hwloc(topo->get());
}

// ---------------------------------------------------------------------------------------------
// Printing

namespace {

std::string bytes_text(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  unsigned u = 0;
  uint64_t scale = 1;
  while (u + 1 < std::size(kUnits) && bytes >= scale * 1024) {
    scale *= 1024;
    ++u;
  }
  if (bytes % scale == 0) return std::to_string(bytes / scale) + " " + kUnits[u];
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", static_cast<double>(bytes) / static_cast<double>(scale),
                kUnits[u]);
  return buf;
}

std::string id_list(const std::vector<unsigned>& ids) {
  CpuSet s;  // same compact "0-3,8" form as CPU lists
  for (unsigned id : ids) s.add(id);
  return s.to_list();
}

std::string smt_text(const Topology& topo) {
  unsigned lo = topo.min_smt_width(), hi = topo.smt_width();
  return lo == hi ? "SMT " + std::to_string(hi) : "SMT " + std::to_string(lo) + "-" + std::to_string(hi);
}

std::string summary_line(const Topology& topo) {
  return count_of(static_cast<unsigned>(topo.pus().size()), "PU", "PUs") + ", " +
         count_of(static_cast<unsigned>(topo.cores().size()), "core", "cores") + ", " +
         count_of(static_cast<unsigned>(topo.numa_nodes().size()), "NUMA node", "NUMA nodes") + ", " +
         count_of(static_cast<unsigned>(topo.l3_domains().size()), "L3 domain", "L3 domains") + ", " +
         count_of(static_cast<unsigned>(topo.packages().size()), "package", "packages") + ", " +
         smt_text(topo);
}

std::string sibling_group(const CpuSet& cpus) {
  std::string s = "(";
  for (unsigned c : cpus.cpus()) {
    if (s.size() > 1) s += ',';
    s += std::to_string(c);  // appended, not "lit" + string: g++ 12 -O3 warns -Wrestrict on that
  }
  return s + ")";
}

// "32 cores 0-31, siblings (0,128) (1,129) ... (31,159)"; long lists keep their ends only.
// `smt`: topo.smt_width(), counted once by the caller (it is a pass over every core).
std::string cores_line(const Topology& topo, unsigned smt, const std::vector<unsigned>& core_ids) {
  constexpr size_t kHead = 8, kTail = 2;
  std::string line = count_of(static_cast<unsigned>(core_ids.size()), "core ", "cores ") + id_list(core_ids);
  if (smt <= 1) return line + ", 1 PU each";
  line += ", siblings";
  for (size_t i = 0; i < core_ids.size(); ++i) {
    bool elide = core_ids.size() > kHead + kTail + 2 && i >= kHead && i < core_ids.size() - kTail;
    if (elide) {
      if (i == kHead) line += " ...";
      continue;
    }
    line += ' ';
    line += sibling_group(topo.cores()[core_ids[i]].cpus);
  }
  return line;
}

// "(shared with NUMA node 1 and package 1)": who else a domain's CPUs belong to, or "".
std::string shared_note(const CpuSet& nodes, const CpuSet& packages) {
  std::vector<std::string> parts;
  if (!nodes.empty())
    parts.push_back(std::string(nodes.count() == 1 ? "NUMA node " : "NUMA nodes ") + nodes.to_list());
  if (!packages.empty())
    parts.push_back(std::string(packages.count() == 1 ? "package " : "packages ") + packages.to_list());
  if (parts.empty()) return "";
  return " (shared with " + parts[0] + (parts.size() > 1 ? " and " + parts[1] : "") + ")";
}

// Which packages, NUMA nodes and L3 domains share PUs (ids in CpuSets, for their compact lists),
// from one pass over the PUs: thousands of domains are printed without comparing every pair.
struct Sharing {
  explicit Sharing(const Topology& topo)
      : pkg_nodes(topo.packages().size()),
        node_pkgs(topo.numa_nodes().size()),
        l3_nodes(topo.l3_domains().size()),
        l3_pkgs(topo.l3_domains().size()) {
    for (const Pu& p : topo.pus()) {
      pkg_nodes[p.package].add(p.numa);
      node_pkgs[p.numa].add(p.package);
      l3_nodes[p.l3].add(p.numa);
      l3_pkgs[p.l3].add(p.package);
      pair_l3s[{p.package, p.numa}].add(p.l3);
    }
  }
  static CpuSet others(CpuSet ids, unsigned self) {
    ids.remove(self);
    return ids;
  }
  std::vector<CpuSet> pkg_nodes, node_pkgs, l3_nodes, l3_pkgs;
  std::map<std::pair<unsigned, unsigned>, CpuSet> pair_l3s;  // (package, node) -> L3 domains
};

// Within one package: a NUMA node (or L3 domain) covering several packages, as when hwloc reports a
// single machine-wide node, is shown under each package with that package's part only.
void append_l3(std::string& out, const Topology& topo, const Sharing& sh, unsigned smt, const Package& pkg,
               const NumaNode& node, const L3Domain& l3) {
  CpuSet here = l3.cpus & node.cpus & pkg.cpus;
  out += "    L3 domain " + std::to_string(l3.id);
  if (l3.size_bytes != 0) out += " (" + bytes_text(l3.size_bytes) + ")";
  out += ": CPUs " + here.to_list();
  // e.g. Intel sub-NUMA clustering: one L3 over several nodes
  out +=
      shared_note(Sharing::others(sh.l3_nodes[l3.id], node.id), Sharing::others(sh.l3_pkgs[l3.id], pkg.id)) +
      "\n";
  std::vector<unsigned> core_ids;
  for (unsigned c : l3.cores)
    if (topo.cores()[c].numa == node.id && topo.cores()[c].package == pkg.id) core_ids.push_back(c);
  out += "      " + cores_line(topo, smt, core_ids) + "\n";
}

void append_node(std::string& out, const Topology& topo, const Sharing& sh, unsigned smt, const Package& pkg,
                 const NumaNode& node) {
  CpuSet here = node.cpus & pkg.cpus;
  out += "  NUMA node " + std::to_string(node.id);
  if (node.os_index != node.id) out += " (kernel node " + std::to_string(node.os_index) + ")";
  out += ": CPUs " + here.to_list() + shared_note({}, Sharing::others(sh.node_pkgs[node.id], pkg.id));
  if (node.memory_bytes != 0) out += ", " + bytes_text(node.memory_bytes) + " memory";
  out += "\n";
  for (unsigned l3 : sh.pair_l3s.at({pkg.id, node.id}).cpus())
    append_l3(out, topo, sh, smt, pkg, node, topo.l3_domains()[l3]);
}

}  // namespace

std::string format_text(const Topology& topo) {
  std::string out = summary_line(topo) + "\n";
  const unsigned smt = topo.smt_width();
  const Sharing sh(topo);
  for (const Package& pkg : topo.packages()) {
    out += "package " + std::to_string(pkg.id) + ": CPUs " + pkg.cpus.to_list() + "\n";
    for (unsigned node : sh.pkg_nodes[pkg.id].cpus())
      append_node(out, topo, sh, smt, pkg, topo.numa_nodes()[node]);
  }
  return out;
}

namespace {

template <class Domain, class Extra>
Json domains(const std::vector<Domain>& list, Extra extra) {
  Json out = Json::array();
  for (const Domain& d : list) {
    Json o = {{"id", d.id}, {"cpus", d.cpus.to_list()}};
    extra(o, d);
    o["cores"] = d.cores;
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace

std::string format_json(const Topology& topo) {
  Json j;
  j["summary"] = {{"pus", topo.pus().size()},
                  {"cores", topo.cores().size()},
                  {"numa_nodes", topo.numa_nodes().size()},
                  {"l3_domains", topo.l3_domains().size()},
                  {"packages", topo.packages().size()},
                  {"smt", topo.smt_width()}};
  j["online"] = topo.online().to_list();
  j["packages"] = domains(topo.packages(), [](Json&, const Package&) {});
  j["numa_nodes"] = domains(topo.numa_nodes(), [](Json& o, const NumaNode& n) {
    o["os_index"] = n.os_index;
    o["memory_bytes"] = static_cast<unsigned long long>(n.memory_bytes);
  });
  j["l3_domains"] = domains(topo.l3_domains(), [](Json& o, const L3Domain& l3) {
    o["size_bytes"] = static_cast<unsigned long long>(l3.size_bytes);
  });
  Json cores = Json::array();
  for (const Core& c : topo.cores())
    cores.push_back(
        {{"id", c.id}, {"cpus", c.cpus.to_list()}, {"l3", c.l3}, {"numa", c.numa}, {"package", c.package}});
  j["cores"] = std::move(cores);
  Json pus = Json::array();
  for (const Pu& p : topo.pus())
    pus.push_back({{"os", p.os}, {"core", p.core}, {"l3", p.l3}, {"numa", p.numa}, {"package", p.package}});
  j["pus"] = std::move(pus);
  return json_text(j);
}

CpuSet thread_affinity(const CpuSet& online) {
  CpuSet out;
  cpu_set_t now;
  CPU_ZERO(&now);
  if (::sched_getaffinity(0, sizeof now, &now) == 0)
    for (unsigned c : online.cpus())
      if (c < CPU_SETSIZE && CPU_ISSET(c, &now)) out.add(c);
  return out;
}

bool set_thread_affinity(const CpuSet& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (unsigned c : cpus.cpus())
    if (c < CPU_SETSIZE) CPU_SET(c, &set);
  return ::sched_setaffinity(0, sizeof set, &set) == 0;
}

}  // namespace keel
