#include "host/cpu_planner.h"

#include <algorithm>
#include <functional>
#include <map>
#include <utility>

#include "host/fileio.h"

namespace keel {

namespace {

// The part of one core the requester may use.
struct Candidate {
  unsigned core = 0;
  CpuSet cpus;
  bool current = false;  // the workload holds some of it now
};

// Usable cores in one place: a cell (one L3 domain of one NUMA node) or a NUMA node made of cells.
struct Place {
  unsigned numa = 0;
  std::vector<Candidate> cores;     // cells: by core id
  std::vector<const Place*> cells;  // nodes: their cells, by L3 id
  unsigned capacity = 0;            // usable CPUs
  unsigned overlap = 0;             // usable CPUs the workload holds now
  CpuSet cpus;                      // all usable CPUs
  unsigned whole_cores = 0;
};

std::string id_list(const std::vector<unsigned>& ids) {
  CpuSet s;  // same compact "0-3,8" form as CPU lists
  for (unsigned id : ids) s.add(id);
  return s.to_list();
}

CpuSet pool_of(const Topology& topo, const CpuRequest& req) {
  return req.pool.empty() ? topo.online() : req.pool & topo.online();
}

CpuSet usable_part(const Core& core, const CpuSet& allowed, const CpuRequest& req) {
  if (req.critical) return core.cpus.subset_of(allowed) ? core.cpus : CpuSet{};
  // Best-effort may share a core with the system or other best-effort work, never with a critical one.
  return core.cpus.intersects(req.other_critical) ? CpuSet{} : core.cpus & allowed;
}

void add_to(Place& place, Candidate c, const CpuSet& current) {
  place.capacity += c.cpus.count();
  place.overlap += (c.cpus & current).count();
  place.cpus |= c.cpus;
  place.whole_cores += 1;
  place.cores.push_back(std::move(c));
}

// Usable cores grouped into cells, ordered by (NUMA node, L3 domain).
std::vector<Place> make_cells(const Topology& topo, const CpuRequest& req) {
  CpuSet allowed = pool_of(topo, req) - req.reserved - req.other_critical;
  std::map<std::pair<unsigned, unsigned>, Place> by_cell;
  for (const Core& core : topo.cores()) {
    CpuSet part = usable_part(core, allowed, req);
    if (part.empty()) continue;
    Place& cell = by_cell[{core.numa, core.l3}];
    cell.numa = core.numa;
    bool current = part.intersects(req.current);
    add_to(cell, Candidate{core.id, std::move(part), current}, req.current);
  }
  std::vector<Place> cells;
  for (auto& [key, cell] : by_cell) cells.push_back(std::move(cell));
  return cells;
}

// NUMA nodes as places made of their cells, ordered by node id. `cells` must outlive the result.
std::vector<Place> make_nodes(const std::vector<Place>& cells) {
  std::vector<Place> nodes;
  for (const Place& cell : cells) {
    if (nodes.empty() || nodes.back().numa != cell.numa) {
      nodes.emplace_back();
      nodes.back().numa = cell.numa;
    }
    Place& node = nodes.back();
    node.cells.push_back(&cell);
    node.capacity += cell.capacity;
    node.overlap += cell.overlap;
    node.cpus |= cell.cpus;
    node.whole_cores += cell.whole_cores;
  }
  return nodes;
}

std::vector<const Place*> pointers(const std::vector<Place>& places) {
  std::vector<const Place*> out;
  for (const Place& p : places) out.push_back(&p);
  return out;
}

// Sum of the `k` largest capacities among `places`, leaving out `except`.
unsigned largest_sum(const std::vector<const Place*>& places, size_t k, const Place* except) {
  std::vector<unsigned> caps;
  for (const Place* p : places)
    if (p != except) caps.push_back(p->capacity);
  std::sort(caps.begin(), caps.end(), std::greater<>());
  unsigned sum = 0;
  for (size_t i = 0; i < k && i < caps.size(); ++i) sum += caps[i];
  return sum;
}

// How many places it takes at least to hold `need` CPUs; 0 when all of them together are too small.
size_t fewest_places(const std::vector<const Place*>& places, unsigned need) {
  for (size_t k = 1; k <= places.size(); ++k)
    if (largest_sum(places, k, nullptr) >= need) return k;
  return 0;
}

// The fewest places that hold `need` CPUs together, picked one at a time among those that keep the
// rest coverable: most current CPUs, then the smallest (best fit: big places stay whole), then the
// first. Empty when all of them together are too small.
std::vector<const Place*> choose_places(std::vector<const Place*> places, unsigned need) {
  size_t picks = fewest_places(places, need);
  std::vector<const Place*> chosen;
  while (chosen.size() < picks) {
    size_t picks_after = picks - chosen.size() - 1;
    auto best = places.end();
    for (auto it = places.begin(); it != places.end(); ++it) {
      const Place* p = *it;
      unsigned rest = need > p->capacity ? need - p->capacity : 0;
      if (largest_sum(places, picks_after, p) < rest) continue;
      if (best == places.end() || p->overlap > (*best)->overlap ||
          (p->overlap == (*best)->overlap && p->capacity < (*best)->capacity))
        best = it;
    }
    chosen.push_back(*best);
    need = need > (*best)->capacity ? need - (*best)->capacity : 0;
    places.erase(best);
  }
  return chosen;
}

// The one place that holds `need` CPUs on its own (see choose_places), or nullptr.
const Place* one_place(const std::vector<Place>& places, unsigned need) {
  auto all = pointers(places);
  return fewest_places(all, need) == 1 ? choose_places(all, need).front() : nullptr;
}

// All cores of a NUMA node: first those of the cells chosen for `need` CPUs, then the others (so
// that current CPUs in the other cells can still be kept).
std::vector<Candidate> node_cores(const Place& node, unsigned need) {
  std::vector<const Place*> order = choose_places(node.cells, need);
  for (const Place* cell : node.cells)
    if (std::find(order.begin(), order.end(), cell) == order.end()) order.push_back(cell);
  std::vector<Candidate> out;
  for (const Place* cell : order) out.insert(out.end(), cell->cores.begin(), cell->cores.end());
  return out;
}

// Cores of several NUMA nodes: the nodes picked first are used whole, the last one for the rest.
std::vector<Candidate> nodes_cores(const std::vector<const Place*>& nodes, unsigned need) {
  std::vector<Candidate> out;
  for (const Place* node : nodes) {
    unsigned part = std::min(need, node->capacity);
    auto cores = node_cores(*node, part);
    out.insert(out.end(), cores.begin(), cores.end());
    need -= part;
  }
  return out;
}

// ----- explaining -----

unsigned cores_needed(const Topology& topo, unsigned cpus) {
  unsigned width = std::max(1u, topo.smt_width());
  return (cpus + width - 1) / width;
}

// "3 whole cores (6 CPUs)", "2 whole cores for 3 CPUs", or for best-effort "6 CPUs".
std::string need_text(const Topology& topo, const CpuRequest& req) {
  if (!req.critical) return count_of(req.cpus, "CPU", "CPUs");
  unsigned k = cores_needed(topo, req.cpus);
  std::string cores = count_of(k, "whole core", "whole cores");
  if (k * std::max(1u, topo.smt_width()) == req.cpus)
    return cores + " (" + count_of(req.cpus, "CPU", "CPUs") + ")";
  return cores + " for " + count_of(req.cpus, "CPU", "CPUs");
}

// What the request counts in: "3 whole cores" (critical) or "6 CPUs" (best-effort).
std::string units_text(const Topology& topo, const CpuRequest& req) {
  return req.critical ? count_of(cores_needed(topo, req.cpus), "whole core", "whole cores")
                      : count_of(req.cpus, "CPU", "CPUs");
}

std::string free_text(const Place& p, const CpuRequest& req) {
  return req.critical ? count_of(p.whole_cores, "whole core", "whole cores")
                      : count_of(p.capacity, "CPU", "CPUs");
}

std::string blockers(const CpuRequest& req) {
  std::string s;
  if (!req.reserved.empty()) s += "; reserved: " + req.reserved.to_list();
  if (!req.other_critical.empty()) s += "; held by other critical workloads: " + req.other_critical.to_list();
  if (!req.pool.empty()) s += "; pool: " + req.pool.to_list();
  return s;
}

std::string no_node_error(const Topology& topo, const CpuRequest& req, const std::vector<Place>& nodes) {
  std::string s = "needs " + need_text(topo, req) + " in one NUMA node; the most any node has free is ";
  const Place* most = nullptr;
  for (const Place& n : nodes)
    if (most == nullptr || n.capacity > most->capacity) most = &n;
  if (most == nullptr)
    s += "0";
  else
    s += free_text(*most, req) + " (node " + std::to_string(most->numa) + ": CPUs " + most->cpus.to_list() +
         ")";
  return s + blockers(req);
}

std::string not_enough_error(const Topology& topo, const CpuRequest& req, const std::vector<Place>& nodes) {
  Place all;
  for (const Place& n : nodes) {
    all.capacity += n.capacity;
    all.whole_cores += n.whole_cores;
    all.cpus |= n.cpus;
  }
  std::string s = "needs " + need_text(topo, req) + "; only " + free_text(all, req) + " free in all";
  if (!all.cpus.empty()) s += " (CPUs " + all.cpus.to_list() + ")";
  return s + blockers(req);
}

std::string scope_text(const std::vector<unsigned>& nodes, const std::vector<unsigned>& l3s) {
  std::string s = nodes.size() == 1 ? "NUMA node " : "NUMA nodes ";
  s += id_list(nodes);
  s += l3s.size() == 1 ? ", L3 domain " : ", L3 domains ";
  return s + id_list(l3s);
}

// `spread` says why the placement spans L3 domains or NUMA nodes, if it does.
std::string explain(const CpuRequest& req, const Placement& p, unsigned cores_taken,
                    const std::string& spread) {
  std::string scope = scope_text(p.numa_nodes, p.l3_domains) + spread;
  std::string got = count_of(p.cpus.count(), "CPU", "CPUs");
  if (!req.critical) return got + " on " + count_of(cores_taken, "core", "cores") + " of " + scope;
  std::string why = got + (p.held_idle.empty() ? " as " : " on ") +
                    count_of(cores_taken, "whole core", "whole cores") + " of " + scope;
  if (!p.held_idle.empty())
    why += "; " + std::string(p.held_idle.count() == 1 ? "CPU " : "CPUs ") + p.held_idle.to_list() +
           " held idle so no other workload shares " + (cores_taken == 1 ? "the core" : "those cores") +
           " (max " + std::to_string(req.max_cpus) + ")";
  else if (p.cpus.count() > req.cpus)
    why += " (" + std::to_string(req.cpus) + " requested, rounded up to whole cores)";
  return why;
}

// The `n` CPUs a critical workload gives back from the whole cores it got: CPUs it does not hold now
// first, then from the last cores taken, highest numbers first.
CpuSet surplus(const std::vector<Candidate>& taken, unsigned n, const CpuSet& current) {
  std::vector<unsigned> order;
  for (auto it = taken.rbegin(); it != taken.rend(); ++it) {
    auto cpus = it->cpus.cpus();
    order.insert(order.end(), cpus.rbegin(), cpus.rend());
  }
  std::stable_partition(order.begin(), order.end(), [&](unsigned c) { return !current.contains(c); });
  CpuSet out;
  for (size_t i = 0; i < n && i < order.size(); ++i) out.add(order[i]);
  return out;
}

// Whole cores until N, current cores first; beyond max_cpus the rest is held idle.
std::vector<Candidate> take_whole_cores(const CpuRequest& req, const std::vector<Candidate>& order,
                                        Placement& p) {
  std::vector<Candidate> taken;
  for (const Candidate& c : order) {
    if (p.cpus.count() >= req.cpus) break;
    p.cpus |= c.cpus;
    taken.push_back(c);
  }
  unsigned keep = req.max_cpus == 0 ? p.cpus.count() : std::min(p.cpus.count(), req.max_cpus);
  p.held_idle = surplus(taken, p.cpus.count() - keep, req.current);
  p.cpus = p.cpus - p.held_idle;
  return taken;
}

// Exactly N CPUs, current ones first, then siblings together in core order.
std::vector<Candidate> take_cpus(const CpuRequest& req, const std::vector<Candidate>& order, Placement& p) {
  std::vector<unsigned> cpus;
  for (const Candidate& c : order)
    for (unsigned cpu : c.cpus.cpus()) cpus.push_back(cpu);
  std::stable_partition(cpus.begin(), cpus.end(), [&](unsigned c) { return req.current.contains(c); });
  for (size_t i = 0; i < req.cpus && i < cpus.size(); ++i) p.cpus.add(cpus[i]);
  std::vector<Candidate> taken;
  for (const Candidate& c : order)
    if (c.cpus.intersects(p.cpus)) taken.push_back(c);
  return taken;
}

Placement take(const Topology& topo, const CpuRequest& req, std::vector<Candidate> order,
               const std::string& spread) {
  std::stable_partition(order.begin(), order.end(), [](const Candidate& c) { return c.current; });
  Placement p;
  std::vector<Candidate> taken = req.critical ? take_whole_cores(req, order, p) : take_cpus(req, order, p);
  for (const Candidate& c : taken) {
    const Core& core = topo.cores()[c.core];
    p.numa_nodes.push_back(core.numa);
    p.l3_domains.push_back(core.l3);
  }
  for (auto* ids : {&p.numa_nodes, &p.l3_domains}) {
    std::sort(ids->begin(), ids->end());
    ids->erase(std::unique(ids->begin(), ids->end()), ids->end());
  }
  p.why = explain(req, p, static_cast<unsigned>(taken.size()), spread);
  if (unsigned kept = (p.cpus & req.current).count(); kept > 0)
    p.why += "; keeps " + std::to_string(kept) + " of its " +
             count_of(req.current.count(), "current CPU", "current CPUs");
  return p;
}

Result<void> check_request(const Topology& topo, const CpuRequest& req) {
  if (req.cpus == 0) return fail("a request for 0 CPUs; ask for at least 1");
  if (req.max_cpus != 0 && req.max_cpus < req.cpus)
    return fail("max_cpus " + std::to_string(req.max_cpus) + " is below the " + std::to_string(req.cpus) +
                " CPUs requested");
  unsigned in_pool = pool_of(topo, req).count();
  if (req.cpus > in_pool) {
    std::string where = req.pool.empty() ? "the host has" : "the pool " + req.pool.to_list() + " has";
    return fail("requests " + count_of(req.cpus, "CPU", "CPUs") + " but " + where + " only " +
                count_of(in_pool, "online CPU", "online CPUs"));
  }
  return {};
}

}  // namespace

Result<Placement> plan_cpus(const Topology& topo, const CpuRequest& req) {
  if (auto ok = check_request(topo, req); !ok) return std::unexpected(ok.error());
  const std::vector<Place> cells = make_cells(topo, req);
  const std::vector<Place> nodes = make_nodes(cells);
  std::string room = units_text(topo, req) + " free)";

  if (const Place* cell = one_place(cells, req.cpus)) return take(topo, req, cell->cores, "");
  if (const Place* node = one_place(nodes, req.cpus))
    return take(topo, req, node_cores(*node, req.cpus), " (no single L3 domain of the node has " + room);
  if (req.numa == NumaPolicy::single) return fail(no_node_error(topo, req, nodes));
  auto chosen = choose_places(pointers(nodes), req.cpus);
  if (chosen.empty()) return fail(not_enough_error(topo, req, nodes));
  return take(topo, req, nodes_cores(chosen, req.cpus), " (no single NUMA node has " + room);
}

}  // namespace keel
