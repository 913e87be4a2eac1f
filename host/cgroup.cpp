#include "host/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <memory>
#include <optional>
#include <utility>

#include "host/cgroup_files.h"
#include "host/fd.h"
#include "host/fileio.h"

namespace keel {
namespace {

template <class T>
std::optional<T> parse_uint(std::string_view s) {
  T v{};
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::string line_error(size_t line_no, std::string_view what, std::string_view line) {
  return "line " + std::to_string(line_no) + ": " + std::string(what) + ": '" + std::string(line) + "'";
}

// Calls parse_line on each non-empty line; the first failure names its line number.
template <class T, class F>
Result<std::vector<T>> parse_lines(std::string_view text, F parse_line) {
  std::vector<T> out;
  size_t line_no = 0;
  for (std::string_view line : split(text, '\n')) {
    ++line_no;
    if (trim(line).empty()) continue;
    auto item = parse_line(line);
    if (!item) return fail(line_error(line_no, item.error().what, line));
    if (*item) out.push_back(std::move(**item));
  }
  return out;
}

bool is_octal(char c) { return c >= '0' && c <= '7'; }

}  // namespace

// ---- Parsers ----

std::string unescape_mount_field(std::string_view field) {
  std::string out;
  out.reserve(field.size());
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() && is_octal(field[i + 1]) && is_octal(field[i + 2]) &&
        is_octal(field[i + 3])) {
      int v = (field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 + (field[i + 3] - '0');
      out += static_cast<char>(v);
      i += 3;
    } else {
      out += field[i];
    }
  }
  return out;
}

Result<MountInfo> parse_mountinfo_line(std::string_view line) {
  std::vector<std::string_view> f = split(trim(line), ' ');
  // id parent major:minor root mount-point options [optional fields...] - fstype source super-options
  auto dash = std::find(f.begin() + std::min<ptrdiff_t>(6, std::ssize(f)), f.end(), "-");
  if (f.size() < 10 || dash == f.end() || f.end() - dash != 4)
    return fail("not a mountinfo line (want 'ID PARENT DEV ROOT MOUNT OPTS ... - TYPE SOURCE SUPEROPTS')");
  MountInfo m;
  m.root = unescape_mount_field(f[3]);
  m.mount_point = unescape_mount_field(f[4]);
  m.fs_type = unescape_mount_field(dash[1]);
  for (std::string_view opt : split(dash[3], ',')) m.super_options.emplace_back(opt);
  return m;
}

Result<std::vector<MountInfo>> parse_mountinfo(std::string_view text) {
  return parse_lines<MountInfo>(text, [](std::string_view line) -> Result<std::optional<MountInfo>> {
    auto m = parse_mountinfo_line(line);
    if (!m) return std::unexpected(m.error());
    return std::optional<MountInfo>(std::move(*m));
  });
}

std::vector<std::string> v1_mount_controllers(const MountInfo& mount) {
  static constexpr std::array<std::string_view, 13> kFlags = {
      "rw",  "ro",       "sync",           "dirsync",        "mand",  "lazytime",    "none",
      "all", "noprefix", "clone_children", "cpuset_v2_mode", "xattr", "favordynmods"};
  std::vector<std::string> out;
  for (const std::string& opt : mount.super_options) {
    if (opt.empty() || std::ranges::find(kFlags, opt) != kFlags.end()) continue;
    if (opt == "nofavordynmods" || opt.starts_with("release_agent=")) continue;
    out.push_back(opt);
  }
  return out;
}

Result<std::vector<ProcCgroupsEntry>> parse_proc_cgroups(std::string_view text) {
  using Line = Result<std::optional<ProcCgroupsEntry>>;
  return parse_lines<ProcCgroupsEntry>(text, [](std::string_view line) -> Line {
    if (trim(line).starts_with('#')) return std::nullopt;  // the header
    auto f = split_blanks(line);
    if (f.size() != 4) return fail("want 'SUBSYS HIERARCHY NUM_CGROUPS ENABLED'");
    auto hierarchy = parse_uint<uint32_t>(f[1]);
    auto num = parse_uint<uint64_t>(f[2]);
    auto enabled = parse_uint<unsigned>(f[3]);
    if (!hierarchy || !num || !enabled) return fail("not a number");
    return ProcCgroupsEntry{std::string(f[0]), *hierarchy, *num, *enabled != 0};
  });
}

Result<std::vector<ProcessCgroup>> parse_process_cgroups(std::string_view text) {
  using Line = Result<std::optional<ProcessCgroup>>;
  // Not trimmed: the path is the rest of the line as the kernel wrote it, a trailing space included
  // (a cgroup named "crit " is not "crit").
  return parse_lines<ProcessCgroup>(text, [](std::string_view line) -> Line {
    size_t c1 = line.find(':');
    size_t c2 = c1 == std::string_view::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) return fail("want 'HIERARCHY:CONTROLLERS:PATH'");
    auto hierarchy = parse_uint<uint32_t>(line.substr(0, c1));
    if (!hierarchy) return fail("bad hierarchy id");
    ProcessCgroup pc;
    pc.hierarchy = *hierarchy;
    std::string_view controllers = line.substr(c1 + 1, c2 - c1 - 1);
    if (!controllers.empty())
      for (std::string_view c : split(controllers, ',')) pc.controllers.emplace_back(c);
    pc.path = std::string(line.substr(c2 + 1));
    return std::optional<ProcessCgroup>(std::move(pc));
  });
}

