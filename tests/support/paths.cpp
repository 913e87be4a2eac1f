// Where the source and build trees are: the one file of the tests compiled with their paths (a
// compiler cache keyed on the command line then misses this file alone in another checkout).
#include "tests/support/tmp_tree.h"

namespace keel::testing {

std::filesystem::path binary_dir() { return KEEL_BINARY_DIR; }
std::filesystem::path source_dir() { return KEEL_SOURCE_DIR; }

}  // namespace keel::testing
