// Small file helpers for kernel files: whole-file reads, single-write writes, errors with path.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "host/error.h"

namespace keel {

// Bounds on what one read takes: any file (a cgroup.procs of every pid of a 4M-pid host is 32 MiB),
// and a single-value file (read_line, read_int).
inline constexpr size_t kMaxFileBytes = 64 << 20, kMaxLineFileBytes = 64 << 10;

// The whole file. Opened without blocking: it must be a regular file (kernel pseudo-files are, of
// size 0), so a FIFO or a device put in a file's place is refused, never waited on; more than `max`
// bytes is an error.
Result<std::string> read_file(const std::filesystem::path& path, size_t max = kMaxFileBytes);
// The first line without its newline (kernel single-value files).
Result<std::string> read_line(const std::filesystem::path& path);
Result<long long> read_int(const std::filesystem::path& path);
// A file under a directory a user named (a copy of resctrl's info/, a tree for another host): as
// read_file, and a symbolic link is refused too.
Result<std::string> read_file_nofollow(const std::filesystem::path& path, size_t max);
// Its first line, as read_line.
Result<std::string> read_line_nofollow(const std::filesystem::path& path);
// One write(2) of the whole value, as kernel files expect; no O_CREAT.
Result<void> write_file(const std::filesystem::path& path, std::string_view value);

// A file another program keeps (a pid file, a container runtime's state): opened without following a
// symbolic link and without blocking, it must be a regular file owned by root (or by keel's own user)
// of at most `max` bytes; a FIFO, a device, a link or a larger file is refused, never read.
Result<std::string> read_owned_file(const std::filesystem::path& path, size_t max);

std::string_view trim(std::string_view s);
// Splits at runs of spaces and tabs, dropping empty pieces.
std::vector<std::string_view> split_blanks(std::string_view s);
// Splits at `sep`, keeping empty pieces.
std::vector<std::string_view> split(std::string_view s, char sep);
// "1 whole core", "3 CPUs".
std::string count_of(unsigned long long n, std::string_view one, std::string_view many);
// 'text', in single quotes, as keel's messages quote a kernel's words.
std::string quoted(std::string_view s);
// Only ASCII digits, at least one and at most `max` (10: any u32 fits and nothing longer is a pid).
bool all_digits(std::string_view s, size_t max = std::string_view::npos);
// Percent-encoding (%xx, lower-case hex) of every byte but ASCII letters, digits and those in `plain`;
// decoding fails on a '%' without two hex digits after it.
std::string percent_encode(std::string_view s, std::string_view plain);
bool percent_decode(std::string_view s, std::string& out);

}  // namespace keel
