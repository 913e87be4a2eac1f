// CPU lists and masks (host/cpuset.h). The input is one or two texts split at the first '|'; each is
// tried as a list and as a mask. Whatever parses must print back (to_list, to_mask with and without
// comma words) to text that parses to the same set, the canonical list must be a fixed point, the
// set's views must agree (count, cpus, first, last, contains), and two parsed sets must obey the
// algebra the planner relies on (union, intersection, difference, subset).
#include <string>
#include <vector>

#include "fuzz/check.h"
#include "host/cpuset.h"

namespace {

using keel::CpuSet;

void check_set(const CpuSet& s) {
  auto cpus = s.cpus();
  FUZZ_CHECK(cpus.size() == s.count());
  FUZZ_CHECK(s.empty() == cpus.empty());
  FUZZ_CHECK(s.first() == (cpus.empty() ? -1 : static_cast<int>(cpus.front())));
  FUZZ_CHECK(s.last() == (cpus.empty() ? -1 : static_cast<int>(cpus.back())));
  for (size_t i = 0; i < cpus.size(); ++i) {
    FUZZ_CHECK(cpus[i] < CpuSet::kMaxCpu);
    FUZZ_CHECK(i == 0 || cpus[i - 1] < cpus[i]);
    FUZZ_CHECK(s.contains(cpus[i]));
  }
  // Each printed form parses back to the same set.
  const std::string list = s.to_list();
  auto from_list = CpuSet::parse_list(list);
  FUZZ_CHECK(from_list && *from_list == s);
  FUZZ_CHECK(from_list->to_list() == list);
  auto from_words = CpuSet::parse_mask(s.to_mask(true));
  FUZZ_CHECK(from_words && *from_words == s);
  auto from_hex = CpuSet::parse_mask(s.to_mask(false));
  FUZZ_CHECK(from_hex && *from_hex == s);
  // The kernel's own prefix and a trailing newline (as read from a file) change nothing.
  auto prefixed = CpuSet::parse_mask("0x" + s.to_mask(false) + "\n");
  FUZZ_CHECK(prefixed && *prefixed == s);
  // Taking a CPU out and putting it back.
  if (!cpus.empty()) {
    CpuSet t = s;
    t.remove(cpus.back());
    FUZZ_CHECK(!t.contains(cpus.back()) && t.count() + 1 == s.count());
    t.add(cpus.back());
    FUZZ_CHECK(t == s);
  }
}

void check_pair(const CpuSet& a, const CpuSet& b) {
  const CpuSet u = a | b, i = a & b, d = a - b;
  FUZZ_CHECK(a.subset_of(u) && b.subset_of(u));
  FUZZ_CHECK(i.subset_of(a) && i.subset_of(b));
  FUZZ_CHECK(!d.intersects(b) && d.subset_of(a));
  FUZZ_CHECK((d | i) == a);
  FUZZ_CHECK(u.count() + i.count() == a.count() + b.count());
  FUZZ_CHECK(a.intersects(b) == !i.empty());
  FUZZ_CHECK((a | b) == (b | a) && (a & b) == (b & a));
  CpuSet acc = a;
  acc |= b;
  FUZZ_CHECK(acc == u);
  check_set(u);
  check_set(i);
  check_set(d);
}

std::vector<CpuSet> parsed(std::string_view text) {
  std::vector<CpuSet> out;
  if (auto l = CpuSet::parse_list(text)) out.push_back(*l);
  if (auto m = CpuSet::parse_mask(text)) out.push_back(*m);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto [first, second] = keel::fuzz::split_at(keel::fuzz::as_text(data, size), '|');
  auto a = parsed(first), b = parsed(second);
  for (const auto& s : a) check_set(s);
  for (const auto& s : b) check_set(s);
  for (const auto& x : a)
    for (const auto& y : b) check_pair(x, y);
  // A range from the first bytes: never past kMaxCpu, whatever the bounds.
  if (size >= 4) {
    unsigned lo = data[0] | data[1] << 8, hi = data[2] | data[3] << 8;
    CpuSet r = CpuSet::range(lo, hi);
    FUZZ_CHECK(r.count() ==
               (lo > hi || lo >= CpuSet::kMaxCpu ? 0 : std::min(hi, CpuSet::kMaxCpu - 1) - lo + 1));
    check_set(r);
  }
  return 0;
}