// ---- Hierarchies ----

const char* to_string(CgroupMode mode) {
  switch (mode) {
    case CgroupMode::v1:
      return "v1";
    case CgroupMode::v2:
      return "v2";
    case CgroupMode::hybrid:
      return "hybrid";
  }
  return "?";
}

bool CgroupHierarchy::has(std::string_view controller) const {
  return std::ranges::find(controllers, controller) != controllers.end();
}

std::string CgroupHierarchy::name() const {
  if (unified) return "unified";
  std::string out;
  for (const std::string& c : controllers) out += (out.empty() ? "" : ",") + c;
  return out;
}

const CgroupHierarchy* CgroupLayout::unified() const {
  auto it = std::ranges::find_if(hierarchies, [](const CgroupHierarchy& h) { return h.unified; });
  return it == hierarchies.end() ? nullptr : &*it;
}

const CgroupHierarchy* CgroupLayout::v1_with(std::string_view controller) const {
  auto it = std::ranges::find_if(hierarchies,
                                 [&](const CgroupHierarchy& h) { return !h.unified && h.has(controller); });
  return it == hierarchies.end() ? nullptr : &*it;
}

const CgroupHierarchy* CgroupLayout::by_id(uint32_t id) const {
  auto it = std::ranges::find_if(hierarchies, [&](const CgroupHierarchy& h) { return h.id == id; });
  return it == hierarchies.end() ? nullptr : &*it;
}

