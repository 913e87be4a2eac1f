// Build-time generator: keel(8) and the bash completion from the usage table (cli/usage.cpp), so that
// `keel help`, `--help`, the man page and completion never disagree.
// Usage: keel_gen_docs man VERSION | keel_gen_docs bash
#include <cstdio>
#include <string_view>

#include "cli/usage.h"

int main(int argc, char** argv) {
  const std::string_view what = argc > 1 ? argv[1] : "";
  if (what == "man" && argc == 3) {
    std::fputs(keel::cli::man_page(argv[2]).c_str(), stdout);
    return 0;
  }
  if (what == "bash" && argc == 2) {
    std::fputs(keel::cli::bash_completion().c_str(), stdout);
    return 0;
  }
  std::fputs("usage: keel_gen_docs man VERSION | keel_gen_docs bash\n", stderr);
  return 2;
}
