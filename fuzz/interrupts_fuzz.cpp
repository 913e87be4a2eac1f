// /proc/interrupts (actuators/irq.h parse_interrupts): what parses must print back in the kernel's
// layout (show_interrupts: the CPU header, then "ID: counts chip hwirq  handler, handler" for a
// numbered IRQ and "ID: counts  description" for the architecture's lines) to text that parses to
// the same table; a numbered line has a count per CPU and a non-negative number, handler names are
// trimmed and never hold the ", " that separates them; match_irqs picks only numbered IRQs, each once.
#include <algorithm>
#include <string>

#include "actuators/irq.h"
#include "fuzz/check.h"

namespace {

using namespace keel;
using namespace keel::act;

bool hwirq_like(std::string_view name) {
  std::string_view first = name.substr(0, name.find_first_of(" \t"));
  std::string_view number = first.substr(0, first.find('-'));
  return first == "Level" || first == "Edge" || first.starts_with('-') ||
         (!number.empty() && number.find_first_not_of("0123456789") == std::string_view::npos);
}

std::string print(const Interrupts& t) {
  std::string out = "     ";
  for (unsigned c : t.cpus) out += "      CPU" + std::to_string(c);
  out += "\n";
  for (const IrqLine& l : t.lines) {
    out += " " + l.id + ":";
    for (uint64_t c : l.counts) out += " " + std::to_string(c);
    if (l.irq >= 0) {
      if (!l.chip.empty()) out += "  " + l.chip;
      if (!l.hwirq.empty()) out += " " + l.hwirq;
      // A first handler whose name starts like a hardware IRQ ("0 0 x", "Edge y", "-z") follows an
      // empty one, as the kernel prints a handler without a name: otherwise it would read as the hwirq.
      if (!l.devices.empty() && hwirq_like(l.devices[0])) out += "   ,";
      for (size_t i = 0; i < l.devices.size(); ++i) out += (i ? ", " : "   ") + l.devices[i];
    } else if (!l.description.empty()) {
      out += "   " + l.description;
    }
    out += "\n";
  }
  return out;
}

bool same(const IrqLine& a, const IrqLine& b) {
  return a.id == b.id && a.irq == b.irq && a.counts == b.counts && a.chip == b.chip && a.hwirq == b.hwirq &&
         a.devices == b.devices && a.description == b.description;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto t = parse_interrupts(keel::fuzz::as_text(data, size));
  if (!t) {
    FUZZ_CHECK(!t.error().what.empty());
    return 0;
  }
  FUZZ_CHECK(!t->cpus.empty());
  for (const IrqLine& l : t->lines) {
    FUZZ_CHECK(!l.id.empty() && l.id.find(' ') == std::string::npos);
    FUZZ_CHECK(l.counts.size() <= t->cpus.size());
    if (l.irq >= 0) {
      FUZZ_CHECK(l.counts.size() == t->cpus.size() &&
                 std::to_string(l.irq) == l.id.substr(l.id.find_first_not_of('0') == std::string::npos
                                                          ? l.id.size() - 1
                                                          : l.id.find_first_not_of('0')));
      FUZZ_CHECK(l.description.empty());
    } else {
      FUZZ_CHECK(l.chip.empty() && l.hwirq.empty() && l.devices.empty());
    }
    for (const auto& d : l.devices) {
      FUZZ_CHECK(!d.empty() && d.find(", ") == std::string::npos);
      FUZZ_CHECK(d.front() != ' ' && d.back() != ' ');
    }
  }
  // The kernel separates fields with spaces only: a '\r' (a token of its own, yet trimmed off a
  // description's or a handler's ends) has no kernel layout to come back from.
  const std::string_view text = keel::fuzz::as_text(data, size);
  if (text.find('\r') == std::string_view::npos) {
    auto again = parse_interrupts(print(*t));
    FUZZ_CHECK(again && again->cpus == t->cpus && again->lines.size() == t->lines.size());
    for (size_t i = 0; i < t->lines.size(); ++i) FUZZ_CHECK(same(again->lines[i], t->lines[i]));
  }
  // Every handler's own name picks its IRQ (a name is also a glob of itself only without
  // metacharacters), and nothing else than numbered IRQs is ever picked.
  auto all = match_irqs(*t, {"*"});
  FUZZ_CHECK(std::is_sorted(all.begin(), all.end()) &&
             std::adjacent_find(all.begin(), all.end()) == all.end());
  for (const IrqLine& l : t->lines)
    if (l.irq >= 0 && !l.devices.empty())
      FUZZ_CHECK(std::binary_search(all.begin(), all.end(), static_cast<unsigned>(l.irq)));
  for (unsigned irq : all)
    FUZZ_CHECK(
        std::ranges::any_of(t->lines, [&](const IrqLine& l) { return l.irq == static_cast<int>(irq); }));
  return 0;
}
