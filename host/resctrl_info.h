// What a mounted resctrl filesystem offers (its info/ directory), read without changing anything.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "host/error.h"

namespace keel {

struct ResctrlInfo {
  std::filesystem::path root;
  // L3 allocation (info/L3, or info/L3CODE + L3DATA under CDP).
  bool l3 = false;
  bool cdp = false;
  unsigned long long cbm_mask = 0;  // all ways
  unsigned l3_ways = 0;             // bits in cbm_mask
  unsigned min_cbm_bits = 0;
  unsigned long long shareable_bits = 0;
  bool sparse_masks = false;        // 0/absent: 1-bits must be contiguous (Intel)
  unsigned num_closids = 0;
  // Memory bandwidth allocation (info/MB).
  bool mb = false;
  unsigned min_bandwidth = 0;
  unsigned bandwidth_gran = 0;
};

// std::nullopt when resctrl is not mounted at `root` (no info/ directory); an Error when it is
// mounted but a file cannot be read or parsed.
Result<std::optional<ResctrlInfo>> read_resctrl_info(const std::filesystem::path& root);

}  // namespace keel
