// What the machine is made of, as keel plans with it: packages, NUMA nodes, L3 domains, cores, PUs.
// A plain copyable value: built from hwloc (the running host or a synthetic description) or written
// by hand from a list of PUs, as tests do.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "host/cpuset.h"
#include "host/error.h"
#include "host/sys_roots.h"

struct hwloc_topology;  // hwloc_topology_t without pulling hwloc.h into every user

namespace keel {

// One hardware thread. `os` is the kernel's CPU number; the other fields are logical indices
// (0..n-1) into Topology's lists.
struct Pu {
  unsigned os = 0;
  unsigned core = 0;
  unsigned l3 = 0;
  unsigned numa = 0;
  unsigned package = 0;
  bool operator==(const Pu&) const = default;
};

struct Core {
  unsigned id = 0;
  unsigned l3 = 0;
  unsigned numa = 0;
  unsigned package = 0;
  CpuSet cpus;  // the SMT siblings
};

struct L3Domain {
  unsigned id = 0;
  CpuSet cpus;
  uint64_t size_bytes = 0;  // 0 when unknown
  std::vector<unsigned> cores;
};

struct NumaNode {
  unsigned id = 0;
  unsigned os_index = 0;  // the kernel's node number (cpuset.mems, /sys/devices/system/node/nodeN)
  CpuSet cpus;
  uint64_t memory_bytes = 0;  // 0 when unknown
  std::vector<unsigned> cores;
};

struct Package {
  unsigned id = 0;
  CpuSet cpus;
  std::vector<unsigned> cores;
};

class Topology {
 public:
  // The running host through hwloc (online PUs, including those outside keel's own cpuset).
  // With roots other than the host's, hwloc's Linux backend reads the tree <root>/sys, <root>/proc
  // instead (roots.sys must be <root>/sys and roots.proc <root>/proc, as SysRoots::under gives);
  // this sets HWLOC_FSROOT and HWLOC_COMPONENTS during the load, so call it from one thread only.
  static Result<Topology> detect(const SysRoots& roots);
  // hwloc's synthetic description, e.g. "pack:2 numa:2 l3:1 core:32 pu:2". Refused before hwloc
  // builds it when it has more than CpuSet::kMaxCpu PUs, more than 256 objects under one parent,
  // more than 16 levels or 65536 characters, or an explicit index of kMaxCpu or more.
  static Result<Topology> synthetic(std::string_view spec);
  // Hand-written: every PU with its core, L3 domain, NUMA node and package. Logical ids of each kind
  // must be 0..n-1 without gaps, OS numbers unique, and a core's PUs must agree on where it sits.
  static Result<Topology> from_pus(std::vector<Pu> pus);

  const std::vector<Pu>& pus() const { return pus_; }  // ascending OS number
  const std::vector<Core>& cores() const { return cores_; }
  const std::vector<L3Domain>& l3_domains() const { return l3_; }
  const std::vector<NumaNode>& numa_nodes() const { return numa_; }
  const std::vector<Package>& packages() const { return packages_; }
  const CpuSet& online() const { return online_; }

  const Pu* find_pu(unsigned os) const;  // nullptr when the CPU is not online here
  CpuSet siblings(unsigned os) const;    // the PUs of os's core, itself included; empty if unknown
  unsigned smt_width() const;            // most PUs on one core
  unsigned min_smt_width() const;        // fewest PUs on one core (differs on hybrid CPUs)

 private:
  static Result<Topology> from_hwloc(hwloc_topology* topo);

  std::vector<Pu> pus_;
  std::vector<Core> cores_;
  std::vector<L3Domain> l3_;
  std::vector<NumaNode> numa_;
  std::vector<Package> packages_;
  CpuSet online_;
};

// `keel topology`: a summary line, then package > NUMA node > L3 domain with CPU lists and cores.
std::string format_text(const Topology& topo);
// `keel topology --json`: summary counts, every domain and every PU.
std::string format_json(const Topology& topo);

// The calling thread's CPUs (sched_getaffinity), among `online`.
CpuSet thread_affinity(const CpuSet& online);
// Moves the calling thread to `cpus`; false (errno set) when the kernel refuses.
bool set_thread_affinity(const CpuSet& cpus);

}  // namespace keel
