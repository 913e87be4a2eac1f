// What a mounted resctrl filesystem offers (its info/ directory), read without changing anything.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

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
  bool sparse_masks = false;  // 0/absent: 1-bits must be contiguous (Intel)
  unsigned num_closids = 0;   // CLOSIDs for groups: the smallest over L3 and MB (default group included)
  // Memory bandwidth allocation (info/MB).
  bool mb = false;
  unsigned min_bandwidth = 0;
  unsigned bandwidth_gran = 0;
  bool mba_mbps = false;  // mounted with -o mba_MBps: MB values are MiB/s, not percent
};

// std::nullopt when resctrl is not mounted at `root` (no info/ directory); an Error when it is
// mounted but a file cannot be read or parsed. `mountinfo` (/proc/self/mountinfo under the proc root)
// gives the mount options (mba_MBps); when empty or unreadable they are taken as none.
Result<std::optional<ResctrlInfo>> read_resctrl_info(const std::filesystem::path& root,
                                                     const std::filesystem::path& mountinfo = {});

// Whether a mountinfo text shows a resctrl mount at `mount_point` carrying option `opt` (the last
// such mount wins: a later mount hides earlier ones).
bool resctrl_mount_has_option(std::string_view mountinfo, const std::filesystem::path& mount_point,
                              std::string_view opt);

}  // namespace keel
