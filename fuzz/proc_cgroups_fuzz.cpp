// /proc/cgroups (host/cgroup.h parse_proc_cgroups): whatever parses prints back in the kernel's
// layout (a header, then "subsys\thierarchy\tnum_cgroups\tenabled") to text that parses to the same
// entries; no entry is the header.
#include <string>

#include "fuzz/check.h"
#include "host/cgroup.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace keel;
  auto entries = parse_proc_cgroups(fuzz::as_text(data, size));
  if (!entries) {
    FUZZ_CHECK(entries.error().what.starts_with("line "));
    return 0;
  }
  std::string text = "#subsys_name\thierarchy\tnum_cgroups\tenabled\n";
  for (const auto& e : *entries) {
    FUZZ_CHECK(!e.subsys.empty() && !e.subsys.starts_with('#'));
    FUZZ_CHECK(e.subsys.find_first_of(" \t\n") == std::string::npos);
    text += e.subsys + "\t" + std::to_string(e.hierarchy) + "\t" + std::to_string(e.num_cgroups) + "\t" +
            (e.enabled ? "1" : "0") + "\n";
  }
  auto again = parse_proc_cgroups(text);
  FUZZ_CHECK(again && again->size() == entries->size());
  for (size_t i = 0; i < entries->size(); ++i) {
    const auto &a = (*again)[i], &b = (*entries)[i];
    FUZZ_CHECK(a.subsys == b.subsys && a.hierarchy == b.hierarchy && a.num_cgroups == b.num_cgroups &&
               a.enabled == b.enabled);
  }
  return 0;
}