namespace {

template <class T, class Parse>
Result<T> read_parsed(const std::filesystem::path& path, Parse parse) {
  auto text = read_file(path);
  if (!text) return std::unexpected(text.error());
  auto parsed = parse(*text);
  if (!parsed) return fail(parsed.error().what, path.string());
  return std::move(*parsed);
}

// A mount point at or below `root`, as a path under `onto`; nullopt for mounts elsewhere.
std::optional<std::filesystem::path> mount_under(const std::string& mount_point, const std::string& root,
                                                 const std::filesystem::path& onto) {
  if (mount_point == root) return onto;
  if (!mount_point.starts_with(root + "/")) return std::nullopt;
  return onto / mount_point.substr(root.size() + 1);
}

// Where keel opens each cgroup mount. Under --root (a container's /host) the mountinfo is keel's own
// mount namespace's: the host's hierarchies are the mounts at roots.cgroup itself, and the container's
// own /sys/fs/cgroup mounts (docker's, each rooted at the container's cgroup, /docker/<id>) are not the
// host's. Only where nothing is mounted at roots.cgroup (a temporary tree: its mountinfo names the
// host's paths) are the mounts under /sys/fs/cgroup moved onto roots.cgroup.
std::vector<std::pair<const MountInfo*, std::filesystem::path>> cgroup_mounts(
    const std::vector<MountInfo>& mounts, const SysRoots& roots) {
  const std::string host_root = SysRoots::host().cgroup.string();
  std::vector<std::pair<const MountInfo*, std::filesystem::path>> direct, rebased;
  for (const MountInfo& m : mounts) {
    if (m.fs_type != "cgroup" && m.fs_type != "cgroup2") continue;
    if (roots.cgroup.string() != host_root)
      if (auto dir = mount_under(m.mount_point, roots.cgroup.string(), roots.cgroup))
        direct.emplace_back(&m, std::move(*dir));
    if (auto dir = mount_under(m.mount_point, host_root, roots.cgroup))
      rebased.emplace_back(&m, std::move(*dir));
  }
  return direct.empty() ? rebased : direct;
}

Result<CgroupHierarchy> unified_hierarchy(const MountInfo& m, const std::filesystem::path& dir) {
  auto text = read_file(dir / cgroup_file_name(CgroupFile::controllers, /*unified=*/true));
  if (!text) return std::unexpected(text.error());
  CgroupHierarchy h;
  h.unified = true;
  for (std::string_view c : split_blanks(trim(*text))) h.controllers.emplace_back(c);
  h.mount = dir;
  h.mount_root = m.root;
  return h;
}

// A named hierarchy (name=systemd) has no line in /proc/cgroups; /proc/self/cgroup has its id.
std::optional<uint32_t> named_hierarchy_id(const SysRoots& roots, const std::string& name_option) {
  auto lines = read_parsed<std::vector<ProcessCgroup>>(roots.proc / "self/cgroup", parse_process_cgroups);
  if (!lines) return std::nullopt;
  for (const ProcessCgroup& pc : *lines)
    if (std::ranges::find(pc.controllers, name_option) != pc.controllers.end()) return pc.hierarchy;
  return std::nullopt;
}

// The v1 hierarchy a mount shows, or nullopt when it carries nothing keel can identify.
Result<std::optional<CgroupHierarchy>> v1_hierarchy(const MountInfo& m, const std::filesystem::path& dir,
                                                    const std::vector<ProcCgroupsEntry>& subsystems,
                                                    const SysRoots& roots) {
  CgroupHierarchy h;
  h.mount = dir;
  h.mount_root = m.root;
  h.noprefix = std::ranges::find(m.super_options, "noprefix") != m.super_options.end();
  std::optional<uint32_t> id;
  for (std::string& c : v1_mount_controllers(m)) {
    if (c.starts_with("name=")) {
      if (!id) id = named_hierarchy_id(roots, c);
      h.controllers.push_back(std::move(c));
      continue;
    }
    auto sub = std::ranges::find(subsystems, c, &ProcCgroupsEntry::subsys);
    if (sub == subsystems.end()) continue;  // an option this parser does not know, not a controller
    if (sub->hierarchy == 0)
      return fail(
          "controller " + c + " is mounted at " + dir.string() + " but /proc/cgroups puts it in no hierarchy",
          (roots.proc / "cgroups").string());
    id = sub->hierarchy;
    h.controllers.push_back(std::move(c));
  }
  if (!id || h.controllers.empty()) return std::nullopt;
  h.id = *id;
  return std::optional<CgroupHierarchy>(std::move(h));
}

// A second mount of a hierarchy replaces the first only when it shows the whole hierarchy.
void add_hierarchy(std::vector<CgroupHierarchy>& hs, CgroupHierarchy h) {
  auto same = std::ranges::find_if(
      hs, [&](const CgroupHierarchy& o) { return o.unified == h.unified && o.id == h.id; });
  if (same == hs.end()) {
    hs.push_back(std::move(h));
  } else if (same->mount_root != "/" && h.mount_root == "/") {
    *same = std::move(h);
  }
}

CgroupMode mode_of(const std::vector<CgroupHierarchy>& hs) {
  bool v2 = false, v1 = false;
  for (const CgroupHierarchy& h : hs) {
    if (h.unified) {
      v2 = true;
      continue;
    }
    for (const std::string& c : h.controllers) v1 = v1 || !c.starts_with("name=");
  }
  if (v1 && v2) return CgroupMode::hybrid;
  return v2 ? CgroupMode::v2 : CgroupMode::v1;
}

}  // namespace

