// The journal's text: whatever parses holds only knobs keel writes (check_entry), and what parses
// formats back to text that parses to the same entries and values keel wrote (the rewrite a compaction
// makes).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "actuators/journal.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace keel::act;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = parse_journal(text);
  if (!parsed) return 0;
  if (parsed->boot_id.empty()) __builtin_trap();  // a journal without a boot id is never loaded
  if (parsed->good > text.size()) __builtin_trap();
  for (const auto& e : parsed->entries)
    if (!check_entry(e)) __builtin_trap();
  for (const auto& [k, w] : parsed->wrote)  // values keel wrote: only of entries
    if (std::none_of(parsed->entries.begin(), parsed->entries.end(),
                     [&](const JournalEntry& e) { return e.path == k; }))
      __builtin_trap();
  auto again = parse_journal(format_journal(parsed->boot_id, parsed->entries, parsed->wrote));
  if (!again || again->entries.size() != parsed->entries.size()) __builtin_trap();
  for (size_t i = 0; i < again->entries.size(); ++i) {
    const auto &a = again->entries[i], &b = parsed->entries[i];
    if (a.kind != b.kind || !(a.path == b.path) || a.original != b.original || a.value != b.value ||
        a.dir_inode != b.dir_inode)
      __builtin_trap();
  }
  if (again->wrote.size() != parsed->wrote.size()) __builtin_trap();
  for (const auto& [k, w] : parsed->wrote) {
    auto it = again->wrote.find(k);
    if (it == again->wrote.end() || it->second.last != w.last || it->second.before != w.before)
      __builtin_trap();
  }
  return 0;
}
