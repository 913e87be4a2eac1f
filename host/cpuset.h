// A set of CPU numbers, with the kernel's two text forms: lists ("0-3,8,10-11") and hex masks
// ("ff", or 32-bit words separated by commas as in smp_affinity, rps_cpus, resctrl `cpus`).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "host/error.h"

namespace keel {

class CpuSet {
 public:
  static constexpr unsigned kMaxCpu = 8192;  // CONFIG_NR_CPUS upper bound on any kernel keel targets

  CpuSet() = default;
  static CpuSet range(unsigned first, unsigned last);  // inclusive, cut at kMaxCpu

  // "0-3,8,10-11", "0-1023:2/256" (kernel group form), "" = empty. Whitespace/newline around is ignored.
  static Result<CpuSet> parse_list(std::string_view text);
  // "ff", "0x3", "00000000,00000040". Empty or all-zero = empty set.
  static Result<CpuSet> parse_mask(std::string_view text);

  std::string to_list() const;                         // canonical, ascending ranges: "0-3,8"
  std::string to_mask(bool comma_words = true) const;  // "00000000,00000040" / "40"

  void add(unsigned cpu);
  void remove(unsigned cpu);
  bool contains(unsigned cpu) const;
  bool empty() const;
  unsigned count() const;
  std::vector<unsigned> cpus() const;
  int first() const;  // -1 when empty
  int last() const;   // -1 when empty

  CpuSet operator|(const CpuSet& o) const;
  CpuSet operator&(const CpuSet& o) const;
  CpuSet operator-(const CpuSet& o) const;  // difference
  CpuSet& operator|=(const CpuSet& o);
  bool operator==(const CpuSet& o) const;
  bool subset_of(const CpuSet& o) const { return (*this - o).empty(); }
  bool intersects(const CpuSet& o) const { return !(*this & o).empty(); }

 private:
  void trim();
  std::vector<uint64_t> words_;
};

}  // namespace keel
