// keel's JSON, for --json outputs and recorded traces: nlohmann::ordered_json (keys in the order they
// are written). Cgroup and container names are whatever bytes their makers chose, so every string is
// made valid UTF-8 before it is written: an invalid byte becomes the text \xNN (a backslash, 'x' and
// two hex digits), never raw bytes in the output.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace keel {

using Json = nlohmann::ordered_json;

// `s` with each byte that is not part of valid UTF-8 written as \xNN.
std::string utf8_safe(std::string_view s);
// `j` as text (one line, or indented by `indent`), every string and key through utf8_safe; numbers
// round-trip exactly, and a number that is not finite is null.
std::string json_text(const Json& j, int indent = -1);

}  // namespace keel
