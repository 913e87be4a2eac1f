// libbpf prints through one global callback. keel keeps its recent lines, so a failed load can
// say why in its Error instead of spraying warnings on stderr (internal to bpf/).
#pragma once

#include <string>

namespace keel::bpf {

// Installs the callback (once) and forgets earlier lines: call before open/load.
void install_log();
// The last line libbpf printed since install_log(), e.g. the verifier's complaint.
std::string last_log_line();

}  // namespace keel::bpf