Result<CgroupLayout> discover(const SysRoots& roots) {
  const auto mountinfo_path = roots.proc / "self/mountinfo";
  auto mounts = read_parsed<std::vector<MountInfo>>(mountinfo_path, parse_mountinfo);
  if (!mounts) return std::unexpected(mounts.error());
  auto subsystems = read_parsed<std::vector<ProcCgroupsEntry>>(roots.proc / "cgroups", parse_proc_cgroups);
  if (!subsystems) return std::unexpected(subsystems.error());

  std::vector<CgroupHierarchy> v1, v2;
  for (const auto& [mp, dir] : cgroup_mounts(*mounts, roots)) {
    const MountInfo& m = *mp;
    if (m.fs_type == "cgroup2") {
      auto h = unified_hierarchy(m, dir);
      if (!h) return std::unexpected(h.error());
      add_hierarchy(v2, std::move(*h));
    } else {
      auto h = v1_hierarchy(m, dir, *subsystems, roots);
      if (!h) return std::unexpected(h.error());
      if (*h) add_hierarchy(v1, std::move(**h));
    }
  }
  if (v1.empty() && v2.empty())
    return fail("no cgroup hierarchy is mounted under " + SysRoots::host().cgroup.string(),
                mountinfo_path.string());
  CgroupLayout layout;
  layout.hierarchies = std::move(v1);
  for (CgroupHierarchy& h : v2) layout.hierarchies.push_back(std::move(h));
  layout.mode = mode_of(layout.hierarchies);
  for (CgroupHierarchy& h : layout.hierarchies) {
    auto root = host_cgroup_path(roots, h.unified ? 0 : h.id, h.mount_root);
    if (!root)
      return fail("the mount of hierarchy " + h.name() + " at " + h.mount.string() + " shows " +
                      h.mount_root + ", above the hierarchy's root",
                  mountinfo_path.string());
    h.mount_root = std::move(*root);
  }
  return layout;
}

std::optional<std::string> host_cgroup_path(const SysRoots& roots, uint32_t hierarchy,
                                            std::string_view path) {
  auto ns = std::ranges::find(roots.cgroupns_roots, hierarchy, &std::pair<uint32_t, std::string>::first);
  if (ns == roots.cgroupns_roots.end()) return std::string(path);
  std::vector<std::string_view> parts;
  auto add = [&](std::string_view p) {
    for (size_t at = 0; at < p.size();) {
      size_t end = std::min(p.find('/', at), p.size());
      std::string_view e = p.substr(at, end - at);
      at = end + 1;
      if (e.empty()) continue;
      if (e != "..") {
        parts.push_back(e);
      } else if (parts.empty()) {
        return false;
      } else {
        parts.pop_back();
      }
    }
    return true;
  };
  // The kernel writes ".." only for levels above the namespace's root; no cgroup can be named "..".
  if (!add(ns->second) || !add(path)) return std::nullopt;
  std::string out;
  for (std::string_view e : parts) (out += '/') += e;
  return out.empty() ? std::string("/") : out;
}

