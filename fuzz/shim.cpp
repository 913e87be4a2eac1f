// Coverage for libFuzzer from g++: clang 14 cannot compile keel (libstdc++ 12's std::expected), and
// g++ 12 instruments only with -fsanitize-coverage=trace-pc (a call at every basic block) and
// trace-cmp, while clang 14's libFuzzer takes coverage as inline 8-bit counters (it refuses trace-pc).
// This shim turns each trace-pc call into a counter bump, the counter picked by the caller's address,
// and registers the counters with libFuzzer at start. The build links a copy of libclang_rt.fuzzer
// whose own __sanitizer_cov_trace_pc (an error message) is made weak, so this one is used.
#include <cstddef>
#include <cstdint>

extern "C" void __sanitizer_cov_8bit_counters_init(uint8_t* start, uint8_t* stop);

namespace {
constexpr size_t kCounters = size_t{1} << 18;  // collisions between blocks only blur coverage a little
uint8_t counters[kCounters];
}  // namespace

__attribute__((constructor)) static void keel_fuzz_counters() {
  __sanitizer_cov_8bit_counters_init(counters, counters + kCounters);
}

extern "C" __attribute__((no_sanitize_coverage)) void __sanitizer_cov_trace_pc() {
  const auto pc = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  uint8_t& c = counters[(pc ^ (pc >> 17)) & (kCounters - 1)];
  c = static_cast<uint8_t>(c + 1);
}

// g++ traces floating-point comparisons too; libFuzzer has no hooks for them.
extern "C" __attribute__((no_sanitize_coverage)) void __sanitizer_cov_trace_cmpf(float, float) {}
extern "C" __attribute__((no_sanitize_coverage)) void __sanitizer_cov_trace_cmpd(double, double) {}
