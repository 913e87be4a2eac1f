// What the harnesses share: a property check that names itself when it fails (libFuzzer keeps the
// input as a crash), and a reader that splits one input into the parts a harness needs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

// Aborts with the property's text and place: a broken invariant is a finding like a crash.
#define FUZZ_CHECK(cond)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      std::fprintf(stderr, "keel fuzz: property failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                                \
    }                                                                                              \
  } while (0)

namespace keel::fuzz {

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// The input up to the first `sep` and the rest after it (all of it and "" when there is none).
struct Split {
  std::string_view first, rest;
};
inline Split split_at(std::string_view text, char sep) {
  size_t at = text.find(sep);
  if (at == std::string_view::npos) return {text, {}};
  return {text.substr(0, at), text.substr(at + 1)};
}

}  // namespace keel::fuzz