namespace {

// The cgroup at `depth` levels below the hierarchy's root whose path ends with `tail` (its elements)
// and whose cgroup.procs lists `pid`: the walk goes through every cgroup above that depth (bounded as
// every walk is) and follows only `tail` below it.
std::optional<std::string> cgroup_holding(const std::filesystem::path& mount, size_t depth,
                                          const std::vector<std::string>& tail, pid_t pid) {
  std::vector<std::string> level{""};  // paths from the root: "" is the root itself
  size_t seen = 0;
  for (size_t d = 0; d < depth && !level.empty(); ++d) {
    std::vector<std::string> next;
    for (const std::string& p : level) {
      std::error_code ec;
      for (std::filesystem::directory_iterator it(mount / p.substr(p.empty() ? 0 : 1), ec), end;
           !ec && it != end; it.increment(ec)) {
        if (!it->is_directory(ec) || it->is_symlink(ec)) continue;
        std::string child = p + "/" + it->path().filename().string();
        if (++seen > kMaxCgroups || beyond_walk_bounds(child)) continue;
        next.push_back(std::move(child));
      }
    }
    level = std::move(next);
  }
  const std::string want = std::to_string(pid);
  for (const std::string& p : level) {
    std::string at = p;
    for (const std::string& e : tail) at += "/" + e;
    if (beyond_walk_bounds(at.empty() ? "/" : at)) continue;
    auto procs = read_file(mount / (at.empty() ? std::string(".") : at.substr(1)) / "cgroup.procs");
    if (!procs) continue;
    for (std::string_view rest = *procs; !rest.empty();) {
      size_t nl = std::min(rest.find('\n'), rest.size());
      if (rest.substr(0, nl) == want) return p.empty() ? std::string("/") : p;
      rest.remove_prefix(std::min(rest.size(), nl + 1));
    }
  }
  return std::nullopt;
}

}  // namespace

Result<SysRoots> with_cgroupns(SysRoots roots) {
  roots.cgroupns_roots.clear();
  // Not by comparing <proc>/self/ns/cgroup with pid 1's: reading another process's namespace needs
  // CAP_SYS_PTRACE over it, which keel does not hold. A mount whose root the kernel shows as "/.." is
  // above keel's namespace's root.
  auto layout = discover(roots);
  if (!layout) return std::unexpected(layout.error());
  if (std::ranges::none_of(layout->hierarchies,
                           [](const CgroupHierarchy& h) { return h.mount_root.starts_with("/.."); }))
    return roots;  // the host's namespace, or one whose mounts are all its own
  const auto self_file = roots.proc / "self/cgroup";
  auto lines = read_parsed<std::vector<ProcessCgroup>>(self_file, parse_process_cgroups);
  if (!lines) return std::unexpected(lines.error());
  std::vector<std::pair<uint32_t, std::string>> found;
  for (const CgroupHierarchy& h : layout->hierarchies) {
    if (!h.mount_root.starts_with("/..")) continue;  // within the namespace: paths are as shown
    size_t depth = 0;
    std::string_view m = h.mount_root;
    for (; m.starts_with("/.."); m.remove_prefix(3)) ++depth;
    if (!m.empty())
      return fail("hierarchy " + h.name() + " is mounted at " + h.mount.string() + " from " + h.mount_root +
                      ", not its root: keel's cgroup namespace's root cannot be found in it",
                  (roots.proc / "self/mountinfo").string());
    const uint32_t id = h.unified ? 0 : h.id;
    auto line = std::ranges::find_if(*lines, [&](const ProcessCgroup& pc) {
      return h.unified ? pc.hierarchy == 0 && pc.controllers.empty() : pc.hierarchy == id;
    });
    if (line == lines->end()) return fail("no line for hierarchy " + h.name(), self_file.string());
    std::vector<std::string> tail;
    for (size_t at = 0; at < line->path.size();) {
      size_t end = std::min(line->path.find('/', at), line->path.size());
      if (end > at) tail.push_back(line->path.substr(at, end - at));
      at = end + 1;
    }
    if (std::ranges::find(tail, "..") != tail.end())
      return fail("keel's own cgroup " + line->path + " is outside its cgroup namespace", self_file.string());
    auto root = cgroup_holding(h.mount, depth, tail, ::getpid());
    if (!root)
      return fail("no cgroup " + std::to_string(depth) + " levels below the root of hierarchy " + h.name() +
                      " at " + h.mount.string() + " holds keel's process (" + std::to_string(::getpid()) +
                      ") at " + line->path + ": keel's cgroup namespace's root is not known",
                  self_file.string());
    found.emplace_back(id, std::move(*root));
  }
  roots.cgroupns_roots = std::move(found);
  return roots;
}

