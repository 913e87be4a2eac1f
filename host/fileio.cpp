#include "host/fileio.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>

#include "host/fd.h"

namespace keel {

namespace {

// Opens `path` without blocking (a FIFO's open would wait for a writer) and reads it whole: a regular
// file of at most `max` bytes. `owner`: also root's or keel's own user's, and (its size known ahead)
// not larger than `max` before a byte is read.
Result<std::string> read_regular(const std::filesystem::path& path, size_t max, bool nofollow, bool owner) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0)));
  if (!fd.valid()) {
    if (nofollow && errno == ELOOP)
      return fail("a symbolic link (it must be the file itself)", path.string());
    return fail_errno("cannot open", path.string());
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return fail_errno("cannot stat", path.string());
  if (!S_ISREG(st.st_mode)) return fail("not a regular file", path.string());
  if (owner && st.st_uid != 0 && st.st_uid != ::geteuid())
    return fail("owned by uid " + std::to_string(st.st_uid) + ", not root", path.string());
  if (st.st_size > static_cast<off_t>(max))
    return fail(
        std::to_string(st.st_size) + " bytes, more than the " + std::to_string(max) + " such a file holds",
        path.string());
  // Kernel files say size 0 and are read until they end; one byte past `max` tells a larger one.
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail_errno("cannot read", path.string());
    if (n == 0) break;
    if (out.size() + static_cast<size_t>(n) > max)
      return fail("grew past " + std::to_string(max) + " bytes", path.string());
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

std::string first_line(std::string all) {
  auto nl = all.find('\n');
  if (nl != std::string::npos) all.resize(nl);
  return std::string(trim(all));
}

}  // namespace

Result<std::string> read_file(const std::filesystem::path& path, size_t max) {
  return read_regular(path, max, /*nofollow=*/false, /*owner=*/false);
}

Result<std::string> read_file_nofollow(const std::filesystem::path& path, size_t max) {
  return read_regular(path, max, /*nofollow=*/true, /*owner=*/false);
}

Result<std::string> read_line_nofollow(const std::filesystem::path& path) {
  auto all = read_file_nofollow(path, kMaxLineFileBytes);
  if (!all) return std::unexpected(all.error());
  return first_line(std::move(*all));
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

Result<std::string> read_line(const std::filesystem::path& path) {
  auto all = read_file(path, kMaxLineFileBytes);
  if (!all) return std::unexpected(all.error());
  return first_line(std::move(*all));
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
  return read_regular(path, max, /*nofollow=*/true, /*owner=*/true);
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

std::string percent_encode(std::string_view s, std::string_view plain) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
        (c != 0 && plain.find(static_cast<char>(c)) != std::string_view::npos)) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

bool percent_decode(std::string_view s, std::string& out) {
  out.clear();
  auto val = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return false;  // "%" needs two hex digits
    const int hi = val(s[i + 1]), lo = val(s[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return true;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (;;) {
    const size_t at = s.find(sep);
    out.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return out;
    s.remove_prefix(at + 1);
  }
}

std::string count_of(unsigned long long n, std::string_view one, std::string_view many) {
  return std::to_string(n) + " " + std::string(n == 1 ? one : many);
}

// Built by appending: g++ 12 at -O3 warns falsely (-Wrestrict) on "'" + std::string.
std::string quoted(std::string_view s) {
  std::string q = "'";
  q += s;
  q += '\'';
  return q;
}

bool all_digits(std::string_view s, size_t max) {
  return !s.empty() && s.size() <= max &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace keel
