// keel's log: one line per event on stderr, never cut, each with a level. When stderr is the journal
// (systemd sets $JOURNAL_STREAM to stderr's "device:inode") every line starts with its syslog priority
// ("<4>keel: ..."), which journald takes as the entry's priority and strips; elsewhere lines read
// "keel: ...", and warnings and errors say so ("keel: warning: ...", "keel: error: ...") unless the
// text already starts with that word. Lines below the level set (--log-level) are dropped.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace keel::logging {

enum class Level { error = 3, warning = 4, notice = 5, info = 6, debug = 7 };

std::optional<Level> parse_level(std::string_view s);  // "error", "warning", "notice", "info", "debug"
// The lowest level written (default info), and whether stderr is the journal (from the environment).
void setup(Level min);
// The line as written ("<6>keel: ...\n" to the journal).
std::string format(Level l, std::string_view text, bool journal);
// Writes it in one write(2) (threads' lines never interleave), unless below the level.
void line(Level l, std::string_view text);

}  // namespace keel::logging
