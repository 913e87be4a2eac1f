// The config (config/read.cpp, validate.cpp, spec.cpp): arbitrary text loaded against a plausible
// host (2 NUMA nodes of 16 cores with 2 SMT threads, an 11-way L3 with resctrl's MB). A rejected
// text names its file in every diagnostic; an accepted one loads on a host keel knows nothing about
// too (host facts only add checks), compiles with every bound inside what the host and the kernel
// allow, and loads to the same result again.
#include <string>

#include "config/config.h"
#include "config/spec.h"
#include "fuzz/check.h"
#include "host/cgroup_files.h"

namespace {

using namespace keel;
using namespace keel::config;

HostFacts plausible_host() {
  constexpr unsigned kNodes = 2, kCores = 16, kSmt = 2, kPerNode = kCores * kSmt;
  HostFacts f;
  f.cpus = CpuSet::range(0, kNodes * kPerNode - 1);
  f.numa_nodes = kNodes;
  for (unsigned n = 0; n < kNodes; ++n)
    f.numa_cpus.push_back(CpuSet::range(n * kPerNode, (n + 1) * kPerNode - 1));
  for (unsigned k = 0; k < kNodes * kCores; ++k)
    f.cores.push_back(CpuSet::range(k * kSmt, (k + 1) * kSmt - 1));
  f.l3_ways = 11;
  f.min_cbm_bits = 1;
  f.mba_min = 10;
  return f;
}

const HostFacts kHost = plausible_host();

void check_spec(const Config& cfg, const Spec& spec) {
  const CpuSet& online = *kHost.cpus;
  FUZZ_CHECK(spec.workloads.size() == cfg.workloads.size());
  FUZZ_CHECK(spec.period >= std::chrono::milliseconds(10) && spec.period <= std::chrono::hours(1));
  FUZZ_CHECK(spec.online == online);
  FUZZ_CHECK(spec.reserved.subset_of(online) && !online.subset_of(spec.reserved));
  for (size_t i = 0; i < spec.workloads.size(); ++i) {
    const WorkloadSpec& w = spec.workloads[i];
    const Workload& from = cfg.workloads[i];
    FUZZ_CHECK(w.name == from.name && !w.name.empty());
    FUZZ_CHECK(spec.find(w.name) == &w);  // names are unique
    FUZZ_CHECK(w.critical == (from.klass == WorkloadClass::critical));
    FUZZ_CHECK(w.cpus_min >= 1 && w.cpus_min <= w.cpus_max && w.cpus_max <= online.count());
    if (from.bounds.cpus) {  // nothing wrapped on the way to unsigned
      FUZZ_CHECK(w.cpus_max == static_cast<unsigned long long>(from.bounds.cpus->max));
      FUZZ_CHECK(w.cpus_min == static_cast<unsigned long long>(from.bounds.cpus->min));
    }
    FUZZ_CHECK(!w.pool.empty() && w.pool.subset_of(online));
    FUZZ_CHECK(w.has_pool == from.bounds.cpu_pool.has_value());
    FUZZ_CHECK(kSharesMin <= w.shares_min && w.shares_min <= w.shares_max && w.shares_max <= kSharesMax);
    if (w.l3_ways)
      FUZZ_CHECK(w.l3_ways->min >= 1 && w.l3_ways->min <= w.l3_ways->max && w.l3_ways->max <= 11);
    if (w.mba_percent)
      FUZZ_CHECK(w.mba_percent->min >= 10 && w.mba_percent->min <= w.mba_percent->max &&
                 w.mba_percent->max <= 100);
    if (w.slo_p99_us) FUZZ_CHECK(*w.slo_p99_us > 0);
    if (w.slo_migrations_per_s) FUZZ_CHECK(*w.slo_migrations_per_s > 0);
    if (w.slo_mpki) FUZZ_CHECK(*w.slo_mpki > 0);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = keel::fuzz::as_text(data, size);
  auto loaded = load_string(text, "fuzz.toml", kHost);
  if (!loaded) {
    FUZZ_CHECK(!loaded.error().empty());
    for (const Diagnostic& d : loaded.error()) {
      FUZZ_CHECK(d.file == "fuzz.toml" && !d.message.empty() && d.pos.line >= 0 && d.pos.col >= 0);
      FUZZ_CHECK(d.str().starts_with("fuzz.toml:"));
    }
    return 0;
  }
  // Facts only add checks: without them the same text loads too.
  auto unknown_host = load_string(text, "fuzz.toml", HostFacts{});
  FUZZ_CHECK(unknown_host.has_value());
  FUZZ_CHECK(unknown_host->workloads.size() == loaded->workloads.size());
  // Loading is a function of the text.
  auto again = load_string(text, "fuzz.toml", kHost);
  FUZZ_CHECK(again && again->workloads.size() == loaded->workloads.size() &&
             again->warnings.size() == loaded->warnings.size());
  for (const Diagnostic& d : loaded->warnings) FUZZ_CHECK(d.str().starts_with("fuzz.toml:"));
  check_spec(*loaded, compile(*loaded, *kHost.cpus));
  return 0;
}
