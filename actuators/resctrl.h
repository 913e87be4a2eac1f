// resctrl (Intel RDT, arm64 MPAM): one resource group per managed workload. L3 ways as cache bit
// masks (exclusive ways are first taken out of the default group; CDP writes L3CODE/L3DATA), memory
// bandwidth (percent rounded as the kernel does, or MiB/s under mba_MBps), openEuler's MPAM lines
// where the schemata has them, and each group's tasks kept in sync. Every write goes through the
// KnobWriter (journal, observe mode); schemata read-modify-writes hold flock on the resctrl root.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "actuators/writer.h"
#include "host/error.h"
#include "host/resctrl_info.h"

namespace keel::act {

struct ResctrlGroupSpec {
  std::string name{};                 // directory under the resctrl root, e.g. "keel-redis"
  std::optional<unsigned> l3_ways{};  // none: the group shares the default group's ways
  bool exclusive = false;             // the ways are taken out of the default group and keel's other groups
  std::optional<unsigned> mb_percent{};  // memory bandwidth cap in percent (not under mba_MBps)
  std::optional<unsigned> mb_mbps{};     // memory bandwidth cap in MiB/s (only under mba_MBps)
  // openEuler MPAM: written only where the schemata has the line, else listed as unsupported.
  std::optional<unsigned> mb_min{};  // MBMIN: guaranteed percent
  std::optional<unsigned> mb_hdl{};  // MBHDL: 1 = the MB cap is a hard limit
  std::optional<unsigned> mb_pri{};  // MBPRI: 0-7
  std::optional<unsigned> l3_pri{};  // L3PRI: 0-7
};
// A value left unset is left as it is (a cap once set stays until release; ask for 100 to lift it).

struct ResctrlApplied {
  bool created = false;                  // the group was made (observe: would be)
  bool changed = false;                  // some schemata was written (observe: would be)
  std::vector<std::string> unsupported;  // requested lines this host's schemata lacks ("MBMIN")
};

struct TaskSync {
  std::vector<int> added;    // moved into the group
  std::vector<int> already;  // were in it
  std::vector<int> exited;   // gone before they could be moved (not an error)
  std::vector<int> removed;  // in the group but no longer wanted: moved back to the default group
};

class Resctrl {
 public:
  // std::nullopt when resctrl is not mounted. The default group's L3 masks read now are the ways keel
  // divides: open after restoring a previous run's journal. `default_min_ways` (at least
  // min_cbm_bits) is what the default group always keeps.
  static Result<std::optional<Resctrl>> open(KnobWriter& w, unsigned default_min_ways = 0);

  const ResctrlInfo& info() const { return info_; }
  // Makes the group (checking for a free CLOSID first) and its schemata match `spec`; moves keel's
  // other groups and the default group's mask when the exclusive ways change. A request the
  // hardware cannot satisfy is an error that writes nothing.
  Result<ResctrlApplied> apply(const ResctrlGroupSpec& spec);
  // Makes the group hold exactly `tids` (thread ids: a tasks write moves one thread).
  Result<TaskSync> sync_tasks(const std::string& group, const std::vector<int>& tids);
  // Removes the group (its tasks fall back to the default group) and gives its ways back.
  // False when it did not exist.
  Result<bool> release(const std::string& group);

 private:
  Resctrl(KnobWriter& w, ResctrlInfo info, unsigned default_min)
      : w_(&w), info_(std::move(info)), default_min_(default_min) {}
  KnobWriter* w_;
  ResctrlInfo info_;
  unsigned default_min_;
  // The default group's masks at open, per L3 resource line: {resource, {domain, mask}...}.
  std::vector<std::pair<std::string, std::vector<std::pair<unsigned, unsigned long long>>>> base_;
  // keel's groups, in the order first applied (exclusive ways stack up in that order).
  std::vector<ResctrlGroupSpec> groups_;
};

// The tasks sync alone (it needs no info/): `group` is a directory under the writer's resctrl root.
Result<TaskSync> sync_group_tasks(KnobWriter& w, const std::string& group, const std::vector<int>& tids);

// The resctrl group of a workload instance: "redis" -> "keel-redis", "batch/job-1" ->
// "keel-batch+job-1". One directory name of at most NAME_MAX (255) bytes, and different instances
// never share one: letters, digits, '.', '_' and '-' stay, '/' becomes '+' and every other byte %XX,
// so the name reads back to the instance; one that would be longer keeps its first 233 bytes and ends
// in '~' and the 16 hex digits of a 64-bit FNV-1a hash of the whole instance ('~' is never otherwise
// in a name, so only two long instances with the same start and hash could meet).
std::string resctrl_group_name(std::string_view instance);

// Pure helpers (exposed for tests).
struct SchemataLine {
  std::string resource;                                   // "L3", "L3CODE", "MB", "MBMIN", ...
  std::vector<std::pair<unsigned, std::string>> domains;  // id and value as printed ("0000050")
};
// Lines like "    L3:1=fffffff;3=fffffff" (names are right-aligned by the kernel).
Result<std::vector<SchemataLine>> parse_schemata(std::string_view text);
// A value of `resource` as a number: hex for cache masks (L2/L3, CODE/DATA), decimal otherwise.
Result<unsigned long long> schemata_value(std::string_view resource, std::string_view text);
// One line as keel writes it, without its newline: "L3:0=7f0;1=7f0" (the numbers as schemata_value
// reads them back).
std::string format_schemata_line(std::string_view resource,
                                 const std::vector<std::pair<unsigned, unsigned long long>>& values);
// A mask the kernel accepts: non-empty, within cbm_mask, contiguous unless sparse_masks, at least
// min_cbm_bits ways.
Result<void> validate_cbm(const ResctrlInfo& info, unsigned long long mask);
// The MB percent the kernel stores for `percent` (1-100): at least min_bandwidth, rounded up to
// min_bandwidth + N * bandwidth_gran, at most 100.
Result<unsigned> round_mb(const ResctrlInfo& info, unsigned percent);

}  // namespace keel::act
