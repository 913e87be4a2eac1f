// Small file helpers for kernel files: whole-file reads, single-write writes, errors with path.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "host/error.h"

namespace keel {

Result<std::string> read_file(const std::filesystem::path& path);
// The first line without its newline (kernel single-value files).
Result<std::string> read_line(const std::filesystem::path& path);
Result<long long> read_int(const std::filesystem::path& path);
// One write(2) of the whole value, as kernel files expect; no O_CREAT.
Result<void> write_file(const std::filesystem::path& path, std::string_view value);

std::string_view trim(std::string_view s);

}  // namespace keel
