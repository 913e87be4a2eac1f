#include "host/log.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace keel::logging {

namespace {

std::atomic<int> g_min{static_cast<int>(Level::info)};
std::atomic<bool> g_journal{false};

// $JOURNAL_STREAM is "DEVICE:INODE" of the stream systemd connected; stderr is the journal only when
// it is still that stream (a redirect in between makes it a file again).
bool stderr_is_journal() {
  const char* v = std::getenv("JOURNAL_STREAM");
  if (v == nullptr) return false;
  unsigned long long dev = 0, ino = 0;
  char tail = 0;
  if (std::sscanf(v, "%llu:%llu%c", &dev, &ino, &tail) != 2) return false;
  struct stat st {};
  if (::fstat(STDERR_FILENO, &st) != 0) return false;
  return static_cast<unsigned long long>(st.st_dev) == dev &&
         static_cast<unsigned long long>(st.st_ino) == ino;
}

}  // namespace

std::optional<Level> parse_level(std::string_view s) {
  if (s == "error") return Level::error;
  if (s == "warning") return Level::warning;
  if (s == "notice") return Level::notice;
  if (s == "info") return Level::info;
  if (s == "debug") return Level::debug;
  return std::nullopt;
}

void setup(Level min) {
  g_min.store(static_cast<int>(min));
  g_journal.store(stderr_is_journal());
}

std::string format(Level l, std::string_view text, bool journal) {
  std::string out;
  out.reserve(text.size() + 24);
  if (journal) out += "<" + std::to_string(static_cast<int>(l)) + ">";
  out += "keel: ";
  const char* word = l == Level::error ? "error: " : l == Level::warning ? "warning: " : nullptr;
  if (!journal && word != nullptr && !text.starts_with(word)) out += word;
  // One event, one line; and no control character a tenant's cgroup or container name could carry
  // reaches a terminal or the journal as itself (ESC sequences, a carriage return that hides what came
  // before it): each is written \xNN. A newline is a space.
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += ' ';
    } else if (u < 0x20 || u == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  out += '\n';
  return out;
}

std::vector<std::string> Repeats::filter(uint64_t tick, const std::vector<std::string>& lines) {
  std::vector<std::string> out;
  for (const std::string& l : lines) {
    auto [it, fresh] = seen_.try_emplace(l);
    Seen& s = it->second;
    if (fresh || s.last + 1 < tick) {  // new, or back after a tick without it
      s = Seen{tick + 2, 2, tick, 0, tick};
      out.push_back(l);
      continue;
    }
    if (s.last == tick) continue;  // twice in one tick: once
    s.last = tick;
    ++s.times;
    if (tick < s.next) continue;
    out.push_back(l + " (" + std::to_string(s.times) + " times in the last " +
                  std::to_string(tick - s.since) + " ticks)");
    s.every = std::min(kMaxEvery, s.every * 2);
    s.since = tick;
    s.times = 0;
    s.next = tick + s.every;
  }
  std::erase_if(seen_, [&](const auto& e) { return e.second.last + 1 < tick; });
  if (seen_.size() > kMaxLines) seen_.clear();
  return out;
}

void line(Level l, std::string_view text) {
  if (static_cast<int>(l) > g_min.load()) return;
  const std::string s = format(l, text, g_journal.load());
  for (size_t at = 0; at < s.size();) {
    ssize_t n = ::write(STDERR_FILENO, s.data() + at, s.size() - at);
    if (n <= 0) return;  // nowhere to log: keel goes on
    at += static_cast<size_t>(n);
  }
}

}  // namespace keel::logging
