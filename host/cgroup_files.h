// The cgroup files keel reads and writes, in one table: each file's name on cgroup v1 (also when the
// cpuset hierarchy is mounted with `noprefix`) and on v2, the controller that provides it, and the
// kind of value it holds (how two values compare and the order restore puts them back in). Nothing
// else in keel spells a cgroup file name. Beside the table: the kernel's limits for the CPU weight,
// the shares <-> weight mappings both ways, and CgroupDir, one cgroup held open by its directory, so
// its files are read and written through that directory and never through a cgroup recreated under
// the same name.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "host/cgroup.h"
#include "host/error.h"
#include "host/fd.h"
#include "host/knob_values.h"

namespace keel {

enum class CgroupFile : uint8_t {
  procs,            // cgroup.procs: pids, one per line
  threads,          // v1 tasks, v2 cgroup.threads: thread ids
  controllers,      // v2 cgroup.controllers
  weight,           // v1 cpu.shares, v2 cpu.weight
  idle,             // cpu.idle
  cpu_stat,         // cpu.stat: throttling (v1 and v2) and usage_usec (v2)
  usage,            // v1 cpuacct.usage (ns); v2 keeps it in cpu.stat
  pressure,         // v2 cpu.pressure (PSI)
  cpu_max,          // v2 cpu.max "QUOTA|max PERIOD"
  cfs_quota,        // v1 cpu.cfs_quota_us (-1: no limit)
  cfs_period,       // v1 cpu.cfs_period_us
  burst,            // v1 cpu.cfs_burst_us, v2 cpu.max.burst
  cpus,             // cpuset.cpus
  mems,             // cpuset.mems
  effective_cpus,   // v1 cpuset.effective_cpus, v2 cpuset.cpus.effective
  effective_mems,   // v1 cpuset.effective_mems, v2 cpuset.mems.effective
  qos_level,        // openEuler cpu.qos_level: 0 online, -1 offline (v1; multilevel builds take -2..2)
  bvt_warp,         // Anolis cpu.bvt_warp_ns: -1 best-effort, 0 default .. 2 latency-critical
  subtree_control,  // v2 cgroup.subtree_control: the controllers enabled for the children
};

// The file's name on v2 (`unified`) or v1 (`noprefix`: the cpuset hierarchy mounted without the
// "cpuset." prefix); empty when that version has no such file (cpuacct.usage on v2, cpu.max on v1).
std::string_view cgroup_file_name(CgroupFile f, bool unified, bool noprefix = false);
std::string_view cgroup_file_name(CgroupFile f, const CgroupHierarchy& h);
// The controller that provides the file ("cpu", "cpuacct", "cpuset"); empty for cgroup core files.
std::string_view cgroup_file_controller(CgroupFile f, bool unified);
ValueKind cgroup_file_kind(CgroupFile f);
// The file a name denotes in any version's spelling ("cpu.shares", "cpus", "cpuset.cpus.effective"):
// for names read back from outside (a journal on disk); what keel writes carries its CgroupFile.
std::optional<CgroupFile> cgroup_file_named(std::string_view name);

// The hierarchy that holds `f` for cgroups of `defining`: on v2 the unified one (if it has the
// controller), on v1 the hierarchy mounted with the file's controller. None when nothing has it.
const CgroupHierarchy* hierarchy_for(const CgroupLayout& layout, const CgroupHierarchy& defining,
                                     CgroupFile f);

// ---- Kernel limits of the CPU knobs (MIN_SHARES, MAX_SHARES, CGROUP_WEIGHT_MIN/MAX, CFS bandwidth) ----

inline constexpr uint64_t kSharesMin = 2, kSharesMax = 262144, kSharesDefault = 1024;
inline constexpr uint64_t kWeightMin = 1, kWeightMax = 10000, kWeightDefault = 100;
// CFS bandwidth, in microseconds: min/max_cfs_quota_period, min_cfs_quota_period, max_cfs_runtime.
inline constexpr int64_t kCfsPeriodMinUs = 1000, kCfsPeriodMaxUs = 1000000;
inline constexpr int64_t kCfsQuotaMinUs = 1000, kCfsQuotaMaxUs = (int64_t{1} << 44) - 1;

// How cgroup v1 shares become a v2 cpu.weight: systemd's linear mapping, clamp(shares * 100 / 1024,
// 1, 10000) rounding down, or newer runc's (PR #4785) logarithmic one, 10^(l(l+125)/612 - 7/34)
// rounded up with l = log2(shares): both keep 2 -> 1, 1024 -> 100, 262144 -> 10000.
enum class WeightMapping { systemd, runc };
uint64_t shares_to_weight(uint64_t shares, WeightMapping m);  // shares outside [2, 262144] clamp
// The shares a weight stands for, the way keel writes them: the smallest power of two the mapping takes
// to `weight` (keel's steps double and halve from the default), else the smallest shares that map to
// it, else (a weight the mapping never gives) the shares whose weight is nearest. So what keel wrote
// reads back as written wherever the weight tells it apart, and writing what was read back leaves the
// weight as it is.
uint64_t weight_to_shares(uint64_t weight, WeightMapping m);

// ---- One cgroup, held open ----

class CgroupDir {
 public:
  // Opens the cgroup at `path` ("/" or "/a/b") of `h`; fails (ENOENT) when there is none.
  static Result<CgroupDir> open(std::shared_ptr<const CgroupHierarchy> h, std::string path);
  static Result<CgroupDir> open(const CgroupHierarchy& h, std::string path);
  // The child cgroup `name` (one directory level), opened through this one's directory.
  Result<CgroupDir> child(std::string_view name) const;

