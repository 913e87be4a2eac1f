// keel's log: one line per event on stderr, never cut, each with a level. When stderr is the journal
// (systemd sets $JOURNAL_STREAM to stderr's "device:inode") every line starts with its syslog priority
// ("<4>keel: ..."), which journald takes as the entry's priority and strips; elsewhere lines read
// "keel: ...", and warnings and errors say so ("keel: warning: ...", "keel: error: ...") unless the
// text already starts with that word. Lines below the level set (--log-level) are dropped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace keel::logging {

enum class Level { error = 3, warning = 4, notice = 5, info = 6, debug = 7 };

std::optional<Level> parse_level(std::string_view s);  // "error", "warning", "notice", "info", "debug"
// The lowest level written (default info), and whether stderr is the journal (from the environment).
void setup(Level min);
// The line as written ("<6>keel: ...\n" to the journal).
std::string format(Level l, std::string_view text, bool journal);
// Writes it in one write(2) (threads' lines never interleave), unless below the level.
void line(Level l, std::string_view text);

// A line that comes back every tick (a write the kernel refuses each time) is said the first time, then
// again after 2, 4, 8, ... ticks (at most every kMaxEvery) with how often it came meanwhile; one that
// stops coming is forgotten, and said at once when it comes back. At most kMaxLines are remembered.
class Repeats {
 public:
  static constexpr uint64_t kMaxEvery = 1024;
  static constexpr size_t kMaxLines = 4096;
  // Of this tick's lines, those to say now (a repeat with " (N times in the last K ticks)" appended).
  std::vector<std::string> filter(uint64_t tick, const std::vector<std::string>& lines);

 private:
  struct Seen {
    uint64_t next = 0, every = 1, since = 0, times = 0, last = 0;
  };
  std::unordered_map<std::string, Seen> seen_;
};

}  // namespace keel::logging
