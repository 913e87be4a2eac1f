// Globs: cgroup paths (inventory/workloads.h glob_match, with ** across levels) and IRQ handler
// names (actuators/irq.h glob_match, fnmatch). The input is a pattern and a text split at the first
// NUL. Properties: a pattern without metacharacters matches exactly itself; a text with each
// metacharacter quoted matches itself; '*' matches any one level and "**" any non-empty path; the two
// globs agree where their languages are the same (literals, '?', '*' and plain classes on ASCII
// without '/'). Evaluation must stay polynomial: "*a*a*a...b" against "aaaa..." is in the corpus and
// the run's timeout fails anything slow.
#include <string>

#include "actuators/irq.h"
#include "fuzz/check.h"
#include "inventory/workloads.h"

namespace {

bool has_meta(std::string_view p) { return p.find_first_of("*?[\\") != std::string_view::npos; }

std::string quote(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '*' || c == '?' || c == '[' || c == '\\' || c == ']') out += '\\';
    out += c;
  }
  return out;
}

// Where fnmatch and the cgroup glob mean the same: no '/', ASCII, classes of letters and digits only
// (no negation, ranges, ']' members or POSIX classes), no quoting, no "**".
bool same_language(std::string_view p, std::string_view s) {
  auto ascii = [](std::string_view x) {
    for (char c : x)
      if (static_cast<unsigned char>(c) >= 0x80 || c == '\0' || c == '/') return false;
    return true;
  };
  // A trailing "**" needs one more level where fnmatch's "*" takes nothing.
  if (!ascii(p) || !ascii(s) || p.find('\\') != std::string_view::npos ||
      p.find("**") != std::string_view::npos)
    return false;
  bool in_class = false;
  for (char c : p) {
    if (c == '[') {
      if (in_class) return false;
      in_class = true;
    } else if (c == ']') {
      in_class = false;
    } else if (in_class && !((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) {
      return false;
    }
  }
  return !in_class && p.find("[]") == std::string_view::npos;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto [pattern, text] = keel::fuzz::split_at(keel::fuzz::as_text(data, size), '\0');
  const bool cg = keel::glob_match(pattern, text);
  const bool irq = keel::act::glob_match(pattern, text);
  if (!has_meta(pattern)) {
    FUZZ_CHECK(cg == (pattern == text));
    FUZZ_CHECK(keel::glob_match(pattern, pattern));
    if (text.find('\0') == std::string_view::npos) FUZZ_CHECK(irq == (pattern == text));
  }
  FUZZ_CHECK(keel::glob_match(quote(text), text));
  if (text.find('\0') == std::string_view::npos) {
    FUZZ_CHECK(keel::act::glob_match(quote(text), text));
    FUZZ_CHECK(keel::act::glob_match("*", text));
  }
  const bool one_level = text.find('/') == std::string_view::npos;
  FUZZ_CHECK(keel::glob_match("*", text) == one_level);
  FUZZ_CHECK(keel::glob_match("**", text) == !text.empty());
  FUZZ_CHECK(keel::glob_match("/**", "/" + std::string(text)) == !text.empty());
  if (same_language(pattern, text)) FUZZ_CHECK(cg == irq);
  return 0;
}