// ---- Cgroups ----

std::string CgroupId::str() const { return std::to_string(hierarchy) + ":" + std::to_string(inode); }

namespace {

// A cgroup removed while we look at it shows as ENOENT (gone from its parent) or ENODEV (its
// files were opened before the removal).
bool vanished(int err) { return err == ENOENT || err == ENODEV; }

// Lines of the cgroup's process list (`name`, under `dirfd`), or -errno.
long long count_procs(int dirfd, const char* name) {
  Fd fd(::openat(dirfd, name, O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) return -errno;
  char buf[4096];
  long long lines = 0;
  char last = '\n';
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -errno;
    if (n == 0) break;
    lines += std::count(buf, buf + n, '\n');
    last = buf[n - 1];
  }
  return lines + (last != '\n' ? 1 : 0);
}

// "/a/b" with bytes a terminal would act on escaped, cut to its first and last 40 bytes.
std::string shown(std::string_view path) {
  std::string out;
  auto put = [&](std::string_view part) {
    for (unsigned char c : part) {
      if (c >= 0x20 && c < 0x7f && c != '\\') {
        out += static_cast<char>(c);
      } else {
        static constexpr char kHex[] = "0123456789abcdef";
        out += "\\x";
        out += kHex[c >> 4];
        out += kHex[c & 0xf];
      }
    }
  };
  if (path.size() <= 80) {
    put(path);
  } else {
    put(path.substr(0, 40));
    out += "...";
    put(path.substr(path.size() - 40));
  }
  return out;
}

// Depth first without recursion (a tree is as deep as a tenant makes it): a cgroup waiting to be
// visited holds its parent's directory open, so at most one directory per level is open, and no path
// longer than one name is ever opened. The output's storage is reused.
class Walker {
 public:
  Walker(const CgroupHierarchy& h, std::vector<Cgroup>& out, CgroupSkips& skipped, size_t max_cgroups)
      : h_(h),
        out_(out),
        skipped_(skipped),
        max_(max_cgroups),
        procs_name_(cgroup_file_name(CgroupFile::procs, h)) {
    skipped_.max_cgroups = max_cgroups;
  }

