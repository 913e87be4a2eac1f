// Small file helpers for kernel files: whole-file reads, single-write writes, errors with path.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "host/error.h"

namespace keel {

Result<std::string> read_file(const std::filesystem::path& path);
// The first line without its newline (kernel single-value files).
Result<std::string> read_line(const std::filesystem::path& path);
Result<long long> read_int(const std::filesystem::path& path);
// One write(2) of the whole value, as kernel files expect; no O_CREAT.
Result<void> write_file(const std::filesystem::path& path, std::string_view value);

// A file another program keeps (a pid file, a container runtime's state): opened without following a
// symbolic link and without blocking, it must be a regular file owned by root (or by keel's own user)
// of at most `max` bytes; a FIFO, a device, a link or a larger file is refused, never read.
Result<std::string> read_owned_file(const std::filesystem::path& path, size_t max);

std::string_view trim(std::string_view s);
// Splits at runs of spaces and tabs, dropping empty pieces.
std::vector<std::string_view> split_blanks(std::string_view s);

}  // namespace keel
