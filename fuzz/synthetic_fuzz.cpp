// hwloc synthetic specs (host/topology.h Topology::synthetic), what --synthetic and replay take: a
// spec is refused with a reason or makes a topology of at most CpuSet::kMaxCpu PUs whose views
// agree: PUs ascending and each found by its number, cores, L3 domains, NUMA nodes and packages each
// partitioning the online CPUs, a PU inside its core, node, domain and package, SMT widths in order.
#include <string>

#include "fuzz/check.h"
#include "host/topology.h"

namespace {

using namespace keel;

template <class Parts>
void partitions(const Parts& parts, const CpuSet& online) {
  CpuSet seen;
  unsigned n = 0;
  for (const auto& p : parts) {
    FUZZ_CHECK(!p.cpus.intersects(seen));
    seen |= p.cpus;
    FUZZ_CHECK(p.id == n++);
  }
  FUZZ_CHECK(seen == online);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto t = Topology::synthetic(keel::fuzz::as_text(data, size));
  if (!t) {
    FUZZ_CHECK(!t.error().what.empty());
    return 0;
  }
  const auto& pus = t->pus();
  FUZZ_CHECK(!pus.empty() && pus.size() <= CpuSet::kMaxCpu);
  FUZZ_CHECK(t->online().count() == pus.size());
  for (size_t i = 0; i < pus.size(); ++i) {
    const Pu& p = pus[i];
    FUZZ_CHECK(i == 0 || pus[i - 1].os < p.os);
    FUZZ_CHECK(t->find_pu(p.os) == &p);
    FUZZ_CHECK(p.core < t->cores().size() && t->cores()[p.core].cpus.contains(p.os));
    FUZZ_CHECK(p.l3 < t->l3_domains().size() && t->l3_domains()[p.l3].cpus.contains(p.os));
    FUZZ_CHECK(p.numa < t->numa_nodes().size() && t->numa_nodes()[p.numa].cpus.contains(p.os));
    FUZZ_CHECK(p.package < t->packages().size() && t->packages()[p.package].cpus.contains(p.os));
    FUZZ_CHECK(t->siblings(p.os) == t->cores()[p.core].cpus);
  }
  partitions(t->cores(), t->online());
  partitions(t->l3_domains(), t->online());
  partitions(t->numa_nodes(), t->online());
  partitions(t->packages(), t->online());
  FUZZ_CHECK(t->min_smt_width() >= 1 && t->min_smt_width() <= t->smt_width());
  return 0;
}