  Result<void> run() {
    Fd root(::open(h_.mount.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (root.get() < 0) {
      const int err = errno;
      return fail("cannot open cgroup hierarchy root", h_.mount.string(), err);
    }
    auto r = walk(std::move(root));
    out_.resize(used_);
    return r;
  }

 private:
  struct Dir {
    Fd fd;
    std::string path;  // "" at the root, "/a/b" below
  };
  struct Waiting {
    std::shared_ptr<const Dir> parent;
    std::string name;
  };

  Result<void> walk(Fd root) {
    if (auto r = visit(std::make_shared<Dir>(Dir{std::move(root), {}}), /*is_root=*/true); !r) return r;
    while (!todo_.empty()) {
      Waiting w = std::move(todo_.back());
      todo_.pop_back();
      std::string path = w.parent->path + "/" + w.name;
      if (used_ >= max_) {
        skipped_.add(CgroupSkips::too_many, path);
        continue;
      }
      if (auto why = beyond_walk_bounds(path)) {
        skipped_.add(*why, path);
        continue;
      }
      Fd child(::openat(w.parent->fd.get(), w.name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      const int err = errno;
      w.parent.reset();  // its last waiting child closes it
      if (child.get() < 0) {
        if (vanished(err) || err == ENOTDIR || err == ELOOP) continue;  // gone, or not a cgroup
        return fail("cannot open cgroup", where(path), err);
      }
      if (auto r = visit(std::make_shared<Dir>(Dir{std::move(child), std::move(path)}), false); !r) return r;
    }
    return {};
  }

  Result<void> visit(std::shared_ptr<const Dir> dir, bool is_root) {
    struct stat st;
    if (::fstat(dir->fd.get(), &st) != 0) {
      const int err = errno;
      return fail("cannot stat cgroup", where(dir->path), err);
    }
    long long procs = count_procs(dir->fd.get(), procs_name_.c_str());
    if (procs < 0 && vanished(static_cast<int>(-procs)) && !is_root) return {};
    // Threaded v2 cgroups refuse to list processes; their domain's cgroup.procs counts them.
    if (procs == -EOPNOTSUPP) procs = 0;
    if (procs < 0) return fail("cannot read " + procs_name_, where(dir->path), static_cast<int>(-procs));
    emit(dir->path, st.st_ino, static_cast<unsigned>(procs));
    return list(std::move(dir));
  }

  // Queues the subdirectories of `dir`, last first (they are sorted by path at the end anyway).
  Result<void> list(std::shared_ptr<const Dir> dir) {
    alignas(struct dirent64) char buf[4096];
    for (;;) {
      const ssize_t n = ::getdents64(dir->fd.get(), buf, sizeof buf);
      const int err = errno;
      if (n < 0 && err == EINTR) continue;
      if (n < 0 && vanished(err)) return {};
      if (n < 0) return fail("cannot list cgroup", where(dir->path), err);
      if (n == 0) return {};
      for (ssize_t off = 0; off < n;) {
        const auto* d = reinterpret_cast<const struct dirent64*>(buf + off);
        off += d->d_reclen;
        const std::string_view name = d->d_name;
        if ((d->d_type != DT_DIR && d->d_type != DT_UNKNOWN) || name == "." || name == "..") continue;
        // Past the bound no more are visited: counted, not queued (a directory may hold millions).
        if (used_ + todo_.size() >= max_) {
          skipped_.add(CgroupSkips::too_many, dir->path + "/" + std::string(name));
          continue;
        }
        todo_.push_back({dir, std::string(name)});
      }
    }
  }

  void emit(const std::string& path, ino_t inode, unsigned procs) {
    if (used_ == out_.size()) out_.emplace_back();
    Cgroup& c = out_[used_++];
    if (path.empty()) {
      c.path.assign("/");
    } else {
      c.path.assign(path);
    }
    c.id = CgroupId{h_.id, static_cast<uint64_t>(inode)};
    c.nr_procs = procs;
  }

  std::string where(const std::string& path) const {
    return path.empty() ? h_.mount.string() : (h_.mount / path.substr(1)).string();
  }

  const CgroupHierarchy& h_;
  std::vector<Cgroup>& out_;
  CgroupSkips& skipped_;
  size_t max_;
  std::string procs_name_;
  size_t used_ = 0;
  std::vector<Waiting> todo_;
};

}  // namespace

std::optional<CgroupSkips::Why> beyond_walk_bounds(std::string_view path) {
  if (path.size() > kMaxCgroupPath) return CgroupSkips::too_long;
  if (static_cast<size_t>(std::count(path.begin(), path.end(), '/')) > kMaxCgroupDepth)
    return CgroupSkips::too_deep;
  return std::nullopt;
}

void CgroupSkips::add(Why why, std::string_view path) {
  if (empty()) example = shown(path);
  ++count[why];
}

std::string CgroupSkips::message() const {
  if (empty()) return {};
  std::string out;
  auto part = [&](Why why, const std::string& text) {
    if (count[why] == 0) return;
    out += (out.empty() ? "" : ", ") + std::to_string(count[why]) + " " + text;
  };
  part(too_deep, "more than " + std::to_string(kMaxCgroupDepth) + " levels deep");
  part(too_long, "with a path longer than " + std::to_string(kMaxCgroupPath) + " bytes");
  part(too_many, "past the first " + std::to_string(max_cgroups) + " cgroups");
  return "cgroups left out, each with what is below it: " + out + " (the first: " + example + ")";
}

Result<void> enumerate_cgroups(const CgroupHierarchy& hierarchy, std::vector<Cgroup>& out,
                               CgroupSkips* skipped, size_t max_cgroups) {
  CgroupSkips local;
  auto r = Walker(hierarchy, out, skipped != nullptr ? *skipped : local, max_cgroups).run();
  if (!r) return r;
  std::ranges::sort(out, {}, &Cgroup::path);
  return {};
}

Result<std::vector<Cgroup>> enumerate_cgroups(const CgroupHierarchy& hierarchy, CgroupSkips* skipped,
                                              size_t max_cgroups) {
  std::vector<Cgroup> out;
  auto r = enumerate_cgroups(hierarchy, out, skipped, max_cgroups);
  if (!r) return std::unexpected(r.error());
  return out;
}

Result<std::vector<std::string>> process_cgroup_paths(const SysRoots& roots, pid_t pid,
                                                      std::span<const CgroupHierarchy* const> hierarchies) {
  const auto file = roots.proc / std::to_string(pid) / "cgroup";
  auto lines = read_parsed<std::vector<ProcessCgroup>>(file, parse_process_cgroups);
  if (!lines) return std::unexpected(lines.error());
  std::vector<std::string> paths;
  for (const CgroupHierarchy* hierarchy : hierarchies) {
    auto of_hierarchy = [&](const ProcessCgroup& pc) {
      return hierarchy->unified ? pc.hierarchy == 0 && pc.controllers.empty() : pc.hierarchy == hierarchy->id;
    };
    auto line = std::ranges::find_if(*lines, of_hierarchy);
    if (line == lines->end()) return fail("no line for hierarchy " + hierarchy->name(), file.string());
    // The kernel writes a cgroup's name as it is, a newline included: a tenant's cgroup named
    // "x\n3:cpuset:/" adds a line that claims another cgroup. Each hierarchy has one line; two are a
    // forgery, and the process's cgroup is unknown.
    if (std::ranges::count_if(*lines, of_hierarchy) > 1)
      return fail("more than one line for hierarchy " + hierarchy->name() +
                      ": a cgroup name with a newline in it; the process's cgroup is not trusted",
                  file.string());
    // In a cgroup namespace of keel's own the kernel shows paths from its root: the host's path.
    auto shown = host_cgroup_path(roots, hierarchy->unified ? 0 : hierarchy->id, line->path);
    if (!shown) return fail("cgroup " + line->path + " is above its hierarchy's root", file.string());
    const std::string& root = hierarchy->mount_root;
    if (root == "/")
      paths.push_back(std::move(*shown));
    else if (*shown == root)
      paths.emplace_back("/");
    else if (shown->starts_with(root + "/"))
      paths.push_back(shown->substr(root.size()));
    else
      return fail("cgroup " + *shown + " is outside the mounted subtree " + root, file.string());
  }
  return paths;
}

Result<std::string> process_cgroup_path(const SysRoots& roots, pid_t pid, const CgroupHierarchy& hierarchy) {
  const CgroupHierarchy* one[] = {&hierarchy};
  auto paths = process_cgroup_paths(roots, pid, one);
  if (!paths) return std::unexpected(paths.error());
  return std::move(paths->front());
}

}  // namespace keel
