#include "actuators/state_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdio>

namespace keel::act {

namespace fs = std::filesystem;

namespace {

std::string octal(mode_t m) {
  char b[8];
  std::snprintf(b, sizeof b, "%04o", static_cast<unsigned>(m & 07777));
  return b;
}

// An ancestor others could rename the state directory out of, or swap: refused.
Result<void> check_ancestor(const fs::path& p) {
  struct stat st;
  if (::stat(p.c_str(), &st) != 0)
    return fail_errno("cannot stat an ancestor of the state directory", p.string());
  if (st.st_uid != 0 && st.st_uid != ::geteuid())
    return fail("an ancestor of the state directory is owned by uid " + std::to_string(st.st_uid) +
                    " (it must be root's): its owner could replace the state directory",
                p.string());
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0)
    return fail("an ancestor of the state directory is writable by group or others (mode " +
                    octal(st.st_mode) + ", not sticky): they could replace the state directory",
                p.string());
  return {};
}

bool valid_name(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

Result<void> check_file(const struct stat& st, const std::string& path) {
  if (!S_ISREG(st.st_mode)) return fail("not a regular file (keel's state files are)", path);
  if (st.st_uid != ::geteuid())
    return fail("owned by uid " + std::to_string(st.st_uid) + ", not keel's user (" +
                    std::to_string(::geteuid()) + "): not trusted",
                path);
  if (st.st_nlink != 1)
    return fail("has " + std::to_string(st.st_nlink) + " links (a hard link to another file?): not trusted",
                path);
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return fail("writable by group or others (mode " + octal(st.st_mode) + "): not trusted", path);
  return {};
}

}  // namespace

Result<std::optional<StateDir>> StateDir::open(const fs::path& dir, bool create) {
  if (!dir.is_absolute()) return fail("the state directory must be an absolute path", dir.string());
  fs::path norm = dir.lexically_normal();
  if (norm.has_filename() == false) norm = norm.parent_path();  // "/var/lib/keel/" -> "/var/lib/keel"
  if (norm == norm.root_path()) return fail("the state directory cannot be /", dir.string());
  const std::string name = norm.filename().string();
  if (!valid_name(name)) return fail("not a directory name", dir.string());
  std::error_code ec;
  fs::path parent = norm.parent_path();
  if (create) {
    fs::create_directories(parent, ec);  // root's, 0755 under keel's umask
    if (ec) return fail("cannot create the state directory's parents", parent.string(), ec.value());
  }
  fs::path real_parent = fs::canonical(parent, ec);
  if (ec) {
    if (!create && ec.value() == ENOENT) return std::optional<StateDir>();
    return fail("cannot resolve the state directory's parent", parent.string(), ec.value());
  }
  fs::path at = "/";
  if (auto r = check_ancestor(at); !r) return std::unexpected(r.error());
  for (const auto& part : real_parent.relative_path()) {
    at /= part;
    if (auto r = check_ancestor(at); !r) return std::unexpected(r.error());
  }
  Fd pfd(::open(real_parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!pfd.valid()) return fail_errno("cannot open the state directory's parent", real_parent.string());
  if (create && ::mkdirat(pfd.get(), name.c_str(), 0700) != 0 && errno != EEXIST)
    return fail_errno("cannot create the state directory", norm.string());
  StateDir d;
  d.path_ = norm;
  d.fd_.reset(::openat(pfd.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!d.fd_.valid()) {
    if (errno == ENOENT && !create) return std::optional<StateDir>();
    if (errno == ELOOP || errno == ENOTDIR)
      return fail("the state directory is a symbolic link or not a directory: refused", norm.string());
    return fail_errno("cannot open the state directory", norm.string());
  }
  struct stat st;
  if (::fstat(d.fd_.get(), &st) != 0) return fail_errno("cannot stat the state directory", norm.string());
  if (st.st_uid != ::geteuid())
    return fail("the state directory is owned by uid " + std::to_string(st.st_uid) + ", not keel's user (" +
                    std::to_string(::geteuid()) + "): its owner could plant a journal keel would apply",
                norm.string());
  if ((st.st_mode & 077) != 0)
    return fail("the state directory has mode " + octal(st.st_mode) +
                    ": it must give group and others no access (chmod 0700; a shared directory such as /tmp "
                    "is refused)",
                norm.string());
  return std::optional<StateDir>(std::move(d));
}

Result<Fd> StateDir::open_file(std::string_view name, int flags, mode_t mode) const {
  const std::string n(name);
  const std::string p = file(name);
  if (!valid_name(name)) return fail("not a file name", p);
  Fd fd(::openat(fd_.get(), n.c_str(), flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, mode));
  if (!fd.valid()) {
    if (errno == ELOOP) return fail("a symbolic link (keel's state files never are): refused", p, ELOOP);
    return fail_errno("cannot open", p);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return fail_errno("cannot stat", p);
  if (auto r = check_file(st, p); !r) return std::unexpected(r.error());
  // O_NONBLOCK only kept a FIFO from blocking the open; a regular file's writes ignore it, reads too.
  return fd;
}

Result<std::optional<std::string>> StateDir::read(std::string_view name, size_t max) const {
  auto fd = open_file(name, O_RDONLY);
  if (!fd) {
    if (fd.error().err == ENOENT) return std::optional<std::string>();
    return std::unexpected(fd.error());
  }
  struct stat st;
  if (::fstat(fd->get(), &st) != 0) return fail_errno("cannot stat", file(name));
  if (st.st_size > static_cast<off_t>(max))
    return fail(std::to_string(st.st_size) + " bytes, more than the " + std::to_string(max) + " it may hold",
                file(name));
  std::string text(static_cast<size_t>(st.st_size) + 1, '\0');
  size_t got = 0;
  while (got < text.size()) {
    ssize_t n = ::read(fd->get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail_errno("cannot read", file(name));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > static_cast<size_t>(st.st_size)) return fail("grew while read", file(name));
  text.resize(got);
  return std::optional<std::string>(std::move(text));
}

bool StateDir::exists(std::string_view name) const {
  struct stat st;
  return valid_name(name) && ::fstatat(fd_.get(), std::string(name).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
}

Result<void> StateDir::sync() const {
  if (::fsync(fd_.get()) != 0) return fail_errno("cannot fsync the state directory", path_.string());
  return {};
}

Result<void> StateDir::replace(std::string_view name, std::string_view text, const std::string& what) const {
  const std::string tmp = std::string(name) + ".tmp";
  // A crash mid-replace leaves a stale tmp: removed (unlink never follows a link), then made anew.
  if (::unlinkat(fd_.get(), tmp.c_str(), 0) != 0 && errno != ENOENT)
    return fail_errno("cannot remove a stale " + tmp, file(tmp));
  auto fd = open_file(tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (!fd) return fail("cannot write " + what + ": " + fd.error().what, fd.error().path, fd.error().err);
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd->get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      (void)::unlinkat(fd_.get(), tmp.c_str(), 0);
      return fail("cannot write " + what, file(tmp), e);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd->get()) != 0) {
    int e = errno;
    (void)::unlinkat(fd_.get(), tmp.c_str(), 0);
    return fail("cannot fsync " + what, file(tmp), e);
  }
  fd->reset();
  if (::renameat(fd_.get(), tmp.c_str(), fd_.get(), std::string(name).c_str()) != 0) {
    int e = errno;
    (void)::unlinkat(fd_.get(), tmp.c_str(), 0);
    return fail("cannot rename " + what + " into place", file(name), e);
  }
  return sync();
}

Result<void> StateDir::remove(std::string_view name) const {
  if (!valid_name(name)) return fail("not a file name", file(name));
  if (::unlinkat(fd_.get(), std::string(name).c_str(), 0) != 0) {
    if (errno == ENOENT) return {};
    return fail_errno("cannot remove", file(name));
  }
  return sync();
}

uint32_t crc32c(std::string_view data, uint32_t crc) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) != 0 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (unsigned char b : data) crc = table[(crc ^ b) & 0xff] ^ (crc >> 8);
  return ~crc;
}

}  // namespace keel::act
