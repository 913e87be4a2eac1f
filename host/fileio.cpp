#include "host/fileio.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>

#include "host/fd.h"

namespace keel {

Result<std::string> read_file(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail_errno("cannot open", path.string());
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      return fail("cannot read", path.string(), e);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

Result<std::string> read_line(const std::filesystem::path& path) {
  auto all = read_file(path);
  if (!all) return std::unexpected(all.error());
  auto nl = all->find('\n');
  if (nl != std::string::npos) all->resize(nl);
  return std::string(trim(*all));
}

Result<long long> read_int(const std::filesystem::path& path) {
  auto line = read_line(path);
  if (!line) return std::unexpected(line.error());
  long long v = 0;
  auto [p, ec] = std::from_chars(line->data(), line->data() + line->size(), v);
  if (ec != std::errc() || p != line->data() + line->size())
    return fail("not an integer: '" + *line + "'", path.string());
  return v;
}

Result<void> write_file(const std::filesystem::path& path, std::string_view value) {
  int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) return fail_errno("cannot open for writing", path.string());
  ssize_t n;
  do {
    n = ::write(fd, value.data(), value.size());
  } while (n < 0 && errno == EINTR);
  int e = errno;
  ::close(fd);
  if (n < 0) return fail("write of '" + std::string(value) + "' refused", path.string(), e);
  if (static_cast<size_t>(n) != value.size())
    return fail("short write of '" + std::string(value) + "'", path.string());
  return {};
}

Result<std::string> read_owned_file(const std::filesystem::path& path, size_t max) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ELOOP) return fail(path.string() + ": a symbolic link (it must be the file itself)");
    return fail_errno("cannot open", path.string());
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return fail_errno("cannot stat", path.string());
  if (!S_ISREG(st.st_mode)) return fail(path.string() + ": not a regular file");
  if (st.st_uid != 0 && st.st_uid != ::geteuid())
    return fail(path.string() + ": owned by uid " + std::to_string(st.st_uid) + ", not root");
  if (st.st_size > static_cast<off_t>(max))
    return fail(path.string() + ": " + std::to_string(st.st_size) + " bytes, more than the " +
                std::to_string(max) + " such a file holds");
  std::string text(max + 1, '\0');
  size_t got = 0;
  while (got < text.size()) {
    ssize_t n = ::read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail_errno("cannot read", path.string());
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > max) return fail(path.string() + ": grew past " + std::to_string(max) + " bytes");
  text.resize(got);
  return text;
}

std::vector<std::string_view> split_blanks(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    size_t start = i;
    while (i < s.size() && s[i] != ' ' && s[i] != '\t') ++i;
    if (i > start) out.push_back(s.substr(start, i - start));
  }
  return out;
}

}  // namespace keel
