#include "host/proc_stat.h"

#include <charconv>

namespace keel {

std::optional<std::string_view> ProcStat::field(size_t n) const {
  if (n < 3 || n - 3 >= rest.size()) return std::nullopt;
  return rest[n - 3];
}

std::optional<uint64_t> ProcStat::number(size_t n) const {
  auto f = field(n);
  if (!f) return std::nullopt;
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(f->data(), f->data() + f->size(), v);
  if (ec != std::errc() || end != f->data() + f->size()) return std::nullopt;
  return v;
}

std::optional<ProcStat> parse_proc_stat(std::string_view text) {
  const size_t open = text.find('('), close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) return std::nullopt;
  ProcStat s;
  s.comm = text.substr(open + 1, close - open - 1);
  std::string_view rest = text.substr(close + 1);
  for (size_t i = 0; i < rest.size();) {
    const size_t start = rest.find_first_not_of(" \n", i);
    if (start == std::string_view::npos) break;
    size_t end = rest.find_first_of(" \n", start);
    if (end == std::string_view::npos) end = rest.size();
    s.rest.push_back(rest.substr(start, end - start));
    i = end;
  }
  return s;
}

}  // namespace keel
