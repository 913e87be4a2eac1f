// resctrl schemata (actuators/resctrl.h): what parse_schemata takes from a group's schemata file
// must print back to text that parses to the same lines, and each line whose values read as numbers
// must come back through the writer's own format (format_schemata_line) with the same numbers. The
// numbers found are then put through the checks keel makes before a write: a cache mask validate_cbm
// accepts is one the kernel would (non-empty, inside cbm_mask, contiguous unless sparse_masks, at
// least min_cbm_bits ways), and an MB percent rounds as the kernel does (round_mb), for Intel's,
// MPAM's and odd info/MB values.
#include <bit>
#include <string>
#include <vector>

#include "actuators/resctrl.h"
#include "fuzz/check.h"

namespace {

using namespace keel;
using namespace keel::act;

bool same(const std::vector<SchemataLine>& a, const std::vector<SchemataLine>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].resource != b[i].resource || a[i].domains != b[i].domains) return false;
  return true;
}

std::string print(const std::vector<SchemataLine>& lines) {
  std::string out;
  for (const auto& l : lines) {
    out += "  " + l.resource + ":";
    for (size_t i = 0; i < l.domains.size(); ++i)
      out += (i ? ";" : "") + std::to_string(l.domains[i].first) + "=" + l.domains[i].second;
    out += "\n";
  }
  return out;
}

ResctrlInfo cache(unsigned long long cbm_mask, unsigned min_bits, bool sparse) {
  ResctrlInfo i;
  i.l3 = true;
  i.cbm_mask = cbm_mask;
  i.l3_ways = static_cast<unsigned>(std::popcount(cbm_mask));
  i.min_cbm_bits = min_bits;
  i.sparse_masks = sparse;
  return i;
}

ResctrlInfo bandwidth(unsigned min, unsigned gran) {
  ResctrlInfo i;
  i.mb = true;
  i.min_bandwidth = min;
  i.bandwidth_gran = gran;
  return i;
}

void check_cbm(unsigned long long mask) {
  for (const ResctrlInfo& info :
       {cache(0x7ff, 2, false), cache(0xfffff, 1, false), cache(0xffff, 1, true), cache(~0ULL, 0, false)}) {
    const bool ok = validate_cbm(info, mask).has_value();
    const unsigned long long low = mask == 0 ? 0 : mask >> std::countr_zero(mask);
    const bool kernel_takes = mask != 0 && (mask & ~info.cbm_mask) == 0 &&
                              (info.sparse_masks || (low & (low + 1)) == 0) &&
                              static_cast<unsigned>(std::popcount(mask)) >= info.min_cbm_bits;
    FUZZ_CHECK(ok == kernel_takes);
  }
}

void check_mb(unsigned long long percent) {
  for (const ResctrlInfo& info :
       {bandwidth(10, 10), bandwidth(1, 1), bandwidth(0, 0), bandwidth(5, 3), bandwidth(100, 100)}) {
    auto r = round_mb(info, static_cast<unsigned>(std::min<unsigned long long>(percent, ~0u)));
    if (percent == 0 || percent > 100) {
      FUZZ_CHECK(!r);
      continue;
    }
    FUZZ_CHECK(r.has_value());
    const unsigned p = static_cast<unsigned>(percent);
    const unsigned min = std::max(info.min_bandwidth, 1u), gran = std::max(info.bandwidth_gran, 1u);
    FUZZ_CHECK(*r <= 100 && *r >= std::min(std::max(p, min), 100u));
    FUZZ_CHECK(*r == 100 || (*r - min) % gran == 0);                     // on the kernel's steps
    FUZZ_CHECK(*r == std::max(p, min) || *r - std::max(p, min) < gran);  // the nearest step up
    if (p < 100) FUZZ_CHECK(*round_mb(info, p + 1) >= *r);               // monotonic
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto lines = parse_schemata(keel::fuzz::as_text(data, size));
  if (!lines) {
    FUZZ_CHECK(!lines.error().what.empty());
    return 0;
  }
  for (const auto& l : *lines) FUZZ_CHECK(!l.resource.empty());
  auto again = parse_schemata(print(*lines));
  FUZZ_CHECK(again && same(*again, *lines));

  for (const auto& l : *lines) {
    std::vector<std::pair<unsigned, unsigned long long>> values;
    for (const auto& [id, text] : l.domains) {
      auto v = schemata_value(l.resource, text);
      if (!v) break;
      values.emplace_back(id, *v);
      const bool mask = l.resource.starts_with("L2") || l.resource.starts_with("L3");
      if (mask) check_cbm(*v);
      if (l.resource == "MB") check_mb(*v);
    }
    if (values.size() != l.domains.size()) continue;
    // As keel writes it: one line, the same resource, ids and numbers.
    auto written = parse_schemata(format_schemata_line(l.resource, values) + "\n");
    FUZZ_CHECK(written && written->size() == 1);
    const SchemataLine& w = written->front();
    FUZZ_CHECK(w.resource == l.resource && w.domains.size() == values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      FUZZ_CHECK(w.domains[i].first == values[i].first);
      auto v = schemata_value(w.resource, w.domains[i].second);
      FUZZ_CHECK(v && *v == values[i].second);
    }
  }
  return 0;
}
