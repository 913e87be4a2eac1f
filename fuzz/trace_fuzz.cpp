// Replay trace lines (controller/trace.h): a line that parses prints back (to_json_line) as one line
// that parses to the same snapshot, every number exact, and prints again to the same text.
#include <string>

#include "controller/trace.h"
#include "fuzz/check.h"

namespace {

using namespace keel::ctl;

bool same(const WorkloadSignals& a, const WorkloadSignals& b) {
  return a.instance == b.instance && a.workload == b.workload && a.critical == b.critical &&
         a.cgroups == b.cgroups && a.fresh == b.fresh && a.rq_waits == b.rq_waits &&
         a.rq_p50_us == b.rq_p50_us && a.rq_p99_us == b.rq_p99_us && a.rq_wait_s_per_s == b.rq_wait_s_per_s &&
         a.migrations_per_s == b.migrations_per_s && a.cross_llc_per_s == b.cross_llc_per_s &&
         a.cross_numa_per_s == b.cross_numa_per_s && a.cache_misses_per_s == b.cache_misses_per_s &&
         a.mpki == b.mpki && a.cpu_usage == b.cpu_usage && a.throttled_per_s == b.throttled_per_s &&
         a.cpus == b.cpus && a.shares == b.shares;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto s = parse_json_line(keel::fuzz::as_text(data, size));
  if (!s) {
    FUZZ_CHECK(!s.error().what.empty());
    return 0;
  }
  const std::string line = to_json_line(*s);
  FUZZ_CHECK(line.find('\n') == std::string::npos);
  auto back = parse_json_line(line);
  FUZZ_CHECK(back);
  FUZZ_CHECK(back->tick == s->tick && back->period_s == s->period_s);
  FUZZ_CHECK(back->workloads.size() == s->workloads.size());
  for (size_t i = 0; i < s->workloads.size(); ++i) FUZZ_CHECK(same(back->workloads[i], s->workloads[i]));
  FUZZ_CHECK(to_json_line(*back) == line);
  return 0;
}
