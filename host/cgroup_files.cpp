#include "host/cgroup_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>

#include "host/fileio.h"

namespace keel {

namespace {

struct FileInfo {
  CgroupFile file;
  std::string_view v1;  // empty: v1 has no such file
  std::string_view v2;  // empty: v2 has no such file
  std::string_view v1_controller, v2_controller;
  ValueKind kind;
};

// The kernel's names. With `noprefix` a v1 controller file loses its "<controller>." prefix.
constexpr std::array<FileInfo, 19> kFiles = {{
    {CgroupFile::procs, "cgroup.procs", "cgroup.procs", "", "", ValueKind::text},
    {CgroupFile::threads, "tasks", "cgroup.threads", "", "", ValueKind::text},
    {CgroupFile::controllers, "", "cgroup.controllers", "", "", ValueKind::text},
    {CgroupFile::weight, "cpu.shares", "cpu.weight", "cpu", "cpu", ValueKind::weight},
    {CgroupFile::idle, "cpu.idle", "cpu.idle", "cpu", "cpu", ValueKind::idle},
    {CgroupFile::cpu_stat, "cpu.stat", "cpu.stat", "cpu", "", ValueKind::text},
    {CgroupFile::usage, "cpuacct.usage", "", "cpuacct", "", ValueKind::integer},
    {CgroupFile::pressure, "", "cpu.pressure", "", "", ValueKind::text},
    {CgroupFile::cpu_max, "", "cpu.max", "", "cpu", ValueKind::bandwidth},
    {CgroupFile::cfs_quota, "cpu.cfs_quota_us", "", "cpu", "", ValueKind::cfs_quota},
    {CgroupFile::cfs_period, "cpu.cfs_period_us", "", "cpu", "", ValueKind::cfs_period},
    {CgroupFile::burst, "cpu.cfs_burst_us", "cpu.max.burst", "cpu", "cpu", ValueKind::integer},
    {CgroupFile::cpus, "cpuset.cpus", "cpuset.cpus", "cpuset", "cpuset", ValueKind::cpuset_list},
    {CgroupFile::mems, "cpuset.mems", "cpuset.mems", "cpuset", "cpuset", ValueKind::cpuset_list},
    {CgroupFile::effective_cpus, "cpuset.effective_cpus", "cpuset.cpus.effective", "cpuset", "cpuset",
     ValueKind::cpu_list},
    {CgroupFile::effective_mems, "cpuset.effective_mems", "cpuset.mems.effective", "cpuset", "cpuset",
     ValueKind::cpu_list},
    // Preemption classes of vendor kernels: restored before weights, like cpu.idle.
    {CgroupFile::qos_level, "cpu.qos_level", "cpu.qos_level", "cpu", "cpu", ValueKind::idle},
    {CgroupFile::bvt_warp, "cpu.bvt_warp_ns", "cpu.bvt_warp_ns", "cpu", "cpu", ValueKind::idle},
    {CgroupFile::subtree_control, "", "cgroup.subtree_control", "", "", ValueKind::text},
}};

constexpr bool in_enum_order() {
  for (size_t i = 0; i < kFiles.size(); ++i)
    if (static_cast<size_t>(kFiles[i].file) != i) return false;
  return kFiles.size() == static_cast<size_t>(CgroupFile::subtree_control) + 1;
}
static_assert(in_enum_order());

const FileInfo& info(CgroupFile f) { return kFiles[static_cast<size_t>(f)]; }

std::string_view without_prefix(const FileInfo& fi) {
  std::string_view n = fi.v1;
  if (!fi.v1_controller.empty() && n.starts_with(fi.v1_controller) && n.size() > fi.v1_controller.size() &&
      n[fi.v1_controller.size()] == '.')
    n.remove_prefix(fi.v1_controller.size() + 1);
  return n;
}

// shares -> weight is monotone: the smallest shares in [kSharesMin, kSharesMax] whose weight is at
// least `w` (kSharesMax + 1 when none).
uint64_t first_shares_reaching(uint64_t w, WeightMapping m) {
  uint64_t lo = kSharesMin, hi = kSharesMax + 1;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (shares_to_weight(mid, m) >= w)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

}  // namespace

std::string_view cgroup_file_name(CgroupFile f, bool unified, bool noprefix) {
  const FileInfo& fi = info(f);
  if (unified) return fi.v2;
  return noprefix ? without_prefix(fi) : fi.v1;
}

std::string_view cgroup_file_name(CgroupFile f, const CgroupHierarchy& h) {
  return cgroup_file_name(f, h.unified, h.noprefix);
}

std::string_view cgroup_file_controller(CgroupFile f, bool unified) {
  return unified ? info(f).v2_controller : info(f).v1_controller;
}

ValueKind cgroup_file_kind(CgroupFile f) { return info(f).kind; }

std::optional<CgroupFile> cgroup_file_named(std::string_view name) {
  if (name.empty()) return std::nullopt;
  for (const FileInfo& fi : kFiles)
    if (name == fi.v1 || name == fi.v2 || name == without_prefix(fi)) return fi.file;
  return std::nullopt;
}

const CgroupHierarchy* hierarchy_for(const CgroupLayout& layout, const CgroupHierarchy& defining,
                                     CgroupFile f) {
  std::string_view ctl = cgroup_file_controller(f, defining.unified);
  if (cgroup_file_name(f, defining.unified).empty()) return nullptr;
  if (ctl.empty() || defining.has(ctl)) return &defining;
  if (defining.unified) return nullptr;
  return layout.v1_with(ctl);
}

uint64_t shares_to_weight(uint64_t shares, WeightMapping m) {
  shares = std::clamp(shares, kSharesMin, kSharesMax);
  if (m == WeightMapping::systemd) return std::clamp(shares * 100 / 1024, kWeightMin, kWeightMax);
  if (shares == kSharesMin) return kWeightMin;
  if (shares == kSharesMax) return kWeightMax;
  // A quadratic in log2(shares) through (1, 0), (10, 2), (18, 4), as log10 of the weight.
  double l = std::log2(static_cast<double>(shares));
  double exponent = (l * l + 125 * l) / 612.0 - 7.0 / 34.0;
  return std::clamp(static_cast<uint64_t>(std::ceil(std::pow(10.0, exponent))), kWeightMin, kWeightMax);
}

uint64_t weight_to_shares(uint64_t weight, WeightMapping m) {
  weight = std::clamp(weight, kWeightMin, kWeightMax);
  uint64_t lo = first_shares_reaching(weight, m);
  if (lo > kSharesMax || shares_to_weight(lo, m) != weight) {
    // No shares map to it (a weight the mapping skips): the nearest of the two around it.
    if (lo > kSharesMax) return kSharesMax;
    if (lo == kSharesMin) return lo;
    uint64_t below = shares_to_weight(lo - 1, m), above = shares_to_weight(lo, m);
    return weight - below <= above - weight ? lo - 1 : lo;
  }
  uint64_t hi = first_shares_reaching(weight + 1, m) - 1;  // the last shares with this weight
  uint64_t p = std::bit_ceil(lo);                          // the smallest power of two from lo
  return p <= hi ? p : lo;
}

// ---- CgroupDir ----

Result<CgroupDir> CgroupDir::open(std::shared_ptr<const CgroupHierarchy> h, std::string path) {
  if (path.empty() || path.front() != '/')
    return fail("not a cgroup path (it starts with '/'): '" + path + "'");
  std::filesystem::path dir = path == "/" ? h->mount : h->mount / path.substr(1);
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return fail_errno("cannot open cgroup", dir.string());
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return fail_errno("cannot stat cgroup", dir.string());
  CgroupId id{h->id, static_cast<uint64_t>(st.st_ino)};
  return CgroupDir(std::move(h), std::move(path), std::move(fd), id);
}

Result<CgroupDir> CgroupDir::open(const CgroupHierarchy& h, std::string path) {
  return open(std::make_shared<const CgroupHierarchy>(h), std::move(path));
}

bool CgroupDir::removed() const {
  std::filesystem::path dir = path_ == "/" ? h_->mount : h_->mount / path_.substr(1);
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return errno == ENOENT || errno == ENOTDIR;
  return static_cast<uint64_t>(st.st_ino) != id_.inode;
}

bool CgroupDir::removed(const Error& failure) const { return failure.err == ENODEV || removed(); }

CgroupDir::Delegation CgroupDir::delegation() const {
  struct stat st;
  if (::fstat(fd_.get(), &st) != 0 || st.st_uid != 0) return Delegation::user;  // unknown: the least trust
  for (const char* attr : {"trusted.delegate", "user.delegate"})
    if (::fgetxattr(fd_.get(), attr, nullptr, 0) >= 0) return Delegation::root;
  return Delegation::none;
}

Result<CgroupDir> CgroupDir::child(std::string_view name) const {
  std::string n(name);
  std::string path = path_ == "/" ? "/" + n : path_ + "/" + n;
  if (n.empty() || n == "." || n == ".." || n.find('/') != std::string::npos)
    return fail("not a cgroup directory name: '" + n + "'");
  Fd fd(::openat(fd_.get(), n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return fail_errno("cannot open cgroup", (h_->mount / path.substr(1)).string());
  struct stat st;
  if (::fstat(fd.get(), &st) != 0)
    return fail_errno("cannot stat cgroup", (h_->mount / path.substr(1)).string());
  return CgroupDir(h_, std::move(path), std::move(fd), CgroupId{h_->id, static_cast<uint64_t>(st.st_ino)});
}

std::filesystem::path CgroupDir::file_path(CgroupFile f, std::string_view below) const {
  std::filesystem::path dir = path_ == "/" ? h_->mount : h_->mount / path_.substr(1);
  if (!below.empty()) dir /= below;
  std::string_view n = name(f);
  return n.empty() ? dir : dir / n;
}

namespace {

// "NAME" or "BELOW/NAME" into `out` (NUL-terminated); false when it does not fit.
bool relative_name(std::string_view below, std::string_view n, char* out, size_t cap) {
  size_t len = below.empty() ? 0 : below.size() + 1;
  if (len + n.size() >= cap) return false;
  if (!below.empty()) {
    std::copy(below.begin(), below.end(), out);
    out[below.size()] = '/';
  }
  std::copy(n.begin(), n.end(), out + len);
  out[len + n.size()] = '\0';
  return true;
}

}  // namespace

long CgroupDir::read_into(CgroupFile f, char* buf, size_t cap, std::string_view below) const {
  std::string_view n = name(f);
  if (n.empty()) return -ENOENT;
  char rel[4096];
  if (!relative_name(below, n, rel, sizeof rel)) return -ENAMETOOLONG;
  int fd = ::openat(fd_.get(), rel, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  size_t got = 0;
  while (got < cap) {
    ssize_t r = ::read(fd, buf + got, cap - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = errno;
      ::close(fd);
      return -e;
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  return static_cast<long>(got);
}

Result<std::string> CgroupDir::read(CgroupFile f, std::string_view below) const {
  std::string_view n = name(f);
  if (n.empty())
    return fail("cgroup " + std::string(h_->unified ? "v2" : "v1") + " has no such file",
                file_path(f, below).string(), ENOENT);
  char rel[4096];
  if (!relative_name(below, n, rel, sizeof rel))
    return fail("path too long", file_path(f, below).string(), ENAMETOOLONG);
  Fd fd(::openat(fd_.get(), rel, O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return fail_errno("cannot open", file_path(f, below).string());
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t r = ::read(fd.get(), buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return fail_errno("cannot read", file_path(f, below).string());
    if (r == 0) break;
    out.append(buf, static_cast<size_t>(r));
  }
  return out;
}

Result<uint64_t> CgroupDir::read_u64(CgroupFile f, std::string_view below) const {
  char buf[64];
  long n = read_into(f, buf, sizeof buf, below);
  if (n < 0) return fail("cannot read", file_path(f, below).string(), static_cast<int>(-n));
  auto v = parse_integer(std::string_view(buf, static_cast<size_t>(n)));
  if (!v || *v < 0)
    return fail("not a number: '" + std::string(trim(std::string_view(buf, static_cast<size_t>(n)))) + "'",
                file_path(f, below).string());
  return static_cast<uint64_t>(*v);
}

Result<void> CgroupDir::write(CgroupFile f, std::string_view bytes) const {
  std::string_view n = name(f);
  if (n.empty())
    return fail("cgroup " + std::string(h_->unified ? "v2" : "v1") + " has no such file",
                file_path(f).string(), ENOENT);
  Fd fd(::openat(fd_.get(), std::string(n).c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC));
  if (!fd.valid())
    return fail_errno("cannot open to write '" + std::string(trim(bytes)) + "'", file_path(f).string());
  ssize_t w;
  do {
    w = ::write(fd.get(), bytes.data(), bytes.size());
  } while (w < 0 && errno == EINTR);
  if (w < 0) return fail_errno("write '" + std::string(trim(bytes)) + "' refused", file_path(f).string());
  if (static_cast<size_t>(w) != bytes.size())
    return fail("short write of '" + std::string(trim(bytes)) + "'", file_path(f).string(), EIO);
  return {};
}

Result<bool> CgroupDir::has_tasks() const {
  char buf[16];
  long n = read_into(CgroupFile::procs, buf, sizeof buf);
  // A threaded v2 cgroup refuses to list processes; its threads say whether it holds any.
  if (n == -EOPNOTSUPP) n = read_into(CgroupFile::threads, buf, sizeof buf);
  if (n < 0) return fail("cannot read", file_path(CgroupFile::procs).string(), static_cast<int>(-n));
  return !trim(std::string_view(buf, static_cast<size_t>(n))).empty();
}

}  // namespace keel
