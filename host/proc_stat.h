// /proc/PID/stat, read as proc(5) numbers its fields: the command (field 2) is in parentheses and may
// hold spaces and parentheses itself, so the fields are counted after its last ')'.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace keel {

struct ProcStat {
  std::string_view comm;               // field 2, without its parentheses
  std::vector<std::string_view> rest;  // fields 3 (state) onwards
  // Field `n` (proc(5)'s numbering, 3 or more), or none past the end.
  std::optional<std::string_view> field(size_t n) const;
  // Field `n` as a whole unsigned number, or none.
  std::optional<uint64_t> number(size_t n) const;
};

// `text` (a view into it), or none when it has no command in parentheses.
std::optional<ProcStat> parse_proc_stat(std::string_view text);

}  // namespace keel
