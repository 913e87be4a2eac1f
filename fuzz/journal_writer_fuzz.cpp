// The journal together with the writer's side: entries made from arbitrary bytes (a root, a kind, a
// value kind, a path, an inode, a value), each accepted by check_entry exactly when keel would journal
// it. Whatever is accepted must load back (as a whole journal and as appended records, with records
// dropping some of them) to the same entries, and name a file under its root: restore writes where it
// was journaled, never elsewhere.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "actuators/journal.h"

namespace {

using namespace keel;
using namespace keel::act;

struct Bytes {
  const uint8_t* p;
  size_t n;
  uint8_t byte() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
  std::string str() {  // a length byte, then that many bytes
    size_t len = byte();
    len = std::min(len, n);
    std::string s(reinterpret_cast<const char*>(p), len);
    p += len, n -= len;
    return s;
  }
};

bool same(const JournalEntry& a, const JournalEntry& b) {
  return a.kind == b.kind && a.path == b.path && a.original == b.original && a.value == b.value &&
         a.dir_inode == b.dir_inode;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Bytes in{data, size};
  const Root roots[] = {Root::cgroup, Root::resctrl, Root::proc, Root::sys, Root::debugfs};
  const EntryKind kinds[] = {EntryKind::file, EntryKind::created_dir, EntryKind::sched_feature,
                             EntryKind::unit_property};
  std::vector<JournalEntry> accepted;
  const std::string boot = "boot-" + in.str();
  std::string log;  // the same entries as appended records, some dropped again
  std::vector<JournalEntry> live;
  while (in.n > 0 && accepted.size() < 64) {
    JournalEntry e;
    e.path.root = roots[in.byte() % 5];
    e.kind = kinds[in.byte() % 4];
    e.value = static_cast<ValueKind>(in.byte() % (static_cast<unsigned>(ValueKind::sched_feature) + 1));
    e.path.rel = in.str();
    e.dir_inode = in.byte();
    e.original = in.str();
    if (!check_entry(e)) continue;
    // Accepted: a plain relative path of plain names, under its root wherever the root is.
    const std::filesystem::path root = "/fuzz-root";
    const auto abs = (root / e.path.rel).lexically_normal();
    auto rel = abs.lexically_relative(root);
    if (rel.empty() || *rel.begin() == ".." || rel != e.path.rel) __builtin_trap();
    bool dup = false;
    for (const auto& a : accepted) dup = dup || a.path == e.path;
    if (dup) continue;  // the journal keeps one entry per knob
    accepted.push_back(e);
    log += journal_record(e, true);
    live.push_back(e);
    if (in.byte() % 4 == 0) {  // and dropped again
      log += journal_record(e, false);
      live.pop_back();
    }
  }
  auto whole = parse_journal(format_journal(boot, accepted));
  if (!whole || whole->entries.size() != accepted.size()) __builtin_trap();
  for (size_t i = 0; i < accepted.size(); ++i)
    if (!same(whole->entries[i], accepted[i])) __builtin_trap();
  auto appended = parse_journal(format_journal(boot, {}) + log);
  if (!appended || appended->entries.size() != live.size()) __builtin_trap();
  for (size_t i = 0; i < live.size(); ++i)
    if (!same(appended->entries[i], live[i])) __builtin_trap();
  return 0;
}