  CgroupId id() const { return id_; }
  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }
  const CgroupHierarchy& hierarchy() const { return *h_; }
  const std::shared_ptr<const CgroupHierarchy>& hierarchy_ptr() const { return h_; }
  void set_path(std::string path) { path_ = std::move(path); }  // renamed (the same cgroup, moved)
  // Whether this cgroup was removed since it was opened: its path names no cgroup now, or another one.
  // Cgroups come and go between a read and a write; a failure on one that went is churn, not an error.
  bool removed() const;
  // Whether `failure`, of one of its files, came from its removal: removed(), or ENODEV (rmdir
  // deactivates a cgroup's files before its directory goes: a read or write in between fails with
  // ENODEV while its path still names it).
  bool removed(const Error& failure) const;
  // Whom this cgroup was handed to, to manage its subtree: nobody; a manager running as root (it
  // carries systemd's trusted.delegate or user.delegate extended attribute, which Delegate= sets, and
  // its directory is root's: a container runtime's scope, a VM's); or another user (its directory is
  // not root's: systemd and container runtimes chown what they delegate to a user). Below it, names
  // are that party's.
  enum class Delegation : uint8_t { none, root, user };
  Delegation delegation() const;

  std::string_view name(CgroupFile f) const { return cgroup_file_name(f, *h_); }
  // Where the file is (for messages): MOUNT/PATH/NAME.
  std::filesystem::path file_path(CgroupFile f, std::string_view below = {}) const;
  // The whole file. ENOENT when the version has no such file or the cgroup lacks it; ENODEV when the
  // cgroup was removed since it was opened. `below` reads it of a descendant instead, by its path
  // relative to this cgroup ("a/b"), through this one's directory.
  Result<std::string> read(CgroupFile f, std::string_view below = {}) const;
  Result<uint64_t> read_u64(CgroupFile f, std::string_view below = {}) const;  // one number ("-1" is not)
  // One write(2) of `bytes`, as kernel files expect.
  Result<void> write(CgroupFile f, std::string_view bytes) const;
  // Whether the cgroup (only it) has a task now.
  Result<bool> has_tasks() const;

 private:
  CgroupDir(std::shared_ptr<const CgroupHierarchy> h, std::string path, Fd fd, CgroupId id)
      : h_(std::move(h)), path_(std::move(path)), fd_(std::move(fd)), id_(id) {}
  // Up to `cap` bytes of the file into `buf`; the length read, or -errno.
  long read_into(CgroupFile f, char* buf, size_t cap, std::string_view below = {}) const;
  std::shared_ptr<const CgroupHierarchy> h_;
  std::string path_;
  Fd fd_;
  CgroupId id_;
};

}  // namespace keel
