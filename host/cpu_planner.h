// Which CPUs a workload should get: a pure function of the topology and who holds what.
// Critical workloads get whole cores from one NUMA node and one L3 domain when they fit, never
// reserved CPUs, and never a core shared with another workload.
#pragma once

#include <string>
#include <vector>

#include "host/cpuset.h"
#include "host/error.h"
#include "host/topology.h"

namespace keel {

enum class NumaPolicy { single, any };

struct CpuRequest {
  unsigned cpus = 0;      // N, at least 1
  unsigned max_cpus = 0;  // upper bound on what the workload may get (0 = none); see Placement::held_idle
  NumaPolicy numa = NumaPolicy::single;
  bool critical = true;

  CpuSet pool;            // the workload's cpu_pool; empty = the whole host
  CpuSet reserved;        // never handed out (system, IRQs)
  CpuSet other_critical;  // held by other critical workloads, including the siblings they hold idle
  CpuSet current;         // what this workload holds now; kept where possible so re-plans are stable
};

struct Placement {
  CpuSet cpus;                       // what the workload gets
  CpuSet held_idle;                  // siblings of `cpus` that nobody may use (critical, capped by max_cpus)
  std::vector<unsigned> numa_nodes;  // logical ids, ascending
  std::vector<unsigned> l3_domains;  // logical ids, ascending
  std::string why;                   // e.g. "4 CPUs as 2 whole cores of NUMA node 1, L3 domain 1"
};

// Places `req.cpus` CPUs, in this order of preference: one L3 domain of one NUMA node, then one NUMA
// node across its L3 domains, then (numa = any only) the fewest NUMA nodes. Within each step: the
// place holding most of `current`, then the smallest place that fits (less fragmentation), then the
// lowest id.
//
// Critical: only cores whose every PU is online, in the pool, not reserved and not held by another
// critical workload; the request rounds up to whole cores. When `max_cpus` is below that, the
// workload gets max_cpus and the remaining sibling(s) are returned as held_idle.
// Best-effort: exactly N CPUs, never on a core that a critical workload holds part of.
Result<Placement> plan_cpus(const Topology& topo, const CpuRequest& req);

}  // namespace keel
